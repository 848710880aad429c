"""A measurement against its baseline: regression, improvement, unchanged, inconclusive. No pytest here.

What is compared is the **attained fraction**, not the time: a fraction is portable across machines
of one kind and survives a driver or BLAS upgrade that moves the ceiling as much as the kernel.
Both fractions carry a 95% interval (``attained_ci_rel``); the interval of their ratio combines the
two multiplicatively, as the verdict does. A drop larger than the threshold is a **regression**
only when the ratio's whole interval lies below 1 (the drop is beyond both measurements' noise);
otherwise it is **inconclusive**: reported, never failed. Improvements mirror that, and are never
failures. A baseline from another device is compared only when asked.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import units
from .baseline import Baseline, BaselineRecord, Key

DEFAULT_THRESHOLD = 0.10


class Change(str, enum.Enum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    NEW = "new"
    VANISHED = "vanished"
    OTHER_DEVICE = "other device"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Comparison:
    """One test's measurement against its baseline record (either may be absent)."""

    key: Key
    change: Change
    old: BaselineRecord | None
    new: BaselineRecord | None
    #: new attained / old attained, and the relative half-width of its 95% interval
    ratio: float | None = None
    ci_rel: float = 0.0
    threshold: float = DEFAULT_THRESHOLD
    #: where the baseline came from (file, machine, date), for messages
    source: str = ""

    @property
    def test(self) -> str:
        record = self.new or self.old
        return record.test if record is not None else "?"

    @property
    def percent_change(self) -> float | None:
        """The change of attained in percent (-48.0 for a kernel that lost 48% of its fraction)."""
        return None if self.ratio is None else (self.ratio - 1) * 100

    def summary(self) -> str:
        """One line: the change and both fractions (``-48% (45.0% -> 23.4%)``), or why there is none."""
        if self.change is Change.NEW:
            return "new: no baseline record"
        if self.change is Change.VANISHED:
            return "vanished: in the baseline, not measured now"
        old, new = self._sides()
        fractions = f"{units.percent(old.attained)} -> {units.percent(new.attained)}"
        if self.change is Change.OTHER_DEVICE:
            return f"not compared: baseline measured on {old.device_name} ({fractions})"
        return f"{(self.ratio or 0.0) * 100 - 100:+.0f}% ({fractions})"

    def message(self) -> str:
        """The regression message: both fractions, both times, the change, and the baseline."""
        old, new = self._sides()
        ratio = self.ratio or 0.0
        low, high = _interval(ratio, self.ci_rel)
        return (
            f"{self.test}: attained {units.percent(new.attained)} of speed of light, "
            f"{units.percent(old.attained)} in the baseline: {(ratio - 1) * 100:+.0f}% "
            f"(95% interval {(low - 1) * 100:+.0f}% to {(high - 1) * 100:+.0f}%, beyond the "
            f"{self.threshold * 100:.0f}% regression threshold); time {units.seconds(new.time_s)}, "
            f"was {units.seconds(old.time_s)}. Baseline: {self.source or 'given'}."
        )

    def _sides(self) -> tuple[BaselineRecord, BaselineRecord]:
        if self.old is None or self.new is None:
            raise ValueError(f"{self.test} is {self.change}: there is no pair to describe")
        return self.old, self.new


def compare(
    old: BaselineRecord | None,
    new: BaselineRecord | None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    across_devices: bool = False,
    source: str = "",
) -> Comparison:
    """Compare one test's record with its baseline record (``None`` where one side has none)."""
    if new is None and old is None:
        raise ValueError("compare needs at least one record")
    key = (new or old).key  # type: ignore[union-attr]
    if old is None:
        return Comparison(key, Change.NEW, None, new, threshold=threshold, source=source)
    if new is None:
        return Comparison(key, Change.VANISHED, old, None, threshold=threshold, source=source)
    ratio = new.attained / old.attained
    ci = math.hypot(new.ci_rel, old.ci_rel)
    if _machine(old) != _machine(new) and not across_devices:
        return Comparison(key, Change.OTHER_DEVICE, old, new, ratio, ci, threshold, source)
    low, high = _interval(ratio, ci)
    if ratio < 1 - threshold:
        # a measurement the machine's load could have disturbed (contention the OS saw, threads
        # waiting for a core, a verdict already inconclusive), now or in the baseline, confirms nothing
        confirmed = high < 1 and not new.disturbed and not old.disturbed
        change = Change.REGRESSION if confirmed else Change.INCONCLUSIVE
    elif ratio > 1 + threshold:
        change = Change.IMPROVEMENT if low > 1 else Change.INCONCLUSIVE
    else:
        change = Change.UNCHANGED
    return Comparison(key, change, old, new, ratio, ci, threshold, source)


