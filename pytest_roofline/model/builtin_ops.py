"""The built-in op catalogue: what each operation computes and moves, registered on import.

Byte counts are the *ideal* DRAM traffic: every input read once, every output written once, as a
perfectly fused kernel would (why: docs/floor.md ("Ops")).
"""

from __future__ import annotations

import math

from .core import Cost
from .op_registry import OpError, OpSpec, Param, Params, register_op
from .operands import block_scales, operand_dtypes, scale_bytes, storage


def _quantized(p: Params, operand: str, size: float) -> bool:
    """Whether an operand carries block scales: B (the weights) whenever group_size is given, A
    only when it is stored sub-byte (NVFP4 and MX formats scale both operands)."""
    return bool(p.get("group_size")) and (operand == "b" or storage(p, operand, size) < 1)


def _gemm(p: Params, size: float) -> Cost:
    """C[M,N] = A[M,K] @ B[K,N], ``batch`` times.

    FLOPs 2·batch·M·N·K; bytes batch·(M·K·a + K·N·b + M·N·c + scales): A and B read once, C written
    once (beta = 0), each at its own storage size (``a_dtype``, ``b_dtype``, ``c_dtype``, else
    ``dtype``'s), and with ``group_size`` g one ``scale_dtype`` per g elements along K of B (of A too
    where it is stored in 4 bits). Complex data: the count × 4. Operand dtypes and scales: docs/llm.md
    ("Per-operand dtypes").
    """
    b, m, n, k = p["batch"], p["M"], p["N"], p["K"]
    operands = (("a", m * k), ("b", k * n))
    scales = sum(scale_bytes(p, elements) for operand, elements in operands if _quantized(p, operand, size))
    moved = m * k * storage(p, "a", size) + k * n * storage(p, "b", size) + m * n * storage(p, "c", size)
    return Cost(flops=2 * b * m * n * k, bytes=b * (moved + scales))


def _gemv(p: Params, size: float) -> Cost:
    """y[M] = A[M,K] @ x[K].

    FLOPs 2·M·K; bytes M·K·a + K·b + M·c + scales: the matrix (``a_dtype``) and x (``b_dtype``)
    read once, y (``c_dtype``) written once; with ``group_size`` g the matrix carries M·K/g scales
    of ``scale_dtype``. Complex data: 8 real FLOPs per complex multiply-add (the count × 4).
    """
    m, k = p["M"], p["K"]
    scales = scale_bytes(p, m * k)
    moved = m * k * storage(p, "a", size) + k * storage(p, "b", size) + m * storage(p, "c", size)
    return Cost(flops=2 * m * k, bytes=moved + scales)


def _check_groups(op: str, p: Params) -> None:
    group, k = p["group_size"], p["K"]
    if group and k % group:
        raise OpError(f"{op}: group_size={group} does not divide K={k}; scales come one per group along K")


register_op(OpSpec(
    name="gemm",
    params=(Param("M"), Param("N"), Param("K"), Param("batch", 1), *operand_dtypes("abc"),
            *block_scales()),
    cost_fn=_gemm,
    flops_formula="2·batch·M·N·K",
    bytes_formula="batch·(M·K·a + K·N·b + M·N·c + scales) (a, b, c: each operand's size, dtype's unless "
    "given; scales: K·N/group_size of scale_dtype)",
    # complex_flops: a complex multiply-add is 8 real FLOPs, a real one 2
    matrix=True, complex_flops=4, real=True, packed=True, needs_dtype=False,
    aliases=(), cross_check=_check_groups,
    source="W4A16 as Marlin and GPTQ store it: int4 weights, one fp16 scale per group_size along K",
))  # fmt: skip


register_op(OpSpec(
    name="gemv", params=(Param("M"), Param("K"), *operand_dtypes("abc"), *block_scales()), cost_fn=_gemv,
    flops_formula="2·M·K",
    bytes_formula="M·K·a + K·b + M·c + scales (a: the matrix, b: x, c: y; scales: M·K/group_size of "
    "scale_dtype)",
    matrix=True, complex_flops=4, real=True, packed=True, needs_dtype=False,
    aliases=(), cross_check=_check_groups,
    source="",
))  # fmt: skip


def _dot(p: Params, size: float) -> Cost:
    """s = x · y over n elements.

    FLOPs 2·n; bytes (2·n + 1)·size: both vectors read once, one scalar written. Complex data: 8
    real FLOPs per complex multiply-add (the count × 4).
    """
    n = p["n"]
    return Cost(flops=2 * n, bytes=(2 * n + 1) * size)


