"""The rules of the verdict, in order: the first that applies to a measurement's :class:`Facts` gives
its verdict and reason (:func:`.verdict.judge` applies them; docs/verdicts.md lists them from
:data:`RULES`). Each tuned constant sits beside the rule that uses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from . import units
from .core import Estimate
from .measurement import Measurement
from .paired_ceilings import PairedCeiling

if TYPE_CHECKING:
    from .conditions import Contention
    from .peaks import CpuPeak

#: the verdicts a rule gives (:class:`.verdict.Verdict`'s values)
VerdictName = Literal["pass", "MISS", "inconclusive", "faster-than-light"]


@dataclass(frozen=True, slots=True)
class Facts:
    """What the rules read of one measurement: attained and its 95% interval (``lo``..``hi``), the
    faster-than-light ``limit``, the ceiling beside it, and the machine's load."""

    estimate: Estimate
    measurement: Measurement
    min_fraction: float
    attained: float
    lo: float
    hi: float
    ci: float
    #: the kernel's own share of ``ci`` (the probe's left out)
    kernel_ci: float
    limit: float
    ceiling: PairedCeiling | None
    peak: CpuPeak | None
    #: why a multi-threaded kernel's threads waited for a core ("" where they did not)
    waited: str
    #: the OS's readings, where they say heavy contention
    contention: Contention | None


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: its name (on the record: ``verdict_rule``), the verdict it gives, when it applies in
    words (docs/verdicts.md lists them from here), and ``applies(facts)``: the reason when it
    applies ("" for none), None when it does not."""

    name: str
    verdict: VerdictName
    when: str
    applies: Callable[[Facts], str | None]


def _zero_time(f: Facts) -> str | None:
    return "a zero time" if f.measurement.time_s <= 0 else None


def _above_peak(f: Facts) -> str | None:
    e, peak = f.estimate, f.peak
    # integer operations are not FLOPs: the CPU's floating-point peak does not bound them
    if peak is None or e.device.kind != "cpu" or e.flops <= 0 or e.peak_precision.integral:
        return None
    rate, theoretical = e.flops / f.measurement.time_s, peak.flops(e.peak_precision)
    if rate <= theoretical:
        return None
    return (
        f"{units.flop_rate(rate)} is above this CPU's theoretical peak of {units.flop_rate(theoretical)}"
        f" {e.peak_precision} ({peak.describe()}): a counting bug"
    )


#: how much more than its paired ceiling heavy contention may slow a kernel (or the ceiling more
#: than the kernel): within it, inconclusive; beyond it, still a miss (docs/verdicts.md)
CONTENTION_SLACK = 2.0


def _above_limit_under_load(f: Facts) -> str | None:
    if f.lo > f.limit and f.contention is not None and f.lo / CONTENTION_SLACK <= f.limit:
        return f"above the {units.percent(f.limit)} limit under {f.contention.describe()}"
    return None


def _above_limit_probe_slowed(f: Facts) -> str | None:
    # the load slowed the probe more than the kernel: within the calibrated ceiling, which load
    # cannot raise, no counting bug is shown
    if not (f.lo > f.limit and f.ceiling is not None and f.ceiling.speed < 1):
        return None
    if f.estimate.floor_s / f.measurement.time_s / (1 + f.kernel_ci) > f.limit:
        return None
    return (
        f"above the {units.percent(f.limit)} limit against the ceiling measured beside it, within it"
        " against the calibrated one: the load slowed the probe more than the kernel"
    )


def _above_limit(f: Facts) -> str | None:
    return "" if f.lo > f.limit else None


def _above_limit_in_noise(f: Facts) -> str | None:
    return f"above the {units.percent(f.limit)} limit, but within the noise" if f.attained > f.limit else None


def _clocks_slowed(f: Facts) -> str | None:
    # a GPU that slowed its clocks ran below the peaks it is judged against: not the kernel's miss
    m = f.measurement
    if m.clocks is not None and m.ran_slowed and f.lo < f.min_fraction:
        return f"the GPU slowed its clocks ({', '.join(m.clocks.reasons)})"
    return None


#: how far below the budget a multi-threaded kernel whose threads waited may be and be inconclusive;
#: a bigger miss is still a miss (docs/verdicts.md, "The rules, in order")
WAITED_SLACK = 10.0


def _threads_waited_miss(f: Facts) -> str | None:
    # load only slows a kernel, so a pass against the best-known ceiling holds on a quiet machine
    # too; a miss may be the load's
    return f.waited if f.waited and f.lo < f.min_fraction <= f.hi * WAITED_SLACK else None


def _straddles(f: Facts) -> str | None:
    if f.lo < f.min_fraction <= f.hi and f.ci > 0:
        return f"the 95% interval {units.percent(f.lo)}–{units.percent(f.hi)} straddles the budget"
    return None


def _reaches(f: Facts) -> str | None:
    return "" if f.attained >= f.min_fraction else None


def _miss_under_load(f: Facts) -> str | None:
    if f.contention is not None and f.hi * CONTENTION_SLACK >= f.min_fraction:
        return f"a miss under {f.contention.describe()}"
    return None


_FTL: VerdictName = "faster-than-light"
_INCONCLUSIVE: VerdictName = "inconclusive"

#: the verdict's rules, in order; the first that applies gives the verdict and its reason
RULES: tuple[Rule, ...] = (
    Rule("zero-time", _FTL, "the measured time is zero", _zero_time),
    Rule("above-peak", _FTL, "on a CPU, the FLOP rate is above the theoretical peak: a counting bug,"
         " whatever the noise", _above_peak),
    Rule("above-limit-under-load", _INCONCLUSIVE, "attained is above the faster-than-light limit beyond"
         f" the noise, under heavy contention, by less than {CONTENTION_SLACK:g}x", _above_limit_under_load),
    Rule("above-limit-probe-slowed", _INCONCLUSIVE, "above the limit beyond the noise against the ceiling"
         " measured beside it, within it against the calibrated one", _above_limit_probe_slowed),
    Rule("faster-than-light", _FTL, "attained is above the limit beyond the noise", _above_limit),
    Rule("above-limit-in-noise", _INCONCLUSIVE, "attained is above the limit, within the noise",
         _above_limit_in_noise),
    Rule("clocks-slowed", _INCONCLUSIVE, "a GPU that slowed its clocks, on a measurement whose interval"
         " reaches below the budget", _clocks_slowed),
    Rule("threads-waited", _INCONCLUSIVE, "a multi-threaded compute-bound kernel whose threads waited for"
         f" a core, below the budget by less than {WAITED_SLACK:g}x", _threads_waited_miss),
    Rule("straddles", _INCONCLUSIVE, "the 95% interval of attained straddles the budget", _straddles),
    Rule("pass", "pass", "attained reaches the budget", _reaches),
    Rule("miss-under-load", _INCONCLUSIVE, "a miss under heavy contention, by less than"
         f" {CONTENTION_SLACK:g}x", _miss_under_load),
    Rule("miss", "MISS", "otherwise: attained is below the budget, beyond the noise",
         lambda f: ""),
)  # fmt: skip
