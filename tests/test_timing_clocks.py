"""GPU clocks watched through NVML, on a fake ``pynvml`` (nvidia-ml-py's module) and without one."""

from __future__ import annotations

import sys
import types

import pytest
from fake_cupy import FakeCupy

from pytest_roofline.timing import clocks
from pytest_roofline.timing.clocks import ClockLog, ClockSample, ClockWatcher, unwatched_note
from pytest_roofline.timing.cuda import CudaBackend


class FakeNvml:
    """nvidia-ml-py's calls the watcher makes; ``readings``: (sm, mem, temp, reasons) per sample, the last
    repeating. Constants as nvml.h: NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2, NVML_TEMPERATURE_GPU 0."""

    def __init__(self, readings: list[tuple[int, int, int, int]], *, max_sm: int = 1980) -> None:
        self.readings = readings
        self.reads = 0
        self.handles: list[object] = []
        module = types.ModuleType("pynvml")
        module.nvmlInit = lambda: None
        module.nvmlDeviceGetHandleByIndex = lambda index: self._handle(("index", index))
        module.nvmlDeviceGetHandleByPciBusId = lambda bus: self._handle(("pci", bus))
        module.nvmlDeviceGetClockInfo = lambda handle, kind: self._now()[0 if kind == 1 else 1]
        module.nvmlDeviceGetTemperature = lambda handle, sensor: self._now()[2]
        module.nvmlDeviceGetCurrentClocksEventReasons = self._reasons
        module.nvmlDeviceGetMaxClockInfo = lambda handle, kind: max_sm if kind == 1 else 2619
        self.module = module

    def _handle(self, key: object) -> object:
        self.handles.append(key)
        return key

    def _now(self) -> tuple[int, int, int, int]:
        return self.readings[min(self.reads, len(self.readings) - 1)]

    def _reasons(self, handle: object) -> int:
        value = self._now()[3]
        self.reads += 1  # one sample reads the reasons last
        return value

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
        monkeypatch.setitem(sys.modules, "pynvml", self.module)
        monkeypatch.setattr(clocks, "_nvml_state", None)
        monkeypatch.setattr(clocks, "_said", False)
        return self


def test_a_steady_gpu_is_watched_and_not_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml([(1980, 2619, 55, 0x0)]).install(monkeypatch)

    with ClockWatcher(index=0, interval_s=60) as watcher:
        pass

    log = watcher.log
    assert log.watched
    assert len(log.samples) == 2  # at the start and at the end, whatever the interval
    assert (log.min_sm_mhz, log.max_sm_mhz, log.max_temperature_c) == (1980, 1980, 55)
    assert not log.throttled
    assert log.sm_clock_fraction == 1.0
    assert nvml.handles == [("index", 0)]


def test_a_thermal_slowdown_flags_the_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml([(1980, 2619, 80, 0x0), (1410, 2619, 91, 0x20 | 0x1)]).install(monkeypatch)

    with ClockWatcher(interval_s=60) as watcher:
        pass

    assert watcher.log.throttled
    assert watcher.log.reasons == ("software thermal slowdown",)  # GPU idle (0x1) is no slowdown
    assert watcher.log.sm_clock_fraction == pytest.approx(1410 / 1980)
    assert "throttled: software thermal slowdown" in watcher.log.summary()


def test_the_backend_finds_its_gpu_by_pci_bus_id(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(device_count=2).install(monkeypatch)
    nvml = FakeNvml([(1980, 2619, 50, 0)]).install(monkeypatch)

    with CudaBackend(1).watch_clocks(interval_s=60):
        pass

    assert nvml.handles == [("pci", "0000:19:00.0")]  # CUDA and NVML number GPUs differently


def test_without_nvidia_ml_py_nothing_is_watched_and_it_is_said_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(clocks, "_nvml_state", None)
    monkeypatch.setattr(clocks, "_said", False)

    with ClockWatcher() as watcher:
        pass

    assert watcher.log == ClockLog(
        False, "nvidia-ml-py is not installed: pip install 'pytest-roofline[nvml]'"
    )
    assert not watcher.log.throttled
    assert watcher.log.summary().startswith("clocks not watched (nvidia-ml-py")
    assert unwatched_note() == "GPU clocks not watched: " + watcher.log.note
    assert unwatched_note() is None


def test_when_watched_there_is_nothing_to_say(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml([(1980, 2619, 50, 0)]).install(monkeypatch)

    assert unwatched_note() is None


@pytest.mark.parametrize("bad", [0, -1, "fast"])
def test_interval_is_checked(bad: object) -> None:
    with pytest.raises(ValueError, match=rf"interval_s must be a positive number of seconds; got {bad!r}"):
        ClockWatcher(interval_s=bad)  # type: ignore[arg-type]


def test_reasons_are_read_across_samples() -> None:
    log = ClockLog(True, samples=(ClockSample(0, 1, 1, 1, 0x4), ClockSample(1, 1, 1, 1, 0x80)))

    assert log.reasons == ("software power cap", "hardware power brake")
