"""Device specs and detection, with the GPU side and the CPU calibration faked."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_roofline.machine import calibrate, detect
from pytest_roofline.machine.detect import (
    Target,
    auto_spec,
    detect_device,
    get_device,
    parse_target,
    require_local,
    target_device,
)
from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import DeviceError, lookup
from pytest_roofline.timing.cuda import device as cuda_dev
from pytest_roofline.timing.cuda import loading

FAKE_CPU = Device(
    key="cpu",
    name="Fake CPU",
    kind="cpu",
    peaks={(Precision.FP32, Unit.VECTOR): Figure(1e11, Source.MEASURED)},
    bandwidth=Figure(2e10, Source.MEASURED),
)


class Gpus:
    """The visible GPUs, by table key; ``queries`` counts ``device_count`` calls."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.queries = 0

    def device_count(self) -> int:
        self.queries += 1
        return len(self.keys)

    def cuda_device(self, index: int = 0) -> Device:
        if not 0 <= index < len(self.keys):
            raise DeviceError(f"no CUDA device {index}")
        key = self.keys[index]
        if key == "unknown":
            raise DeviceError("device 'Mystery GPU' is not in the table")
        return lookup(key)


@pytest.fixture
def gpus(monkeypatch: pytest.MonkeyPatch) -> Gpus:
    fake = Gpus()
    monkeypatch.setattr(loading, "device_count", fake.device_count)
    monkeypatch.setattr(cuda_dev, "cuda_device", fake.cuda_device)
    return fake


