"""CuPy back-end: the raw CUDA kernels of :mod:`kernels.cuda_src`, plus ``cupy.matmul``.

CuPy is imported on first use, and each source is compiled (NVRTC, cached by CuPy) the first time
one of its kernels runs. All kernels are fp32; arguments are checked before launch, because a
RawKernel reads raw pointers and silently ignores shapes, strides and dtypes.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_roofline.analysis.kernelfacts import CudaKernel

from .cuda_src import CUDA_SOURCES
from .shapes import check_1d_pair, check_gemm, check_rows, check_transpose

NAME = "cupy"
#: the device whose ceilings judge this back-end's kernels (and whose timer times them)
DEVICE = "cuda"

#: cupy.ndarray (CuPy ships no type information).
Array = Any

_THREADS = 256  # threads per block for the 1-D kernels
_TILE = 32  # transpose tile edge; must match TILE in TRANSPOSE_TILED_SRC
_TILE_ROWS = 8  # transpose block is 32 x 8 threads; must match BLOCK_ROWS
_MAX_GRID_Y = 65_535


def _cupy() -> Any:
    import cupy

    return cupy


@functools.cache
def _module(source: str) -> Any:
    return _cupy().RawModule(code=CUDA_SOURCES[source].code)


def _kernel(source: str, name: str) -> Any:
    if name not in CUDA_SOURCES[source].kernels:
        raise KeyError(f"{source!r} defines {CUDA_SOURCES[source].kernels}, not {name!r}")
    return _module(source).get_function(name)


@functools.cache
def _grid_stride_blocks_cap() -> int:
    """Enough blocks of a grid-stride loop to fill every SM several times over."""
    return int(_cupy().cuda.Device().attributes["MultiProcessorCount"]) * 16


def _blocks(n: int, per_block: int = _THREADS) -> int:
    return max(1, min(-(-n // per_block), _grid_stride_blocks_cap()))


def to_device(a: npt.ArrayLike) -> Array:
    """A copy of ``a`` in GPU memory."""
    return _cupy().array(a, copy=True)


def to_host(a: Array) -> npt.NDArray[Any]:
    """``a`` copied back to a NumPy array (waits for the GPU)."""
    return np.asarray(_cupy().asnumpy(a))


def empty(shape: tuple[int, ...], dtype: npt.DTypeLike) -> Array:
    return _cupy().empty(shape, dtype)


def synchronize() -> None:
    """Wait for every kernel queued on the current device."""
    _cupy().cuda.Device().synchronize()


# --- elementwise ---------------------------------------------------------------------------------


def saxpy(a: float, x: Array, y: Array) -> Array:
    """``y += a * x`` in place; 1-D, contiguous, 16-byte aligned fp32."""
    _check_f32(x, y, aligned=True)
    check_1d_pair(x, y)
    n = y.size
    _kernel("saxpy_vec4", "saxpy_vec4")(
        (_blocks(-(-n // 4)),), (_THREADS,), (np.float32(a), x, y, np.int64(n))
    )
    return y


def saxpy_strided(a: float, x: Array, y: Array, stride: int) -> Array:
    """``y[::stride] += a * x[::stride]`` in place; ``x`` and ``y`` are the contiguous buffers."""
    _check_f32(x, y)
    check_1d_pair(x, y)
    if not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be a positive integer; got {stride!r}")
    n = -(-y.size // stride)
    _kernel("saxpy_strided", "saxpy_strided")(
        (_blocks(n),), (_THREADS,), (np.float32(a), x, y, np.int64(n), np.int64(stride))
    )
    return y[::stride]


# --- layernorm over the last axis ----------------------------------------------------------------


def layernorm(x: Array, gamma: Array, beta: Array, out: Array, eps: float = 1e-5) -> Array:
    """Fused layernorm: one block of 256 threads per row."""
    rows, cols = _check_rows(x, gamma, beta, out)
    _kernel("layernorm_fused", "layernorm_fused")(
        (rows,), (_THREADS,), (x, gamma, beta, out, np.int32(cols), np.float32(eps))
    )
    return out


def layernorm_naive(x: Array, gamma: Array, beta: Array, out: Array, eps: float = 1e-5) -> Array:
    """Four kernels with a mean, a centred copy of ``x`` and an rstd in global memory between them."""
    rows, cols = _check_rows(x, gamma, beta, out)
    cp = _cupy()
    mean = cp.empty(rows, cp.float32)
    rstd = cp.empty(rows, cp.float32)
    centred = cp.empty_like(x)
    r, c, n = np.int32(rows), np.int32(cols), rows * cols
    per_row = (-(-rows // _THREADS),)
    _kernel("layernorm_naive", "ln_row_mean")(per_row, (_THREADS,), (x, mean, r, c))
    _kernel("layernorm_naive", "ln_center")((_blocks(n),), (_THREADS,), (x, mean, centred, r, c))
    _kernel("layernorm_naive", "ln_row_rstd")(per_row, (_THREADS,), (centred, rstd, r, c, np.float32(eps)))
    _kernel("layernorm_naive", "ln_scale")(
        (_blocks(n),), (_THREADS,), (centred, rstd, gamma, beta, out, r, c)
    )
    return out


# --- gemm ----------------------------------------------------------------------------------------


def gemm(a: Array, b: Array, out: Array) -> Array:
    """``out = a @ b`` through cuBLAS."""
    _check_f32(a, b, out)
    check_gemm(a, b, out)
    return _cupy().matmul(a, b, out=out)


def gemm_naive(a: Array, b: Array, out: Array) -> Array:
    """``out = a @ b``, one thread per output element."""
    _check_f32(a, b, out)
    check_gemm(a, b, out)
    (m, k), n = a.shape, b.shape[1]
    if -(-m // _TILE_ROWS) > _MAX_GRID_Y:
        raise ValueError(f"gemm_naive supports at most {_MAX_GRID_Y * _TILE_ROWS} rows; got {m}")
    grid = (-(-n // 32), -(-m // _TILE_ROWS))
    _kernel("gemm_naive", "gemm_naive")(
        grid, (32, _TILE_ROWS), (a, b, out, np.int32(m), np.int32(n), np.int32(k))
    )
    return out


# --- transpose -----------------------------------------------------------------------------------


def transpose(a: Array, out: Array) -> Array:
    """``out = a.T`` through a padded 32 x 33 shared-memory tile."""
    rows, cols = _check_transpose(a, out)
    if -(-rows // _TILE) > _MAX_GRID_Y:
        raise ValueError(f"transpose supports at most {_MAX_GRID_Y * _TILE} rows; got {rows}")
    grid = (-(-cols // _TILE), -(-rows // _TILE))
    _kernel("transpose_tiled", "transpose_tiled")(
        grid, (_TILE, _TILE_ROWS), (a, out, np.int32(rows), np.int32(cols))
    )
    return out


def transpose_naive(a: Array, out: Array) -> Array:
    """``out = a.T``, one thread per element, coalesced reads and scattered writes."""
    rows, cols = _check_transpose(a, out)
    if -(-rows // _TILE_ROWS) > _MAX_GRID_Y:
        raise ValueError(f"transpose_naive supports at most {_MAX_GRID_Y * _TILE_ROWS} rows; got {rows}")
    grid = (-(-cols // 32), -(-rows // _TILE_ROWS))
    _kernel("transpose_naive", "transpose_naive")(
        grid, (32, _TILE_ROWS), (a, out, np.int32(rows), np.int32(cols))
    )
    return out


# --- custom op: relu(x + bias) -------------------------------------------------------------------


def bias_relu(x: Array, bias: Array, out: Array) -> Array:
    """``out = max(x + bias, 0)``; ``cols`` must be a multiple of 4 (float4 rows)."""
    _check_f32(x, bias, out, aligned=True)
    if x.ndim != 2 or bias.shape != (x.shape[1],) or out.shape != x.shape:
        raise ValueError(
            f"need x (rows, cols), bias (cols,), out like x; got {x.shape}, {bias.shape}, {out.shape}"
        )
    rows, cols = x.shape
    if cols % 4:
        raise ValueError(f"bias_relu loads float4 rows; cols must be a multiple of 4, got {cols}")
    grid = (-(-(cols // 4) // _THREADS), max(1, min(rows, _MAX_GRID_Y)))
    _kernel("bias_relu_vec4", "bias_relu_vec4")(
        grid, (_THREADS,), (x, bias, out, np.int32(rows), np.int32(cols))
    )
    return out


# --- argument checks -----------------------------------------------------------------------------


def _check_f32(*arrays: Array, aligned: bool = False) -> None:
    for arr in arrays:
        if arr.dtype != np.float32 or not arr.flags.c_contiguous:
            raise TypeError(
                f"the CUDA kernels take C-contiguous float32 arrays; got {arr.dtype} "
                f"(contiguous: {arr.flags.c_contiguous})"
            )
        if aligned and arr.data.ptr % 16:
            raise ValueError("float4 kernels need 16-byte aligned arrays; this one starts mid-vector")


def _check_rows(x: Array, gamma: Array, beta: Array, out: Array) -> tuple[int, int]:
    _check_f32(x, gamma, beta, out)
    return check_rows(x, gamma, beta, out)


def _check_transpose(a: Array, out: Array) -> tuple[int, int]:
    _check_f32(a, out)
    return check_transpose(a, out)


# --- what pytest-roofline's static analysis reads ------------------------------------------------
# Each function names the CUDA kernels it launches and their block size, so that a miss can be
# explained from the compiler's facts (`roofline analyze`, and the plugin's diagnosis).


def _launches(fn: Any, source: str, *names: str, block: int = _THREADS) -> None:
    code = CUDA_SOURCES[source].code
    fn.roofline_kernels = tuple(CudaKernel(name, code, block=block) for name in names)


_launches(saxpy, "saxpy_vec4", "saxpy_vec4")
_launches(saxpy_strided, "saxpy_strided", "saxpy_strided")
_launches(layernorm, "layernorm_fused", "layernorm_fused")
_launches(layernorm_naive, "layernorm_naive", *CUDA_SOURCES["layernorm_naive"].kernels)
_launches(gemm_naive, "gemm_naive", "gemm_naive", block=32 * _TILE_ROWS)
_launches(transpose, "transpose_tiled", "transpose_tiled", block=_TILE * _TILE_ROWS)
_launches(transpose_naive, "transpose_naive", "transpose_naive", block=32 * _TILE_ROWS)
_launches(bias_relu, "bias_relu_vec4", "bias_relu_vec4")
