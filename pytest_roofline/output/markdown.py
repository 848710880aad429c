"""The run as a Markdown section, for ``$GITHUB_STEP_SUMMARY`` or ``--roofline-markdown``. No pytest here.

Misses, regressions and faster-than-light results lead, then inconclusive ones; every cell is escaped, so
a test id shows as it is (``|``, newlines, ``<``, backticks). Appended: other steps and tools write there too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

from ..machine import files
from ..model import units
from ..model.verdict import Verdict
from .comparison import Change, Comparison
from .records import DeviceRecord, MeasurementRecord, Record, shown_test

#: the table's order: what fails a test first
_RANK = {
    Verdict.MISS: 0,
    Verdict.FASTER_THAN_LIGHT: 0,
    Verdict.INCONCLUSIVE: 2,
    Verdict.PASS: 3,
    Verdict.SKIPPED: 4,
}
_FAILED = (Verdict.MISS, Verdict.FASTER_THAN_LIGHT)


def section(
    records: Sequence[Record],
    devices: Iterable[DeviceRecord],
    *,
    comparisons: Sequence[Comparison] = (),
    baseline: str | None = None,
    plot: str | None = None,
    against: str | None = None,
) -> str:
    """The whole section: heading, devices and ceilings, the table, the comparison's totals, the tests
    slower or faster than their base's versions (``against``: ``--roofline-against``'s REF), the plot."""
    lines = ["## pytest-roofline", ""]
    for device in devices:
        lines.append(f"**{_escape(device.name)}** ({device.kind}): DRAM {units.byte_rate(device.bandwidth)}")
        peaks = [p for p in device.peaks if not p.note.startswith("no ")]
        if peaks:
            from .table import max_clock_words

            figures = ", ".join(
                f"{p.precision} {p.unit} {units.flop_rate(p.flops)}"
                + ("" if p.at_max_clock is None else f" ({max_clock_words(p.at_max_clock)})")
                for p in peaks
            )
            lines.append(f"<br>peaks: {figures}")
        lines.append("")
    if not records:
        lines.append("No measurements.")
    else:
        from .table import summary_counts

        lines += _table(records, {c.key: c for c in comparisons} if comparisons else None)
        lines += ["", summary_counts(records)]
    if comparisons:
        vanished = [c.test for c in comparisons if c.change is Change.VANISHED]
        regressions = sum(c.change is Change.REGRESSION for c in comparisons)
        unsure = [c.test for c in comparisons if c.change is Change.INCONCLUSIVE]
        lines.append(f"<br>Against the baseline {_escape(baseline or '')}: {regressions} regression(s).")
        if unsure:
            named = ", ".join(_code(t, cell=False) for t in unsure)
            lines.append(
                f"<br>Inconclusive (a change the noise between runs could explain): {named}; "
                "`--roofline-against REF` measures the base beside the run."
            )
        if vanished:
            gone = ", ".join(_code(t, cell=False) for t in vanished)
            lines.append(f"<br>In the baseline, not measured now: {gone}.")
    if against:
        lines += _against(records, against)
    if plot:
        lines += ["", f"Roofline plot: {_code(plot, cell=False)} (upload it as an artifact to see it here)."]
    return "\n".join(lines) + "\n"


def _table(records: Sequence[Record], comparisons: Mapping[tuple[str, str], Comparison] | None) -> list[str]:
    headers = ["test", "op", "attained", "budget", "verdict"]
    if comparisons is not None:
        headers.append("vs baseline")
    rows = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]

    def rank(r: Record) -> int:
        compared = comparisons.get(r.key) if comparisons is not None else None
        regressed = compared is not None and compared.change is Change.REGRESSION
        return 1 if regressed and r.verdict is Verdict.PASS else _RANK.get(r.verdict, 3)

    for r in sorted(records, key=rank):
        attained = budget = ""
        if isinstance(r, MeasurementRecord):
            attained = "" if r.attained is None else units.percent(r.attained)
            budget = units.percent(r.min_fraction)
        verdict = f"**{r.verdict}**" if r.verdict in _FAILED else str(r.verdict)
        cells = [_code(shown_test(r)), _escape(r.label), attained, budget, verdict]
        if comparisons is not None:
            c = comparisons.get(r.key)
            text = c.summary() if c is not None else ""
            if c is not None and c.change is Change.INCONCLUSIVE:
                text += ": inconclusive"
            flagged = c is not None and c.change in (Change.REGRESSION, Change.INCONCLUSIVE)
            cells.append(f"**{_escape(text)}**" if flagged else _escape(text))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def _against(records: Sequence[Record], ref: str) -> list[str]:
    """The tests slower or faster than their base's versions, a row each, after their count."""
    compared = [r for r in records if isinstance(r, MeasurementRecord) and r.vs_base]
    changed = [r for r in compared if (r.vs_base or {}).get("verdict") in ("slower", "faster")]
    slower = sum((r.vs_base or {}).get("verdict") == "slower" for r in compared)
    lines = ["", f"Against {_code(ref, cell=False)}: {slower} slower, {len(changed) - slower} faster,"
             f" of {len(compared)} compared."]  # fmt: skip
    if changed:
        lines += ["", "| test | vs base | base | this run | pairs |", "|---|---|---|---|---|"]
        for r in sorted(changed, key=lambda r: (r.vs_base or {}).get("verdict") != "slower"):
            vs = r.vs_base or {}
            summary = _escape(str(vs.get("summary", "")))
            cells = [
                _code(shown_test(r)), f"**{summary}**" if vs.get("verdict") == "slower" else summary,
                units.percent(float(vs.get("base_attained") or 0)),
                units.percent(float(vs.get("head_attained") or 0)), str(vs.get("pairs", "")),
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return lines


#: what GitHub would read as markup outside a code span (``<`` and ``&`` become entities instead; a
#: ``>`` is markup only at the start of a line, which a cell never is; brackets only before ``(``)
_PUNCTUATION = frozenset("\\`*_|~$")


def _escape(text: str) -> str:
    """Text shown as it is in a table cell or a line of its own: no markup, no HTML, no line break."""
    out = []
    for before, char in zip(" " + _one_line(text), _one_line(text), strict=False):
        if char in _PUNCTUATION or (char == "(" and before == "]"):  # "](": a link; "[x]" alone is text
            out.append("\\" + char)
        else:
            out.append({"&": "&amp;", "<": "&lt;"}.get(char, char))  # no tag, no entity
    return "".join(out)


def _code(text: str, *, cell: bool = True) -> str:
    """A code span showing ``text`` as it is: everything in it is literal, but in a table ``cell`` a pipe
    still ends the cell unless escaped (GitHub takes ``\\|`` out before reading the span)."""
    inner = _one_line(text)
    fence = "`" * (max(map(len, re.findall("`+", inner)), default=0) + 1)
    if inner.startswith("`") or inner.endswith("`") or (inner.startswith(" ") and inner.endswith(" ")):
        inner = f" {inner} "  # one space each side is stripped: without it the fence would grow
    if cell:
        inner = inner.replace("|", "\\|")
    return f"{fence}{inner}{fence}"


def _one_line(text: object) -> str:
    return str(text).replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def append_section(path: str | os.PathLike[str], text: str) -> None:
    """Append ``text`` to the file at ``path`` (created if missing), after a blank line if it has content."""
    files.append(path, text, separator="\n")