@pytest.fixture(autouse=True)
def cpu(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """The CPU device without calibrating; returns how often it was asked for."""
    calls: list[None] = []

    def cpu_device(*, force: bool = False) -> Device:
        calls.append(None)
        return FAKE_CPU

    def no_calibration(**kwargs: object) -> None:
        raise AssertionError("detection must not calibrate directly")

    monkeypatch.setattr(calibrate, "cpu_device", cpu_device)
    monkeypatch.setattr(calibrate, "calibrate_cpu", no_calibration)
    return lambda: len(calls)


# -- parse_target ------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["cpu", "CPU", "  cpu "])
def test_cpu_needs_no_gpu_query(gpus: Gpus, cpu: Callable[[], int], spec: str) -> None:
    assert parse_target(spec) == Target(spec="cpu", kind="cpu", index=None, local=True)
    assert gpus.queries == 0
    assert cpu() == 0  # nor a calibration


def test_auto_without_a_gpu_is_the_cpu(gpus: Gpus) -> None:
    assert parse_target("auto") == Target(spec="auto", kind="cpu", index=None, local=True)


def test_auto_with_gpus_is_the_first(gpus: Gpus) -> None:
    gpus.keys = ["h100-sxm", "a10"]
    assert parse_target("Auto") == Target(spec="auto", kind="cuda", index=0, local=True)


@pytest.mark.parametrize(
    ("spec", "index"), [("cuda", 0), ("cuda:0", 0), ("cuda:1", 1), ("CUDA:1", 1), (" cuda:01 ", 1)]
)
def test_cuda_forms(gpus: Gpus, spec: str, index: int) -> None:
    gpus.keys = ["h100-sxm", "a10"]
    target = parse_target(spec)
    assert (target.kind, target.index, target.local) == ("cuda", index, True)
    assert target.spec == spec.strip().lower()


def test_cuda_index_out_of_range(gpus: Gpus) -> None:
    gpus.keys = ["h100-sxm", "a10"]
    with pytest.raises(DeviceError, match=r"^cuda:2: no such CUDA device \(2 visible\)$"):
        parse_target("cuda:2")


@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:1"])
def test_cuda_without_a_gpu(gpus: Gpus, spec: str) -> None:
    expected = spec if ":" in spec else "cuda"
    with pytest.raises(
        DeviceError, match=rf"^{expected}: no such CUDA device \(0 visible: CuPy is not installed"
    ):
        parse_target(spec)


@pytest.mark.parametrize("spec", ["cuda:", "cuda:-1", "cuda:x", "cuda1", "cuda:1.0", "cuda:0:1", "cuda 0"])
def test_bad_cuda_spellings(gpus: Gpus, spec: str) -> None:
    with pytest.raises(DeviceError, match=r"bad CUDA device .*expected cuda or cuda:N"):
        parse_target(spec)
    assert gpus.queries == 0


@pytest.mark.parametrize(
    ("spec", "suggestion"),
    [
        ("cdua", "cuda"),
        ("atuo", "auto"),
        ("h100-sx", "h100-sxm"),
        ("cpus", "cpu"),
        ("a100-sxm-80", "a100-sxm-80gb"),
    ],
)
def test_unknown_specs_suggest(gpus: Gpus, spec: str, suggestion: str) -> None:
    with pytest.raises(
        DeviceError, match=rf"unknown device '{spec}' \(did you mean '{suggestion}'\?\); expected auto"
    ):
        parse_target(spec)


@pytest.mark.parametrize("spec", ["", "   ", "tpu-v5"])
def test_unknown_specs_list_the_choices(gpus: Gpus, spec: str) -> None:
    with pytest.raises(
        DeviceError, match=r"expected auto, cpu, cuda, cuda:N or a table key \(.*h100-sxm.*\)"
    ):
        parse_target(spec)


@pytest.mark.parametrize("spec", [None, 0, ["cpu"]])
def test_non_string_specs(spec: object) -> None:
    with pytest.raises(DeviceError, match="a device spec is a string"):
        parse_target(spec)  # type: ignore[arg-type]


def test_table_device_without_local_hardware(gpus: Gpus) -> None:
    gpus.keys = ["a10"]
    assert parse_target("h100-sxm") == Target(spec="h100-sxm", kind="table", index=None, local=False)


def test_table_device_present_here_is_local(gpus: Gpus) -> None:
    gpus.keys = ["unknown", "a10", "h100-sxm", "h100-sxm"]
    assert parse_target("h100-sxm") == Target(spec="h100-sxm", kind="table", index=2, local=True)


def test_table_device_by_driver_name(gpus: Gpus) -> None:
    target = parse_target("NVIDIA H100 80GB HBM3")
    assert (target.kind, target.local) == ("table", False)
    assert target_device(target) == lookup("h100-sxm")


def test_parse_target_does_not_calibrate(gpus: Gpus, cpu: Callable[[], int]) -> None:
    gpus.keys = ["a10"]
    for spec in ("auto", "cpu", "cuda", "a10", "h100-sxm"):
        parse_target(spec)
    assert cpu() == 0


# -- auto_spec and require_local ---------------------------------------------------------------


def test_auto_spec(gpus: Gpus) -> None:
    assert auto_spec() == "cpu"
    gpus.keys = ["l4"]
    assert auto_spec() == "cuda:0"


def test_auto_spec_with_the_real_backend_and_no_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "device_count", lambda: 0)  # what the backend answers without CuPy
    assert auto_spec() == "cpu"


def test_require_local_refuses_a_table_entry(gpus: Gpus) -> None:
    with pytest.raises(DeviceError) as info:
        require_local(parse_target("h100-sxm"))
    assert str(info.value) == (
        "device 'h100-sxm' is a table entry with no local hardware: it can be used for estimates, "
        "not measurements; run with --roofline-device auto|cpu|cuda[:N]"
    )


def test_require_local_passes_local_targets(gpus: Gpus) -> None:
    gpus.keys = ["h100-sxm"]
    for spec in ("auto", "cpu", "cuda:0", "h100-sxm"):
        target = parse_target(spec)
        assert require_local(target) is target


# -- detect_device, target_device and get_device -----------------------------------------------


def test_detect_auto_without_a_gpu_is_the_measured_cpu(gpus: Gpus, cpu: Callable[[], int]) -> None:
    assert detect_device() is FAKE_CPU
    assert detect_device("cpu") is FAKE_CPU
    assert cpu() == 2


