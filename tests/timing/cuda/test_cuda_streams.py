"""The CUDA backend's streams, blocking kernel, latency floor and CuPy install check, on fakes.

``fake_cupy.py`` and ``fake_torch.py`` share one fake device and log: each kernel, event, hold,
release and capture is logged with the stream it belongs to.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import pytest
from conftest import REPO_ROOT
from fake_cupy import FakeCudaError, FakeCupy
from fake_torch import FakeTorch

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cpu_latency import (
    cpu_latency_floor,
    measure_latency_floor,
)
from pytest_roofline.timing.cuda import blocking, launch_latency, loading
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.cuda.blocking import MAX_HELD_CALLS
from pytest_roofline.timing.cuda.loading import CupyInstallError
from pytest_roofline.timing.engine import measure

FAST = Policy(warmup_s=0, warmup_calls=1, min_samples=5, max_time_s=0.5)


@pytest.fixture(autouse=True)
def _no_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in blocking.PROFILER_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    return FakeCupy().install(monkeypatch)


def warm(backend: CudaBackend, fn: Any, args: tuple[object, ...] = ()) -> CudaBackend:
    """Unheld warm-up runs: the first call loads the kernel's module (the probe cannot tell), the
    second proves it asynchronous, so that the backend holds its sampling windows, and a window of
    MAX_HELD_CALLS calls shows the launch queue takes that many."""
    backend.run(fn, args, calls=1, samples=1, flush=False)
    backend.run(fn, args, calls=1, samples=1, flush=False)
    backend.run(fn, args, calls=blocking.MAX_HELD_CALLS, samples=1, flush=False)
    assert backend.synchronizes(fn, args) is False
    return backend


def since(fake: FakeCupy, start: int, *kinds: str) -> list[tuple[Any, ...]]:
    return [entry for entry in fake.log[start:] if entry[0] in kinds]


def held(stream: str, calls: int, ticket: int, *, kernel: str | None = None) -> list[tuple[Any, ...]]:
    """One held window: block kernel, start event, calls, end event, then the host's release."""
    return [
        ("block", stream, ticket),
        ("record", stream),
        *[("kernel", kernel or stream)] * calls,
        ("record", stream),
        ("release", ticket),
    ]


# -- 1. several CuPy packages installed ---------------------------------------------------------


def test_several_cupy_packages_are_one_clear_error_not_zero_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    # under filterwarnings=error, CuPy's import-time UserWarning aborted `import cupy` and
    # device_count() read 0: a GPU machine silently measured on its CPU
    FakeCupy(duplicate=("cupy-cuda12x", "cupy-cuda13x")).install(monkeypatch)

    with pytest.raises(CupyInstallError) as excinfo:
        loading.device_count()

    message = str(excinfo.value)
    assert "several CuPy packages are installed side by side (cupy-cuda12x, cupy-cuda13x)" in message
    assert "pip uninstall cupy-cuda12x cupy-cuda13x" in message
    assert "pytest-roofline[cuda12]" in message
    assert "[cuda13]" in message
    # and every later use says the same, though CuPy is in sys.modules by now
    with pytest.raises(CupyInstallError, match="several CuPy packages"):
        CudaBackend()
    with pytest.raises(CupyInstallError):
        loading.device_count()


def test_other_import_warnings_of_cupy_are_given_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(duplicate=("cupy-cuda12x",)).install(monkeypatch)  # one package: not a duplicate
    fake.duplicate = ()
    import fake_cupy

    monkeypatch.setattr(fake_cupy, "_DUPLICATE_WARNING", "CUDA path could not be detected{packages}")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert loading.device_count() == 1
    assert [str(w.message) for w in caught] == ["CUDA path could not be detected"]


# -- 2. streams follow the framework -------------------------------------------------------------


