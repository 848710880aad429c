"""The CUDA timer backend, device properties and measured ceilings, through CuPy.

This is the only module that imports :mod:`cupy`, and only inside functions: importing it, or
calling :func:`device_count` without CuPy, costs nothing and raises nothing.

Timing (:class:`CudaBackend`) records a ``cupy.cuda.Event`` pair around each window on one
stream, queues every window of a :meth:`~CudaBackend.run` back to back (cache flush between
them, outside the events) and synchronizes the host once, on the last end event: a host sync
per sample would inflate a 4 µs kernel by an order of magnitude. A blocking kernel holds the
stream while a sampling window is queued, never on a kernel's first call, never past what the
launch queue takes (``block=``, :data:`BLOCK_SETTINGS`); with cupti-python installed, CUPTI's
kernel records time the windows instead (:mod:`.cupti`).

Every CuPy call here is written against CuPy's documented API (docs.cupy.dev) and its source
(github.com/cupy/cupy); ``tests/fake_cupy.py`` mirrors exactly these, with their signatures:

- ``cupy.cuda.Device(index)`` as a context manager; ``cupy.cuda.runtime.getDeviceCount()``,
  ``getDeviceProperties(dev)`` (a dict; ``name`` and ROCm's ``gcnArchName`` are bytes),
  ``deviceGetAttribute(attr, dev)`` with the symbolic ``cudaDevAttr*`` names (HIP's values
  differ), ``is_hip``, ``memsetAsync(ptr, value, size, stream)``
  (``cupy_backends/cuda/api/runtime.pyx``, ``_runtime_enum.pxd``).
- ``cupy.cuda.Event()``, ``Event.record(stream)``, ``Event.synchronize()``,
  ``cupy.cuda.get_elapsed_time(start, end)`` in milliseconds, ``cupy.cuda.get_current_stream()``,
  ``cupy.cuda.Stream(non_blocking=True)``, ``Stream.record()``, ``Stream.wait_event(event)``,
  ``with stream:``, ``cupy.cuda.ExternalStream(ptr, device_id)`` and, from CuPy 14 (which
  deprecates ``ExternalStream``), ``cupy.cuda.Stream.from_external(obj)`` for objects with
  ``__cuda_stream__`` (``cupy/cuda/stream.pyx``).
- Graph mode: ``Stream.begin_capture()``, ``Stream.end_capture()`` -> ``cupy.cuda.Graph``,
  ``Graph.launch(stream)`` (``cupy/cuda/stream.pyx``, ``cupy/cuda/graph.pyx``; stream capture
  came with cupy/cupy#4567, CuPy v10; not supported on HIP; cuBLAS and most CUDA libraries are
  refused during capture, cupy/cupy#6290, so graph mode suits CuPy elementwise/raw kernels).
- Ceilings: ``cupy.empty``, ``cupy.copyto`` (a cudaMemcpyAsync for equal, contiguous arrays),
  ``cupy.random.random(size, dtype)``, ``ndarray.astype(dtype)`` and ``cupy.matmul(a, b, out=c)``.
- Blocking rules: ``Event.done`` (``cudaEventQuery``, ``cupy/cuda/stream.pyx``) after the delay
  kernel proves a kernel asynchronous; ``Stream.synchronize()``; ``Graph.debug_dot_str()``
  (``cupy/cuda/graph.pyx``, ``cudaGraphDebugDotPrint``) counts a captured graph's nodes.
- The blocking kernel and the latency floor: ``cupy.RawKernel(code, name)`` called as
  ``kernel(grid, block, args, stream=stream)`` (``cupy/_core/raw.pyx``, ``cupy/cuda/function.pyx``),
  ``cupy.cuda.PinnedMemory(size, flags)`` with ``cupy.cuda.runtime.hostAllocMapped``
  (``cupy/cuda/pinned_memory.pyx``, ``cupy_backends/cuda/api/runtime.pxd``). Under unified
  addressing (every 64-bit CUDA platform) a mapped pinned pointer is valid in device code as is.

PyTorch is never imported here. When it is already loaded (``"torch" in sys.modules``) and has
initialized CUDA (``torch.cuda.is_initialized()``), the default timing stream is PyTorch's current
stream for the device (``torch.cuda.current_stream(device).cuda_stream``, wrapped for CuPy), and
any other timing stream is made PyTorch's current one for the windows (``torch.cuda.stream(...)``,
``torch.cuda.ExternalStream(ptr, device)``), so PyTorch kernels launch where the events are.

Importing CuPy: CuPy warns (a ``UserWarning``) when several of its packages are installed side by
side (``cupy/_environment.py``, ``_detect_duplicate_installation``); that state is an error here
(:class:`CupyInstallError`), never a silent fallback to the CPU.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any

from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import DeviceError, DeviceProperties, from_properties
from pytest_roofline.timing.base import Kernel, Policy, check_positive, check_window_counts
from pytest_roofline.timing.clocks import ClockWatcher
from pytest_roofline.timing.latency import LatencyFloor

from ..errors import InvalidTypeError, InvalidValueError, MeasurementError, RooflineError, UnavailableError

__all__ = [
    "BLOCK_SETTINGS",
    "BLOCK_TIMEOUT_S",
    "EVENT_RESOLUTION_S",
    "MAX_HELD_CALLS",
    "MIN_FLUSH_BYTES",
    "PROFILER_ENVIRONMENT",
    "TIMERS",
    "CudaBackend",
    "CupyInstallError",
    "blocking_environment",
    "cuda_device",
    "device_count",
    "device_properties",
    "latency_floor",
    "measure_ceilings",
    "using_device",
]

NEED_CUPY = (
    "CUDA measurement needs CuPy: pip install 'pytest-roofline[cuda12]' (or [cuda13] for CUDA 13;"
    " with a CuPy already installed, no extra)"
)
NO_DEVICE = "no CUDA device is visible (cupy.cuda.runtime.getDeviceCount() == 0)"

#: cudaEventElapsedTime: "milliseconds with a resolution of around 0.5 microseconds" (CUDA Runtime API)
EVENT_RESOLUTION_S = 0.5e-6
#: the flush buffer is max(2 × L2, this): a floor in case the driver under-reports L2
MIN_FLUSH_BYTES = 256 * 2**20
#: the copy for the bandwidth ceiling moves max(4 × L2, this) bytes each way
MIN_COPY_BYTES = 512 * 2**20
#: square matmul sizes for the FLOP/s ceilings, the best of which is kept: 4096 saturates most GPUs,
#: 8192 the largest (and an 8192² fp64 operand is 512 MiB, within any datacenter GPU's memory)
MATMUL_SIZES = (4096, 8192)
MATMUL_N = MATMUL_SIZES[0]
#: names how :func:`measure_ceilings` measures, in the calibration cache's key: change it with the method
CEILINGS_METHOD = "matmul random best of 4096,8192; fp64 tensor from cc 8.0"

#: the blocking kernel gives up holding a stream after this long (a kernel that synchronizes
#: while its window is queued would otherwise wait for it forever)
BLOCK_TIMEOUT_S = 10.0
#: calls queued behind one hold: the rest of a longer window is queued after the release, while the
#: GPU works through these. The driver's launch queue is finite (about a thousand entries), and a
#: host blocked in a launch behind a held stream waits out the timeout; nvbench holds 2 launches of
#: a hot batch (``measure_hot.cuh``: "Limit the number of kernel executions while blocked to
#: prevent deadlocks"). 32 calls of up to 30 launches each fit.
MAX_HELD_CALLS = 32
#: what ``block=`` (``--roofline-cuda-block``) takes: ``auto`` holds what is safe to hold, ``on``
#: holds every sampling window after a kernel's first call, ``off`` holds nothing
BLOCK_SETTINGS = ("auto", "on", "off")
#: environment variables that profilers and sanitizers set in the process they run: CUDA's injection
#: hook (nsys, ncu, compute-sanitizer and CUPTI tools), Nsight Systems' session, Nsight Compute's
#: PerfWorks directory, compute-sanitizer's port range, Nsight's transport (the set FlashMLA's
#: ``tests/kernelkit/utils.py`` and GROMACS' ``gpu_utils.cu`` test). Under them a launch may be
#: serialized or replayed, and the blocker's own launch would wait out its timeout (nvbench#45).
PROFILER_ENVIRONMENT = (
    "CUDA_INJECTION64_PATH",
    "NSYS_PROFILING_SESSION_ID",
    "NV_COMPUTE_PROFILER_PERFWORKS_DIR",
    "NV_SANITIZER_INJECTION_PORT_RANGE_BEGIN",
    "NV_NSIGHT_INJECTION_TRANSPORT_TYPE",
)
#: ``auto`` proves a kernel asynchronous before holding it: an unheld window starts behind a kernel
#: that spins this long on the GPU, and an event after it still pending when the window's calls
#: have returned means they did not wait for the GPU
PROBE_DELAY_S = 2e-3
#: unheld windows probed per kernel before ``auto`` stops trying (a first call that compiles
#: outlasts the probe without synchronizing; one that synchronizes every time never passes)
PROBE_TRIES = 3
#: the longest a probe's delay grows to, for calls slower on the host than the last delay
PROBE_MAX_DELAY_S = 0.1
#: kernels whose probe results a backend remembers
_MAX_KERNELS = 4096
#: what times a window: ``events`` (CUDA event pairs), ``cupti`` (kernel activity records,
#: ``timing/cupti.py``), ``auto`` (CUPTI where cupti-python is installed, else events)
TIMERS = ("auto", "events", "cupti")

_LEGACY_STREAM_PTRS = (0, 1)  # cudaStreamLegacy: cannot be captured into a graph

#: CuPy's warning when several of its packages are installed (cupy/_environment.py)
_DUPLICATE_MARK = "multiple CuPy packages are installed"
_duplicate_error: str | None = None


class CupyInstallError(UnavailableError):
    """Several CuPy packages are installed side by side; CuPy warns it may not work."""


def device_count() -> int:
    """GPUs CuPy can see; 0 when CuPy is missing or broken, or there is no driver or device.

    Raises only :class:`CupyInstallError`: several CuPy packages installed is a broken environment
    to fix, not a machine without a GPU.
    """
    try:
        cupy = _load_cupy()
    except CupyInstallError:
        raise
    except Exception:  # ImportError, OSError (missing CUDA libraries)
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # CUDARuntimeError (no driver)
        return 0


@contextmanager
def using_device(index: int) -> Iterator[Any]:
    """Make GPU ``index`` current for the block, restoring the previous one after (``cupy.cuda.Device``)."""
    device = _cupy().cuda.Device(index)
    with device:
        yield device


def device_properties(index: int = 0) -> DeviceProperties:
    """What the driver reports about GPU ``index``, through ``cupy.cuda.runtime``."""
    cupy = _require_device(index)
    runtime = cupy.cuda.runtime
    with using_device(index):
        props = runtime.getDeviceProperties(index)

        def read(key: str, attribute: str) -> int:
            value = props.get(key)
            if value:
                return int(value)
            # CUDA 13 removed clockRate/memoryClockRate from cudaDeviceProp and some CuPy builds drop
            # the keys; the attribute query is the robust path. Symbolic names: HIP's values differ.
            enum = getattr(runtime, attribute, None)
            if enum is None:
                return 0
            try:
                return int(runtime.deviceGetAttribute(enum, index))
            except RuntimeError:  # CUDARuntimeError: attribute unsupported on this device
                return 0

        is_hip = bool(getattr(runtime, "is_hip", False))
        return DeviceProperties(
            name=_text(props.get("name", b"")),
            kind="rocm" if is_hip else "cuda",
            major=int(props.get("major", 0)),
            minor=int(props.get("minor", 0)),
            multiprocessors=read("multiProcessorCount", "cudaDevAttrMultiProcessorCount"),
            clock_khz=read("clockRate", "cudaDevAttrClockRate"),
            memory_clock_khz=read("memoryClockRate", "cudaDevAttrMemoryClockRate"),
            bus_width_bits=read("memoryBusWidth", "cudaDevAttrGlobalMemoryBusWidth"),
            l2_bytes=read("l2CacheSize", "cudaDevAttrL2CacheSize"),
            arch_name=_text(props.get("gcnArchName", b"")) if is_hip else "",
        )


def cuda_device(index: int = 0) -> Device:
    """The roofline :class:`Device` for GPU ``index``: the table's entry, or derived from its properties."""
    return from_properties(device_properties(index))


