"""GPU clocks, temperature, power and throttle reasons watched while a measurement runs, through
NVML (``nvidia-ml-py``, imported on the first watch and never required: without it a watch records
nothing and says why). A :class:`ClockWatcher` samples on a daemon thread; it is also the engine's
throttle (:mod:`.throttle`). What is recorded and why: docs/gpu.md ("The clocks each test ran at").
"""

from __future__ import annotations

import bisect
import functools
import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pytest_roofline.model.conditions import ClockLog, ClockSample

from ..errors import InvalidValueError

__all__ = [
    "ClockWatcher",
    "sm_clock_share",
    "unwatched_note",
]

_NVML_CLOCK_SM = 1  # nvmlClockType_t: NVML_CLOCK_GRAPHICS 0, NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2
_NVML_CLOCK_MEM = 2
_NVML_TEMPERATURE_GPU = 0

_said = False
_nvml_state: tuple[Any, str] | None = None  # (module or None, why not)


def _nvml() -> tuple[Any, str]:
    """pynvml, initialized once per process, or None and why not."""
    global _nvml_state
    if _nvml_state is None:
        try:
            module = importlib.import_module("pynvml")
        except ImportError:
            _nvml_state = (None, "nvidia-ml-py is not installed: pip install 'pytest-roofline[nvml]'")
        else:
            try:
                module.nvmlInit()
                _nvml_state = (module, "")
            except Exception as exc:  # NVMLError: no driver, or no permission
                _nvml_state = (None, f"NVML did not start: {exc}")
    return _nvml_state


def unwatched_note() -> str | None:
    """Why clocks are not watched in this process, the first time it is asked; then None (None too when
    they are watched)."""
    global _said
    module, why = _nvml()
    if module is not None or _said:
        return None
    _said = True
    return f"GPU clocks not watched: {why}"


