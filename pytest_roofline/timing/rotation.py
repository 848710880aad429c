"""Cold by rotation: copies of the kernel's arrays, each call on the next copy.

The floor counts compulsory DRAM bytes, so a kernel is timed with its data out of the cache. A
flush before every call does that at the price of one call per sample and a pass over twice the
cache each time. Rotation does it for free, as rocBLAS-bench's and hipBLASLt-bench's ``--rotating``
and benchdnn's ``--cold-cache`` do: before sampling, enough copies of the kernel's array arguments
(inputs and outputs alike) are made that one cycle through them touches :data:`CYCLE_MULTIPLE` x the
last-level cache this process sees (the calibration's effective figure, not sysfs's: on a VM it can
be a tenth; at least :data:`MIN_CYCLE_BYTES`; at most :func:`memory_cap`, which must leave it
:data:`MIN_CYCLE_MULTIPLE` x the cache); each call takes
the next copy, so by the time a copy comes round again the cycle has pushed it out. A batch of k
calls is then k cold calls, and small kernels keep their cheap batched samples.

The arrays are found in the positional arguments, ``kwargs``' values and ``functools.partial``
arguments (also inside tuples, named tuples, lists and dicts there): anything with ``__array_interface__``,
``__cuda_array_interface__`` or ``__dlpack__`` and a ``copy`` (NumPy, CuPy) or ``clone`` (PyTorch)
method. The same array in two places is the same copy in each set. A copy keeps the array's
layout (C or Fortran order); an array that is neither (a strided view) cannot be copied without
changing how the kernel walks it, so it cannot be rotated.

Rotation does not apply (:func:`plan_rotation` says why, and the engine flushes instead) when the
arrays it can reach hold less than :data:`MIN_VISIBLE_SHARE` of the op's bytes (a closure or a
lambda with captured arrays, arguments that are not arrays), when an array is a strided view,
or when :func:`memory_cap` leaves too little for a cycle of :data:`MIN_CYCLE_MULTIPLE` x the cache.

Host copies are carved out of one buffer per thread (:func:`release_host_pool` frees it): on a VM,
first touching a fresh GiB costs most of a second in page faults, and a suite measures many kernels.
A rotation planned on one thread never carves over the copies another thread is calling.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidValueError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pytest_roofline.timing.base import Kernel

#: the shortest cycle, in multiples of the effective last-level cache, after which a rotated kernel's
#: time stops changing: every copy is out of the cache when its turn comes (``benchmarks/cold_cycle.py``
#: measures it; ``docs/methodology.md``); an op past twice the cache evicts its own data too
#: (:data:`~.flushing.NO_FLUSH_MULTIPLE`)
COLD_CYCLE_MULTIPLE = 2
#: the margin over it: a neighbour's data takes part of a shared cache, and a cycle just long enough
#: on a quiet machine leaves copies in it on a busy one
CYCLE_MARGIN = 2
#: so one cycle through the copies aims at this many times the effective last-level cache ...
CYCLE_MULTIPLE = COLD_CYCLE_MULTIPLE * CYCLE_MARGIN
#: ... and, where memory is short, touches no less than the shortest cold cycle
MIN_CYCLE_MULTIPLE = COLD_CYCLE_MULTIPLE
#: and at least this much (a small or unknown cache)
MIN_CYCLE_BYTES = 64 * 2**20
#: the copies take at most this much memory ...
MAX_ROTATION_BYTES = 2**30
#: ... and at most this share of the memory free on the device that holds them
MAX_FREE_SHARE = 0.10
#: the arrays rotated must hold at least this share of the op's bytes, or the rest is out of reach
MIN_VISIBLE_SHARE = 0.5
#: at most this many argument sets (each a few Python objects): a kernel of a few bytes would
#: need millions to cycle through the cache, and is flushed instead
MAX_COPIES = 1 << 18
#: host copies start on this boundary (a cache line), as a fresh allocation would
_ALIGN = 64


@dataclass(frozen=True, slots=True)
class Rotation:
    """A cycle of argument sets: :attr:`kernel` calls the kernel on the next set at every call."""

    kernel: Kernel
    #: argument sets in the cycle, the caller's own included
    copies: int
    #: bytes of the arrays in one set
    set_bytes: int
    #: seconds making the copies took (part of the measurement's cost)
    made_s: float = 0.0

    @property
    def cycle_bytes(self) -> int:
        return self.copies * self.set_bytes

    def describe(self) -> str:
        from pytest_roofline.model.units import binary_bytes

        return (
            f"cold by rotation over {self.copies} copies of the arguments ({binary_bytes(self.cycle_bytes)})"
        )


@dataclass(frozen=True, slots=True)
class NoRotation:
    """Why the kernel's arguments cannot be rotated, in words the report shows."""

    reason: str


