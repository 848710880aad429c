"""A measurement's time budget: what fits in it, what may run past it (:data:`OVERRUN_SHARE`), and
what a flush costs on a backend (:func:`saw_flush`, :func:`expect_flush`, :func:`seen_flush_s`), by
which the engine chooses between rotation's untimed cycle and a flush. The rules and why:
docs/measurement.md ("The time budget").
"""

from __future__ import annotations

import contextlib
import math
import weakref

from pytest_roofline.timing.base import MIN_SAMPLES_FLOOR

__all__ = [
    "OVERRUN_SHARE",
    "WARMUP_SHARE",
    "expect_flush",
    "floor_fits",
    "samples_within",
    "saw_flush",
    "seen_flush_s",
]

#: a measurement's floor (its second warm-up call, :data:`MIN_SAMPLES_FLOOR` samples) may run past
#: its time budget by at most this share of it; past that it takes fewer, never less than one
#: warm-up call and one sample
OVERRUN_SHARE = 0.2

#: the warm-up runs for ``policy.warmup_s``, or this share of the budget where that is less
WARMUP_SHARE = 0.25

#: the least a flush took on a backend, per backend object (one that cannot be weakly referenced
#: is not remembered) ...
_FLUSH_S: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()
#: ... and, before its first, what one is expected to cost
_EXPECTED_S: weakref.WeakKeyDictionary[object, float] = weakref.WeakKeyDictionary()


def floor_fits(elapsed_s: float, call_s: float, max_time_s: float) -> bool:
    """Whether, after ``elapsed_s`` and one warm-up call costing ``call_s``, a second warm-up call and
    the floor's samples (at about the same cost each) end within the budget and its overrun."""
    return elapsed_s + call_s * (1 + MIN_SAMPLES_FLOOR) <= (1 + OVERRUN_SHARE) * max_time_s


def samples_within(n: int, wanted: int, left_s: float, per_sample_s: float, max_time_s: float) -> int:
    """Of ``wanted`` more samples, after ``n``, how many to take with ``left_s`` of the budget left
    (negative: already past it), each costing about ``per_sample_s``: those expected to end within
    the budget; up to the floor of :data:`MIN_SAMPLES_FLOOR`, those that run past it by at most
    :data:`OVERRUN_SHARE` of ``max_time_s`` together, past what a first call that paid a one-off (a
    compilation) already overran it by; and at least one sample in all."""
    if per_sample_s <= 0:
        return max(wanted, MIN_SAMPLES_FLOOR - n, 1 - n, 0)
    size = min(wanted, max(_count(left_s / per_sample_s), 0))
    if n + size < MIN_SAMPLES_FLOOR:
        over = _count((max(left_s, 0.0) + OVERRUN_SHARE * max_time_s) / per_sample_s)
        size = max(size, min(MIN_SAMPLES_FLOOR - n, over))
    return max(size, 1 - n, 0)


def saw_flush(backend: object, flush_s: float) -> None:
    """A flush on ``backend`` took ``flush_s`` (wall time, outside any window)."""
    if math.isfinite(flush_s) and flush_s >= 0:
        known = _get(_FLUSH_S, backend)
        _put(_FLUSH_S, backend, flush_s if known is None else min(known, flush_s))


def expect_flush(backend: object, flush_s: float) -> None:
    """Before a flush on ``backend`` was seen, expect one to take ``flush_s``."""
    if math.isfinite(flush_s) and flush_s >= 0:
        _put(_EXPECTED_S, backend, flush_s)


def seen_flush_s(backend: object) -> float | None:
    """The least a flush has taken on ``backend`` in this process, or before its first what one is
    expected to take; None where neither is known."""
    seen = _get(_FLUSH_S, backend)
    return seen if seen is not None else _get(_EXPECTED_S, backend)


def _get(known: weakref.WeakKeyDictionary[object, float], backend: object) -> float | None:
    try:
        return known.get(backend)
    except TypeError:  # not weakly referenceable: nothing is remembered
        return None


def _put(known: weakref.WeakKeyDictionary[object, float], backend: object, flush_s: float) -> None:
    with contextlib.suppress(TypeError):  # not weakly referenceable: nothing is remembered
        known[backend] = flush_s


def _count(x: float) -> int:
    """``math.floor`` of a count, with a tolerance: 2.9999999999 samples are 3."""
    return math.floor(x + 1e-9) if math.isfinite(x) else (0 if x < 0 else 1 << 62)
