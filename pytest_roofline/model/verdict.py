"""The verdict: how close a measured time came to the floor (attained = floor / time, at the ceiling
measured beside the kernel where a probe ran: :mod:`.paired_ceilings`), and the message a kernel
engineer reads. The outcomes and the rules that give them: docs/verdicts.md. No pytest here: the
plugin decides what a verdict does to a test.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidValueError
from . import units
from .core import Estimate, Figure, Source
from .held_clock import HeldClock
from .measurement import Measurement
from .paired_ceilings import BANDWIDTH, PairedCeiling, ProbeReference, pair, paired_floor_s
from .peaks import CpuPeak
from .stats import MIN_PRECISION_SAMPLES, Stats
from .verdict_rules import RULES, Facts

if TYPE_CHECKING:
    from .inference import Inference
    from .pairing import Pairing, Unpaired


#: attained fractions above these fail as faster than light (docs/verdicts.md); a figure quoted below
#: the device's maximum SM clock raises its limit by the clocks' ratio (:func:`ftl_limit`)
FTL_LIMIT_DATASHEET = 1.05
FTL_LIMIT_MEASURED = 1.10
#: a kernel whose process used at least this many CPU seconds per second of its timing thread's
#: runs on several threads (BLAS); below, it is single-threaded
MULTITHREADED = 1.5
#: a multi-threaded compute-bound kernel whose threads waited for a core more than this share of
#: their time was slowed by another job in a way no probe follows (see :func:`_threads_waited`)
WAITED_SHARE = 0.15
#: the relative half-width of a kernel's time when its samples are too few for an interval of their
#: own (:data:`.stats.MIN_PRECISION_SAMPLES`): twice :data:`.run_noise.RUN_NOISE`
FEW_SAMPLES_CI = 0.16
#: what is left of the first measurement's budget once what came before it (rotation's copies) took
#: the rest: with it, the measurement takes its least, a warm-up call and a sample
MIN_FIRST_BUDGET_S = 1e-3


class Verdict(str, enum.Enum):
    PASS = "pass"
    MISS = "MISS"
    INCONCLUSIVE = "inconclusive"
    FASTER_THAN_LIGHT = "faster-than-light"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


def check_fraction(value: object, what: str = "min_fraction") -> float:
    """A budget in (0, 1], or a ValueError naming ``what`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        # a percentage written as one (70 for 70%) is the likeliest slip
        hint = ""
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 5 <= value <= 100:
            hint = f" (did you mean {value / 100:g}, {value:g}%?)"
        raise InvalidValueError(f"{what} must be a number in (0, 1]; got {value!r}{hint}")
    return float(value)


def ftl_limit(estimate: Estimate) -> float:
    """The faster-than-light limit for the figure that bounds this estimate: the limit for its source,
    times how far a kernel at the device's maximum SM clock can beat a figure quoted at a lower one
    (:attr:`~.core.Figure.at_max_clock`: an H200's bf16 tensor figure by 1980/1830)."""
    figure = estimate.bounding_figure
    return _source_limit(figure) * figure.clock_headroom


def _source_limit(figure: Figure) -> float:
    return FTL_LIMIT_MEASURED if figure.source is Source.MEASURED else FTL_LIMIT_DATASHEET


@dataclass(frozen=True, slots=True)
class Judgement:
    """attained, its noise and the verdict, with the ceiling and the reason behind them."""

    attained: float
    verdict: Verdict
    #: relative half-width of attained's 95% interval: kernel and probe noise combined
    ci_rel: float = 0.0
    #: the floor judged against: at the ceiling measured beside the kernel when there is one (0: the
    #: estimate's, at the calibrated ceilings)
    judged_floor_s: float = 0.0
    #: the ceiling measured beside the kernel, when a probe ran
    ceiling: PairedCeiling | None = None
    #: why the verdict is inconclusive or faster than light ("" otherwise)
    reason: str = ""
    #: the latency floor (an empty call's time) was above the roofline floor and was judged against
    latency_bound: bool = False
    #: the name of the rule that gave the verdict (:data:`RULES`, or ``lower-bound``: :func:`judge`)
    rule: str = ""


# Not slots=True: a frozen slots dataclass cannot refuse an assignment to one of its properties
# (``floor_s``, ...) with FrozenInstanceError
@dataclass(frozen=True, kw_only=True)
class Result(Judgement):
    """One judged measurement: the :class:`Judgement` of the measurement judged (attained, its noise,
    the verdict, the ceiling and the reason), with the estimate, the timing and the budget."""

    name: str
    estimate: Estimate
    measurement: Measurement
    min_fraction: float
    #: whether a miss was measured a second time (see :func:`result_of` for which is judged)
    remeasured: bool = False
    nodeid: str = ""
    #: measurements taken for this result, and the wall time all of them cost, with what came
    #: before the first (rotation's copies)
    measurements: int = 1
    wall_s: float = 0.0
    #: what an empty call costs on this timer (0: not known)
    latency_floor_s: float = 0.0
    #: what was inferred of a call that named no op (None: the op was given)
    inference: Inference | None = None
    #: the comparison with the base's version of this measurement (``--roofline-against``): its
    #: :class:`~.pairing.Pairing`, or why there is none (new, gone); None without a comparison
    vs_base: Pairing | Unpaired | None = None

    @property
    def attained_at_held_clock(self) -> float | None:
        """Attained at the clock the GPU held (:mod:`.held_clock`): above attained where the power cap
        slowed the clock its peak assumes; None where it is not known, and for a latency-bound
        kernel (its floor was timed at the clock it held)."""
        held = self.held_clock
        return None if held is None else held.attained(self.attained)

    @property
    def held_clock(self) -> HeldClock | None:
        """The clock the bounding figure assumes beside the one the GPU held; None where either is
        not known, and for a latency-bound kernel (its floor was timed at the clock it held)."""
        if self.latency_bound or not math.isfinite(self.attained):
            return None
        return HeldClock.of(self.estimate, self.measurement.clocks)

    @property
    def flops_unknown(self) -> bool:
        """Whether the floor is the memory floor alone, the FLOPs unknown: attained is a lower bound."""
        return self.inference is not None and not self.inference.flops_known

    # The attributes users reach for first, named as the docs name them.
    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def floor_s(self) -> float:
        """The floor judged against: at the ceiling measured beside the kernel, when there is one."""
        return self.judged_floor_s or self.estimate.floor_s

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


def judge(
    estimate: Estimate,
    measurement: Measurement,
    min_fraction: float,
    *,
    reference: ProbeReference | None = None,
    peak: CpuPeak | None = None,
    latency_floor_s: float = 0.0,
    inference: Inference | None = None,
) -> Judgement:
    """Judge one measurement (no re-measuring here: see :func:`second_look`).

    ``reference``: the calibration's probe for the resource that bounds ``estimate`` (with the
    measurement's probe rates, the ceiling of the window); ``peak``: the CPU's theoretical peak;
    ``inference``: what was inferred of a call that named no op. Where attained is only a lower bound
    (FLOPs unknown, samples still falling), a miss may be inconclusive: docs/verdicts.md ("The rules,
    in order").
    """
    judgement = _judge(estimate, measurement, min_fraction, reference=reference, peak=peak,
                       latency_floor_s=latency_floor_s)  # fmt: skip
    if judgement.verdict not in (Verdict.MISS, Verdict.INCONCLUSIVE):
        return judgement
    from .inference import UNKNOWN_FLOPS

    # what makes attained a lower bound, each in words
    lower_bound: list[str] = []
    if inference is not None and not inference.flops_known:
        lower_bound.append(UNKNOWN_FLOPS)
    if measurement.still_falling and _fastest_reaches(judgement, measurement, min_fraction):
        lower_bound.append(STILL_FALLING)
    if not lower_bound:
        return judgement
    reason = "; ".join([*lower_bound, *([judgement.reason] if judgement.reason else [])])
    return dataclasses.replace(judgement, verdict=Verdict.INCONCLUSIVE, reason=reason, rule="lower-bound")


def _fastest_reaches(judgement: Judgement, m: Measurement, min_fraction: float) -> bool:
    """Whether the measurement's fastest call attained the budget (where none did, samples still
    falling judge a miss all the same)."""
    return m.stats.min <= 0 or judgement.attained * m.time_s / m.stats.min >= min_fraction


#: why a measurement whose samples were still falling when it stopped judges no miss
STILL_FALLING = (
    "its samples were still getting faster when sampling stopped (the kernel had not settled):"
    " a longer max_time gives it time to"
)


def _judge(
    estimate: Estimate,
    measurement: Measurement,
    min_fraction: float,
    *,
    reference: ProbeReference | None,
    peak: CpuPeak | None,
    latency_floor_s: float,
) -> Judgement:
    m = measurement
    ceiling = None
    waited = _threads_waited(estimate, m)
    if waited:
        pass  # judged against the calibrated ceiling: the machine's best, which load cannot raise
    elif _single_threaded_compute(estimate, m):
        # not the all-core BLAS probe (docs/methodology.md): its ceiling is the share of its core it got
        if m.cpu_share and estimate.peak_flops is not None:
            ceiling = PairedCeiling(
                estimate.peak_precision.label, estimate.peak_flops, min(m.cpu_share, 1.0), 0.0,
                min(m.cpu_share, 1.0), "this thread's share of its core", m.stats.n,
            )  # fmt: skip
    elif reference is not None and m.probe is not None and m.probe.resource == reference.resource:
        probe = m.probe
        ceiling = pair(reference, probe.value(m.stat), probe.stats.ci_rel, len(probe.rates))
        if peak is not None and ceiling.resource != BANDWIDTH:
            # no window's ceiling is above what the silicon can do
            most = peak.flops(estimate.peak_precision) / ceiling.figure
            if ceiling.speed > most:
                ceiling = dataclasses.replace(ceiling, speed=most)
    floor_s = paired_floor_s(estimate, ceiling) if ceiling is not None else estimate.floor_s
    # no call is shorter than an empty one; measured at another moment, the latency floor raises the
    # floor to the measured time at most: it caps attained at 1, never makes it faster than light
    latency_bound = latency_floor_s > floor_s
    floor_s = max(floor_s, min(latency_floor_s, m.time_s) if m.time_s > 0 else latency_floor_s)
    timed = m.time_s > 0
    attained = floor_s / m.time_s if timed else math.inf
    kernel_ci = m.stats.ci_rel if m.stats.n >= MIN_PRECISION_SAMPLES else max(m.stats.ci_rel, FEW_SAMPLES_CI)
    ci = math.hypot(kernel_ci, ceiling.ci_rel if ceiling is not None else 0.0) if timed else 0.0
    # multiplicative: a ratio's interval, never below zero however noisy the measurement
    lo, hi = attained / (1 + ci), attained * (1 + ci)
    contention = m.contention if m.contention is not None and m.contention.level == "heavy" else None
    facts = Facts(
        estimate, m, min_fraction, attained, lo, hi, ci, kernel_ci, ftl_limit(estimate), ceiling, peak,
        waited, contention,
    )  # fmt: skip
    for rule in RULES:
        reason = rule.applies(facts)
        if reason is not None:
            verdict = Verdict(rule.verdict)
            return Judgement(attained, verdict, ci, floor_s, ceiling, reason, latency_bound, rule.name)
    raise AssertionError("the last rule applies to every measurement")


def _single_threaded_compute(estimate: Estimate, m: Measurement) -> bool:
    if m.threads is not None:  # counted by the OS: the better reading
        single = m.threads == 1
    else:
        single = m.parallelism is not None and m.parallelism < MULTITHREADED
    return single and estimate.bound == "compute" and estimate.device.kind == "cpu"


def _threads_waited(estimate: Estimate, m: Measurement) -> str:
    """Why a compute-bound CPU kernel whose threads waited for a core cannot be judged against a probe,
    or "" (why: docs/methodology.md ("Threads, probes and the host's counters"))."""
    if estimate.bound != "compute" or estimate.device.kind != "cpu":
        return ""
    if m.threads is None or m.threads < 2 or m.wait_share is None or m.wait_share <= WAITED_SHARE:
        return ""
    return (
        f"its {m.threads} threads waited for a core {units.percent(m.wait_share)} of the time (another"
        " job shares this CPU), which slows threads that synchronize by more than any probe shows"
    )


def result_of(
    estimate: Estimate,
    measurements: list[Measurement],
    min_fraction: float,
    *,
    name: str = "",
    nodeid: str = "",
    reference: ProbeReference | None = None,
    peak: CpuPeak | None = None,
    latency_floor_s: float = 0.0,
    inference: Inference | None = None,
    spent_s: float = 0.0,
) -> Result:
    """The result of one or more measurements of one kernel: a conclusive verdict over an
    inconclusive one, then the one that attained most. ``spent_s``: what the measurement cost
    before its first timing (rotation's copies), part of the result's ``wall_s``."""

    def judged_one(m: Measurement) -> Judgement:
        return judge(
            estimate, m, min_fraction, reference=reference, peak=peak, latency_floor_s=latency_floor_s,
            inference=inference,
        )  # fmt: skip

    judged = [(judged_one(m), m) for m in measurements]
    j, best = max(judged, key=lambda pair: (pair[0].verdict is not Verdict.INCONCLUSIVE, pair[0].attained))
    return Result(
        **{f.name: getattr(j, f.name) for f in dataclasses.fields(Judgement)},
        name=name,
        estimate=estimate,
        measurement=best,
        min_fraction=min_fraction,
        remeasured=len(measurements) > 1,
        nodeid=nodeid,
        measurements=len(measurements),
        wall_s=spent_s + sum(m.wall_s for m in measurements),
        latency_floor_s=latency_floor_s,
        inference=inference,
    )


def first_budget_s(budget_s: float, spent_s: float) -> float:
    """The first measurement's budget: what ``spent_s`` (rotation's copies, made before its first
    timing) left of ``budget_s``, at least :data:`MIN_FIRST_BUDGET_S` (a second measurement has
    ``budget_s`` of its own: docs/measurement.md ("The time budget"))."""
    return max(budget_s - spent_s, MIN_FIRST_BUDGET_S)


def second_look(first: Result, suspect: Callable[[Result], bool] | None = None) -> bool:
    """Whether ``first`` is measured once more before it stands, the better of the two then judged
    (:func:`result_of`): a miss, an inconclusive result, or a result ``suspect`` doubts (a regression
    against the baseline). Not asked in report mode."""
    doubted = first.verdict in (Verdict.MISS, Verdict.INCONCLUSIVE)
    return doubted or (suspect is not None and suspect(first))


def _label(result: Result) -> str:
    """``gemm[M=4096 N=4096 K=4096 bf16]``, with the measurement's name when it has one."""
    return result.estimate.label + (f" ({result.name})" if result.name else "")


def budget_percent(fraction: float) -> str:
    """``70%``, ``12.5%``: a budget as its author wrote it, no spurious decimals."""
    return f"{fraction * 100:.3g}%"


def _wall(result: Result) -> str:
    """``compute-bound at 989 TFLOP/s bf16 tensor`` or ``memory-bound at 3.35 TB/s``; with a paired
    ceiling, the ceiling of the window and how far the machine was from its best."""
    est, ceiling = result.estimate, result.ceiling
    figure = est.bounding_figure.value
    rate = units.flop_rate if est.bound == "compute" else units.byte_rate
    beside = rate(figure * (ceiling.speed if ceiling is not None else 1.0))
    if est.bound == "compute":
        wall = f"compute-bound at {beside} {est.peak_precision} {est.unit}"
    else:
        wall = f"memory-bound at {beside}"
        if est.compute_s is None:  # an integer without an integer peak: memory time alone
            wall += f" ({est.peak_note})"
    if ceiling is not None:
        # above the calibration, said as such: the machine ran faster than when it was calibrated
        above = (
            f", {ceiling.speed:.2g}x that: recalibrate with `roofline calibrate --force`"
            if ceiling.speed > ABOVE_CALIBRATION
            else ""
        )
        wall += (
            f" measured beside the kernel (machine at {units.percent(ceiling.share_of_best)} of its best;"
            f" calibrated {rate(figure)}{above})"
        )
    return wall


#: a paired ceiling this far above the calibrated figure says so where it is printed
ABOVE_CALIBRATION = 1.05


def _achieved(result: Result) -> str:
    """``121.6 TFLOP/s achieved``; for memory-bound kernels the bandwidth against the peak's."""
    est = result.estimate
    if est.bound == "compute":
        return f"{units.si(result.achieved_flop_rate, 'FLOP/s', 4)} achieved"
    bandwidth = est.bandwidth * (result.ceiling.speed if result.ceiling is not None else 1.0)
    share = result.achieved_bandwidth / bandwidth
    return (
        f"{units.si(result.achieved_bandwidth, 'B/s', 4)} achieved of {units.byte_rate(bandwidth)} "
        f"peak bandwidth ({units.percent(share)})"
    )


def _measured(result: Result) -> str:
    """``measured 1130 µs (median of 57, ±0.4%)``, saying so when it is the better of two or warm."""
    m = result.measurement
    notes = [f"{m.stat} of {m.stats.n}", f"±{m.stats.ci_rel * 100:.1f}%"]
    if result.measurements > 1:
        notes.append(f"best of {result.measurements} measurements")
    if m.low_confidence:
        notes.append(f"low confidence: {m.budget_note or 'the time budget allowed only these samples'}")
    notes.append(cache_words(result))
    return f"measured {units.seconds(m.time_s)} ({', '.join(notes)})"


def cache_words(result: Result) -> str:
    """Where the measurement's bytes came from, in words: cold by rotation, by flushing or past the
    cache, or warm and the level judged at."""
    m, est = result.measurement, result.estimate
    if m.cold_method == "rotation":
        return f"cold by rotation over {m.rotation_copies} argument sets"
    if m.cold_method == "flush":
        return "cold: cache flushed before every call"
    if m.cold_method == "past-cache":
        return f"cold: {m.cache_reason}" if m.cache_reason else "cold"
    where = "DRAM" if est.memory_level == "dram" else est.memory_level.upper()
    return f"warm in {where}, judged at {units.byte_rate(est.bandwidth)}"


def _contention(result: Result) -> str:
    c = result.measurement.contention
    return f" The OS reported {c.describe()}." if c is not None and c.level != "quiet" else ""


def _power_cap(result: Result) -> str:
    """`` The GPU ran at the software power cap, the SM clock down to 77% ...``, where it did, and what
    the kernel attained at the clock it held: whether the cap, not the kernel, missed the budget."""
    clocks = result.measurement.clocks
    note = clocks.power_cap_note() if clocks is not None else ""
    if not note:
        return ""
    clock, attained = result.held_clock, result.attained_at_held_clock
    if clock is None or attained is None:
        return f" The GPU ran {note}."
    verdict = (
        "within the budget: the miss is the power cap's, not the kernel's"
        if attained >= result.min_fraction
        else "short of the budget at that clock too"
    )
    return (
        f" The GPU ran {note}. At the clock it held ({clock.describe()}) it attained"
        f" {units.percent(attained)}, {verdict}."
    )


def failure_message(result: Result) -> str:
    """The verdict's message: everything a kernel engineer needs, a line per step (the plugin wraps
    each to the terminal); the first line is what pytest's short summary shows."""
    est = result.estimate
    device = est.device.name
    floor = f"floor {units.seconds(result.floor_s)}, {_wall(result)}"
    if result.latency_bound:
        roofline_floor = result.estimate.floor_s
        floor = (
            f"floor {units.seconds(result.floor_s)}, latency-bound: no call on this timer is shorter (an "
            f"empty one takes {units.seconds(result.latency_floor_s)}), and the roofline floor, "
            f"{units.seconds(roofline_floor)} ({_wall(result)}), is below it, so the roofline cannot "
            "judge this kernel"
        )
    if result.verdict is Verdict.FASTER_THAN_LIGHT:
        limit = ftl_limit(est)
        figure = est.bounding_figure
        sources = "measured ceilings" if figure.source is Source.MEASURED else "datasheet peaks"
        if figure.at_max_clock is not None:
            sources += (
                f": {units.percent(_source_limit(figure))} of {units.flop_rate(figure.at_max_clock)}, "
                "the peak at the maximum SM clock"
            )
        m = result.measurement
        cache = f"{cache_words(result)}; {m.cache_note}" if m.cache_note else cache_words(result)
        why = f" ({result.reason})" if result.reason else ""
        inferred = result.inference.overcount_note() if result.inference is not None else ""
        wrong = (
            f"The floor counts more than the kernel did: {inferred}."
            if inferred
            else "Something in the floor is wrong: the op's byte or FLOP count (does the kernel do the work "
            f"the marker describes?), the device peaks, or data served from a cache ({cache})."
        )
        return (
            f"{_label(result)} ran faster than light{why}: attained {units.percent(result.attained)} of "
            f"speed of light (limit {units.percent(limit)} against {sources}, ±{result.ci_rel * 100:.1f}% "
            f"noise) on {device}:\n{floor};\n{_measured(result)}, {_achieved(result)}.\n{wrong}"
        )
    if result.verdict is Verdict.INCONCLUSIVE:
        what = (
            " Attained is a lower bound: the floor is the memory traffic's alone, and the kernel's FLOPs may"
            " bound it. This never fails the test; --roofline-inconclusive chooses whether it warns or skips."
            if result.flops_unknown
            else " --roofline-inconclusive chooses whether this warns, fails or skips."
        )
        return (
            f"{_label(result)} is inconclusive: attained {units.percent(result.attained)} of speed of light "
            f"±{result.ci_rel * 100:.1f}% (budget {budget_percent(result.min_fraction)}) on {device}:\n"
            f"{result.reason};\n{floor};\n{_measured(result)}, {_achieved(result)}.{_contention(result)}"
            f"\n{what.lstrip()}"
        )
    needs = result.min_fraction / result.attained if result.attained > 0 else float("inf")
    # the fraction and the budget first, on a line of their own: pytest's short summary shows the first
    # line; each later line is one step of the argument (the floor, the measurement, what to do next)
    return (
        f"attained {units.percent(result.attained)} of speed of light "
        f"(budget {budget_percent(result.min_fraction)}): {_label(result)} on {device}:\n{floor};\n"
        f"{_measured(result)}, "
        f"{_achieved(result)}; needs {needs:.1f}× faster.{_contention(result)}{_power_cap(result)}"
        f"{_next_step(result)}"
    )


def _next_step(result: Result) -> str:
    """What to look at first, by what bounds the kernel, and where the causes are told; nothing where
    the kernel met its budget at the clock the GPU held (the miss is the power cap's)."""
    held = result.attained_at_held_clock
    if result.held_clock is not None and held is not None and held >= result.min_fraction:
        return ""
    gpu = result.estimate.device.kind != "cpu"
    # where a miss's likely causes are told
    where = "docs/verdicts.md#why-did-it-miss" if gpu else "docs/verdicts.md#a-cpu-kernel-that-misses"
    if result.latency_bound:
        return (
            "\nNext: the kernel is shorter than an empty call on this timer; give it more work per call"
            f" (a larger shape, or a batch of calls) to judge it against its roofline ({where})."
        )
    if result.estimate.bound == "memory":
        first = (
            "count the passes over memory (each unfused temporary is one more), then the access pattern"
            " (strided, gathered)"
        )
    else:
        first = "check that the math runs on the unit the floor assumes (tensor cores, vector lanes)"
    if not gpu:
        threads = result.measurement.threads
        if threads is not None and threads <= 1 and (result.estimate.device.cores or 1) > 1:
            first += f", and that one thread is judged against {result.estimate.device.cores} cores' ceiling"
    return f"\nNext: {first} ({where})."
