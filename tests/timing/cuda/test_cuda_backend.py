"""The CUDA backend against a fake CuPy (``fake_cupy.py``), and once against a real GPU when there is one."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import REPO_ROOT
from fake_cupy import HIP_ATTRIBUTES, FakeCudaError, FakeCupy, MiB, install_fake_ml_dtypes

from pytest_roofline.model.core import Figure, Precision, Source, Unit
from pytest_roofline.model.devices import DeviceError
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cache import WARM
from pytest_roofline.timing.cuda import blocking, loading, measured_ceilings
from pytest_roofline.timing.cuda import device as cuda_dev
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.engine import measure

REPO = REPO_ROOT
FAST = Policy(warmup_s=0, warmup_calls=1, min_samples=5, max_time_s=0.5)


@pytest.fixture(autouse=True)
def _unheld(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows, flushes, streams and graphs here, unheld: the blocker and its probes have their own
    tests (``test_cuda_streams.py``, ``test_cuda_gpu_rules.py``)."""
    monkeypatch.setattr(blocking, "_default_block", "off")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    return FakeCupy().install(monkeypatch)


def window(stream: str, calls: int, *, flush: bool) -> list[tuple[Any, ...]]:
    """The log of one timed window of ``calls`` kernel calls on ``stream``."""
    head = [("flush", stream)] if flush else []
    return [*head, ("record", stream), *[("kernel", stream)] * calls, ("record", stream)]


# -- run(): order of operations ---------------------------------------------------------------


def test_windows_are_queued_back_to_back_flushed_outside_the_events(fake: FakeCupy) -> None:
    CudaBackend().run(fake.kernel, (), calls=2, samples=3, flush=True)

    trace = fake.entries("flush", "record", "kernel", "synchronize", "elapsed")
    assert trace == [
        *window("null", 2, flush=True) * 3,
        ("synchronize", "event"),
        *[("elapsed",)] * 3,
    ]


@pytest.mark.parametrize("samples", [1, 10, 500])
def test_one_host_synchronize_per_run_whatever_the_samples(fake: FakeCupy, samples: int) -> None:
    windows = CudaBackend().run(fake.kernel, (), calls=1, samples=samples, flush=True)

    assert len(windows) == samples
    assert fake.count("synchronize") == 1
    assert fake.count("flush") == samples


def test_no_flush_when_not_asked(fake: FakeCupy) -> None:
    CudaBackend().run(fake.kernel, (), calls=3, samples=2, flush=False)

    assert fake.count("flush") == 0
    assert fake.entries("record", "kernel") == window("null", 3, flush=False) * 2


def test_elapsed_milliseconds_become_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(elapsed_ms=[2.0, 0.004, 1500.0]).install(monkeypatch)

    windows = CudaBackend().run(lambda: None, (), calls=1, samples=3, flush=False)

    assert windows == pytest.approx([2e-3, 4e-6, 1.5])


def test_args_are_passed_to_every_call(fake: FakeCupy) -> None:
    seen: list[tuple[object, ...]] = []

    CudaBackend().run(lambda *a: seen.append(a), ("x", 2), calls=3, samples=2, flush=False)

    assert seen == [("x", 2)] * 6


def test_kernel_errors_propagate(fake: FakeCupy) -> None:
    def broken() -> None:
        raise ZeroDivisionError("in the kernel")

    with pytest.raises(ZeroDivisionError, match="in the kernel"):
        CudaBackend().run(broken, (), calls=1, samples=1, flush=False)


@pytest.mark.parametrize(("calls", "samples"), [(0, 1), (1, 0)])
def test_calls_and_samples_are_checked(fake: FakeCupy, calls: int, samples: int) -> None:
    with pytest.raises(ValueError, match="calls and samples must be >= 1"):
        CudaBackend().run(fake.kernel, (), calls=calls, samples=samples, flush=False)


