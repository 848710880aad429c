"""Rotation never changes what the kernel computes or sees (issue 28, item 0): the caller's own
objects are the first set, and every other set is the same to the kernel (values, layout, flags,
kind, shared memory, containers), or the kernel is flushed and the reason says why.

Each case runs after a rotation of floats, so that the host pool holds old bytes (``pool``). Fake
arrays stand in for GPU ones; nothing here is timed on a real clock.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import weakref
from typing import Any

import numpy as np
import pytest
from fake_cupy import FakeCupy
from fake_torch import FakeParameter, FakeTensor, FakeTorch
from fakes import FakeBackend

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing import copies as copies_module
from pytest_roofline.timing import rotation as rot
from pytest_roofline.timing.arguments import check_has_data
from pytest_roofline.timing.cache import CachePlan, plan_cache
from pytest_roofline.timing.copies import HostPool, over_pool
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.rotation import NoRotation, Rotation, plan_rotation

MiB = 2**20
LLC = MiB


@pytest.fixture(autouse=True)
def pool() -> None:
    """Cycles of 1 MiB at least, and a pool that holds the bytes of a float rotation."""
    floats = np.random.default_rng(0).random(2**14) * 1e300  # pointers no object could have
    assert isinstance(plan(lambda a: None, floats, llc_bytes=8 * MiB), Rotation)


@pytest.fixture(autouse=True)
def small_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rot, "MIN_CYCLE_BYTES", MiB)


def plan(fn: Any, *args: object, kwargs: dict[str, object] | None = None, **kw: Any) -> Rotation | NoRotation:
    kw.setdefault("op_bytes", sum(getattr(a, "nbytes", 0) for a in (*args, *(kwargs or {}).values())))
    kw.setdefault("llc_bytes", LLC)
    kw.setdefault("free_bytes", lambda on_device: 10**12)
    return plan_rotation(fn, args, kwargs, **kw)


def cycle(r: Rotation | NoRotation) -> Rotation:
    """Call every set of ``r`` once."""
    assert isinstance(r, Rotation), r
    for _ in range(r.copies):
        r.kernel()
    return r


class Seen:
    """A kernel that keeps the arguments of every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))


# - objects: never over reused bytes -


OBJECTS_AFTER_FLOATS = """
import numpy as np
from pytest_roofline.timing.copies import HostPool
from pytest_roofline.timing.rotation import plan_rotation

floats = np.random.default_rng(0).random(2**16) * 1e300
plan_rotation(np.negative, (floats,), None, op_bytes=2 * floats.nbytes, llc_bytes=2**26)
{make}
seen = []
r = plan_rotation(lambda a: seen.append(a), (a,), None, op_bytes=a.nbytes, llc_bytes=2**20)
for _ in range(r.copies):
    r.kernel()
assert len(set(map(id, seen))) == r.copies > 2
assert list(seen[-1]) == list(a), "a copy's objects differ"
del r, seen
HostPool.release()
print("alive")
"""


@pytest.mark.parametrize(
    "make",
    [
        "a = np.array([float(i) for i in range(2**16)], dtype=object)",
        "a = np.zeros(2**15, dtype=[('x', 'f8'), ('tag', 'O')]); a['tag'] = 'label'",
    ],
    ids=["object", "structured-with-object"],
)
def test_an_array_of_objects_after_a_float_rotation_does_not_kill_the_interpreter(make: str) -> None:
    # in a subprocess: the bug was a segfault (exit 139) that lost the whole run
    script = textwrap.dedent(OBJECTS_AFTER_FLOATS).replace("{make}", make)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "alive"


def test_no_array_of_objects_is_ever_laid_over_pool_bytes() -> None:
    raw = np.zeros(64, dtype=np.uint8)
    with pytest.raises(TypeError, match="holds Python objects"):
        over_pool(raw, (8,), np.dtype(object), (8,))
    a = np.array([1, "x", None] * 1000, dtype=object)
    seen = Seen()
    cycle(plan(seen, a))
    assert all(list(args[0][:3]) == [1, "x", None] for args, _ in seen.calls)


# - what each set is -


