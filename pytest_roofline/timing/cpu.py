"""The CPU timer backend: ``perf_counter_ns`` around the calls, gc paused, cache flushed outside.

numpy is imported only on the first flush, so constructing a backend (or importing this module)
stays cheap for a session that never times anything.
"""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_roofline.timing.base import Backend, Kernel, check_window_counts, gc_paused
from pytest_roofline.timing.host_caches import SYSFS_CACHE, cpu_caches

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    import numpy.typing as npt

    from pytest_roofline.timing.contention import ThreadWait

#: a window is preempted when the OS switched this thread out and it ran less than this share of it
PREEMPTED_SHARE = 0.05
#: windows shorter than this are not read for preemption one by one (docs/measurement.md, "The CPU
#: timer")
PER_WINDOW_FROM_S = 1e-3
#: last-level cache size assumed when the OS does not say
FALLBACK_LLC_BYTES = 64 * 2**20

#: back-to-back clock reads whose minimum gap is the timer's own overhead
_RESOLUTION_READS = 300


@functools.cache
def last_level_cache_bytes() -> int:
    """Size of the largest-level data or unified CPU cache in bytes, as the OS reports it (Linux's
    sysfs, macOS's ``sysctl``), else :data:`FALLBACK_LLC_BYTES`. Cached."""
    size: int | None = None
    if sys.platform.startswith("linux"):
        caches = cpu_caches(SYSFS_CACHE)
        size = caches[-1].size_bytes if caches else None
    elif sys.platform == "darwin":
        size = _darwin_llc_bytes(_sysctl)
    return size or FALLBACK_LLC_BYTES


