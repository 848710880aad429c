"""When to flush the cache before a sample: only when the kernel's own bytes could sit in it, below
:data:`NO_FLUSH_MULTIPLE` x the last-level cache this process sees (``Device.llc_bytes``, the
calibration's effective figure). Why: docs/cache.md ("Cold (the default)").
"""

from __future__ import annotations

from dataclasses import dataclass

#: an op moving at least this many times the last-level cache evicts its own data
NO_FLUSH_MULTIPLE = 2.0


@dataclass(frozen=True, slots=True)
class FlushChoice:
    flush: bool
    #: why, in words the report can show
    note: str
    #: whether the op's bytes are past the cache: it evicts its own data, so nothing needs warming
    past_cache: bool = False


def choose_flush(op_bytes: float, llc_bytes: int | None) -> FlushChoice:
    """Flush only when the op's bytes could still be in the last-level cache."""
    if llc_bytes and op_bytes >= NO_FLUSH_MULTIPLE * llc_bytes:
        note = f"no flush needed: the op moves {op_bytes / llc_bytes:.1f}x the last-level cache"
        return FlushChoice(False, note, past_cache=True)
    return FlushChoice(True, "")
