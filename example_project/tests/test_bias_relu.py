"""A custom op: ``relu(x + bias)``, with the bias row broadcast over every row of ``x``.

The catalogue's ``elementwise`` cannot count a broadcast operand that is read once, so the test
states the cost itself: 2 FLOP per element, and x read + y written + the bias row read once.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
from budgets import BIAS_RELU_SHAPE, BUDGETS

from pytest_roofline import Roofline

ROWS, COLS = BIAS_RELU_SHAPE
ITEMSIZE = np.dtype(np.float32).itemsize


def test_bias_relu(backend: ModuleType, roofline: Roofline, rng: np.random.Generator) -> None:
    x = rng.standard_normal((ROWS, COLS), dtype=np.float32)
    bias = rng.standard_normal(COLS, dtype=np.float32)
    dx, dbias = backend.to_device(x), backend.to_device(bias)
    out = backend.empty((ROWS, COLS), np.float32)

    backend.bias_relu(dx, dbias, out)
    np.testing.assert_array_equal(backend.to_host(out), np.maximum(x + bias, np.float32(0)))

    roofline(
        backend.bias_relu,
        dx,
        dbias,
        out,
        op="custom",
        flops=2 * ROWS * COLS,
        bytes=(2 * ROWS * COLS + COLS) * ITEMSIZE,
        dtype="float32",
        device=backend.DEVICE,
        min_fraction=BUDGETS["bias_relu"][backend.NAME],
        name="bias_relu",
    )