def test_everything_runs_with_the_device_current(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(device_count=2).install(monkeypatch)

    CudaBackend(1).run(fake.kernel, (), calls=1, samples=1, flush=True)

    assert fake.entries("device")[-1] == ("device", 1)
    assert fake.current_device == 0  # restored afterwards


# -- the engine over this backend ---------------------------------------------------------------


def test_engine_reports_per_call_seconds_from_the_events(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=0.25).install(monkeypatch)

    m = measure(fake.kernel, policy=FAST, backend=CudaBackend())

    assert m.backend == "cuda"
    assert m.device == "NVIDIA H100 80GB HBM3"
    assert m.time_s == pytest.approx(0.25e-3)
    assert m.calls_per_sample == 1  # 250 µs is well above 100 × 0.5 µs


def test_short_warm_kernels_are_batched_between_one_pair_of_events(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=0.002).install(monkeypatch)

    m = measure(fake.kernel, policy=FAST, backend=CudaBackend(), cache=WARM)

    assert m.calls_per_sample == 25  # 100 × 0.5 µs / 2 µs
    assert m.time_s == pytest.approx(2e-6)


def test_setup_runs_on_the_host_outside_every_pair_of_events(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=0.25).install(monkeypatch)

    m = measure(fake.kernel, setup=lambda: fake.log.append(("setup",)), policy=FAST, backend=CudaBackend())

    trace = fake.entries("setup", "record", "kernel")
    one_call = [("setup",), ("record", "null"), ("kernel", "null"), ("record", "null")]
    assert trace == one_call * (m.warmup_calls + len(m.samples_s))
    assert m.time_s == pytest.approx(0.25e-3)


# -- timer facts --------------------------------------------------------------------------------


def test_resolution_is_the_documented_event_resolution(fake: FakeCupy) -> None:
    assert CudaBackend().resolution_s == 0.5e-6


def test_clock_is_perf_counter(fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = CudaBackend()
    monkeypatch.setattr(time, "perf_counter", lambda: 42.5)

    assert backend.clock() == 42.5


# -- the flush buffer ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("l2_bytes", "expected"),
    [(50 * MiB, 256 * MiB), (96 * MiB, 256 * MiB), (200 * MiB, 400 * MiB)],
)
def test_flush_reads_a_buffer_of_twice_l2_at_least_256_mib_allocated_once(
    monkeypatch: pytest.MonkeyPatch, l2_bytes: int, expected: int
) -> None:
    from fake_cupy import H100_PROPERTIES

    fake = FakeCupy(properties={**H100_PROPERTIES, "l2CacheSize": l2_bytes}).install(monkeypatch)
    backend = CudaBackend()

    backend.run(fake.kernel, (), calls=1, samples=3, flush=True)
    backend.run(fake.kernel, (), calls=1, samples=2, flush=True)

    assert backend.flush_bytes == expected
    assert fake.entries("alloc") == [("alloc", expected)]
    # every flush reads the whole buffer, on the timing stream, and writes none of it
    assert fake.flush_reads == [(expected, "null")] * 5
    assert fake.memsets == []


def test_the_flush_exceeds_a_last_level_cache_behind_the_l2_the_driver_reports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an MI300X: the driver reports its L2, the table its 256 MiB Infinity Cache
    from fake_cupy import H100_PROPERTIES

    fake = FakeCupy(properties={**H100_PROPERTIES, "l2CacheSize": 4 * MiB}).install(monkeypatch)
    backend = CudaBackend(llc_bytes=256 * MiB)
    backend.run(fake.kernel, (), calls=1, samples=1, flush=True)

    assert backend.flush_bytes == 512 * MiB
    assert fake.entries("alloc") == [("alloc", 512 * MiB)]
    assert CudaBackend(llc_bytes=None).flush_bytes == 256 * MiB  # the driver's L2: the floor
    # the plugin's backend is sized by the device it judges against
    from types import SimpleNamespace

    from pytest_roofline.model.devices import lookup
    from pytest_roofline.plugin.run_devices import Devices

    settings = SimpleNamespace(cuda_block="off")
    devices = Devices(SimpleNamespace(), settings, notes=[], device_records={})  # type: ignore[arg-type]
    assert devices.builtin_backend("cuda:0", lookup("mi300x")).flush_bytes == 512 * MiB  # type: ignore[attr-defined]


def test_flush_bytes_can_be_given(fake: FakeCupy) -> None:
    backend = CudaBackend(flush_bytes=1024)
    backend.run(fake.kernel, (), calls=1, samples=1, flush=True)

    assert fake.entries("alloc") == [("alloc", 1024)]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_flush_bytes_is_checked(fake: FakeCupy, bad: object) -> None:
    with pytest.raises(ValueError, match="flush_bytes must be a positive integer"):
        CudaBackend(flush_bytes=bad)  # type: ignore[arg-type]


# -- streams ------------------------------------------------------------------------------------


def test_default_is_the_current_stream_at_run_time(fake: FakeCupy) -> None:
    backend = CudaBackend()
    stream = fake.cupy.cuda.Stream()

    with stream:
        backend.run(fake.kernel, (), calls=1, samples=1, flush=True)

    assert fake.entries("flush", "record", "kernel") == window(stream.name, 1, flush=True)


def test_a_cupy_stream_is_recorded_on_and_entered_around_the_calls(fake: FakeCupy) -> None:
    stream = fake.cupy.cuda.Stream(non_blocking=True)

    CudaBackend(stream=stream).run(fake.kernel, (), calls=2, samples=2, flush=True)

    trace = fake.entries("enter", "exit", "flush", "record", "kernel")
    assert trace == [("enter", "stream1"), *window("stream1", 2, flush=True) * 2, ("exit", "stream1")]


def test_an_int_handle_is_wrapped_by_stream_from_external_on_cupy_14(fake: FakeCupy) -> None:
    # CuPy 14 deprecates ExternalStream; with filterwarnings=error its warning would fail this test
    CudaBackend(stream=0xBEEF).run(fake.kernel, (), calls=1, samples=1, flush=True)

    assert fake.external_streams == []
    assert fake.entries("flush", "record", "kernel") == window("external:48879", 1, flush=True)


def test_an_int_handle_is_wrapped_by_external_stream_on_older_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(device_count=2, from_external=False).install(monkeypatch)

    CudaBackend(1, stream=0xBEEF).run(fake.kernel, (), calls=1, samples=1, flush=False)

    assert fake.external_streams == [(0xBEEF, 1)]
    assert fake.entries("record", "kernel") == window("external:48879", 1, flush=False)


@pytest.mark.parametrize("from_external", [True, False])
def test_a_cuda_stream_protocol_object_is_wrapped(
    monkeypatch: pytest.MonkeyPatch, from_external: bool
) -> None:
    fake = FakeCupy(from_external=from_external).install(monkeypatch)

    class ForeignStream:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0xCAFE)

    CudaBackend(stream=ForeignStream()).run(fake.kernel, (), calls=1, samples=1, flush=False)

    assert fake.entries("record", "kernel") == window("external:51966", 1, flush=False)


