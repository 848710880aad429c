"""``format_calibration``: what ``roofline calibrate`` prints for a CPU, fresh or cached, with or
without a theoretical peak, with the cache levels' roofs."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from fake_calibration import FakeMeasure, private_cache

from pytest_roofline.machine import cpupeak
from pytest_roofline.machine.calibrate import calibrate_cpu
from pytest_roofline.machine.calibration_cache import Calibration
from pytest_roofline.machine.calibration_report import format_calibration
from pytest_roofline.machine.cpupeak import CpuPeak
from pytest_roofline.model.core import Figure, MemoryLevel, Source
from pytest_roofline.timing.cpu import cpu_model_name


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return private_cache(tmp_path, monkeypatch)


@pytest.fixture
def fake() -> FakeMeasure:
    return FakeMeasure()


PEAK = CpuPeak(2, 4e9, "cpufreq max", "AVX2+FMA", 16, 32)


def test_format_calibration_of_a_fresh_cpu_calibration(cache: Path, fake: FakeMeasure) -> None:
    cal = calibrate_cpu(measure=fake)
    lines = format_calibration(cal, theoretical=PEAK).splitlines()
    facts = f"cpu, {os.cpu_count()} cores, 40 MiB last-level cache (effective)"
    assert lines[0] == f"device       {cpu_model_name()} [{facts}]"
    assert lines[1] == "bandwidth    20.0 GB/s  (measured: copy; fake)"
    assert lines[2] == "fp64         100.0 GFLOP/s vector  (measured: np.matmul n=64, best of 3)"
    assert lines[3] == "fp32         200.0 GFLOP/s vector  (measured: np.matmul n=64, best of 3)"
    # the narrow float formats share fp32's figure, and one line; integers have none
    assert lines[4].startswith(
        "tf32, fp16, bf16, fp8_e4m3  200.0 GFLOP/s vector  (derived: fp32's matmul figure"
    )
    # each cache level as sysfs says and as the capacity sweep found it, with its roof
    assert lines[5].startswith(
        "l1           48 KiB per core (sysfs), not seen by the capacity sweep: not used"
    )
    assert lines[6] == (
        "l3           480 MiB (sysfs), 40 MiB effective, 27.0 GB/s  (the rate steps from 27 to 13.5 GB/s at"
        " 40 MiB; measured: add 20 MiB, numpy (best of 0.5, 0.7 of the level))"
    )
    # the hard limit of the figures above: the CPU's theoretical peak
    assert lines[7] == (
        "theoretical  128 GFLOP/s fp64, 256 GFLOP/s fp32  "
        "(2 cores × 4.00 GHz (cpufreq max) × 16 fp64 FLOP/cycle (AVX2+FMA))"
    )
    assert lines[8] == f"cache        {cal.cache_path}"
    assert lines[9].startswith("             calibrated in ")
    assert len(lines) == 10


def test_format_calibration_of_a_cpu_whose_peak_is_unknown(cache: Path, fake: FakeMeasure) -> None:
    text = format_calibration(calibrate_cpu(measure=fake), theoretical="no clock: nothing says")
    assert "\ntheoretical  unknown (no clock: nothing says)\n" in text


def test_format_calibration_reads_this_machines_peak_by_default(
    cache: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpupeak, "system_peak", lambda: PEAK)
    text = format_calibration(calibrate_cpu(measure=fake))
    assert "\ntheoretical  128 GFLOP/s fp64, 256 GFLOP/s fp32  (2 cores × 4.00 GHz" in text


def test_format_calibration_from_the_cache(cache: Path, fake: FakeMeasure) -> None:
    calibrate_cpu(measure=fake)
    cal = calibrate_cpu(measure=fake)
    assert "read from the cache in " in format_calibration(cal)
    slow = Calibration(cal.device, cal.cache_path, False, 3.25)
    assert format_calibration(slow).endswith("calibrated in 3.25 s")


def test_format_calibration_shows_the_cache_levels_roofs(cache: Path, fake: FakeMeasure) -> None:
    cal = calibrate_cpu(measure=fake)
    l1 = MemoryLevel("l1", 48 * 2**10, Figure(2e11, Source.MEASURED, "copy 24 KiB"), per_core=True)
    l3 = MemoryLevel("l3", 32 * 2**20, Figure(6e10, Source.MEASURED, "dot 16 MiB"))
    with_levels = dataclasses.replace(cal, device=dataclasses.replace(cal.device, levels=(l1, l3), caches=()))
    text = format_calibration(with_levels, theoretical=PEAK)  # a calibration from before the sweep
    assert "l1 (48 KiB, per core)  200.0 GB/s  (measured: copy 24 KiB)" in text
    assert "l3 (32 MiB, shared)  60.0 GB/s  (measured: dot 16 MiB)" in text
