"""A fake ``cupy`` for testing ``pytest_roofline.timing.cuda`` on machines without a GPU.

``FakeCupy().install(monkeypatch)`` puts a ``types.ModuleType`` tree (``cupy``, ``cupy.cuda``,
``cupy.cuda.runtime``) into ``sys.modules``. It mirrors only what the backend calls, with the
documented signatures (docs.cupy.dev; source files in github.com/cupy/cupy):

``cupy.cuda`` (``cupy/cuda/stream.pyx``, ``cupy/cuda/graph.pyx``, ``cupy/cuda/device.pyx``):

- ``Device(device=None)``: context manager making ``device`` current, ``Device.use()`` making it
  current for good; ``compute_capability``, ``pci_bus_id`` (``"0000:18:00.0"`` for device 0, the
  next bus for each next one).
- ``Event(block=False, disable_timing=False, interprocess=False)``; ``Event.record(stream=None)``
  (``None``: the current stream); ``Event.synchronize()``.
- ``get_elapsed_time(start_event, end_event) -> float``: milliseconds; like
  ``cudaEventElapsedTime`` it fails (cudaErrorNotReady) unless the host synchronized past the
  end event.
- ``get_current_stream(device_id=-1)``: the calling thread's, on its current device. As in CuPy
  (``cupy/cuda/stream.pyx``, ``_ThreadLocal``) and CUDA (``cudaSetDevice``), the current device and
  each device's stack of entered streams are per host thread: a new thread starts on device 0 and
  the null stream, whatever another thread entered.
- ``Stream(null=False, non_blocking=False, ptds=False, priority=None)``, ``Stream.null``;
  ``with stream:`` (refused when the stream's device is not current, like CuPy);
  ``Stream.synchronize()``, ``Stream.record(event=None) -> Event``, ``Stream.wait_event(event)``,
  ``Stream.begin_capture(mode=None)`` (refused on the legacy stream, ptr 0 or 1, like CuPy),
  ``Stream.end_capture() -> Graph``, ``Graph.launch(stream=None)``.
- ``Stream.from_external(obj)``: CuPy >= 14, objects with ``__cuda_stream__() -> (0, ptr)``;
  absent with ``FakeCupy(from_external=False)`` (CuPy 13).
- ``ExternalStream(ptr, device_id=-1)``: warns ``DeprecationWarning`` where ``from_external``
  exists, as CuPy 14 does.

``cupy.cuda.runtime`` (``cupy_backends/cuda/api/runtime.pyx``, ``_runtime_enum.pxd``):
``getDeviceCount()``, ``getDevice()`` and ``setDevice(device)`` (the current device),
``getDeviceProperties(device) -> dict`` (``name`` as bytes),
``deviceGetAttribute(attrib, device) -> int``, the ``cudaDevAttr*`` constants the backend uses
(CUDA's values, or distinct ones with ``is_hip=True``, since HIP's enum differs), ``is_hip``,
``memsetAsync(ptr, value, size, stream)``.

``cupy``: ``empty(shape, dtype)``, ``ones(shape, dtype)``, ``empty_like(a)``, ``copyto(dst, src)``,
``multiply(x, y, out=None)``, ``random.random(size, dtype)``, ``ndarray.astype(dtype)``, slicing
(a view); an array lives on the GPU current when it was made (``.device.id``), speaks
``__cuda_array_interface__``, and ``ndarray.copy(order="C")`` makes its copy on the *current* GPU, as
CuPy's does ("This method makes a copy of a given array in the current device",
``cupy/_core/core.pyx``), logged ``("copy", to_device, from_device)``; ``a[...] = b`` is a copy
kernel on the current stream; ``RawModule(code=...).get_function(name)``, ``cuda.Device().attributes`` and
``.synchronize()``; ``cupyx.profiler.benchmark(func, args, n_repeat=..., n_warmup=...,
max_duration=..., devices=...)`` with ``gpu_times`` (``cupyx/profiler/_time.py``);
``matmul(a, b, out=None)``, ``zeros(shape, dtype)``, the dtypes ``uint8``, ``float16``, ``float32``,
``float64`` and the scalar types ``int32``, ``uint64``; ``ndarray``, ``asarray(a)``,
``ascontiguousarray(a)``, ``array_equal(a1, a2)`` (a kernel; its 0-d answer read on the host is
logged ``("to_host", 1)``), ``ndarray.copy(order="C")``, ``.reshape``, ``.view(dtype)``, ``.get()``
(logged ``("to_host", nbytes)``), ``__setitem__`` and ``__cuda_array_interface__``. What an array
holds is a token its writers (``multiply``/``matmul`` with ``out=``, ``copyto``, item assignment)
replace and a copy keeps, shared with its views; allocations never overlap, and a view lies at its
base's address,
``RawKernel(code, name, options=(), backend="nvrtc", ...)`` called as
``kernel(grid, block, args, shared_mem=0, stream=None)`` (``cupy/_core/raw.pyx``,
``cupy/cuda/function.pyx``): ``roofline_block`` behaves as the blocking kernel (it waits, on the
GPU, until the 64-bit count at ``args[0]`` reaches its ticket ``args[1]``), ``roofline_delay`` is
logged ``("delay", stream, ns)`` (it spins, then returns), ``roofline_l2_flush`` is the backend's
flush, logged ``("flush", stream)`` and in ``flush_reads`` (a read of the whole buffer), any other
is a kernel;
``cupy.cuda.PinnedMemory(size, flags=0)`` (real host memory, ``.ptr``; freeing it is a device-wide
sync, as cudaFreeHost is) and ``runtime.hostAllocMapped``.

The current device is real state, shared with the fake PyTorch (one CUDA runtime for both, as
on a real machine): ``cupy.empty`` and the other allocations make their array on it, and an
array's ``device`` (a ``Device``, ``.id``), ``__dlpack_device__()`` (``(2, id)``: kDLCUDA) and
``__cuda_array_interface__`` say so, as CuPy's ``ndarray`` does (``cupy/_core/core.pyx``: ``device``
is ``self.data.device``). ``FakeCupy(device_count=4, visible_env=True)`` is a machine with four
GPUs whose CUDA reads ``CUDA_VISIBLE_DEVICES`` when it is first initialized (the first call that
counts, selects or allocates), as ``cuInit`` does, and never again: the visible GPUs are numbered
0.. in the variable's order, and each array's ``physical_device`` says which of the four it is on.

Capture is per stream, as in CUDA: ``end_capture`` counts the kernels launched on its own stream.
A kernel on the legacy stream while another stream captures follows CUDA's rule for the capturing
stream's flags (CUDA Programming Guide, "Cross-stream dependencies"; ``cudaErrorStreamCaptureImplicit``:
"the legacy stream would depend on a capturing *blocking* stream"): beside a blocking capture stream
(``Stream()``) it raises ``cudaErrorStreamCaptureImplicit`` and invalidates the capture
(``end_capture`` then raises); beside a non-blocking one (``Stream(non_blocking=True)``, every PyTorch
stream) it runs eagerly and is missing from the graph. ``Graph.debug_dot_str(flags=0)`` prints one
node per captured kernel and the edges between them, as ``cudaGraphDebugDotPrint`` does, in its
default form (an octagon per kernel) or, with ``runtime.cudaGraphDebugDotFlagsVerbose``, its verbose
one (``label="{KERNEL``, edges with an attribute list); ``dot_flags`` keeps the flags asked for.

The L2 as far as a cold window needs it: a kernel's reads stay in it until a flush, except what
``persisting_kernel(array)`` reads under an access-policy window, which with a set-aside
(``persisting_set_aside`` bytes, read through ``runtime.deviceGetLimit(0x06)``; None: the driver
refuses to say) stays across flushes until ``cuCtxResetPersistingL2Cache`` (the driver library the
backend loads through ctypes is replaced by one that has only that call). A reset reaches only the
work that has run, that is, up to the last host sync; ``persisting_reads`` says, per call, whether
its data was in the L2 and whether a flush came right before it.

First contact: ``FakeCupy(nvrtc=False)`` finds no libnvrtc (the first launch of a RawKernel, an
``astype`` or a ``multiply`` raises ``DynamicLibNotFoundError``, as CuPy 14 through
``cuda.pathfinder``), ``FakeCupy(cache_writable=False)`` cannot write ``CUPY_CACHE_DIR`` (a
``PermissionError`` naming the folder, as ``os.makedirs`` in ``cupy/cuda/_compiler_cache.py``).

What a real GPU does to a host that waits, modelled so that holding the wrong window fails here:

- ``lazy_loading=True`` (CUDA 12.2+'s default, ``CUDA_MODULE_LOADING=LAZY``): the first launch of
  each kernel (each ``RawKernel``, ``fake.kernel``, each matmul dtype, ``copyto``, a fake PyTorch
  op) loads its module, which "may require context synchronization" (CUDA Programming Guide, Lazy
  Loading): logged ``("load", what)``, a device-wide sync.
- ``pool_syncs=True``: an allocation of a size the pool has not held before grows the pool through
  ``cudaMalloc``, which synchronizes (CuPy ``cupy/cuda/memory.pyx``, ``_malloc`` and the
  ``free_all_blocks`` retry): logged ``("grow", nbytes)``, a device-wide sync. A freed array's block
  stays in the pool (``pool_free`` bytes, which PyTorch cannot use) until
  ``get_default_memory_pool().free_all_blocks()``, logged ``("free_all_blocks", device)``.
- ``queue_depth`` (default 1024): at most that many launches, event records and memsets queue
  behind a held blocking kernel or a spinning delay kernel (a call of many kernels, ``op(n)``, takes
  n); one more and the host blocks inside the launch, until the delay ends or the blocking kernel
  is released (by another thread, within ``hold_wait_s`` real seconds) or sits out its timeout.
- ``launch_blocking`` (default: ``CUDA_LAUNCH_BLOCKING=1`` in the environment at launch time):
  every launch returns only when it has run, so the blocking kernel's own launch waits out its
  timeout.

A host sync while a blocking kernel is queued and not released waits ``hold_wait_s`` (default 0)
real seconds for another thread to release it, then logs ``("block_timeout", ticket)``: the real
host would wait until the kernel gave up. A delay kernel spins until the host next waits.

``FakeCupy(duplicate=("cupy-cuda12x", "cupy-cuda13x"))`` installs instead an import hook: ``import
cupy`` gives CuPy's own "multiple CuPy packages are installed" ``UserWarning`` (verbatim layout of
``cupy/_environment.py``) and then yields the module, as CuPy does.

Everything that reaches the device is appended to ``log`` as a small tuple, in order:
``("record", stream)``, ``("kernel", stream)`` (a kernel ran while ``stream`` was current),
``("flush", stream)``, ``("synchronize", what)``, ``("elapsed",)``, ``("enter", stream)``,
``("exit", stream)``, ``("device", index)``, ``("alloc", nbytes)``, ``("begin_capture", stream)``,
``("end_capture", stream)``, ``("launch", stream, kernels)``, ``("wait_event", stream)``,
``("attribute", name)``, ``("block", stream, ticket)`` (the blocking kernel queued),
``("release", count)`` (the host wrote the release count: logged before the next entry after the
write), ``("block_timeout", ticket)`` (the host synchronized on a stream still held: a real
blocking kernel would spin until its timeout). Streams appear by name: ``"null"``,
``"stream1"``..., ``"external:<ptr>"``; a foreign handle of a stream the fake already knows (a fake
``torch.cuda`` stream) keeps that stream's name.

Elapsed times are scripted: ``elapsed_ms`` (a sequence, its last value repeating), or else
``kernel_ms`` times the kernels that ran between the two events on the events' stream (a graph launch
counts its kernels): work on another stream is not between a stream's events. ``l2_read_ms(nbytes)``,
when given, times each timed launch of ``roofline_l2_read`` (more than one pass) over a buffer of
``nbytes`` instead: a GPU whose L2 rate steps down past its capacity. ``idle_launch_ms`` is added
to a pair whose start event was recorded on an idle GPU (right after a host sync): the host's launch
that follows is inside that window, as on a GPU.
"""

