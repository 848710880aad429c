"""GEMM: the compute-bound member of the suite.

NumPy: markers with an explicit shape and no fixture, so the plugin times the test body itself;
the body therefore holds only the kernel and a check that costs next to nothing (sampled
entries); the operands come from module-scoped fixtures, made once and never timed.
CuPy: one marker, the shape from parametrize, the fixture timing just the kernel.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pytest
from budgets import (
    BUDGETS,
    CUPY_GEMM_NAIVE_SIZE,
    CUPY_GEMM_SIZE,
    GEMM_NAIVE_SIZE,
    GEMM_SIZE,
    misses_roofline,
)
from kernels import numpy_backend

from pytest_roofline import Roofline

Matrix = npt.NDArray[np.float32]


class SampledCheck:
    """Checks 16 x 16 entries of ``a @ b`` against a float64 reference: O(K) work, not O(MNK)."""

    def __init__(self, a: Matrix, b: Matrix, rng: np.random.Generator) -> None:
        self.rows = np.sort(rng.choice(a.shape[0], 16, replace=False))
        self.cols = np.sort(rng.choice(b.shape[1], 16, replace=False))
        self.expected = a[self.rows].astype(np.float64) @ b[:, self.cols].astype(np.float64)

    def __call__(self, c: Any) -> None:
        got = c[self.rows[:, None], self.cols[None, :]]
        np.testing.assert_allclose(np.asarray(got), self.expected, rtol=1e-4)


class GemmCase(NamedTuple):
    a: Matrix
    b: Matrix
    c: Matrix
    check: SampledCheck


def gemm_case(size: int, seed: int) -> GemmCase:
    rng = np.random.default_rng(seed)
    # uniform [0, 1): every product is positive, so fp32 rounding stays relative to a large sum
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    return GemmCase(a, b, np.empty((size, size), np.float32), SampledCheck(a, b, rng))


@pytest.fixture(scope="module")
def blas_case() -> GemmCase:
    return gemm_case(GEMM_SIZE, seed=1)


@pytest.fixture(scope="module")
def rank1_case() -> GemmCase:
    return gemm_case(GEMM_NAIVE_SIZE, seed=2)


@pytest.mark.speed_of_light(
    "gemm",
    M=GEMM_SIZE,
    N=GEMM_SIZE,
    K=GEMM_SIZE,
    dtype="float32",
    device="cpu",
    min_fraction=BUDGETS["gemm"]["numpy"],
)
def test_numpy_blas_gemm(blas_case: GemmCase) -> None:
    a, b, c, check = blas_case
    numpy_backend.gemm(a, b, c)
    check(c)


@misses_roofline(
    "K rank-1 updates: two NumPy calls per k, each over all of C and a C-sized temporary, so a "
    "compute-bound op runs at call-dispatch and cache speed instead of at the FLOP roof"
)
@pytest.mark.speed_of_light(
    "gemm",
    M=GEMM_NAIVE_SIZE,
    N=GEMM_NAIVE_SIZE,
    K=GEMM_NAIVE_SIZE,
    dtype="float32",
    device="cpu",
    min_fraction=BUDGETS["gemm"]["numpy"],
)
def test_numpy_rank1_gemm(rank1_case: GemmCase) -> None:
    a, b, c, check = rank1_case
    numpy_backend.gemm_naive(a, b, c)
    check(c)


@pytest.mark.speed_of_light("gemm", dtype="float32", min_fraction=BUDGETS["gemm"]["cupy"])
@pytest.mark.parametrize(
    ("kernel", "M", "N", "K"),
    [
        pytest.param("gemm", CUPY_GEMM_SIZE, CUPY_GEMM_SIZE, CUPY_GEMM_SIZE, id="cublas"),
        pytest.param(
            "gemm_naive",
            CUPY_GEMM_NAIVE_SIZE,
            CUPY_GEMM_NAIVE_SIZE,
            CUPY_GEMM_NAIVE_SIZE,
            id="naive",
            marks=misses_roofline(
                "one thread per output re-reads a row of A and a column of B for every element of C: "
                "~0.25 FLOP per byte, far below the ridge, with no shared-memory reuse"
            ),
        ),
    ],
)
def test_cupy_gemm(
    cupy_backend: ModuleType,
    roofline: Roofline,
    rng: np.random.Generator,
    kernel: str,
    M: int,
    N: int,
    K: int,
) -> None:
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    check = SampledCheck(a, b, rng)
    fn = getattr(cupy_backend, kernel)
    da, db = cupy_backend.to_device(a), cupy_backend.to_device(b)
    dc = cupy_backend.empty((M, N), np.float32)

    fn(da, db, dc)
    check(cupy_backend.to_host(dc))

    roofline(fn, da, db, dc, device=cupy_backend.DEVICE)
