"""The flush policy: flush only what could sit in the last-level cache, and say why."""

from __future__ import annotations

import pytest

from pytest_roofline.timing.flushing import NO_FLUSH_MULTIPLE, choose_flush

LLC = 32 * 2**20


@pytest.mark.parametrize(
    ("op_bytes", "flush", "past"),
    [
        (1e3, True, False),
        (LLC, True, False),
        (NO_FLUSH_MULTIPLE * LLC * 0.999, True, False),
        (NO_FLUSH_MULTIPLE * LLC, False, True),
        (10 * LLC, False, True),
    ],
)
def test_an_op_past_twice_the_cache_is_not_flushed(op_bytes: float, flush: bool, past: bool) -> None:
    choice = choose_flush(op_bytes, LLC)
    assert (choice.flush, choice.past_cache) == (flush, past)
    if not flush:
        assert choice.note.startswith("no flush needed: the op moves ")
        assert "x the last-level cache" in choice.note


@pytest.mark.parametrize("llc", [None, 0])
def test_an_unknown_cache_size_always_flushes(llc: int | None) -> None:
    choice = choose_flush(1e12, llc)
    assert (choice.flush, choice.past_cache) == (True, False)
