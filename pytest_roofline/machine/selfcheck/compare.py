"""Each timer beside the engine's figure for the same kernel, round by round: its median paired ratio,
judged against that median's 95% interval and a :class:`Rule`, said in one table and one line.

Why: docs/cli.md ("roofline selfcheck: can the numbers be trusted here?"), docs/methodology.md.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ...model.stats import Stats
from ...model.units import seconds

#: exit statuses: every judged timer agrees; a timer disagrees (or the engine failed)
AGREES, DISAGREES = 0, 1
#: the timing a kernel that could not be built is shown as: a finding, as an engine failure is
SETUP = "setup"


@dataclass(frozen=True, slots=True)
class Rule:
    """How one timer is set beside one of the engine's figures."""

    #: the engine's timing it is compared with (``"engine warm"``)
    reference: str
    #: the least tolerance, as a fraction of the reference: what drift between two timers may add
    floor: float
    #: judged only for kernels at least this long (the reference's median); shorter ones are shown
    min_time_s: float = 0.0
    #: how much longer than the reference the other timer may read, by its method, in seconds
    allowance_s: float = 0.0
    #: why the allowance, in a few words (shown with the comparison)
    allowance_note: str = ""


@dataclass(frozen=True, slots=True)
class Timing:
    """One timer's rounds for one kernel (each round's statistics, seconds per call), or why it
    could not time it (no rounds, and the error)."""

    timer: str
    rounds: tuple[Stats, ...]
    error: str = ""

    @property
    def figures(self) -> tuple[float, ...]:
        """Each round's figure: the median of that round's samples, in round order."""
        return tuple(r.median for r in self.rounds)

    @property
    def stats(self) -> Stats | None:
        """Over the rounds' figures (their median, its 95% interval, ``n`` rounds); None when it failed."""
        return Stats.from_samples(self.figures) if self.rounds else None


