"""What a real GPU does to a host that waits, on the fake (``fake_cupy.py``): a first call that loads
its module or grows the memory pool synchronizes, the launch queue is finite, ``CUDA_LAUNCH_BLOCKING``
makes launches synchronous, and a launch on the legacy stream escapes a non-blocking capture.

Issue 20's findings 1, 3 and 5 each have a test here that failed on the code before the fix:
``test_the_first_call_of_a_measurement_is_never_held`` (and the latency floor's and calibration's),
``test_a_window_of_many_launches_never_fills_the_queue_behind_a_hold`` and
``test_a_launch_that_escapes_a_non_blocking_capture_is_refused``.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fake_cupy import FakeCupy

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cache import WARM
from pytest_roofline.timing.cuda import blocking, launch_latency, loading, measured_ceilings
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.cuda.kernels import BLOCK_SOURCE
from pytest_roofline.timing.engine import measure

FAST = Policy(warmup_s=0, warmup_calls=1, min_samples=5, max_time_s=0.5)


@pytest.fixture(autouse=True)
def _no_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in getattr(blocking, "PROFILER_ENVIRONMENT", ()):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    return FakeCupy().install(monkeypatch)


def timeouts(fake: FakeCupy) -> list[tuple[Any, ...]]:
    return fake.entries("block_timeout")


# -- the fake itself --------------------------------------------------------------------------------


def test_the_fake_syncs_on_a_first_load_and_a_pool_growth(fake: FakeCupy) -> None:
    fake.kernel()
    fake.kernel()
    fake.cupy.empty(1024, dtype=fake.cupy.uint8)
    fake.cupy.empty(1024, dtype=fake.cupy.uint8)

    assert fake.entries("load", "grow") == [("load", "kernel"), ("grow", 1024)]


def test_the_fake_times_only_the_events_stream(fake: FakeCupy) -> None:
    side = fake.cupy.cuda.Stream(non_blocking=True)
    start, end = fake.cupy.cuda.Event(), fake.cupy.cuda.Event()
    start.record()
    fake.launch(side)  # on another stream: not between the null stream's events
    fake.kernel()
    end.record()
    end.synchronize()

    assert fake.cupy.cuda.get_elapsed_time(start, end) == pytest.approx(fake.kernel_ms)


def test_the_fakes_queue_blocks_the_host_behind_a_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(queue_depth=4).install(monkeypatch)
    fake.kernel()  # loaded
    kernel = fake.cupy.RawKernel(BLOCK_SOURCE, "roofline_block")
    memory = fake.cupy.cuda.PinnedMemory(16)
    import numpy as np

    kernel((1,), (1,), (np.uint64(memory.ptr), np.int64(1), np.uint64(1)))
    for _ in range(5):
        fake.kernel()

    assert timeouts(fake) == [("block_timeout", 1)]


# -- finding 1: a first call is never held ------------------------------------------------------------


def test_the_first_call_of_a_measurement_is_never_held(fake: FakeCupy) -> None:
    m = measure(fake.kernel, policy=FAST, backend=CudaBackend())

    assert timeouts(fake) == []
    assert m.time_s == pytest.approx(fake.kernel_ms / 1e3)
    first = fake.log.index(("load", "kernel"))
    assert not any(entry[0] == "block" and entry[2] > 0 for entry in fake.log[:first])
    assert fake.count("block") > 1  # sampling windows are held


def test_a_first_call_that_grows_the_pool_is_never_held(fake: FakeCupy) -> None:
    cupy = fake.cupy
    sizes = iter(range(1, 1_000_000))

    def allocates_then_launches() -> None:
        cupy.empty(next(sizes), dtype=cupy.uint8)  # a new size every call: the pool grows every call
        fake.kernel()

    backend = CudaBackend()
    backend.run(allocates_then_launches, (), calls=1, samples=1, flush=False)  # the first call: unheld

    assert timeouts(fake) == []


def test_the_latency_floors_first_empty_kernel_is_never_held(fake: FakeCupy) -> None:
    floor = launch_latency.latency_floor(0)

    assert timeouts(fake) == []
    assert floor.floor_s > 0


def test_calibrations_first_matmul_is_never_held(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=1.0).install(monkeypatch)

    measured_ceilings.measure_ceilings(0, FAST)

    assert timeouts(fake) == []


def test_the_blocker_is_loaded_unheld_when_the_backend_is_built(fake: FakeCupy) -> None:
    CudaBackend()

    assert fake.entries("load", "block") == [
        ("load", "raw:roofline_block"),
        ("block", "null", 0),  # released before it starts
        ("load", "raw:roofline_delay"),
    ]
    assert timeouts(fake) == []


def test_a_kernel_seen_to_synchronize_is_never_held(fake: FakeCupy) -> None:
    syncs = fake.synchronizing()

    backend = CudaBackend()
    m = measure(syncs, policy=FAST, backend=backend)

    assert timeouts(fake) == []
    assert fake.count("block") == 1  # the blocker's own unheld first launch only
    assert m.time_s > 0
    assert backend.synchronizes(syncs) is True


def test_each_probe_that_cannot_tell_spins_longer(fake: FakeCupy) -> None:
    syncs = fake.synchronizing()

    backend = CudaBackend()
    for _ in range(blocking.PROBE_TRIES + 1):
        backend.run(syncs, (), calls=1, samples=1, flush=False)

    delays = [entry[2] for entry in fake.entries("delay") if entry[2] > 0]  # 0: the warm launch
    assert len(delays) == blocking.PROBE_TRIES  # then no more probes: it synchronizes
    assert delays[0] == int(blocking.PROBE_DELAY_S * 1e9)
    assert all(a < b for a, b in itertools.pairwise(delays))
    assert max(delays) <= int(blocking.PROBE_MAX_DELAY_S * 1e9)
    assert backend.synchronizes(syncs) is True


def test_block_on_holds_a_kernel_that_synchronizes_and_the_error_names_the_way_out(fake: FakeCupy) -> None:
    syncs = fake.synchronizing()

    with pytest.raises(RuntimeError, match=r"--roofline-cuda-block=off.*block=\"off\""):
        measure(syncs, policy=FAST, backend=CudaBackend(block="on"))


# -- finding 3: a held window carries what the queue can take -----------------------------------------


def test_a_window_of_many_launches_never_fills_the_queue_behind_a_hold(fake: FakeCupy) -> None:
    def eight_launches() -> None:
        for _ in range(8):
            fake.kernel()

    eight_launches()  # loaded, outside any measurement: only the queue's depth is at stake here
    backend = CudaBackend()
    backend.run(eight_launches, (), calls=1, samples=1, flush=False)  # warm-up
    backend.run(eight_launches, (), calls=200, samples=2, flush=False)  # 1600 launches a window

    assert timeouts(fake) == []
    assert fake.count("queue_full") == 0


def test_a_call_of_a_hundred_launches_never_overfills_the_queue_behind_a_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a PyTorch block of 100 kernels a call: 32 held calls would queue 3,200 launches behind the hold
    fake = FakeCupy(kernel_ms=1e-5).install(monkeypatch)
    block = fake.op(100)

    backend = CudaBackend()
    m = measure(block, policy=Policy(min_samples=5, max_time_s=0.5), backend=backend, cache=WARM)

    assert timeouts(fake) == []
    assert backend.synchronizes(block) is False  # held, and never taken for one that synchronizes
    assert m.calls_per_sample > blocking.MAX_HELD_CALLS
    assert fake.count("block") > 1


def test_the_probes_find_how_many_calls_the_launch_queue_takes(fake: FakeCupy) -> None:
    block = fake.op(100)  # the queue (1024) takes 8 calls behind the delay kernel, not 16
    backend = CudaBackend()
    for calls in (1, 1, 2, 4, 8, 16, 32):  # the engine's warm-up rounds, unheld
        backend.run(block, (), calls=calls, samples=1, flush=False)
    fake.log.clear()

    backend.run(block, (), calls=40, samples=2, flush=False)

    window = fake.entries("block", "kernel", "release")
    assert window[: window.index(("release", 1))].count(("kernel", "null")) == 8 * 100
    assert timeouts(fake) == []


def test_a_kernel_that_synchronizes_while_held_stalls_one_window_not_each(fake: FakeCupy) -> None:
    syncs = fake.synchronizing()

    backend = CudaBackend(block="on")
    backend.run(syncs, (), calls=1, samples=1, flush=False)  # the first call: never held
    with pytest.raises(RuntimeError, match="was not released"):
        backend.run(syncs, (), calls=1, samples=10, flush=False)

    assert timeouts(fake) == [("block_timeout", 1)]  # the first window's, then no more windows


def test_a_backend_collected_while_another_holds_the_gpu_does_not_stall_the_hold(fake: FakeCupy) -> None:
    # the third H200 run: a backend garbage-collected in another's held window freed its pinned
    # release counters, and cudaFreeHost waited for the held GPU: the watchdog released the hold,
    # block="on" raised, and block="auto" took the kernel for one that synchronizes (7 µs unheld
    # instead of 1.9 held). The counters are never freed.
    import gc

    doomed = [CudaBackend(block="on")]
    measure(fake.kernel, policy=FAST, backend=doomed[0], cache=WARM)  # its blocker built and used
    freed = []

    def kernel() -> None:
        fake.kernel()
        if doomed and fake.pending_blocks:  # inside a held window of the other backend
            doomed.clear()
            gc.collect()
            freed.append(True)

    measure(kernel, policy=FAST, backend=CudaBackend(block="on"), cache=WARM)

    assert freed == [True]
    assert timeouts(fake) == []
    assert ("synchronize", "free_host") not in fake.log


def test_the_cyclic_collector_is_off_while_windows_are_queued(fake: FakeCupy) -> None:
    # a finalizer the collector runs that synchronizes (pinned memory in a reference cycle: its
    # cudaFreeHost) would wait for the held GPU; when the collector runs is up to Python, so what is
    # tested is that it cannot run there, and that it is back on after
    import gc

    backend = CudaBackend(block="on")
    measure(fake.kernel, policy=FAST, backend=backend, cache=WARM)
    seen: list[tuple[bool, bool]] = []

    def kernel() -> None:
        fake.kernel()
        seen.append((bool(fake.pending_blocks), gc.isenabled()))

    measure(kernel, policy=FAST, backend=backend, cache=WARM)

    held = [enabled for pending, enabled in seen if pending]
    assert held, "no call ran inside a held window"
    assert not any(held)
    assert gc.isenabled()


def test_the_watchdog_releases_a_hold_the_host_waits_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    # the host waits in a held window; only another thread can release it before the GPU gives up
    fake = FakeCupy(hold_wait_s=2.0).install(monkeypatch)
    syncs = fake.synchronizing()

    backend = CudaBackend(block="on")
    backend.run(syncs, (), calls=1, samples=1, flush=False)
    with pytest.raises(RuntimeError, match="a watchdog released it"):
        backend.run(syncs, (), calls=1, samples=2, flush=False)

    assert timeouts(fake) == []  # released by the watchdog, not sat out on the GPU
    assert ("release", 1) in fake.log


def test_the_watchdog_releases_only_a_hold_not_released_in_time() -> None:
    import threading

    from pytest_roofline.timing.cuda.blocking import HoldWatchdog

    watchdog = HoldWatchdog()
    released = threading.Event()
    late = watchdog.arm(released.set, 0.0)
    assert released.wait(5)  # past its time: released from the watchdog's thread
    assert watchdog.disarm(late) is True

    calls: list[int] = []
    in_time = watchdog.arm(lambda: calls.append(1), 60.0)
    assert watchdog.disarm(in_time) is False
    assert calls == []


def test_a_hold_the_host_still_queues_behind_is_given_more_time_not_released() -> None:
    # a busy machine can keep the launching thread off its core past one watchdog period; a host
    # that queued a call since the last look is slow, not waiting for the GPU (on a fake clock)
    from pytest_roofline.timing.cuda.blocking import HOLD_LIMIT_S, _Watch

    queued = [0]
    watch = _Watch(lambda: None, 0.1, lambda: queued[0], started=0.0, deadline=0.1)
    assert not watch.due(0.05)  # before its deadline
    queued[0] = 3
    assert not watch.due(0.1)  # three calls queued since: another period
    assert watch.deadline == pytest.approx(0.2)
    assert watch.due(0.2)  # none since: the host waits for the GPU

    steady = _Watch(lambda: None, 0.1, lambda: queued[0], started=0.0, deadline=0.1)
    for step in range(1, int(HOLD_LIMIT_S / 0.1)):
        queued[0] += 1
        assert not steady.due(step * 0.1 + 1e-9)
    queued[0] += 1
    assert steady.due(HOLD_LIMIT_S + 1e-6)  # still queueing at the limit: released, well before the GPU's


def test_each_held_call_counts_as_the_hosts_progress(fake: FakeCupy) -> None:
    backend = warmed(fake)
    blocker = backend.holder()
    before = blocker.queued

    backend.run(fake.kernel, (), calls=blocking.MAX_HELD_CALLS + 5, samples=2, flush=False)

    assert blocker.queued - before == 2 * blocking.MAX_HELD_CALLS  # the held head of each window


def warmed(fake: FakeCupy, **options: Any) -> CudaBackend:
    """A backend that has seen ``fake.kernel`` and proved it asynchronous: its first call loads the
    kernel's module (the probe cannot tell), the second one passes."""
    backend = CudaBackend(**options)
    backend.run(fake.kernel, (), calls=1, samples=1, flush=False)
    backend.run(fake.kernel, (), calls=1, samples=1, flush=False)
    backend.run(fake.kernel, (), calls=blocking.MAX_HELD_CALLS, samples=1, flush=False)  # the queue takes 32
    assert backend.synchronizes(fake.kernel) is False
    return backend


