"""What the terminal shows at the end of a run: the notes, the report table, the comparison with a
baseline, and where the files went. The process that shows the run calls :func:`write_summary` with
what the run gathered (:class:`.run_state.RunState`)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from .run_state import RunState


def write_summary(tr: pytest.TerminalReporter, state: RunState) -> None:
    """The notes, then (with ``--roofline-report``) the device headers and the table, colored by
    verdict; then what the run's gate and JSON file have to say. Every line but the table's rows
    (sized by :func:`table_width`) wraps to the terminal's width (``COLUMNS``, as pytest reads it)."""
    from .failing import terminal_width

    settings, records = state.settings, state.records
    width = terminal_width(tr.config)

    def write(line: str, **markup: bool) -> None:
        """``tr.write_line``, the line wrapped to pytest's width, continuations indented."""
        from ..output.wrapping import wrap

        for part in wrap(line, width, hang=4).splitlines():
            tr.write_line(part, **markup)

    if state.spread:
        write(f"roofline: {state.spread}")
    for note in dict.fromkeys(state.notes):
        write(f"roofline: {note}", yellow=True)
    if settings.report:
        _write_report(tr, state, write)
    elif records:  # no table, but a test's message (a miss, inconclusive, faster than light) used its terms
        from ..model.verdict import Verdict
        from ..output.legend import legend_lines

        if any(r.verdict in (Verdict.MISS, Verdict.INCONCLUSIVE, Verdict.FASTER_THAN_LIGHT) for r in records):
            for line in legend_lines(records):
                write(line)
    if settings.suggest:
        from ..output.suggestions import suggestion_lines

        for line in suggestion_lines(records):
            tr.write_line(line)  # unwrapped: each marker is pasted as it is
    if state.interruption and (settings.report or settings.json):
        write(
            f"roofline: the run was cut short ({state.interruption}): the measurements of the tests "
            "that did not finish are missing",
            yellow=True,
        )
    for line in state.gate.summary_lines():
        regression = line.startswith("  regression")
        write(line, red=regression, bold=regression)
    if settings.against:
        for line in against_lines(state):
            slower = " slower" in line and not line.startswith("roofline:")
            write(line, red=slower, bold=slower)
    for note in state.gate.notes:
        write(note, yellow=True)
    for error in state.gate.errors:
        write(error, red=True, bold=True)
    if state.json_error:
        write(state.json_error, red=True, bold=True)
    elif settings.json:
        write(f"roofline: wrote {len(records)} measurement(s) to {settings.json}")


def table_width() -> int | None:
    """The width the report's table fits: ``COLUMNS`` where it is set (as pytest reads it), else the
    terminal's; None where stdout is no terminal (a CI log scrolls: every column, whole test ids)."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    stdout = sys.__stdout__  # the process's own, as shutil.get_terminal_size reads it (not capture's)
    if stdout is None:
        return None
    try:
        return os.get_terminal_size(stdout.fileno()).columns or 80  # a terminal that reports no width: 80
    except (ValueError, OSError):  # a closed stdout, or no terminal
        return None


def _write_report(tr: pytest.TerminalReporter, state: RunState, write: Callable[..., None]) -> None:
    from ..model.verdict import Verdict
    from ..output.table import (
        format_device_headers,
        format_table,
        hidden_columns_note,
        ordered,
        skipped_notes,
        summary_counts,
    )  # fmt: skip

    settings, records, devices = state.settings, state.records, state.device_records.values()
    tr.write_sep("=", "roofline report")
    for line in format_device_headers(devices, records):
        write(line)
    if records:
        columns = settings.columns
        width = None if columns else table_width()
        lines = format_table(
            records, devices, width=width, columns=columns,
            clocks=settings.report_clocks, against=bool(settings.against),
        )  # fmt: skip
        for line in lines[:2]:
            tr.write_line(line, bold=True)
        for line, record in zip(lines[2:], ordered(records), strict=True):
            verdict = record.verdict
            failed = verdict in (Verdict.MISS, Verdict.FASTER_THAN_LIGHT)
            tr.write_line(
                line, red=failed, bold=failed, green=verdict is Verdict.PASS,
                yellow=verdict in (Verdict.SKIPPED, Verdict.INCONCLUSIVE),
            )  # fmt: skip
        for line in skipped_notes(records):
            write(line, yellow=True)
        if width is not None:
            hidden = hidden_columns_note(
                records, devices, width, clocks=settings.report_clocks, against=bool(settings.against)
            )
            if hidden:
                write(hidden)
        from ..output.legend import legend_lines

        for line in legend_lines(records):
            write(line)
    write(f"{summary_counts(records)}; mode {settings.mode}")


def against_lines(state: RunState) -> list[str]:
    """What ``--roofline-against`` found: the verdicts counted, then each test slower or faster than
    its base's version, and the base's tests this run has not (gone)."""
    from collections import Counter

    from ..output.records import MeasurementRecord

    compared = [r for r in state.records if isinstance(r, MeasurementRecord) and r.vs_base]
    counts = Counter(str((record.vs_base or {}).get("verdict", "?")) for record in compared)
    gone = list(state.gone_from_head)
    order = ("slower", "faster", "same", "undecided", "new")
    ranked = sorted(counts.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))
    said = ", ".join(f"{n} {verdict}" for verdict, n in ranked) or "nothing compared"
    lines = [f"roofline: against {state.settings.against}: {said}" + (f"; {len(gone)} gone" if gone else "")]
    for record in compared:
        vs = record.vs_base or {}
        if vs.get("verdict") in ("slower", "faster"):
            name = record.nodeid + (f" [{record.name}]" if record.name else "")
            lines.append(f"  {vs.get('verdict')} {name}: {vs.get('summary', '')}")
    lines.extend(f"  gone {nodeid}: in the base, not in this run" for nodeid in gone)
    return lines
