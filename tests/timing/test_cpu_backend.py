"""The CPU backend on a fake clock: back-to-back windows, the flush before each and outside it, the
garbage collector paused inside, the clock's resolution and the machine facts it reads (the LLC from
sysfs or sysctl), and preemption and thread waits read around each window."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import REPO_ROOT
from fakes import FakeClock

from pytest_roofline.model.measurement import StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing import cpu
from pytest_roofline.timing.base import Backend
from pytest_roofline.timing.cache import WARM
from pytest_roofline.timing.contention import ThreadWait
from pytest_roofline.timing.cpu import (
    FALLBACK_LLC_BYTES,
    PER_WINDOW_FROM_S,
    CpuBackend,
    last_level_cache_bytes,
)
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.host_caches import cpu_caches, parse_cache_size

KiB = 2**10


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_s=100.0)


@pytest.fixture
def backend(clock: FakeClock) -> CpuBackend:
    return CpuBackend(
        clock_ns=clock.now_ns, llc_bytes=lambda: 4 * KiB, resolution_s=1e-6, device_name="Fake CPU"
    )


@pytest.fixture
def restore_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def test_is_a_backend(backend: CpuBackend) -> None:
    typed: Backend = backend  # checked by mypy: CpuBackend satisfies the protocol
    assert (typed.name, typed.device_name, typed.resolution_s) == ("cpu", "Fake CPU", 1e-6)


def test_clock_reads_the_injected_clock_in_seconds(backend: CpuBackend, clock: FakeClock) -> None:
    assert backend.clock() == 100.0
    clock.advance(0.25)
    assert backend.clock() == 100.25


@pytest.mark.parametrize(("calls", "samples"), [(1, 1), (1, 3), (4, 2)])
def test_windows_time_back_to_back_calls(
    backend: CpuBackend, clock: FakeClock, calls: int, samples: int
) -> None:
    made: list[str] = []

    def kernel(tag: str) -> None:
        made.append(tag)
        clock.advance(1e-3)

    windows = backend.run(kernel, ("k",), calls=calls, samples=samples, flush=False)
    assert windows == pytest.approx([calls * 1e-3] * samples)
    assert made == ["k"] * (calls * samples)


@pytest.mark.parametrize(("calls", "samples"), [(0, 1), (1, 0)])
def test_run_rejects_empty_windows(backend: CpuBackend, calls: int, samples: int) -> None:
    with pytest.raises(ValueError, match="calls and samples must be >= 1"):
        backend.run(print, (), calls=calls, samples=samples, flush=False)


def test_flush_happens_before_each_window_and_outside_it(
    backend: CpuBackend, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []

    def slow_flush() -> None:
        events.append("flush")
        clock.advance(1.0)

    def kernel() -> None:
        events.append("call")
        clock.advance(1e-3)

    monkeypatch.setattr(backend, "flush_cache", slow_flush)
    windows = backend.run(kernel, (), calls=2, samples=2, flush=True)
    assert events == ["flush", "call", "call", "flush", "call", "call"]
    assert windows == pytest.approx([2e-3, 2e-3])


def test_no_flush_when_not_asked(backend: CpuBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    flushes: list[None] = []
    monkeypatch.setattr(backend, "flush_cache", lambda: flushes.append(None))
    backend.run(lambda: None, (), calls=1, samples=3, flush=False)
    assert flushes == []


@pytest.mark.usefixtures("restore_gc")
@pytest.mark.parametrize("enabled_before", [True, False])
def test_gc_is_paused_inside_the_window_and_restored(backend: CpuBackend, enabled_before: bool) -> None:
    if enabled_before:
        gc.enable()
    else:
        gc.disable()
    seen: list[bool] = []
    backend.run(lambda: seen.append(gc.isenabled()), (), calls=2, samples=2, flush=False)
    assert seen == [False] * 4
    assert gc.isenabled() is enabled_before


@pytest.mark.usefixtures("restore_gc")
@pytest.mark.parametrize("enabled_before", [True, False])
def test_kernel_exception_propagates_and_gc_is_restored(backend: CpuBackend, enabled_before: bool) -> None:
    if enabled_before:
        gc.enable()
    else:
        gc.disable()
    error = RuntimeError("kernel failed")

    def kernel() -> None:
        raise error

    with pytest.raises(RuntimeError, match="kernel failed") as info:
        measure(kernel, backend=backend)
    assert info.value is error
    assert gc.isenabled() is enabled_before


def test_flush_reads_twice_the_llc_from_one_reused_buffer_and_writes_nothing(backend: CpuBackend) -> None:
    assert backend.flush_bytes == 8 * KiB
    backend.flush_cache()
    buffer = backend._flush_buffer
    assert buffer is not None
    assert buffer.nbytes == 8 * KiB
    assert int(buffer.min()) != 0  # written once when made: real pages, not the shared zero page
    buffer[-1] |= 1 << 63  # its last word: a flush that reads it all sees it
    before = buffer.copy()
    backend.flush_cache()
    assert backend._flush_buffer is buffer
    assert backend.flush_checksum >> 63 == 1
    # read, never written: no dirty lines left for the kernel's misses to write back
    assert (buffer == before).all()


def test_llc_size_is_read_lazily() -> None:
    reads: list[None] = []

    def llc() -> int:
        reads.append(None)
        return KiB

    backend = CpuBackend(llc_bytes=llc, resolution_s=1e-6)
    backend.run(lambda: None, (), calls=1, samples=2, flush=False)
    assert reads == []
    backend.run(lambda: None, (), calls=1, samples=2, flush=True)
    assert reads == [None]


def test_importing_and_constructing_does_not_import_numpy() -> None:
    code = (
        "import sys\n"
        "from pytest_roofline.timing.engine import measure\n"
        "from pytest_roofline.timing.cpu import CpuBackend\n"
        "CpuBackend()\n"
        "assert 'numpy' not in sys.modules, 'numpy was imported'\n"
    )
    root = REPO_ROOT
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_measure_with_a_fake_clock_is_exact(backend: CpuBackend, clock: FakeClock) -> None:
    m = measure(lambda: clock.advance(2e-3), policy=Policy(min_time_s=0), cache=WARM, backend=backend)
    assert m.samples_s == pytest.approx([2e-3] * 10)
    assert m.stop_reason is StopReason.PRECISION
    assert m.warmup_calls == 13  # 1, 1, 2, 4 calls, then the 5 left to reach 25 ms
    assert (m.backend, m.device) == ("cpu", "Fake CPU")


# -- resolution and machine facts --------------------------------------------------------------


def test_resolution_is_at_least_the_stated_clock_resolution() -> None:
    stated = time.get_clock_info("perf_counter").resolution
    assert CpuBackend().resolution_s >= stated
    # a clock that never moves has no read overhead: the stated resolution remains
    assert CpuBackend(clock_ns=lambda: 0).resolution_s == stated


def test_resolution_includes_the_cost_of_reading_the_clock() -> None:
    ticks = iter(range(0, 10**9, 250))  # every read costs 250 ns
    backend = CpuBackend(clock_ns=lambda: next(ticks))
    assert backend.resolution_s == pytest.approx(max(250e-9, time.get_clock_info("perf_counter").resolution))


def test_device_name_is_the_cpu_model() -> None:
    assert CpuBackend().device_name.strip()


def make_sysfs(root: Path, caches: list[tuple[str, str, str]]) -> Path:
    for i, (level, kind, size) in enumerate(caches):
        index = root / f"index{i}"
        index.mkdir()
        (index / "level").write_text(level + "\n")
        (index / "type").write_text(kind + "\n")
        (index / "size").write_text(size + "\n")
    return root


def test_linux_llc_is_the_highest_data_level(tmp_path: Path) -> None:
    root = make_sysfs(
        tmp_path,
        [
            ("1", "Data", "48K"),
            ("1", "Instruction", "32K"),
            ("2", "Unified", "2048K"),
            ("3", "Unified", "307200K"),
        ],
    )
    assert cpu_caches(root)[-1].size_bytes == 307200 * KiB


def test_linux_llc_ignores_instruction_caches_and_junk(tmp_path: Path) -> None:
    root = make_sysfs(
        tmp_path, [("2", "Unified", "1M"), ("3", "Instruction", "64M"), ("4", "Unified", "huge")]
    )
    assert cpu_caches(root)[-1].size_bytes == 2**20


def test_linux_llc_without_sysfs(tmp_path: Path) -> None:
    assert cpu_caches(tmp_path / "missing") == ()


@pytest.mark.parametrize(
    ("text", "size"), [("48K", 48 * KiB), ("32M", 32 * 2**20), ("1G", 2**30), ("4096", 4096)]
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_cache_size(text) == size


@pytest.mark.parametrize(
    ("answers", "size"),
    [
        ({"hw.l3cachesize": "33554432\n", "hw.l2cachesize": "262144\n"}, 32 * 2**20),
        ({"hw.l3cachesize": None, "hw.l2cachesize": "4194304\n"}, 4 * 2**20),  # Apple silicon: no L3
        ({"hw.l3cachesize": "0\n", "hw.l2cachesize": "4194304\n"}, 4 * 2**20),
        ({"hw.l3cachesize": None, "hw.l2cachesize": None}, None),
    ],
)
def test_darwin_llc(answers: dict[str, str | None], size: int | None) -> None:
    assert cpu._darwin_llc_bytes(answers.__getitem__) == size


def test_last_level_cache_bytes_is_positive_and_cached() -> None:
    size = last_level_cache_bytes()
    assert size > 0
    assert last_level_cache_bytes() == size
    assert FALLBACK_LLC_BYTES == 64 * 2**20


# -- preemption ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("switched", "cpu_share", "preempted"),
    [
        (False, 1.0, False),
        (True, 0.99, False),  # switched out for a tick's worth: not enough to matter
        (True, 0.90, True),  # switched out for a tenth of the window
        (False, 0.50, False),  # off the CPU without being preempted: waiting, not contention
    ],
)
def test_a_window_is_preempted_when_switched_out_for_long_enough(
    clock: FakeClock, switched: bool, cpu_share: float, preempted: bool
) -> None:
    counts = iter(range(100))
    thread = FakeClock()

    def kernel() -> None:
        clock.advance(0.01)
        thread.advance(0.01 * cpu_share)

    backend = CpuBackend(
        clock_ns=clock.now_ns,
        resolution_s=1e-6,
        device_name="test",
        switches=(lambda: next(counts)) if switched else (lambda: 7),
        thread_clock_ns=thread.now_ns,
    )
    windows = backend.run(kernel, (), calls=1, samples=2, flush=False)
    assert windows == [pytest.approx(0.01)] * 2
    assert backend.last_preempted == [preempted, preempted]


@pytest.mark.parametrize(("process_share", "parallelism"), [(1.0, 1.0), (2.0, 2.0)])
def test_the_backend_reads_the_kernels_parallelism(
    clock: FakeClock, process_share: float, parallelism: float
) -> None:
    thread, process = FakeClock(), FakeClock()

    def kernel() -> None:  # 10 ms on this thread; the process spent process_share times that
        clock.advance(0.01)
        thread.advance(0.01)
        process.advance(0.01 * process_share)

    backend = CpuBackend(
        clock_ns=clock.now_ns, resolution_s=1e-6, device_name="test", switches=lambda: 0,
        thread_clock_ns=thread.now_ns, process_clock_ns=process.now_ns,
    )  # fmt: skip
    backend.run(kernel, (), calls=2, samples=3, flush=False)
    assert backend.last_parallelism == pytest.approx(parallelism)


def test_the_backend_reads_the_threads_and_their_wait_around_each_run(clock: FakeClock) -> None:
    readings = iter([{"1": (0, 0), "2": (0, 0)}, {"1": (20_000_000, 20_000_000), "2": (20_000_000, 0)}])

    def kernel() -> None:
        clock.advance(0.01)

    backend = CpuBackend(
        clock_ns=clock.now_ns, resolution_s=1e-6, device_name="test", switches=lambda: 0,
        schedstats=lambda: next(readings),
    )  # fmt: skip
    backend.run(kernel, (), calls=2, samples=2, flush=False)  # a 40 ms round
    assert backend.last_thread_wait == ThreadWait(threads=2, wait_share=pytest.approx(1 / 3))  # 20 of 60 ms


def test_the_backend_says_nothing_of_threads_where_the_os_does_not(clock: FakeClock) -> None:
    backend = CpuBackend(
        clock_ns=clock.now_ns, resolution_s=1e-6, device_name="test", switches=lambda: 0,
        schedstats=lambda: None,
    )  # fmt: skip
    backend.run(lambda: clock.advance(0.01), (), calls=1, samples=2, flush=False)
    assert backend.last_thread_wait is None


def test_short_windows_are_read_as_a_whole_after_the_first(clock: FakeClock) -> None:
    # the per-window reads are system calls that slow the window after them: below 1 ms a window is
    # not read one by one (a preempted one is an outlier anyway), the run is read as a whole
    reads: list[str] = []
    thread, process = FakeClock(), FakeClock()

    def kernel() -> None:  # 20 µs on this thread, twice that in the process (two threads)
        clock.advance(20e-6)
        thread.advance(20e-6)
        process.advance(40e-6)

    def read(name: str, source: FakeClock) -> Callable[[], int]:
        return lambda: reads.append(name) or source.now_ns()

    backend = CpuBackend(
        clock_ns=clock.now_ns, resolution_s=1e-9, device_name="test",
        switches=lambda: reads.append("sw") or 0, thread_clock_ns=read("thread", thread),
        process_clock_ns=read("process", process), schedstats=lambda: None,
    )  # fmt: skip
    windows = backend.run(kernel, (), calls=1, samples=50, flush=False)
    assert windows == [pytest.approx(20e-6)] * 50
    assert reads.count("sw") == 2  # around the first window only
    assert reads.count("thread") == 4  # the first window, then the rest as a whole
    assert backend.last_preempted == [False] * 50
    assert backend.last_parallelism == pytest.approx(2.0)
    assert backend.last_cpu_share == pytest.approx(1.0)


def test_long_windows_are_each_read_for_preemption(clock: FakeClock) -> None:
    switched = iter(range(0, 1000, 1))
    thread = FakeClock()

    def kernel() -> None:  # 2 ms, of which this thread ran 1.5
        clock.advance(2e-3)
        thread.advance(1.5e-3)

    backend = CpuBackend(
        clock_ns=clock.now_ns, resolution_s=1e-9, device_name="test", switches=lambda: next(switched),
        thread_clock_ns=thread.now_ns, schedstats=lambda: None,
    )  # fmt: skip
    backend.run(kernel, (), calls=1, samples=4, flush=False)
    assert backend.last_preempted == [True] * 4
    assert PER_WINDOW_FROM_S == 1e-3


def test_the_flushed_latency_floor_times_an_empty_call_right_after_each_flush() -> None:
    from fakes import FakeBackend

    from pytest_roofline.timing.cpu_latency import CPU_FLUSHED_LATENCY_POLICY, measure_latency_floor

    backend = FakeBackend(5e-6, flush_s=0.05)
    floor = measure_latency_floor(backend, policy=CPU_FLUSHED_LATENCY_POLICY, flushed=True)
    sampling = backend.events[backend.events.index("flush") :]
    assert sampling == ["flush", "window"] * (len(sampling) // 2)  # one empty call per flush
    assert floor.floor_s == pytest.approx(5e-6)
    assert all(run.calls == 1 for run in backend.runs)


# -- page faults --------------------------------------------------------------------------------


def test_a_run_says_how_many_pages_its_calls_faulted_in() -> None:
    faults = iter([100, 100 + 6 * 420, 5000, 5000])
    backend = CpuBackend(resolution_s=1e-6, device_name="Fake CPU", page_faults=lambda: next(faults))
    backend.run(lambda: None, (), calls=3, samples=2, flush=False)
    assert backend.last_page_faults == 420
    backend.run(lambda: None, (), calls=1, samples=1, flush=False)
    assert backend.last_page_faults == 0


def test_an_os_without_a_fault_count_says_nothing() -> None:
    backend = CpuBackend(resolution_s=1e-6, device_name="Fake CPU", page_faults=lambda: None)
    backend.run(lambda: None, (), calls=1, samples=1, flush=False)
    assert backend.last_page_faults is None


def test_fresh_pages_fault_and_reused_ones_do_not() -> None:
    import numpy as np

    from pytest_roofline.timing.cpu import minor_page_faults

    if minor_page_faults() is None:
        pytest.skip("this OS keeps no count of page faults")
    backend = CpuBackend(resolution_s=1e-6, device_name="Fake CPU")
    kept: list[object] = []
    backend.run(lambda: kept.append(np.ones(2**20)), (), calls=4, samples=1, flush=False)  # 8 MiB, kept
    assert (backend.last_page_faults or 0) >= 1
    out = np.ones(2**20)  # written once: its pages are the process's
    backend.run(lambda: np.multiply(out, 2.0, out=out), (), calls=4, samples=1, flush=False)
    assert backend.last_page_faults is not None
    assert backend.last_page_faults < 1