def test_a_0d_array_stays_an_array(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rot, "MIN_CYCLE_BYTES", 2**16)
    x, s = np.arange(1000.0), np.zeros(())
    cycle(plan(np.sum, x, kwargs={"out": s}))  # a NumPy scalar: "return arrays must be of ArrayType"
    seen = Seen()
    cycle(plan(seen, s, llc_bytes=0))
    for (copy,), _ in seen.calls:
        assert isinstance(copy, np.ndarray)
        assert copy.shape == ()


def test_a_read_only_input_has_read_only_copies() -> None:
    x = np.ones(4096)
    x.flags.writeable = False
    seen = Seen()
    cycle(plan(seen, x))
    assert [args[0].flags.writeable for args, _ in seen.calls] == [False] * len(seen.calls)


def test_a_dense_array_in_any_axis_order_keeps_its_strides() -> None:
    x = np.ones((8, 16, 32)).transpose(2, 0, 1)  # dense, neither C nor Fortran
    seen = Seen()
    cycle(plan(seen, x))
    assert len(seen.calls) > 2
    assert all(args[0].strides == x.strides for args, _ in seen.calls)


def test_a_channels_last_tensor_is_rotated_with_its_strides() -> None:
    n, c, h, w = 4, 8, 16, 16
    t = FakeTensor((n, c, h, w), device="cpu", strides=(h * w * c, 1, w * c, c))  # dense, channels_last
    seen = Seen()
    r = cycle(plan(seen, t, op_bytes=t.nbytes))
    assert r.copies > 2
    assert all(args[0].stride() == t.stride() for args, _ in seen.calls)
    not_dense = FakeTensor((n, c, h, w), device="cpu", strides=(2 * h * w * c, 1, w * c, c))
    assert isinstance(plan(seen, not_dense, op_bytes=not_dense.nbytes), NoRotation)


# - the caller's objects, and containers -


def test_the_first_set_is_the_callers_own_objects() -> None:
    xs = [np.ones(512) for _ in range(4)]
    config = {"x": np.ones(512), "alpha": 2.0}
    seen = Seen()
    cycle(plan(seen, xs, config, op_bytes=5 * 4096))
    (first, _), (second, _) = seen.calls[1:3]  # after the one call that checks the containers
    assert first[0] is xs
    assert first[1] is config
    assert second[0] is not xs
    assert type(second[0]) is list
    assert second[1]["alpha"] == 2.0
    assert not any(np.shares_memory(a, b) for a, b in zip(second[0], xs, strict=True))


@pytest.mark.parametrize(
    ("kernel", "where"),
    [
        (lambda state, x: state.__setitem__("pos", state["pos"] + 1), "argument 0 (a dict)"),
        (lambda state, x: state["log"].append(x), "argument 0['log'] (a list)"),
    ],
    ids=["dict", "list"],
)
def test_a_container_the_kernel_changes_is_flushed_and_keeps_every_change(kernel: Any, where: str) -> None:
    state: dict[str, Any] = {"pos": 0, "x": np.ones(4096), "log": [np.ones(8)]}
    r = plan(kernel, state, np.ones(4096), op_bytes=2 * 32768)
    assert isinstance(r, NoRotation)
    assert r.reason == f"the kernel changes {where}, which each set's copy would keep apart from yours"
    p = plan_cache(
        "cold", op_bytes=2 * 32768, llc_bytes=LLC, fn=kernel, args=(state, np.ones(4096)), kwargs=None,
        setup=None, free_bytes=lambda on_device: 10**12,
    )  # fmt: skip
    assert (p.method, p.note) == ("flush", f"not rotated: {r.reason}")
    # flushed, every call reaches the caller's own container
    before = (state["pos"], len(state["log"]))
    policy = Policy(max_time_s=0.01)
    m = measure(kernel, state, np.ones(4096), policy=policy, backend=FakeBackend(1e-4), cache=p)
    assert (state["pos"] + len(state["log"])) - sum(before) == m.warmup_calls + m.stats.n


