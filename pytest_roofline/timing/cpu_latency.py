"""The latency floor, the shortest time any call can show on a timer, and the CPU's, measured once
per device and process (the GPU's: :func:`pytest_roofline.timing.cuda.launch_latency.latency_floor`).
What it is and how the verdict uses it: docs/measurement.md ("The latency floor"). Nothing here
imports CuPy; the CPU measurement imports the engine lazily.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_roofline.model.policy import Policy

from ..errors import InvalidValueError

if TYPE_CHECKING:
    from pytest_roofline.timing.base import Backend

__all__ = [
    "CPU_FLUSHED_LATENCY_POLICY",
    "CPU_LATENCY_POLICY",
    "LatencyFloor",
    "cpu_latency_floor",
    "measure_latency_floor",
]

#: the CPU latency floor's own measurement: short and warm
CPU_LATENCY_POLICY = Policy(warmup_s=0.005, min_samples=20, max_time_s=0.1)
#: and, for kernels timed cold by a flush, an empty call right after a flush
CPU_FLUSHED_LATENCY_POLICY = Policy(warmup_s=0.0, min_samples=10, max_time_s=0.5)


@dataclass(frozen=True, slots=True)
class LatencyFloor:
    """What an empty call costs on ``device``, per call, as the engine measures it."""

    device: str
    floor_s: float
    #: a timer's own cost around nothing (a CUDA event pair), when the backend has one
    event_pair_s: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.floor_s) and self.floor_s >= 0):
            raise InvalidValueError(f"floor_s must be a finite number >= 0; got {self.floor_s!r}")


def measure_latency_floor(
    backend: Backend | None = None, policy: Policy = CPU_LATENCY_POLICY, *, flushed: bool = False
) -> LatencyFloor:
    """The per-call time of a Python function that does nothing, through ``backend`` (default: the
    CPU's); ``flushed``: each call right after a cache flush, else warm."""
    from pytest_roofline.timing.base import empty_call
    from pytest_roofline.timing.cache import FLUSHED, WARM
    from pytest_roofline.timing.engine import measure

    m = measure(empty_call, policy=policy, backend=backend, cache=FLUSHED if flushed else WARM)
    note = f"empty Python call, {m.stat} of {m.stats.n} samples × {m.calls_per_sample} call(s)"
    if flushed:
        note += ", each right after a cache flush"
    return LatencyFloor(device=m.device, floor_s=m.time_s, note=note)


#: the CPU latency floors measured in this process, by (flushed, backend)
_CPU_FLOORS: dict[tuple[bool, Backend | None], LatencyFloor] = {}


def cpu_latency_floor(
    *, flushed: bool = False, backend: Backend | None = None, max_time_s: float | None = None
) -> LatencyFloor:
    """This process's CPU latency floor: a Python call's own cost, measured once; ``flushed``: each
    call right after a flush by ``backend`` (the kernel's; default: the engine's), for a kernel timed
    cold by a flush. ``max_time_s``: the most its measurement may take (its policy's own, at most)."""
    key = (flushed, backend if flushed else None)
    if key not in _CPU_FLOORS:
        policy = CPU_FLUSHED_LATENCY_POLICY if flushed else CPU_LATENCY_POLICY
        if max_time_s is not None and max_time_s < policy.max_time_s:
            policy = dataclasses.replace(policy, max_time_s=max_time_s)
        _CPU_FLOORS[key] = measure_latency_floor(backend if flushed else None, policy=policy, flushed=flushed)
    return _CPU_FLOORS[key]
