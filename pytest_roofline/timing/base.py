"""The contract between the backend-neutral engine and a timer backend.

A backend knows only how to open and close a timed window around some calls, how to flush
the cache outside that window, and what its host clock reads. Warm-up, batching, stopping and
statistics all live in :mod:`pytest_roofline.timing.engine`, so they are tested once, on the
CPU, with a fake clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

# the settings and the statistic are the model's; imported from here before they moved down
from pytest_roofline.model.policy import Policy as Policy
from pytest_roofline.model.policy import check_count
from pytest_roofline.model.policy import check_positive as check_positive
from pytest_roofline.model.stats import STATS as STATS
from pytest_roofline.model.stats import Stat as Stat

Kernel = Callable[..., object]

#: a measurement never judges on fewer samples, whatever its time budget
MIN_SAMPLES_FLOOR = 3


def check_window_counts(calls: int, samples: int) -> None:
    """What every backend's ``run`` checks first: at least one call in at least one window."""
    if calls < 1 or samples < 1:
        raise ValueError(f"calls and samples must be >= 1; got calls={calls}, samples={samples}")


@dataclass(frozen=True, slots=True)
class Probe:
    """A reference kernel timed beside the kernel under test, so both see the same load.

    Its rate (``work`` per second) tracks how fast the machine runs *now*: the verdict scales the
    calibrated ceiling by it (:mod:`pytest_roofline.model.ceilings`). ``resource`` names what it
    measures: ``"bandwidth"`` (bytes per call) or a precision's compute (``"fp64"``, FLOPs).
    """

    name: str
    resource: str
    #: bytes or FLOPs one call of ``fn`` does
    work: float
    fn: Kernel
    #: untimed calls before a measurement's first probe (BLAS wakes its threads on the first)
    warmup_calls: int = 0

    def __post_init__(self) -> None:
        check_positive("work", self.work)
        check_count("warmup_calls", self.warmup_calls, minimum=0)


class Backend(Protocol):
    """What the engine needs from a timer. Implementations: ``cpu.CpuBackend``, ``cuda.CudaBackend``."""

    #: "cpu" or "cuda"
    name: str
    #: human-readable device the windows run on ("Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3")
    device_name: str
    #: the shortest window this timer resolves faithfully, its own overhead included, in seconds
    resolution_s: float

    def clock(self) -> float:
        """Host monotonic time in seconds: wall-time accounting and the time budget."""
        ...

    def run(
        self, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        """Time ``samples`` windows, each of ``calls`` back-to-back ``fn(*args)`` calls.

        When ``flush`` is true the cache is flushed before every window, outside it. Returns each
        window's elapsed seconds (the total for its ``calls`` calls, not divided). A backend may
        queue all windows and synchronize once at the end (CUDA does).
        """
        ...