def test_with_torch_initialized_the_default_is_torchs_current_stream(fake: FakeCupy, monkeypatch) -> None:
    torch = FakeTorch(fake).install(monkeypatch)
    side = torch.new_stream(0)
    torch.current[0] = side  # the test runs under `with torch.cuda.stream(side):`
    backend = warm(CudaBackend(), torch.kernel)
    start = len(fake.log)

    backend.run(torch.kernel, (), calls=2, samples=2, flush=True)

    trace = since(fake, start, "flush", "block", "record", "kernel", "release")
    assert trace == [
        ("flush", "torch1"), *held("torch1", 2, 1),
        ("flush", "torch1"), *held("torch1", 2, 2),
    ]  # fmt: skip


def test_torch_loaded_without_cuda_leaves_cupys_stream(fake: FakeCupy, monkeypatch) -> None:
    FakeTorch(fake, initialized=False).install(monkeypatch)
    stream = fake.cupy.cuda.Stream()

    with stream:
        CudaBackend(block="off").run(fake.kernel, (), calls=1, samples=1, flush=False)

    assert fake.entries("record", "kernel") == [
        ("record", "stream1"),
        ("kernel", "stream1"),
        ("record", "stream1"),
    ]


@pytest.mark.parametrize("kind", ["torch.cuda.Stream", "int handle", "__cuda_stream__"])
def test_a_named_stream_is_made_torchs_current_stream_for_the_windows(
    fake: FakeCupy, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    torch = FakeTorch(fake).install(monkeypatch)
    side = torch.new_stream(0)

    class Foreign:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, side.cuda_stream)

    given = {"torch.cuda.Stream": side, "int handle": side.cuda_stream, "__cuda_stream__": Foreign()}[kind]

    CudaBackend(stream=given, block="off").run(torch.kernel, (), calls=3, samples=1, flush=False)

    assert fake.entries("torch_enter", "torch_exit", "record", "kernel") == [
        ("torch_enter", "torch1"),
        ("record", "torch1"),
        *[("kernel", "torch1")] * 3,  # torch's ops ran where the events were recorded
        ("record", "torch1"),
        ("torch_exit", "torch1"),
    ]
    assert torch.current_stream(0).cuda_stream == 0  # torch's own current stream restored


def test_on_stream_times_on_a_stream_for_a_block_of_runs(fake: FakeCupy) -> None:
    backend = CudaBackend(block="off")
    side = fake.cupy.cuda.Stream(non_blocking=True)

    with backend.on_stream(side):
        backend.run(fake.kernel, (), calls=1, samples=1, flush=False)
    backend.run(fake.kernel, (), calls=1, samples=1, flush=False)

    assert [name for _, name in fake.entries("kernel")] == ["stream1", "null"]


def test_on_stream_checks_the_stream(fake: FakeCupy) -> None:
    with (
        pytest.raises(TypeError, match=r"stream must be .*got 'side' \(str\)"),
        CudaBackend().on_stream("side"),
    ):
        pass


def test_graph_mode_with_torch_captures_torch_ops_on_the_private_stream(fake: FakeCupy, monkeypatch) -> None:
    torch = FakeTorch(fake).install(monkeypatch)

    windows = CudaBackend(graph=True).run(torch.kernel, (), calls=4, samples=2, flush=False)

    # the private stream, made torch's current one: its ops are captured there, not run on "null"
    assert fake.entries("begin_capture", "end_capture", "launch", "torch_enter") == [
        ("torch_enter", "stream1"),
        ("begin_capture", "stream1"),
        ("end_capture", "stream1"),
        ("launch", "stream1", 4),
        ("launch", "stream1", 4),
        ("launch", "stream1", 4),
    ]
    assert windows == pytest.approx([4 * 0.01e-3] * 2)
    assert torch.external == [(0, fake.streams_by_ptr[0x1000].ptr)]


