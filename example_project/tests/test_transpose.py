"""Transpose: pure data movement, blocked vs naive.

A class-level marker gives every test in the class the same op and dtype; each fixture call adds
its variant's shape and its back-end's budget. NumPy turns records of 8 floats into 8 columns
(an array of structures into a structure of arrays); CuPy transposes an (8192, 1024) matrix.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from budgets import BUDGETS, CUPY_TRANSPOSE_SHAPE, TRANSPOSE_NAIVE_SHAPE, TRANSPOSE_SHAPE, misses_roofline

from pytest_roofline import Roofline


@pytest.mark.speed_of_light("transpose", dtype="float32")
class TestTranspose:
    def check_and_time(
        self,
        backend: ModuleType,
        roofline: Roofline,
        rng: np.random.Generator,
        kernel: str,
        numpy_shape: tuple[int, int],
    ) -> None:
        rows, cols = CUPY_TRANSPOSE_SHAPE if backend.NAME == "cupy" else numpy_shape
        matrix = rng.standard_normal((rows, cols), dtype=np.float32)
        fn = getattr(backend, kernel)
        a, out = backend.to_device(matrix), backend.empty((cols, rows), np.float32)

        fn(a, out)
        np.testing.assert_array_equal(backend.to_host(out), matrix.T)

        roofline(
            fn,
            a,
            out,
            rows=rows,
            cols=cols,
            device=backend.DEVICE,
            min_fraction=BUDGETS["transpose"][backend.NAME],
        )

    def test_blocked(self, backend: ModuleType, roofline: Roofline, rng: np.random.Generator) -> None:
        self.check_and_time(backend, roofline, rng, "transpose", TRANSPOSE_SHAPE)

    @misses_roofline(
        "one side walks whole columns: on the GPU each warp's 32 stores hit 32 sectors; on the CPU "
        "a NumPy call per 8-float row (a microsecond of dispatch for 32 B) scatters it down a "
        "column of out, one store per cache line"
    )
    def test_naive(self, backend: ModuleType, roofline: Roofline, rng: np.random.Generator) -> None:
        self.check_and_time(backend, roofline, rng, "transpose_naive", TRANSPOSE_NAIVE_SHAPE)
