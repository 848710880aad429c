"""Shape checks shared by both back-ends: any array with ``ndim`` and ``shape`` (NumPy or CuPy)."""

from __future__ import annotations

from typing import Any


def check_1d_pair(x: Any, y: Any) -> None:
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-D of the same length; got {x.shape} and {y.shape}")


def check_stride(stride: int) -> None:
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be a positive integer; got {stride!r}")


def check_rows(x: Any, gamma: Any, beta: Any, out: Any) -> tuple[int, int]:
    """(rows, cols) of a layernorm's x, with gamma and beta one row long and out shaped like x."""
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D (rows, cols); got shape {x.shape}")
    rows, cols = x.shape
    if gamma.shape != (cols,) or beta.shape != (cols,) or out.shape != x.shape:
        raise ValueError(
            f"gamma and beta must be ({cols},) and out {x.shape}; "
            f"got {gamma.shape}, {beta.shape} and {out.shape}"
        )
    return int(rows), int(cols)


def check_gemm(a: Any, b: Any, out: Any) -> None:
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or out.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"shapes do not chain: a {a.shape} @ b {b.shape} -> out {out.shape}")


def check_transpose(a: Any, out: Any) -> tuple[int, int]:
    """(rows, cols) of ``a``, with ``out`` shaped like its transpose."""
    if a.ndim != 2 or out.shape != a.shape[::-1]:
        raise ValueError(f"out must have shape {a.shape[::-1]}; got {out.shape}")
    rows, cols = a.shape
    return int(rows), int(cols)
