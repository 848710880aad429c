"""Cold by rotation: which arrays are copied, how many copies, when rotation gives way to a flush,
and the engine's untimed first cycle; a rotation planned on another thread leaves this one's copies
alone. Fake arrays stand in for GPU ones; nothing here is timed."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest
from fakes import FakeBackend, Run, in_threads

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing import rotation as rot
from pytest_roofline.timing.cache import CachePlan
from pytest_roofline.timing.copies import HostPool
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.rotation import (
    MAX_ROTATION_BYTES,
    MIN_CYCLE_BYTES,
    NoRotation,
    Rotation,
    cycle_target,
    plan_rotation,
)

MiB = 2**20
LLC = 1 * MiB  # small, so that tests copy little
PLENTY = 10**12  # free memory, bytes: no cap but MAX_ROTATION_BYTES


@pytest.fixture(autouse=True)
def small_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cycles of 1 MiB at least, not 64: the rules are the same, the copies cheap."""
    monkeypatch.setattr(rot, "MIN_CYCLE_BYTES", MiB)


def free(n: int | None) -> Any:
    return lambda on_device: n


class Calls:
    """A kernel that records the identity of every argument of every call."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, ...]] = []

    def __call__(self, *args: object, **kwargs: object) -> None:
        self.seen.append(tuple(id(a) for a in (*args, *kwargs.values())))


def plan(fn: Any, *args: object, kwargs: dict[str, object] | None = None, **kw: Any) -> Rotation | NoRotation:
    kw.setdefault("op_bytes", sum(getattr(a, "nbytes", 0) for a in (*args, *(kwargs or {}).values())))
    kw.setdefault("llc_bytes", LLC)
    kw.setdefault("free_bytes", free(PLENTY))
    return plan_rotation(fn, args, kwargs, **kw)


def rotating(r: Rotation | NoRotation) -> CachePlan:
    assert isinstance(r, Rotation), r
    return CachePlan("rotation", rotation=r)


def test_copies_cover_six_times_the_cache_and_each_call_takes_the_next() -> None:
    x, y, out = (np.ones(2**12) for _ in range(3))  # 96 KiB a set
    kernel = Calls()
    r = plan(kernel, x, y, kwargs={"out": out})
    assert isinstance(r, Rotation)
    assert r.set_bytes == 3 * 2**15
    assert r.copies == 64  # sets of 96 KiB: 6x the 1 MiB cache
    assert r.cycle_bytes >= cycle_target(LLC) == 6 * LLC
    for _ in range(2 * r.copies):
        r.kernel()
    # the caller's own arrays first, then a fresh copy of every input and output at every call
    assert kernel.seen[0] == (id(x), id(y), id(out))
    ids = {i for call in kernel.seen[: r.copies] for i in call}
    assert len(ids) == 3 * r.copies
    assert kernel.seen[r.copies :] == kernel.seen[: r.copies]  # then the cycle comes round again


def test_a_copy_has_the_values_and_the_layout_of_its_array() -> None:
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    got: list[np.ndarray[Any, Any]] = []
    r = plan(lambda a: got.append(a), fortran, llc_bytes=0)
    assert isinstance(r, Rotation)
    for _ in range(r.kernel.made):  # a cycle of 96-byte sets is made as the calls need it
        r.kernel()
    assert got[0] is fortran
    for copy in got[1:]:
        assert copy is not fortran
        assert copy.flags.f_contiguous
        assert not copy.flags.c_contiguous
        assert copy.strides == fortran.strides
        assert copy.dtype == fortran.dtype
        assert (copy == fortran).all()
        # as far past a cache line as the caller's: an access split across lines stays split
        assert copy.ctypes.data % 64 == fortran.ctypes.data % 64
    assert len({copy.ctypes.data for copy in got}) == r.kernel.made


def test_the_same_array_twice_is_the_same_copy_in_each_set() -> None:
    x = np.ones(1024)
    kernel = Calls()
    r = plan(kernel, x, x, kwargs={"out": x})  # np.add(x, x, out=x): in place, the op moves 3 x
    assert isinstance(r, Rotation)
    assert r.set_bytes == x.nbytes
    for _ in range(3):
        r.kernel()
    assert all(len(set(call)) == 1 for call in kernel.seen)
    assert len({call[0] for call in kernel.seen}) == 3


def test_partial_and_nested_arguments_are_rotated() -> None:
    w, x = np.ones(4096), np.ones(4096)
    seen: list[Any] = []
    fn = functools.partial(lambda *a, **k: seen.append((a, k)), w, scale=2.0)
    r = plan(fn, [x], op_bytes=w.nbytes + x.nbytes)
    assert isinstance(r, Rotation)
    assert r.set_bytes == w.nbytes + x.nbytes  # the partial's array counts
    r.kernel()
    r.kernel()
    # a list the kernel could change: one untimed call on the caller's own arguments came first
    (trial, _), (a0, k0), (a1, k1) = seen
    assert trial[1][0] is x
    assert a0[0] is w
    assert a0[1][0] is x
    assert a1[0] is not w
    assert a1[1][0] is not x
    assert isinstance(a1[1], list)
    assert k0 == k1 == {"scale": 2.0}


def test_a_closure_with_captured_arrays_is_not_rotated() -> None:
    x = np.ones(2**16)
    r = plan(lambda: x.sum(), op_bytes=x.nbytes)
    assert isinstance(r, NoRotation)
    assert "no array among the kernel's arguments" in r.reason
    # arguments that hold a fraction of the op's bytes: the rest is captured somewhere
    small = np.ones(16)
    r = plan(lambda s: x.sum() + s.sum(), small, op_bytes=x.nbytes + small.nbytes)
    assert isinstance(r, NoRotation)
    assert "out of reach" in r.reason


def test_a_strided_view_is_not_rotated() -> None:
    matrix = np.ones((64, 64))
    r = plan(lambda col: None, matrix[:, 3])
    assert isinstance(r, NoRotation)
    assert "argument 0 is a strided view" in r.reason


def test_memory_caps_the_copies() -> None:
    x = np.ones(2**14)  # 128 KiB: 48 copies for 6x a 1 MiB cache need 5.875 MiB more
    assert plan(lambda a: None, x, free_bytes=free(80 * MiB)).copies == 48  # type: ignore[union-attr]
    # 10% of 50 MiB free: 5 MiB, 39 more copies (40 would leave no room to align the first): a
    # cycle of 5 MiB, 5x the cache: fewer copies
    smaller = plan(lambda a: None, x, free_bytes=free(50 * MiB))
    assert isinstance(smaller, Rotation)
    assert smaller.copies == 40
    assert smaller.copy_bytes <= 5 * MiB
    # 10% of 30 MiB: 23 more copies, a cycle of 3 MiB, less than 4x the cache: a flush instead
    capped = plan(lambda a: None, x, free_bytes=free(30 * MiB))
    assert isinstance(capped, NoRotation)
    assert (
        capped.reason
        == "memory allows 3 MiB of copies, too few to cycle through 4x the 1 MiB cache in sets of 128 KiB"
    )
    big = plan(lambda a: None, np.ones(2**18), free_bytes=free(10 * MiB))  # 2 MiB: not one copy fits
    assert isinstance(big, NoRotation)
    assert rot.memory_cap(False, free(None)) == MAX_ROTATION_BYTES
    assert rot.memory_cap(True, free(10**13)) == MAX_ROTATION_BYTES


def test_a_small_or_unknown_cache_still_cycles_64_mib() -> None:
    assert 64 * MiB == MIN_CYCLE_BYTES
    assert rot.cycle_target(None) == rot.cycle_target(MiB // 8) == rot.MIN_CYCLE_BYTES  # (1 MiB here)
    assert rot.cycle_target(32 * MiB) == 192 * MiB


class FakeDeviceArray:
    """A GPU array as the rotation sees one: ``__cuda_array_interface__``, ``nbytes``, ``copy``."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "version": 3}
        self.copies = 0

    def copy(self, order: str = "C") -> FakeDeviceArray:
        self.copies += 1
        return FakeDeviceArray(self.nbytes)


