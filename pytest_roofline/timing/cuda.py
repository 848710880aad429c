"""The CUDA timer backend, device properties and measured ceilings, through CuPy.

This is the only module that imports :mod:`cupy`, and only inside functions: importing it, or
calling :func:`device_count` without CuPy, costs nothing and raises nothing.

Timing (:class:`CudaBackend`) records a ``cupy.cuda.Event`` pair around each window on one
stream, queues every window of a :meth:`~CudaBackend.run` back to back (cache flush between
them, outside the events) and synchronizes the host once, on the last end event: a host sync
per sample would inflate a 4 µs kernel by an order of magnitude.

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
- Ceilings: ``cupy.empty``, ``cupy.ones``, ``cupy.copyto`` (a cudaMemcpyAsync for equal,
  contiguous arrays) and ``cupy.matmul(a, b, out=c)``.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from pytest_roofline.devices import DeviceError, DeviceProperties, from_properties
from pytest_roofline.model import Device, Figure, Precision, Source, Unit
from pytest_roofline.timing.base import Kernel, Policy, check_window_counts

__all__ = [
    "EVENT_RESOLUTION_S",
    "MIN_FLUSH_BYTES",
    "CudaBackend",
    "cuda_device",
    "device_count",
    "device_properties",
    "measure_ceilings",
    "using_device",
]

NEED_CUPY = "CUDA measurement needs CuPy: pip install 'pytest-roofline[cuda]'"
NO_DEVICE = "no CUDA device is visible (cupy.cuda.runtime.getDeviceCount() == 0)"

#: cudaEventElapsedTime: "milliseconds with a resolution of around 0.5 microseconds" (CUDA Runtime API)
EVENT_RESOLUTION_S = 0.5e-6
#: the flush buffer is max(2 × L2, this): a floor in case the driver under-reports L2
MIN_FLUSH_BYTES = 256 * 2**20
#: the copy for the bandwidth ceiling moves max(4 × L2, this) bytes each way
MIN_COPY_BYTES = 512 * 2**20
#: square matmul size for the FLOP/s ceilings: large enough to saturate, small enough for fp64 on GeForce
MATMUL_N = 4096

_LEGACY_STREAM_PTRS = (0, 1)  # cudaStreamLegacy: cannot be captured into a graph


def device_count() -> int:
    """GPUs CuPy can see; 0 when CuPy is missing or broken, or there is no driver or device. Never raises."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # ImportError, CUDARuntimeError (no driver), OSError (missing CUDA libraries)
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
    CuPy kernels launch on it). ``None`` means CuPy's current stream at each :meth:`run`; or a
    CuPy stream; or a foreign stream as an int handle (``torch.cuda.current_stream().cuda_stream``)
    or an object with ``__cuda_stream__``, wrapped with ``Stream.from_external`` (CuPy >= 14) or
    ``ExternalStream``. Kernels of other libraries must launch on that same stream.

    ``flush_bytes``: size of the device buffer written before every window when ``run(flush=True)``;
    default max(2 × L2, 256 MiB). It is allocated on the first flush and reused.

    ``graph=True``: each :meth:`run` makes one eager call, captures its ``calls`` calls into one
    CUDA graph, launches it once untimed, then times one replay per window; for kernels dominated
    by launch overhead. Capture needs a non-default stream: with ``stream=None`` the backend uses
    a private non-blocking stream, ordered after the current one. In a pytest run, serve such a
    backend from the ``pytest_roofline_backend`` hook.
    """

    name = "cuda"

    def __init__(
        self,
        device: int = 0,
        *,
        stream: object | None = None,
        flush_bytes: int | None = None,
        graph: bool = False,
    ) -> None:
        self._cupy = _require_device(device)
        if flush_bytes is not None and (
            not isinstance(flush_bytes, int) or isinstance(flush_bytes, bool) or flush_bytes < 1
        ):
            raise ValueError(f"flush_bytes must be a positive integer; got {flush_bytes!r}")
        props = device_properties(device)
        self.device = device
        self.properties = props
        self.device_name = props.name
        self.resolution_s = EVENT_RESOLUTION_S
        self.flush_bytes = flush_bytes or max(2 * props.l2_bytes, MIN_FLUSH_BYTES)
        self.graph = graph
        with using_device(device):
            self._stream = None if stream is None else _as_cupy_stream(self._cupy, stream, device)
        if graph:
            self._check_graph_support(props)
        self._capture_stream: Any = None
        self._flush_buffer: Any = None
        self._flush_value = 0

    def clock(self) -> float:
        return time.perf_counter()

    def run(
        self, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        check_window_counts(calls, samples)
        cuda = self._cupy.cuda
        with using_device(self.device):
            stream = self._timing_stream()
            with stream:
                graph = self._capture(fn, args, calls, stream) if self.graph else None
                pairs = []
                for _ in range(samples):
                    if flush:
                        self._flush(stream)
                    start, end = cuda.Event(), cuda.Event()
                    start.record(stream)
                    if graph is None:
                        for _ in range(calls):
                            fn(*args)
                    else:
                        graph.launch(stream)
                    end.record(stream)
                    pairs.append((start, end))
            # one host sync for every window: they were queued in order on this one stream
            pairs[-1][1].synchronize()
            return [cuda.get_elapsed_time(start, end) / 1e3 for start, end in pairs]

    def _timing_stream(self) -> Any:
        if self._stream is not None:
            return self._stream
        cuda = self._cupy.cuda
        if not self.graph:
            return cuda.get_current_stream()
        if self._capture_stream is None:
            self._capture_stream = cuda.Stream(non_blocking=True)
        # a non-blocking stream does not wait for the legacy default stream, where the inputs were
        # likely written: order it after the current stream's queued work, without a host sync
        self._capture_stream.wait_event(cuda.get_current_stream().record())
        return self._capture_stream

    def _capture(self, fn: Kernel, args: Sequence[object], calls: int, stream: Any) -> Any:
        # one eager call first: kernel compilation, module loading and memory-pool growth belong
        # outside the capture (older drivers refuse module loading while capturing)
        fn(*args)
        stream.begin_capture()
        try:
            for _ in range(calls):
                fn(*args)
        except BaseException:
            with suppress(Exception):  # leave capture mode; the kernel's error is the one to see
                stream.end_capture()
            raise
        graph = stream.end_capture()
        # the first launch pays for uploading the graph: keep it out of every timed window
        graph.launch(stream)
        return graph

    def _flush(self, stream: Any) -> None:
        cupy = self._cupy
        if self._flush_buffer is None:
            self._flush_buffer = cupy.empty(self.flush_bytes, dtype=cupy.uint8)
        # a new value each time, so every line is really rewritten
        self._flush_value = self._flush_value % 255 + 1
        buf = self._flush_buffer
        cupy.cuda.runtime.memsetAsync(buf.data.ptr, self._flush_value, buf.nbytes, stream.ptr)

    def _check_graph_support(self, props: DeviceProperties) -> None:
        if props.kind == "rocm":
            raise RuntimeError("graph mode needs CUDA stream capture, which CuPy does not support on ROCm")
        if not hasattr(self._cupy.cuda.Stream, "begin_capture"):
            raise RuntimeError("graph mode needs CuPy >= 10 (cupy.cuda.Stream.begin_capture)")
        if self._stream is not None and self._stream.ptr in _LEGACY_STREAM_PTRS:
            raise ValueError(
                "graph mode cannot capture on the legacy default stream; pass a non-default stream "
                "(cupy.cuda.Stream(non_blocking=True)) or stream=None"
            )


def measure_ceilings(
    index: int = 0, policy: Policy | None = None
) -> tuple[Figure, dict[tuple[Precision, Unit], Figure]]:
    """Measured DRAM bandwidth and matmul FLOP/s of GPU ``index``, each timed with the engine.

    Bandwidth: ``cupy.copyto`` of a max(4 × L2, 512 MiB) buffer, counted as read + write.
    FLOP/s: ``cupy.matmul`` of two 4096² matrices (2·n³ FLOP): fp64 and fp32 keyed vector, fp16
    and, where CuPy with ml_dtypes supports it, bf16 keyed tensor. Where the GPU has FP64 tensor
    cores cuBLAS may use them, so fp64 can read above the vector datasheet peak; a higher peak
    only lowers floors, which stays safe.
    TF32 is not measured: CuPy reads ``CUPY_TF32`` once per process, on its first fp32 matmul, and
    has no public per-call switch; when it is set, the fp32 result is reported as TF32 tensor.
    ``policy`` defaults to ``Policy(flush=False)``: these buffers dwarf the cache.
    """
    from pytest_roofline.timing.engine import measure

    cupy = _require_device(index)
    policy = policy or Policy(flush=False)
    # cuBLAS is refused during stream capture (cupy/cupy#6290): never graph mode here
    backend = CudaBackend(index)
    with using_device(index):
        nbytes = max(4 * backend.properties.l2_bytes, MIN_COPY_BYTES)
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
        matmuls: list[tuple[Any, tuple[Precision, Unit]]] = [
            (cupy.float64, (Precision.FP64, Unit.VECTOR)),
            (cupy.float32, fp32_key),
            (cupy.float16, (Precision.FP16, Unit.TENSOR)),
        ]
        bf16 = _bfloat16(cupy)
        if bf16 is not None:
            matmuls.append((bf16, (Precision.BF16, Unit.TENSOR)))

        peaks: dict[tuple[Precision, Unit], Figure] = {}
        n = MATMUL_N
        for dtype, (precision, unit) in matmuls:
            # constant inputs: the FLOP count does not depend on values (random data can draw more
            # power and clock lower; a ceiling that errs high keeps floors safe)
            a = cupy.ones((n, n), dtype=dtype)
            b = cupy.ones((n, n), dtype=dtype)
            c = cupy.empty((n, n), dtype=dtype)
            m = measure(_matmul_into(cupy), a, b, c, policy=policy, backend=backend)
            peaks[(precision, unit)] = Figure(
                2 * n**3 / m.time_s,
                Source.MEASURED,
                f"cupy.matmul {n}×{n}×{n} {precision}, {m.stat} of {m.stats.n} samples",
            )
    return bandwidth, peaks


# -- private helpers ---------------------------------------------------------------------------


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        # no ImportError traceback for users: what to install, and CuPy's own reason if it broke
        raise RuntimeError(f"{NEED_CUPY} ({exc})") from None
    return cupy


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
    raise TypeError(
        f"stream must be a CuPy stream, an int handle (torch.cuda.current_stream().cuda_stream) or an "
        f"object with __cuda_stream__; got {stream!r} ({type(stream).__name__})"
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
