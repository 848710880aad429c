"""The latency floor of a GPU: the shortest time a kernel call can show, measured once per process,
device and mode with an empty kernel launch, after the GPU's clocks ramp up."""

from __future__ import annotations

import time

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.base import empty_call
from pytest_roofline.timing.cpu_latency import LatencyFloor
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.cuda.blocking import check_block, hold_refusal
from pytest_roofline.timing.cuda.kernels import EMPTY_SOURCE
from pytest_roofline.timing.cuda.loading import compiling, require_cupy, require_device, using_device

#: the latency floor's own measurement: short, warm, never flushed
LATENCY_POLICY = Policy(warmup_s=0.01, min_samples=20, max_time_s=0.25)
#: event pairs timed around nothing for the latency floor
LATENCY_EVENT_SAMPLES = 50
#: before the latency floor, the GPU is kept busy until NVML reports this share of its maximum SM
#: clock, for at most RAMP_MAX_S (docs/measurement.md, "The latency floor")
RAMP_CLOCK_SHARE = 0.9
RAMP_MAX_S = 0.5
#: one busy stretch of the ramp, on the GPU
RAMP_STEP_S = 0.02
_latency_floors: dict[tuple[int, bool, bool], LatencyFloor] = {}


def latency_floor(
    index: int = 0,
    *,
    graph: bool = False,
    block: bool | str | None = None,
    refresh: bool = False,
) -> LatencyFloor:
    """The shortest time a kernel call can show on GPU ``index``, measured once per process, device
    and mode (``refresh=True`` measures again). ``floor_s``: the per-call time of an empty
    ``RawKernel`` launch, timed by the engine in the mode of the backend it judges (``graph`` or
    eager, held by the blocking kernel or not: ``block``), after :func:`ramp_clocks`;
    ``event_pair_s``: the median of an event pair around nothing. How the verdict uses it:
    docs/measurement.md ("The latency floor").
    """
    from pytest_roofline.timing.cache import WARM
    from pytest_roofline.timing.engine import measure

    cupy = require_device(index)
    # whether a backend built with ``block`` would hold windows, without building one
    rocm = getattr(cupy.cuda.runtime, "is_hip", False)
    key = (index, graph, not hold_refusal(check_block(block), rocm=rocm, cupti=False))
    if not refresh and key in _latency_floors:
        return _latency_floors[key]
    backend = CudaBackend(index, graph=graph, block=block)
    with using_device(index):
        empty = cupy.RawKernel(EMPTY_SOURCE, "roofline_empty")

        def launch() -> None:
            empty((1,), (1,), ())

        ramp = ramp_clocks(backend)
        with compiling():  # the empty kernel's first launch compiles it
            m = measure(launch, policy=LATENCY_POLICY, backend=backend, cache=WARM)
        # the event pair is timed eagerly (a graph of nothing is refused), seen unheld first as every kernel
        eager = CudaBackend(index, block=block) if graph else backend
        eager.run(empty_call, (), calls=1, samples=1, flush=False)
        eager.run(empty_call, (), calls=1, samples=1, flush=False)
        pairs = sorted(eager.run(empty_call, (), calls=1, samples=LATENCY_EVENT_SAMPLES, flush=False))
    held = ", CUPTI" if backend.timer == "cupti" else ", held" if backend.block else ", unheld"
    mode = ("graph replay" if graph else "eager") + held
    found = LatencyFloor(
        device=backend.device_name,
        floor_s=m.time_s,
        event_pair_s=pairs[len(pairs) // 2],
        note=(
            f"empty kernel launch ({mode}), {m.stat} of {m.stats.n} samples × {m.calls_per_sample} call(s);"
            f" event pair {pairs[len(pairs) // 2] * 1e6:.2f} µs; {ramp}"
        ),
    )
    _latency_floors[key] = found
    return found


def ramp_clocks(backend: CudaBackend) -> str:
    """Keep the GPU busy (the delay kernel, :data:`RAMP_STEP_S` at a time) until NVML reports
    :data:`RAMP_CLOCK_SHARE` of the maximum SM clock, or :data:`RAMP_MAX_S` passed; say what happened.
    Without NVML: busy for a fifth of that, the clocks unwatched."""
    from pytest_roofline.timing.clocks import sm_clock_share

    if backend.properties.kind == "rocm":  # the delay kernel reads %globaltimer, which ROCm lacks
        return "clocks not ramped first (ROCm)"
    blocker = backend.holder()
    bus_id = backend.pci_bus_id
    start = time.perf_counter()
    with using_device(backend.device):
        stream = require_cupy().cuda.get_current_stream()
        share = sm_clock_share(backend.device, bus_id)
        if share is None:  # unwatched: a fixed stretch of busy GPU, one host sync
            steps = max(1, round(RAMP_MAX_S / 5 / RAMP_STEP_S))
            for _ in range(steps):
                blocker.delay(stream, RAMP_STEP_S)
            stream.synchronize()
            return f"clocks unwatched (no NVML): the GPU kept busy {steps * RAMP_STEP_S * 1e3:.0f} ms first"
        while share is not None and share < RAMP_CLOCK_SHARE and time.perf_counter() - start < RAMP_MAX_S:
            blocker.delay(stream, RAMP_STEP_S)
            stream.synchronize()
            share = sm_clock_share(backend.device, bus_id)
    elapsed_ms = (time.perf_counter() - start) * 1e3
    shown = f"{share:.0%}" if share is not None else "?"
    return f"SM clock at {shown} of its maximum after {elapsed_ms:.0f} ms busy"
