"""Attained at the clock a GPU held (kernelmeter's "attained at held clock"): a compute-bound kernel's
``attained x quoted clock / held SM clock`` (the busy samples' median,
:attr:`~.conditions.ClockLog.median_sm_mhz`), a memory-bound one's ``attained x maximum / held
memory clock``. Why, and why not the SM clock for both: docs/gpu.md ("Attained at the held clock").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .conditions import ClockLog
from .core import Estimate
from .devices import quoted_clock_mhz


@dataclass(frozen=True, slots=True)
class HeldClock:
    """The clock a measurement's bounding figure assumes beside the one the GPU held."""

    #: ``SM`` (a compute-bound kernel's) or ``memory`` (a memory-bound one's)
    clock: Literal["SM", "memory"]
    assumed_mhz: float
    held_mhz: float

    @classmethod
    def of(cls, estimate: Estimate, clocks: ClockLog | None) -> HeldClock | None:
        """The clock ``estimate``'s bounding figure assumes and the one the GPU held (the module's
        rule); None where the clocks were not watched, no busy sample read them, or the clock the
        figure assumes is not known (a warm op's cache roof was measured, at whatever clock held
        then)."""
        if clocks is None or not clocks.watched:
            return None
        clock: Literal["SM", "memory"]
        if estimate.bound == "compute":
            clock, assumed, held = "SM", quoted_clock_mhz(estimate), clocks.median_sm_mhz
        elif estimate.memory_level == "dram":
            clock, assumed, held = "memory", clocks.max_mem_mhz, clocks.median_mem_mhz
        else:
            return None
        if not assumed or not held:
            return None
        return cls(clock, float(assumed), held)

    def attained(self, attained: float) -> float:
        """``attained`` at the held clock."""
        return attained * self.assumed_mhz / self.held_mhz

    def describe(self) -> str:
        """``1500 MHz SM clock, where the peak assumes 1830``."""
        figure = "peak" if self.clock == "SM" else "bandwidth"
        return (
            f"{self.held_mhz:.0f} MHz {self.clock} clock, where the {figure} assumes {self.assumed_mhz:.0f}"
        )
