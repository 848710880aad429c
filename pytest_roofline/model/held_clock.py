"""Attained at the clock a GPU held: a datasheet peak assumes a clock, and a GPU at its power limit
runs below it (kernelmeter's "attained at held clock").

A compute-bound kernel's rate follows the SM clock, so at the held clock its attained fraction is
``attained x quoted clock / held SM clock`` (the held clock: the median of the busy samples',
:attr:`~.conditions.ClockLog.median_sm_mhz`). A memory-bound kernel's follows the memory clock,
which the datasheet bandwidth assumes at its maximum: ``attained x maximum / held memory clock``,
equal to attained while the memory clock held its maximum (an HBM GPU's does under the power cap,
which lowers the SM clock only). Why not the SM clock for it too: docs/gpu.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .conditions import ClockLog
from .core import Estimate, Source


def quoted_clock_mhz(estimate: Estimate) -> float | None:
    """The SM clock the peak bounding a compute-bound ``estimate`` assumes: the clock its device
    table row quotes for the unit (tensor figures are quoted below the top boost clock); for a figure
    the table raised to the driver's maximum clock (:func:`.devices.at_reported_clock`), that clock.
    None for any other figure (measured, a peaks file's, derived from the driver's properties, a
    MIG slice's): what clock it assumes is not known.

    The one place that reads the device table's clocks, which the table keeps to itself: asked for a
    clock above any, :func:`.devices.at_reported_clock` scales each figure of a row that quotes one by
    that clock over the quoted one, which gives the quoted clock back.
    """
    from .devices import at_reported_clock, find_device

    device, key = estimate.device, (estimate.peak_precision, estimate.unit)
    row = find_device(device.key)
    figure, published = device.peaks.get(key), row.peaks.get(key) if row is not None else None
    if row is None or figure is None or published is None:
        return None
    scaled = at_reported_clock(row, _ABOVE_ANY_MHZ).peaks[key]
    if scaled is published:  # the row quotes no clock (or is a registered device's own)
        return None
    quoted = _ABOVE_ANY_MHZ * published.value / scaled.value
    if figure.source is Source.DATASHEET or figure == published:
        return round(quoted, 3)
    if figure.source is Source.DERIVED:  # raised with the clock: SMs x per-SM rate x clock
        return round(quoted * figure.value / published.value, 3)
    return None


#: a clock above any GPU's, for :func:`quoted_clock_mhz`
_ABOVE_ANY_MHZ = 1e6


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