@dataclass(frozen=True, slots=True)
class CaseResult:
    """Every timer's result for one kernel."""

    case: str
    timings: tuple[Timing, ...]

    def timing(self, timer: str) -> Timing | None:
        return next((t for t in self.timings if t.timer == timer), None)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One timer's figures over the engine's, round by round, and whether their median ratio is
    within its noise."""

    case: str
    timer: str
    reference: str
    #: the median of :attr:`ratios`
    ratio: float
    #: the 95% half-width of that median, from the paired ratios (a fraction of the reference)
    noise: float
    #: what the ratio may differ from 1 by: max(floor, noise)
    tolerance: float
    #: how much above 1 + tolerance the ratio may also read (the rule's allowance, as a fraction)
    allowance: float
    judged: bool
    #: why not judged, or what the allowance is for
    note: str = ""
    #: each round's figure over the reference's figure in the same round
    ratios: tuple[float, ...] = ()

    @property
    def agrees(self) -> bool:
        return 1 - self.tolerance <= self.ratio <= 1 + self.tolerance + self.allowance

    @property
    def deviation(self) -> float:
        return abs(self.ratio - 1)

    def describe(self) -> str:
        bound = f"±{self.tolerance:.1%}"
        if self.allowance:
            bound += f" (+{self.allowance:.1%} allowed above)"
        return (
            f"{self.timer} on {self.case} reads {self.ratio:.3f}× {self.reference}"
            f" (median of {len(self.ratios)} paired rounds; noise {bound})"
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """The one line, and the exit status it stands for."""

    line: str
    status: int


def compare(results: Sequence[CaseResult], rules: Mapping[str, Rule]) -> list[Comparison]:
    """Every timer that has a rule, set beside its reference round by round, for every kernel both
    timed (in the same rounds: :func:`.interleave.interleave`)."""
    found: list[Comparison] = []
    for result in results:
        for timing in result.timings:
            rule = rules.get(timing.timer)
            reference = result.timing(rule.reference) if rule is not None else None
            if rule is None or reference is None or timing.stats is None or reference.stats is None:
                continue
            if min(reference.figures) <= 0:  # a reference that read nothing divides nothing
                continue
            ratios = tuple(t / r for t, r in zip(timing.figures, reference.figures, strict=True))
            paired = Stats.from_samples(ratios)
            base = reference.stats.median
            judged = base >= rule.min_time_s
            note = rule.allowance_note if rule.allowance_s else ""
            if not judged:
                note = (
                    f"not judged: {seconds(base)} is under {seconds(rule.min_time_s)}, where launch "
                    "overhead differs between timers by design"
                )
            found.append(
                Comparison(
                    case=result.case,
                    timer=timing.timer,
                    reference=rule.reference,
                    ratio=paired.median,
                    noise=paired.ci_half,
                    tolerance=max(rule.floor, paired.ci_half),
                    allowance=rule.allowance_s / base,
                    judged=judged,
                    note=note,
                    ratios=ratios,
                )
            )
    return found


def verdict(
    results: Sequence[CaseResult], comparisons: Sequence[Comparison], engine: Collection[str]
) -> Verdict:
    """``agrees within 2.1%`` (status 0) or ``disagrees: ...`` (status 1): a judged timer out of its
    bounds, a failure of one of the ``engine``'s own timers (not another timer's: that is shown) or a
    kernel that could not be built, or nothing judged at all."""
    failed = [
        f"{t.timer} failed on {r.case}"
        for r in results
        for t in r.timings
        if (t.timer in engine or t.timer == SETUP) and t.stats is None
    ]
    judged = [c for c in comparisons if c.judged]
    wrong = [c.describe() for c in judged if not c.agrees]
    if failed or wrong:
        return Verdict("disagrees: " + "; ".join([*wrong, *failed]), DISAGREES)
    if not judged:
        return Verdict("disagrees: no timer could be set beside the engine for any kernel", DISAGREES)
    plain = [c for c in judged if not c.allowance]
    worst = max((c.deviation for c in plain), default=0.0)
    line = f"agrees within {worst:.1%}"
    above = [c for c in judged if c.allowance and c.deviation > worst]
    if above:
        line += " (" + "; ".join(
            f"{c.timer} on {c.case} {c.ratio - 1:+.1%}, within the +{c.allowance:.1%} its method adds"
            for c in above
        ) + ")"  # fmt: skip
    return Verdict(line, AGREES)


def table(results: Sequence[CaseResult], comparisons: Sequence[Comparison]) -> str:
    """One row per kernel and timer: the median of its round figures, their spread, its rounds, the
    median paired ratio and its judgement; a failed timer's error, or a comparison's note, as a
    numbered line under the table (one per text)."""
    from tabulate import tabulate

    by_key = {(c.case, c.timer): c for c in comparisons}
    rows: list[list[str]] = []
    notes: dict[str, int] = {}

    def mark(text: str) -> str:
        return f"({notes.setdefault(text, len(notes) + 1)})"

    for result in results:
        for timing in result.timings:
            comparison = by_key.get((result.case, timing.timer))
            if timing.stats is None:
                failed = f"failed {mark(f'{timing.timer} on {result.case}: {timing.error}')}"
                rows.append([result.case, timing.timer, "", "", "", "", "", failed])
                continue
            stats = timing.stats
            spread = f"{stats.ci_rel:.1%}" if math.isfinite(stats.ci_rel) else "?"
            cells = [result.case, timing.timer, seconds(stats.median), spread, str(stats.n)]
            if comparison is None:
                rows.append([*cells, "", "", ""])
                continue
            judgement = ("agrees" if comparison.agrees else "DISAGREES") if comparison.judged else "shown"
            if comparison.note:
                judgement += f" {mark(f'{timing.timer}: {comparison.note}')}"
            bound = f"±{comparison.tolerance:.1%}"
            if comparison.allowance:
                bound += f" +{comparison.allowance:.1%}"
            rows.append([*cells, f"{comparison.ratio:.3f}", bound, judgement])
    headers = ["kernel", "timer", "median", "±95%", "rounds", "ratio", "noise", "judged"]
    text = tabulate(rows, headers=headers, disable_numparse=True)
    return "\n".join([text, *(f"({number}) {note}" for note, number in notes.items())])


def results_json(results: Sequence[CaseResult], comparisons: Sequence[Comparison]) -> list[dict[str, object]]:
    """The table as JSON: per kernel, each timer's statistics over its rounds and each round's figure
    (or its error), and its comparison with every paired ratio."""
    by_key = {(c.case, c.timer): c for c in comparisons}
    out: list[dict[str, object]] = []
    for result in results:
        timers: dict[str, object] = {}
        for timing in result.timings:
            stats = timing.stats
            entry: dict[str, object] = {"error": timing.error}
            if stats is not None:
                entry = {
                    "median_s": stats.median,
                    "min_s": stats.min,
                    "rounds": stats.n,
                    "samples": sum(r.n for r in timing.rounds),
                    "ci_rel": stats.ci_rel if math.isfinite(stats.ci_rel) else None,
                    "rounds_s": list(timing.figures),
                }
            comparison = by_key.get((result.case, timing.timer))
            if comparison is not None:
                entry["comparison"] = {
                    "reference": comparison.reference,
                    "ratio": comparison.ratio,
                    "noise": comparison.noise,
                    "tolerance": comparison.tolerance,
                    "allowance": comparison.allowance,
                    "judged": comparison.judged,
                    "agrees": comparison.agrees,
                    "note": comparison.note,
                    "round_ratios": list(comparison.ratios),
                }
            timers[timing.timer] = entry
        out.append({"kernel": result.case, "timers": timers})
    return out


@dataclass(frozen=True, slots=True)
class Report:
    """What one self-check found: the lines around the table, the timings, their comparisons and the
    verdict; printed by :meth:`text`, written by :meth:`to_json`."""

    #: what was checked (``cpu``, ``cuda:0``)
    device: str
    header: tuple[str, ...]
    results: tuple[CaseResult, ...]
    comparisons: tuple[Comparison, ...]
    #: lines after the table: latency floor, clocks, ceilings against the device table
    notes: tuple[str, ...]
    verdict: Verdict
    #: the JSON's other fields (the latency floor's figures, the clocks, the ceilings)
    details: Mapping[str, object]

    def text(self) -> str:
        return "\n".join(
            [
                *self.header,
                table(self.results, self.comparisons),
                *self.notes,
                f"verdict: {self.verdict.line}",
            ]
        )

    def to_json(self) -> dict[str, object]:
        return {
            "device": self.device,
            "verdict": self.verdict.line,
            "agrees": self.verdict.status == AGREES,
            "header": list(self.header),
            "notes": list(self.notes),
            **self.details,
            "kernels": results_json(self.results, self.comparisons),
        }
