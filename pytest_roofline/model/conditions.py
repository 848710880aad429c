"""What the machine did while a measurement ran, as plain values the verdict reads: the OS's
contention readings (:class:`Contention`) and a GPU's clocks (:class:`ClockLog`).

Taking the readings is :mod:`pytest_roofline.timing`'s (:mod:`~pytest_roofline.timing.contention`
asks the OS, :mod:`~pytest_roofline.timing.clocks` asks NVML); what they mean (busy or heavy, throttled
or not) is arithmetic on them, here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# -- contention, by what the OS said ----------------------------------------------------------

Level = Literal["quiet", "busy", "heavy"]

# The thresholds (why these: docs/verdicts.md). A reading that is missing (None) never raises the level.
#: steal fractions
BUSY_STEAL = 0.02
HEAVY_STEAL = 0.10
#: fractions of samples preempted
BUSY_PREEMPTED = 0.10
HEAVY_PREEMPTED = 0.50
#: load from other processes per core
BUSY_LOAD_PER_CORE = 1.0
HEAVY_LOAD_PER_CORE = 2.0


@dataclass(frozen=True, slots=True)
class Contention:
    """How contended a measurement was, by what the OS said while it ran."""

    #: timed windows taken
    samples: int
    #: windows during which this thread was switched out involuntarily
    preempted: int
    #: steal jiffies / all jiffies over the measurement; None where there is no steal reading
    steal_fraction: float | None
    #: the 1-minute load average (this process's own threads included); None where there is none
    load_avg: float | None
    #: logical CPUs the load is shared among
    cores: int
    #: this process's CPU seconds per wall second over the measurement (above 1 with several threads)
    cpu_per_wall: float | None

    def __post_init__(self) -> None:
        if self.samples < 0 or not 0 <= self.preempted <= self.samples:
            raise ValueError(f"need 0 <= preempted <= samples; got {self.preempted} of {self.samples}")
        if self.cores < 1:
            raise ValueError(f"cores must be a positive integer; got {self.cores!r}")
        for name in ("steal_fraction", "load_avg", "cpu_per_wall"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a non-negative number or None; got {value!r}")

    @property
    def preempted_fraction(self) -> float | None:
        """The fraction of samples preempted; None without samples."""
        return self.preempted / self.samples if self.samples else None

    @property
    def load_beside(self) -> float | None:
        """The load of everything else: the load average less this process's CPU per wall second; a
        rough figure (why: docs/verdicts.md ("Budgets and verdicts"))."""
        if self.load_avg is None:
            return None
        return max(0.0, self.load_avg - (self.cpu_per_wall or 0.0))

    @property
    def level(self) -> Level:
        """``heavy`` when any reading reaches its HEAVY threshold, else ``busy`` when any reaches its
        BUSY threshold, else ``quiet``."""
        load = self.load_beside
        readings = (
            (self.steal_fraction, BUSY_STEAL, HEAVY_STEAL),
            (self.preempted_fraction, BUSY_PREEMPTED, HEAVY_PREEMPTED),
            (None if load is None else load / self.cores, BUSY_LOAD_PER_CORE, HEAVY_LOAD_PER_CORE),
        )
        known = [(value, busy, heavy) for value, busy, heavy in readings if value is not None]
        if any(value >= heavy for value, _, heavy in known):
            return "heavy"
        if any(value >= busy for value, busy, _ in known):
            return "busy"
        return "quiet"

    def describe(self) -> str:
        """``heavy contention: 62% of 40 samples preempted, steal 12%, load 4.10 on 2 cores (...)``."""
        headline = {"quiet": "quiet", "busy": "busy machine", "heavy": "heavy contention"}[self.level]
        fraction = self.preempted_fraction
        parts = [
            "no samples" if fraction is None else f"{_percent(fraction)} of {self.samples} samples preempted"
        ]
        if self.steal_fraction is not None:
            parts.append(f"steal {_percent(self.steal_fraction)}")
        if self.load_avg is not None:
            cores = f"{self.cores} core{'s' if self.cores != 1 else ''}"
            load = f"load {self.load_avg:.2f} on {cores}"
            if self.cpu_per_wall is not None:
                load += f" ({self.load_beside:.2f} beside this process)"
            parts.append(load)
        if self.cpu_per_wall is not None:
            parts.append(f"CPU/wall {self.cpu_per_wall:.2f}")
        return f"{headline}: {', '.join(parts)}"

    def to_record(self) -> dict[str, Any]:
        """Plain JSON-ready values (every float finite or None), for the JSON report."""
        return {
            "level": self.level,
            "samples": self.samples,
            "preempted": self.preempted,
            "preempted_fraction": self.preempted_fraction,
            "steal_fraction": self.steal_fraction,
            "load_avg": self.load_avg,
            "load_beside": self.load_beside,
            "cores": self.cores,
            "cpu_per_wall": self.cpu_per_wall,
        }


def _percent(fraction: float) -> str:
    """``62%``, ``12%``, ``0.5%``, ``0%``: whole percents from 10% up."""
    percent = fraction * 100
    return f"{percent:.0f}%" if percent >= 10 or percent == 0 else f"{percent:.1f}%"


# -- a GPU's clocks, by what NVML said ---------------------------------------------------------

#: the NVML clock-event reason bits reported (nvml.h, ``nvmlClocksEventReason*``); GPU idle,
#: application-clock and sync-boost settings are not slowdowns of a running kernel
SLOWDOWN_REASONS: dict[int, str] = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}
#: the reasons that make a measurement throttled: everything above but the software power cap,
#: which holds the clocks near their maximum at the power limit (the clock rule catches it when not)
THROTTLE_REASONS = 0x8 | 0x20 | 0x40 | 0x80
#: a busy sample whose SM clock is below this share of the maximum is throttled (nvbench's default
#: ``throttle_threshold``, ``benchmark_base.cuh``)
THROTTLE_CLOCK_SHARE = 0.75
_GPU_IDLE = 0x1  # nvmlClocksEventReasonGpuIdle: the clocks drop because nothing runs


@dataclass(frozen=True, slots=True)
class ClockSample:
    t_s: float
    sm_mhz: int
    mem_mhz: int
    temperature_c: int
    #: the clock-event reason bits; None when neither NVML call answered
    reasons: int | None
    #: the board's power draw in milliwatts (``nvmlDeviceGetPowerUsage``); None where NVML gave none
    power_mw: int | None = None

    @property
    def busy(self) -> bool:
        """Taken while the GPU ran something: an SM clock read, and no GPU-idle reason."""
        return self.sm_mhz > 0 and not (self.reasons or 0) & _GPU_IDLE


@dataclass(frozen=True, slots=True)
class ClockLog:
    """What the GPU's clocks did over one measurement."""

    watched: bool
    note: str = ""
    samples: tuple[ClockSample, ...] = ()
    #: the GPU's maximum SM and memory clocks (``nvmlDeviceGetMaxClockInfo``), when read
    max_sm_mhz: int | None = None
    max_mem_mhz: int | None = None
    #: the power limit the GPU enforces, in milliwatts (``nvmlDeviceGetEnforcedPowerLimit``), when read
    power_limit_mw: int | None = None

    @property
    def throttled(self) -> bool:
        """The GPU slowed down during the measurement (a busy SM clock below 75% of its maximum, or a
        thermal, hardware or power-brake reason): re-measure, or call the result inconclusive."""
        return bool(self.reasons)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the measurement counts as throttled (empty when it does not)."""
        seen = self._bits()
        named = [name for bit, name in SLOWDOWN_REASONS.items() if seen & bit & THROTTLE_REASONS]
        share = self.busy_sm_clock_share
        if share is not None and share < THROTTLE_CLOCK_SHARE:
            named.append(f"SM clock at {share:.0%} of its maximum")
        return tuple(named)

    @property
    def events(self) -> tuple[str, ...]:
        """Every clock-event reason seen, throttling or not (the software power cap among them)."""
        seen = self._bits()
        return tuple(name for bit, name in SLOWDOWN_REASONS.items() if seen & bit)

    @property
    def reasons_watched(self) -> bool:
        """Whether NVML answered a clock-event reasons call (by either name) in some sample."""
        return any(sample.reasons is not None for sample in self.samples)

    @property
    def busy_sm_clock_share(self) -> float | None:
        """The lowest SM clock over the maximum among the busy samples (:attr:`ClockSample.busy`)."""
        lowest = self.min_sm_mhz
        if lowest is None or not self.max_sm_mhz:
            return None
        return lowest / self.max_sm_mhz

    def power_cap_note(self) -> str:
        """What the software power cap did to the SM clock, in words, where it was set and the
        measurement is not throttled; "" otherwise."""
        if "software power cap" not in self.events or self.throttled:
            return ""
        cap = "at the software power cap" + (f", drawing {drawn}" if (drawn := self._drawn()) else "")
        share = self.busy_sm_clock_share
        if share is None or share >= 0.995:
            return f"{cap} (the SM clock held at its maximum)"
        return (
            f"{cap}, the SM clock down to {share:.0%} of its maximum (throttled below"
            f" {THROTTLE_CLOCK_SHARE:.0%})"
        )

    def _bits(self) -> int:
        seen = 0
        for sample in self.samples:
            seen |= sample.reasons or 0
        return seen

    # - what the clocks held: the figures of the busy samples (those taken while the GPU was idle
    #   show its idle clocks) -

    def _busy(self, read: Callable[[ClockSample], int | None]) -> list[int]:
        return [value for s in self.samples if s.busy and (value := read(s))]

    @property
    def median_sm_mhz(self) -> float | None:
        """The SM clock the measurement held: the median of the busy samples'."""
        return _median(self._busy(lambda s: s.sm_mhz))

    @property
    def min_sm_mhz(self) -> int | None:
        return min(self._busy(lambda s: s.sm_mhz), default=None)

    @property
    def median_mem_mhz(self) -> float | None:
        return _median(self._busy(lambda s: s.mem_mhz))

    @property
    def min_mem_mhz(self) -> int | None:
        return min(self._busy(lambda s: s.mem_mhz), default=None)

    @property
    def median_power_w(self) -> float | None:
        """The power the board drew while busy, in watts (the median of the samples')."""
        median_mw = _median(self._busy(lambda s: s.power_mw))
        return None if median_mw is None else median_mw / 1000

    @property
    def power_limit_w(self) -> float | None:
        return None if self.power_limit_mw is None else self.power_limit_mw / 1000

    def _drawn(self) -> str:
        """``690 W of its 700 W limit`` (the busy samples' median), or "" where NVML gave no power."""
        power, limit = self.median_power_w, self.power_limit_w
        if power is None:
            return ""
        return f"{power:.0f} W" + (f" of its {limit:.0f} W limit" if limit else "")

    @property
    def max_temperature_c(self) -> int | None:
        return max((s.temperature_c for s in self.samples), default=None)

    def summary(self) -> str:
        if not self.watched:
            return f"clocks not watched ({self.note})"
        text = (
            f"SM {_mhz(self.median_sm_mhz)} MHz median, {_mhz(self.min_sm_mhz)} at the lowest, of"
            f" {self.max_sm_mhz or '?'} MHz max; memory {_mhz(self.median_mem_mhz)} MHz median,"
            f" {_mhz(self.min_mem_mhz)} at the lowest"
        )
        if drawn := self._drawn():
            text += f"; drawing {drawn}"
        text += f"; {self.max_temperature_c} °C at the hottest, {len(self.samples)} samples"
        if not self.reasons_watched:
            text += "; clock-event reasons unwatched (NVML answered neither call)"
        elif note := self.power_cap_note():
            text += "; " + note
        return text + (f"; throttled: {', '.join(self.reasons)}" if self.throttled else "")

    def to_record(self) -> dict[str, Any]:
        """Plain JSON-ready values, for the JSON report: what the clocks held (the busy samples'
        median and lowest), the power drawn, and every clock-event reason seen."""
        return {
            "watched": self.watched,
            "summary": self.summary(),
            "median_sm_mhz": self.median_sm_mhz,
            "min_sm_mhz": self.min_sm_mhz,
            "max_sm_mhz": self.max_sm_mhz,
            "median_mem_mhz": self.median_mem_mhz,
            "min_mem_mhz": self.min_mem_mhz,
            "max_mem_mhz": self.max_mem_mhz,
            "median_power_w": self.median_power_w,
            "power_limit_w": self.power_limit_w,
            "max_temperature_c": self.max_temperature_c,
            "events": list(self.events),
            "throttled": self.throttled,
            "reasons": list(self.reasons),
            "samples": len(self.samples),
        }


def _median(values: list[int]) -> float | None:
    return float(statistics.median(values)) if values else None


def _mhz(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"