def test_graph_mode_without_the_torch_context_would_be_refused(fake: FakeCupy, monkeypatch) -> None:
    # the fake enforces what CUDA does: a torch op on the legacy stream while the (blocking) private
    # stream captures breaks the capture; this guards the test above against a fake that captures
    # anything. Beside a non-blocking capture stream the op would run at once, outside the graph
    # (test_cuda_gpu_rules.py).
    torch = FakeTorch(fake).install(monkeypatch)
    stream = fake.cupy.cuda.Stream(non_blocking=False)
    stream.begin_capture()

    with pytest.raises(FakeCudaError, match="cudaErrorStreamCaptureImplicit"):
        torch.kernel()
    with pytest.raises(FakeCudaError, match="Invalidated"):
        stream.end_capture()


def test_graph_mode_orders_its_stream_after_torchs_current_one(fake: FakeCupy, monkeypatch) -> None:
    torch = FakeTorch(fake).install(monkeypatch)
    torch.current[0] = torch.new_stream(0)

    CudaBackend(graph=True).run(torch.kernel, (), calls=1, samples=1, flush=False)

    assert fake.entries("record", "wait_event")[:2] == [("record", "torch1"), ("wait_event", "stream1")]


def test_what_cannot_be_captured_is_a_clear_error(fake: FakeCupy) -> None:
    calls = iter(range(10))

    def syncs_in_capture() -> None:
        if next(calls) == 1:  # the eager call passes; in capture, the sync is refused
            raise FakeCudaError(
                "cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing"
            )

    with pytest.raises(
        RuntimeError, match=r"graph mode cannot capture .*syncs_in_capture.*without graph=True"
    ):
        CudaBackend(graph=True).run(syncs_in_capture, (), calls=2, samples=1, flush=False)
    assert fake.entries("begin_capture", "end_capture") == [
        ("begin_capture", "stream1"),
        ("end_capture", "stream1"),
    ]


def test_a_capture_invalidated_behind_the_kernels_back_is_a_clear_error(fake: FakeCupy) -> None:
    def launches_on_the_legacy_stream() -> None:
        fake.launch(fake.null_stream)

    with pytest.raises(RuntimeError, match="graph mode cannot capture"):
        CudaBackend(graph=True).run(launches_on_the_legacy_stream, (), calls=1, samples=1, flush=False)


def test_graph_mode_refuses_a_legacy_stream_given_later(fake: FakeCupy) -> None:
    backend = CudaBackend(graph=True)

    with pytest.raises(ValueError, match="cannot capture on the legacy default stream"), backend.on_stream(0):
        pass


