"""What the calibration tests share: a ``measure_cpu`` stand-in with fixed ceilings, and a private
cache folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.machine import calibrate, cpupeak
from pytest_roofline.machine.cachelevels import level_details
from pytest_roofline.machine.calibrate import calibrate_cpu
from pytest_roofline.machine.calibration_cache import Ceilings
from pytest_roofline.machine.capacity import Sweep, capacity_details
from pytest_roofline.model.core import CacheSize, Figure, Precision, Source, Unit

P, V = Precision, Unit.VECTOR


#: what a capacity sweep found on the fake CPU: an L1 it could not see, a 480 MiB L3 of which this
#: process gets 40 MiB
FAKE_CAPACITIES = (
    CacheSize(1, 48 * 2**10, None, per_core=True, found="unseen", note="no step"),
    CacheSize(3, 480 * 2**20, 40 * 2**20, found="knee", note="the rate steps from 27 to 13.5 GB/s at 40 MiB"),
)


class FakeMeasure:
    """Stands in for ``measure_cpu``: fixed ceilings (the capacities of :data:`FAKE_CAPACITIES`), and
    a count of how often it ran."""

    def __init__(self, bandwidth: float = 20e9, fp64: float = 100e9, fp32: float = 200e9) -> None:
        self.calls = 0
        swept = Sweep((), FAKE_CAPACITIES, 0.5, "past the l3's knee", "np.add")
        self.ceilings = Ceilings(
            bandwidth=Figure(bandwidth, Source.MEASURED, "copy; fake"),
            peaks={
                (P.FP64, V): Figure(fp64, Source.MEASURED, "np.matmul n=64, best of 3"),
                (P.FP32, V): Figure(fp32, Source.MEASURED, "np.matmul n=64, best of 3"),
            },
            details={
                "bandwidth_kernel": "copy",
                "runs_copy": 2,
                **capacity_details(swept),
                **level_details({"l3": (27e9, "add 20 MiB")}),
            },
        )

    def __call__(self) -> Ceilings:
        self.calls += 1
        return self.ceilings


def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache folder (through XDG_CACHE_HOME), a fake HOME and a fresh per-process memo."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(calibrate, "_cpu_memo", {})
    # the sanity rules' theoretical peak is this machine's: tests that want one pass it
    monkeypatch.setattr(cpupeak, "cpu_peak", lambda: None)
    return tmp_path / "xdg" / "pytest-roofline"


def cached_payload(cache: Path, fake: FakeMeasure) -> tuple[Path, dict[str, Any]]:
    cal = calibrate_cpu(measure=fake)
    assert cal.cache_path is not None
    return cal.cache_path, json.loads(cal.cache_path.read_text())
