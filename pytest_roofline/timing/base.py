"""The contract between the backend-neutral engine and a timer backend.

A backend knows only how to open and close a timed window around some calls, how to flush
the cache outside that window, and what its host clock reads. Warm-up, batching, stopping and
statistics all live in :mod:`pytest_roofline.timing.engine`, so they are tested once, on the
CPU, with a fake clock.

Beyond :class:`Backend`, a backend may have capabilities, each a small protocol the plugin asks for
with ``isinstance`` (never by the backend's class or name): :class:`HostReadings` (it times host
code and reads the OS during its windows), :class:`WatchesClocks` (its device's clocks during a
measurement), :class:`TakesStreams` (a caller's ``stream=``), :class:`HoldsLaunches` (a caller's
``block=``), :class:`MeasuresLatencyFloor` (what an empty call costs on its timer),
:class:`ReleasesMemory` (device memory it holds between measurements), :class:`SizesFlush` (the
bytes its flush reads), :class:`PreparesFlush` (its flush buffer made ahead), and, asked by the
engine, :class:`FlushesCache` (a flush outside any window) and :class:`ReplaysGraphs` (windows that
replay a captured graph). A backend served by the ``pytest_roofline_backend`` hook gets each one it
implements.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import InvalidValueError

if TYPE_CHECKING:
    from pytest_roofline.timing.clocks import ClockWatcher
    from pytest_roofline.timing.contention import ThreadWait

from pytest_roofline.model.policy import check_count, check_positive

Kernel = Callable[..., object]

#: a measurement takes at least this many samples where they run past its time budget by at most a
#: fifth of it (:mod:`.budget`); fewer, never less than one, only where the kernel is too slow for that
MIN_SAMPLES_FLOOR = 3


def empty_call() -> None:
    """A call that does nothing: what a window holds when only its flush is wanted, and what the
    latency floors time around nothing."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside, as ``timeit`` keeps it off while timing: no
    collection lands in a timed window, and on a GPU no finalizer it would run (pinned memory's
    ``cudaFreeHost``, a device-wide sync) waits for a held stream. Garbage made meanwhile is
    collected after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def check_window_counts(calls: int, samples: int) -> None:
    """What every backend's ``run`` checks first: at least one call in at least one window."""
    if calls < 1 or samples < 1:
        raise InvalidValueError(f"calls and samples must be >= 1; got calls={calls}, samples={samples}")


@dataclass(frozen=True, slots=True)
class Probe:
    """A reference kernel timed beside the kernel under test, so both see the same load.

    Its rate (``work`` per second) tracks how fast the machine runs *now*: the verdict scales the
    calibrated ceiling by it (:mod:`pytest_roofline.model.paired_ceilings`). ``resource`` names what it
    measures: ``"bandwidth"`` (bytes per call) or a precision's compute (``"fp64"``, FLOPs).
    """

    name: str
    resource: str
    #: bytes or FLOPs one call of ``fn`` does
    work: float
    fn: Kernel
    #: untimed calls before a measurement's first probe (BLAS wakes its threads on the first)
    warmup_calls: int = 0

    def __post_init__(self) -> None:
        check_positive("work", self.work)
        check_count("warmup_calls", self.warmup_calls, minimum=0)