def in_a_thread(fn: Any) -> Any:
    """``fn()`` run on a new thread; its result (or its exception, raised here)."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def test_the_fakes_current_stream_and_device_are_per_thread_as_cupys(monkeypatch: pytest.MonkeyPatch) -> None:
    # cupy/cuda/stream.pyx keeps the current streams in a threading.local (_ThreadLocal), per device;
    # cudaSetDevice is per host thread
    fake = FakeCupy(device_count=2).install(monkeypatch)
    with fake.cupy.cuda.Device(1):
        side = fake.cupy.cuda.Stream(non_blocking=True)
        with side:
            elsewhere = in_a_thread(lambda: (fake.cupy.cuda.get_current_stream(), fake.current_device))
            assert fake.cupy.cuda.get_current_stream() is side
        with fake.cupy.cuda.Device(0):
            assert fake.cupy.cuda.get_current_stream() is fake.null_stream  # device 0's, not 1's

    assert elsewhere == (fake.null_stream, 0)


def test_a_measurement_on_another_thread_times_that_threads_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy().install(monkeypatch)
    backend = warm(CudaBackend(), fake.kernel)
    side = fake.cupy.cuda.Stream(non_blocking=True)

    def on_side() -> list[float]:
        with side:
            return backend.run(fake.kernel, (), calls=2, samples=2, flush=False)

    with fake.cupy.cuda.Stream(non_blocking=True):  # this thread's current stream: not the other's
        start = len(fake.log)
        windows = in_a_thread(on_side)

    timed = since(fake, start, "record", "kernel")
    assert {name for _, name in timed} == {side.name}  # events and kernels on the thread's own stream
    assert windows == pytest.approx([2 * fake.kernel_ms / 1e3] * 2)


# -- 3. the blocking kernel ---------------------------------------------------------------------


def test_each_window_is_held_until_its_calls_are_queued_flush_outside(fake: FakeCupy) -> None:
    backend = warm(CudaBackend(), fake.kernel)
    start = len(fake.log)

    backend.run(fake.kernel, (), calls=2, samples=3, flush=True)

    kinds = ("flush", "block", "record", "kernel", "release", "synchronize", "block_timeout")
    trace = since(fake, start, *kinds)
    assert trace == [
        ("flush", "null"), *held("null", 2, 1),
        ("flush", "null"), *held("null", 2, 2),
        ("flush", "null"), *held("null", 2, 3),
        ("synchronize", "event"),
    ]  # fmt: skip
    code, name = fake.raw_kernels[0]
    assert name == "roofline_block"
    assert "globaltimer" in code  # it can time out


def test_the_release_count_keeps_growing_across_runs(fake: FakeCupy) -> None:
    backend = warm(CudaBackend(), fake.kernel)
    backend.run(fake.kernel, (), calls=1, samples=2, flush=False)
    backend.run(fake.kernel, (), calls=1, samples=2, flush=False)

    assert [ticket for _, _, ticket in fake.entries("block")] == [0, 1, 2, 3, 4]  # 0: the unheld warm launch
    assert [name for _, name in fake.raw_kernels] == ["roofline_block", "roofline_delay"]  # built once


def test_a_kernel_that_synchronizes_while_held_is_an_error_under_block_on(fake: FakeCupy) -> None:
    stream = fake.cupy.cuda.get_current_stream()

    def syncs() -> None:
        fake.kernel()
        stream.synchronize()  # the host waits on a stream the blocking kernel holds

    backend = CudaBackend(block="on")
    backend.run(syncs, (), calls=1, samples=1, flush=False)  # the first call: never held
    with pytest.raises(
        RuntimeError, match=r"hold of the timing stream was not released.*--roofline-cuda-block=off"
    ):
        backend.run(syncs, (), calls=1, samples=2, flush=False)
    assert ("block_timeout", 1) in fake.log


def test_auto_times_a_kernel_unheld_once_a_hold_timed_out(fake: FakeCupy) -> None:
    stream = fake.cupy.cuda.get_current_stream()
    synchronizing = False

    def sometimes_syncs() -> None:
        fake.kernel()
        if synchronizing:
            stream.synchronize()

    backend = warm(CudaBackend(), sometimes_syncs)
    synchronizing = True

    windows = backend.run(sometimes_syncs, (), calls=1, samples=2, flush=False)

    assert ("block_timeout", 1) in fake.log  # the held run gave up; its times were thrown away
    assert len(windows) == 2
    assert backend.synchronizes(sometimes_syncs) is True


def test_a_raising_kernel_still_releases_the_stream(fake: FakeCupy) -> None:
    calls = iter(range(100))

    def breaks_when_held() -> None:
        fake.kernel()
        if next(calls) >= 2 + blocking.MAX_HELD_CALLS:  # the warm-up's calls pass
            raise ZeroDivisionError

    backend = warm(CudaBackend(), breaks_when_held)
    with pytest.raises(ZeroDivisionError):
        backend.run(breaks_when_held, (), calls=1, samples=2, flush=False)
    fake.log.append(("after",))

    assert fake.entries("block", "release")[-2:] == [("block", "null", 1), ("release", 1)]


def test_block_off_first_calls_and_single_windows_are_not_held(fake: FakeCupy) -> None:
    CudaBackend().run(fake.kernel, (), calls=1, samples=5, flush=False)  # never seen: not held
    warm(CudaBackend(), fake.kernel).run(fake.kernel, (), calls=8, samples=1, flush=False)  # warm-up
    CudaBackend(block=False).run(fake.kernel, (), calls=1, samples=5, flush=False)

    assert [ticket for *_, ticket in fake.entries("block")] == [0, 0]  # the blockers' own unheld launches
    assert MAX_HELD_CALLS == 32


def test_rocm_is_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_cupy import H100_PROPERTIES

    fake = FakeCupy(is_hip=True, properties={**H100_PROPERTIES, "name": b"AMD Instinct MI300X"}).install(
        monkeypatch
    )

    assert CudaBackend().block is False
    CudaBackend().run(fake.kernel, (), calls=1, samples=1, flush=False)
    assert fake.count("block") == 0


def test_graph_replays_are_held_too(fake: FakeCupy) -> None:
    backend = warm(CudaBackend(graph=True), fake.kernel)
    backend.run(fake.kernel, (), calls=3, samples=2, flush=False)

    assert fake.entries("block", "record", "launch", "release")[-10:-5] == [
        ("block", "stream1", 1),
        ("record", "stream1"),
        ("launch", "stream1", 3),
        ("record", "stream1"),
        ("release", 1),
    ]


@pytest.mark.parametrize(("name", "bad"), [("block", 1), ("graph", "yes"), ("block_timeout_s", 0)])
def test_block_options_are_checked(fake: FakeCupy, name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=rf"{name} must be .*got {bad!r}"):
        CudaBackend(**{name: bad})  # type: ignore[arg-type]


# -- 4. the latency floor -----------------------------------------------------------------------


def test_latency_floor_is_an_empty_kernel_measured_once_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=0.0015).install(monkeypatch)

    first = launch_latency.latency_floor(0)
    again = launch_latency.latency_floor(0)

    assert again is first
    assert first.floor_s == pytest.approx(1.5e-6)
    assert first.event_pair_s == 0.0  # nothing between the events on the fake
    assert first.device == "NVIDIA H100 80GB HBM3"
    names = sorted(name for _, name in fake.raw_kernels)
    assert names == ["roofline_block", "roofline_delay", "roofline_empty"]
    assert launch_latency.latency_floor(0, refresh=True) is not first


def test_cpu_latency_floor_is_an_empty_python_call_through_the_engine() -> None:
    from fakes import FakeBackend

    backend = FakeBackend(60e-9, device_name="fake cpu")  # every call of the empty function: 60 ns

    floor = measure_latency_floor(backend)

    assert floor.floor_s == pytest.approx(60e-9)
    assert floor.device == "fake cpu"
    assert floor.event_pair_s is None
    assert "empty Python call" in floor.note
    assert cpu_latency_floor() is cpu_latency_floor()  # measured once per process


# -- the engine over a held, torch-following backend --------------------------------------------


def test_engine_measures_through_holds_on_torchs_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=0.25).install(monkeypatch)
    torch = FakeTorch(fake).install(monkeypatch)
    torch.current[0] = torch.new_stream(0)

    m = measure(torch.kernel, policy=FAST, backend=CudaBackend())

    assert m.time_s == pytest.approx(0.25e-3)
    assert {name for _, name in fake.entries("kernel")} == {"torch1"}
    held_blocks = [entry for entry in fake.entries("block") if entry[2] > 0]  # 0: the unheld warm launch
    assert len(held_blocks) == fake.count("release") > 0
    assert fake.entries("block_timeout") == []
    assert "torch" in sys.modules  # the fake, not a real import


# -- the extras ---------------------------------------------------------------------------------


def test_one_extra_per_cuda_major_and_cuda_an_alias_of_cuda12() -> None:
    tomllib = pytest.importorskip("tomllib")

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    assert [r.split(">")[0] for r in extras["cuda12"]] == ["cupy-cuda12x"]
    assert [r.split(">")[0] for r in extras["cuda13"]] == ["cupy-cuda13x"]
    assert extras["cuda"] == extras["cuda12"]
    assert not any("cupy" in r for r in project["dependencies"])
    for extra in ("cuda12", "cuda13"):  # what the error without CuPy tells users to install exists
        assert f"[{extra}]" in loading.NEED_CUPY
