"""A GPU's calibration with a fake measurement: what replaces the datasheet, the cache across
indices, the L2 roof, the TF32 key, and what ``roofline calibrate`` prints for it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fake_calibration import private_cache

from pytest_roofline.machine.calibrate import calibrate_cuda
from pytest_roofline.machine.calibration_report import format_calibration
from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import lookup
from pytest_roofline.timing.cuda import device as cuda_dev
from pytest_roofline.timing.cuda import measured_ceilings

P, V, TC = Precision, Unit.VECTOR, Unit.TENSOR


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return private_cache(tmp_path, monkeypatch)


@pytest.fixture
def h100(monkeypatch: pytest.MonkeyPatch) -> Device:
    device = lookup("h100-sxm")
    monkeypatch.setattr(cuda_dev, "cuda_device", lambda index=0: device)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(__version__="13.6.0"))
    monkeypatch.delenv("CUPY_TF32", raising=False)
    return device


class FakeCudaMeasure:
    def __init__(self) -> None:
        self.indices: list[int] = []

    def __call__(self, index: int) -> tuple[Figure, dict[tuple[Precision, Unit], Figure]]:
        self.indices.append(index)
        return Figure(3.0e12, Source.MEASURED, "cupy.copyto"), {
            (P.FP32, V): Figure(50e12, Source.MEASURED, "cupy.matmul fp32"),
            (P.FP16, TC): Figure(700e12, Source.MEASURED, "cupy.matmul fp16"),
        }


def test_calibrate_cuda_replaces_datasheet_figures(cache: Path, h100: Device) -> None:
    measure = FakeCudaMeasure()
    cal = calibrate_cuda(1, measure=measure)
    assert measure.indices == [1]
    device = cal.device
    assert device.key == "h100-sxm"
    assert device.bandwidth == Figure(3.0e12, Source.MEASURED, "cupy.copyto")
    assert device.peaks[(P.FP32, V)].value == 50e12
    assert device.peaks[(P.FP16, TC)].source is Source.MEASURED
    assert device.peaks[(P.BF16, TC)] == h100.peaks[(P.BF16, TC)]  # not measured: datasheet kept
    assert device.notes[-1] == "ceilings measured on this GPU"
    assert cal.cache_path is not None
    assert cal.cache_path.name.startswith("cuda-nvidia-h100-80gb-hbm3-")
    key = json.loads(cal.cache_path.read_text())["key"]
    assert key == {
        "name": "NVIDIA H100 80GB HBM3",
        "key": "h100-sxm",
        "sms": 132,
        "llc_bytes": h100.llc_bytes,
        "cupy": "13.6.0",
        "tf32": False,
        "method": measured_ceilings.CEILINGS_METHOD,
        "l2_method": "ld.global.cg 0.4 of the L2 x64",
    }


def test_calibrate_cuda_is_cached_across_indices(cache: Path, h100: Device) -> None:
    measure = FakeCudaMeasure()
    first = calibrate_cuda(0, measure=measure)
    second = calibrate_cuda(3, measure=measure)  # an identical GPU in another slot
    assert measure.indices == [0]
    assert second.from_cache
    assert second.device == first.device


def test_calibrate_cuda_defaults_to_the_backend_measurement(
    cache: Path, h100: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    measure = FakeCudaMeasure()
    monkeypatch.setattr(measured_ceilings, "measure_ceilings", measure)
    l2_indices: list[int] = []

    def l2_roof(index: int) -> Figure:
        l2_indices.append(index)
        return Figure(7e12, Source.MEASURED, "fake L2 read")

    monkeypatch.setattr("pytest_roofline.timing.l2.measure_l2_roof", l2_roof)
    swept: list[int] = []

    def l2_rate_at(index: int) -> Any:  # a MIG slice: 20 of the L2's 50 MiB are this GPU's
        swept.append(index)
        return lambda footprint: 7e12 if footprint <= 20 * 2**20 else 3e12

    monkeypatch.setattr("pytest_roofline.timing.l2.l2_rate_at", l2_rate_at)
    device = calibrate_cuda(force=True).device
    assert measure.indices == [0]
    assert l2_indices == [0]
    assert swept == [0]
    (level,) = device.levels  # the L2's roof, for warm measurements, at the capacity the GPU sees
    assert (level.name, level.bandwidth.value) == ("l2", 7e12)
    # the step lies between two of the sweep's footprints, a factor of 1.41 apart
    assert 17 * 2**20 <= level.capacity_bytes <= 25 * 2**20
    assert device.llc_bytes == level.capacity_bytes  # what rotation and the past-cache threshold are sized by
    ((name, reported, effective),) = [(c.name, c.reported_bytes, c.effective_bytes) for c in device.caches]
    assert (name, reported, effective) == ("l2", 50 * 2**20, level.capacity_bytes)


def l2_roof(indices: list[int]) -> Any:
    def measure(index: int) -> Figure:
        indices.append(index)
        return Figure(7e12, Source.MEASURED, "fake L2 read")

    return measure


def test_an_l2_roof_is_measured_even_after_a_calibration_without_one(cache: Path, h100: Device) -> None:
    # the plugin used to calibrate without the L2; roofline calibrate, after it, found that entry
    # and no L2 roof: whichever ran first decided
    calibrate_cuda(measure=FakeCudaMeasure())  # ceilings only
    l2_indices: list[int] = []

    device = calibrate_cuda(measure=FakeCudaMeasure(), l2=l2_roof(l2_indices)).device

    assert l2_indices == [0]
    assert [(level.name, level.bandwidth.value) for level in device.levels] == [("l2", 7e12)]


def test_a_calibration_without_the_l2_never_shadows_one_with_it(cache: Path, h100: Device) -> None:
    l2_indices: list[int] = []
    calibrate_cuda(measure=FakeCudaMeasure(), l2=l2_roof(l2_indices))

    later = calibrate_cuda(3, measure=FakeCudaMeasure(), l2=l2_roof(l2_indices)).device  # cached, both
    forced = calibrate_cuda(measure=FakeCudaMeasure(), force=True).device  # ceilings again, no L2 now

    assert l2_indices == [0]  # measured once, found by every later calibration
    assert [level.bandwidth.value for level in later.levels] == [7e12]
    assert [level.bandwidth.value for level in forced.levels] == [7e12]


def test_an_l2_roof_below_dram_is_raised_to_it(cache: Path, h100: Device) -> None:
    from pytest_roofline.machine.calibrate import gpu_l2_levels

    (level,) = gpu_l2_levels(h100, Figure(1e9, Source.MEASURED, "a busy moment"))

    assert level.bandwidth.value == h100.bandwidth.value
    assert "raised to DRAM's" in level.bandwidth.note


def test_calibrate_cuda_keys_on_cupy_tf32(cache: Path, h100: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    measure = FakeCudaMeasure()
    calibrate_cuda(measure=measure)
    monkeypatch.setenv("CUPY_TF32", "1")
    assert not calibrate_cuda(measure=measure).from_cache
    assert len(measure.indices) == 2


def test_format_calibration_of_a_gpu(cache: Path, h100: Device) -> None:
    text = format_calibration(calibrate_cuda(measure=FakeCudaMeasure()))
    assert "device      NVIDIA H100 80GB HBM3 [cuda, 132 SMs, 50 MiB last-level cache]" in text
    assert "theoretical" not in text  # a CPU's bound; a GPU's datasheet is its own
    assert "bandwidth   3,000.0 GB/s  (measured: cupy.copyto)" in text
    assert "fp32        50.0 TFLOP/s vector  (measured: cupy.matmul fp32)" in text
    assert "fp16        700.0 TFLOP/s tensor  (measured: cupy.matmul fp16)" in text
    assert "bf16        989.4 TFLOP/s tensor  (datasheet)" in text
    assert "int8        1,978.9 TOPS tensor  (datasheet)" in text
