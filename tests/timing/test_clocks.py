"""GPU clocks watched through NVML, on a fake ``pynvml`` (nvidia-ml-py's module) and without one."""

from __future__ import annotations

import sys

import pytest
from fake_cupy import FakeCupy
from fake_nvml import FakeNvml

from pytest_roofline.model.conditions import ClockLog, ClockSample
from pytest_roofline.timing import clocks
from pytest_roofline.timing.clocks import ClockWatcher, unwatched_note
from pytest_roofline.timing.cuda.backend import CudaBackend


def test_a_steady_gpu_is_watched_and_not_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml([(1980, 2619, 55, 0x0)]).install(monkeypatch)

    with ClockWatcher(index=0, interval_s=60) as watcher:
        pass

    log = watcher.log
    assert log.watched
    assert len(log.samples) == 2  # at the start and at the end, whatever the interval
    assert (log.min_sm_mhz, log.max_sm_mhz, log.max_temperature_c) == (1980, 1980, 55)
    assert not log.throttled
    assert nvml.handles == [("index", 0)]


def test_a_thermal_slowdown_flags_the_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml([(1980, 2619, 80, 0x0), (1410, 2619, 91, 0x20 | 0x1)]).install(monkeypatch)

    with ClockWatcher(interval_s=60) as watcher:
        pass

    assert watcher.log.throttled
    assert watcher.log.reasons == ("software thermal slowdown",)  # GPU idle (0x1) is no slowdown
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

    assert log.events == ("software power cap", "hardware power brake")
    assert log.reasons == ("hardware power brake",)  # the power cap alone is not throttling


def test_a_software_power_cap_with_clocks_held_is_not_throttling(monkeypatch: pytest.MonkeyPatch) -> None:
    # an H100 at its power limit under a dense GEMM: the cap bit set, the SM clock within 75% of max
    FakeNvml([(1980, 2619, 70, 0x0), (1755, 2619, 74, 0x4)]).install(monkeypatch)

    with ClockWatcher(interval_s=60) as watcher:
        pass

    assert not watcher.log.throttled
    assert watcher.log.events == ("software power cap",)
    assert watcher.log.summary().endswith(
        "; at the software power cap, the SM clock down to 89% of its maximum (throttled below 75%)"
    )


def test_a_busy_sm_clock_below_75_percent_is_throttling_whatever_the_reasons(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeNvml([(1980, 2619, 70, 0x0), (1200, 2619, 74, 0x4)]).install(monkeypatch)

    with ClockWatcher(interval_s=60) as watcher:
        pass

    assert watcher.log.throttled
    assert watcher.log.reasons == ("SM clock at 61% of its maximum",)


def test_an_idle_gpus_low_clock_is_not_throttling() -> None:
    idle = ClockSample(0, 345, 405, 40, 0x1)  # nvmlClocksEventReasonGpuIdle: nothing runs
    busy = ClockSample(1, 1980, 2619, 60, 0x0)

    assert not ClockLog(True, samples=(idle, busy), max_sm_mhz=1980).throttled


def test_an_old_driver_without_the_event_reasons_symbol_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    # nvidia-ml-py >= 12.535 always has the new name; on an older driver its call raises
    # NVMLError_FunctionNotFound (pynvml's _nvmlGetFunctionPointer): the old call answers
    nvml = FakeNvml([(1980, 2619, 80, 0x40)]).install(monkeypatch)

    def missing(handle: object) -> int:
        raise RuntimeError("Function Not Found")

    nvml.module.nvmlDeviceGetCurrentClocksEventReasons = missing
    nvml.module.nvmlDeviceGetCurrentClocksThrottleReasons = nvml._reasons

    with ClockWatcher(interval_s=60) as watcher:
        pass

    assert watcher.log.reasons == ("hardware thermal slowdown",)
    assert watcher.log.reasons_watched


def test_reasons_neither_call_answers_are_unwatched_not_none(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = FakeNvml([(1980, 2619, 80, 0x40)]).install(monkeypatch)

    def missing(handle: object) -> int:
        raise RuntimeError("Function Not Found")

    nvml.module.nvmlDeviceGetCurrentClocksEventReasons = missing

    with ClockWatcher(interval_s=60) as watcher:
        pass

    assert not watcher.log.reasons_watched
    assert "clock-event reasons unwatched" in watcher.log.summary()


def test_a_power_cap_that_kept_the_sm_clock_at_its_maximum_says_so() -> None:
    samples = (ClockSample(0.0, 1980, 2619, 60, 0x4), ClockSample(0.02, 1980, 2619, 61, 0x4))
    log = ClockLog(True, samples=samples, max_sm_mhz=1980)
    assert log.power_cap_note() == "at the software power cap (the SM clock held at its maximum)"
    assert ClockLog(True, samples=samples[:1]).power_cap_note() == log.power_cap_note()  # no maximum read