register_op(OpSpec(
    name="dot", params=(Param("n"),), cost_fn=_dot,
    flops_formula="2·n", bytes_formula="2·n + 1",
    matrix=False, complex_flops=4, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _elementwise(p: Params, size: float) -> Cost:
    """out_j = f(in_1, ..., in_inputs) over n elements.

    FLOPs n·flops_per_element (real FLOPs on complex data, as given); bytes n·(inputs + outputs)·size:
    every input read once, every output written once.
    """
    n = p["n"]
    return Cost(flops=n * p["flops_per_element"], bytes=n * (p["inputs"] + p["outputs"]) * size)


def _check_elementwise(op: str, p: Params) -> None:
    if p["inputs"] + p["outputs"] == 0:
        raise OpError(f"{op}: inputs and outputs cannot both be 0")


register_op(OpSpec(
    name="elementwise",
    params=(Param("n"), Param("inputs", 1, "count"), Param("outputs", 1, "count"),
            Param("flops_per_element", 1, "amount")),
    cost_fn=_elementwise,
    flops_formula="n·flops_per_element", bytes_formula="n·(inputs + outputs)",
    # complex_flops 1: flops_per_element counts real FLOPs, as given
    matrix=False, complex_flops=1.0, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=_check_elementwise,
    source="",
))  # fmt: skip


def _copy(p: Params, size: float) -> Cost:
    """dst = src over n elements: FLOPs 0; bytes 2·n·size (read once, written once)."""
    return Cost(flops=0, bytes=2 * p["n"] * size)


register_op(OpSpec(
    name="copy", params=(Param("n"),), cost_fn=_copy,
    flops_formula="0", bytes_formula="2·n",
    matrix=False, complex_flops=1.0, real=True, packed=True, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _transpose(p: Params, size: float) -> Cost:
    """out[cols, rows] = in[rows, cols]: FLOPs 0; bytes 2·rows·cols·size (read once, written once)."""
    return Cost(flops=0, bytes=2 * p["rows"] * p["cols"] * size)


register_op(OpSpec(
    name="transpose", params=(Param("rows"), Param("cols")), cost_fn=_transpose,
    flops_formula="0", bytes_formula="2·rows·cols",
    matrix=False, complex_flops=1.0, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _reduction(p: Params, size: float) -> Cost:
    """A sum (or max, ...) of n elements into ``outputs`` results.

    FLOPs n (one add per element); bytes (n + outputs)·size. Complex data: a complex add is 2 real
    FLOPs (the count × 2).
    """
    n = p["n"]
    return Cost(flops=n, bytes=(n + p["outputs"]) * size)


register_op(OpSpec(
    name="reduction", params=(Param("n"), Param("outputs", 1)), cost_fn=_reduction,
    flops_formula="n", bytes_formula="n + outputs",
    # complex_flops: a complex add is 2 real FLOPs, a real one 1
    matrix=False, complex_flops=2, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _softmax(p: Params, size: float) -> Cost:
    """Row-wise softmax of a rows × cols matrix.

    FLOPs 5·rows·cols; bytes 2·rows·cols·size: one pass in, one pass out. No complex form.
    """
    rc = p["rows"] * p["cols"]
    return Cost(flops=5 * rc, bytes=2 * rc * size)


register_op(OpSpec(
    name="softmax", params=(Param("rows"), Param("cols")), cost_fn=_softmax,
    flops_formula="5·rows·cols", bytes_formula="2·rows·cols",
    # no complex form: complex numbers have no maximum
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _layernorm(p: Params, size: float) -> Cost:
    """Row-wise LayerNorm of a rows × cols matrix with affine gamma and beta.

    FLOPs 8·rows·cols; bytes (2·rows·cols + 2·cols)·size:
    input read once, output written once, gamma and beta read once. No complex form.
    """
    r, c = p["rows"], p["cols"]
    return Cost(flops=8 * r * c, bytes=(2 * r * c + 2 * c) * size)


register_op(OpSpec(
    name="layernorm", params=(Param("rows"), Param("cols")), cost_fn=_layernorm,
    flops_formula="8·rows·cols", bytes_formula="2·rows·cols + 2·cols",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _rmsnorm(p: Params, size: float) -> Cost:
    """Row-wise RMSNorm of a rows × cols matrix with a gain vector.

    FLOPs 4·rows·cols; bytes (2·rows·cols + cols)·size. No complex form.
    """
    r, c = p["rows"], p["cols"]
    return Cost(flops=4 * r * c, bytes=(2 * r * c + c) * size)


register_op(OpSpec(
    name="rmsnorm", params=(Param("rows"), Param("cols")), cost_fn=_rmsnorm,
    flops_formula="4·rows·cols", bytes_formula="2·rows·cols + cols",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _attention(p: Params, size: float) -> Cost:
    """Fused scaled-dot-product attention, O = softmax(Q·Kᵀ)·V, as FlashAttention and FlashInfer count it.

    Forward FLOPs 2·batch·heads·seq_q·avg_k·(head_dim + head_dim_v), the softmax not counted: avg_k =
    seq_k, or with ``causal`` (bottom-right) (max(0, seq_k − seq_q) + seq_k)/2, each query's keys capped
    at ``window``; ``pass`` bwd is 2.5× and fwd+bwd 3.5× that. Bytes: Q and O at ``heads``, K and V at
    ``kv_heads`` (only the last window + seq_q − 1 keys; the cache once with ``shared_kv``), each at its
    dtype, the scores kept on chip; backward reads Q, K, V, dO and writes dQ, dK, dV. No complex form (its
    softmax needs real scores). Each term, and why: docs/llm.md ("Attention as kernels count it").
    """
    b, h, sq, sk, d = p["batch"], p["heads"], p["seq_q"], p["seq_k"], p["head_dim"]
    kvh = p["kv_heads"] or h
    dv = p["head_dim_v"] or d
    pairs = sq * _avg_keys(sq, sk, p["causal"], p["window"])
    forward = 2 * b * h * pairs * (d + dv)
    keys = sk if not p["window"] else min(sk, p["window"] + sq - 1)
    q, kv, o = storage(p, "q", size), storage(p, "kv", size), storage(p, "o", size)
    q_bytes, o_bytes = b * h * sq * d * q, b * h * sq * dv * o
    kv_bytes = b * kvh * keys * (d if p["shared_kv"] else d + dv) * kv
    fwd_bytes = q_bytes + kv_bytes + o_bytes
    bwd_bytes = 2 * (q_bytes + kv_bytes) + o_bytes  # read Q K V dO, write dQ dK dV
    flops, nbytes = {
        "fwd": (forward, fwd_bytes),
        "bwd": (2.5 * forward, bwd_bytes),
        "fwd+bwd": (3.5 * forward, fwd_bytes + bwd_bytes),
    }[p["pass"] or "fwd"]
    return Cost(flops=flops, bytes=nbytes)


def _avg_keys(seq_q: int, seq_k: int, causal: bool, window: int | None) -> float:
    """Keys each query sees on average: all of them, or a causal ramp from max(0, seq_k − seq_q)
    to seq_k (FlashAttention's convention) capped at ``window``."""
    if not causal:
        return float(seq_k)
    if seq_q > seq_k:  # the first seq_q - seq_k queries see no key: seq_k rows of the ramp 0..seq_k
        return seq_k * _avg_keys(seq_k, seq_k, True, window) / seq_q
    low, high = seq_k - seq_q, seq_k
    if not window or window >= high:
        return (low + high) / 2
    if window <= low:
        return float(window)
    below = (window - low) / (high - low)  # the share of queries under the cap
    return below * (low + window) / 2 + (1 - below) * window


def _check_attention(op: str, p: Params) -> None:
    heads, kv_heads = p["heads"], p["kv_heads"]
    if kv_heads is not None and heads % kv_heads:
        raise OpError(
            f"{op}: kv_heads={kv_heads} does not divide heads={heads}; each KV head serves a whole "
            "group of query heads (GQA)"
        )
    if p["window"] is not None and not p["causal"]:
        raise OpError(f"{op}: window={p['window']} is a causal sliding window; pass causal=True with it")
    if p["shared_kv"] and (p["head_dim_v"] or p["head_dim"]) > p["head_dim"]:
        raise OpError(
            f"{op}: shared_kv reads V as the first head_dim_v values of each K row; head_dim_v="
            f"{p['head_dim_v']} is more than head_dim={p['head_dim']}"
        )


register_op(OpSpec(
    name="attention",
    params=(Param("batch"), Param("heads"), Param("seq_q"), Param("seq_k"), Param("head_dim"),
            Param("causal", False, "flag"), Param("kv_heads", None), Param("head_dim_v", None),
            Param("window", None), Param("pass", None, "choice", ("fwd", "bwd", "fwd+bwd")),
            Param("shared_kv", False, "flag"), *operand_dtypes(("q", "kv", "o"))),
    cost_fn=_attention,
    flops_formula="2·batch·heads·seq_q·avg_k·(head_dim + head_dim_v) (avg_k = seq_k; causal: (max(0, "
    "seq_k − seq_q) + seq_k)/2, capped by window; bwd ×2.5, fwd+bwd ×3.5)",
    bytes_formula="batch·(heads·seq_q·(head_dim·q + head_dim_v·o) + kv_heads·keys·(head_dim + "
    "head_dim_v)·kv) (keys = seq_k, or window + seq_q − 1; shared_kv: the cache once, no head_dim_v; "
    "bwd: Q K V dO read, dQ dK dV written)",
    # no complex form: its softmax needs real scores
    matrix=True, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=_check_attention,
    source="FlashAttention's benchmark (flash_attn/utils/benchmark.py, causal bottom-right from FA 2.1) "
    "and FlashInfer's (bench_batch_decode: GQA K/V at kv_heads); not vLLM's perf metrics, which count "
    "prefill attention without the causal halving",
))  # fmt: skip


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _conv2d(p: Params, size: float) -> Cost:
    """Direct 2-D convolution, NCHW input, K filters of C×R×S, output N×K×P×Q.

    P = (H + 2·padding − R) // stride + 1 and Q likewise from W and S. FLOPs 2·N·K·P·Q·C·R·S; bytes
    (N·C·H·W + K·C·R·S + N·K·P·Q)·size: input, filters read once, output written once. Complex
    data: the count × 4.
    """
    n, c, h, w, k, r, s = (p[x] for x in ("N", "C", "H", "W", "K", "R", "S"))
    out_p = _conv_out(h, r, p["stride"], p["padding"])
    out_q = _conv_out(w, s, p["stride"], p["padding"])
    return Cost(
        flops=2 * n * k * out_p * out_q * c * r * s,
        bytes=(n * c * h * w + k * c * r * s + n * k * out_p * out_q) * size,
    )


def _check_conv2d(op: str, p: Params) -> None:
    for axis, length, kernel in (("H", p["H"], p["R"]), ("W", p["W"], p["S"])):
        if _conv_out(length, kernel, p["stride"], p["padding"]) < 1:
            raise OpError(
                f"{op}: the filter ({'R' if axis == 'H' else 'S'}={kernel}) does not fit in "
                f"{axis}={length} with padding={p['padding']}; the output would be empty"
            )


register_op(OpSpec(
    name="conv2d",
    params=(Param("N"), Param("C"), Param("H"), Param("W"), Param("K"), Param("R"), Param("S"),
            Param("stride", 1), Param("padding", 0, "count")),
    cost_fn=_conv2d,
    flops_formula="2·N·K·P·Q·C·R·S", bytes_formula="N·C·H·W + K·C·R·S + N·K·P·Q",
    matrix=True, complex_flops=4, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=_check_conv2d,
    source="",
))  # fmt: skip


def _fft(p: Params, size: float) -> Cost:
    """``batch`` complex-to-complex FFTs of n points each: FLOPs 5·batch·n·log2(n), the conventional count
    in real FLOPs; bytes 2·batch·n·size (size: the complex item size), the input read once and the output
    written once. A multi-dimensional transform is one of n = all its points (docs/floor.md, "Ops").
    """
    n, b = p["n"], p["batch"]
    return Cost(flops=5 * b * n * math.log2(n), bytes=2 * b * n * size)


register_op(OpSpec(
    name="fft", params=(Param("n"), Param("batch", 1)), cost_fn=_fft,
    flops_formula="5·batch·n·log2(n)", bytes_formula="2·batch·n",
    # complex data only; the formula counts real FLOPs already
    matrix=False, complex_flops=1.0, real=False, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="",
))  # fmt: skip


def _custom(p: Params, size: float) -> Cost:
    """Any kernel whose work you counted yourself.

    FLOPs as given (real FLOPs on complex data); bytes as given, already in bytes (the dtype only
    picks the peak). ``unit`` says whether the kernel runs on tensor units.
    """
    return Cost(flops=p["flops"], bytes=p["bytes"])


def _check_custom(op: str, p: Params) -> None:
    if not p["flops"] and not p["bytes"]:
        raise OpError(f"{op} needs flops or bytes greater than 0: with neither there is nothing to bound")


register_op(OpSpec(
    name="custom",
    params=(Param("flops", 0, "amount"), Param("bytes", 0, "amount"),
            Param("unit", "vector", "choice", ("vector", "tensor"))),
    cost_fn=_custom,
    flops_formula="flops", bytes_formula="bytes (in bytes, not elements)",
    # its unit parameter picks the peak; complex data: real FLOPs, as given
    matrix=False, complex_flops=1.0, real=True, packed=True, needs_dtype=False,
    aliases=(), cross_check=_check_custom,
    source="",
))  # fmt: skip
