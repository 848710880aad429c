"""Giving device memory back: CuPy's memory pool keeps the blocks of freed arrays for reuse, where
no other allocator (PyTorch's, a library's) can use them, so calibration's buffers and the flush
buffer are handed back once they are no longer needed (docs/measurement.md, "Calibration").
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