from __future__ import annotations

import ctypes
import errno
import importlib.abc
import importlib.machinery
import itertools
import os
import sys
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

MiB = 2**20
#: cudaGraphDebugDotFlagsVerbose (CUDA's cudaGraphDebugDotFlags; cupy_backends/cuda/api/_runtime_enum.pxd)
DOT_FLAGS_VERBOSE = 1

#: what an H100 SXM reports (CUDA 12): clocks in kHz, bus width in bits, L2 in bytes
H100_PROPERTIES: dict[str, object] = {
    "name": b"NVIDIA H100 80GB HBM3",
    "major": 9,
    "minor": 0,
    "multiProcessorCount": 132,
    "clockRate": 1_980_000,
    "memoryClockRate": 2_619_000,
    "memoryBusWidth": 5120,
    "l2CacheSize": 50 * MiB,
    "totalGlobalMem": 80 * 2**30,
}

# cudaDeviceAttr values (CUDA runtime enum) and, for HIP, different ones: the backend must use names
CUDA_ATTRIBUTES = {
    "cudaDevAttrClockRate": 13,
    "cudaDevAttrMultiProcessorCount": 16,
    "cudaDevAttrMemoryClockRate": 36,
    "cudaDevAttrGlobalMemoryBusWidth": 37,
    "cudaDevAttrL2CacheSize": 38,
}
HIP_ATTRIBUTES = {
    "cudaDevAttrClockRate": 5,
    "cudaDevAttrMultiProcessorCount": 64,
    "cudaDevAttrMemoryClockRate": 61,
    "cudaDevAttrGlobalMemoryBusWidth": 60,
    "cudaDevAttrL2CacheSize": 20,
}


class _Log(list[tuple[Any, ...]]):
    """The ordered log; before each entry it notes a release count the host wrote since the last one."""

    def __init__(self, world: FakeCupy) -> None:
        super().__init__()
        self.world = world

    def append(self, entry: tuple[Any, ...]) -> None:
        self.world.poll_release()
        super().append(entry)


class FakeCudaError(RuntimeError):
    """Stands in for ``cupy_backends.cuda.api.runtime.CUDARuntimeError`` (a RuntimeError)."""


class DynamicLibNotFoundError(RuntimeError):
    """Stands in for ``cuda.pathfinder.DynamicLibNotFoundError``, which CuPy 14 lets through when
    ``load_nvidia_dynamic_lib("nvrtc")`` finds no libnvrtc (``cupy_backends/cuda/libs/_cnvrtc.pxi``)."""


