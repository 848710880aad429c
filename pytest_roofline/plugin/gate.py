"""CI gating: each measurement against a baseline, this run saved as one, a step summary, a plot.

:class:`Gate` is a plugin the session registers beside itself. In the process that measures (a
serial run, or each pytest-xdist worker) :meth:`Gate.check` fails a test whose attained fraction
regressed against the baseline's record of it, inside that test. In the process that reports (a
serial run, or the controller) the run's records are compared once more as a whole, for the
report, the summary and the list of tests that vanished; then the run is saved, summarized and
drawn as asked.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from ..output.baseline import Baseline, BaselineError, comparable, load_baseline, refuse_interrupted
from ..output.comparison import HISTORY_RUNS, Change, Comparison, compare, compare_all, summary_line

if TYPE_CHECKING:
    from ..output.history import Appended
    from ..output.records import DeviceRecord, MeasurementRecord, Record
    from .options import SessionSettings

#: GitHub Actions' file of the step's Markdown summary
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


class Gate:
    """The baseline, the comparisons and the outputs CI reads; registered by the session."""

    def __init__(self, settings: SessionSettings, *, reporting: bool) -> None:
        self.settings = settings
        #: whether this process shows the run (not a pytest-xdist worker)
        self._reporting = reporting
        self._baseline: Baseline | None = None
        self.comparisons: list[Comparison] = []
        #: errors writing the outputs, shown with the summary (the run's status turns to failed)
        self.errors: list[str] = []
        #: what the summary says about the outputs that is not an error (a save that was skipped)
        self.notes: list[str] = []
        self._plot: str | None = None
        #: the baseline --roofline-save replaces, read now (its runs become the saved records' history)
        self._saved_before: Baseline | None = None
        if settings.save:
            self._saved_before = self._previous(os.path.expanduser(settings.save))
        if settings.compare:  # read once, now: a baseline deleted or moved mid-run changes nothing
            self._baseline = load_baseline(os.path.expanduser(settings.compare))
            if not settings.compare_interrupted:
                try:
                    refuse_interrupted(self._baseline, "--roofline-compare-interrupted")
                except BaselineError as exc:
                    raise pytest.UsageError(str(exc)) from None

    @property
    def baseline(self) -> Baseline | None:
        return self._baseline

    def check(self, record: MeasurementRecord) -> None:
        """Fail the current test if ``record`` regressed against its baseline record."""
        __tracebackhide__ = True
        c = self._compare(record)
        if c is not None and c.change is Change.REGRESSION:
            raise pytest.fail.Exception(f"roofline: regression: {c.message()}", pytrace=False)

    def suspects(self, record: MeasurementRecord) -> bool:
        """Whether ``record`` fell beyond the threshold against its baseline record: worth a second
        measurement before the verdict (a drop the machine caused for a moment does not last)."""
        c = self._compare(record)
        return c is not None and c.ratio is not None and c.ratio < 1 - c.threshold

    def _compare(self, record: MeasurementRecord) -> Comparison | None:
        baseline, new = self.baseline, comparable(record)
        if baseline is None or new is None:
            return None
        return compare(
            baseline.records.get(new.key), new, threshold=self.settings.regression,
            across_devices=self.settings.compare_across_devices, source=baseline.describe(),
            tests=len(baseline.records),
        )  # fmt: skip

    # - the end of the run, where it is shown -

    def finish(
        self,
        records: list[Record],
        devices: list[DeviceRecord],
        session: pytest.Session,
        *,
        interruption: str | None = None,
    ) -> None:
        """Compare, save, summarize and draw; called by the session once its records are complete.

        A run that measured nothing (``--roofline-mode off``, no marked test selected) saves no
        baseline: it would replace the old one with an empty one, and every later comparison would
        be ``new``. A run cut short (``interruption``) is saved marked so, as its JSON is."""
        if not self._reporting:
            return
        baseline = self.baseline
        if baseline is not None:
            measured = [r for r in map(comparable, records) if r is not None]
            self.comparisons = compare_all(
                baseline, measured, threshold=self.settings.regression,
                across_devices=self.settings.compare_across_devices,
            )  # fmt: skip
        save = self.settings.save
        if save and not any(comparable(r) is not None for r in records):
            self.notes.append(
                f"roofline: --roofline-save: nothing was measured, so {save} was not written (an old"
                " baseline there is kept)"
            )
        elif save:
            from ..output.history import append_runs
            from ..output.jsonfile import payload, write_json_atomic

            appended = append_runs(records, self._saved_before, threshold=self.settings.regression)
            saved = payload(appended.records, devices, interruption=interruption)
            path = os.path.expanduser(save)
            if self._write(session, "--roofline-save", lambda: write_json_atomic(path, saved)):
                self.notes.extend(_history_notes(save, appended))
        if self.settings.plot and records:
            from ..output.plot import draw

            old = baseline.records if baseline else None
            path = os.path.expanduser(self.settings.plot)
            if self._write(session, "--roofline-plot", lambda: draw(records, devices, path, baseline=old)):
                self._plot = path
        markdown = self.settings.markdown or (os.environ.get(STEP_SUMMARY) if records else None)
        if markdown:
            from ..output.markdown import append_section, section

            text = section(
                records, devices, comparisons=self.comparisons,
                baseline=baseline.describe() if baseline else None, plot=self._plot,
            )  # fmt: skip
            # GitHub's step summary was not asked for: failing to write it warns, it fails nothing
            self._write(
                session,
                "the Markdown summary",
                lambda: append_section(os.path.expanduser(markdown), text),
                fails=bool(self.settings.markdown),
            )

    def _write(self, session: pytest.Session, what: str, write: Any, *, fails: bool = True) -> bool:
        """Run ``write``; an error writing is the run's failure (``fails``), else a note."""
        try:
            write()
        except (OSError, ValueError) as exc:
            message = f"roofline: could not write {what}: {exc}"
            if not fails:
                self.notes.append(message)
                return False
            self.errors.append(message)
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return False
        return True

    def _previous(self, path: str) -> Baseline | None:
        """The baseline at ``path`` that a save will replace; None (and a note) when there is none to
        keep runs from."""
        if not os.path.exists(path):
            return None
        try:
            return load_baseline(path, "--roofline-save")
        except BaselineError as exc:
            self.notes.append(f"roofline: {exc}: no runs to append to, so the saved tests start anew")
            return None

    def summary_lines(self) -> list[str]:
        """What the terminal says of the comparison: the totals, then each regression and vanished test."""
        if not self.comparisons:
            return []
        source = self.baseline.describe() if self.baseline else ""
        lines = [f"roofline: {summary_line(self.comparisons)} ({source})"]
        for c in self.comparisons:
            if c.change is Change.REGRESSION:
                lines.append(f"  regression: {c.message()}")
            elif c.change is Change.VANISHED:
                lines.append(f"  vanished: {c.test} (in the baseline, not measured now)")
            elif c.change is Change.OTHER_DEVICE:
                lines.append(f"  {c.test}: {c.summary()}; --roofline-compare-across-devices compares it")
        return lines


def _history_notes(path: str, appended: Appended) -> list[str]:
    """What the save did to the runs the baseline keeps, when it kept any."""
    notes = []
    if appended.continued:
        notes.append(
            f"roofline: saved {path}: {appended.continued} tests keep their earlier runs (up to"
            f" {HISTORY_RUNS}; their median is the baseline, their spread its noise)"
        )
    if appended.restarted:
        notes.append(
            f"roofline: saved {path}: {len(appended.restarted)} tests changed beyond their noise and start"
            f" a new history: {', '.join(appended.restarted)}"
        )
    return notes
