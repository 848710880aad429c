"""A baseline that keeps several runs: ``--roofline-save`` onto an earlier baseline appends. No pytest here.

One run cannot say how far a test moves from run to run when nothing changed; a few can. So each
saved record carries ``history``: the attained fractions the same test had in the file it replaces
(that file's own history and figure), up to :data:`~pytest_roofline.output.comparison.HISTORY_RUNS` runs in
all, its own included. A comparison takes the median of those runs as the baseline's figure, and
their spread as the test's run-to-run noise.

A test whose new figure is a confirmed change against those runs (a regression or an improvement,
beyond the noise) starts a new history: the code changed, and its old runs describe other code. So
does a test measured on another machine, and every test when the file there is no baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .baseline import Baseline, comparable
from .comparison import HISTORY_RUNS, Change, compare, machine
from .records import MeasurementRecord, Record


@dataclass(frozen=True, slots=True)
class Appended:
    """The records to save, each with its history, and what became of the earlier runs."""

    records: list[Record]
    #: tests whose history went on, and tests that started a new one because they changed
    continued: int
    restarted: list[str]


def append_runs(records: Sequence[Record], previous: Baseline | None, *, threshold: float) -> Appended:
    """``records`` (this run's) with the runs of ``previous`` (the file being replaced) as each one's
    ``history``; a record that measured nothing is saved as it is."""
    saved: list[Record] = []
    continued, restarted = 0, []
    for record in records:
        new = comparable(record)
        if new is None or not isinstance(record, MeasurementRecord):
            saved.append(record)
            continue
        old = previous.records.get(new.key) if previous is not None else None
        if old is None or machine(old) != machine(new):
            saved.append(replace(record, history=()))
            continue
        change = compare(old, new, threshold=threshold, tests=len(previous.records)).change  # type: ignore[union-attr]
        if change in (Change.REGRESSION, Change.IMPROVEMENT):
            restarted.append(new.test)
            saved.append(replace(record, history=()))
            continue
        continued += 1
        saved.append(replace(record, history=old.runs[-(HISTORY_RUNS - 1) :]))
    return Appended(saved, continued, restarted)