class FakeDType:
    """A dtype numpy does not have (``ml_dtypes.bfloat16``)."""

    def __init__(self, name: str, itemsize: int) -> None:
        self.name = name
        self.itemsize = itemsize


class _Contents:
    """What an allocation holds, as a token: a kernel that writes it draws a new one, a copy takes
    the same. An array and its views share one."""

    tokens = itertools.count(1)

    def __init__(self) -> None:
        self.token = next(self.tokens)

    def write(self) -> None:
        self.token = next(self.tokens)


class FakeScalar:
    """A 0-d result on the device (``cupy.array_equal``'s): reading it on the host copies it there,
    after the stream's work, as CuPy's ``.get()`` does (logged ``("to_host", nbytes)``)."""

    def __init__(self, world: FakeCupy, value: bool) -> None:
        self.world, self._value = world, value

    def __bool__(self) -> bool:
        self.world.device_sync(("to_host", 1))
        return self._value


class FakeArray:
    #: the next free device address: allocations do not overlap, as cudaMalloc's do not
    _next_ptr = 0x7000_0000

    def __init__(self, shape: int | tuple[int, ...], dtype: Any, *, base: FakeArray | None = None) -> None:
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype = dtype if isinstance(dtype, FakeDType) else np.dtype(dtype)
        self.size = int(np.prod(self.shape))
        self.nbytes = self.size * self.dtype.itemsize
        if base is None:
            ptr = FakeArray._next_ptr
            FakeArray._next_ptr += -(-max(self.nbytes, 1) // 256) * 256
            self.contents = _Contents()
        else:  # a view: at its base's address (its first elements), sharing its contents
            ptr, self.contents = base.data.ptr, base.contents
        self.data = types.SimpleNamespace(ptr=ptr)
        self.flags = types.SimpleNamespace(c_contiguous=True, f_contiguous=self.ndim <= 1)
        self.world: FakeCupy | None = base.world if base is not None else None
        #: the visible index of the GPU it lives on (the current device when it was made)
        self.device_id = base.device_id if base is not None else 0
        #: what it holds, as a test writes it (a copy has its array's)
        self.values: object = base.values if base is not None else None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def device(self) -> FakeDevice:
        assert self.world is not None
        return FakeDevice(self.world, self.device_id)

    @property
    def physical_device(self) -> int:
        """Which of the machine's GPUs it lives on, whatever ``CUDA_VISIBLE_DEVICES`` numbered it."""
        assert self.world is not None
        return self.world.visible[self.device_id]

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, self.device_id)  # kDLCUDA

    def __getitem__(self, key: Any) -> FakeArray:
        """A view (no allocation, no kernel): only its shape is computed, on a zero-stride stand-in."""
        return FakeArray(
            np.broadcast_to(np.empty((), dtype=bool), self.shape)[key].shape, self.dtype, base=self
        )

    def reshape(self, *shape: Any) -> FakeArray:
        wanted = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return FakeArray(np.empty(self.size, dtype=bool).reshape(wanted).shape, self.dtype, base=self)

    def view(self, dtype: Any) -> FakeArray:
        """The same bytes read as ``dtype`` (a C-contiguous array's last axis rescaled, as in CuPy)."""
        itemsize = np.dtype(dtype).itemsize
        last = self.shape[-1] * self.dtype.itemsize // itemsize if self.shape else 1
        return FakeArray((*self.shape[:-1], last), dtype, base=self)

    def get(self) -> np.ndarray[Any, Any]:
        """The array on the host: a device-to-host copy of all of it (logged ``("to_host", nbytes)``)."""
        assert self.world is not None
        self.world.device_sync(("to_host", self.nbytes))
        return np.zeros(self.shape, dtype=self.dtype if isinstance(self.dtype, np.dtype) else np.uint8)

    @property
    def strides(self) -> tuple[int, ...]:
        steps, step = [], self.dtype.itemsize
        for size in reversed(self.shape):
            steps.insert(0, step)
            step *= size
        return tuple(steps)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        typestr = self.dtype.str if hasattr(self.dtype, "str") else f"|V{self.dtype.itemsize}"
        return {
            "shape": self.shape,
            "typestr": typestr,
            "strides": None,
            "data": (self.data.ptr, False),
            "version": 3,
        }

    def copy(self, order: str = "C") -> FakeArray:
        """A copy on the *current* GPU, whatever GPU holds this one (CuPy's ``ndarray.copy``)."""
        assert self.world is not None
        copy = self.world.cupy.empty(self.shape, self.dtype)
        copy.values = self.values
        copy.contents.token = self.contents.token  # the same contents
        self.world.log.append(("copy", self.world.current_device, self.device.id))
        self.world.launch(self.world.current_stream, "copy")
        return copy

    def __setitem__(self, key: Any, value: Any) -> None:
        """``a[...] = b``: a copy kernel on the current stream, which writes the array."""
        assert self.world is not None
        self.values = getattr(value, "values", value)
        self.world.launch(self.world.current_stream, "copy")
        self.contents.write()

    def astype(self, dtype: Any) -> FakeArray:
        """A copy in ``dtype``: a new allocation and a kernel, as CuPy's ``astype``."""
        assert self.world is not None
        self.world.compile("astype")
        copy = self.world.cupy.empty(self.shape, dtype)
        self.world.launch(self.world.current_stream, "astype")
        return copy


class FakeEvent:
    def __init__(self, world: FakeCupy) -> None:
        self.world = world
        self.position: int | None = None  # log length when recorded
        self.stream: FakeStream | None = None

    def record(self, stream: FakeStream | None = None) -> None:
        stream = stream if stream is not None else self.world.current_stream
        self.stream = stream
        self.world.enqueue(("record", stream.name))
        self.position = len(self.world.log)

    def synchronize(self) -> None:
        self.world.drain_blocks()
        self.world.log.append(("synchronize", "event"))
        if self.position is not None:
            self.world.synced_upto = max(self.world.synced_upto, self.position)

    @property
    def done(self) -> bool:
        """``cudaEventQuery == cudaSuccess`` (CuPy's ``Event.done``): the fake GPU finishes work only
        when the host waits for it."""
        return self.position is not None and self.position <= self.world.synced_upto


