"""The legend under the report (pytest-benchmark's way): each term this run's output used, once,
in a line, and where the glossary tells more; a term no record used is left out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .records import MeasurementRecord, Record

#: where each term is told at more length
GLOSSARY = "docs/glossary.md"

#: each term: whether a record uses it, and what it means in a line (the glossary's first sentence)
TERMS: tuple[tuple[str, Callable[[MeasurementRecord], bool], str], ...] = (
    ("measured beside the kernel", lambda r: r.ceiling is not None,
     "the ceiling, re-measured by a short probe of the same resource run beside each measurement"),
    ("probe", lambda r: r.ceiling is not None,
     "that short copy (or FLOP loop) timed between the kernel's samples"),
    ("machine at X% of its best (of best)", lambda r: r.ceiling is not None,
     "the probe's rate now against the best it has shown here: below 100%, something slowed the machine"),
    ("calibrated", lambda r: r.ceiling is not None or r.bandwidth_source == "measured",
     "the ceilings `roofline calibrate` measured once on this machine and cached"),
    ("cold by rotation over N argument sets", lambda r: r.cold_method == "rotation",
     "each call takes the next of N copies of its arguments, together larger than the cache"),
    ("warm", lambda r: r.cache_state == "warm",
     "the data stays in a cache between calls, so the floor is that cache's bandwidth"),
)  # fmt: skip


def legend_lines(records: Sequence[Record]) -> list[str]:
    """``Legend:``, then a line for each term in :data:`TERMS` that a record used; none without."""
    measured = [r for r in records if isinstance(r, MeasurementRecord)]
    used = [(term, meaning) for term, uses, meaning in TERMS if any(map(uses, measured))]
    if not used:
        return []
    return [f"Legend ({GLOSSARY}):", *(f"  {term}: {meaning}" for term, meaning in used)]
