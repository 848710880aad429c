"""The verdict: how close a measured time came to the floor, and the message a kernel engineer reads.

attained = floor_s / time_s. A result below its budget is a miss; a result above 1 by more than the
figures' own uncertainty is *faster than light*: a bug in the op's counts, the peaks, or the cache
state, never a pass. No pytest here: the plugin decides what a verdict does to a test.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from . import units
from .model import Estimate, Source
from .stats import Stats
from .timing.engine import Measurement

#: attained fractions above these fail as faster than light (measured ceilings carry noise)
FTL_LIMIT_DATASHEET = 1.05
FTL_LIMIT_MEASURED = 1.10


class Verdict(str, enum.Enum):
    PASS = "pass"
    MISS = "MISS"
    FASTER_THAN_LIGHT = "faster-than-light"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


def check_fraction(value: object, what: str = "min_fraction") -> float:
    """A budget in (0, 1], or a ValueError naming ``what`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{what} must be a number in (0, 1]; got {value!r}")
    return float(value)


def ftl_limit(estimate: Estimate) -> float:
    """The faster-than-light limit for the figure that bounds this estimate."""
    source = estimate.peak_source if estimate.bound == "compute" else estimate.bandwidth_source
    return FTL_LIMIT_MEASURED if source is Source.MEASURED else FTL_LIMIT_DATASHEET


@dataclass(frozen=True, slots=True)
class Result:
    """One judged measurement: the estimate, the timing, the budget and the verdict."""

    name: str
    estimate: Estimate
    measurement: Measurement
    min_fraction: float
    attained: float
    verdict: Verdict
    #: whether a miss was measured a second time (the better of the two is judged)
    remeasured: bool = False
    nodeid: str = ""

    # The attributes users reach for first, named as the docs name them.
    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def floor_s(self) -> float:
        return self.estimate.floor_s

    @property
    def time_s(self) -> float:
        return self.measurement.time_s

    @property
    def bound(self) -> str:
        return self.estimate.bound

    @property
    def intensity(self) -> float:
        return self.estimate.intensity

    @property
    def flops(self) -> float:
        return self.estimate.flops

    @property
    def bytes(self) -> float:
        return self.estimate.bytes

    @property
    def stats(self) -> Stats:
        return self.measurement.stats

    @property
    def achieved_flop_rate(self) -> float:
        return self.estimate.flops / self.time_s

    @property
    def achieved_bandwidth(self) -> float:
        return self.estimate.bytes / self.time_s

    def message(self) -> str:
        return failure_message(self)


def judge(estimate: Estimate, measurement: Measurement, min_fraction: float) -> tuple[float, Verdict]:
    """attained and the verdict for one measurement (no re-measuring here: see :func:`decide`)."""
    attained = estimate.floor_s / measurement.time_s if measurement.time_s > 0 else float("inf")
    if attained > ftl_limit(estimate):
        return attained, Verdict.FASTER_THAN_LIGHT
    return attained, (Verdict.PASS if attained >= min_fraction else Verdict.MISS)


def decide(
    estimate: Estimate,
    measure_once: Callable[[], Measurement],
    min_fraction: float,
    *,
    name: str = "",
    nodeid: str = "",
) -> Result:
    """Measure, and measure once more before calling a miss; judge by the better of the two.

    ``measure_once()`` returns a :class:`Measurement`. A noisy machine must not produce a flaky
    failure, so only a miss is re-measured; a pass or a faster-than-light result stands.
    """
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    first = measure_once()
    attained, verdict = judge(estimate, first, min_fraction)
    measurement, remeasured = first, False
    if verdict is Verdict.MISS:
        second = measure_once()
        remeasured = True
        if second.time_s < first.time_s:
            measurement = second
            attained, verdict = judge(estimate, second, min_fraction)
    return Result(
        name=name,
        estimate=estimate,
        measurement=measurement,
        min_fraction=min_fraction,
        attained=attained,
        verdict=verdict,
        remeasured=remeasured,
        nodeid=nodeid,
    )


def _label(result: Result) -> str:
    """``gemm[M=4096 N=4096 K=4096 bf16]``, with the measurement's name when it has one."""
    return result.estimate.label + (f" ({result.name})" if result.name else "")


def budget_percent(fraction: float) -> str:
    """``70%``, ``12.5%``: a budget as its author wrote it, no spurious decimals."""
    return f"{fraction * 100:.3g}%"


def _wall(result: Result) -> str:
    """``compute-bound at 989 TFLOP/s bf16 tensor`` or ``memory-bound at 3.35 TB/s``."""
    est = result.estimate
    if est.bound == "compute":
        return f"compute-bound at {units.flop_rate(est.peak_flops)} {est.peak_precision} {est.unit}"
    return f"memory-bound at {units.byte_rate(est.bandwidth)}"


def _achieved(result: Result) -> str:
    """``121.6 TFLOP/s achieved``; for memory-bound kernels the bandwidth against the peak's."""
    est = result.estimate
    if est.bound == "compute":
        return f"{units.si(result.achieved_flop_rate, 'FLOP/s', 4)} achieved"
    share = result.achieved_bandwidth / est.bandwidth
    return (
        f"{units.si(result.achieved_bandwidth, 'B/s', 4)} achieved of {units.byte_rate(est.bandwidth)} "
        f"peak bandwidth ({units.percent(share)})"
    )


def _measured(result: Result) -> str:
    """``measured 1130 µs (median of 57, ±0.4%)``, saying so when it is the better of two or warm."""
    m = result.measurement
    notes = [f"{m.stat} of {m.stats.n}", f"±{m.stats.ci_rel * 100:.1f}%"]
    if result.remeasured:
        notes.append("best of 2 measurements")
    if not m.flushed:
        notes.append("warm cache")
    return f"measured {units.seconds(m.time_s)} ({', '.join(notes)})"


def failure_message(result: Result) -> str:
    """Everything a kernel engineer needs, in one paragraph.

    ``gemm[M=4096 N=4096 K=4096 bf16] attained 12.3% of speed of light (budget 70%) on NVIDIA H100
    80GB HBM3: floor 139.0 µs, compute-bound at 989 TFLOP/s bf16 tensor; measured 1130 µs (median
    of 57, ±0.4%), 121.6 TFLOP/s achieved; needs 5.7× faster.``
    """
    est = result.estimate
    device = est.device.name
    if result.verdict is Verdict.FASTER_THAN_LIGHT:
        limit = ftl_limit(est)
        sources = "measured ceilings" if limit == FTL_LIMIT_MEASURED else "datasheet peaks"
        flushed = result.measurement.flushed
        cache = "caches were flushed" if flushed else "caches were NOT flushed: a warm cache"
        return (
            f"{_label(result)} ran faster than light: attained {units.percent(result.attained)} of speed "
            f"of light (limit {units.percent(limit)} against {sources}) on {device}: "
            f"floor {units.seconds(est.floor_s)}, {_wall(result)}; {_measured(result)}, {_achieved(result)}. "
            f"Something in the floor is wrong: the op's byte or FLOP count (does the kernel do the work "
            f"the marker describes?), the device peaks, or a warm cache ({cache})."
        )
    needs = result.min_fraction / result.attained if result.attained > 0 else float("inf")
    return (
        f"{_label(result)} attained {units.percent(result.attained)} of speed of light "
        f"(budget {budget_percent(result.min_fraction)}) on {device}: floor {units.seconds(est.floor_s)}, "
        f"{_wall(result)}; {_measured(result)}, {_achieved(result)}; needs {needs:.1f}× faster."
    )