def test_device_arrays_are_copied_by_their_own_method_within_the_devices_memory() -> None:
    a = FakeDeviceArray(32 * MiB)  # a decode GEMV's weights, on a GPU with a 50 MiB L2 (not copied here)
    asked: list[bool] = []

    def free_bytes(on_device: bool) -> int:
        asked.append(on_device)
        return 80 * 2**30

    r = plan(lambda w: None, a, op_bytes=a.nbytes, llc_bytes=50 * MiB, free_bytes=free_bytes)
    assert isinstance(r, Rotation)
    assert asked == [True]
    assert r.copies == 10  # 6 x 50 MiB over 32 MiB a copy
    assert a.copies == 9


def test_a_copy_that_fails_falls_back() -> None:
    class Broken(FakeDeviceArray):
        def copy(self, order: str = "C") -> FakeDeviceArray:
            raise RuntimeError("out of memory")

    r = plan(lambda w: None, Broken(MiB))
    assert isinstance(r, NoRotation)
    assert "copying the arrays failed (RuntimeError: out of memory)" in r.reason


def test_the_engine_runs_one_untimed_cycle_then_batches_cold_calls() -> None:
    x = np.ones(2**12)
    kernel = Calls()
    r = plan(kernel, x, llc_bytes=0)
    assert isinstance(r, Rotation)
    backend = FakeBackend(1e-8, resolution_s=1e-6)  # 10 ns calls: batched 10 000 to a sample
    m = measure(lambda: None, policy=Policy(warmup_s=0.0), backend=backend, cache=rotating(r))
    # every copy was called in the warm-up, before any sample (fresh copies are in the cache)
    assert m.warmup_calls >= r.copies
    assert len({call[0] for call in kernel.seen[: m.warmup_calls]}) == r.copies
    # a cold request with copies batches: each call of a batch is on its own copy, none flushed
    assert m.calls_per_sample > 1
    assert "flush" not in backend.events
    assert (m.cold_method, m.cache, m.rotation_copies) == ("rotation", "cold", r.copies)
    assert m.cache_note.startswith(f"cold by rotation over {r.copies} argument sets (1 MiB a cycle,")
    assert m.flushed is False


