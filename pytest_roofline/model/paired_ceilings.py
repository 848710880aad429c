"""Ceilings measured beside the kernel: a calibrated figure F scaled by a probe timed in the same window,
``F x P_now / P_calibration`` (P: the probe's rate). Pure arithmetic: the probes are built in
:mod:`pytest_roofline.timing.probes` and run beside the kernel by :mod:`pytest_roofline.timing.engine`.
Why: docs/verdicts.md ("Budgets and verdicts").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidValueError
from .core import Estimate, Precision

#: the resources a probe can stand for
BANDWIDTH = "bandwidth"
RESOURCES = (BANDWIDTH, "fp64", "fp32")


@dataclass(frozen=True, slots=True)
class ProbeReference:
    """What a probe's rate meant when the calibration measured its figure beside it."""

    resource: str
    #: how to rebuild the probe: ``copy`` with ``size`` bytes per array, or ``matmul`` with ``size`` = n
    kind: str
    size: int
    #: the calibrated figure (bytes/s or FLOP/s) and the probe's rate measured beside it
    figure: float
    rate: float
    #: the best rate this machine has shown for the probe, and when (ISO date)
    best_rate: float
    best_seen: str = ""

    def __post_init__(self) -> None:
        if self.resource not in RESOURCES:
            raise InvalidValueError(
                f"probe resource must be one of {', '.join(RESOURCES)}; got {self.resource!r}"
            )
        for name in ("figure", "rate", "best_rate"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InvalidValueError(
                    f"probe {self.resource} {name} must be a positive number; got {value!r}"
                )

    @property
    def name(self) -> str:
        if self.kind == "copy":
            return f"copy 2×{self.size / 2**20:.0f} MiB"
        return f"matmul {self.resource} n={self.size}"


@dataclass(frozen=True, slots=True)
class PairedCeiling:
    """The ceiling in force while one kernel was measured."""

    resource: str
    #: the calibrated figure this ceiling scales
    figure: float
    #: probe rate now / probe rate at calibration: 0.5 means the machine ran at half its calibrated speed
    speed: float
    #: the probe's relative noise (half-width of its 95% interval, relative)
    ci_rel: float
    #: probe rate now / the best probe rate this machine has shown
    share_of_best: float
    probe: str
    probes: int

    @property
    def value(self) -> float:
        """The ceiling of this window: bytes/s or FLOP/s."""
        return self.figure * self.speed


def resource_of(estimate: Estimate) -> str:
    """The resource that bounds ``estimate``: bandwidth, or the compute of its peak's precision (fp32's
    for every narrower format: docs/measurement.md ("Calibration"))."""
    if estimate.bound == "memory":
        return BANDWIDTH
    return "fp64" if estimate.peak_precision is Precision.FP64 else "fp32"


def pair(reference: ProbeReference, rate_now: float, ci_rel: float, probes: int) -> PairedCeiling:
    """The ceiling of a window whose probe ran at ``rate_now`` (the kernel's statistic of its rates)."""
    if not (math.isfinite(rate_now) and rate_now > 0):
        raise InvalidValueError(f"a probe rate must be a positive number; got {rate_now!r}")
    return PairedCeiling(
        resource=reference.resource,
        figure=reference.figure,
        speed=rate_now / reference.rate,
        ci_rel=ci_rel,
        share_of_best=rate_now / max(reference.best_rate, rate_now),
        probe=reference.name,
        probes=probes,
    )


def paired_floor_s(estimate: Estimate, ceiling: PairedCeiling) -> float:
    """The floor of ``estimate`` with its bounding resource at the paired ceiling: the larger of the
    scaled bound and the other, unprobed term (which may bind near the ridge point)."""
    compute_s = estimate.compute_s or 0.0  # an unknown compute side bounds nothing
    if ceiling.resource == BANDWIDTH:
        return max(estimate.memory_s / ceiling.speed, compute_s)
    return max(compute_s / ceiling.speed, estimate.memory_s)