def test_an_unusable_stream_is_a_clear_type_error(fake: FakeCupy) -> None:
    with pytest.raises(TypeError, match=r"torch\.cuda\.current_stream\(\)\.cuda_stream"):
        CudaBackend(stream="stream 7")


# -- graph mode ---------------------------------------------------------------------------------


def test_graph_mode_captures_the_calls_once_and_times_replays(fake: FakeCupy) -> None:
    CudaBackend(graph=True).run(fake.kernel, (), calls=4, samples=3, flush=True)

    stream = "stream1"  # a private non-blocking stream: the legacy one cannot be captured
    timed = [("flush", stream), ("record", stream), ("launch", stream, 4), ("record", stream)]
    assert fake.entries(
        "wait_event", "begin_capture", "kernel", "end_capture", "launch", "flush", "record", "synchronize"
    ) == [
        ("record", "null"),  # ordered after the current stream's work ...
        ("wait_event", stream),  # ... without a host sync
        ("kernel", stream),  # one eager call: compilation and allocation stay out of the capture
        ("begin_capture", stream),
        *[("kernel", stream)] * 4,
        ("end_capture", stream),
        ("launch", stream, 4),  # untimed first launch: uploads the graph
        *timed * 3,
        ("synchronize", "event"),
    ]


def test_graph_mode_reports_the_replay_time(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=0.003).install(monkeypatch)

    windows = CudaBackend(graph=True).run(fake.kernel, (), calls=10, samples=2, flush=False)

    assert windows == pytest.approx([30e-6, 30e-6])


