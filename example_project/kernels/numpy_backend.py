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

#: Block size of the blocked kernels: one core's L2 on the reference CPU (512 KiB), so a block and
#: its output stay in L2/L3 between the passes NumPy makes over them while DRAM sees each operand
#: once. (Smaller blocks measured no faster there: more NumPy calls.)
BLOCK_BYTES = 512 * 1024
#: Bytes of ``a`` per strip of the blocked transpose: a quarter of that L2, so a strip's strided
#: side stays cached until every float on its lines has been used.
TRANSPOSE_STRIP_BYTES = 128 * 1024


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


def _rows_per_block(row: Array, block_bytes: int = BLOCK_BYTES) -> int:
    return max(1, block_bytes // max(1, row.nbytes))


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
    # Same code on every stride-th float: each useful 4 B costs a whole 64 B cache line, and at a
    # stride of 1024 each line is on its own 4 KiB page, past the prefetchers: every access waits.
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
    """The formula as written, one row at a time, with the statistics "for accuracy" in float64."""
    # A dozen NumPy calls per row (microseconds of dispatch each, plus float64 copies) where DRAM
    # streams a 256-float row in and out in ~0.1 us: dispatch, not bandwidth, sets the pace.
    rows, _ = check_rows(x, gamma, beta, out)
    for i in range(rows):
        row = x[i].astype(np.float64)
        mean = row.mean()
        var = row.var()
        out[i] = (row - mean) / np.sqrt(var + eps) * gamma + beta
    return out


# --- gemm ----------------------------------------------------------------------------------------


def gemm(a: Array, b: Array, out: Array) -> Array:
    """``out = a @ b`` through BLAS."""
    # Compute-bound (AI = N/6 FLOP/B for square fp32): BLAS tiles for register and cache reuse.
    check_gemm(a, b, out)
    return np.matmul(a, b, out=out)


def gemm_naive(a: Array, b: Array, out: Array) -> Array:
    """``out = a @ b`` as K rank-1 updates."""
    # Two NumPy calls per k, each over all of C (8 B of cache traffic per FLOP): for a small GEMM,
    # call dispatch and the cache, not the FLOP roof, set the pace.
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
    # Data movement only: a strip's strided side stays cached until its lines are fully used.
    check_transpose(a, out)
    strip = _rows_per_block(a[0], TRANSPOSE_STRIP_BYTES)
    for r in range(0, a.shape[0], strip):
        np.copyto(out[:, r : r + strip], a[r : r + strip].T)
    return out


def transpose_naive(a: Array, out: Array) -> Array:
    """``out = a.T``, one row of ``a`` scattered into one column of ``out`` at a time."""
    # A NumPy call (~1 us of dispatch) per row, where DRAM moves an 8-float row (32 B in, 32 B out)
    # in ~3 ns; and the row's stores land one per cache line of out, a row pitch apart.
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