def test_a_numpy_scalar_is_a_value_not_an_array_to_copy() -> None:
    """A scalar is passed in a register: rotation copies the arrays beside it, as every other part of
    the package reads them (timing/arrays.py), and passes the scalar as it is."""
    from pytest_roofline.timing.arguments import scan_call

    x, y = np.ones(1000), np.zeros(1000)
    found, *_ = scan_call(np.multiply, (np.float64(2.0), x), {"out": y})
    assert found.places == ["argument 1", "kwargs['out']"]


def test_a_list_that_holds_itself_is_passed_as_it_is() -> None:
    """Its arrays are not copied (a copy could not hold itself), and the search ends (it recursed
    until it crashed)."""
    from pytest_roofline.timing.arguments import scan_call

    x = np.ones(1000)
    nest: list[object] = [x]
    nest.append(nest)
    check_has_data(print, (nest,), None)
    found, *_ = scan_call(print, (nest,), None)
    assert (found.arrays, found.kept) == ([], ["argument 0 (a list holding other objects)"])


def test_a_container_holding_other_objects_is_passed_as_it_is() -> None:
    class Config:
        pass

    held = [np.ones(4096), Config()]
    seen = Seen()
    r = plan(seen, held, np.ones(16384), op_bytes=32768 + 131072)
    assert isinstance(r, Rotation)  # the other argument holds most of the bytes
    cycle(r)
    assert all(args[0] is held for args, _ in seen.calls)
    r = plan(seen, held, op_bytes=32768)
    assert isinstance(r, NoRotation)
    assert "argument 0 (a list holding other objects) is passed as it is" in r.reason


# - arrays that share memory -


def test_an_output_that_is_a_view_of_an_input_stays_one_in_every_set() -> None:
    x = np.arange(4096.0)
    seen = Seen()
    cycle(plan(seen, x, x[...], x[1:], op_bytes=3 * x.nbytes))
    assert len(seen.calls) > 2
    for (a, b, c), _ in seen.calls:
        assert np.shares_memory(a, b)
        assert b.ctypes.data == a.ctypes.data
        assert c.ctypes.data == a.ctypes.data + 8
        assert (a == x).all()
    assert len({args[0].ctypes.data for args, _ in seen.calls}) == len(seen.calls)


def test_a_matrix_and_its_column_keep_their_overlap_and_strides() -> None:
    m = np.arange(64.0 * 64).reshape(64, 64)
    seen = Seen()
    cycle(plan(seen, m, m[:, 3], op_bytes=m.nbytes + 512))
    for (a, col), _ in seen.calls:
        assert col.strides == (512,)
        assert col.ctypes.data == a.ctypes.data + 24
        assert (col == m[:, 3]).all()


def test_a_torch_view_of_another_argument_is_flushed_saying_why() -> None:
    x = FakeTensor((64, 64), device="cpu")
    r = plan(Seen(), x, x.view(-1), op_bytes=2 * x.nbytes)
    assert isinstance(r, NoRotation)
    assert r.reason.startswith("argument 1 shares memory with argument 0 (a view of it?)")


# - what copying costs -


def test_copies_of_a_list_of_20000_arrays_are_never_made_when_too_many() -> None:
    made: list[object] = []
    real = copies_module.Unit.copier

    def copier(self: copies_module.Unit, n: int, pool: HostPool | None) -> copies_module.Copier:
        made.append(self)
        return real(self, n, pool)

    arrays = [np.ones(8) for _ in range(20_000)]
    seen = Seen()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(copies_module.Unit, "copier", copier)
        r = plan(seen, arrays, op_bytes=20_000 * 64, llc_bytes=32 * MiB)
    assert isinstance(r, NoRotation)
    assert r.reason == (
        "6 sets of 40002 objects each (at most 262144 made), too few to cycle through 4x the 32 MiB cache"
        " in sets of 1.2207 MiB"
    )
    assert made == []  # decided before a single copy
    assert seen.calls == []  # and before the call that checks the list