def test_graph_mode_reuses_its_private_stream(fake: FakeCupy) -> None:
    backend = CudaBackend(graph=True)
    backend.run(fake.kernel, (), calls=1, samples=1, flush=False)
    backend.run(fake.kernel, (), calls=1, samples=1, flush=False)

    assert {entry[1] for entry in fake.entries("begin_capture")} == {"stream1"}


def test_graph_mode_captures_on_a_given_stream(fake: FakeCupy) -> None:
    stream = fake.cupy.cuda.Stream(non_blocking=True)

    CudaBackend(stream=stream, graph=True).run(fake.kernel, (), calls=2, samples=1, flush=False)

    assert fake.entries("begin_capture") == [("begin_capture", stream.name)]
    assert fake.count("wait_event") == 0  # ordering a caller's stream is the caller's business


def test_graph_mode_refuses_the_legacy_stream(fake: FakeCupy) -> None:
    with pytest.raises(ValueError, match="cannot capture on the legacy default stream"):
        CudaBackend(stream=fake.cupy.cuda.Stream.null, graph=True)


def test_graph_mode_ends_the_capture_when_the_kernel_raises(fake: FakeCupy) -> None:
    calls = itertools.count()

    def breaks_on_second_call() -> None:  # the eager call passes, the captured one raises
        if next(calls) == 1:
            raise ZeroDivisionError("in the kernel")

    with pytest.raises(ZeroDivisionError):
        CudaBackend(graph=True).run(breaks_on_second_call, (), calls=2, samples=1, flush=False)

    assert fake.entries("begin_capture", "end_capture") == [
        ("begin_capture", "stream1"),
        ("end_capture", "stream1"),
    ]


