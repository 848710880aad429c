"""Giving device memory back: CuPy's memory pool keeps the blocks of freed arrays for reuse, where
no other allocator (PyTorch's, a library's) can use them.

``cupy.get_default_memory_pool().free_all_blocks()`` hands the pool's free blocks of the current
device back to the driver (``cupy/cuda/memory.pyx``: ``MemoryPool.free_all_blocks`` frees the arenas
of ``device_pool()``; a split block stays until its parts are free again). Calibration's buffers (a
copy of 4 x the L2 each way, 8192² matmul operands: a few GiB) and the flush buffer are given back
once they are no longer needed, before the tests' own kernels want the memory.
"""

from __future__ import annotations

from typing import Any

from pytest_roofline.timing.cuda.loading import using_device


def free_cached_blocks(cupy: Any, device: int) -> None:
    """Hand CuPy's free pool blocks on GPU ``device`` back to the driver (nothing for a CuPy without
    a default pool)."""
    pool = getattr(cupy, "get_default_memory_pool", None)
    if pool is None:
        return
    with using_device(device):
        pool().free_all_blocks()
