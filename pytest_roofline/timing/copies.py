"""Copies of a kernel's arrays for rotation (:mod:`.rotation`), each the same to the kernel as the
caller's: its values, its layout, its flags, its kind. What is copied as one is a :class:`Unit` (an
array, or arrays whose memory overlaps); plain NumPy arrays are carved out of a host buffer
(:class:`HostPool`). How each kind is copied, and why: docs/cache.md ("Rotation").
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .arrays import Layout, c_strides, gpu_of, is_torch, layout_of, nbytes_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: host copies start at the same offset from this boundary (a cache line) as the caller's array
ALIGN = 64
#: arrays that share memory are copied as the bytes they span when they cover at least this share of
#: it (``x`` and ``x[...]``, a matrix and one of its columns); a few sparse views of a large buffer
#: are not
MIN_SPAN_COVER = 0.5


def padded(nbytes: int, unit: int = ALIGN) -> int:
    """``nbytes`` rounded up to a whole number of ``unit`` (a cache line, or :data:`SHARED_CHUNK`)."""
    return -(-nbytes // unit) * unit


def pooled(array: object) -> bool:
    """A plain NumPy array (not a subclass, whose copy must keep its class) with no Python objects in
    it: carved out of the pool."""
    kind = type(array)
    if kind.__module__ != "numpy" or kind.__name__ != "ndarray":
        return False
    return not array.dtype.hasobject  # type: ignore[attr-defined]


class Unit:
    """An array, or arrays whose memory overlaps, copied as one (:func:`units_of`)."""

    def __init__(
        self, members: Sequence[int], arrays: Sequence[object], span: tuple[int, int] | None
    ) -> None:
        #: the indexes of the arrays, in the order they were found
        self.members = tuple(members)
        self.arrays = tuple(arrays)
        #: the bytes ``[low, high)`` a group spans (None for one array)
        self.span = span
        self.nbytes = span[1] - span[0] if span is not None else nbytes_of(arrays[0])
        self.pooled = all(pooled(array) for array in arrays)

    def footprint(self, n: int) -> int:
        """The memory ``n`` copies take: in the pool, each padded to a cache line."""
        return n * padded(self.nbytes) + ALIGN if self.pooled else n * self.nbytes

    def copier(self, n: int, pool: HostPool | None) -> Copier:
        if self.span is not None:
            assert pool is not None, "a group is copied in the pool"
            return _GroupCopies(self, n, pool)
        if self.pooled:
            assert pool is not None, "a plain NumPy array is copied in the pool"
            return _PooledCopies(self.arrays[0], n, pool)  # type: ignore[arg-type]
        return _OwnCopies(self.arrays[0])


def units_of(arrays: Sequence[object], places: Sequence[str]) -> list[Unit] | str:
    """The arrays, grouped where their memory overlaps; or why they cannot be copied as they are (a
    strided view, arrays of other kinds that share memory)."""
    layouts = [layout_of(array) for array in arrays]
    spans: list[tuple[int, int, int, int]] = []  # (memory: -1 the host's, or a GPU's), low, high, index
    groups: list[list[int]] = []
    for i, (array, layout) in enumerate(zip(arrays, layouts, strict=True)):
        extent = layout.extent() if layout is not None else None
        if extent is None:  # no memory, or none we can tell: its own
            groups.append([i])
        else:
            gpu = gpu_of(array)
            spans.append((-1 if gpu is None else gpu, *extent, i))
    spans.sort()
    high = 0
    for n, (space, low, end, i) in enumerate(spans):
        if n and space == spans[n - 1][0] and low < high:
            groups[-1].append(i)
            high = max(high, end)
        else:
            groups.append([i])
            high = end
    units: list[Unit] = []
    for members in groups:
        unit = _unit(members, arrays, layouts, places)
        if isinstance(unit, str):
            return unit
        units.append(unit)
    return sorted(units, key=lambda u: u.members[0])


def _unit(
    members: list[int], arrays: Sequence[object], layouts: Sequence[Layout | None], places: Sequence[str]
) -> Unit | str:
    members.sort()
    first = members[0]
    if len(members) == 1:
        layout = layouts[first]
        if not (layout.dense if layout is not None else _contiguous(arrays[first])):
            return f"{places[first]} is a strided view, which a copy would lay out differently"
        return Unit(members, [arrays[first]], None)
    other = members[1]
    if not all(pooled(arrays[i]) for i in members):
        return (
            f"{places[other]} shares memory with {places[first]} (a view of it?), and copies of a"
            f" {type(arrays[other]).__name__} cannot keep that"
        )
    extents = [layouts[i].extent() for i in members]  # type: ignore[union-attr]
    low = min(e[0] for e in extents if e is not None)
    high = max(e[1] for e in extents if e is not None)
    if sum(nbytes_of(arrays[i]) for i in members) < MIN_SPAN_COVER * (high - low):
        return f"{places[first]} and {places[other]} are strided views, sparse in the memory they span"
    return Unit(members, [arrays[i] for i in members], (low, high))


def _contiguous(array: object) -> bool:
    """An array whose layout cannot be read: contiguous if it says so, or cannot tell."""
    contiguous = getattr(array, "is_contiguous", None)
    return bool(contiguous()) if callable(contiguous) else True


class Copier:
    """The copies of one unit: made by :meth:`fill`, in order, each a tuple with one copy per member."""

    def __init__(self) -> None:
        self.copies: list[tuple[object, ...]] = []

    def fill(self, start: int, stop: int) -> None:
        """Make copies ``start`` to ``stop - 1`` (``start``: the copies made so far)."""
        raise NotImplementedError

    def restore(self, target: int, source: int) -> None:
        """Give copy ``target`` the values of copy ``source``."""
        raise NotImplementedError


class _PooledCopies(Copier):
    """Copies of a plain NumPy array side by side in the pool, its axis order and alignment kept."""

    def __init__(self, array: npt.NDArray[Any], n: int, pool: HostPool) -> None:
        super().__init__()
        self._array = array
        # the copy's axes laid out outermost first, as the caller's are (C, Fortran, any dense order)
        order = sorted(range(array.ndim), key=lambda axis: -abs(array.strides[axis]))
        shape = [array.shape[axis] for axis in order]
        strides = c_strides(shape, array.itemsize)
        slot = padded(array.nbytes)
        raw = pool.take(slot, n, array.ctypes.data % ALIGN)
        block = over_pool(raw, (n, *shape), array.dtype, (slot, *strides))
        self._block = block.transpose(0, *(1 + order.index(axis) for axis in range(array.ndim)))

    def fill(self, start: int, stop: int) -> None:
        self._block[start:stop] = self._array
        # block[i, ...], not block[i]: a 0-d copy stays an array (block[i] would be a NumPy scalar)
        made = [(self._block[i, ...],) for i in range(start, stop)]
        if not self._array.flags.writeable:
            for (copy,) in made:
                copy.flags.writeable = False
        self.copies += made

    def restore(self, target: int, source: int) -> None:
        self._block[target] = self._block[source]


class _GroupCopies(Copier):
    """Copies of NumPy arrays that share memory: the bytes they span, each array a view into them at
    its own offset, with its own strides."""

    def __init__(self, unit: Unit, n: int, pool: HostPool) -> None:
        import numpy as np

        super().__init__()
        assert unit.span is not None
        low, high = unit.span
        size = high - low
        self._slot = slot = padded(size)
        self._raw = pool.take(slot, n, low % ALIGN)
        self._slots = over_pool(self._raw, (n, size), np.dtype(np.uint8), (slot, 1))
        self._arrays = unit.arrays  # kept alive while their bytes are read
        self._low = low
        self._source = np.asarray(_Memory(low, size))

    def fill(self, start: int, stop: int) -> None:
        self._slots[start:stop] = self._source
        for i in range(start, stop):
            views = []
            for array in self._arrays:
                layout = layout_of(array)
                assert layout is not None
                offset = i * self._slot + layout.address - self._low
                view = over_pool(self._raw, array.shape, array.dtype, array.strides, offset=offset)  # type: ignore[attr-defined]
                view.flags.writeable = bool(array.flags.writeable)  # type: ignore[attr-defined]
                views.append(view)
            self.copies.append(tuple(views))

    def restore(self, target: int, source: int) -> None:
        self._slots[target] = self._slots[source]


class _OwnCopies(Copier):
    """Copies made by the array's own method: a tensor, a CuPy array, a NumPy subclass or array of
    Python objects, any other kind."""

    def __init__(self, array: object) -> None:
        super().__init__()
        self._array = array

    def fill(self, start: int, stop: int) -> None:
        self.copies += [(copy_of(self._array),) for _ in range(start, stop)]

    def restore(self, target: int, source: int) -> None:
        (into,), (values,) = self.copies[target], self.copies[source]
        if is_torch(into):
            into.detach().copy_(values.detach())  # type: ignore[attr-defined]
            return
        flags = getattr(into, "flags", None)
        if flags is not None and getattr(flags, "writeable", True) is False:
            return  # nothing wrote it, nothing to restore
        gpu = gpu_of(into)
        if gpu is not None and "cupy" in sys.modules:
            with sys.modules["cupy"].cuda.Device(gpu):
                into[...] = values  # type: ignore[index]
        else:
            into[...] = values  # type: ignore[index]


def copy_of(array: object) -> object:
    """One copy of ``array`` by its own method, the same kind of object as the caller's."""
    if is_torch(array):
        copy = array.detach().clone()  # type: ignore[attr-defined]  # preserve_format: dense strides kept
        requires_grad = bool(getattr(array, "requires_grad", False))
        parameter = getattr(getattr(sys.modules.get("torch"), "nn", None), "Parameter", None)
        if isinstance(parameter, type) and isinstance(array, parameter):  # an nn.Parameter stays one
            return parameter(copy, requires_grad=requires_grad)
        return copy.requires_grad_(True) if requires_grad else copy
    gpu = gpu_of(array)
    if gpu is not None and "cupy" in sys.modules and callable(getattr(array, "copy", None)):
        with sys.modules["cupy"].cuda.Device(gpu):  # CuPy copies onto the current GPU
            return array.copy(order="K")  # type: ignore[attr-defined]
    clone = getattr(array, "clone", None)
    if callable(clone):
        return clone()
    try:
        copy = array.copy(order="K")  # type: ignore[attr-defined]
    except TypeError:  # a copy() without an order
        copy = array.copy()  # type: ignore[attr-defined]
    flags = getattr(array, "flags", None)
    if flags is not None and getattr(flags, "writeable", True) is False:
        copy.flags.writeable = False
    return copy