def test_copies_that_would_take_too_much_of_the_budget_are_not_made() -> None:
    now = [0.0]
    fills: list[tuple[int, int]] = []
    real = copies_module._PooledCopies.fill

    def fill(self: Any, start: int, stop: int) -> None:  # 10 ms a copy
        fills.append((start, stop))
        now[0] += 0.01 * (stop - start)
        real(self, start, stop)

    x = np.ones(2**14)  # 128 KiB: 48 sets for 6x the 1 MiB cache
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(copies_module._PooledCopies, "fill", fill)
        r = plan(lambda a: None, x, clock=lambda: now[0], budget_s=1.0)
        assert isinstance(r, NoRotation)
        assert r.reason == (
            "making 47 copies of the arguments would take about 470.0 ms, more than 25% of the 1000 ms"
            " time budget"
        )
        assert fills == [(0, 3)]  # the first sixteenth of the copies, then no more
        fine = plan(lambda a: None, x, clock=lambda: now[0], budget_s=2.0)
    assert isinstance(fine, Rotation)
    assert fine.made_s == pytest.approx(0.47)  # the copies are paid from the measurement's budget


def test_copies_filled_in_one_call_are_projected_from_a_share_of_them_not_one_set() -> None:
    # a pooled array's copies are one NumPy call: 10 ms of overhead a call, 0.1 ms a copy. From one
    # set, 47 sets would project to 47 x 10.1 ms, past a quarter of the budget; from a sixteenth of
    # them, 47 / 3 x 10.3 ms = 161 ms, which the copies do take (10 ms + 4.4 ms for the rest)
    now = [0.0]
    real = copies_module._PooledCopies.fill

    def fill(self: Any, start: int, stop: int) -> None:
        now[0] += 0.01 + 0.0001 * (stop - start)
        real(self, start, stop)

    x = np.ones(2**14)  # 128 KiB: 48 sets for 6x the 1 MiB cache
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(copies_module._PooledCopies, "fill", fill)
        r = plan(lambda a: None, x, clock=lambda: now[0], budget_s=1.0)
    assert isinstance(r, Rotation)
    assert r.made_s == pytest.approx(0.02 + 0.0047)


