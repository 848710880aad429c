"""CI gating: each measurement against a baseline, this run saved as one, a step summary, a plot.

:class:`Gate`, registered beside the session, fails a regressed test inside it where it is measured;
where the run is reported it compares the whole run once more (for the report, the summary and the
vanished tests), then saves, summarizes and draws it. docs/ci.md ("The saved baseline").
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

import pytest

from ..output.baseline import Baseline, BaselineError, refuse_interrupted
from ..output.comparison import Change, Comparison, RegressionRule, other_gpu_lines, summary_line

if TYPE_CHECKING:
    from collections.abc import Collection

    from ..output.records import DeviceRecord, MeasurementRecord, Record
    from ..output.store import RunFile
    from .options import BaselinePath, SessionSettings

#: GitHub Actions' file of the step's Markdown summary
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


class Gate:
    """The baseline, the comparisons and the outputs CI reads; registered by the session."""

    def __init__(self, settings: SessionSettings, *, reporting: bool) -> None:
        self.settings = settings
        #: what a regression is: the rule ``roofline compare`` asks too
        self.rule = RegressionRule(settings.regression, settings.compare_across_devices)
        #: whether this process shows the run (not a pytest-xdist worker)
        self._reporting = reporting
        #: the baseline of --roofline-compare, None without one
        self.baseline: Baseline | None = None
        self.comparisons: list[Comparison] = []
        #: errors writing the outputs, shown with the summary (the run's status turns to failed)
        self.errors: list[str] = []
        #: what the summary says about the outputs that is not an error (a save that was skipped)
        self.notes: list[str] = []
        self._plot: str | None = None
        #: the baseline --roofline-save merges into, read now: what it cannot read is a usage error
        #: before any test runs, and the file stays as it is (read again at the end, as it is then)
        self._store: RunFile | None = None
        if settings.save and reporting:
            from ..output.store import read_store

            try:
                self._store = read_store(os.path.expanduser(settings.save))
            except BaselineError as exc:
                raise pytest.UsageError(
                    f"--roofline-save: {exc}; a save merges into the baseline at its path, so it must read"
                    " it: fix the file, or save to another path"
                ) from None
            if self._store is not None:
                self.notes.extend(f"roofline: {note}" for note in self._store.baseline.notes)
        if settings.compare:  # read once, now: a baseline deleted or moved mid-run changes nothing
            compare = os.path.realpath(os.path.expanduser(settings.compare))
            if self._store is not None and os.path.realpath(self._store.path) == compare:
                self.baseline = self._store.baseline  # the save's file, as the save read it
            else:
                # as the option read it when it checked it (:func:`.options.parse_baseline_path`)
                self.baseline = cast("BaselinePath", settings.compare).baseline
            # a compared file that is the save's too had its notes said with the store's
            if reporting and (self._store is None or self.baseline is not self._store.baseline):
                self.notes.extend(f"roofline: {note}" for note in self.baseline.notes)
            if not settings.compare_interrupted:
                try:
                    refuse_interrupted(self.baseline, "--roofline-compare-interrupted")
                except BaselineError as exc:
                    raise pytest.UsageError(str(exc)) from None

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
        return c is not None and c.ratio is not None and self.rule.dropped(c.ratio)

    def _compare(self, record: MeasurementRecord) -> Comparison | None:
        baseline, new = self.baseline, record.comparable
        if baseline is None or new is None:
            return None
        return self.rule.compare(
            baseline.record_for(new), new, source=baseline.describe(), tests=len(baseline.records)
        )

    # - the end of the run, where it is shown -

    def finish(
        self,
        records: list[Record],
        devices: list[DeviceRecord],
        session: pytest.Session,
        *,
        interruption: str | None = None,
        deselected: Collection[str] = (),
    ) -> None:
        """Compare, save, summarize and draw; called by the session once its records are complete.

        A baseline test not measured now is ``vanished``, unless it was ``deselected`` (``-k``, a
        shard), the run was cut short before it or measured nothing (``--roofline-mode off``): then
        it is ``not run``. A run that measured nothing (``--roofline-mode off``, no marked test
        selected) saves nothing; a save merges the run into the baseline (:mod:`..output.store`).
        """
        if not self._reporting:
            return
        baseline = self.baseline
        if baseline is not None:
            measured = [r.comparable for r in records if r.comparable is not None]
            not_run = set(deselected)
            if interruption is not None or self.settings.mode == "off":  # not run, not vanished
                not_run.update(nodeid for nodeid, _ in baseline.records)
            self.comparisons = self.rule.compare_all(baseline, measured, not_run=not_run)
        save = self.settings.save
        if save and not any(r.comparable is not None for r in records):
            self.notes.append(
                f"roofline: --roofline-save: nothing was measured, so {save} was not written (an old"
                " baseline there is kept)"
            )
        elif save:
            self._save(os.path.expanduser(save), records, devices, session, interruption)
        if self.settings.plot and records:
            from ..output.plot import draw

            # each test's arrow starts from the record it was compared with (its own device's)
            old = {c.key: c.old for c in self.comparisons if c.old is not None} if baseline else None
            path = os.path.expanduser(self.settings.plot)
            if self._write(session, "--roofline-plot", lambda: draw(records, devices, path, baseline=old)):
                self._plot = path
        markdown = self.settings.markdown or (os.environ.get(STEP_SUMMARY) if records else None)
        if markdown:
            from ..output.markdown import append_section, section

            text = section(
                records, devices, comparisons=self.comparisons,
                baseline=baseline.describe() if baseline else None, plot=self._plot,
                against=self.settings.against,
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
            if fails:
                self._fail(session, message)
            else:
                self.notes.append(message)
            return False
        return True

    def _fail(self, session: pytest.Session, message: str) -> None:
        """An output that could not be written: the error shows with the summary, the run fails."""
        self.errors.append(message)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _save(
        self, path: str, records: list[Record], devices: list[DeviceRecord], session: pytest.Session,
        interruption: str | None,
    ) -> None:  # fmt: skip
        """Merge the run into the baseline at ``path`` as it is now (another run may have saved into it
        since this one began), and write it whole; a measurement that regressed replaces nothing
        unless ``--roofline-accept`` says so."""
        from ..output.jsonfile import write_json_atomic
        from ..output.store import merge_run, read_store

        try:
            store = read_store(path) if os.path.exists(path) else self._store
        except BaselineError as exc:
            self._fail(session, f"roofline: --roofline-save: {exc}; {path} was left as it is")
            return
        regressed = {c.key for c in self.comparisons if c.change is Change.REGRESSION}
        saved = merge_run(
            store, records, devices, path=self.settings.save or path, threshold=self.rule.threshold,
            interruption=interruption, regressed=regressed, accept=self.settings.accept,
        )  # fmt: skip
        data = saved.payload()
        if self._write(session, "--roofline-save", lambda: write_json_atomic(path, data)):
            self.notes.extend(f"roofline: {line}" for line in saved.lines())

    def summary_lines(self) -> list[str]:
        """What the terminal says of the comparison: the totals, then every test of each class but
        unchanged, named."""
        if not self.comparisons:
            return []
        source = self.baseline.describe() if self.baseline else ""
        if self.settings.mode == "off":
            return [f"roofline: --roofline-mode=off measures nothing, so nothing was compared: the"
                    f" baseline's {len(self.comparisons)} test(s) not run ({source})"]  # fmt: skip
        lines = [f"roofline: {summary_line(self.comparisons)} ({source})"]
        lines += [f"roofline: {line}" for line in other_gpu_lines(self.comparisons)]
        for c in self.comparisons:
            if c.change is Change.REGRESSION:
                lines.append(f"  regression: {c.message()}")
            elif c.change is Change.VANISHED:
                lines.append(f"  vanished: {c.test} (in the baseline, not measured now)")
            elif c.change is Change.OTHER_DEVICE:
                lines.append(f"  {c.test}: {c.summary()}; --roofline-compare-across-devices compares it")
            elif c.change is Change.INCONCLUSIVE and c.ratio is not None and c.ratio < 1:
                lines.append(
                    f"  inconclusive: {c.test}: {c.summary()}, within what runs of unchanged code move"
                    f" (±{c.run_noise * 100:.0f}% a run{', assumed' if c.runs <= 1 else ''})"
                )
            elif c.change in (Change.INCONCLUSIVE, Change.IMPROVEMENT):
                lines.append(f"  {c.change}: {c.test}: {c.summary()}")
            elif c.change in (Change.NEW, Change.NOT_RUN):
                lines.append(f"  {c.test}: {c.summary()}")
        if any(c.change is Change.INCONCLUSIVE and (c.ratio or 1) < 1 for c in self.comparisons):
            lines.append(
                "roofline: one saved run cannot tell such a drop from the machine's noise between runs;"
                " --roofline-against REF measures the base beside this run, in turns (docs/ci.md)"
            )
        return lines
