"""The fused kernels of an LLM engine's decode step, in Triton, each one kernel as vLLM writes it (so the
catalogue's op counts its bytes: each input read once, each output written once):

- :func:`rms_norm` and :func:`fused_add_rms_norm` (vLLM ``csrc/layernorm_kernels.cu``: the fused one
  adds the residual and normalizes in place, ``x`` and ``residual`` both read and written);
- :func:`rotary_embedding` (``csrc/pos_encoding_kernels.cu``, NeoX style: q and k rotated in place,
  one cos/sin row per token from the cache);
- :func:`silu_and_mul` (``csrc/activation_kernels.cu``: ``silu(x[:, :d]) * x[:, d:]``);
- :func:`per_token_fp8_quant` (``csrc/quantization``: one fp32 scale per row, ``amax / 448``).

No ``from __future__ import annotations``, and no annotations on the kernels' parameters but
``tl.constexpr``: Triton reads a kernel's annotations to specialize it. ``TRITON_INTERPRET=1`` runs
them on the CPU (``tests`` of this folder's kernels do so where Triton and PyTorch are installed).
"""

from typing import Any

import triton
import triton.language as tl

#: the largest finite float8_e4m3fn
FP8_E4M3_MAX = 448.0


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * cols + offsets, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add_rms_norm_kernel(x_ptr, res_ptr, w_ptr, cols, eps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0).to(tl.float32)
    x += tl.load(res_ptr + row * cols + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_ptr + row * cols + offsets, x.to(res_ptr.dtype.element_ty), mask=mask)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * cols + offsets, (x * rstd * w).to(x_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rotate(
    ptr,
    token,
    stride,
    count,
    cos,
    sin,
    HEAD_DIM: tl.constexpr,  # type: ignore[no-untyped-def]
    HALF: tl.constexpr,
    HEADS_BLOCK: tl.constexpr,
):
    head = tl.arange(0, HEADS_BLOCK)[:, None]
    base = ptr + token * stride + head * HEAD_DIM + tl.arange(0, HALF)[None, :]
    mask = head < count
    x1 = tl.load(base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(base + HALF, mask=mask, other=0.0).to(tl.float32)
    tl.store(base, (x1 * cos - x2 * sin).to(ptr.dtype.element_ty), mask=mask)
    tl.store(base + HALF, (x2 * cos + x1 * sin).to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kernel(
    q_ptr,
    k_ptr,
    cache_ptr,
    pos_ptr,
    q_stride,
    k_stride,
    heads,
    kv_heads,  # type: ignore[no-untyped-def]
    HEAD_DIM: tl.constexpr,
    HALF: tl.constexpr,
    HEADS_BLOCK: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    pos = tl.load(pos_ptr + token).to(tl.int64)
    half = tl.arange(0, HALF)
    cos = tl.load(cache_ptr + pos * 2 * HALF + half).to(tl.float32)[None, :]
    sin = tl.load(cache_ptr + pos * 2 * HALF + HALF + half).to(tl.float32)[None, :]
    _rotate(q_ptr, token, q_stride, heads, cos, sin, HEAD_DIM, HALF, HEADS_BLOCK)
    _rotate(k_ptr, token, k_stride, kv_heads, cos, sin, HEAD_DIM, HALF, HEADS_BLOCK)


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < cols
    gate = tl.load(x_ptr + row * 2 * cols + offsets, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * cols + cols + offsets, mask=mask, other=0.0).to(tl.float32)
    out = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(out_ptr + row * cols + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _fp8_quant_kernel(
    x_ptr,
    out_ptr,
    scale_ptr,
    cols,
    FP8_MAX: tl.constexpr,  # type: ignore[no-untyped-def]
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=0.0).to(tl.float32)
    scale = tl.maximum(tl.max(tl.abs(x), axis=0) / FP8_MAX, 1e-12)
    tl.store(scale_ptr + row, scale)
    q = tl.clamp(x / scale, -FP8_MAX, FP8_MAX)
    tl.store(out_ptr + row * cols + offsets, q.to(out_ptr.dtype.element_ty), mask=mask)


def _warps(block: int) -> int:
    return max(1, min(16, block // 256))


def rms_norm(x: Any, weight: Any, out: Any, eps: float = 1e-5) -> None:
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _rms_norm_kernel[(rows,)](x, weight, out, cols, eps, BLOCK=block, num_warps=_warps(block))


def fused_add_rms_norm(x: Any, residual: Any, weight: Any, eps: float = 1e-5) -> None:
    """``residual += x; x = rms_norm(residual) * weight``, both in place."""
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _add_rms_norm_kernel[(rows,)](x, residual, weight, cols, eps, BLOCK=block, num_warps=_warps(block))


def rotary_embedding(positions: Any, q: Any, k: Any, cos_sin_cache: Any) -> None:
    """NeoX-style rotation of ``q`` (tokens, heads, head_dim) and ``k`` (tokens, kv_heads, head_dim) in
    place, each token's heads contiguous (views of one fused QKV projection's rows will do);
    ``cos_sin_cache`` (max_position, head_dim): each row cos then sin, head_dim / 2 of each."""
    tokens, heads, head_dim = q.shape
    kv_heads = k.shape[1]
    for t in (q, k):
        if t.stride(2) != 1 or t.stride(1) != head_dim:
            raise ValueError(f"rotary_embedding: each token's heads must be contiguous; strides {t.stride()}")
    block = triton.next_power_of_2(max(heads, kv_heads))
    _rope_kernel[(tokens,)](
        q,
        k,
        cos_sin_cache,
        positions,
        q.stride(0),
        k.stride(0),
        heads,
        kv_heads,
        HEAD_DIM=head_dim,
        HALF=head_dim // 2,
        HEADS_BLOCK=block,
        num_warps=4,
    )


def rope_cache(torch: Any, max_position: int, head_dim: int, theta: float, device: Any, dtype: Any) -> Any:
    """The cos/sin cache :func:`rotary_embedding` reads, as vLLM's ``RotaryEmbedding`` builds it (in the
    model's dtype)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim)
    angles = torch.outer(torch.arange(max_position, dtype=torch.float32, device=device), inv_freq)
    return torch.cat((angles.cos(), angles.sin()), dim=-1).to(dtype).contiguous()


def silu_and_mul(x: Any, out: Any) -> None:
    rows, cols = out.shape
    block = min(4096, triton.next_power_of_2(cols))
    _silu_and_mul_kernel[(rows, triton.cdiv(cols, block))](x, out, cols, BLOCK=block, num_warps=_warps(block))


def per_token_fp8_quant(x: Any, out: Any, scales: Any) -> None:
    """Dynamic per-token e4m3 quantization: ``scales[i] = amax(x[i]) / 448``, ``out = x / scales``."""
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _fp8_quant_kernel[(rows,)](
        x, out, scales, cols, FP8_MAX=FP8_E4M3_MAX, BLOCK=block, num_warps=_warps(block)
    )
