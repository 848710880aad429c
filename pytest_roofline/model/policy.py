"""How long and how carefully to measure: the :class:`Policy` a measurement runs under, checked on
construction, so a bad setting is an error before anything is timed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidValueError
from .stats import STATS, Stat


@dataclass(frozen=True, slots=True)
class Policy:
    """How long and how carefully to measure. Every field is checked on construction. How the cache is
    kept is not a setting here: :class:`~pytest_roofline.timing.cache.CachePlan` decides it."""

    #: warm-up runs until at least this much wall time (at most a quarter of ``max_time_s``) *and*
    #: ``warmup_calls`` calls have passed; a kernel too slow for the budget, one call
    warmup_s: float = 0.025
    warmup_calls: int = 2
    #: take at least this many samples when the time budget affords them (a slow kernel's fewer:
    #: docs/measurement.md, "The time budget")
    min_samples: int = 10
    #: hard cap on the number of samples
    max_samples: int = 10_000
    #: wall-time budget for one measurement, seconds (warm-up, rotation's untimed cycle, flushes and
    #: probes included); how far it may overrun: :mod:`pytest_roofline.timing.budget`
    max_time_s: float = 1.0
    #: stop once the 95% confidence half-width of the median is within this fraction of it
    target_rel_ci: float = 0.01
    #: and, for a kernel of 10 µs or more a call (``engine.MIN_TIME_FROM_S``), once the samples span
    #: at least this much wall time (nvbench's ``--min-time``; docs/methodology.md, "Why 60 ms of samples")
    min_time_s: float = 0.06
    #: with a probe, time it at least this often while sampling (seconds), and once before and after
    probe_interval_s: float = 0.1
    #: batch k calls per sample when one call is shorter than ``batch_factor`` x timer resolution
    batch_factor: float = 100.0
    #: the statistic a verdict uses
    stat: Stat = "median"

    def __post_init__(self) -> None:
        check_positive("warmup_s", self.warmup_s, allow_zero=True)
        check_count("warmup_calls", self.warmup_calls, minimum=1)
        check_count("min_samples", self.min_samples, minimum=1)
        check_count("max_samples", self.max_samples, minimum=1)
        if self.max_samples < self.min_samples:
            raise InvalidValueError(
                f"max_samples ({self.max_samples}) must be >= min_samples ({self.min_samples})"
            )
        check_positive("max_time_s", self.max_time_s)
        check_positive("target_rel_ci", self.target_rel_ci)
        check_positive("min_time_s", self.min_time_s, allow_zero=True)
        check_positive("batch_factor", self.batch_factor)
        check_positive("probe_interval_s", self.probe_interval_s)
        if self.stat not in STATS:
            raise InvalidValueError(f"stat must be one of {', '.join(STATS)}; got {self.stat!r}")


def check_positive(name: str, value: object, *, allow_zero: bool = False) -> None:
    """A ValueError naming ``name`` and ``value`` unless it is a finite number > 0 (or >= 0)."""
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        want = "a non-negative number" if allow_zero else "a positive number"
        raise InvalidValueError(f"{name} must be {want}; got {value!r}")


def check_count(name: str, value: object, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