class FakeGraph:
    def __init__(self, world: FakeCupy, kernels: int, reads: Sequence[tuple[int, ...]] = ()) -> None:
        self.world = world
        self.kernels = kernels
        #: the buffers each captured kernel reads: every replay reads these same ones
        self.reads = list(reads)

    def launch(self, stream: FakeStream | None = None) -> None:
        stream = stream if stream is not None else self.world.current_stream
        self.world.enqueue(("launch", stream.name, self.kernels), launch=True)
        self.world.replays.append(tuple(ptr for read in self.reads for ptr in read))

    def debug_dot_str(self, flags: int = 0) -> str:
        """``cudaGraphDebugDotPrint``'s text, which differs by ``flags`` (CuPy's ``test_debug_dot_str``
        asserts so): at the default (0) a kernel node is an octagon labelled with its index and name;
        verbose (``cudaGraphDebugDotFlagsVerbose``, 1) makes every node a record whose label starts with
        its type (``{KERNEL``) and gives every edge a ``[headlabel=0]`` attribute list."""
        self.world.dot_flags.append(flags)
        verbose = bool(flags & DOT_FLAGS_VERBOSE)
        lines = ["digraph dot {", "subgraph cluster_1 {", 'label="graph_1" graph[style="dashed"];']
        for i in range(self.kernels):
            if verbose:
                lines += [
                    f'"graph_1_node_{i}"[style="bold" shape="record" label="{{KERNEL',
                    f"| {{ID | {i} (topoId: {self.kernels - 1 - i}) | fake_kernel\\<\\<\\<1,128,0\\>\\>\\>}}",
                    "| {{node handle | func handle} | {0x0000000000001000 | 0x0000000000002000}}",
                    '}"];',
                ]
            else:
                lines += [f'"graph_1_node_{i}"[style="bold" shape="octagon" label="{i}', "fake_kernel", '"];']
        for i in range(self.kernels - 1):
            edge = f'"graph_1_node_{i}" -> "graph_1_node_{i + 1}"'
            lines.append(f"{edge} [headlabel=0];" if verbose else f"{edge};")
        return "\n".join([*lines, "}", "}", ""])


class FakeStream:
    #: a foreign stream's flags are unknown: PyTorch's are non-blocking (c10 ``kDefaultFlags``)
    non_blocking = True

    def __init__(self, world: FakeCupy, ptr: int, device_id: int, name: str) -> None:
        self.world = world
        self.ptr = ptr
        self.device_id = device_id
        self.name = name
        self._capture_start: int | None = None
        self.captured_reads: list[tuple[int, ...]] = []
        self.invalidated = False
        world.streams_by_ptr.setdefault(ptr, self)

    @property
    def capturing(self) -> bool:
        return self._capture_start is not None

    def __repr__(self) -> str:
        return f"<FakeStream {self.name}>"

    def __enter__(self) -> FakeStream:
        if self.device_id not in (-1, self.world.current_device):
            raise RuntimeError(
                f"The device that the stream is created on ({self.device_id}) does not match with "
                f"the current device ({self.world.current_device})"
            )
        self.world.push_stream(self)
        self.world.log.append(("enter", self.name))
        return self

    def __exit__(self, *exc: object) -> None:
        self.world.pop_stream()
        self.world.log.append(("exit", self.name))

    def synchronize(self) -> None:
        self.world.drain_blocks()
        self.world.log.append(("synchronize", f"stream:{self.name}"))
        self.world.synced_upto = len(self.world.log)

    @property
    def done(self) -> bool:
        return self.world.synced_upto >= len(self.world.log)

    def record(self, event: FakeEvent | None = None) -> FakeEvent:
        event = event if event is not None else FakeEvent(self.world)
        event.record(self)
        return event

    def wait_event(self, event: FakeEvent) -> None:
        self.world.log.append(("wait_event", self.name))

    def begin_capture(self, mode: int | None = None) -> None:
        if self.ptr in (0, 1):
            raise RuntimeError("cannot capture on the default (legacy) stream")
        self.world.log.append(("begin_capture", self.name))
        self._capture_start = len(self.world.log)
        self.captured_reads: list[tuple[int, ...]] = []
        self.invalidated = False

    def end_capture(self) -> FakeGraph:
        assert self._capture_start is not None, "end_capture without begin_capture"
        mine = ("kernel", self.name)
        kernels = sum(1 for entry in self.world.log[self._capture_start :] if entry == mine)
        self._capture_start = None
        self.world.log.append(("end_capture", self.name))
        if self.invalidated:
            raise FakeCudaError("cudaErrorStreamCaptureInvalidated: operation failed due to a previous error")
        return FakeGraph(self.world, kernels, self.captured_reads)


class FakeDevice:
    def __init__(self, world: FakeCupy, device: int | None = None) -> None:
        self.world = world
        self.id = world.current_device if device is None else device
        self._previous: list[int] = []

    @property
    def pci_bus_id(self) -> str:
        return f"0000:{0x18 + self.id:02X}:00.0"

    @property
    def compute_capability(self) -> str:
        props = self.world.properties
        return f"{props.get('major', 0)}{props.get('minor', 0)}"

    @property
    def attributes(self) -> dict[str, int]:
        return {"MultiProcessorCount": int(str(self.world.properties.get("multiProcessorCount", 1)))}

    def synchronize(self) -> None:
        self.world.device_sync(("synchronize", f"device:{self.id}"))

    def __enter__(self) -> FakeDevice:
        self.world.check_device(self.id)
        self._previous.append(self.world.current_device)
        self.world.current_device = self.id
        self.world.log.append(("device", self.id))
        return self

    def use(self) -> FakeDevice:
        """``Device.use()``: ``runtime.setDevice(self.id)``, for good."""
        self.world.cupy.cuda.runtime.setDevice(self.id)
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeDevice) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"

    def __exit__(self, *exc: object) -> None:
        self.world.current_device = self._previous.pop()