def plan_rotation(
    fn: Kernel,
    args: Sequence[object],
    kwargs: Mapping[str, object] | None,
    *,
    op_bytes: float,
    llc_bytes: int | None,
    free_bytes: Callable[[bool], int | None] | None = None,
    clock: Callable[[], float] | None = None,
) -> Rotation | NoRotation:
    """Copies of the arrays in ``fn(*args, **kwargs)`` enough for one cycle to leave the cache cold.

    ``free_bytes(device)`` is the memory free on the host (False) or on the GPU (True), None when
    unknown (default: :func:`free_memory`). ``clock`` times the copying (:attr:`Rotation.made_s`;
    default: ``time.perf_counter``); growing the host pool, once a process, is not counted.
    """
    found = _Arrays()
    kernel, positional, keywords = found.scan_call(fn, args, kwargs)
    if found.strided:
        return NoRotation(f"{found.strided} is a strided view, which a copy would lay out differently")
    if not found.arrays:
        return NoRotation("no array among the kernel's arguments (a closure or lambda keeps its own)")
    set_bytes = sum(found.sizes)
    if set_bytes == 0:
        return NoRotation("the kernel's arrays hold no bytes")
    if found.used_bytes < MIN_VISIBLE_SHARE * op_bytes:  # an array passed twice counts twice, as in the op
        from pytest_roofline.model.units import binary_bytes

        return NoRotation(
            f"the kernel's array arguments hold {binary_bytes(found.used_bytes)} of the op's "
            f"{binary_bytes(int(op_bytes))}: the rest is out of reach (captured by a closure?)"
        )
    cap = memory_cap(found.on_device, free_bytes or free_memory)
    # the cycle aims at CYCLE_MULTIPLE x the cache, within what memory allows; a cycle of less than
    # MIN_CYCLE_MULTIPLE x the cache would find its copies still there when they come round again
    wanted = math.ceil(cycle_target(llc_bytes) / set_bytes)
    # the caller's own set is no new memory
    copies = max(2, min(wanted, cap // set_bytes + 1, MAX_COPIES))
    if (copies - 1) * set_bytes > cap or copies * set_bytes < MIN_CYCLE_MULTIPLE * (llc_bytes or 0):
        from pytest_roofline.model.units import binary_bytes

        limit = (
            f"{MAX_COPIES} copies" if copies == MAX_COPIES else f"memory allows {binary_bytes(cap)} of copies"
        )
        cache = binary_bytes(llc_bytes or 0)
        return NoRotation(
            f"{limit}, too few to cycle through {MIN_CYCLE_MULTIPLE}x the {cache} cache"
            f" in sets of {binary_bytes(set_bytes)}"
        )
    pooled = [size for array, size in zip(found.arrays, found.sizes, strict=True) if _pooled(array)]
    pool = _HostPool.get() if pooled else None
    if pool is not None:
        pool.reserve(sum(_padded(size * (copies - 1)) for size in pooled))
    clock = clock or time.perf_counter
    start = clock()
    try:  # per array, its copies: the caller's own first
        columns = [[array, *_copies(array, copies - 1, pool)] for array in found.arrays]
    except (TypeError, ValueError, RuntimeError, MemoryError) as exc:  # a copy() of the user's own kind
        return NoRotation(f"copying the arrays failed ({type(exc).__name__}: {exc})")
    calls = _calls(kernel, positional, keywords, columns, copies)
    return Rotation(kernel=_Rotating(calls), copies=copies, set_bytes=set_bytes, made_s=clock() - start)


def check_has_data(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None, *, given_by: str = ""
) -> None:
    """A ValueError naming the argument of ``fn(*args, **kwargs)`` that is a tensor with no data
    (PyTorch's meta device: a shape and a dtype, no storage), found where rotation finds arrays.

    The kernel would compute nothing on it, and be judged faster than light. ``given_by`` names who
    gave the arguments (``setup's ``).
    """
    found = _Arrays()
    found.scan_call(fn, args, kwargs)
    if found.meta:
        raise InvalidValueError(
            f"{given_by}{found.meta} is a tensor on the meta device: it has a shape but no data, so the"
            " kernel would compute nothing and its time would be no time at all; give it a tensor on the"
            " device to measure"
        )


def _calls(
    fn: _Template, args: _Sequence, kwargs: _Dict, columns: list[list[object]], copies: int
) -> list[Callable[[], object]]:
    """One bound call per argument set. Arguments that are arrays or plain values (no partial, list
    or dict holding arrays: the common case) are bound with one C-level partial per set; a tiny
    kernel's cycle has a hundred thousand of them."""
    flat = (
        isinstance(fn, _Constant)
        and all(isinstance(t, (_Slot, _Constant)) for t in args.items)
        and all(isinstance(t, (_Slot, _Constant)) for t in kwargs.items.values())
    )
    if not flat:
        sets = ([column[i] for column in columns] for i in range(copies))
        return [_bound(fn.build(arrays), args.build(arrays), kwargs.build(arrays)) for arrays in sets]

    def column(t: _Template) -> Iterable[object]:
        return columns[t.index] if isinstance(t, _Slot) else itertools.repeat(t.build([]))

    kernel, keys = fn.build([]), list(kwargs.items)
    # constants repeat without end: the arrays' columns, of ``copies`` each, end every zip
    arg_rows = zip(*map(column, args.items), strict=False) if args.items else itertools.repeat(())
    kw_rows = zip(*map(column, kwargs.items.values()), strict=False) if keys else itertools.repeat(())
    return [
        functools.partial(kernel, *row, **dict(zip(keys, kw, strict=True)))
        for row, kw in itertools.islice(zip(arg_rows, kw_rows, strict=False), copies)
    ]


def cycle_target(llc_bytes: int | None) -> int:
    """Bytes one cycle through the copies should touch, for a last-level cache of ``llc_bytes`` as the
    process sees it (``Device.llc_bytes``: the calibration's effective figure)."""
    return max(CYCLE_MULTIPLE * (llc_bytes or 0), MIN_CYCLE_BYTES)


def memory_cap(on_device: bool, free_bytes: Callable[[bool], int | None]) -> int:
    """What the copies may take: :data:`MAX_ROTATION_BYTES`, or less where memory is short."""
    free = free_bytes(on_device)
    return MAX_ROTATION_BYTES if free is None else min(MAX_ROTATION_BYTES, int(MAX_FREE_SHARE * free))


def free_memory(on_device: bool) -> int | None:
    """Bytes free on the host (``MemAvailable``) or on the current GPU (through the framework already
    loaded); None when it cannot be told."""
    if not on_device:
        try:
            with open("/proc/meminfo", encoding="ascii") as meminfo:
                for line in meminfo:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            return None
    try:  # the framework the arrays came from is loaded already; a driver that fails is "unknown"
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            return int(cupy.cuda.runtime.memGetInfo()[0])
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.mem_get_info()[0])
    except Exception:  # CUDA's and the frameworks' own error types
        return None
    return None


def release_host_pool() -> None:
    """Free this thread's host buffer that rotation copies are carved from (the session's end); another
    thread's goes when that thread ends."""
    _HostPool.local.pool = None


class _Rotating:
    """The kernel as rotation calls it: each call on the next argument set (the engine passes none)."""

    __slots__ = ("_next",)

    def __init__(self, calls: Sequence[Callable[[], object]]) -> None:
        self._next = itertools.cycle(calls).__next__

    def __call__(self, *_: object) -> object:
        return self._next()()


def _bound(fn: Kernel, args: tuple[object, ...], kwargs: dict[str, object]) -> Callable[[], object]:
    return functools.partial(fn, *args, **kwargs)


class _Arrays:
    """The arrays found while scanning the arguments, each once, with their sizes."""

    def __init__(self) -> None:
        self.arrays: list[object] = []
        self.sizes: list[int] = []
        self.on_device = False
        self.strided = ""
        #: the bytes of every place an array is passed, repeats included
        self.used_bytes = 0
        #: where the first tensor with no data is (``check_has_data``)
        self.meta = ""
        self._index: dict[int, int] = {}

    def scan_call(
        self, fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None
    ) -> tuple[_Template, _Sequence, _Dict]:
        """Templates of the kernel, its arguments and its keywords."""
        kernel = self.scan(fn, "the kernel")
        positional = _Sequence(tuple, [self.scan(arg, f"argument {i}") for i, arg in enumerate(args)])
        keywords = _Dict({key: self.scan(value, f"kwargs[{key!r}]") for key, value in (kwargs or {}).items()})
        return kernel, positional, keywords

    def scan(self, value: object, where: str) -> _Template:
        """A template that rebuilds ``value`` with other arrays in place of the ones found."""
        # duck typed (torch may not be installed): a torch.Tensor's is_meta, never a mock's attribute
        if not self.meta and not isinstance(value, type) and getattr(value, "is_meta", False) is True:
            self.meta = where or "an argument"
        if _is_array(value):
            key = id(value)
            self.used_bytes += _nbytes(value)
            if key not in self._index:
                if not _lays_out_alike(value):
                    self.strided = self.strided or (where or "an argument")
                self._index[key] = len(self.arrays)
                self.arrays.append(value)
                self.sizes.append(_nbytes(value))
                self.on_device = (
                    self.on_device or hasattr(value, "__cuda_array_interface__") or _on_gpu(value)
                )
            return _Slot(self._index[key])
        if isinstance(value, functools.partial):
            func = self.scan(value.func, where)
            args = [
                self.scan(arg, f"argument {i} of the functools.partial") for i, arg in enumerate(value.args)
            ]
            keywords = {
                k: self.scan(v, f"keyword {k!r} of the functools.partial") for k, v in value.keywords.items()
            }
            return _Partial(func, _Sequence(tuple, args), _Dict(keywords))
        if isinstance(value, (tuple, list)) and (type(value) in (tuple, list) or _is_namedtuple(value)):
            items = [self.scan(item, f"{where}[{i}]") for i, item in enumerate(value)]
            return _Sequence(type(value), items)
        if type(value) is dict:
            return _Dict({k: self.scan(v, f"{where}[{k!r}]") for k, v in value.items()})
        return _Constant(value)


class _Template:
    def build(self, arrays: Sequence[object]) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class _Slot(_Template):
    index: int

    def build(self, arrays: Sequence[object]) -> Any:
        return arrays[self.index]


@dataclass(frozen=True, slots=True)
class _Constant(_Template):
    value: object

    def build(self, arrays: Sequence[object]) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class _Partial(_Template):
    func: _Template
    args: _Template
    keywords: _Template

    def build(self, arrays: Sequence[object]) -> Any:
        return functools.partial(
            self.func.build(arrays), *self.args.build(arrays), **self.keywords.build(arrays)
        )


@dataclass(frozen=True, slots=True)
class _Sequence(_Template):
    kind: type
    items: list[_Template]

    def build(self, arrays: Sequence[object]) -> Any:
        built = [item.build(arrays) for item in self.items]
        return self.kind._make(built) if hasattr(self.kind, "_make") else self.kind(built)


@dataclass(frozen=True, slots=True)
class _Dict(_Template):
    items: dict[str, _Template]

    def build(self, arrays: Sequence[object]) -> Any:
        return {key: item.build(arrays) for key, item in self.items.items()}


def _is_namedtuple(value: object) -> bool:
    return isinstance(value, tuple) and callable(getattr(type(value), "_make", None))


def _is_array(value: object) -> bool:
    """An array a copy can be made of: it speaks an array protocol and has ``copy`` or ``clone``."""
    if isinstance(value, type):
        return False
    speaks = (
        hasattr(value, "__array_interface__")
        or hasattr(value, "__cuda_array_interface__")
        or hasattr(value, "__dlpack__")
    )
    return speaks and (callable(getattr(value, "clone", None)) or callable(getattr(value, "copy", None)))


def _on_gpu(value: object) -> bool:
    device = getattr(value, "device", None)  # torch: device(type='cuda', index=0)
    return getattr(device, "type", None) == "cuda"


def _nbytes(value: object) -> int:
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int) and not isinstance(nbytes, bool):
        return nbytes
    numel, size = getattr(value, "numel", None), getattr(value, "element_size", None)
    if callable(numel) and callable(size):  # torch before nbytes
        return int(numel()) * int(size())
    return 0