def test_only_the_head_of_a_long_window_is_held(fake: FakeCupy) -> None:
    backend = warmed(fake)
    fake.log.clear()

    backend.run(fake.kernel, (), calls=blocking.MAX_HELD_CALLS + 5, samples=2, flush=False)

    window = fake.entries("block", "record", "kernel", "release")
    head = window[: window.index(("release", 1))]
    assert head.count(("kernel", "null")) == blocking.MAX_HELD_CALLS
    assert window.count(("kernel", "null")) == 2 * (blocking.MAX_HELD_CALLS + 5)


def test_warm_up_rounds_are_never_held(fake: FakeCupy) -> None:
    backend = warmed(fake)
    blocks = fake.count("block")

    backend.run(fake.kernel, (), calls=64, samples=1, flush=False)  # a warm-up round: one window

    assert fake.count("block") == blocks


# -- CUDA_LAUNCH_BLOCKING, profilers, and the setting ---------------------------------------------------


def test_launch_blocking_turns_the_blocker_off(fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")

    backend = CudaBackend()
    m = measure(fake.kernel, policy=FAST, backend=backend)

    assert backend.block is False
    assert "CUDA_LAUNCH_BLOCKING" in backend.block_note
    assert fake.count("block") == 0
    assert timeouts(fake) == []
    assert m.time_s > 0


def test_launch_blocking_with_block_on_times_out_on_the_fake(fake: FakeCupy, monkeypatch) -> None:
    # what auto avoids: the blocker's own launch waits out its timeout (nvbench#45)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    backend = CudaBackend(block="on")

    with pytest.raises(RuntimeError, match="blocking kernel"):
        measure(fake.kernel, policy=FAST, backend=backend)


@pytest.mark.parametrize(
    "variable", ["CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID", "NV_COMPUTE_PROFILER_PERFWORKS_DIR",
                 "NV_SANITIZER_INJECTION_PORT_RANGE_BEGIN"],
)  # fmt: skip
def test_a_profiler_or_sanitizer_turns_the_blocker_off(
    fake: FakeCupy, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "x")

    backend = CudaBackend()

    assert backend.block is False
    assert variable in backend.block_note
    assert CudaBackend(block="on").block is True


def test_blocking_switches_the_setting_for_a_block_of_runs(fake: FakeCupy) -> None:
    backend = warmed(fake)
    before = fake.count("block")

    with backend.blocking("off"):
        backend.run(fake.kernel, (), calls=2, samples=3, flush=False)
    assert fake.count("block") == before
    backend.run(fake.kernel, (), calls=2, samples=3, flush=False)
    assert fake.count("block") == before + 3


@pytest.mark.parametrize("bad", ["yes", 1, "ON"])
def test_a_bad_block_setting_names_the_parameter(fake: FakeCupy, bad: object) -> None:
    with pytest.raises(ValueError, match=rf"block must be 'auto', 'on' or 'off'.*got {bad!r}"):
        CudaBackend(block=bad)  # type: ignore[arg-type]


# -- finding 5: work that escapes a capture ---------------------------------------------------------------


def test_a_launch_that_escapes_a_non_blocking_capture_is_refused(fake: FakeCupy) -> None:
    stream = fake.cupy.cuda.Stream(non_blocking=True)

    def launches_on_the_legacy_stream() -> None:
        fake.launch(fake.null_stream)

    with pytest.raises(RuntimeError, match=r"escaped the capture"):
        CudaBackend(stream=stream, graph=True).run(
            launches_on_the_legacy_stream, (), calls=2, samples=1, flush=False
        )


def test_the_fake_runs_a_legacy_launch_eagerly_beside_a_non_blocking_capture(fake: FakeCupy) -> None:
    stream = fake.cupy.cuda.Stream(non_blocking=True)
    fake.kernel()
    stream.begin_capture()
    fake.launch(fake.null_stream)
    graph = stream.end_capture()

    assert graph.kernels == 0
    assert fake.entries("kernel")[-1] == ("kernel", "null")
    assert 'label="{KERNEL' not in graph.debug_dot_str()


def test_graph_mode_counts_the_captured_kernel_nodes(fake: FakeCupy) -> None:
    def two() -> None:
        fake.kernel()
        fake.kernel()

    backend = CudaBackend(graph=True)
    backend.run(two, (), calls=3, samples=1, flush=False)

    assert backend.last_graph_kernels == 6
    assert backend.last_graph_nodes == 6
    assert fake.dot_flags == [fake.cupy.cuda.runtime.cudaGraphDebugDotFlagsVerbose]


def test_the_fakes_dot_print_differs_by_its_flags_as_cupys_own_test_says(fake: FakeCupy) -> None:
    # cupy tests/cupy_tests/cuda_tests/test_graph.py::test_debug_dot_str: both name the kernel, and differ
    from fake_cupy import FakeGraph

    graph = FakeGraph(fake, 2)
    default, verbose = (
        graph.debug_dot_str(),
        graph.debug_dot_str(fake.cupy.cuda.runtime.cudaGraphDebugDotFlagsVerbose),
    )

    assert "fake_kernel" in default
    assert "fake_kernel" in verbose
    assert default != verbose
    assert 'label="{KERNEL' in verbose
    assert 'label="{KERNEL' not in default


@pytest.mark.parametrize("verbose", [True, False])
def test_a_dot_prints_edges_are_not_counted_as_nodes(fake: FakeCupy, verbose: bool) -> None:
    from fake_cupy import FakeGraph

    from pytest_roofline.timing.cuda.graphs import graph_nodes

    class Printed:  # a graph whose print is the one form, whatever the flags asked
        def debug_dot_str(self, flags: int = 0) -> str:
            return FakeGraph(fake, 4).debug_dot_str(1 if verbose else 0)

    assert graph_nodes(Printed()) == (4, 4)


# -- the latency floor: in the backend's mode, after the clocks ramp --------------------------------------


def test_the_latency_floor_is_measured_per_mode(fake: FakeCupy) -> None:
    eager = launch_latency.latency_floor(0)
    graph = launch_latency.latency_floor(0, graph=True)
    unheld = launch_latency.latency_floor(0, block="off")

    assert len({id(eager), id(graph), id(unheld)}) == 3
    assert launch_latency.latency_floor(0, graph=True) is graph
    assert "(graph replay, held)" in graph.note
    assert "(eager, unheld)" in unheld.note
    assert fake.count("launch") > 0  # the graph's empty launches were replayed


def test_the_clocks_ramp_before_the_latency_floor(fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    shares = iter([0.3, 0.6, 0.95])
    monkeypatch.setattr("pytest_roofline.timing.clocks.sm_clock_share", lambda index, bus: next(shares))

    floor = launch_latency.latency_floor(0)

    ramp = [entry[2] for entry in fake.entries("delay") if entry[2] == int(launch_latency.RAMP_STEP_S * 1e9)]
    assert len(ramp) == 2  # busy until the SM clock read 95% of its maximum
    assert "SM clock at 95% of its maximum" in floor.note


def test_without_nvml_the_gpu_is_kept_busy_a_fixed_stretch(fake: FakeCupy, monkeypatch) -> None:
    monkeypatch.setattr("pytest_roofline.timing.clocks.sm_clock_share", lambda index, bus: None)

    note = launch_latency.ramp_clocks(CudaBackend())

    assert note == "clocks unwatched (no NVML): the GPU kept busy 100 ms first"
    assert sum(1 for entry in fake.entries("delay") if entry[2] == int(launch_latency.RAMP_STEP_S * 1e9)) == 5


# -- a real GPU ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(loading.device_count() == 0, reason="no CUDA device")
def test_a_real_kernel_that_synchronizes_is_timed_unheld_without_a_stall() -> None:
    import time

    import cupy

    x = cupy.arange(1 << 16, dtype=cupy.float32)

    def syncs() -> float:
        return float(x.sum().item())  # .item() waits for the GPU

    backend = CudaBackend(0, block="auto")
    start = time.perf_counter()
    m = measure(syncs, policy=Policy(max_time_s=0.3), backend=backend)

    assert time.perf_counter() - start < blocking.BLOCK_TIMEOUT_S / 2  # never held: no timeout waited out
    assert backend.synchronizes(syncs) is True
    assert m.time_s > 0
