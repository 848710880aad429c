"""NumPy back-end: runs everywhere, one CPU thread (BLAS may use more for ``gemm``).

NumPy cannot fuse, so the good variants get their speed from *blocking*: the passes NumPy must
make run over a block small enough to stay in the core's L2, so DRAM sees each operand once.
Every kernel takes its output array and returns it (``saxpy`` updates ``y`` in place).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .shapes import check_1d_pair, check_gemm, check_rows, check_stride, check_transpose

NAME = "numpy"
#: the device whose ceilings judge this back-end's kernels (and whose timer times them)
DEVICE = "cpu"

Array = npt.NDArray[Any]

#: Block size of the blocked kernels: a quarter of this machine's 2 MiB L2 per core, so a block,
#: its output and any temporary stay in L2 between the passes NumPy makes over them.
BLOCK_BYTES = 512 * 1024
#: Rows per strip of the blocked transpose (a strip's strided side stays in L1/L2).
TRANSPOSE_STRIP = 128


def to_device(a: npt.ArrayLike) -> Array:
    """A fresh copy of ``a`` in this back-end's memory."""
    return np.array(a, copy=True)


def to_host(a: Array) -> Array:
    """``a`` as a NumPy array."""
    return np.asarray(a)


def empty(shape: tuple[int, ...], dtype: npt.DTypeLike) -> Array:
    return np.empty(shape, dtype)


def synchronize() -> None:
    """NumPy calls are synchronous."""


def _rows_per_block(row: Array) -> int:
    return max(1, BLOCK_BYTES // max(1, row.nbytes))


# --- elementwise ---------------------------------------------------------------------------------


def saxpy(a: float, x: Array, y: Array) -> Array:
    """``y += a * x`` in place (1-D, any strides)."""
    # Memory-bound (2 FLOP / 12 B): chunks keep a*x in L2, so DRAM sees 3 streams (x, y, y), not 5.
    check_1d_pair(x, y)
    scale = y.dtype.type(a)
    chunk = max(1, BLOCK_BYTES // y.itemsize)
    buf = np.empty(min(chunk, y.size), y.dtype)
    for start in range(0, y.size, chunk):
        xs, ys = x[start : start + chunk], y[start : start + chunk]
        tmp = buf[: ys.size]
        np.multiply(xs, scale, out=tmp)
        np.add(ys, tmp, out=ys)
    return y


def saxpy_strided(a: float, x: Array, y: Array, stride: int) -> Array:
    """``y[::stride] += a * x[::stride]`` in place; returns the updated view of ``y``."""
    # Same code on every stride-th float: each 64 B cache line fetched carries 4 useful bytes.
    check_stride(stride)
    return saxpy(a, x[::stride], y[::stride])


# --- layernorm over the last axis ----------------------------------------------------------------


def layernorm(x: Array, gamma: Array, beta: Array, out: Array, eps: float = 1e-5) -> Array:
    """``out = (x - mean) / sqrt(var + eps) * gamma + beta`` per row."""
    # Memory-bound (~1 FLOP/B): six passes over an L2-sized block of rows; DRAM sees x once, out once.
    rows, cols = check_rows(x, gamma, beta, out)
    ones = np.ones(cols, x.dtype)
    step = _rows_per_block(x[0])
    for r in range(0, rows, step):
        xb, ob = x[r : r + step], out[r : r + step]
        mean = xb @ ones
        mean *= 1.0 / cols
        np.subtract(xb, mean[:, None], out=ob)
        var = np.einsum("ij,ij->i", ob, ob)
        var *= 1.0 / cols
        var += eps
        rstd = np.reciprocal(np.sqrt(var, out=var), out=var)
        ob *= rstd[:, None]
        ob *= gamma
        ob += beta
    return out


def layernorm_naive(x: Array, gamma: Array, beta: Array, out: Array, eps: float = 1e-5) -> Array:
    """The textbook version: statistics "for accuracy" in float64, a full-size temporary per step."""
    # Every step streams a full float64 temporary (2x the bytes of x) through DRAM: ~20 x-sized
    # passes where the roofline counts one read of x and one write of out.
    check_rows(x, gamma, beta, out)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    np.copyto(out, (x64 - mean) / np.sqrt(var + eps) * gamma + beta, casting="same_kind")
    return out


# --- gemm ----------------------------------------------------------------------------------------


def gemm(a: Array, b: Array, out: Array) -> Array:
    """``out = a @ b`` through BLAS."""
    # Compute-bound (AI = N/6 FLOP/B for square fp32): BLAS tiles for register and cache reuse.
    check_gemm(a, b, out)
    return np.matmul(a, b, out=out)


def gemm_naive(a: Array, b: Array, out: Array) -> Array:
    """``out = a @ b`` as K rank-1 updates."""
    # C and a C-sized temporary cross the cache K times (8 B per FLOP): far below the FLOP roof.
    check_gemm(a, b, out)
    out.fill(0)
    tmp = np.empty_like(out)
    for k in range(a.shape[1]):
        np.outer(a[:, k], b[k], out=tmp)
        out += tmp
    return out


# --- transpose -----------------------------------------------------------------------------------


def transpose(a: Array, out: Array) -> Array:
    """``out = a.T``, one strip of rows at a time."""
    # Data movement only: a 128-row strip's strided side stays cached until its lines are fully used.
    check_transpose(a, out)
    for r in range(0, a.shape[0], TRANSPOSE_STRIP):
        np.copyto(out[:, r : r + TRANSPOSE_STRIP], a[r : r + TRANSPOSE_STRIP].T)
    return out


def transpose_naive(a: Array, out: Array) -> Array:
    """``out = a.T``, one row of ``a`` scattered into one column of ``out`` at a time."""
    # Each row's stores land one per cache line of out, a row pitch apart: every line is written
    # back half-used and fetched again for the next row (and a NumPy call per row on top).
    check_transpose(a, out)
    for i in range(a.shape[0]):
        out[:, i] = a[i]
    return out


# --- custom op: relu(x + bias) -------------------------------------------------------------------


def bias_relu(x: Array, bias: Array, out: Array) -> Array:
    """``out = max(x + bias, 0)``, ``bias`` broadcast over the rows of ``x``."""
    # Memory-bound: both passes run over an L2-sized block; DRAM sees x, out and the bias row once.
    rows, cols = x.shape
    if bias.shape != (cols,) or out.shape != x.shape:
        raise ValueError(f"bias must be ({cols},) and out {x.shape}; got {bias.shape} and {out.shape}")
    step = _rows_per_block(x[0])
    for r in range(0, rows, step):
        ob = out[r : r + step]
        np.add(x[r : r + step], bias, out=ob)
        np.maximum(ob, 0, out=ob)
    return out


# --- argument checks -----------------------------------------------------------------------------
