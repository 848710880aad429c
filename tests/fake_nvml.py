"""A fake ``pynvml`` (nvidia-ml-py's module): the calls :mod:`pytest_roofline.timing.clocks` makes."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

import pytest

from pytest_roofline.timing import clocks

#: one NVML reading: SM MHz, memory MHz, temperature in °C, clock-event reason bits, and the power
#: drawn in milliwatts where the GPU reports it (without, ``nvmlDeviceGetPowerUsage`` is not supported)
Reading = tuple[int, int, int, int] | tuple[int, int, int, int, int]
Readings = list[Reading] | Callable[[], Reading]


class FakeNvmlError(Exception):
    """pynvml's NVMLError_NotSupported: a call this GPU does not answer."""


class FakeNvml:
    """nvidia-ml-py's calls the watcher makes; ``readings``: (sm, mem, temp, reasons[, power mW]) per
    sample, the last repeating, or a function giving the reading now (a fake GPU's state);
    ``power_limit_mw``: the enforced power limit (None: not supported). Constants as nvml.h:
    NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2, NVML_TEMPERATURE_GPU 0."""

    def __init__(
        self, readings: Readings, *, max_sm: int = 1980, power_limit_mw: int | None = 700_000
    ) -> None:
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
        module.nvmlDeviceGetPowerUsage = self._power
        module.nvmlDeviceGetEnforcedPowerLimit = lambda handle: self._supported(power_limit_mw)
        self.module = module

    def _handle(self, key: object) -> object:
        self.handles.append(key)
        return key

    def _now(self) -> Reading:
        if callable(self.readings):
            return self.readings()
        return self.readings[min(self.reads, len(self.readings) - 1)]

    def _power(self, handle: object) -> int:
        reading = self._now()
        return self._supported(reading[4] if len(reading) > 4 else None)

    @staticmethod
    def _supported(value: int | None) -> int:
        if value is None:
            raise FakeNvmlError("Not Supported")
        return value

    def _reasons(self, handle: object) -> int:
        value = self._now()[3]
        self.reads += 1  # one sample reads the reasons last
        return value

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
        monkeypatch.setitem(sys.modules, "pynvml", self.module)
        monkeypatch.setattr(clocks, "_nvml_state", None)
        monkeypatch.setattr(clocks, "_said", False)
        return self