class FakeCupy:
    """One fake CuPy installation: its module tree, scripted device and the ordered ``log``."""

    def __init__(
        self,
        *,
        device_count: int = 1,
        count_error: Exception | None = None,
        properties: Mapping[str, object] = H100_PROPERTIES,
        attributes: Mapping[str, int] | None = None,
        is_hip: bool = False,
        elapsed_ms: Sequence[float] | None = None,
        kernel_ms: float = 0.01,
        from_external: bool = True,
        bfloat16: bool = False,
        duplicate: Sequence[str] = (),
        lazy_loading: bool = True,
        pool_syncs: bool = True,
        queue_depth: int = 1024,
        launch_blocking: bool | None = None,
        l2_read_ms: Callable[[int], float] | None = None,
        hold_wait_s: float = 0.0,
        nvrtc: bool = True,
        cache_writable: bool = True,
        persisting_set_aside: int | None = 0,
        visible_env: bool = False,
        idle_launch_ms: float = 0.0,
    ) -> None:
        self.duplicate = tuple(duplicate)
        #: what an event pair whose start found the GPU idle (nothing queued since a host sync) holds
        #: beside its kernels: the host's launch of the first one (8 µs a call through cupyx on an H200)
        self.idle_launch_ms = idle_launch_ms
        self.l2_read_ms = l2_read_ms
        #: per log position, the time of a kernel timed otherwise than ``kernel_ms`` (``l2_read_ms``)
        self.kernel_times: dict[int, float] = {}
        self.lazy_loading = lazy_loading
        self.pool_syncs = pool_syncs
        self.queue_depth = queue_depth
        self._launch_blocking = launch_blocking
        #: how long (real seconds) a host that waits behind an unreleased blocking kernel waits for
        #: another thread to release it before the kernel's own timeout is taken to pass
        self.hold_wait_s = hold_wait_s
        #: delay kernels (of a nonzero delay) queued since the last host sync: spinning, in the fake
        self.pending_delays = 0
        #: whether CuPy finds libnvrtc, and can write its kernel cache (CUPY_CACHE_DIR)
        self.nvrtc = nvrtc
        self.cache_writable = cache_writable
        #: kernels CuPy compiled (a RawKernel's name, or an elementwise op's)
        self.compiled: set[str] = set()
        #: bytes of CuPy's memory pool in live arrays, and in free blocks no other allocator can use
        self.pool_used = 0
        self.pool_free = 0
        self.live_arrays: weakref.WeakSet[FakeArray] = weakref.WeakSet()
        #: the L2: buffers read since the last flush, and those a kernel's access-policy window
        #: marked persisting (with the log position of the mark), which a flush does not evict;
        #: the set-aside for them (cudaLimitPersistingL2CacheSize; None: the driver will not say)
        self.persisting_set_aside = persisting_set_aside
        self.l2_normal: set[int] = set()
        self.l2_persisting: dict[int, int] = {}
        self._flushed = False
        #: per persisting_kernel() call: (its data was in the L2, a flush came right before it)
        self.persisting_reads: list[tuple[bool, bool]] = []
        #: cuCtxResetPersistingL2Cache calls
        self.persisting_resets = 0
        #: modules loaded (lazy loading), sizes the memory pool holds
        self.loaded: set[str] = set()
        self.pool_sizes: set[int] = set()
        #: queue entries behind the first blocking kernel not released yet
        self._behind = 0
        self.device_count = device_count
        #: the physical GPU each visible index is (``CUDA_VISIBLE_DEVICES``, read at :meth:`init`)
        self.visible = list(range(device_count))
        self.visible_env = visible_env
        #: whether CUDA was initialized in this process (cuInit): the visible GPUs are fixed from then on
        self.initialized = False
        self.count_error = count_error
        self.properties = dict(properties)
        #: deviceGetAttribute answers, by attribute name
        self.attributes = dict(attributes or {})
        self.is_hip = is_hip
        self.elapsed_ms = list(elapsed_ms) if elapsed_ms is not None else None
        self.kernel_ms = kernel_ms
        self.bfloat16 = bfloat16
        self.log: list[tuple[Any, ...]] = _Log(self)
        #: addresses of the release counts the blocking kernel was given, and (address, ticket) of
        #: the blocking kernels queued since the last host sync
        self.block_flags: list[int] = []
        self.pending_blocks: list[tuple[int, int]] = []
        #: kernel launches, by stream name (what CUPTI's activity records would count)
        self.launches: list[str] = []
        self._released_seen: dict[int, int] = {}
        self._pinned: list[ctypes.Array[ctypes.c_char]] = []
        #: (code, name) of every RawKernel built
        self.raw_kernels: list[tuple[str, str]] = []
        #: (value, size, stream name) of every memsetAsync
        self.memsets: list[tuple[int, int, str]] = []
        #: (bytes, stream name) of every flush: one pass of ``roofline_l2_flush`` over a buffer
        self.flush_reads: list[tuple[int, str]] = []
        self.external_streams: list[tuple[int, int]] = []  # ExternalStream(ptr, device_id) calls
        #: the flags of every ``Graph.debug_dot_str`` call
        self.dot_flags: list[int] = []
        #: per graph launch, the buffers its kernels read (a fake array's ``data.ptr``), in order
        self.replays: list[tuple[int, ...]] = []
        self.synced_upto = 0
        #: per host thread, as CUDA's current device and CuPy's current streams are
        #: (``cupy/cuda/stream.pyx``: ``_ThreadLocal``, a stream stack per device for each thread)
        self._threads = threading.local()
        self.current_device = 0
        self.streams_by_ptr: dict[int, FakeStream] = {}
        self._elapsed_calls = 0
        self._stream_names = itertools.count(1)
        self._stream_ptrs = itertools.count(0x1000, 0x10)
        self.null_stream = FakeStream(self, 0, -1, "null")
        self.cupyx = types.ModuleType("cupyx")
        self.cupy = self._build(from_external)

    # -- what tests use --------------------------------------------------------------------

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
        # the backend's per-process memory: what an earlier test's fake left must not leak into this one
        monkeypatch.setattr("pytest_roofline.timing.cuda.loading._duplicate_error", None)
        monkeypatch.setattr("pytest_roofline.timing.cuda.loading._compile_error", None)
        # the CUDA driver library, as ctypes loads it: only cuCtxResetPersistingL2Cache is called
        driver = types.SimpleNamespace(cuCtxResetPersistingL2Cache=self.reset_persisting)
        monkeypatch.setattr("pytest_roofline.timing.cuda.persisting._loaded", driver)
        monkeypatch.setattr("pytest_roofline.timing.cuda.launch_latency._latency_floors", {})
        if self.duplicate:
            monkeypatch.setitem(sys.modules, "cupy", None)  # undone at teardown: removed again
            monkeypatch.delitem(sys.modules, "cupy")
            monkeypatch.setattr(sys, "meta_path", [_DuplicateFinder(self), *sys.meta_path])
            return self
        monkeypatch.setitem(sys.modules, "cupy", self.cupy)
        monkeypatch.setitem(sys.modules, "cupy.cuda", self.cupy.cuda)
        monkeypatch.setitem(sys.modules, "cupy.cuda.runtime", self.cupy.cuda.runtime)
        monkeypatch.setitem(sys.modules, "cupyx", self.cupyx)
        monkeypatch.setitem(sys.modules, "cupyx.profiler", self.cupyx.profiler)
        return self

    def idle_before(self, position: int) -> bool:
        """Whether the GPU had nothing queued at log ``position``: a host sync since the last work."""
        for entry in reversed(self.log[:position]):
            if entry[0] == "synchronize":
                return True
            if entry[0] in ("kernel", "launch", "flush", "block"):
                return False
        return True

    def kernel(self, *args: object) -> None:
        """A stand-in kernel: logs that it ran, on the current stream, reading the fake arrays among
        ``args``."""
        self.launch(self.current_stream, reads=tuple(a.data.ptr for a in args if isinstance(a, FakeArray)))

    def launch(self, stream: FakeStream, module: str = "kernel", *, reads: tuple[int, ...] = ()) -> None:
        """A kernel queued on ``stream``. Its first launch loads its module (a device-wide sync).
        On the legacy stream while another stream captures: refused beside a blocking capture
        stream, run eagerly (and left out of that graph) beside a non-blocking one."""
        if not stream.capturing:
            self.load(module)
        capturing = [s for s in self.streams_by_ptr.values() if s.capturing and s is not stream]
        if capturing and stream.ptr in (0, 1) and not stream.capturing:
            blocking = [other for other in capturing if not other.non_blocking]
            if blocking:
                for other in capturing:
                    other.invalidated = True
                raise FakeCudaError(
                    "cudaErrorStreamCaptureImplicit: operation would make the legacy stream depend on a "
                    "capturing blocking stream"
                )
        self.launches.append(stream.name)
        if stream.capturing:
            stream.captured_reads.append(reads)
        else:
            self.l2_normal.update(reads)
            self._flushed = False
        self.enqueue(("kernel", stream.name), launch=True)

    def persisting_kernel(self, array: FakeArray) -> None:
        """A kernel that reads ``array`` under an access-policy window with ``hitProp`` persisting:
        with an L2 set-aside, its lines stay in the L2 across a flush until a reset."""
        ptr = array.data.ptr
        self.persisting_reads.append((ptr in self.l2_normal or ptr in self.l2_persisting, self._flushed))
        self.kernel(array)
        if self.persisting_set_aside:
            self.l2_persisting[ptr] = len(self.log)

    def reset_persisting(self) -> int:
        """``cuCtxResetPersistingL2Cache``: lines marked by work that has run (up to the last host sync)
        go back to normal; work still queued runs after the reset and marks its lines again."""
        self.persisting_resets += 1
        self.l2_persisting = {p: at for p, at in self.l2_persisting.items() if at > self.synced_upto}
        return 0  # CUDA_SUCCESS

    def array_freed(self, nbytes: int) -> None:
        """A fake array was garbage-collected: its block stays in the pool, free."""
        self.pool_used -= nbytes
        self.pool_free += nbytes

    def compile(self, kernel: str) -> None:
        """CuPy's first launch of a kernel it compiles (a RawKernel, an elementwise op): NVRTC, found by
        ``cuda.pathfinder`` (CuPy 14), writing into the kernel cache folder (``_compiler_cache.py``)."""
        if kernel in self.compiled:
            return
        if not self.cache_writable:
            folder = os.path.expanduser(os.environ.get("CUPY_CACHE_DIR") or "~/.cupy/kernel_cache")
            raise PermissionError(errno.EACCES, "Permission denied", folder)
        if not self.nvrtc:
            raise DynamicLibNotFoundError(
                'Failure finding "libnvrtc.so": No such file: libnvrtc.so.13 (searched site-packages,'
                " conda, CUDA_HOME, the system search path)"
            )
        self.compiled.add(kernel)

    def load(self, module: str) -> None:
        """Lazy loading: a module's first use may synchronize the context."""
        if self.lazy_loading and module not in self.loaded:
            self.loaded.add(module)
            self.device_sync(("load", module))

    def device_sync(self, entry: tuple[Any, ...]) -> None:
        """The host waits for everything queued (a context-wide synchronization)."""
        self.drain_blocks()
        self.log.append(entry)
        self.synced_upto = len(self.log)

    @property
    def launch_blocking(self) -> bool:
        if self._launch_blocking is not None:
            return self._launch_blocking
        return os.environ.get("CUDA_LAUNCH_BLOCKING", "0") not in ("", "0")

    def enqueue(self, entry: tuple[Any, ...], *, launch: bool = False) -> None:
        """Queue device work: behind a held blocking kernel, or a delay kernel still spinning, the
        queue holds ``queue_depth`` entries (each launch one: a call of many kernels takes as many),
        and a launch under ``CUDA_LAUNCH_BLOCKING`` returns when it has run."""
        self.poll_release()
        if self._unreleased() or self.pending_delays:
            self._behind += 1
            if self._behind > self.queue_depth:
                # the host blocks in the launch: until the delay ends, or the blocking kernel is
                # released by another thread or gives up
                list.append(self.log, ("queue_full", self.queue_depth))
                self.device_sync(("synchronize", "queue"))
        else:
            self._behind = 0
        self.log.append(entry)
        if launch and self.launch_blocking:
            self.device_sync(("launch_blocking", entry[0]))

    def _unreleased(self) -> bool:
        return any(ctypes.c_int64.from_address(a).value < t for a, t in self.pending_blocks)

    def poll_release(self) -> None:
        """Log the host's write of a blocking kernel's release count (read from the real pinned memory)."""
        for address in self.block_flags:
            value = ctypes.c_int64.from_address(address).value
            if value != self._released_seen.get(address, 0):
                self._released_seen[address] = value
                list.append(self.log, ("release", value))

    def drain_blocks(self) -> None:
        """A host sync: every queued blocking kernel either was released (within ``hold_wait_s``, by
        another thread) or spins until its timeout; every delay kernel ends."""
        self.poll_release()
        for address, ticket in self.pending_blocks:
            if not self._released_within(address, ticket):
                ctypes.c_int64.from_address(address + 8).value = ticket
                list.append(self.log, ("block_timeout", ticket))
        self.poll_release()
        self.pending_blocks.clear()
        self.pending_delays = 0
        self._behind = 0

    def _released_within(self, address: int, ticket: int) -> bool:
        deadline = time.monotonic() + self.hold_wait_s
        while ctypes.c_int64.from_address(address).value < ticket:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)  # the GIL is free meanwhile: another thread may write the release
        return True

    def synchronizing(self) -> Any:
        """A kernel that waits for the GPU: it launches, then synchronizes the current stream (a
        ``.get()``, an ``.item()``)."""
        stream = self.current_stream

        def syncs(*args: object) -> None:
            self.kernel(*args)
            stream.synchronize()

        return syncs

    def op(self, launches: int) -> Any:
        """A call of ``launches`` kernels on the current stream (a PyTorch block of ops, say): each
        launch takes its own entry in the launch queue."""

        def call(*args: object) -> None:
            for _ in range(launches):
                self.kernel(*args)

        return call

    def stream_name(self, ptr: int) -> str:
        known = self.streams_by_ptr.get(ptr)
        return known.name if known is not None else f"external:{ptr}"

    @property
    def current_device(self) -> int:
        """This thread's current device (``cudaSetDevice`` is per host thread); 0 on a new thread."""
        return int(getattr(self._threads, "device", 0))

    @current_device.setter
    def current_device(self, index: int) -> None:
        self._threads.device = index

    @property
    def stream_stack(self) -> list[FakeStream]:
        """This thread's stream stack on its current device (a new thread starts on the null stream)."""
        stacks: dict[int, list[FakeStream]] = self._threads.__dict__.setdefault("stacks", {})
        return stacks.setdefault(self.current_device, [self.null_stream])

    def push_stream(self, stream: FakeStream) -> None:
        self.stream_stack.append(stream)
        self._threads.__dict__.setdefault("entered_on", []).append(self.current_device)

    def pop_stream(self) -> None:
        """Leave the last stream this thread entered, on the device it was entered on (as CuPy's
        ``current_device_id_stack``)."""
        device = self._threads.entered_on.pop()
        self._threads.stacks[device].pop()

    @property
    def current_stream(self) -> FakeStream:
        return self.stream_stack[-1]

    def entries(self, *kinds: str) -> list[tuple[Any, ...]]:
        """The log, keeping only entries of these kinds."""
        return [entry for entry in self.log if entry[0] in kinds]

    def count(self, kind: str) -> int:
        return sum(1 for entry in self.log if entry[0] == kind)

    def init(self) -> None:
        """``cuInit``, on the first call that needs it: with ``visible_env``, the GPUs
        ``CUDA_VISIBLE_DEVICES`` names, in its order, up to the first entry that names none (as CUDA
        reads it); later changes to the variable are not seen."""
        if self.initialized:
            return
        self.initialized = True
        text = os.environ.get("CUDA_VISIBLE_DEVICES") if self.visible_env else None
        if text is None:
            return
        visible: list[int] = []
        for entry in text.split(","):
            entry = entry.strip()
            if not entry.isdigit() or int(entry) >= self.device_count or int(entry) in visible:
                break
            visible.append(int(entry))
        self.visible = visible
        self.device_count = len(visible)

    def check_device(self, index: int) -> None:
        self.init()
        if not 0 <= index < self.device_count:
            raise FakeCudaError("cudaErrorInvalidDevice: invalid device ordinal")

    # -- the module tree -------------------------------------------------------------------

    def _build(self, from_external: bool) -> types.ModuleType:
        world = self
        cupy = types.ModuleType("cupy")
        cuda = types.ModuleType("cupy.cuda")
        runtime = types.ModuleType("cupy.cuda.runtime")
        cupy.cuda = cuda
        cuda.runtime = runtime

        class Stream(FakeStream):
            def __init__(
                self, null: bool = False, non_blocking: bool = False, ptds: bool = False, priority: int = 0
            ) -> None:
                ptr = 0 if null else next(world._stream_ptrs)
                name = "null" if null else f"stream{next(world._stream_names)}"
                super().__init__(world, ptr, -1 if null else world.current_device, name)
                self.non_blocking = non_blocking

        Stream.null = self.null_stream
        if from_external:

            def _from_external(cls: type, obj: Any) -> FakeStream:
                version, ptr = obj.__cuda_stream__()
                assert version == 0
                return FakeStream(world, ptr, world.current_device, world.stream_name(ptr))

            Stream.from_external = classmethod(_from_external)

        def external_stream(ptr: int, device_id: int = -1) -> FakeStream:
            if from_external:
                warnings.warn(
                    "ExternalStream is deprecated. Use Stream.from_external() instead",
                    DeprecationWarning,
                    stacklevel=2,
                )
            world.external_streams.append((ptr, device_id))
            return FakeStream(world, ptr, device_id, world.stream_name(ptr))

        def get_elapsed_time(start: FakeEvent, end: FakeEvent) -> float:
            if start.position is None or end.position is None:
                raise FakeCudaError("cudaErrorInvalidResourceHandle: event not recorded")
            if end.position > world.synced_upto:
                raise FakeCudaError("cudaErrorNotReady: device not ready")
            world.log.append(("elapsed",))
            if world.elapsed_ms is not None:
                i = min(world._elapsed_calls, len(world.elapsed_ms) - 1)
                world._elapsed_calls += 1
                return world.elapsed_ms[i]
            total = 0.0
            mine = start.stream.name if start.stream is not None else None
            for position in range(start.position, end.position):
                entry = world.log[position]
                if entry[0] == "kernel" and entry[1] == mine:
                    total += world.kernel_times.get(position, world.kernel_ms)
                elif entry[0] == "launch" and entry[1] == mine:
                    total += world.kernel_ms * entry[2]
            if world.idle_launch_ms and world.idle_before(start.position):
                total += world.idle_launch_ms
            return total

        cuda.Device = lambda device=None: FakeDevice(world, device)
        cuda.Event = lambda block=False, disable_timing=False, interprocess=False: FakeEvent(world)
        cuda.Stream = Stream
        cuda.ExternalStream = external_stream
        cuda.get_elapsed_time = get_elapsed_time
        cuda.get_current_stream = lambda device_id=-1: world.current_stream

        def get_device_count() -> int:
            if world.count_error is not None:
                raise world.count_error
            world.init()
            return world.device_count

        def get_device() -> int:
            world.init()
            return world.current_device

        def set_device(device: int) -> None:
            world.check_device(device)
            world.current_device = device

        enum = HIP_ATTRIBUTES if self.is_hip else CUDA_ATTRIBUTES
        by_value = {value: name for name, value in enum.items()}

        def device_get_attribute(attrib: int, device: int) -> int:
            name = by_value.get(attrib)
            if name is None or name not in world.attributes:
                raise FakeCudaError(f"cudaErrorInvalidValue: attribute {attrib}")
            world.log.append(("attribute", name))
            return world.attributes[name]

        def memset_async(ptr: int, value: int, size: int, stream: int) -> None:
            name = world.streams_by_ptr[stream].name
            world.memsets.append((value, size, name))
            world.enqueue(("flush", name))

        runtime.getDeviceCount = get_device_count
        runtime.runtimeGetVersion = lambda: 13000  # CUDA 13.0, as cupy-cuda13x

        def device_get_limit(limit: int) -> int:
            """``cudaDeviceGetLimit``: 0x06 is cudaLimitPersistingL2CacheSize (CuPy names no constant)."""
            if limit == 0x06 and world.persisting_set_aside is None:
                raise FakeCudaError("cudaErrorUnsupportedLimit: unsupported limit")
            return int(world.persisting_set_aside or 0) if limit == 0x06 else 0

        runtime.deviceGetLimit = device_get_limit
        runtime.getDevice = get_device
        runtime.setDevice = set_device
        runtime.getDeviceProperties = lambda device: dict(world.properties)
        runtime.deviceGetAttribute = device_get_attribute
        runtime.memsetAsync = memset_async
        runtime.is_hip = self.is_hip
        runtime.cudaGraphDebugDotFlagsVerbose = DOT_FLAGS_VERBOSE
        for name, value in enum.items():
            setattr(runtime, name, value)

        def alloc(shape: int | tuple[int, ...], dtype: Any = float) -> FakeArray:
            world.check_device(world.current_device)
            array = FakeArray(shape, dtype)
            array.device_id = world.current_device
            if world.pool_syncs and array.nbytes not in world.pool_sizes:
                world.pool_sizes.add(array.nbytes)
                world.device_sync(("grow", array.nbytes))  # cudaMalloc synchronizes
            world.log.append(("alloc", array.nbytes))
            array.world = world
            world.pool_used += array.nbytes
            world.live_arrays.add(array)
            weakref.finalize(array, world.array_freed, array.nbytes)
            return array

        class MemoryPool:
            """``cupy.get_default_memory_pool()`` (``cupy/cuda/memory.pyx``): freed arrays' blocks stay
            in the pool, for CuPy alone, until ``free_all_blocks()`` gives them to the driver."""

            def free_all_blocks(self, stream: Any = None) -> None:
                world.pool_free = 0
                world.pool_sizes = {a.nbytes for a in world.live_arrays}  # the next alloc grows again
                world.log.append(("free_all_blocks", world.current_device))

            def used_bytes(self) -> int:
                return world.pool_used

            def total_bytes(self) -> int:
                return world.pool_used + world.pool_free

        pool = MemoryPool()
        cupy.get_default_memory_pool = lambda: pool

        def random_random(size: int | tuple[int, ...], dtype: Any = np.float64) -> FakeArray:
            array = alloc(size, dtype)
            world.launch(world.current_stream, "curand")
            return array

        cupy.random = types.ModuleType("cupy.random")
        cupy.random.random = random_random

        def benchmark(
            func: Any,
            args: tuple[Any, ...] = (),
            kwargs: Mapping[str, Any] | None = None,
            n_repeat: int = 10000,
            *,
            name: str | None = None,
            n_warmup: int = 10,
            max_duration: float = float("inf"),
            devices: Sequence[int] | None = None,
        ) -> Any:
            """``cupyx.profiler.benchmark`` (``cupyx/profiler/_time.py``): an event pair per call on
            the current stream, synchronized after each; ``gpu_times`` in seconds, one row per device."""
            for _ in range(n_warmup):
                func(*args, **(kwargs or {}))
            times = []
            for _ in range(n_repeat):
                start, end = cuda.Event(), cuda.Event()
                start.record()
                func(*args, **(kwargs or {}))
                end.record()
                end.synchronize()
                times.append(cuda.get_elapsed_time(start, end) / 1e3)
            rows = len(devices) if devices is not None else 1
            return types.SimpleNamespace(gpu_times=np.asarray([times] * rows), name=name or func.__name__)

        self.cupyx = types.ModuleType("cupyx")
        self.cupyx.profiler = types.ModuleType("cupyx.profiler")
        self.cupyx.profiler.benchmark = benchmark

        def matmul(a: FakeArray, b: FakeArray, out: FakeArray | None = None) -> FakeArray:
            if isinstance(a.dtype, FakeDType) and not world.bfloat16:
                raise TypeError(f"Unsupported dtype {a.dtype.name}")
            world.launch(world.current_stream, f"cublas:{a.dtype}")  # cuBLAS: a handle and a module
            result = out if out is not None else FakeArray((a.shape[0], b.shape[1]), a.dtype)
            if out is None:
                result.world, result.device_id = world, a.device_id
            result.contents.write()
            return result

        class PinnedMemory:
            def __init__(self, size: int, flags: int = 0) -> None:
                buffer = ctypes.create_string_buffer(size)
                world._pinned.append(buffer)  # kept alive for the test, and while this object lives
                self._buffer = buffer
                self.size, self.flags = size, flags
                self.ptr = ctypes.addressof(buffer)

            def __del__(self, finalizing: Callable[[], bool] = sys.is_finalizing) -> None:
                # cudaFreeHost synchronizes the device: a PinnedMemory collected while a blocking
                # kernel holds a stream waits behind it (seen on the third H200 run). At the
                # interpreter's exit the modules it reads are gone (this one's globals too, hence
                # the bound default), and nothing waits any more
                if not finalizing():
                    world.device_sync(("synchronize", "free_host"))

        class RawKernel:
            def __init__(
                self,
                code: str,
                name: str,
                options: tuple[str, ...] = (),
                backend: str = "nvrtc",
                translate_cucomplex: bool = False,
                *,
                enable_cooperative_groups: bool = False,
                jitify: bool = False,
            ) -> None:
                self.code, self.name = code, name
                world.raw_kernels.append((code, name))

            def __call__(
                self,
                grid: tuple[int, ...],
                block: tuple[int, ...],
                args: tuple[Any, ...],
                *,
                shared_mem: int = 0,
                stream: FakeStream | None = None,
            ) -> None:
                target = stream if stream is not None else world.current_stream
                world.compile(f"raw:{self.name}")
                if self.name == "roofline_l2_flush":  # the backend's flush: one read of its buffer
                    world.load(f"raw:{self.name}")
                    world.l2_normal.clear()  # persisting lines stay
                    world._flushed = True
                    world.flush_reads.append((int(args[1]) * 16, target.name))
                    world.enqueue(("flush", target.name), launch=True)
                    return
                if self.name == "roofline_delay":  # spins a while on the GPU, then returns
                    world.load(f"raw:{self.name}")
                    world.enqueue(("delay", target.name, int(args[0])), launch=True)
                    world.pending_delays += int(args[0]) > 0  # spinning until the host next waits
                    return
                if self.name != "roofline_block":
                    world.launch(target, f"raw:{self.name}")
                    if self.name == "roofline_l2_read" and world.l2_read_ms is not None:
                        mine = ("kernel", target.name)
                        position = next(i for i in reversed(range(len(world.log))) if world.log[i] == mine)
                        world.kernel_times[position] = world.l2_read_ms(int(args[1]) * 16)
                    return
                world.load(f"raw:{self.name}")
                address, ticket = int(args[0]), int(args[1])
                if address not in world.block_flags:
                    world.block_flags.append(address)
                world.enqueue(("block", target.name, ticket))
                world.pending_blocks.append((address, ticket))
                if world.launch_blocking:
                    world.device_sync(("launch_blocking", "block"))

        class RawModule:
            """``cupy.RawModule(code=..., options=(), ...)``; ``get_function(name)`` gives a kernel."""

            def __init__(
                self, code: str | None = None, *, options: tuple[str, ...] = (), **more: Any
            ) -> None:
                self.code = code or ""

            def get_function(self, name: str) -> RawKernel:
                return RawKernel(self.code, name)

        def multiply(x: Any, y: Any, out: FakeArray | None = None) -> FakeArray:
            shape = x.shape if isinstance(x, FakeArray) else y.shape
            world.compile("multiply")
            result = out if out is not None else alloc(shape, np.float32)
            world.launch(world.current_stream, "multiply")
            result.contents.write()
            return result

        def copyto(dst: FakeArray, src: Any, casting: str = "same_kind", where: Any = None) -> None:
            world.launch(world.current_stream, "copy")
            dst.contents.write()

        def array_equal(a1: FakeArray, a2: FakeArray, equal_nan: bool = False) -> FakeScalar:
            """Compared on the device (a kernel); the answer stays there until read."""
            world.launch(world.current_stream, "compare")
            same = a1.shape == a2.shape and a1.contents.token == a2.contents.token
            return FakeScalar(world, same)

        def ascontiguousarray(a: FakeArray, dtype: Any = None) -> FakeArray:
            return a

        def asarray(a: Any, dtype: Any = None, order: Any = None) -> FakeArray:
            if not isinstance(a, FakeArray):
                raise TypeError(f"the fake CuPy holds no {type(a).__name__}")
            return a

        cupy.RawKernel = RawKernel
        cupy.RawModule = RawModule
        cupy.multiply = multiply
        cupy.empty_like = lambda a, dtype=None: alloc(a.shape, dtype or a.dtype)
        cuda.PinnedMemory = PinnedMemory
        runtime.hostAllocMapped = 2
        cupy.empty = alloc
        cupy.ones = alloc
        cupy.copyto = copyto
        cupy.array_equal = array_equal
        cupy.ascontiguousarray = ascontiguousarray
        cupy.asarray = asarray
        cupy.ndarray = FakeArray
        cupy.__version__ = "14.0.0"
        cupy.matmul = matmul
        cupy.uint8, cupy.float16, cupy.float32, cupy.float64 = np.uint8, np.float16, np.float32, np.float64
        cupy.int32, cupy.uint64 = np.int32, np.uint64
        cupy.zeros = alloc

        return cupy


