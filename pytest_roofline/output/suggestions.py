"""``--roofline-suggest``: for each measurement whose op was inferred, the explicit marker that gives
the same floor, ready to paste over its test. No pytest here (the summary writes these lines)."""

from __future__ import annotations

from collections.abc import Sequence

from .records import MeasurementRecord, Record, shown_test


def suggestion_lines(records: Sequence[Record]) -> list[str]:
    """A heading, then per inferred measurement its test and the marker (none: no lines at all)."""
    lines: list[str] = []
    for record in records:
        if not isinstance(record, MeasurementRecord) or not record.inferred:
            continue
        inferred = record.inferred
        lines.append(
            f"{shown_test(record)}: {inferred.get('summary', '')} (tier {inferred.get('tier', '?')})"
        )
        lines.append(f"    {inferred.get('marker', '')}")
        if record.name:
            lines.append(
                f"    (a test with several roofline(...) calls: give the call named {record.name!r} these as"
                " keywords, op=... first, instead of a marker)"
            )
    if not lines:
        return []
    return ["roofline: the markers that pin what was inferred (paste each over its test):", *lines]
