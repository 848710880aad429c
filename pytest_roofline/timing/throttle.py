"""Samples taken while the GPU had slowed its clocks: left out, and the GPU let to recover
(:class:`SlowedSamples`), as nvbench does; the sampler (:mod:`.sampling`) asks a
:class:`~.clocks.ClockWatcher` after each round which samples ran slowed. The rule, and the H200 run
that called for it: docs/gpu.md ("The clocks each test ran at"), docs/floor.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_roofline.timing.clocks import ClockWatcher

__all__ = [
    "MAX_RECOVERY_STEP_S",
    "RECOVERY_S",
    "SlowedSamples",
]

#: the first rest after a slowed round (nvbench's default ``throttle_recovery_delay``)
RECOVERY_S = 0.05
#: a rest grows by one and a half times itself, by at most this much at a time (nvbench's)
MAX_RECOVERY_STEP_S = 0.5
#: slowed rounds in a row that rest :data:`RECOVERY_S` before the rest grows (nvbench's ``> 2``)
_STEADY_RESTS = 3


class SlowedSamples:
    """The sampler's record of which samples ran at slowed clocks (:attr:`flags`, one per sample),
    and the rest due before its next round, after a round that ended slowed (nvbench's schedule);
    without a throttle, none ran slowed and none rests."""

    def __init__(self, throttle: ClockWatcher | None) -> None:
        self.throttle = throttle
        self.flags: list[bool] = []
        #: the rest due before the next round, in seconds
        self.rest_s = 0.0
        #: the rest after a round that ended slowed, grown (and kept grown) past :data:`_STEADY_RESTS`
        #: such rounds in a row
        self._recovery_s = RECOVERY_S
        self._slowed_in_a_row = 0

    def judge(self, spans: list[tuple[float, float]], left_s: float) -> None:
        """Flags a round's samples, which ran over ``spans``; a round that ended slowed is followed
        by a rest, of what the budget leaves (``left_s``) at most."""
        if self.throttle is None:
            self.flags.extend([False] * len(spans))
            return
        slowed = self.throttle.slowed(spans)
        if len(slowed) != len(spans):
            raise ValueError(f"{self.throttle!r} answered {len(slowed)} of {len(spans)} spans")
        self.flags.extend(slowed)
        if not (slowed and slowed[-1]):
            self._slowed_in_a_row = 0
            self.rest_s = 0.0
            return
        if self._slowed_in_a_row >= _STEADY_RESTS:
            self._recovery_s += min(self._recovery_s * 1.5, MAX_RECOVERY_STEP_S)
        self._slowed_in_a_row += 1
        self.rest_s = max(0.0, min(self._recovery_s, left_s))

    def rest(self) -> None:
        """The rest due, if any, before the next round."""
        if self.rest_s > 0 and self.throttle is not None:
            self.throttle.rest(self.rest_s)
        self.rest_s = 0.0