def settle(arrays: Sequence[object]) -> None:
    """Wait for the GPUs that hold ``arrays``: their copies were queued on whatever stream was current
    there, and must be done before a timed call reads them from another."""
    for gpu in sorted({g for a in arrays if (g := gpu_of(a)) is not None}):
        torch = sys.modules.get("torch")
        if torch is not None and any(is_torch(a) and gpu_of(a) == gpu for a in arrays):
            torch.cuda.synchronize(gpu)
        cupy = sys.modules.get("cupy")
        if cupy is not None and any(not is_torch(a) and gpu_of(a) == gpu for a in arrays):
            cupy.cuda.Device(gpu).synchronize()


def release_device_memory(arrays: Sequence[object]) -> None:
    """Hand back to the GPU the memory the copies of ``arrays`` took, once they are dropped: CuPy's
    and PyTorch's pools keep freed blocks, which the other library (and the next test) cannot use."""
    cupy_gpus = sorted({gpu for a in arrays if (gpu := gpu_of(a)) is not None and not is_torch(a)})
    if cupy_gpus and (cupy := sys.modules.get("cupy")):
        from .cuda.memory import free_cached_blocks

        for gpu in cupy_gpus:
            free_cached_blocks(cupy, gpu)
    if any(gpu_of(a) is not None and is_torch(a) for a in arrays) and (torch := sys.modules.get("torch")):
        torch.cuda.empty_cache()