@dataclass
class ClockWatcher:
    """Samples GPU clocks between ``with`` and its end; :attr:`log` holds what it saw."""

    #: the GPU in NVML's numbering, or better by its PCI bus id (CUDA's and NVML's numbering differ
    #: under ``CUDA_VISIBLE_DEVICES``)
    index: int = 0
    pci_bus_id: str | None = None
    interval_s: float = 0.02
    clock: Callable[[], float] = time.perf_counter
    #: how a rest waits (a test's fake clock advances instead)
    sleep: Callable[[float], None] = time.sleep
    log: ClockLog = field(default_factory=lambda: ClockLog(False, "not started"))
    _nvml: Any = None
    _handle: Any = None
    _samples: list[ClockSample] = field(default_factory=list)
    _max_sm_mhz: int | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not (isinstance(self.interval_s, (int, float)) and self.interval_s > 0):
            raise InvalidValueError(
                f"interval_s must be a positive number of seconds; got {self.interval_s!r}"
            )

    def __enter__(self) -> ClockWatcher:
        module, why = _nvml()
        if module is None:
            self.log = ClockLog(False, why)
            return self
        try:
            if self.pci_bus_id:
                self._handle = module.nvmlDeviceGetHandleByPciBusId(self.pci_bus_id)
            else:
                self._handle = module.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:
            self.log = ClockLog(False, f"NVML has no device {self.pci_bus_id or self.index}: {exc}")
            return self
        self._nvml = module
        handle = self._handle
        self._max_sm_mhz = _read(lambda: module.nvmlDeviceGetMaxClockInfo(handle, _NVML_CLOCK_SM))
        self.sample()
        self._thread = threading.Thread(target=self._run, name="roofline-clocks", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._nvml is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        module, handle = self._nvml, self._handle
        with self._lock:
            samples = tuple(self._samples)
        self.log = ClockLog(
            True,
            "pci " + self.pci_bus_id if self.pci_bus_id else f"NVML device {self.index}",
            samples,
            max_sm_mhz=self._max_sm_mhz,
            max_mem_mhz=_read(lambda: module.nvmlDeviceGetMaxClockInfo(handle, _NVML_CLOCK_MEM)),
            power_limit_mw=_read(lambda: module.nvmlDeviceGetEnforcedPowerLimit(handle)),
        )

    def sample(self) -> None:
        """Read the clocks once now (the thread calls this every ``interval_s``)."""
        module, handle = self._nvml, self._handle
        if module is None:
            return
        sample = ClockSample(
            t_s=self.clock(),
            sm_mhz=_read(lambda: module.nvmlDeviceGetClockInfo(handle, _NVML_CLOCK_SM)) or 0,
            mem_mhz=_read(lambda: module.nvmlDeviceGetClockInfo(handle, _NVML_CLOCK_MEM)) or 0,
            temperature_c=_read(lambda: module.nvmlDeviceGetTemperature(handle, _NVML_TEMPERATURE_GPU)) or 0,
            power_mw=_read(lambda: module.nvmlDeviceGetPowerUsage(handle)),
            reasons=_read_reasons(module, handle),
        )
        with self._lock:
            self._samples.append(sample)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def slowed(self, spans: list[tuple[float, float]]) -> list[bool]:
        """For each ``(start, end)`` span of :attr:`clock`, whether the GPU's clocks were slowed
        over it (:attr:`ClockLog.throttled` of the readings in it, the last before it and the first
        after it); all False where nothing is watched. A reading is taken first: the spans have
        just ended."""
        if self._nvml is None:
            return [False] * len(spans)
        self.sample()
        with self._lock:
            readings = sorted(self._samples, key=lambda s: s.t_s)
        times = [s.t_s for s in readings]
        # a set of readings is throttled when one of them is: counted once, summed for each span
        seen = [0]
        for reading in readings:
            one = ClockLog(True, samples=(reading,), max_sm_mhz=self._max_sm_mhz)
            seen.append(seen[-1] + one.throttled)
        slowed = []
        for start, end in spans:
            first = max(bisect.bisect_left(times, start) - 1, 0)
            last = min(bisect.bisect_right(times, end) + 1, len(readings))
            slowed.append(seen[last] > seen[first])
        return slowed

    def rest(self, seconds: float) -> None:
        """Wait ``seconds`` with the GPU idle (the caller queues nothing meanwhile)."""
        self.sleep(seconds)


#: the clock-event reasons calls, newest first (NVML 12.5 renamed ...ThrottleReasons to ...EventReasons)
_REASONS_CALLS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


def _read_reasons(module: Any, handle: Any) -> int | None:
    """The reason bits from the first call that answers: a new nvidia-ml-py on an old driver has the
    new name, whose call raises NVMLError_FunctionNotFound; None when neither answers."""
    for name in _REASONS_CALLS:
        call = getattr(module, name, None)
        if call is None:
            continue
        value = _read(functools.partial(call, handle))
        if value is not None:
            return value
    return None


def sm_clock_share(index: int = 0, pci_bus_id: str | None = None) -> float | None:
    """The SM clock now over its maximum (``nvmlDeviceGetClockInfo`` / ``nvmlDeviceGetMaxClockInfo``),
    or None without NVML or an answer."""
    module, _ = _nvml()
    if module is None:
        return None
    try:
        handle = (
            module.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
            if pci_bus_id
            else module.nvmlDeviceGetHandleByIndex(index)
        )
    except Exception:  # NVMLError: no such device
        return None
    now = _read(lambda: module.nvmlDeviceGetClockInfo(handle, _NVML_CLOCK_SM))
    top = _read(lambda: module.nvmlDeviceGetMaxClockInfo(handle, _NVML_CLOCK_SM))
    return now / top if now and top else None


def _read(read: Callable[[], object]) -> int | None:
    try:
        value = read()
    except Exception:  # NVMLError_NotSupported on this GPU
        return None
    return int(value) if isinstance(value, int) else None