def _machine(record: BaselineRecord) -> str:
    """What a record was measured on: a table device by its key; a CPU by its model too, since
    every CPU's key is ``cpu``."""
    return f"cpu:{record.device_name}" if record.device == "cpu" else record.device


def compare_all(
    baseline: Baseline,
    records: Iterable[BaselineRecord],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    across_devices: bool = False,
) -> list[Comparison]:
    """Every record against the baseline, then the baseline records no record matched (vanished)."""
    source = baseline.describe()
    seen: dict[Key, Comparison] = {}
    for record in records:
        old = baseline.records.get(record.key)
        seen[record.key] = compare(
            old, record, threshold=threshold, across_devices=across_devices, source=source
        )
    vanished = [
        compare(old, None, threshold=threshold, source=source)
        for key, old in baseline.records.items()
        if key not in seen
    ]
    return [*seen.values(), *vanished]


def counts(comparisons: Iterable[Comparison]) -> Mapping[Change, int]:
    totals: dict[Change, int] = {}
    for c in comparisons:
        totals[c.change] = totals.get(c.change, 0) + 1
    return totals


def _interval(ratio: float, ci_rel: float) -> tuple[float, float]:
    """The ratio's 95% interval, multiplicative: never below zero however noisy."""
    return ratio / (1 + ci_rel), ratio * (1 + ci_rel)


def parse_threshold(text: str) -> float:
    """``10%`` or ``0.1`` -> 0.1: a drop, as a fraction in (0, 1); ValueError naming the text otherwise."""
    value: float | None
    stripped = text.strip()
    try:
        value = float(stripped[:-1]) / 100 if stripped.endswith("%") else float(stripped)
    except ValueError:
        value = None
    if value is None or not 0 < value < 1:
        raise ValueError(f"expected a drop such as 10% or 0.1, in (0, 1); got {text!r}")
    return value


def format_table(comparisons: Iterable[Comparison]) -> list[str]:
    """A table a line each: regressions first, then inconclusive, improvements, the rest."""
    from tabulate import tabulate

    rows = []
    for c in sorted(comparisons, key=lambda c: (_ORDER.index(c.change), c.test)):
        old, new = c.old, c.new
        rows.append(
            [
                c.test,
                (new or old).label if (new or old) is not None else "",  # type: ignore[union-attr]
                units.percent(old.attained) if old is not None else "-",
                units.percent(new.attained) if new is not None else "-",
                f"{c.percent_change:+.0f}%" if c.percent_change is not None else "-",
                f"±{c.ci_rel * 100:.0f}%" if c.ratio is not None else "-",
                str(c.change),
            ]
        )
    headers = ["test", "op", "baseline", "now", "change", "noise", "verdict"]
    return str(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)).splitlines()


_ORDER = (
    Change.REGRESSION, Change.INCONCLUSIVE, Change.IMPROVEMENT, Change.OTHER_DEVICE, Change.NEW,
    Change.VANISHED, Change.UNCHANGED,
)  # fmt: skip


def summary_line(comparisons: Iterable[Comparison]) -> str:
    totals = counts(comparisons)
    parts = [f"{totals[change]} {change}" for change in _ORDER if totals.get(change)]
    return "compared with the baseline: " + (", ".join(parts) if parts else "nothing")