def over_pool(
    raw: npt.NDArray[np.uint8],
    shape: Sequence[int],
    dtype: np.dtype[Any],
    strides: Sequence[int],
    *,
    offset: int = 0,
) -> npt.NDArray[Any]:
    """An array of ``dtype`` over the pool's bytes ``raw``: the one way such an array is made. Never
    one holding Python objects: the bytes are old copies, which NumPy would release as objects."""
    import numpy as np

    if dtype.hasobject:
        raise TypeError(f"an array of {dtype} holds Python objects and is never laid over reused bytes")
    made: npt.NDArray[Any] = np.ndarray(
        tuple(shape), dtype=dtype, buffer=raw, offset=offset, strides=tuple(strides)
    )
    return made


class _Memory:
    """The caller's bytes ``[address, address + size)`` as NumPy reads them, read-only."""

    def __init__(self, address: int, size: int) -> None:
        self.__array_interface__ = {"data": (address, True), "shape": (size,), "typestr": "|u1", "version": 3}


class SharedPool:
    """Host memory the two processes of an A/B comparison (``--roofline-against``) carve their copies
    from: one sparse file in memory, each process's copies in its own half, the halves' pages
    allocated in turns (:data:`SHARED_CHUNK` of one, then of the other). Why: docs/cache.md
    ("Rotation"), docs/ci.md.
    """

    #: the pool of this process, where it takes part in a comparison
    active: SharedPool | None = None

    def __init__(self, fd: int, side: int, *, allocates_both: bool) -> None:
        import mmap

        import numpy as np

        self.fd, self.side, self.allocates_both = fd, side, allocates_both
        self._map = mmap.mmap(fd, SHARED_SIDE_BYTES, offset=side * SHARED_SIDE_BYTES)
        self.buffer: npt.NDArray[np.uint8] = np.frombuffer(self._map, dtype=np.uint8)
        self._allocated = 0  # bytes of this half allocated and mapped for copies, from its start

    @classmethod
    def create(cls) -> SharedPool | None:
        """The head's pool (side 0), None where the OS has no anonymous memory file (not Linux)."""
        import os

        if not hasattr(os, "memfd_create"):
            return None
        fd = os.memfd_create("roofline-pool")  # closed with the process: the follower gets its own
        os.ftruncate(fd, 2 * SHARED_SIDE_BYTES)
        return cls(fd, 0, allocates_both=True)

    def reserve(self, nbytes: int) -> bool:
        """This half allocated and mapped up to ``nbytes`` for copies; False when it holds less."""
        if nbytes > SHARED_SIDE_BYTES or not self._allocate(self._allocated, nbytes):
            return False
        self._allocated = max(self._allocated, padded(nbytes, SHARED_CHUNK))
        return True

    def _allocate(self, low: int, high: int) -> bool:
        """Bytes ``[low, high)`` of this half allocated and mapped; False where memory ran short.
        The head allocates the other half's pages in turns with its own; the follower, coming
        second, finds its pages allocated (what the base needs beyond the head is allocated as it
        comes)."""
        import os

        low, high = low // SHARED_CHUNK * SHARED_CHUNK, padded(high, SHARED_CHUNK)
        sides = (0, 1) if self.allocates_both else (self.side,)
        try:
            for offset in range(low, high, SHARED_CHUNK):
                for side in sides:  # allocating keeps what is there: the other side's copies stay
                    os.posix_fallocate(self.fd, side * SHARED_SIDE_BYTES + offset, SHARED_CHUNK)
        except OSError:  # no memory for it: the copies go to this process's own
            return False
        # mapped now (a read per page), so that page faults are not the kernel's
        int(self.buffer[low:high:_PAGE].sum())
        return True


