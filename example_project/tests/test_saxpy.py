"""saxpy, ``y += a * x``: a memory-bound elementwise op, contiguous vs strided.

Fixture only, no marker: each call names its op and shape with keywords.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from budgets import (
    BUDGETS,
    CUPY_SAXPY_STRIDE,
    CUPY_SAXPY_STRIDED_N,
    SAXPY_N,
    SAXPY_STRIDE,
    SAXPY_STRIDED_N,
    misses_roofline,
)

from pytest_roofline import Roofline

A = 0.5


def test_saxpy_contiguous(backend: ModuleType, roofline: Roofline, rng: np.random.Generator) -> None:
    x = rng.random(SAXPY_N, dtype=np.float32)
    y = rng.random(SAXPY_N, dtype=np.float32)
    dx, dy = backend.to_device(x), backend.to_device(y)

    backend.saxpy(A, dx, dy)
    np.testing.assert_allclose(backend.to_host(dy), y + np.float32(A) * x, rtol=1e-6)

    roofline(
        backend.saxpy,
        A,
        dx,
        dy,
        op="elementwise",
        n=SAXPY_N,
        inputs=2,
        outputs=1,
        flops_per_element=2,
        dtype="float32",
        device=backend.DEVICE,
        min_fraction=BUDGETS["saxpy"][backend.NAME],
    )


@misses_roofline(
    f"one float in {SAXPY_STRIDE} on the CPU, one in {CUPY_SAXPY_STRIDE} on the GPU (one column of a "
    "row-major matrix): each cache line (CPU) or sector (GPU) fetched carries one useful float, and "
    "on the CPU each sits on its own page, out of the prefetchers' reach, so every access waits on DRAM"
)
def test_saxpy_strided(backend: ModuleType, roofline: Roofline, rng: np.random.Generator) -> None:
    n, stride = (
        (CUPY_SAXPY_STRIDED_N, CUPY_SAXPY_STRIDE)
        if backend.NAME == "cupy"
        else (SAXPY_STRIDED_N, SAXPY_STRIDE)
    )
    x = rng.random(n * stride, dtype=np.float32)
    y = rng.random(n * stride, dtype=np.float32)
    dx, dy = backend.to_device(x), backend.to_device(y)

    backend.saxpy_strided(A, dx, dy, stride)
    expected = y.copy()
    expected[::stride] += np.float32(A) * x[::stride]
    np.testing.assert_allclose(backend.to_host(dy), expected, rtol=1e-6)

    # The roofline counts the useful bytes only: n = the elements actually updated.
    roofline(
        backend.saxpy_strided,
        A,
        dx,
        dy,
        stride,
        op="elementwise",
        n=n,
        inputs=2,
        outputs=1,
        flops_per_element=2,
        dtype="float32",
        device=backend.DEVICE,
        min_fraction=BUDGETS["saxpy"][backend.NAME],
        name=f"saxpy_strided[stride={stride}]",
    )


def test_saxpy_rejects_mismatched_lengths(backend: ModuleType) -> None:
    x = backend.to_device(np.ones(8, np.float32))
    y = backend.to_device(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="same length"):
        backend.saxpy(A, x, y)
