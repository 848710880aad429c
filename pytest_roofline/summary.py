"""What the terminal shows at the end of a run: the notes, the report table, the comparison with a
baseline, and where the files went. The process that shows the run calls :func:`write_summary`."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .session import RooflineSession


def write_summary(tr: pytest.TerminalReporter, session: RooflineSession) -> None:
    """The notes, then (with ``--roofline-report``) the device headers and the table, colored by
    verdict; then what the run's gate and JSON file have to say."""
    settings, records = session.settings, session.records
    for note in dict.fromkeys(session.notes):
        tr.write_line(f"roofline: {note}", yellow=True)
    if settings.report:
        _write_report(tr, session)
    if session.interruption and (settings.report or settings.json):
        tr.write_line(
            f"roofline: the run was cut short ({session.interruption}): the measurements of the tests "
            "that did not finish are missing",
            yellow=True,
        )
    for line in session.gate.summary_lines():
        regression = line.startswith("  regression")
        tr.write_line(line, red=regression, bold=regression)
    for note in session.gate.notes:
        tr.write_line(note, yellow=True)
    for error in session.gate.errors:
        tr.write_line(error, red=True, bold=True)
    if session.json_error:
        tr.write_line(session.json_error, red=True, bold=True)
    elif settings.json:
        tr.write_line(f"roofline: wrote {len(records)} measurement(s) to {settings.json}")


def _write_report(tr: pytest.TerminalReporter, session: RooflineSession) -> None:
    from .report import format_device_headers, format_table, ordered, skipped_notes, summary_counts

    settings, records, devices = session.settings, session.records, session.device_records.values()
    tr.write_sep("=", "roofline report")
    for line in format_device_headers(devices, records):
        tr.write_line(line)
    if records:
        columns = settings.columns
        width = None if columns else shutil.get_terminal_size().columns  # COLUMNS, as pytest reads it
        lines = format_table(records, devices, width=width, columns=columns)
        for line in lines[:2]:
            tr.write_line(line, bold=True)
        for line, record in zip(lines[2:], ordered(records), strict=True):
            verdict = record["verdict"]
            failed = verdict in ("MISS", "faster-than-light")
            tr.write_line(
                line, red=failed, bold=failed, green=verdict == "pass",
                yellow=verdict in ("skipped", "inconclusive"),
            )  # fmt: skip
        for line in skipped_notes(records):
            tr.write_line(line, yellow=True)
    tr.write_line(f"{summary_counts(records)}; mode {settings.mode}")