#: each side's half: what rotation's copies may take (:data:`~.rotation.MAX_ROTATION_BYTES`, and
#: room for their padding)
SHARED_SIDE_BYTES = 1088 * 2**20
#: the halves' pages are allocated in turns of this many bytes
SHARED_CHUNK = 2 * 2**20
_PAGE = 4096


class HostPool:
    """One host buffer, touched once, that copies are carved out of for the length of a measurement;
    the process's half of the :class:`SharedPool` where it takes part in a comparison."""

    #: each thread's pool (``pool``): a new rotation reuses the last one's space, which only the thread
    #: that planned both knows to be free
    local = threading.local()

    def __init__(self) -> None:
        self._buffer: npt.NDArray[np.uint8] | None = None
        self._used = 0

    @classmethod
    def current(cls) -> HostPool | None:
        """This thread's pool, if it has one."""
        pool: HostPool | None = getattr(cls.local, "pool", None)
        return pool

    @classmethod
    def get(cls) -> HostPool:
        pool = cls.current()
        if pool is None:
            pool = cls.local.pool = cls()
        pool._used = 0  # a new rotation: the last one's copies are not called
        return pool

    @classmethod
    def release(cls) -> None:
        """Free this thread's buffer (the session's end); another thread's goes when that thread ends."""
        cls.local.pool = None

    def reserve(self, nbytes: int) -> None:
        """Room for ``nbytes`` (each take's alignment included); a larger buffer, touched now so that
        page faults are not the kernel's, when this one is too small."""
        import numpy as np

        shared = SharedPool.active
        if shared is not None and shared.reserve(nbytes):
            self._buffer = shared.buffer
            return
        # the shared half, where it could not hold these: past what it allocated lie its kept arrays
        # and pages no one allocated
        in_shared = shared is not None and self._buffer is shared.buffer
        if self._buffer is None or self._buffer.nbytes < nbytes or in_shared:
            self._buffer = None  # freed before the larger one is made
            self._buffer = np.empty(nbytes, dtype=np.uint8)
            self._buffer.fill(0)

    def take(self, slot: int, n: int, phase: int) -> npt.NDArray[np.uint8]:
        """``n`` slots of ``slot`` bytes side by side (as ``n`` fresh allocations in a row would be),
        the first ``phase`` bytes past a cache line."""
        assert self._buffer is not None, "reserve() first"
        start = self._used + (phase - self._buffer.ctypes.data - self._used) % ALIGN
        self._used = start + slot * n
        assert self._used <= self._buffer.nbytes, "reserve() too little"
        return self._buffer[start : self._used]
