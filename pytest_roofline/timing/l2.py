"""A GPU's L2 roof, measured: what a warm measurement served by the L2 is judged against, read by the
kernel of :mod:`.cuda.kernels` (:data:`L2_READ_SOURCE`); :func:`l2_rate_at` times it over any
footprint, for the sweep of :mod:`pytest_roofline.machine.capacity`. How and why: docs/cache.md
("Warm (on request)", "How big the caches are").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_roofline.model.core import Figure, Source
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cuda.kernels import BLOCKS_PER_SM, L2_READ_SOURCE, L2_READ_THREADS

#: the buffer fills this share of the L2
L2_FILL = 0.4
#: passes over the buffer in one launch: the first one's DRAM reads are a sixty-fourth of the time
L2_PASSES = 64
#: names how the L2 roof is measured, in a GPU calibration's cache key (another way is measured again)
L2_METHOD = f"ld.global.cg {L2_FILL:g} of the L2 x{L2_PASSES}"


def measure_l2_roof(index: int = 0, *, block: bool | str | None = None) -> Figure:
    """The L2 roof of GPU ``index`` (:func:`measure_l2_bandwidth` on its own backend)."""
    from pytest_roofline.timing.cuda.backend import CudaBackend
    from pytest_roofline.timing.cuda.loading import require_device, using_device

    cupy = require_device(index)
    backend = CudaBackend(index, block=block)
    try:
        with using_device(index):
            return measure_l2_bandwidth(cupy, backend, l2_bytes=backend.properties.l2_bytes)
    finally:  # its buffer goes back to the driver with the pool's other free blocks
        backend.release_memory()


#: each point of the capacity sweep is timed this briefly: a dozen of them make one calibration
SWEEP_POLICY = Policy(warmup_s=0.002, min_samples=5, min_time_s=0.005, max_time_s=0.05)


def l2_rate_at(index: int = 0, *, block: bool | str | None = None) -> Callable[[int], float]:
    """``rate_at(footprint)`` for GPU ``index``: the L2 roof's kernel over a buffer of ``footprint``
    bytes, its read rate in bytes/s (a footprint past the L2 reads from DRAM, and slower)."""
    from pytest_roofline.timing.cuda.backend import CudaBackend
    from pytest_roofline.timing.cuda.loading import require_device, using_device

    cupy = require_device(index)
    backend = CudaBackend(index, block=block)

    def rate_at(footprint: int) -> float:
        with using_device(index):
            figure = measure_l2_bandwidth(cupy, backend, l2_bytes=footprint, policy=SWEEP_POLICY, fill=1.0)
        return figure.value

    return rate_at


def measure_l2_bandwidth(
    cupy: Any, backend: Any, *, l2_bytes: int, policy: Policy | None = None, fill: float = L2_FILL
) -> Figure:
    """The L2's read bandwidth of the GPU ``backend`` times, in bytes/s, as a measured figure: over a
    buffer of ``fill`` x ``l2_bytes``."""
    from pytest_roofline.timing.cache import WARM
    from pytest_roofline.timing.cuda.loading import compiling
    from pytest_roofline.timing.engine import measure

    n4 = max(int(l2_bytes * fill) // 16, 1)
    buffer = cupy.zeros(n4 * 4, dtype=cupy.float32)
    sink = cupy.zeros(1, dtype=cupy.float32)
    kernel = cupy.RawKernel(L2_READ_SOURCE, "roofline_l2_read")
    grid, block = (max(backend.properties.multiprocessors, 1) * BLOCKS_PER_SM,), (L2_READ_THREADS,)
    args = (buffer, cupy.uint64(n4), cupy.int32(L2_PASSES), sink)

    def read() -> None:
        kernel(grid, block, args)

    with compiling():  # the read's first launch compiles it
        m = measure(read, policy=policy or Policy(), backend=backend, cache=WARM)
    nbytes = n4 * 16 * L2_PASSES
    share = f" ({fill:g} of the L2)" if fill != 1.0 else ""  # 1: a footprint of its own (a sweep, DRAM)
    return Figure(
        nbytes / m.time_s,
        Source.MEASURED,
        f"ld.global.cg of {n4 * 16 / 2**20:.0f} MiB{share} x {L2_PASSES} passes in one"
        f" launch, {m.stat} of {m.stats.n} samples",
    )
