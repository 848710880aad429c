"""Cold or warm, and how: the cache plan (past the cache, rotation, or a flush that says why; warm on
request), and a bad cache state named."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_roofline.timing import rotation as rot
from pytest_roofline.timing.cache import check_cache_state, plan_cache

MiB = 2**20
LLC = 32 * MiB


@pytest.fixture(autouse=True)
def small_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rot, "MIN_CYCLE_BYTES", MiB)


def plan(
    state: str, fn: object, *args: object, op_bytes: float, setup: object = None, llc: int = MiB
) -> object:
    return plan_cache(
        state, op_bytes=op_bytes, llc_bytes=llc, fn=fn, args=args, kwargs=None,  # type: ignore[arg-type]
        setup=setup, free_bytes=lambda on_device: 10**12,  # type: ignore[arg-type]
    )  # fmt: skip


def test_cold_rotates_arrays_it_can_reach() -> None:
    x = np.ones(1024)
    p = plan("cold", np.negative, x, op_bytes=2 * x.nbytes)
    assert (p.state, p.method, p.flush, p.rewarm) == ("cold", "rotation", False, False)
    assert p.rotation is not None
    # and so does a setup that resets the arrays in place (it returns nothing)
    p = plan("cold", np.negative, x, op_bytes=2 * x.nbytes, setup=lambda: None)
    assert p.method == "rotation"
    assert p.rotation is not None
    assert p.rotation.reset is not None


@pytest.mark.parametrize(
    ("args", "setup", "why"),
    [
        ((), None, "not rotated: no array among the kernel's arguments"),
        ((np.ones(8),), lambda: ((np.ones(8),), {}), "not rotated: setup= returns each call's arguments"),
    ],
)
def test_cold_without_rotation_flushes_and_says_why(
    args: tuple[object, ...], setup: object, why: str
) -> None:
    p = plan("cold", lambda *a: None, *args, op_bytes=64, setup=setup)
    assert (p.method, p.rotation, p.flush, p.rewarm) == ("flush", None, True, False)
    assert p.note.startswith(why)


def test_an_op_past_the_cache_is_cold_with_neither() -> None:
    x = np.ones(8)
    p = plan("cold", lambda a: None, x, op_bytes=3 * LLC, llc=LLC)
    assert (p.method, p.rotation, p.flush, p.rewarm) == ("past-cache", None, False, False)
    assert p.note == "no flush needed: the op moves 3.0x the last-level cache"


def test_warm_neither_flushes_nor_rotates() -> None:
    p = plan("warm", lambda a: None, np.ones(8), op_bytes=64)
    assert (p.state, p.method, p.rotation, p.flush, p.rewarm) == ("warm", None, None, False, True)


@pytest.mark.parametrize("value", ["hot", "Cold", None, True])
def test_a_bad_cache_state_names_the_keyword(value: object) -> None:
    with pytest.raises(ValueError, match=r"cache must be 'cold' or 'warm'; got ") as info:
        check_cache_state(value)
    if value == "Cold":
        assert "did you mean 'cold'?" in str(info.value)
