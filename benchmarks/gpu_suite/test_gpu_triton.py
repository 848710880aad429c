"""Triton kernels under budgets: the tutorials' vector add and row softmax (one program per row),
both memory-bound.

No ``from __future__ import annotations`` here, and no annotations on the kernels' parameters but
``tl.constexpr``: Triton reads a kernel's annotations to specialize it, as its tutorials write them.
"""

from typing import Any

import pytest

from pytest_roofline import Roofline

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

ADD_N = 2**26  # fp32: 256 MiB per operand
ROWS, COLS = 8192, 4096  # fp32: 128 MiB in, 128 MiB out
ADD_BLOCK = 1024


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)


@triton.jit
def _softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(in_ptr + row * stride + offsets, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    numerator = tl.exp(x)
    tl.store(out_ptr + row * stride + offsets, numerator / tl.sum(numerator, axis=0), mask=mask)


def add(x: Any, y: Any, out: Any) -> None:
    _add_kernel[(triton.cdiv(out.numel(), ADD_BLOCK),)](x, y, out, out.numel(), BLOCK=ADD_BLOCK)


def softmax(x: Any, out: Any) -> None:
    rows, cols = x.shape
    _softmax_kernel[(rows,)](out, x, x.stride(0), cols, BLOCK=triton.next_power_of_2(cols), num_warps=8)


@pytest.mark.speed_of_light("elementwise", n=ADD_N, inputs=2, outputs=1, dtype="fp32", min_fraction=0.75)
def test_triton_vector_add(roofline: Roofline) -> None:
    x, y = torch.rand(ADD_N, device="cuda"), torch.rand(ADD_N, device="cuda")
    out = torch.empty_like(x)
    add(x, y, out)
    torch.testing.assert_close(out, x + y)
    roofline(add, x, y, out)


@pytest.mark.speed_of_light("softmax", rows=ROWS, cols=COLS, dtype="fp32", min_fraction=0.6)
def test_triton_softmax(roofline: Roofline) -> None:
    x = torch.randn(ROWS, COLS, device="cuda")
    out = torch.empty_like(x)
    softmax(x, out)
    torch.testing.assert_close(out, torch.softmax(x, dim=1))
    roofline(softmax, x, out)
