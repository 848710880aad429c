"""``pytest_roofline.estimate()`` on this machine's devices: the CPU's ceilings from its cached
calibration, measured only when the caller asks (``measure=True``); the model's ``estimate()`` never
detects nor measures a device (issue 23)."""

from __future__ import annotations

from pathlib import Path

import pytest

import pytest_roofline
from pytest_roofline.machine import calibrate, cpupeak, detect
from pytest_roofline.machine.calibrate import calibrate_cpu
from pytest_roofline.machine.calibration_cache import Ceilings
from pytest_roofline.machine.public_estimate import estimate, resolve_device
from pytest_roofline.model import estimate as model_estimate
from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import DeviceError, lookup

CEILINGS = Ceilings(
    bandwidth=Figure(20e9, Source.MEASURED, "copy; fake"),
    peaks={
        (Precision.FP64, Unit.VECTOR): Figure(100e9, Source.MEASURED, "fake"),
        (Precision.FP32, Unit.VECTOR): Figure(200e9, Source.MEASURED, "fake"),
    },
)


@pytest.fixture
def no_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder, no CPU calibrated in this process, and calibrating is a test failure."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(calibrate, "_cpu_memo", {})
    monkeypatch.setattr(cpupeak, "cpu_peak", lambda: None)
    monkeypatch.setattr(detect, "auto_spec", lambda: "cpu")  # no GPU looked for

    def measured() -> Ceilings:
        raise AssertionError("an estimate calibrated the CPU without being asked to")

    monkeypatch.setattr(calibrate, "measure_cpu", measured)
    return tmp_path / "xdg" / "pytest-roofline"


def test_the_public_estimate_is_the_machine_one() -> None:
    assert pytest_roofline.estimate is estimate


@pytest.mark.parametrize("spec", ["cpu", "auto", " CPU "])
def test_the_cpu_without_a_cached_calibration_is_an_error_saying_how(no_calibration: Path, spec: str) -> None:
    with pytest.raises(DeviceError, match=r"not cached here yet: pass measure=True .* `roofline calibrate`"):
        estimate("copy", n=1000, dtype="fp32", device=spec)
    assert not no_calibration.exists()  # nothing was written either


def test_the_cpu_comes_from_the_cache_file_without_measuring(no_calibration: Path) -> None:
    calibrate_cpu(measure=lambda: CEILINGS, peak=None)  # an earlier `roofline calibrate`
    calibrate._cpu_memo.clear()  # in another process
    e = estimate("copy", n=1000, dtype="fp32", device="cpu")
    assert (e.device.key, e.bandwidth) == ("cpu", 20e9)
    assert e.floor_s == pytest.approx(8000 / 20e9)


def test_the_cpu_comes_from_this_process_calibration(no_calibration: Path) -> None:
    # calibrated earlier in this process (the fixture's memo is this test's own)
    calibrate._cpu_memo["cpu"] = calibrate.Calibration(lookup("h100-sxm"), None, True, 0.0)
    assert estimate("copy", n=1000, dtype="fp32", device="cpu").device.key == "h100-sxm"


def test_measure_true_calibrates_the_cpu(no_calibration: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "measure_cpu", lambda: CEILINGS)
    e = estimate("copy", n=1000, dtype="fp32", device="cpu", measure=True)
    assert (e.device.key, e.bandwidth) == ("cpu", 20e9)
    assert len(list(no_calibration.glob("cpu-*.json"))) == 1  # and cached for the next estimate
    calibrate._cpu_memo.clear()
    assert estimate("copy", n=1000, dtype="fp32", device="cpu").bandwidth == 20e9


def test_a_table_device_or_a_device_needs_no_hardware(no_calibration: Path) -> None:
    h100 = lookup("h100-sxm")
    assert resolve_device("h100-sxm", measure=False) is h100
    assert resolve_device("NVIDIA H100 80GB HBM3", measure=False) is h100
    assert resolve_device(h100, measure=False) is h100
    with pytest.raises(DeviceError, match="unknown device 'h200-nope'"):
        resolve_device("h200-nope", measure=False)


def test_a_misspelled_op_is_reported_before_the_device(no_calibration: Path) -> None:
    with pytest.raises(ValueError, match="unknown op 'gemmm'"):
        estimate("gemmm", M=1, N=1, K=1, dtype="fp32", device="cpu")


@pytest.mark.parametrize("spec", ["cpu", "auto", "cuda", "cuda:1"])
def test_the_model_estimate_never_detects_nor_measures(no_calibration: Path, spec: str) -> None:
    with pytest.raises(DeviceError, match=rf"device '{spec}' is this machine's: pytest_roofline.estimate"):
        model_estimate.estimate("copy", n=1000, dtype="fp32", device=spec)


def test_the_model_estimate_takes_a_device_or_a_table_name() -> None:
    cpu = Device(
        key="cpu", name="Some CPU", kind="cpu",
        peaks={(Precision.FP32, Unit.VECTOR): Figure(1e12, Source.MEASURED)},
        bandwidth=Figure(1e11, Source.MEASURED),
    )  # fmt: skip
    assert model_estimate.estimate("copy", n=1000, dtype="fp32", device=cpu).floor_s == pytest.approx(8e-8)
    assert model_estimate.estimate("copy", n=1000, dtype="fp32", device="h100-sxm").device.key == "h100-sxm"