class CpuBackend(Backend):
    """Times windows of back-to-back calls on the host CPU, garbage collection paused inside each (as
    :mod:`timeit` does); ``flush=True`` reads a buffer of twice the last-level cache before each
    window, outside it (:meth:`flush_cache`).

    Every input that touches the machine is injectable for tests, each defaulting to the real one:
    ``clock_ns``, ``llc_bytes`` (:func:`last_level_cache_bytes`, called on the first flush),
    ``resolution_s`` (measured), ``device_name`` (:func:`cpu_model_name`), ``switches`` and
    ``thread_clock_ns`` (which mark a window :attr:`last_preempted`: docs/measurement.md, "The CPU
    timer"), ``process_clock_ns``, ``schedstats`` (:func:`~.contention.thread_schedstats`: the
    kernel's threads and their waits) and ``page_faults`` (:func:`minor_page_faults`).
    """

    name = "cpu"
    times_host = True

    def __init__(
        self,
        *,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
        llc_bytes: Callable[[], int] = last_level_cache_bytes,
        resolution_s: float | None = None,
        device_name: str | None = None,
        switches: Callable[[], int] | None = None,
        thread_clock_ns: Callable[[], int] = time.thread_time_ns,
        process_clock_ns: Callable[[], int] = time.process_time_ns,
        schedstats: Callable[[], Mapping[str, tuple[int, int]] | None] | None = None,
        page_faults: Callable[[], int | None] | None = None,
    ) -> None:
        self._clock_ns = clock_ns
        self._llc_bytes = llc_bytes
        if switches is None:
            from pytest_roofline.timing.contention import involuntary_switches

            switches = involuntary_switches
        self._switches = switches
        if schedstats is None:
            from pytest_roofline.timing.contention import thread_schedstats

            schedstats = thread_schedstats
        self._schedstats = schedstats
        self._thread_clock_ns = thread_clock_ns
        self._process_clock_ns = process_clock_ns
        #: of the last :meth:`run`'s windows: the process's CPU time over this thread's (1: the
        #: kernel ran on this thread alone; about 2: BLAS on two cores), None when it used none
        self.last_parallelism: float | None = None
        #: of the last :meth:`run`'s windows: the share of their wall time this thread ran
        self.last_cpu_share: float | None = None
        #: of the last :meth:`run`: the threads the kernel ran on and the share of their time they
        #: waited for a core (:class:`~pytest_roofline.timing.contention.ThreadWait`), None where unknown
        self.last_thread_wait: ThreadWait | None = None
        #: per window of the last :meth:`run`: whether this thread was preempted during it
        self.last_preempted: list[bool] = []
        self._page_faults = minor_page_faults if page_faults is None else page_faults
        #: the minor page faults per call of the last :meth:`run`, None where the OS does not say:
        #: calls that fault are served memory the process never touched (a fresh output's pages)
        self.last_page_faults: float | None = None
        #: the larger of the clock's stated resolution and the measured cost of reading it twice
        self.resolution_s = _measure_resolution_s(clock_ns) if resolution_s is None else resolution_s
        self.device_name = cpu_model_name() if device_name is None else device_name
        self._flush_buffer: npt.NDArray[np.uint64] | None = None
        #: the last flush's read, kept so that the read is one nothing can skip
        self.flush_checksum = 0

    def clock(self) -> float:
        return self._clock_ns() / 1e9

    @property
    def flush_bytes(self) -> int:
        """Bytes read by one flush: twice the last-level cache."""
        return 2 * self._llc_bytes()

    def flush_cache(self) -> None:
        """Evict the caches by reading a buffer twice the size of the last-level cache, written once
        when it is made (why: docs/cache.md, "When rotation cannot apply")."""
        # a max, the fastest read (docs/cache.md, "When rotation cannot apply")
        self.flush_checksum = int(self.prepare_flush().max())

    def prepare_flush(self) -> npt.NDArray[np.uint64]:
        """The flush buffer, made and written on first use (once a process: the plugin makes it
        before a cold measurement, so that no measurement pays for it)."""
        if self._flush_buffer is None:
            import numpy as np

            buffer = np.empty(self.flush_bytes // 8, dtype=np.uint64)
            buffer.fill(0x0101010101010101)
            self._flush_buffer = buffer
        return self._flush_buffer

    def run(
        self, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        check_window_counts(calls, samples)
        clock_ns, switches, thread_ns = self._clock_ns, self._switches, self._thread_clock_ns
        process_ns = self._process_clock_ns
        windows: list[float] = []
        preempted: list[bool] = []
        self.last_preempted = preempted
        thread_total = process_total = wall_total = 0
        faults_before = self._page_faults()
        threads_before, round_start = self._schedstats(), clock_ns()
        # the first window is read on its own; when it is shorter than PER_WINDOW_FROM_S, the rest
        # of the run is read as a whole (from ``rest``: wall, thread and process clocks)
        rest: tuple[int, int, int] | None = None
        for _ in range(samples):
            if flush:
                self.flush_cache()
            with gc_paused():
                if rest is None:
                    before, cpu_before, process_before = switches(), thread_ns(), process_ns()
                start = clock_ns()
                for _ in range(calls):
                    fn(*args)
                stop = clock_ns()
                if rest is None:
                    thread_cpu = thread_ns() - cpu_before
                    process_total += process_ns() - process_before
                    thread_total += thread_cpu
                    wall_total += stop - start
                    # switched out, and for long enough to matter (not a tick's switch)
                    lost = (stop - start) - thread_cpu
                    preempted.append(switches() != before and lost > PREEMPTED_SHARE * (stop - start))
                    if stop - start < PER_WINDOW_FROM_S * 1e9:
                        rest = (clock_ns(), thread_ns(), process_ns())
                else:
                    preempted.append(False)
            windows.append((stop - start) / 1e9)
        if rest is not None:
            wall_total += clock_ns() - rest[0]
            thread_total += thread_ns() - rest[1]
            process_total += process_ns() - rest[2]
        threads_after = self._schedstats()
        faults_after = self._page_faults()
        self.last_page_faults = (
            None
            if faults_before is None or faults_after is None
            else (faults_after - faults_before) / (calls * samples)
        )
        self.last_thread_wait = None
        if threads_before is not None and threads_after is not None:
            from pytest_roofline.timing.contention import thread_wait

            self.last_thread_wait = thread_wait(threads_before, threads_after, clock_ns() - round_start)
        self.last_parallelism = process_total / thread_total if thread_total > 0 else None
        self.last_cpu_share = thread_total / wall_total if wall_total > 0 else None
        return windows


def minor_page_faults() -> int | None:
    """The process's minor page faults so far (``getrusage``), None where the OS has no such count
    (what the warm-up reads from them: docs/measurement.md, "The phases of one measurement")."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


def _measure_resolution_s(clock_ns: Callable[[], int]) -> float:
    stated = time.get_clock_info("perf_counter").resolution
    gaps = []
    for _ in range(_RESOLUTION_READS):
        a = clock_ns()
        b = clock_ns()
        gaps.append(b - a)
    return max(stated, min(gaps) / 1e9)


def _sysctl(key: str) -> str | None:
    try:
        done = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _darwin_llc_bytes(sysctl: Callable[[str], str | None]) -> int | None:
    for key in ("hw.l3cachesize", "hw.l2cachesize"):
        out = sysctl(key)
        try:
            size = int(out) if out is not None else 0
        except ValueError:
            continue
        if size > 0:
            return size
    return None


def cpu_model_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU model the OS reports: Linux's ``model name``, macOS's brand string, else the platform."""
    if sys.platform.startswith("linux"):
        try:
            for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
        except OSError:
            pass
    elif sys.platform == "darwin":
        brand = _sysctl("machdep.cpu.brand_string")
        if brand and brand.strip():
            return brand.strip()
    return platform.processor() or platform.machine() or "unknown CPU"
