"""A measurement against its baseline: regression, improvement, unchanged, inconclusive. No pytest here.

Attained fractions are compared, against the baseline's median run and the noise between runs
(:mod:`pytest_roofline.model.run_noise`'s prior while runs are few): docs/ci.md ("The regression verdict").
"""

from __future__ import annotations

import enum
import math
import statistics
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidValueError
from ..model import units
from ..model.run_noise import RUN_NOISE, prior, why
from .baseline import Baseline, Key

if TYPE_CHECKING:
    from .records import MeasurementRecord

__all__ = ["Change", "Comparison", "RegressionRule"]

DEFAULT_THRESHOLD = 0.10
#: how many runs' worth of evidence the prior run-to-run noise (:func:`~..model.run_noise.prior`)
#: weighs against a history's own spread
PRIOR_RUNS = 4
#: the most run-to-run noise a comparison computes with (log sd): past it exp() of the bounds overflows
MAX_LOG_SD = 3.0
#: the share of runs of unchanged code in which the whole suite may show one false regression
FALSE_ALARMS = 0.05
_Z95 = 1.959964


class Change(str, enum.Enum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    VANISHED = "vanished"
    #: in the baseline, not measured now, and not missed: deselected (``-k``, ``-m``, a shard), or not
    #: reached by a run cut short
    NOT_RUN = "not run"
    OTHER_DEVICE = "other device"

    def __str__(self) -> str:
        return self.value


#: the summary of a test with one side only
_UNPAIRED = {
    Change.NEW: "new: no baseline record",
    Change.VANISHED: "vanished: in the baseline, not measured now",
    Change.NOT_RUN: "not run: deselected, or not reached by a run cut short",
}


@dataclass(frozen=True, slots=True)
class Comparison:
    """One test's measurement against its baseline record (either may be absent)."""

    key: Key
    change: Change
    old: MeasurementRecord | None
    new: MeasurementRecord | None
    #: new attained / old attained, and the relative half-width of its 95% interval
    ratio: float | None = None
    ci_rel: float = 0.0
    threshold: float = DEFAULT_THRESHOLD
    #: where the baseline came from (file, machine, date), for messages
    source: str = ""
    #: the baseline runs the old side is the median of, and the run-to-run noise used (log sd per run)
    runs: int = 1
    run_noise: float = RUN_NOISE
    #: the drop the noise alone could explain at the suite's confidence (a fraction of attained)
    noise_drop: float = 0.0

    @property
    def test(self) -> str:
        record = self.new or self.old
        return record.test if record is not None else "?"

    @property
    def other_gpu(self) -> tuple[int, int] | None:
        """(this GPU, the baseline's) when the two records ran on different GPUs of one model."""
        old, new = self.old, self.new
        if old is None or new is None or self.change is Change.OTHER_DEVICE:
            return None
        if old.device_index is None or new.device_index is None or old.device_index == new.device_index:
            return None
        return new.device_index, old.device_index

    def summary(self) -> str:
        """One line: the change and both fractions (``-48% (45.0% -> 23.4%)``), or why there is none."""
        if self.change in _UNPAIRED:
            return _UNPAIRED[self.change]
        old, new = self._sides()
        if self.change is Change.OTHER_DEVICE:
            fractions = f"{units.percent(old.attained or 0.0)} -> {units.percent(new.attained or 0.0)}"
            return f"not compared: baseline measured on {old.device_name} ({fractions})"
        fractions = f"{self.baseline_figure()} -> {units.percent(new.attained or 0.0)}"
        return f"{(self.ratio or 0.0) * 100 - 100:+.0f}% ({fractions})"

    def baseline_figure(self) -> str:
        """The baseline's figure the change is computed against, labelled where it is a median of its
        kept runs (``36.2% (median of 3)``); "-" where there is no baseline record."""
        if self.old is None:
            return "-"
        figure = units.percent(reference(self.old))
        return f"{figure} (median of {self.runs})" if self.runs > 1 else figure

    def message(self) -> str:
        """The regression message: both fractions, both times, the change, why it is sure, the baseline."""
        old, new = self._sides()
        ratio = self.ratio or 0.0
        low, high = _interval(ratio, self.ci_rel)
        baseline = f"{units.percent(reference(old))} in the baseline"
        if self.runs > 1:
            baseline += f" (median of {self.runs} runs)"
        assumed = why(old.backend, old.bound) if old.backend == "cuda" else "the reference CI machine's"
        learned = (
            f"learned from {self.runs} baseline runs"
            if self.runs > 1
            else f"assumed: {assumed}, until the baseline keeps runs of its own"
        )
        remeasured = ", and in a second measurement" if new.remeasured else ""
        return (
            f"{self.test}: attained {units.percent(new.attained or 0.0)} of speed of light, {baseline}: "
            f"{(ratio - 1) * 100:+.0f}% (95% interval {(low - 1) * 100:+.0f}% to {(high - 1) * 100:+.0f}%); "
            f"beyond the {self.threshold * 100:.0f}% regression threshold and beyond the "
            f"{self.noise_drop * 100:.0f}% that run-to-run noise explains (±{self.run_noise * 100:.0f}% "
            f"a run, {learned}){remeasured}; time {units.seconds(new.time_s)}, was "
            f"{units.seconds(old.time_s)}. Baseline: {self.source or 'given'}."
        )

    def to_json(self) -> dict[str, object]:
        """What the run's JSON keeps of it (``comparisons``, docs/json.md)."""
        old, new, ratio = self.old, self.new, self.ratio
        low, high = _interval(ratio, self.ci_rel) if ratio is not None else (None, None)
        return {
            "nodeid": self.key[0], "name": self.key[1], "verdict": str(self.change),
            "baseline": reference(old) if old is not None else None,
            "baseline_runs": len(old.runs) if old is not None else 0,
            "now": new.attained if new is not None else None,
            "change": ratio - 1 if ratio is not None else None,
            "change_lo": low - 1 if low is not None else None,
            "change_hi": high - 1 if high is not None else None,
            "run_noise": self.run_noise, "noise_drop": self.noise_drop, "threshold": self.threshold,
            "source": self.source,
        }  # fmt: skip

    def _sides(self) -> tuple[MeasurementRecord, MeasurementRecord]:
        if self.old is None or self.new is None:
            raise ValueError(f"{self.test} is {self.change}: there is no pair to describe")
        return self.old, self.new


@dataclass(frozen=True, slots=True)
class RegressionRule:
    """When a measurement regressed against its baseline record: the gate and ``roofline compare`` both
    ask this rule."""

    #: the drop of attained, as a fraction, beyond which a measurement is suspect
    threshold: float = DEFAULT_THRESHOLD
    #: compare a record with one measured on another machine (otherwise: :attr:`Change.OTHER_DEVICE`)
    across_devices: bool = False

    def dropped(self, ratio: float) -> bool:
        """A drop beyond the threshold (a regression, or inconclusive where noise could explain it)."""
        return ratio < 1 - self.threshold

    def compare(
        self,
        old: MeasurementRecord | None,
        new: MeasurementRecord | None,
        *,
        source: str = "",
        tests: int = 1,
    ) -> Comparison:
        """One test's record against its baseline record (``None`` where one side has none); ``tests``:
        how many the baseline compares, each held to the suite's :data:`FALSE_ALARMS`."""
        threshold = self.threshold
        key = (new or old).key  # type: ignore[union-attr]
        if old is None:
            return Comparison(key, Change.NEW, None, new, threshold=threshold, source=source)
        if new is None:
            return Comparison(key, Change.VANISHED, old, None, threshold=threshold, source=source)
        ratio = (new.attained or 0.0) / reference(old)
        noise = run_noise(old.runs, prior(old.backend, old.bound))
        sd = min(_log_sd(old, new, noise), MAX_LOG_SD)
        ci = math.exp(_Z95 * sd) - 1
        z = confidence_z(tests)
        noise_drop = 1 - math.exp(-z * sd)
        noise_of = (len(old.runs), noise, noise_drop)
        if old.machine != new.machine and not self.across_devices:
            return Comparison(key, Change.OTHER_DEVICE, old, new, ratio, ci, threshold, source, *noise_of)
        if self.dropped(ratio):
            # load confirms nothing (docs/ci.md, "Load confirms nothing"); a baseline median of 3+ runs stands
            old_disturbed = disturbed(old) and len(old.runs) < 3
            confirmed = ratio < 1 - noise_drop and not disturbed(new) and not old_disturbed
            change = Change.REGRESSION if confirmed else Change.INCONCLUSIVE
        elif ratio > 1 + threshold:
            change = Change.IMPROVEMENT if ratio > 1 / (1 - noise_drop) else Change.INCONCLUSIVE
        else:
            change = Change.UNCHANGED
        return Comparison(key, change, old, new, ratio, ci, threshold, source, *noise_of)

    def compare_all(
        self, baseline: Baseline, records: Iterable[MeasurementRecord], *, not_run: Collection[str] = ()
    ) -> list[Comparison]:
        """Every record against the baseline, then the baseline's tests no record matched: vanished, or
        not run when ``not_run`` holds the test's node id (deselected, or not reached)."""
        source = baseline.describe()
        tests = len(baseline.records)
        seen: dict[Key, Comparison] = {}
        for record in records:
            seen[record.key] = self.compare(baseline.record_for(record), record, source=source, tests=tests)
        missing = [
            Comparison(key, Change.NOT_RUN, old, None, source=source)
            if key[0] in not_run
            else self.compare(old, None, source=source)
            for key, old in baseline.records.items()
            if key not in seen
        ]
        return [*seen.values(), *missing]


def reference(record: MeasurementRecord) -> float:
    """The baseline's figure for a test: the median of the runs it keeps."""
    return statistics.median(record.runs)


def run_noise(runs: Sequence[float], prior: float = RUN_NOISE) -> float:
    """How far a test moves from run to run (sd of log attained): the spread of its kept runs, pooled
    with ``prior`` weighing :data:`PRIOR_RUNS` runs."""
    logs = [math.log(a) for a in runs]
    if len(logs) < 2:
        return prior
    spread = statistics.variance(logs)
    pooled = (PRIOR_RUNS * prior**2 + (len(logs) - 1) * spread) / (PRIOR_RUNS + len(logs) - 1)
    return math.sqrt(pooled)


def confidence_z(tests: int) -> float:
    """The one-sided z that keeps ``tests`` comparisons' false alarms to :data:`FALSE_ALARMS` together."""
    return statistics.NormalDist().inv_cdf(1 - FALSE_ALARMS / max(tests, 1))


def _log_sd(old: MeasurementRecord, new: MeasurementRecord, noise: float) -> float:
    """The sd of log(new / reference) (docs/ci.md, "The regression verdict")."""
    n = len(old.runs)
    share = 1 / n if n <= 2 else math.pi / (2 * n)
    new_var = max(noise, math.log1p(interval_rel(new)) / _Z95) ** 2
    old_var = max(noise, math.log1p(interval_rel(old)) / _Z95) ** 2
    return math.sqrt(new_var + old_var * share)


def disturbed(record: MeasurementRecord) -> bool:
    """Whether the machine's load could have slowed it (docs/ci.md, "Load confirms nothing")."""
    from ..model.verdict import WAITED_SHARE, Verdict

    share = record.thread_wait_share
    waited = share is not None and share > WAITED_SHARE
    return record.verdict is Verdict.INCONCLUSIVE or record.contention_level in ("busy", "heavy") or waited


def interval_rel(record: MeasurementRecord) -> float:
    """The relative half-width of the record's 95% interval of attained (0 where it has none)."""
    ci = record.attained_ci_rel
    return ci if math.isfinite(ci) and ci >= 0 else 0.0


def _interval(ratio: float, ci_rel: float) -> tuple[float, float]:
    """The ratio's 95% interval, multiplicative: never below zero however noisy."""
    return ratio / (1 + ci_rel), ratio * (1 + ci_rel)


def parse_threshold(text: str) -> float:
    """``10%`` or ``0.1`` -> 0.1: a drop, as a fraction in (0, 1); ValueError naming the text otherwise."""
    stripped = text.strip()
    try:
        value = float(stripped[:-1]) / 100 if stripped.endswith("%") else float(stripped)
    except ValueError:
        value = math.nan  # no number: out of range below
    if not 0 < value < 1:
        raise InvalidValueError(f"expected a drop such as 10% or 0.1, in (0, 1); got {text!r}")
    return value


def format_table(comparisons: Iterable[Comparison]) -> list[str]:
    """A table a line each: regressions first, then inconclusive, improvements, the rest."""
    from tabulate import tabulate

    rows = []
    for c in sorted(comparisons, key=lambda c: (_ORDER.index(c.change), c.test)):
        new, record = c.new, c.new or c.old
        rows.append(
            [
                c.test,
                record.label if record is not None else "",
                c.baseline_figure(),
                units.percent(new.attained or 0.0) if new is not None else "-",
                f"{(c.ratio - 1) * 100:+.0f}%" if c.ratio is not None else "-",
                f"±{c.ci_rel * 100:.0f}%" if c.ratio is not None else "-",
                str(c.change),
            ]
        )
    headers = ["test", "op", "baseline", "now", "change", "noise", "verdict"]
    return str(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)).splitlines()


_ORDER = (
    Change.REGRESSION, Change.INCONCLUSIVE, Change.IMPROVEMENT, Change.OTHER_DEVICE, Change.NEW,
    Change.VANISHED, Change.UNCHANGED, Change.NOT_RUN,
)  # fmt: skip


def other_gpu_lines(comparisons: Iterable[Comparison]) -> list[str]:
    """One line per pair of GPUs of one model whose records were compared though their slots differ."""
    pairs = Counter(
        (*gpus, c.new.device_name)
        for c in comparisons
        if (gpus := c.other_gpu) is not None and c.new is not None
    )
    return [
        f"{n} measurement(s) on GPU {now} compared with the baseline's from GPU {then}: the same model"
        f" ({name})"
        for (now, then, name), n in sorted(pairs.items())
    ]


def summary_line(comparisons: Iterable[Comparison]) -> str:
    totals = Counter(c.change for c in comparisons)
    parts = [f"{totals[change]} {change}" for change in _ORDER if totals.get(change)]
    return "compared with the baseline: " + (", ".join(parts) if parts else "nothing")