def _lays_out_alike(value: object) -> bool:
    """Whether a copy keeps the array's layout: C- or Fortran-contiguous (or no way to tell)."""
    flags = getattr(value, "flags", None)
    if flags is not None and hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous or flags.f_contiguous)
    contiguous = getattr(value, "is_contiguous", None)  # torch
    return bool(contiguous()) if callable(contiguous) else True


def _copies(array: object, n: int, pool: _HostPool | None) -> list[object]:
    """``n`` copies of ``array`` with its layout: for a plain NumPy array, one block carved from the
    host pool and filled by one broadcast copy; otherwise the array's own ``clone`` or ``copy``."""
    if pool is not None and _pooled(array):
        return [*pool.copies_of(array, n)]  # type: ignore[arg-type]
    clone = getattr(array, "clone", None)
    if callable(clone):
        return [clone() for _ in range(n)]  # torch keeps the strides of a dense tensor
    try:
        return [array.copy(order="K") for _ in range(n)]  # type: ignore[attr-defined]
    except TypeError:  # a copy() without an order
        return [array.copy() for _ in range(n)]  # type: ignore[attr-defined]


def _pooled(array: object) -> bool:
    """A plain NumPy array (not a subclass, whose copy must keep its class): copied into the pool."""
    return type(array).__module__ == "numpy" and type(array).__name__ == "ndarray"