#: CuPy's warning, laid out as cupy/_environment.py's _detect_duplicate_installation writes it
_DUPLICATE_WARNING = """
--------------------------------------------------------------------------------

  CuPy may not function correctly because multiple CuPy packages are installed
  in your environment:

    {packages}

  Follow these steps to resolve this issue:

    1. For all packages listed above, run the following command to remove all
       existing CuPy installations:

         $ pip uninstall <package_name>

    2. Install the appropriate CuPy package.
       Refer to the Installation Guide for detailed instructions.

         https://docs.cupy.dev/en/stable/install.html

--------------------------------------------------------------------------------
"""


class _DuplicateFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import cupy`` warns as CuPy does with several of its packages installed, then gives the fake."""

    def __init__(self, world: FakeCupy) -> None:
        self.world = world

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "cupy":
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.world.cupy

    def exec_module(self, module: types.ModuleType) -> None:
        packages = ", ".join(sorted(self.world.duplicate))
        warnings.warn(_DUPLICATE_WARNING.format(packages=packages), stacklevel=2)  # a UserWarning


def install_fake_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> FakeDType:
    """Install an ``ml_dtypes`` module whose ``bfloat16`` a ``FakeCupy(bfloat16=True)`` can matmul."""
    module = types.ModuleType("ml_dtypes")
    module.bfloat16 = FakeDType("bfloat16", 2)
    monkeypatch.setitem(sys.modules, "ml_dtypes", module)
    return module.bfloat16