def test_a_rotation_planned_without_setup_refuses_one() -> None:
    r = plan(lambda a: None, np.ones(8))
    with pytest.raises(
        ValueError, match="exclude each other unless the rotation was planned with that setup"
    ):
        measure(lambda: None, setup=lambda: None, backend=FakeBackend(1e-3), cache=rotating(r))


def test_the_pool_is_reused_and_released() -> None:
    x = np.ones(2**12)
    assert isinstance(plan(lambda a: None, x, llc_bytes=0), Rotation)
    pool = HostPool.current()
    assert pool is not None
    assert isinstance(plan(lambda a: None, x, llc_bytes=0), Rotation)
    assert HostPool.current() is pool
    HostPool.release()
    assert HostPool.current() is None


def test_a_named_tuple_of_arrays_is_rotated_and_keeps_its_type() -> None:
    from typing import NamedTuple

    class Case(NamedTuple):
        a: np.ndarray[Any, Any]
        b: np.ndarray[Any, Any]
        label: str

    case = Case(np.ones(512), np.zeros(512), "gemm")
    seen: list[Case] = []
    r = plan(lambda c: seen.append(c), case, op_bytes=case.a.nbytes + case.b.nbytes)
    assert isinstance(r, Rotation)
    r.kernel()
    r.kernel()
    assert seen[0].a is case.a  # the caller's own arrays in the first set
    assert type(seen[1]) is Case
    assert seen[1].a is not case.a
    assert seen[1].label == "gemm"


