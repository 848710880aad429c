"""What one measurement found: its raw samples and their statistics, why sampling stopped, the
probe's rates beside them and the machine's conditions, as frozen values.

:mod:`pytest_roofline.timing` produces a :class:`Measurement`; the verdict
(:mod:`pytest_roofline.model.verdict`) judges one, and needs nothing else from the timing layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from .conditions import ClockLog, Contention
from .policy import Policy
from .stats import Stat, Stats
from .units import seconds

#: how a cold measurement kept the cache cold (``None``: a warm measurement)
ColdMethod = Literal["rotation", "flush", "past-cache"]


class StopReason(str, Enum):
    """Which rule ended sampling."""

    PRECISION = "precision"
    TIME = "time"
    MAX_SAMPLES = "max_samples"


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """A probe's rates over one measurement (work per second, in the order taken)."""

    name: str
    resource: str
    rates: tuple[float, ...]
    #: the rates the statistics use (those whose window was not preempted, while enough remain)
    stats: Stats
    #: wall time the probe cost, inside the measurement's budget
    wall_s: float

    def value(self, stat: Stat) -> float:
        """The rate matching the kernel's statistic: the best rate goes with the kernel's best time."""
        return self.stats.max if stat == "min" else self.stats.value(stat)


@dataclass(frozen=True, slots=True)
class Measurement:
    """The result of :func:`pytest_roofline.timing.engine.measure`, raw samples included."""

    #: per-call seconds of every sample, in the order taken (each window divided by ``calls_per_sample``)
    samples_s: tuple[float, ...]
    #: back-to-back calls timed in one window (k)
    calls_per_sample: int
    #: statistics of the trusted samples: those after the ``transient`` ones, less the ``slowed``
    #: and the preempted ones while enough others remain
    stats: Stats
    #: the statistic the verdict uses, and its value in seconds per call
    stat: Stat
    time_s: float
    #: wall time the whole measurement cost: warm-up, flushes, probes and bookkeeping included
    wall_s: float
    warmup_calls: int
    #: wall time of the warm-up phase
    warmup_s: float
    backend: str
    device: str
    #: how every timed call found its data out of the cache (the cache plan's method); None: warm
    cold_method: ColdMethod | None
    stop_reason: StopReason
    policy: Policy
    #: how the cache was kept, in words, for the report (``cold by rotation over 8 argument sets``)
    cache_note: str = ""
    #: why the plan chose it (``not rotated: a closure``, ``no flush needed: the op moves 3.0x the
    #: last-level cache``)
    cache_reason: str = ""
    #: the reference probe timed beside the kernel, when one was given
    probe: ProbeRun | None = None
    #: what the OS said about contention over the sampling phase, when it was asked
    contention: Contention | None = None
    #: samples left out of the statistics because their window was preempted
    excluded: int = 0
    #: leading samples left out of the statistics because the kernel ran slower over them than
    #: over the samples after (:mod:`.transient`): the machine had not settled on it yet
    transient: int = 0
    #: the samples the statistics use still ran slower first than last, beyond doubt, when sampling
    #: stopped: the kernel had not settled, and its time is an upper bound
    still_falling: bool = False
    #: the kernel's parallelism while sampled: process CPU time over the timing thread's (1 for a
    #: single-threaded kernel), the least of its rounds, when the backend can tell (``last_parallelism``)
    parallelism: float | None = None
    #: the share of the sampled windows' wall time the timing thread ran (median of the rounds)
    cpu_share: float | None = None
    #: the threads the kernel ran on (the middle round's count, 1 where a round ran it alone) and the
    #: share of their time they waited for a core, when the backend can tell (``last_thread_wait``)
    threads: int | None = None
    wait_share: float | None = None
    #: what a GPU's clocks did while it was measured (:mod:`.clocks`), when the backend watched them
    clocks: ClockLog | None = None
    #: whether the clocks were asked about sample by sample (:mod:`.throttle`); then ``slowed`` samples
    #: ran slowed and were left out, ``slowed_kept`` did and were kept (too few others left)
    clocks_per_sample: bool = False
    slowed: int = 0
    slowed_kept: int = 0

    @property
    def ran_slowed(self) -> bool:
        """Whether samples the statistics use ran at slowed GPU clocks: per sample where the clocks
        were asked about so, else whenever the clock log shows a slowdown."""
        if self.clocks is None or not self.clocks.throttled:
            return False
        return self.slowed_kept > 0 if self.clocks_per_sample else True

    #: whether ``setup`` ran before every call (so one call per sample, never a batch)
    setup: bool = False
    #: argument sets the calls rotated through (0: not rotated)
    rotation_copies: int = 0
    #: why the time budget held fewer calls than the measurement wanted (fewer warm-up calls, fewer
    #: samples than ``policy.min_samples``), in words; "" where it did not
    budget_note: str = ""

    @property
    def flushed(self) -> bool:
        """Whether every timed call started from a flushed cache."""
        return self.cold_method == "flush"

    @property
    def cache(self) -> Literal["cold", "warm"]:
        """``"cold"`` when every timed call found its data out of the cache, ``"warm"`` otherwise."""
        return "warm" if self.cold_method is None else "cold"

    @property
    def low_confidence(self) -> bool:
        """Fewer samples than the policy's minimum: the time budget could not afford them."""
        return self.stats.n < self.policy.min_samples and self.stop_reason is StopReason.TIME

    def __str__(self) -> str:
        return (
            f"{seconds(self.time_s)} {self.stat} of {self.stats.n} samples"
            f" (±{self.stats.ci_rel:.2%} 95% CI of the median, {self.calls_per_sample} call(s)/sample,"
            f" {self.cache} cache; {self.backend}: {self.device}; stopped on {self.stop_reason.value})"
        )