def test_graph_mode_is_refused_on_rocm(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(is_hip=True).install(monkeypatch)

    with pytest.raises(RuntimeError, match="not support on ROCm"):
        CudaBackend(graph=True)


# -- device properties --------------------------------------------------------------------------


def test_properties_are_read_and_the_bytes_name_decoded(fake: FakeCupy) -> None:
    props = cuda_dev.device_properties(0)

    assert props.name == "NVIDIA H100 80GB HBM3"
    assert (props.kind, props.major, props.minor, props.multiprocessors) == ("cuda", 9, 0, 132)
    assert (props.clock_khz, props.memory_clock_khz, props.bus_width_bits) == (1_980_000, 2_619_000, 5120)
    assert props.l2_bytes == 50 * MiB
    assert fake.count("attribute") == 0  # nothing missing, nothing asked


def test_nul_padded_names_are_trimmed(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(properties={"name": b"NVIDIA L4\x00\x00\x00", "major": 8, "minor": 9}).install(monkeypatch)

    assert cuda_dev.device_properties(0).name == "NVIDIA L4"


def test_clocks_missing_from_the_dict_are_read_as_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA 13 removed clockRate and memoryClockRate from cudaDeviceProp
    props = {"name": b"NVIDIA RTX PRO 6000", "major": 12, "minor": 0, "multiProcessorCount": 188}
    attributes = {
        "cudaDevAttrClockRate": 2_617_000,
        "cudaDevAttrMemoryClockRate": 14_001_000,
        "cudaDevAttrGlobalMemoryBusWidth": 512,
        "cudaDevAttrL2CacheSize": 128 * MiB,
    }
    fake = FakeCupy(properties=props, attributes=attributes).install(monkeypatch)

    got = cuda_dev.device_properties(0)

    assert (got.clock_khz, got.memory_clock_khz, got.bus_width_bits) == (2_617_000, 14_001_000, 512)
    assert got.l2_bytes == 128 * MiB
    assert got.multiprocessors == 188
    assert {name for _, name in fake.entries("attribute")} == set(attributes)


def test_a_zero_clock_is_read_as_an_attribute_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_cupy import H100_PROPERTIES

    FakeCupy(
        properties={**H100_PROPERTIES, "clockRate": 0}, attributes={"cudaDevAttrClockRate": 1_755_000}
    ).install(monkeypatch)

    assert cuda_dev.device_properties(0).clock_khz == 1_755_000


def test_an_attribute_the_driver_refuses_reads_as_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(properties={"name": b"NVIDIA Mystery", "major": 9, "minor": 0}).install(monkeypatch)

    props = cuda_dev.device_properties(0)

    assert (props.clock_khz, props.memory_clock_khz, props.l2_bytes) == (0, 0, 0)


def test_rocm_is_told_by_is_hip_and_uses_the_symbolic_attribute_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    props = {
        "name": b"AMD Instinct MI300X",
        "major": 9,
        "minor": 4,
        "multiProcessorCount": 304,
        "gcnArchName": b"gfx942:sramecc+:xnack-",
        "memoryBusWidth": 8192,
        "l2CacheSize": 4 * MiB,
    }
    # HIP's enum values differ from CUDA's: a hard-coded CUDA value would ask for the wrong attribute
    attributes = {"cudaDevAttrClockRate": 2_100_000, "cudaDevAttrMemoryClockRate": 1_300_000}
    fake = FakeCupy(properties=props, attributes=attributes, is_hip=True).install(monkeypatch)

    got = cuda_dev.device_properties(0)

    assert (got.kind, got.arch_name) == ("rocm", "gfx942:sramecc+:xnack-")
    assert (got.clock_khz, got.memory_clock_khz) == (2_100_000, 1_300_000)
    assert fake.cupy.cuda.runtime.cudaDevAttrClockRate == HIP_ATTRIBUTES["cudaDevAttrClockRate"]
    assert cuda_dev.cuda_device(0).key == "mi300x"


def test_cuda_device_finds_the_table_entry(fake: FakeCupy) -> None:
    device = cuda_dev.cuda_device(0)

    assert device.key == "h100-sxm"
    assert device.peak(Precision.FP16, Unit.TENSOR) is not None


def test_cuda_device_derives_an_unknown_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_cupy import H100_PROPERTIES

    FakeCupy(properties={**H100_PROPERTIES, "name": b"NVIDIA H100 Prototype"}).install(monkeypatch)

    device = cuda_dev.cuda_device(0)

    assert device.bandwidth.source is Source.DERIVED
    assert device.bandwidth.value == pytest.approx(2 * 2_619_000e3 * 5120 / 8)


def test_backend_names_its_device(fake: FakeCupy) -> None:
    assert CudaBackend().device_name == "NVIDIA H100 80GB HBM3"


# -- device_count and the errors without CuPy or a device ---------------------------------------


def test_device_count_without_cupy_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ImportError

    assert loading.device_count() == 0


def test_device_count_when_the_driver_fails_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(count_error=FakeCudaError("cudaErrorNoDevice: no CUDA-capable device")).install(monkeypatch)

    assert loading.device_count() == 0


def test_device_count_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(device_count=4).install(monkeypatch)

    assert loading.device_count() == 4


def test_importing_the_module_does_not_import_cupy() -> None:
    code = textwrap.dedent(
        """
        import sys

        class NoCupy:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "cupy":
                    raise AssertionError("cupy imported at module import time")

        sys.meta_path.insert(0, NoCupy())
        import pkgutil
        import pytest_roofline.timing.cuda as package
        for module in pkgutil.iter_modules(package.__path__, "pytest_roofline.timing.cuda."):
            __import__(module.name)
        """
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_missing_cupy_is_a_clear_runtime_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)

    with pytest.raises(RuntimeError, match=r"needs CuPy: pip install 'pytest-roofline\[cuda12\]'") as excinfo:
        CudaBackend()

    assert excinfo.value.__suppress_context__  # no ImportError traceback chained in front of it
    for call in (cuda_dev.device_properties, cuda_dev.cuda_device, measured_ceilings.measure_ceilings):
        with pytest.raises(RuntimeError, match="needs CuPy"):
            call(0)


def test_no_device_is_a_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(device_count=0).install(monkeypatch)

    with pytest.raises(
        DeviceError, match=r"no CUDA device is visible \(cupy\.cuda\.runtime\.getDeviceCount\(\) == 0\)"
    ):
        CudaBackend()


def test_a_failing_driver_is_a_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(count_error=FakeCudaError("cudaErrorInsufficientDriver")).install(monkeypatch)

    with pytest.raises(DeviceError, match=r"no CUDA device is visible .*cudaErrorInsufficientDriver"):
        cuda_dev.device_properties(0)


@pytest.mark.parametrize("index", [2, -1, "0", True])
def test_a_bad_device_index_is_a_device_error(monkeypatch: pytest.MonkeyPatch, index: object) -> None:
    FakeCupy(device_count=2).install(monkeypatch)

    with pytest.raises(DeviceError, match="device"):
        CudaBackend(index)  # type: ignore[arg-type]


# -- measured ceilings --------------------------------------------------------------------------


def _read_at(rate: float) -> Callable[[int], float]:
    """``l2_read_ms`` of a GPU whose read-only stream moves ``rate`` bytes/s at any footprint."""
    from pytest_roofline.timing.l2 import L2_PASSES

    return lambda nbytes: nbytes * L2_PASSES / rate * 1e3


def test_ceilings_come_from_a_copy_and_matmuls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUPY_TF32", raising=False)
    copy_bytes = 512 * MiB  # max(4 × 50 MiB L2, 512 MiB)
    copy_rate = 2 * copy_bytes / 1e-3
    fake = FakeCupy(kernel_ms=1.0, l2_read_ms=_read_at(0.9 * copy_rate)).install(monkeypatch)

    bandwidth, peaks = measured_ceilings.measure_ceilings(0)  # the default policy

    assert bandwidth.value == pytest.approx(copy_rate)
    assert bandwidth.source is Source.MEASURED
    assert "read + write" in bandwidth.note
    assert f"beside a read-only stream: {0.9 * copy_rate / 1e9:,.1f} GB/s" in bandwidth.note
    n = max(measured_ceilings.MATMUL_SIZES)  # each call takes 1 ms on the fake: the larger size is faster
    assert set(peaks) == {
        (Precision.FP64, Unit.TENSOR),  # cc 9.0: CuPy asks cuBLAS for tensor ops (DMMA) from cc 8.0
        (Precision.FP32, Unit.VECTOR),
        (Precision.FP16, Unit.TENSOR),
    }  # no bf16 without ml_dtypes; no tf32 without CUPY_TF32
    for figure in peaks.values():
        assert figure.value == pytest.approx(2 * n**3 / 1e-3)
        assert figure.source is Source.MEASURED
        assert f"{n}×{n}×{n}" in figure.note
        assert "random inputs" in figure.note
    assert ("alloc", copy_bytes) in fake.log
    assert fake.count("flush") == 0  # these buffers dwarf L2: no flush by default


def test_the_bandwidth_ceiling_is_a_read_only_stream_where_that_beats_the_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the first H200 run: the copy read 4.17 TB/s, and a Triton add (two reads a write) 4.29
    copy_rate = 2 * 512 * MiB / 1e-3
    FakeCupy(kernel_ms=1.0, l2_read_ms=_read_at(1.08 * copy_rate)).install(monkeypatch)

    bandwidth, _ = measured_ceilings.measure_ceilings(0, FAST)

    assert bandwidth.value == pytest.approx(1.08 * copy_rate, rel=1e-6)
    assert bandwidth.note.startswith("ld.global.cg of 512 MiB x 64 passes in one launch")
    assert "beside cupy.copyto of 512 MiB (read + write)" in bandwidth.note
    assert f"{copy_rate / 1e9:,.1f} GB/s" in bandwidth.note


def test_fp16_and_bf16_tensor_ceilings_take_the_faster_of_the_two() -> None:
    fp16 = Figure(817e12, Source.MEASURED, "cupy.matmul 4096×4096×4096 fp16")
    bf16 = Figure(766e12, Source.MEASURED, "cupy.matmul 4096×4096×4096 bf16")
    fp32 = Figure(51e12, Source.MEASURED, "cupy.matmul fp32")
    peaks = {
        (Precision.FP16, Unit.TENSOR): fp16,
        (Precision.BF16, Unit.TENSOR): bf16,
        (Precision.FP32, Unit.VECTOR): fp32,
    }

    shared = measured_ceilings.shared_rates(peaks)

    assert shared[(Precision.FP16, Unit.TENSOR)] == fp16
    assert shared[(Precision.FP32, Unit.VECTOR)] == fp32
    raised = shared[(Precision.BF16, Unit.TENSOR)]
    assert raised.value == 817e12
    assert raised.source is Source.MEASURED
    assert raised.note == (
        "fp16's rate, the tensor cores' for both (cupy.matmul 4096×4096×4096 fp16); bf16's own: 766.0 TFLOP/s"
    )
    # one of the two alone, or neither: as measured
    alone = {(Precision.BF16, Unit.TENSOR): bf16}
    assert measured_ceilings.shared_rates(alone) == alone
    assert measured_ceilings.shared_rates({}) == {}


def test_fp64_matmul_is_a_vector_peak_before_compute_capability_8(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_cupy import H100_PROPERTIES

    props = {**H100_PROPERTIES, "name": b"Tesla V100-SXM2-32GB", "major": 7, "minor": 0}
    FakeCupy(kernel_ms=1.0, properties=props).install(monkeypatch)

    _, peaks = measured_ceilings.measure_ceilings(0, FAST)

    assert (Precision.FP64, Unit.VECTOR) in peaks
    assert (Precision.FP64, Unit.TENSOR) not in peaks


def test_ceiling_matmuls_take_random_inputs_of_both_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=1.0).install(monkeypatch)

    measured_ceilings.measure_ceilings(0, FAST)

    assert ("load", "curand") in fake.log
    for n in measured_ceilings.MATMUL_SIZES:
        assert ("alloc", n * n * 8) in fake.log  # an fp64 operand of each size


def test_ceiling_copy_is_four_times_a_large_l2(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_cupy import H100_PROPERTIES

    slow_read = _read_at(1e9)
    props = {**H100_PROPERTIES, "l2CacheSize": 256 * MiB}
    FakeCupy(kernel_ms=1.0, properties=props, l2_read_ms=slow_read).install(monkeypatch)

    bandwidth, _ = measured_ceilings.measure_ceilings(0, FAST)

    assert bandwidth.value == pytest.approx(2 * 1024 * MiB / 1e-3)
    assert "cupy.copyto of 1024 MiB" in bandwidth.note


def test_fp32_matmul_is_tf32_when_cupy_tf32_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_TF32", "1")
    FakeCupy(kernel_ms=1.0).install(monkeypatch)

    _, peaks = measured_ceilings.measure_ceilings(0, FAST)

    assert (Precision.TF32, Unit.TENSOR) in peaks
    assert (Precision.FP32, Unit.VECTOR) not in peaks


def test_bf16_is_measured_where_cupy_supports_it(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(kernel_ms=1.0, bfloat16=True).install(monkeypatch)
    install_fake_ml_dtypes(monkeypatch)

    _, peaks = measured_ceilings.measure_ceilings(0, FAST)

    assert peaks[(Precision.BF16, Unit.TENSOR)].source is Source.MEASURED


def test_bf16_is_skipped_where_cupy_cannot_matmul_it(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(kernel_ms=1.0, bfloat16=False).install(monkeypatch)
    install_fake_ml_dtypes(monkeypatch)

    _, peaks = measured_ceilings.measure_ceilings(0, FAST)

    assert (Precision.BF16, Unit.TENSOR) not in peaks


# -- a real GPU ---------------------------------------------------------------------------------


@pytest.mark.skipif(loading.device_count() == 0, reason="no CUDA device")
@pytest.mark.parametrize("graph", [False, True], ids=["events", "graph"])
def test_a_real_measurement(graph: bool) -> None:
    import cupy

    x = cupy.arange(1 << 20, dtype=cupy.float32)
    out = cupy.empty_like(x)

    def scale() -> None:
        cupy.multiply(x, 2, out=out)

    backend = CudaBackend(0, graph=graph, block="auto")  # this module's default is off: the real one
    m = measure(scale, policy=Policy(max_time_s=0.2), backend=backend)

    assert m.backend == "cuda"
    assert m.device == cuda_dev.device_properties(0).name
    assert 0 < m.time_s < 0.01  # 8 MiB of traffic: microseconds, not milliseconds
    assert all(s > 0 for s in m.samples_s)
    assert bool((out == 2 * x).all())
