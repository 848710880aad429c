"""Transpose: pure data movement, blocked vs naive.

A class-level marker gives every test in the class the same op and shape; the budget differs by
back-end, so each fixture call passes its own.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest
from budgets import BUDGETS, TRANSPOSE_SHAPE, misses_roofline

from pytest_roofline.plugin import Roofline

ROWS, COLS = TRANSPOSE_SHAPE


@pytest.mark.speed_of_light("transpose", rows=ROWS, cols=COLS, dtype="float32")
class TestTranspose:
    @pytest.fixture
    def matrix(self, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((ROWS, COLS), dtype=np.float32)

    def run(self, backend: ModuleType, kernel: str, matrix: np.ndarray) -> tuple[Any, Any]:
        fn = getattr(backend, kernel)
        a, out = backend.to_device(matrix), backend.empty((COLS, ROWS), np.float32)
        fn(a, out)
        np.testing.assert_array_equal(backend.to_host(out), matrix.T)
        return a, out

    def test_blocked(self, backend: ModuleType, roofline: Roofline, matrix: np.ndarray) -> None:
        a, out = self.run(backend, "transpose", matrix)
        roofline(
            backend.transpose, a, out, device=backend.DEVICE, min_fraction=BUDGETS["transpose"][backend.NAME]
        )

    @misses_roofline(
        "one side walks whole columns: on the GPU each warp's 32 stores hit 32 sectors; on the CPU "
        "each row is scattered down a column, one store per cache line, so every line of out is "
        "written back and fetched again sixteen times"
    )
    def test_naive(self, backend: ModuleType, roofline: Roofline, matrix: np.ndarray) -> None:
        a, out = self.run(backend, "transpose_naive", matrix)
        roofline(
            backend.transpose_naive,
            a,
            out,
            device=backend.DEVICE,
            min_fraction=BUDGETS["transpose"][backend.NAME],
        )