def _padded(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


class _HostPool:
    """One host buffer, touched once, that copies are carved out of for the length of a measurement."""

    #: each thread's pool (``pool``): a new rotation reuses the last one's space, which only the thread
    #: that planned both knows to be free
    local = threading.local()

    def __init__(self) -> None:
        self._buffer: npt.NDArray[np.uint8] | None = None
        self._used = self._start = 0

    @classmethod
    def current(cls) -> _HostPool | None:
        """This thread's pool, if it has one."""
        pool: _HostPool | None = getattr(cls.local, "pool", None)
        return pool

    @classmethod
    def get(cls) -> _HostPool:
        pool = cls.current()
        if pool is None:
            pool = cls.local.pool = cls()
        pool._used = pool._start  # a new rotation: the last one's copies are not called
        return pool

    def reserve(self, nbytes: int) -> None:
        import numpy as np

        if self._buffer is None or self._buffer.nbytes < nbytes + _ALIGN:
            self._buffer = None  # freed before the larger one is made
            self._buffer = np.empty(nbytes + _ALIGN, dtype=np.uint8)
            self._buffer.fill(0)  # touched now: page faults are not the kernel's
            self._used = self._start = -self._buffer.ctypes.data % _ALIGN

    def copies_of(self, array: npt.NDArray[Any], n: int) -> list[npt.NDArray[Any]]:
        """``n`` copies of ``array``, its layout kept, side by side in the pool (as ``n`` fresh
        allocations in a row would be)."""
        import numpy as np

        assert self._buffer is not None, "reserve() first"
        start = self._used
        self._used += _padded(array.nbytes * n)
        raw = self._buffer[start : start + array.nbytes * n]
        fortran = array.flags.f_contiguous and not array.flags.c_contiguous
        shape = (n, *array.shape[::-1]) if fortran else (n, *array.shape)
        block: npt.NDArray[Any] = np.ndarray(shape, dtype=array.dtype, buffer=raw)
        if fortran:  # each copy Fortran-ordered: the copy's axes reversed
            block = block.transpose(0, *range(array.ndim, 0, -1))
        block[...] = array
        return list(block)