def test_a_dataclass_of_weights_is_rotated_and_rebuilt_with_its_copies() -> None:
    """A model object (a dataclass of weights, nested) is rebuilt around each set, its other fields
    kept: a decode step's weights are the op's bytes, and a rotated step is cold in its data alone."""

    @dataclasses.dataclass(frozen=True)
    class Layer:
        w: np.ndarray[Any, Any]

    @dataclasses.dataclass(frozen=True)
    class Model:
        layers: tuple[Layer, ...]
        heads: int

    model = Model((Layer(np.ones(512)), Layer(np.ones(512))), heads=8)
    seen: list[Model] = []
    r = plan(lambda m: seen.append(m), model, op_bytes=2 * 4096)
    assert isinstance(r, Rotation)
    r.kernel()
    r.kernel()
    assert seen[0] is model  # the caller's own set first
    assert type(seen[1]) is Model
    assert type(seen[1].layers[1]) is Layer
    assert seen[1].heads == 8
    assert not np.shares_memory(seen[1].layers[1].w, model.layers[1].w)


def test_a_dataclass_is_copied_as_it_is_not_built_again() -> None:
    """Its constructor and ``__post_init__`` do not run for the copies: one that transposes its weight
    would hand the copies the weight transposed twice, an ``InitVar`` would be missing, an attribute
    set after it was made would be lost."""

    @dataclasses.dataclass(frozen=True)
    class Transposed:
        w: np.ndarray[Any, Any]
        scale: dataclasses.InitVar[float]
        steps: int = dataclasses.field(init=False, default=0)

        def __post_init__(self, scale: float) -> None:
            object.__setattr__(self, "w", self.w.T * scale)

    made = Transposed(np.ones((4, 128)), 2.0)
    object.__setattr__(made, "cached", "kept")
    seen: list[Transposed] = []
    r = plan(lambda m: seen.append(m), made, op_bytes=4096)
    assert isinstance(r, Rotation)
    r.kernel()
    r.kernel()
    copy = seen[1]
    assert copy is not made
    assert copy.w.shape == made.w.shape == (128, 4)
    assert (copy.w == 2.0).all()
    assert not np.shares_memory(copy.w, made.w)
    assert (copy.steps, copy.cached) == (0, "kept")  # type: ignore[attr-defined]


def test_a_dataclass_the_kernel_changes_or_that_holds_other_objects_is_not_rotated() -> None:
    @dataclasses.dataclass
    class State:
        w: np.ndarray[Any, Any]
        step: int = 0

    def advance(state: State) -> None:
        state.step += 1

    r = plan(advance, State(np.ones(512)), op_bytes=4096)
    assert isinstance(r, NoRotation)
    assert r.reason.startswith("the kernel changes argument 0 (a State), which each set's copy")

    @dataclasses.dataclass
    class Holder:
        w: np.ndarray[Any, Any]
        log: object

    r = plan(lambda h: None, Holder(np.ones(512), object()), op_bytes=4096)
    assert isinstance(r, NoRotation)
    assert "argument 0 (a Holder holding other objects) is passed as it is" in r.reason


def test_other_containers_are_passed_as_they_are() -> None:
    class Holder(list[object]):  # a subclass may need more than its items to be rebuilt
        pass

    held = Holder([np.ones(512)])
    r = plan(lambda h: None, held, op_bytes=4096)
    assert isinstance(r, NoRotation)
    assert "no array among the kernel's arguments" in r.reason


def test_a_cycle_too_long_to_run_untimed_is_replaced_by_one_flush() -> None:
    # 86 copies of a 15 ms GEMM would cost 1.3 s untimed: a flush evicts the fresh copies instead
    x = np.ones(2**12)
    kernel = Calls()
    r = plan(kernel, x, llc_bytes=0)
    assert isinstance(r, Rotation)
    assert r.copies == 32  # 1 MiB over 32 KiB
    backend = FakeBackend(15e-3)
    m = measure(lambda: None, policy=Policy(max_time_s=1.0), backend=backend, cache=rotating(r))
    # two warm-up calls, then the flush (an empty window), then the samples: every one on a copy
    # untouched since it was made
    assert m.warmup_calls == 2
    assert backend.events[:4] == ["window", "window", "flush", "window"]
    assert backend.runs[2] == Run(1, 1, True)
    assert m.cache_note.endswith("; a flush instead of the untimed first cycle (too long)")
    sampled = kernel.seen[2 : 2 + m.stats.n]
    assert len({call[0] for call in sampled}) == len(sampled)  # no copy twice before a cycle passed


