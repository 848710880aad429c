"""The contract between the backend-neutral engine and a timer backend: :class:`Backend`.

A backend knows only how to open and close a timed window around some calls, how to flush the
cache outside that window, and what its host clock reads. Warm-up, batching, stopping and
statistics all live in :mod:`pytest_roofline.timing.engine`, so they are tested once, on the CPU,
with a fake clock.
"""

from __future__ import annotations

import gc
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    """Python's cyclic garbage collector off inside, as in ``timeit`` (no collection, and no finalizer
    that syncs a GPU, in a timed window); on again after, if it was on."""
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
    """A reference kernel timed beside the kernel under test, so both see the same load; the verdict
    scales the calibrated ceiling by its rate, ``work`` per second
    (:mod:`pytest_roofline.model.paired_ceilings`). ``resource``: ``"bandwidth"`` (bytes per call) or
    a precision's compute (``"fp64"``, FLOPs).
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


class Backend(ABC):
    """A timer the engine measures with (``cpu.CpuBackend``, ``cuda.CudaBackend``, or a plugin's,
    served by the ``pytest_roofline_backend`` hook). Every backend times windows (:meth:`run`) and
    reads a host clock (:meth:`clock`); the rest are capabilities, each a default here that does
    nothing, which a backend that has the capability overrides (docs/development.md, "A timer backend
    of your own")."""

    #: "cpu" or "cuda"
    name: str
    #: human-readable device the windows run on ("Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3")
    device_name: str
    #: the shortest window this timer resolves faithfully, its own overhead included, in seconds
    resolution_s: float
    #: it times code on the host CPU: the plugin also times contention probes beside the kernel,
    #: reads the OS's contention counters over the sampling and judges against the CPU's measured
    #: peak; the engine keeps the ``last_*`` readings below, which such a backend sets at every run
    times_host: bool = False
    #: of the last run: the process's CPU time over the thread's (the kernel's own threads), or None
    last_parallelism: float | None = None
    #: of the last run: thread CPU time over wall time, or None
    last_cpu_share: float | None = None
    #: of the last run: the kernel's threads and the share of it they waited, or None
    last_thread_wait: ThreadWait | None = None
    #: of the last run: which windows the OS preempted (empty: it cannot tell)
    last_preempted: Sequence[bool] = ()
    #: of the last run: minor page faults per call (None: not known); a warm-up whose calls still
    #: fault has not settled
    last_page_faults: float | None = None
    #: every window replays one captured graph (``cuda.CudaBackend(graph=True)``): the engine then
    #: captures a whole rotation cycle, or flushes
    graph: bool = False

    @property
    def flush_bytes(self) -> int | None:
        """Bytes one flush reads (None: not known): before the engine has seen a flush, the plugin
        expects one to cost that at the device's bandwidth (:func:`.budget.expect_flush`)."""
        return None

    @abstractmethod
    def clock(self) -> float:
        """Host monotonic time in seconds: wall-time accounting and the time budget."""

    @abstractmethod
    def run(
        self, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        """Time ``samples`` windows, each of ``calls`` back-to-back ``fn(*args)`` calls.

        When ``flush`` is true the cache is flushed before every window, outside it. Returns each
        window's elapsed seconds (the total for its ``calls`` calls, not divided). A backend may
        queue all windows and synchronize once at the end (CUDA does).
        """

    def flush_cache(self) -> None:
        """A flush outside any window: here a window of an empty call with its flush, which a
        graph-mode backend would have to capture (nothing, and refused), so it flushes its own way."""
        self.run(empty_call, (), calls=1, samples=1, flush=True)

    def prepare_flush(self) -> object:
        """Make the flush buffer ahead, where one is made on first use: the plugin calls it before a
        cold measurement, so that making it (once a process) is no measurement's cost."""
        return None

    def release_memory(self) -> None:
        """Give back device memory held between measurements (a flush buffer, a pool's free blocks):
        the plugin asks after a measurement that flushed, for the tests' own allocators."""
        return None

    def watch_clocks(self, interval_s: float = 0.02) -> AbstractContextManager[ClockWatcher | None]:
        """A watch on the device's clocks over a measurement (its value has ``.log``); None: not watched."""
        return nullcontext(None)

    def on_stream(self, stream: object | None) -> AbstractContextManager[object]:
        """Time on ``stream``, a marker's or call's ``stream=``; this backend times none, and refuses one."""
        if stream is not None:
            raise InvalidValueError(
                f"stream={stream!r} was given, but this measurement runs on the {self.name!r} backend,"
                " which times no CUDA stream"
            )
        return nullcontext()

    def blocking(self, setting: bool | str | None) -> AbstractContextManager[object]:
        """Windows held by a blocking kernel as ``setting`` (a marker's or call's ``block=``) says;
        here ``block=`` changes nothing."""
        return nullcontext()

    def latency_floor_s(self, *, flushed: bool = False) -> float | None:
        """What an empty call costs on this timer, in seconds (``flushed``: right after a cache
        flush), where the backend knows; None: the plugin measures it where it can
        (:mod:`.backend_latency`: an empty Python call where the backend times host code)."""
        return None