class Backend(Protocol):
    """What the engine needs from a timer. Implementations: ``cpu.CpuBackend``, ``cuda.CudaBackend``."""

    #: "cpu" or "cuda"
    name: str
    #: human-readable device the windows run on ("Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3")
    device_name: str
    #: the shortest window this timer resolves faithfully, its own overhead included, in seconds
    resolution_s: float

    def clock(self) -> float:
        """Host monotonic time in seconds: wall-time accounting and the time budget."""
        ...

    def run(
        self, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        """Time ``samples`` windows, each of ``calls`` back-to-back ``fn(*args)`` calls.

        When ``flush`` is true the cache is flushed before every window, outside it. Returns each
        window's elapsed seconds (the total for its ``calls`` calls, not divided). A backend may
        queue all windows and synchronize once at the end (CUDA does).
        """
        ...


# -- capabilities: what a backend may do beyond timing windows -------------------------------------


@runtime_checkable
class HostReadings(Protocol):
    """A backend that times code on the host CPU and reads the OS around each :meth:`Backend.run`
    (``cpu.CpuBackend``). The engine keeps these readings with the measurement; the plugin, seeing
    this capability, also times contention probes beside the kernel, reads the OS's contention
    counters over the sampling phase, and judges against the CPU's measured peak."""

    #: process CPU time over thread CPU time in the last run (the kernel's own threads), or None
    last_parallelism: float | None
    #: thread CPU time over wall time in the last run, or None
    last_cpu_share: float | None
    #: the threads of the last run and the share of it they waited, or None
    last_thread_wait: ThreadWait | None
    #: which windows of the last run the OS preempted (empty: it cannot tell)
    last_preempted: list[bool]
    # The engine also reads ``last_page_faults`` where a backend has one (minor page faults per call
    # of the last run; None: not known): a warm-up whose calls still fault has not settled.


@runtime_checkable
class WatchesClocks(Protocol):
    """A backend whose device's clocks can be watched over a measurement (``cuda.CudaBackend``, through
    NVML): the plugin wraps every measurement in ``with backend.watch_clocks() as watcher:`` and reads
    ``watcher.log`` (a :class:`~pytest_roofline.model.conditions.ClockLog`)."""

    def watch_clocks(self, interval_s: float = 0.02) -> ClockWatcher: ...


@runtime_checkable
class TakesStreams(Protocol):
    """A backend that times on a stream the caller names (``cuda.CudaBackend``): a marker's or call's
    ``stream=`` is handed to ``on_stream`` around the measurement. A ``stream=`` given to a backend
    without this capability is an error naming both."""

    def on_stream(self, stream: object | None) -> AbstractContextManager[object]: ...


@runtime_checkable
class HoldsLaunches(Protocol):
    """A backend whose windows a blocking kernel may hold (``cuda.CudaBackend``): a marker's or call's
    ``block=`` (``"auto"``, ``"on"``, ``"off"``) is handed to ``blocking`` around the measurement;
    without this capability ``block=`` changes nothing."""

    def blocking(self, setting: bool | str | None) -> AbstractContextManager[object]: ...


@runtime_checkable
class FlushesCache(Protocol):
    """A backend that flushes its cache outside any window (``cuda.CudaBackend``): the engine flushes
    with it where it wants a flush alone. Without it the engine asks for a window of an empty call
    with ``flush=True``, which a graph-mode backend would have to capture (nothing, and refused)."""

    def flush_cache(self) -> None: ...


@runtime_checkable
class SizesFlush(Protocol):
    """A backend whose flush reads a buffer of a known size (``cpu.CpuBackend``, ``cuda.CudaBackend``):
    before the engine has seen one, the plugin expects a flush to cost that buffer at the device's
    bandwidth (:func:`.budget.expect_flush`), which chooses between it and rotation's untimed cycle."""

    flush_bytes: int


@runtime_checkable
class PreparesFlush(Protocol):
    """A backend that makes its flush buffer on first use (``cpu.CpuBackend``): the plugin has it made
    before a cold measurement, so that making it (once a process) is no measurement's cost."""

    def prepare_flush(self) -> object: ...


@runtime_checkable
class ReplaysGraphs(Protocol):
    """A backend whose windows may replay one captured CUDA graph (``cuda.CudaBackend``, ``graph``
    True): every window replays the calls captured once, so a window of k rotated calls touches the
    same k argument sets each time, and the engine captures a whole rotation cycle or flushes."""

    graph: bool


@runtime_checkable
class ReleasesMemory(Protocol):
    """A backend that holds device memory between measurements (``cuda.CudaBackend``: its flush
    buffer, CuPy's pool of freed blocks): the plugin asks it to give that back after a measurement
    that flushed, so that the tests' own kernels (PyTorch's allocator) can use it."""

    def release_memory(self) -> None: ...


@runtime_checkable
class MeasuresLatencyFloor(Protocol):
    """A backend that knows the shortest time a call can show on its timer (an empty call's, in
    seconds), measured once and kept. With ``--roofline-latency-floor on`` a kernel whose roofline
    floor is below it is judged latency-bound. ``flushed``: the kernel is timed right after a cache
    flush. The plugin's own backends have their floors measured by
    :func:`pytest_roofline.timing.backend_latency.latency_floor_s`; another backend without this
    capability has none (0)."""

    def latency_floor_s(self, *, flushed: bool = False) -> float: ...