def test_a_short_cycle_runs_untimed_in_full() -> None:
    x = np.ones(2**12)
    r = plan(Calls(), x, llc_bytes=0)
    assert isinstance(r, Rotation)
    backend = FakeBackend(1e-6)  # 32 calls of 1 µs: far below a tenth of the budget
    m = measure(lambda: None, policy=Policy(max_time_s=1.0), backend=backend, cache=rotating(r))
    assert m.warmup_calls >= r.copies
    assert "flush" not in backend.events


def test_a_few_bytes_would_need_too_many_copies_and_are_flushed_instead() -> None:
    r = plan(lambda a: None, np.ones(2), llc_bytes=32 * MiB)  # 16 bytes a set; 12M sets for 6x the cache
    assert isinstance(r, NoRotation)
    assert r.reason == (
        "262144 sets of 1 objects each (at most 262144 made), too few to cycle through 4x the 32 MiB cache"
        " in sets of 16 B"
    )
    assert isinstance(plan(lambda a: None, np.ones(0)), NoRotation)  # no bytes at all


class FakeTensor:
    """A PyTorch tensor as rotation sees one: DLPack, ``clone``, ``is_contiguous``, a device."""

    def __init__(self, nbytes: int, *, contiguous: bool = True, device: str = "cuda") -> None:
        self.nbytes = nbytes
        self.device = type("device", (), {"type": device})()
        self._contiguous = contiguous
        self.clones = 0

    def __dlpack__(self) -> object:
        return object()

    def is_contiguous(self) -> bool:
        return self._contiguous

    def clone(self) -> FakeTensor:
        self.clones += 1
        return FakeTensor(self.nbytes, device=self.device.type)


def test_tensors_are_cloned_on_their_device() -> None:
    t = FakeTensor(MiB)
    seen: list[bool] = []
    r = plan(lambda x: None, t, op_bytes=MiB, free_bytes=lambda on_device: seen.append(on_device) or 10**12)
    assert isinstance(r, Rotation)
    assert seen == [True]  # a CUDA tensor's copies count against the GPU's memory
    assert t.clones == r.copies - 1
    assert isinstance(plan(lambda x: None, FakeTensor(MiB, contiguous=False), op_bytes=MiB), NoRotation)


def test_an_object_speaking_no_array_protocol_is_not_an_array() -> None:
    class Opaque:
        nbytes = MiB

        def copy(self) -> Opaque:
            return Opaque()

    r = plan(lambda x: None, Opaque(), op_bytes=MiB)
    assert isinstance(r, NoRotation)
    assert "no array among the kernel's arguments" in r.reason


# -- another thread's rotation ---------------------------------------------------------------------


def test_a_rotation_planned_on_another_thread_leaves_this_ones_copies_alone() -> None:
    import numpy as np

    from pytest_roofline.timing.rotation import Rotation, plan_rotation

    def plan(array: np.ndarray[Any, Any], seen: list[float]) -> Rotation:
        kernel = functools.partial(lambda a: seen.append(float(a.sum())))
        rotation = plan_rotation(kernel, (array,), None, op_bytes=array.nbytes, llc_bytes=2**20)
        assert isinstance(rotation, Rotation)
        return rotation

    ones, zeros = np.ones(2**15), np.zeros(2**15)
    seen: list[float] = []
    mine = plan(ones, seen)
    in_threads(lambda: plan(zeros, []))  # while mine is still in use
    for _ in range(mine.copies):
        mine.kernel()
    assert seen == [ones.sum()] * mine.copies  # no copy of mine became one of the other thread's
    HostPool.release()
