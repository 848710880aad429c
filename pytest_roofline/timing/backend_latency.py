"""The latency floor a backend's measurements are judged against: what an empty call costs on its
timer, measured once per process, device and mode, for a backend that does not know its own
(:meth:`~pytest_roofline.timing.base.Backend.latency_floor_s`). Why it is measured here, not in
the backend classes, and each backend's floor: docs/development.md ("A timer backend of your own").
"""

from __future__ import annotations

from pytest_roofline.timing.base import Backend

#: a floor measured for a test (the first of its kind in the process) takes at most this share of
#: that test's time budget, which pays for it
MAX_FLOOR_SHARE = 0.25


def latency_floor_s(backend: Backend, *, flushed: bool = False, budget_s: float | None = None) -> float:
    """What an empty call costs on ``backend``'s timer, in seconds (an empty Python call on the CPU,
    an empty kernel launch on a GPU, in the backend's mode: graph or eager, held or not); 0 where it
    is not known. ``flushed``: the kernel is timed right after a cache flush, and so is the CPU's
    empty call. ``budget_s``: the time budget of the measurement that pays for it, if it is
    measured now: the CPU's (a flush before each of its samples) then takes at most
    :data:`MAX_FLOOR_SHARE` of it."""
    own = backend.latency_floor_s(flushed=flushed)
    if own is not None:
        return own
    if backend.times_host:  # its calls are Python calls: the floor is an empty one's
        from pytest_roofline.timing.cpu_latency import cpu_latency_floor

        most = None if budget_s is None else MAX_FLOOR_SHARE * budget_s
        flusher = backend if flushed else None
        return cpu_latency_floor(flushed=flushed, backend=flusher, max_time_s=most).floor_s
    from pytest_roofline.timing.cuda.backend import CudaBackend

    if isinstance(backend, CudaBackend):
        from pytest_roofline.timing.cuda.launch_latency import latency_floor

        return latency_floor(backend.device, graph=backend.graph, block=backend.block_mode).floor_s
    return 0.0