def test_the_memory_the_copies_take_is_reported_within_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rot, "MAX_ROTATION_BYTES", MiB)
    x = np.ones(int(0.68 * MiB) // 8)  # a set of 0.68 MiB: one copy fits 1 MiB, the cycle is 1.36 MiB
    r = plan(lambda a: None, x, llc_bytes=MiB // 4)  # 4x the cache: the least cycle, 1 MiB
    assert isinstance(r, Rotation)
    assert r.copies == 2
    assert r.copy_bytes <= MiB
    assert r.describe() == (
        "cold by rotation over 2 argument sets (1.35999 MiB a cycle, yours and 1 copy taking 696.375 KiB)"
    )


# - a GPU's arrays -


def test_a_cuda_tensor_that_requires_grad_is_copied_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy()
    FakeTorch(fake).install(monkeypatch)
    x = FakeTensor((256, 1024))
    weight = FakeParameter(FakeTensor((1024, 1024)))  # an nn.Parameter: it requires grad
    with pytest.raises(RuntimeError, match="requires grad"):
        weight.__cuda_array_interface__  # noqa: B018  (what hasattr does not swallow)
    check_has_data(Seen(), (x, weight), None)
    seen = Seen()
    r = cycle(plan(seen, x, weight, op_bytes=x.nbytes + weight.nbytes))
    copies = [args[1] for args, _ in seen.calls]
    assert copies[0] is weight
    for copy in copies[1:]:
        assert type(copy) is FakeParameter
        assert copy.requires_grad
        assert copy.is_leaf
        assert copy.data_ptr() != weight.data_ptr()
    assert ("synchronize", "torch:0") in fake.log  # the clones are done before anything is timed
    r.release()
    assert fake.log[-1] == ("empty_cache",)


def test_cupy_copies_are_made_on_the_arrays_own_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(device_count=2).install(monkeypatch)
    cupy = fake.cupy
    with cupy.cuda.Device(1):
        a = cupy.empty(2**17, dtype=np.float32)
    assert fake.current_device == 0
    seen = Seen()
    r = cycle(plan(seen, a, op_bytes=a.nbytes))
    assert {args[0].device.id for args, _ in seen.calls} == {1}
    assert set(fake.entries("copy")) == {("copy", 1, 1)}
    last_copy = max(i for i, e in enumerate(fake.log) if e[0] == "copy")
    assert ("synchronize", "device:1") in fake.log[last_copy:]
    r.release()
    assert fake.log[-1] == ("free_all_blocks", 1)  # GPU 1's pool: CuPy frees the current device's
    with pytest.raises(RuntimeError, match="released"):
        r.kernel()


# - setup -


def test_a_setup_that_resets_an_input_in_place_keeps_rotation() -> None:
    a0 = np.arange(4096.0)
    a = a0.copy()
    seen: list[bool] = []

    def kernel(x: np.ndarray[Any, Any]) -> None:
        seen.append(bool((x == a0).all()))  # every call starts from the reset values ...
        np.negative(x, out=x)  # ... and changes them in place

    def reset() -> None:
        np.copyto(a, a0)

    a *= 3  # setup runs before the copies are made: they start as it leaves the caller's array
    p = plan_cache(
        "cold", op_bytes=2 * a.nbytes, llc_bytes=LLC, fn=kernel, args=(a,), kwargs=None, setup=reset,
        free_bytes=lambda on_device: 10**12,
    )  # fmt: skip
    assert p.method == "rotation"
    m = measure(kernel, a, setup=reset, policy=Policy(max_time_s=0.05), backend=FakeBackend(1e-5), cache=p)
    assert len(seen) > 2 * p.rotation.copies  # type: ignore[union-attr]
    assert all(seen)
    assert m.calls_per_sample == 1
    assert "setup= resets your arrays after each call on them" in m.cache_note


def test_a_setup_that_returns_the_arguments_is_flushed_and_the_note_says_so() -> None:
    x = np.ones(4096)
    p = plan_cache(
        "cold", op_bytes=x.nbytes, llc_bytes=LLC, fn=lambda a: None, args=(), kwargs=None,
        setup=lambda: ((x,), {}), free_bytes=lambda on_device: 10**12,
    )  # fmt: skip
    assert p.method == "flush"
    assert p.note == "not rotated: no array among the kernel's arguments (a closure or lambda keeps its own)"
    p = plan_cache(
        "cold", op_bytes=x.nbytes, llc_bytes=LLC, fn=lambda a: None, args=(x,), kwargs=None,
        setup=lambda: ((x,), {}), free_bytes=lambda on_device: 10**12,
    )  # fmt: skip
    assert (p.method, p.note) == ("flush", "not rotated: setup= returns each call's arguments")


def test_a_plan_is_a_value_read_as_such() -> None:
    x = np.ones(4096)
    r = plan(lambda a: None, x)
    assert isinstance(r, Rotation)
    with pytest.raises(ValueError, match="a flush plan with rotation="):
        CachePlan("flush", rotation=r)
    with pytest.raises(ValueError, match="a rotation plan with rotation=None"):
        CachePlan("rotation")


# -- what the kernel returns ------------------------------------------------------------------------


def test_an_output_the_kernel_allocates_is_kept_until_a_cycle_of_them_is_made() -> None:
    # np.multiply(x, 2) allocates its output: freed at once, the next call's would land in the same
    # block, still in the cache, and be written faster than the floor's DRAM
    alive: set[int] = set()

    def scaled(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        out = a * 2
        alive.add(id(out))
        weakref.finalize(out, alive.discard, id(out))
        return out

    x = np.ones(2**16)  # 512 KiB in, 512 KiB out
    r = plan(scaled, x)
    assert isinstance(r, Rotation)
    kept = min(r.copies, math.ceil(rot.cycle_target(LLC) / x.nbytes))
    for calls in range(1, 3 * r.copies + 1):
        r.kernel()
        assert len(alive) == min(calls, kept)  # a cycle's worth of outputs, the oldest dropped
    r.release()
    assert not alive  # and none once the measurement is over


def test_a_kernel_that_returns_no_array_keeps_nothing() -> None:
    returned: list[object] = []

    def total(a: np.ndarray[Any, Any]) -> float:
        value = float(a.sum())
        returned.append(value)
        return value

    r = cycle(plan(total, np.ones(2**16)))
    assert len(returned) == r.copies  # each set called once, nothing else done with what came back