class CudaBackend:
    """Times windows of back-to-back calls on a GPU with CUDA events.

    ``stream``: where the events are recorded and the calls run (entered as ``with stream:``, so
    CuPy kernels launch on it, and made PyTorch's current stream when PyTorch has initialized
    CUDA). ``None`` means the framework's current stream at each :meth:`run`: PyTorch's
    (``torch.cuda.current_stream(device)``) when PyTorch is loaded and has initialized CUDA, else
    CuPy's. Or a CuPy stream; or a foreign stream: an int handle, an object with ``cuda_stream``
    (``torch.cuda.Stream``) or ``__cuda_stream__``, wrapped with ``Stream.from_external``
    (CuPy >= 14) or ``ExternalStream``. Kernels of other libraries must launch on that same
    stream. :meth:`on_stream` names one for a block of runs.

    ``flush_bytes``: size of the device buffer read before every window when ``run(flush=True)``;
    default max(2 × L2, 256 MiB). It is allocated on the first flush and reused.

    ``graph=True``: each :meth:`run` makes one eager call, captures its ``calls`` calls into one
    CUDA graph, launches it once untimed, then times one replay per window; for kernels dominated
    by launch overhead. Capture needs a non-default stream: with ``stream=None`` the backend uses
    a private non-blocking stream, ordered after the current one (and made PyTorch's current
    stream while capturing and replaying). What cannot be captured (a kernel that synchronizes,
    allocates with ``cudaMalloc`` or calls a library that refuses capture) is a RuntimeError that
    says so. In a pytest run, serve such a backend from the ``pytest_roofline_backend`` hook.

    ``block`` (``"auto"``, ``"on"``, ``"off"``; True is ``"on"``, False ``"off"``; None: the
    session's ``--roofline-cuda-block``, :func:`set_default_block`): before a sampling window's
    start event a one-thread kernel holds the stream, spinning on a flag in mapped pinned host
    memory, and the host releases it once the window's first :data:`MAX_HELD_CALLS` calls are
    queued (nvbench's ``blocking_kernel``), so the window times the GPU's work, not the host's
    launch rate. The flush stays before the hold, outside the window. A first call is never held
    (it may load a module or grow the memory pool, both of which synchronize), nor is a window of
    one sample (the engine's warm-up rounds, and every call with ``setup``). The blocker itself is
    launched once, unheld, when the backend is built. ``auto`` holds nothing under
    ``CUDA_LAUNCH_BLOCKING=1`` or a profiler or sanitizer (:data:`PROFILER_ENVIRONMENT`), and holds
    a kernel only once an unheld window proved it asynchronous (:data:`PROBE_DELAY_S`); ``on`` holds
    every sampling window after a kernel's first call. ROCm is never held (no ``%globaltimer``).
    A hold lasting ``block_timeout_s`` gives up: ``auto`` then times that kernel unheld, ``on``
    raises.
    """

    name = "cuda"

    def __init__(
        self,
        device: int = 0,
        *,
        stream: object | None = None,
        flush_bytes: int | None = None,
        graph: bool = False,
        block: bool | str | None = None,
        block_timeout_s: float = BLOCK_TIMEOUT_S,
        timer: str = "auto",
    ) -> None:
        self._cupy = _require_device(device)
        if timer not in TIMERS:
            raise InvalidValueError(f"timer must be one of {', '.join(map(repr, TIMERS))}; got {timer!r}")
        if flush_bytes is not None and (
            not isinstance(flush_bytes, int) or isinstance(flush_bytes, bool) or flush_bytes < 1
        ):
            raise InvalidValueError(f"flush_bytes must be a positive integer; got {flush_bytes!r}")
        if not isinstance(graph, bool):
            raise InvalidValueError(f"graph must be True or False; got {graph!r}")
        block_mode = check_block(_default_block if block is None else block)
        check_positive("block_timeout_s", block_timeout_s)
        props = device_properties(device)
        self.device = device
        self.properties = props
        self.device_name = props.name
        self.resolution_s = EVENT_RESOLUTION_S
        self.flush_bytes = flush_bytes or max(2 * props.l2_bytes, MIN_FLUSH_BYTES)
        self.graph = graph
        self.block_mode = block_mode
        self.block_timeout_s = float(block_timeout_s)
        if graph:
            self._check_graph_support(props)
        self._given: object | None = None
        self._stream: Any = None
        if stream is not None:
            self._given, self._stream = stream, self._wrap(stream)
        self._capture_stream: Any = None
        self._torch_views: dict[int, Any] = {}
        self._flush_buffer: Any = None
        self._flush_kernel: Any = None
        self._flush_launch: tuple[tuple[int], tuple[int]] = ((1,), (1,))
        self._blocker: _Blocker | None = None
        #: what the probes said of each kernel: (fn, *args) ids -> _ASYNC, _SYNCS or tries so far
        self._kernels: dict[tuple[int, ...], int] = {}
        #: the next probe's delay, by kernel, after probes that could not tell
        self._probe_delays: dict[tuple[int, ...], float] = {}
        #: kernel nodes (and all nodes) of the last graph captured; None when unreadable
        self.last_graph_kernels: int | None = None
        self.last_graph_nodes: int | None = None
        #: CUPTI's kernel records, when they time the windows (timer "cupti", or "auto" with
        #: cupti-python installed and no profiler attached): events otherwise
        self._activity, self.timer_note = _kernel_activity(timer, props)
        self.timer = "cupti" if self._activity is not None else "events"
        if self.block:
            self._holder()  # built and launched once, unheld: its module loads outside any window

    @property
    def block(self) -> bool:
        """Whether this backend holds windows at all, under its setting and the environment now."""
        return not self.block_note

    @property
    def block_note(self) -> str:
        """Why no window is held ("" when they may be)."""
        if self.properties.kind == "rocm":
            return "ROCm: the blocking kernel needs %globaltimer"
        if getattr(self, "_activity", None) is not None:
            return "CUPTI times each kernel on the GPU: there are no launch gaps to hide"
        if self.block_mode == "off":
            return "block off"
        if self.block_mode == "auto":
            return blocking_environment() or ""
        return ""

    @contextmanager
    def blocking(self, setting: bool | str | None) -> Iterator[CudaBackend]:
        """Use ``block=setting`` inside the block (``None`` changes nothing), as :meth:`on_stream` does."""
        if setting is None:
            yield self
            return
        saved, self.block_mode = self.block_mode, check_block(setting)
        try:
            if self.block:
                self._holder()
            yield self
        finally:
            self.block_mode = saved

    @contextmanager
    def on_stream(self, stream: object | None) -> Iterator[CudaBackend]:
        """Time on ``stream`` (what the constructor's ``stream=`` takes) inside the block, then on
        what the backend was built with again. ``None`` changes nothing."""
        if stream is None:
            yield self
            return
        saved = self._given, self._stream
        self._given, self._stream = stream, self._wrap(stream)
        try:
            yield self
        finally:
            self._given, self._stream = saved

    def clock(self) -> float:
        return time.perf_counter()

    def watch_clocks(self, interval_s: float = 0.02) -> ClockWatcher:
        """An NVML watcher of this GPU's clocks (:mod:`.clocks`), found by PCI bus id: wrap a measurement
        in ``with backend.watch_clocks() as watcher:`` and read ``watcher.log``."""
        bus_id: str | None = None
        with suppress(Exception), using_device(self.device) as device:  # no pci_bus_id on ROCm builds
            bus_id = str(device.pci_bus_id)
        return ClockWatcher(index=self.device, pci_bus_id=bus_id, interval_s=interval_s)

    def run(
        self, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        check_window_counts(calls, samples)
        with using_device(self.device):
            stream, torch_stream = self._timing_streams()
            with stream, torch_stream:
                graph = self._capture(fn, args, calls, stream) if self.graph else None
                key = _kernel_key(fn, args)
                blocker = self._holder() if self._may_hold(key, samples) else None
                try:
                    return self._windows(fn, args, calls, samples, flush, stream, graph, blocker, key)
                except _HoldTimedOut:
                    if self.block_mode != "auto":
                        raise MeasurementError(_timeout_message(self.block_timeout_s)) from None
                    # auto: this kernel waited for the GPU while held; time it unheld from now on
                    self._kernels[key] = _SYNCS
                    return self._windows(fn, args, calls, samples, flush, stream, graph, None, key)

    def _windows(
        self,
        fn: Kernel,
        args: Sequence[object],
        calls: int,
        samples: int,
        flush: bool,
        stream: Any,
        graph: Any,
        blocker: _Blocker | None,
        key: tuple[int, ...],
    ) -> list[float]:
        """``samples`` windows queued back to back, held by ``blocker`` (or one probed, unheld), and
        one host sync."""
        __tracebackhide__ = True
        cuda = self._cupy.cuda
        probe = self._probe_wanted(key) if blocker is None else False
        if blocker is not None:
            blocker.arm()
        activity = self._activity
        if activity is not None:
            activity.start()
        try:
            pairs = self._queue(fn, args, calls, samples, flush, stream, graph, blocker, key, probe=probe)
            # one host sync for every window: they were queued in order on this one stream
            pairs[-1][1].synchronize()
        except BaseException:
            if activity is not None:
                with suppress(Exception):  # stop collecting; the kernel's error is the one to see
                    activity.stop()
            raise
        if blocker is not None and blocker.timed_out():
            raise _HoldTimedOut
        events = [cuda.get_elapsed_time(start, end) / 1e3 for start, end in pairs]
        if activity is None:
            return events
        return self._kernel_windows(activity.stop(), samples, events)

    def _queue(
        self,
        fn: Kernel,
        args: Sequence[object],
        calls: int,
        samples: int,
        flush: bool,
        stream: Any,
        graph: Any,
        blocker: _Blocker | None,
        key: tuple[int, ...],
        *,
        probe: bool,
    ) -> list[tuple[Any, Any]]:
        """Queue the windows (flush, probe or hold, start event, calls, end event); their event pairs."""
        __tracebackhide__ = True
        cuda = self._cupy.cuda
        held = min(calls, MAX_HELD_CALLS) if graph is None else calls
        pairs = []
        for index in range(samples):
            if flush:
                self._flush(stream)
            start, end = cuda.Event(), cuda.Event()
            marker = None
            if probe and index == 0:
                marker = self._start_probe(stream, key)
            if blocker is not None:
                blocker.hold(stream)
            try:
                start.record(stream)
                if graph is None:
                    for _ in range(held):
                        fn(*args)
                    if blocker is not None and calls > held:
                        blocker.release()  # the GPU works through the held calls while the rest queue
                    for _ in range(calls - held):
                        fn(*args)
                else:
                    graph.launch(stream)
                end.record(stream)
            finally:
                if blocker is not None:
                    blocker.release()
            if marker is not None:
                self._end_probe(key, marker)
            pairs.append((start, end))
        return pairs

    def _kernel_windows(self, records: Sequence[Any], samples: int, events: list[float]) -> list[float]:
        """Each window's busy time from CUPTI's kernel records, split in order (the windows ran back
        to back on one stream, each the same calls); the events' times where they do not split."""
        from pytest_roofline.timing.cupti import busy_s

        if not records or len(records) % samples:
            seen = f"CUPTI saw {len(records)} kernel(s) for {samples} window(s)"
            self.timer_note = f"{seen}: those windows were timed by events"
            return events
        per = len(records) // samples
        return [busy_s(records[i * per : (i + 1) * per]) for i in range(samples)]

    # -- which windows are held ------------------------------------------------------------------

    def _may_hold(self, key: tuple[int, ...], samples: int) -> bool:
        """Only sampling windows (a run of several samples: the engine's warm-up rounds are runs of
        one), and only a kernel called before (its first call may load a module or grow the pool);
        under ``auto`` only one proved asynchronous."""
        if samples < 2 or not self.block:
            return False
        state = self._kernels.get(key)
        if self.block_mode == "on":
            return state is not None
        return state == _ASYNC

    def _probe_wanted(self, key: tuple[int, ...]) -> bool:
        """Whether this unheld run should prove the kernel asynchronous (and remember it was seen)."""
        state = self._kernels.get(key)
        if state is None:
            if len(self._kernels) >= _MAX_KERNELS:  # forget the oldest
                oldest = next(iter(self._kernels))
                del self._kernels[oldest]
                self._probe_delays.pop(oldest, None)
            self._kernels[key] = state = 0
        return self.block and self.block_mode == "auto" and 0 <= state < PROBE_TRIES

    def _start_probe(self, stream: Any, key: tuple[int, ...]) -> _Probe:
        delay_s = self._probe_delays.get(key, PROBE_DELAY_S)
        self._holder().delay(stream, delay_s)
        return _Probe(stream.record(), time.perf_counter(), delay_s)

    def _end_probe(self, key: tuple[int, ...], probe: _Probe) -> None:
        """Still spinning when the calls returned: they did not wait for the GPU. Done: they waited,
        or the host took longer than the delay (a first call that compiles, a slow Python wrapper):
        the next probe spins longer than these calls took, up to :data:`PROBE_MAX_DELAY_S`. A kernel
        that synchronizes waits out every delay, and after :data:`PROBE_TRIES` is never held."""
        if not probe.marker.done:
            self._kernels[key] = _ASYNC
            self._probe_delays.pop(key, None)
            return
        host_s = time.perf_counter() - probe.t0
        self._probe_delays[key] = min(max(2 * probe.delay_s, 4 * host_s), PROBE_MAX_DELAY_S)
        tries = self._kernels.get(key, 0) + 1
        self._kernels[key] = tries if tries < PROBE_TRIES else _SYNCS
        if tries >= PROBE_TRIES:
            self._probe_delays.pop(key, None)

    def synchronizes(self, fn: Kernel, args: Sequence[object] = ()) -> bool | None:
        """What the probes found of ``fn(*args)``: True (it waited for the GPU every time it was
        probed), False (it did not), None (not known yet)."""
        state = self._kernels.get(_kernel_key(fn, args))
        return True if state == _SYNCS else False if state == _ASYNC else None

    def _wrap(self, stream: object) -> Any:
        with using_device(self.device):
            wrapped = _as_cupy_stream(self._cupy, stream, self.device)
        if self.graph and wrapped.ptr in _LEGACY_STREAM_PTRS:
            raise InvalidValueError(
                "graph mode cannot capture on the legacy default stream; pass a non-default stream "
                "(cupy.cuda.Stream(non_blocking=True)) or stream=None"
            )
        return wrapped

    def _timing_streams(self) -> tuple[Any, AbstractContextManager[object]]:
        """The CuPy stream to time on, and the block that makes it PyTorch's current stream."""
        torch_cuda = _torch_cuda()
        if self._stream is not None:
            stream = self._stream
        elif torch_cuda is not None:
            current = _as_cupy_stream(
                self._cupy, torch_cuda.current_stream(self.device).cuda_stream, self.device
            )
            if not self.graph:
                return current, nullcontext()  # already PyTorch's current stream
            stream = self._private_stream(current)
        elif not self.graph:
            return self._cupy.cuda.get_current_stream(), nullcontext()
        else:
            stream = self._private_stream(self._cupy.cuda.get_current_stream())
        if torch_cuda is None:
            return stream, nullcontext()
        return stream, torch_cuda.stream(self._torch_view(torch_cuda, stream))

    def _private_stream(self, current: Any) -> Any:
        """Graph mode's own *blocking* stream, ordered after ``current``'s queued work.

        Blocking, so that a launch on the legacy default stream during the capture is an error
        (``cudaErrorStreamCaptureImplicit``: the legacy stream would depend on a capturing blocking
        stream) rather than run eagerly and be missing from the graph, as it is beside a
        non-blocking capture stream (CUDA Programming Guide, stream capture and the legacy stream).
        """
        if self._capture_stream is None:
            self._capture_stream = self._cupy.cuda.Stream(non_blocking=False)
        # order it after the current stream's queued work (PyTorch's may be a side stream), no host sync
        self._capture_stream.wait_event(current.record())
        return self._capture_stream

    def _torch_view(self, torch_cuda: Any, stream: Any) -> Any:
        given = self._given
        if stream is self._stream and given is not None and hasattr(given, "cuda_stream"):
            return given  # a torch.cuda.Stream already
        view = self._torch_views.get(stream.ptr)
        if view is None:
            view = torch_cuda.ExternalStream(stream.ptr, device=self.device)
            self._torch_views[stream.ptr] = view
        return view

    def _holder(self) -> _Blocker:
        if self._blocker is None:
            with using_device(self.device):
                self._blocker = _Blocker(self._cupy, self.block_timeout_s)
                self._blocker.warm(self._cupy.cuda.get_current_stream())
        return self._blocker

    def _capture(self, fn: Kernel, args: Sequence[object], calls: int, stream: Any) -> Any:
        # one eager call first: kernel compilation, module loading and memory-pool growth belong
        # outside the capture (older drivers refuse module loading while capturing)
        fn(*args)
        eager = self._eager_kernels(fn, args, stream)
        stream.begin_capture()
        try:
            for _ in range(calls):
                fn(*args)
        except BaseException as exc:
            with suppress(Exception):  # leave capture mode; the kernel's error is the one to see
                stream.end_capture()
            if _is_capture_error(exc):
                raise MeasurementError(_capture_message(fn, exc)) from exc
            raise
        try:
            graph = stream.end_capture()
        except Exception as exc:
            raise MeasurementError(_capture_message(fn, exc)) from exc
        self.last_graph_kernels, self.last_graph_nodes = _graph_nodes(graph)
        if self.last_graph_nodes == 0:
            raise MeasurementError(_escape_message(fn, calls))
        captured = self.last_graph_kernels
        if eager is not None and captured is not None and captured < eager * calls:
            raise MeasurementError(_escape_message(fn, calls, eager=eager, captured=captured))
        # the first launch pays for uploading the graph: keep it out of every timed window
        graph.launch(stream)
        return graph

    def _eager_kernels(self, fn: Kernel, args: Sequence[object], stream: Any) -> int | None:
        """How many kernels one eager call runs, counted by CUPTI (None without it): what the graph
        of ``calls`` calls must hold, or some escaped the capture."""
        activity = self._activity
        if activity is None:
            return None
        activity.start()
        try:
            fn(*args)
            stream.synchronize()
        finally:
            records = activity.stop()
        return len(records)

    def _flush(self, stream: Any) -> None:
        """Evict the L2 by reading ``flush_bytes`` on ``stream``: read, not written, since a memset
        leaves the L2 full of dirty lines that the kernel's own misses would then write back."""
        cupy = self._cupy
        if self._flush_buffer is None:
            from pytest_roofline.timing.l2 import BLOCKS_PER_SM, L2_READ_SOURCE, L2_READ_THREADS

            self._flush_buffer = cupy.empty(self.flush_bytes, dtype=cupy.uint8)
            self._flush_kernel = cupy.RawKernel(L2_READ_SOURCE, "roofline_l2_read")
            sms = max(self.properties.multiprocessors, 1)
            self._flush_launch = (sms * BLOCKS_PER_SM,), (L2_READ_THREADS,)
        buf = self._flush_buffer
        grid, block = self._flush_launch
        # one pass over the buffer; it is its own sink (written only if its sum is exactly 1.0)
        self._flush_kernel(
            grid, block, (buf, cupy.uint64(buf.nbytes // 16), cupy.int32(1), buf), stream=stream
        )

    def _check_graph_support(self, props: DeviceProperties) -> None:
        if props.kind == "rocm":
            raise UnavailableError(
                "graph mode needs CUDA stream capture, which CuPy does not support on ROCm"
            )
        if not hasattr(self._cupy.cuda.Stream, "begin_capture"):
            raise UnavailableError("graph mode needs CuPy >= 10 (cupy.cuda.Stream.begin_capture)")


#: ``roofline_block`` spins until the host writes a release count >= ``ticket`` into ``flags[0]``,
#: or ``timeout_ns`` pass on the GPU's global timer; then it writes its ticket to ``flags[1]``
#: (nvbench's blocking_kernel, with a count instead of a 0/1 flag: windows are queued back to back,
#: so the host never resets the flag under a kernel that has not seen it yet). ``roofline_delay``
#: spins ``delay_ns`` and returns: the probe of a kernel's first windows, which cannot deadlock.
_BLOCK_SOURCE = r"""
extern "C" __global__ void roofline_block(unsigned long long flags, long long ticket,
                                          unsigned long long timeout_ns) {
    volatile long long* shared = (volatile long long*)flags;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (shared[0] < ticket) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            shared[1] = ticket;
            __threadfence_system();
            return;
        }
    }
}

extern "C" __global__ void roofline_delay(unsigned long long delay_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < delay_ns);
}
"""
_EMPTY_SOURCE = 'extern "C" __global__ void roofline_empty() {}'


class _Blocker:
    """The blocking and delay kernels, and two counters in mapped pinned host memory."""

    def __init__(self, cupy: Any, timeout_s: float) -> None:
        import numpy

        self._numpy = numpy
        self._memory = cupy.cuda.PinnedMemory(16, cupy.cuda.runtime.hostAllocMapped)
        ptr = int(self._memory.ptr)
        self._ptr = ptr
        self._released = ctypes.c_int64.from_address(ptr)
        self._timed_out = ctypes.c_int64.from_address(ptr + 8)
        self._released.value = self._timed_out.value = 0
        self._kernel = cupy.RawKernel(_BLOCK_SOURCE, "roofline_block")
        self._delay = cupy.RawKernel(_BLOCK_SOURCE, "roofline_delay")
        self._timeout_s = timeout_s
        self._ticket = 0

    def warm(self, stream: Any) -> None:
        """Launch both kernels once, released before they start (ticket 0, no delay): their modules
        load now, unheld, not on the first held window (lazy loading may synchronize; nvbench's
        ``measure_cold`` does the same before its warm-up run)."""
        np = self._numpy
        self._kernel((1,), (1,), (np.uint64(self._ptr), np.int64(0), np.uint64(0)), stream=stream)
        self._delay((1,), (1,), (np.uint64(0),), stream=stream)

    def arm(self) -> None:
        """Before a run's windows: forget an earlier run's timeout."""
        self._timed_out.value = 0

    def hold(self, stream: Any) -> None:
        np = self._numpy
        self._ticket += 1
        args = (np.uint64(self._ptr), np.int64(self._ticket), np.uint64(int(self._timeout_s * 1e9)))
        self._kernel((1,), (1,), args, stream=stream)

    def delay(self, stream: Any, seconds: float) -> None:
        self._delay((1,), (1,), (self._numpy.uint64(int(seconds * 1e9)),), stream=stream)

    def release(self) -> None:
        self._released.value = self._ticket

    def timed_out(self) -> bool:
        """After the run's host sync: whether a hold gave up (the windows' times are not the kernel's)."""
        return bool(self._timed_out.value)


class _HoldTimedOut(RooflineError):
    """A held window's host waited for the GPU until the blocking kernel gave up."""


@dataclass(frozen=True, slots=True)
class _Probe:
    marker: Any  # an event recorded right after the delay kernel
    t0: float
    delay_s: float


#: a kernel's state in CudaBackend._kernels besides 0..PROBE_TRIES - 1 (probes that could not tell)
_ASYNC = -1
_SYNCS = -2

_default_block = "auto"


def check_block(setting: object) -> str:
    """``block=`` as one of :data:`BLOCK_SETTINGS` (True is ``on``, False ``off``); ValueError otherwise."""
    if setting is True:
        return "on"
    if setting is False:
        return "off"
    if isinstance(setting, str) and setting in BLOCK_SETTINGS:
        return setting
    raise InvalidValueError(f"block must be 'auto', 'on' or 'off' (or True / False); got {setting!r}")


def set_default_block(setting: str) -> None:
    """What ``block=None`` means in this process: the session's ``--roofline-cuda-block``, so that
    the latency floor and calibration follow it too."""
    global _default_block
    _default_block = check_block(setting)


def blocking_environment(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the blocker must stay off in this process's environment, or None: under
    ``CUDA_LAUNCH_BLOCKING=1`` every launch returns only once it has run, so the blocker's own
    launch would wait out its timeout (nvbench#45); a profiler or sanitizer serializes launches."""
    env = os.environ if environ is None else environ
    value = env.get("CUDA_LAUNCH_BLOCKING", "").strip()
    if value not in ("", "0"):
        return f"CUDA_LAUNCH_BLOCKING={value}: every launch is synchronous"
    for name in PROFILER_ENVIRONMENT:
        if env.get(name):
            return f"{name} is set: a profiler or sanitizer (nsys, ncu, compute-sanitizer) is attached"
    return None


def _kernel_activity(timer: str, props: DeviceProperties) -> tuple[Any, str]:
    """CUPTI's kernel records for ``timer`` (``cupti``, or ``auto`` where cupti-python is installed,
    not on ROCm, and no profiler holds CUPTI), and what was chosen."""
    if timer == "events":
        return None, "events (timer='events')"
    if props.kind == "rocm":
        if timer == "cupti":
            raise UnavailableError("timer='cupti' needs CUDA: CUPTI does not trace ROCm")
        return None, "events (ROCm)"
    attached = blocking_environment()
    if timer == "auto" and attached is not None and "CUDA_LAUNCH_BLOCKING" not in attached:
        return None, f"events ({attached}, and it uses CUPTI itself)"
    from pytest_roofline.timing.cupti import collector

    activity = collector()
    if activity is None:
        if timer == "cupti":
            raise UnavailableError(
                "timer='cupti' needs cupti-python: pip install 'pytest-roofline[cupti]' (or CUPTI refused"
                " its callbacks: another tool holds them)"
            )
        return None, "events (cupti-python not installed)"
    return activity, "CUPTI kernel activity (each kernel's GPU interval; launch gaps excluded)"


def _kernel_key(fn: Kernel, args: Sequence[object]) -> tuple[int, ...]:
    """A kernel call by identity: the function and its arguments (new arrays may grow the pool). A
    bound method is a new object at each attribute access: it is known by its object and function."""
    function, owner = getattr(fn, "__func__", None), getattr(fn, "__self__", None)
    head = (id(owner), id(function)) if function is not None else (id(fn),)
    return (*head, *map(id, args))


def _timeout_message(timeout_s: float) -> str:
    return (
        f"the blocking kernel held the timing stream for {timeout_s:g} s and gave up: while a window"
        " was queued the host waited for the GPU (a kernel that synchronizes, e.g. .get(), .item() or"
        " a device-wide sync), so this run's times are not the kernel's; time it unheld with"
        ' --roofline-cuda-block=off, or block="off" in its marker or roofline(...) call'
        ' (CudaBackend(block="off")), or let --roofline-cuda-block=auto find out'
    )


_NODE = re.compile(r'"graph_\d+_node_\d+"\s*\[')


def _graph_nodes(graph: Any) -> tuple[int | None, int | None]:
    """Kernel nodes and all nodes of a captured graph, from CUDA's DOT print of it
    (``Graph.debug_dot_str``, ``cudaGraphDebugDotPrint``: ``"graph_1_node_0"[... label="{KERNEL``);
    (None, None) where it cannot be read."""
    dump = getattr(graph, "debug_dot_str", None)
    if dump is None:
        return None, None
    try:
        text = str(dump())
    except Exception:  # an old CuPy or driver without cudaGraphDebugDotPrint
        return None, None
    return text.count('label="{KERNEL'), len(_NODE.findall(text))


def _escape_message(fn: Kernel, calls: int, *, eager: int | None = None, captured: int = 0) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    what = (
        f"an eager call of {name} ran {eager} kernel(s) (CUPTI), but the graph of {calls} call(s) holds"
        f" {captured}: {eager * calls - captured} launch(es) escaped the capture"
        if eager is not None
        else f"graph mode captured no GPU work from {calls} call(s) of {name}: its launches escaped the"
        " capture"
    )
    return (
        f"{what}"
        " (they ran on another stream: on the legacy default stream beside a non-blocking capture"
        " stream, a launch runs at once and is missing from the graph), so a replay would time"
        " nothing; launch on the current stream (the one given as stream=), or time it without graph=True"
    )


def measure_ceilings(
    index: int = 0, policy: Policy | None = None, *, block: bool | str | None = None
) -> tuple[Figure, dict[tuple[Precision, Unit], Figure]]:
    """Measured DRAM bandwidth and matmul FLOP/s of GPU ``index``, each timed with the engine.

    Bandwidth: ``cupy.copyto`` of a max(4 × L2, 512 MiB) buffer, counted as read + write.
    FLOP/s: ``cupy.matmul`` of random square matrices (2·n³ FLOP), the best of n = 4096 and 8192
    (:data:`MATMUL_SIZES`): fp32 keyed vector, fp16 and, where CuPy with ml_dtypes supports it, bf16
    keyed tensor. fp64 is keyed *tensor* from compute capability 8.0: CuPy asks cuBLAS for
    ``CUBLAS_GEMM_DEFAULT_TENSOR_OP`` there for every dtype (``cupy/_core/_routines_linalg.pyx``,
    ``tensordot_core_v11``: ``compute_capability >= 80``), so an A100 or H100 runs it on FP64
    tensor cores (DMMA) at about twice the vector rate; the fp64 vector ceiling stays the table's.
    Random inputs, since constant ones draw less power and can run at clocks no real operand sees.
    TF32 is not measured: CuPy reads ``CUPY_TF32`` once per process, on its first fp32 matmul, and
    has no public per-call switch; when it is set, the fp32 result is reported as TF32 tensor.
    ``policy`` defaults to ``Policy(flush=False)``: these buffers dwarf the cache. ``block``: the
    blocking kernel's setting (:class:`CudaBackend`); every first call runs unheld either way.
    """
    from pytest_roofline.timing.engine import measure

    cupy = _require_device(index)
    policy = policy or Policy(flush=False)
    # cuBLAS is refused during stream capture (cupy/cupy#6290): never graph mode here
    backend = CudaBackend(index, block=block)
    props = backend.properties
    with using_device(index):
        nbytes = max(4 * props.l2_bytes, MIN_COPY_BYTES)
        src = cupy.empty(nbytes, dtype=cupy.uint8)
        dst = cupy.empty(nbytes, dtype=cupy.uint8)
        m = measure(cupy.copyto, dst, src, policy=policy, backend=backend)
        del src, dst
        bandwidth = Figure(
            2 * nbytes / m.time_s,
            Source.MEASURED,
            f"cupy.copyto of {nbytes / 2**20:.0f} MiB (read + write), {m.stat} of {m.stats.n} samples",
        )

        fp32_key = (Precision.TF32, Unit.TENSOR) if tf32_requested() else (Precision.FP32, Unit.VECTOR)
        fp64_unit = Unit.TENSOR if props.kind == "cuda" and props.major >= 8 else Unit.VECTOR
        matmuls: list[tuple[Any, tuple[Precision, Unit]]] = [
            (cupy.float64, (Precision.FP64, fp64_unit)),
            (cupy.float32, fp32_key),
            (cupy.float16, (Precision.FP16, Unit.TENSOR)),
        ]
        bf16 = _bfloat16(cupy)
        if bf16 is not None:
            matmuls.append((bf16, (Precision.BF16, Unit.TENSOR)))

        peaks: dict[tuple[Precision, Unit], Figure] = {}
        for dtype, (precision, unit) in matmuls:
            best: tuple[float, str] | None = None
            for n in MATMUL_SIZES:
                a, b = _random_matrix(cupy, n, dtype), _random_matrix(cupy, n, dtype)
                c = cupy.empty((n, n), dtype=dtype)
                m = measure(_matmul_into(cupy), a, b, c, policy=policy, backend=backend)
                del a, b, c
                rate = 2 * n**3 / m.time_s
                if best is None or rate > best[0]:
                    samples = f"{m.stat} of {m.stats.n} samples"
                    best = (rate, f"cupy.matmul {n}×{n}×{n} {precision}, random inputs, {samples}")
            assert best is not None  # MATMUL_SIZES is not empty
            peaks[(precision, unit)] = Figure(best[0], Source.MEASURED, best[1])
    return bandwidth, peaks


def _random_matrix(cupy: Any, n: int, dtype: Any) -> Any:
    """An n×n matrix of uniform random values in [0, 1) in ``dtype`` (drawn in float32, cast)."""
    random = getattr(cupy, "random", None)
    if random is None:  # a stand-in CuPy without cupy.random
        return cupy.ones((n, n), dtype=dtype)
    return random.random((n, n), dtype=cupy.float32).astype(dtype)


#: the latency floor's own measurement: short, warm, never flushed
LATENCY_POLICY = Policy(warmup_s=0.01, min_samples=20, max_time_s=0.25, flush=False)
#: event pairs timed around nothing for the latency floor
LATENCY_EVENT_SAMPLES = 50
#: before the latency floor, the GPU is kept busy until NVML reports this share of its maximum SM
#: clock, for at most RAMP_MAX_S (an idle GPU runs its first microseconds at idle clocks, and an
#: empty launch timed then would be cached inflated)
RAMP_CLOCK_SHARE = 0.9
RAMP_MAX_S = 0.5
#: one busy stretch of the ramp, on the GPU
RAMP_STEP_S = 0.02
_latency_floors: dict[tuple[int, bool, bool], LatencyFloor] = {}


def latency_floor(
    index: int = 0,
    *,
    graph: bool = False,
    block: bool | str | None = None,
    refresh: bool = False,
    policy: Policy | None = None,
) -> LatencyFloor:
    """The shortest time a kernel call can show on GPU ``index``, measured once per process, device
    and mode.

    ``floor_s``: the per-call time of an empty ``RawKernel`` launch, timed by the engine over a
    :class:`CudaBackend` in the mode of the backend it judges: ``graph`` (replays of captured empty
    launches) or eager, held by the blocking kernel or not (``block``); measured after the GPU's
    clocks ramp up (:func:`ramp_clocks`). ``event_pair_s``: the median of an event pair around
    nothing. A kernel whose roofline floor is below ``floor_s`` is latency-bound
    (:func:`pytest_roofline.timing.latency.judged_floor`); the verdict never lets it raise
    attained past the measured time, so a latency floor is never grounds for faster than light.
    Cached per device and mode; ``refresh=True`` measures again.
    """
    from pytest_roofline.timing.engine import measure

    cupy = _require_device(index)
    key = (index, graph, _holds(cupy, block))
    if not refresh and key in _latency_floors:
        return _latency_floors[key]
    backend = CudaBackend(index, graph=graph, block=block)
    with using_device(index):
        empty = cupy.RawKernel(_EMPTY_SOURCE, "roofline_empty")

        def launch() -> None:
            empty((1,), (1,), ())

        ramp = ramp_clocks(backend)
        m = measure(launch, policy=policy or LATENCY_POLICY, backend=backend)
        # the event pair is timed eagerly (a graph of nothing is refused), seen unheld first as every kernel
        eager = CudaBackend(index, block=block) if graph else backend
        eager.run(_nothing, (), calls=1, samples=1, flush=False)
        eager.run(_nothing, (), calls=1, samples=1, flush=False)
        pairs = sorted(eager.run(_nothing, (), calls=1, samples=LATENCY_EVENT_SAMPLES, flush=False))
    held = ", CUPTI" if backend.timer == "cupti" else ", held" if backend.block else ", unheld"
    mode = ("graph replay" if graph else "eager") + held
    found = LatencyFloor(
        device=backend.device_name,
        floor_s=m.time_s,
        event_pair_s=pairs[len(pairs) // 2],
        note=(
            f"empty kernel launch ({mode}), {m.stat} of {m.stats.n} samples × {m.calls_per_sample} call(s);"
            f" event pair {pairs[len(pairs) // 2] * 1e6:.2f} µs; {ramp}"
        ),
    )
    _latency_floors[key] = found
    return found


def _holds(cupy: Any, block: bool | str | None) -> bool:
    """Whether a backend built with ``block`` would hold windows (:attr:`CudaBackend.block`),
    without building one."""
    mode = check_block(_default_block if block is None else block)
    if mode == "off" or getattr(cupy.cuda.runtime, "is_hip", False):
        return False
    return mode == "on" or blocking_environment() is None


def ramp_clocks(backend: CudaBackend, *, max_s: float = RAMP_MAX_S) -> str:
    """Keep the GPU busy (the delay kernel, :data:`RAMP_STEP_S` at a time) until NVML reports
    :data:`RAMP_CLOCK_SHARE` of the maximum SM clock, or ``max_s`` passed; say what happened.
    Without NVML: busy for ``max_s / 5``, the clocks unwatched."""
    from pytest_roofline.timing.clocks import sm_clock_share

    if backend.properties.kind == "rocm":  # the delay kernel reads %globaltimer, which ROCm lacks
        return "clocks not ramped first (ROCm)"
    blocker = backend._holder()
    bus_id: str | None = None
    with suppress(Exception), using_device(backend.device) as device:
        bus_id = str(device.pci_bus_id)
    start = time.perf_counter()
    with using_device(backend.device):
        stream = backend._cupy.cuda.get_current_stream()
        share = sm_clock_share(backend.device, bus_id)
        if share is None:  # unwatched: a fixed stretch of busy GPU, one host sync
            steps = max(1, round(max_s / 5 / RAMP_STEP_S))
            for _ in range(steps):
                blocker.delay(stream, RAMP_STEP_S)
            stream.synchronize()
            return f"clocks unwatched (no NVML): the GPU kept busy {steps * RAMP_STEP_S * 1e3:.0f} ms first"
        while share is not None and share < RAMP_CLOCK_SHARE and time.perf_counter() - start < max_s:
            blocker.delay(stream, RAMP_STEP_S)
            stream.synchronize()
            share = sm_clock_share(backend.device, bus_id)
    elapsed_ms = (time.perf_counter() - start) * 1e3
    shown = f"{share:.0%}" if share is not None else "?"
    return f"SM clock at {shown} of its maximum after {elapsed_ms:.0f} ms busy"


def _nothing() -> None:
    pass


# -- private helpers ---------------------------------------------------------------------------


def _cupy() -> Any:
    try:
        return _load_cupy()
    except ImportError as exc:
        # no ImportError traceback for users: what to install, and CuPy's own reason if it broke
        raise UnavailableError(f"{NEED_CUPY} ({exc})") from None


def _load_cupy() -> Any:
    """``import cupy``; a :class:`CupyInstallError` when CuPy says several of its packages are installed.

    CuPy only warns then (a UserWarning at import); under ``filterwarnings = error`` that warning
    aborted the import, and a GPU machine silently measured on its CPU. Other warnings CuPy gives
    at import are given again, unchanged, after it.
    """
    global _duplicate_error
    if _duplicate_error is not None:
        raise CupyInstallError(_duplicate_error)
    module = sys.modules.get("cupy")
    if module is not None:
        return module
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import cupy
    for warning in caught:
        if _DUPLICATE_MARK in str(warning.message):
            _duplicate_error = _duplicate_message(str(warning.message))
            raise CupyInstallError(_duplicate_error)
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return cupy


def _duplicate_message(text: str) -> str:
    found = re.search(r"in your environment:\s*\n\s*([^\n]+)", text)
    packages = found.group(1).strip() if found else "several cupy packages"
    names = " ".join(name.strip() for name in packages.split(","))
    return (
        f"several CuPy packages are installed side by side ({packages}) and CuPy warns it may not work,"
        f" so no GPU is timed with it: pip uninstall {names}, then install one, the one for your CUDA"
        " (pip install 'pytest-roofline[cuda12]' or '[cuda13]', or cupy-cuda12x / cupy-cuda13x)"
    )


def _torch_cuda() -> Any | None:
    """``torch.cuda`` when PyTorch is already imported and has initialized CUDA; never imports torch."""
    torch = sys.modules.get("torch")
    torch_cuda = getattr(torch, "cuda", None) if torch is not None else None
    if torch_cuda is None:
        return None
    try:
        return torch_cuda if torch_cuda.is_initialized() else None
    except Exception:  # a half-imported or CPU-only torch
        return None


def _is_capture_error(exc: BaseException) -> bool:
    """The CUDA runtime's stream-capture errors (cudaErrorStreamCapture*), as CuPy and PyTorch word them."""
    return isinstance(exc, Exception) and re.search(r"captur", str(exc), re.IGNORECASE) is not None


def _capture_message(fn: Kernel, exc: BaseException) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return (
        f"graph mode cannot capture {name}: {exc}. A kernel that synchronizes with the host, allocates"
        " with cudaMalloc, launches on another stream, or calls a library that refuses capture (cuBLAS"
        " through CuPy, cupy/cupy#6290) cannot be timed as a CUDA graph; time it without graph=True"
    )


def _require_device(index: object) -> Any:
    """CuPy, once GPU ``index`` is known to exist; a clear error otherwise."""
    cupy = _cupy()
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise DeviceError(f"a CUDA device index is a non-negative integer; got {index!r}")
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError: no driver, or a driver older than the CUDA runtime
        raise DeviceError(
            f"no CUDA device is visible (cupy.cuda.runtime.getDeviceCount() raised {exc})"
        ) from None
    if count == 0:
        raise DeviceError(NO_DEVICE)
    if index >= count:
        raise DeviceError(f"no CUDA device {index}: {count} visible (0..{count - 1})")
    return cupy


def _text(value: object) -> str:
    """The driver's C strings arrive as NUL-padded bytes."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value).strip("\x00").strip()


class _StreamHandle:
    """An int stream handle dressed in the CUDA stream protocol, for ``Stream.from_external``."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)


def _as_cupy_stream(cupy: Any, stream: object, device: int) -> Any:
    """A CuPy stream object for what the caller passed; call with ``device`` current."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if isinstance(stream, int) and not isinstance(stream, bool):
        if from_external is not None:  # CuPy >= 14 deprecates ExternalStream in favour of this
            return from_external(_StreamHandle(stream))
        return cupy.cuda.ExternalStream(stream, device)
    if hasattr(stream, "ptr") and hasattr(stream, "synchronize"):  # already a CuPy stream
        return stream
    if hasattr(stream, "__cuda_stream__"):
        if from_external is not None:
            return from_external(stream)
        _version, ptr = stream.__cuda_stream__()
        return cupy.cuda.ExternalStream(int(ptr), device)
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if isinstance(handle, int) and not isinstance(handle, bool):
        return _as_cupy_stream(cupy, handle, device)
    raise InvalidTypeError(
        f"stream must be a CuPy stream, an int handle (torch.cuda.current_stream().cuda_stream), an "
        f"object with cuda_stream or __cuda_stream__; got {stream!r} ({type(stream).__name__})"
    )


def tf32_requested() -> bool:
    """Whether ``CUPY_TF32`` asks CuPy for TF32 fp32 matmuls (read by CuPy as ``int(...) > 0``)."""
    try:
        return int(os.environ.get("CUPY_TF32", "0")) > 0
    except ValueError:
        return False


def _matmul_into(cupy: Any) -> Kernel:
    def matmul(a: Any, b: Any, out: Any) -> None:
        cupy.matmul(a, b, out=out)  # into a preallocated result: no allocator in the window

    return matmul


def _bfloat16(cupy: Any) -> Any:
    """ml_dtypes' bfloat16 when this CuPy can matmul it (CuPy 14 with ml_dtypes), else None."""
    try:
        bfloat16 = importlib.import_module("ml_dtypes").bfloat16
        x = cupy.ones((2, 2), dtype=bfloat16)
        cupy.matmul(x, x)
    except Exception:  # no ml_dtypes, or a CuPy without bfloat16 kernels
        return None
    return bfloat16
