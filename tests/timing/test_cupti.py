"""The optional CUPTI timer (``timing/cupti.py``) and the CUDA backend over it, on fakes: kernel
activity records time each window as its kernels' busy time, without launch gaps or a hold."""

from __future__ import annotations

import pytest
from fake_cupti import ActivityKind, FakeCupti
from fake_cupy import FakeCupy

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cuda import blocking
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.cupti import KernelInterval, busy_s
from pytest_roofline.timing.engine import measure

FAST = Policy(warmup_s=0, warmup_calls=1, min_samples=5, max_time_s=0.5)


@pytest.fixture(autouse=True)
def _no_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*blocking.PROFILER_ENVIRONMENT, "CUDA_LAUNCH_BLOCKING"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    return FakeCupy(kernel_ms=0.002).install(monkeypatch)


def interval(start: int, end: int) -> KernelInterval:
    return KernelInterval(start, end)


def test_busy_time_is_the_union_of_the_intervals() -> None:
    assert busy_s([interval(0, 10), interval(20, 30)]) == pytest.approx(20e-9)  # the gap does not count
    assert busy_s([interval(0, 10), interval(5, 15)]) == pytest.approx(15e-9)  # overlap counted once
    assert busy_s([interval(20, 30), interval(0, 40)]) == pytest.approx(40e-9)
    assert busy_s([]) == 0


def test_without_cupti_python_the_backend_times_with_events(fake: FakeCupy, monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "cupti", None)
    monkeypatch.setattr("pytest_roofline.timing.cupti._registered", None)

    backend = CudaBackend()

    assert backend.timer == "events"
    assert "not installed" in backend.timer_note
    with pytest.raises(RuntimeError, match=r"pip install 'pytest-roofline\[cupti\]'"):
        CudaBackend(timer="cupti")


def test_with_cupti_each_window_is_its_kernels_busy_time(fake: FakeCupy, monkeypatch) -> None:
    cupti = FakeCupti(fake, gap_ns=5_000).install(monkeypatch)

    backend = CudaBackend()
    windows = backend.run(fake.kernel, (), calls=4, samples=3, flush=True)

    assert backend.timer == "cupti"
    assert backend.block is False  # nothing to hold: CUPTI sees no launch gaps
    assert windows == pytest.approx([4 * 2e-6] * 3)  # 4 kernels of 2 µs; the 5 µs gaps excluded
    assert fake.count("block") == 0
    assert ("enable", ActivityKind.CONCURRENT_KERNEL) in cupti.calls
    assert cupti.calls[-2:] == [("flush", 1), ("disable", ActivityKind.CONCURRENT_KERNEL)]


def test_the_flush_kernel_cupti_records_is_no_part_of_a_cold_window(fake: FakeCupy, monkeypatch) -> None:
    # CUPTI records every kernel of the context, the flush before each cold window among them (issue 27)
    cupti = FakeCupti(fake).install(monkeypatch)

    windows = CudaBackend().run(fake.kernel, (), calls=1, samples=3, flush=True)

    assert [r.name for r in cupti.handed].count("roofline_l2_flush") == 3
    assert windows == pytest.approx([2e-6] * 3)  # the kernel's 2 µs, not the flush's 2 µs too


def test_the_engine_measures_through_cupti(fake: FakeCupy, monkeypatch) -> None:
    FakeCupti(fake).install(monkeypatch)

    m = measure(fake.kernel, policy=FAST, backend=CudaBackend())

    assert m.time_s == pytest.approx(2e-6)


def test_records_that_do_not_split_into_the_windows_fall_back_to_events(fake: FakeCupy, monkeypatch) -> None:
    FakeCupti(fake).install(monkeypatch)
    calls = iter(range(100))

    def uneven() -> None:
        fake.kernel()
        if next(calls) == 0:
            fake.kernel()  # the first window runs one kernel more

    backend = CudaBackend(timer="cupti")
    windows = backend.run(uneven, (), calls=1, samples=2, flush=False)

    assert windows == pytest.approx([2 * 2e-6, 2e-6])  # the events' times
    assert "CUPTI saw 3 kernel(s) for 2 window(s)" in backend.timer_note


def test_timer_events_ignores_cupti_and_a_refusing_cupti_falls_back(fake: FakeCupy, monkeypatch) -> None:
    FakeCupti(fake, refuse=True).install(monkeypatch)

    assert CudaBackend().timer == "events"
    assert CudaBackend(timer="events").timer == "events"
    with pytest.raises(ValueError, match=r"timer must be one of 'auto', 'events', 'cupti'; got 'nvtx'"):
        CudaBackend(timer="nvtx")


def test_under_a_profiler_auto_leaves_cupti_to_it(fake: FakeCupy, monkeypatch) -> None:
    FakeCupti(fake).install(monkeypatch)
    monkeypatch.setenv("NSYS_PROFILING_SESSION_ID", "1")

    backend = CudaBackend()

    assert backend.timer == "events"
    assert "NSYS_PROFILING_SESSION_ID" in backend.timer_note


def test_graph_mode_compares_the_eager_launches_with_the_captured_kernels(
    fake: FakeCupy, monkeypatch
) -> None:
    # one of two launches escapes a non-blocking capture stream: the graph holds half the kernels,
    # which only a count of the eager call's launches (CUPTI) can tell from a kernel of one launch
    FakeCupti(fake).install(monkeypatch)
    stream = fake.cupy.cuda.Stream(non_blocking=True)

    def half_escapes() -> None:
        fake.kernel()
        fake.launch(fake.null_stream)

    with pytest.raises(
        RuntimeError, match=r"ran 2 kernel\(s\) \(CUPTI\), but the graph of 3 call\(s\) holds 3"
    ):
        CudaBackend(stream=stream, graph=True).run(half_escapes, (), calls=3, samples=1, flush=False)


def test_a_raising_kernel_stops_the_collection(fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    cupti = FakeCupti(fake).install(monkeypatch)

    def broken() -> None:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        CudaBackend().run(broken, (), calls=1, samples=1, flush=False)

    assert cupti.calls[-1] == ("disable", ActivityKind.CONCURRENT_KERNEL)