def test_detect_auto_with_a_gpu(gpus: Gpus, cpu: Callable[[], int]) -> None:
    gpus.keys = ["l40s", "a10"]
    assert detect_device() == lookup("l40s")
    assert detect_device("cuda") == lookup("l40s")
    assert detect_device("cuda:1") == lookup("a10")
    assert cpu() == 0


def test_detect_table_device(gpus: Gpus) -> None:
    assert detect_device("mi300x") == lookup("mi300x")


@pytest.mark.parametrize(("spec", "match"), [("cuda:3", "no such CUDA device"), ("gpu", "unknown device")])
def test_detect_errors(gpus: Gpus, spec: str, match: str) -> None:
    with pytest.raises(DeviceError, match=match):
        detect_device(spec)


def test_detect_passes_on_an_undescribable_gpu(gpus: Gpus) -> None:
    gpus.keys = ["unknown"]
    with pytest.raises(DeviceError, match="not in the table"):
        detect_device("auto")


def test_target_device_for_each_kind(gpus: Gpus) -> None:
    gpus.keys = ["a10", "t4"]
    assert target_device(Target("cpu", "cpu", None, True)) is FAKE_CPU
    assert target_device(Target("cuda:1", "cuda", 1, True)) == lookup("t4")
    assert target_device(Target("b200", "table", None, False)) == lookup("b200")


@pytest.mark.parametrize("name", ["cpu", "CPU", " cpu"])
def test_get_device_cpu_is_measured(name: str) -> None:
    assert get_device(name) is FAKE_CPU


@pytest.mark.parametrize("name", ["a100-sxm-80gb", "NVIDIA A100-SXM4-80GB", "nvidia a100-sxm4-80gb"])
def test_get_device_from_the_table(gpus: Gpus, name: str) -> None:
    assert get_device(name) == lookup("a100-sxm-80gb")
    assert gpus.queries == 0


def test_get_device_typo(gpus: Gpus) -> None:
    with pytest.raises(DeviceError, match=r"unknown device 'h100-sx' \(did you mean 'h100-sxm'\?\)"):
        get_device("h100-sx")


def test_public_names() -> None:
    assert set(detect.__all__) == {
        "Target",
        "auto_spec",
        "detect_device",
        "get_device",
        "parse_target",
        "require_local",
        "target_device",
        "worker_device_spec",
    }


# -- pytest-xdist workers and GPUs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "worker", "gpus", "expected"),
    [
        ("auto", "gw0", 2, "cuda:0"),
        ("auto", "gw1", 2, "cuda:1"),
        ("auto", "gw2", 2, "cuda:0"),  # i mod n
        ("auto", "gw5", 3, "cuda:2"),
        (" CUDA ", "gw3", 2, "cuda:1"),  # keywords are case-insensitive
        ("cuda", "gw7", 1, "cuda:0"),
        ("auto", "gw1", 0, "auto"),  # no GPU: auto still means this CPU
        ("cuda", "gw1", 0, "cuda"),  # and cuda is still the error it was
        ("cuda:0", "gw1", 2, "cuda:0"),  # a named GPU is kept
        ("cpu", "gw1", 2, "cpu"),
        ("h100-sxm", "gw1", 2, "h100-sxm"),
        ("auto", None, 2, "auto"),  # not a worker
        ("auto", "master", 2, "auto"),
    ],
)
def test_worker_device_spec_gives_worker_i_gpu_i_mod_n(
    spec: str, worker: str | None, gpus: int, expected: str
) -> None:
    assert detect.worker_device_spec(spec, worker, lambda: gpus) == expected


def test_worker_device_spec_counts_gpus_only_when_it_may_use_one() -> None:
    def count() -> int:
        raise AssertionError("counted GPUs (importing CuPy) for nothing")

    assert detect.worker_device_spec("cpu", "gw1", count) == "cpu"
    assert detect.worker_device_spec("auto", None, count) == "auto"
