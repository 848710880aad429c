"""Layernorm over the last axis: one fused pass vs a pass (and a temporary) per step.

A module-level marker makes every test here a layernorm; ``rows`` and ``cols`` come from each
test's parametrize values.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import numpy.typing as npt
import pytest
from budgets import BUDGETS, LAYERNORM_NAIVE_SHAPE, LAYERNORM_SHAPE, misses_roofline

from pytest_roofline import Roofline

pytestmark = pytest.mark.speed_of_light("layernorm", dtype="float32")

EPS = 1e-5


Vector = npt.NDArray[np.float32]


def reference(x: Vector, gamma: Vector, beta: Vector) -> npt.NDArray[np.float64]:
    """Layernorm in float64."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = x64.var(axis=1, keepdims=True)
    return (x64 - mean) / np.sqrt(var + EPS) * gamma + beta


@pytest.mark.parametrize(
    ("kernel", "rows", "cols"),
    [
        pytest.param("layernorm", *LAYERNORM_SHAPE, id="fused"),
        pytest.param(
            "layernorm_naive",
            *LAYERNORM_NAIVE_SHAPE,
            id="naive",
            marks=misses_roofline(
                "one row at a time (NumPy) or one thread per row (CUDA): a dozen NumPy calls per row, "
                "or four kernels with intermediates in global memory, where the roofline counts one "
                "read of x and one write of out"
            ),
        ),
    ],
)
def test_layernorm(
    backend: ModuleType, roofline: Roofline, rng: np.random.Generator, kernel: str, rows: int, cols: int
) -> None:
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    gamma = rng.random(cols, dtype=np.float32) + 0.5
    beta = rng.standard_normal(cols, dtype=np.float32)
    fn = getattr(backend, kernel)
    args = (backend.to_device(x), backend.to_device(gamma), backend.to_device(beta))
    out = backend.empty((rows, cols), np.float32)

    fn(*args, out, EPS)
    np.testing.assert_allclose(backend.to_host(out), reference(x, gamma, beta), rtol=1e-4, atol=1e-4)

    roofline(fn, *args, out, EPS, device=backend.DEVICE, min_fraction=BUDGETS["layernorm"][backend.NAME])
