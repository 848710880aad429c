"""The built-in op catalogue: what each operation computes and moves, registered on import.

Byte counts are the *ideal* DRAM traffic: every input read once, every output written once, as a
perfectly fused kernel would. That is what makes the result a floor: a kernel that re-reads memory
pays for it in measured time, and the gap shows up as a lower attained fraction.
"""

from __future__ import annotations

import math

from .core import Cost
from .op_registry import CostFunction, OpError, Param, ParamKind, Params, register_op
from .operands import block_scales, operand_dtypes, scale_bytes, storage


def _quantized(p: Params, operand: str, size: float) -> bool:
    """Whether an operand carries block scales: B (the weights) whenever group_size is given, A
    only when it is stored sub-byte (NVFP4 and MX formats scale both operands)."""
    return bool(p.get("group_size")) and (operand == "b" or storage(p, operand, size) < 1)


def _gemm(p: Params, size: float) -> Cost:
    """C[M,N] = A[M,K] @ B[K,N], ``batch`` times.

    FLOPs 2·batch·M·N·K (one multiply and one add per term); bytes batch·(M·K·a + K·N·b + M·N·c +
    scales): A and B read once, C written once, each at its own storage size (``a_dtype``,
    ``b_dtype``, ``c_dtype``; ``dtype`` where not given: it is the math and picks the peak). With
    ``group_size`` g, B (the weights) carries one ``scale_dtype`` per g elements along K, K·N/g
    scales (A too when it is stored in 4 bits: NVFP4, MXFP4). W4A16: dtype=bf16 b_dtype=int4
    group_size=128. Assumes C is not read (beta = 0) and that a tiled kernel keeps its reuse on
    chip; the floor therefore ignores re-reads a real kernel may pay for. Complex data: each term
    is a complex multiply-add, 8 real FLOPs (the count × 4; a 3M kernel does fewer).
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
    group, k = p.get("group_size"), p.get("K", p.get("hidden"))
    if group and k is not None and k % group:
        raise OpError(f"{op}: group_size={group} does not divide K={k}; scales come one per group along K")


def _dot(p: Params, size: float) -> Cost:
    """s = x · y over n elements.

    FLOPs 2·n; bytes (2·n + 1)·size: both vectors read once, one scalar written. Complex data: 8
    real FLOPs per complex multiply-add (the count × 4).
    """
    n = p["n"]
    return Cost(flops=2 * n, bytes=(2 * n + 1) * size)


def _elementwise(p: Params, size: float) -> Cost:
    """out_j = f(in_1, ..., in_inputs) over n elements.

    FLOPs n·flops_per_element; bytes n·(inputs + outputs)·size: every input read once, every output
    written once (a fused kernel; an unfused chain pays for its temporaries). On complex data
    flops_per_element counts real FLOPs, as given (a complex multiply is 6, an add 2).
    """
    n = p["n"]
    return Cost(flops=n * p["flops_per_element"], bytes=n * (p["inputs"] + p["outputs"]) * size)


def _copy(p: Params, size: float) -> Cost:
    """dst = src over n elements.

    FLOPs 0; bytes 2·n·size (read once, written once; write-allocate traffic is not counted, as in STREAM).
    """
    return Cost(flops=0, bytes=2 * p["n"] * size)


def _transpose(p: Params, size: float) -> Cost:
    """out[cols, rows] = in[rows, cols].

    FLOPs 0; bytes 2·rows·cols·size: read once, written once (a tiled kernel keeps both coalesced).
    """
    return Cost(flops=0, bytes=2 * p["rows"] * p["cols"] * size)


def _reduction(p: Params, size: float) -> Cost:
    """A sum (or max, ...) of n elements into ``outputs`` results.

    FLOPs n (one add per element); bytes (n + outputs)·size. Complex data: a complex add is 2 real
    FLOPs (the count × 2).
    """
    n = p["n"]
    return Cost(flops=n, bytes=(n + p["outputs"]) * size)


def _softmax(p: Params, size: float) -> Cost:
    """Row-wise softmax of a rows × cols matrix.

    FLOPs 5·rows·cols (max, subtract, exp, sum, divide; exp counted as one); bytes 2·rows·cols·size:
    one pass in, one pass out (the online/fused formulation; a three-pass kernel reads three times).
    No complex form: complex numbers have no maximum.
    """
    rc = p["rows"] * p["cols"]
    return Cost(flops=5 * rc, bytes=2 * rc * size)


def _layernorm(p: Params, size: float) -> Cost:
    """Row-wise LayerNorm of a rows × cols matrix with affine gamma and beta.

    FLOPs 8·rows·cols (mean, variance, normalize, scale, shift); bytes (2·rows·cols + 2·cols)·size:
    input read once, output written once, gamma and beta read once. No complex form.
    """
    r, c = p["rows"], p["cols"]
    return Cost(flops=8 * r * c, bytes=(2 * r * c + 2 * c) * size)


def _rmsnorm(p: Params, size: float) -> Cost:
    """Row-wise RMSNorm of a rows × cols matrix with a gain vector.

    FLOPs 4·rows·cols (square, sum, scale, gain); bytes (2·rows·cols + cols)·size. No complex form.
    """
    r, c = p["rows"], p["cols"]
    return Cost(flops=4 * r * c, bytes=(2 * r * c + c) * size)


def _attention(p: Params, size: float) -> Cost:
    """Fused scaled-dot-product attention, O = softmax(Q·Kᵀ)·V, as FlashAttention and FlashInfer count it.

    Forward FLOPs 2·batch·heads·seq_q·avg_k·(head_dim + head_dim_v): Q·Kᵀ and P·V over the
    visible (query, key) pairs, softmax not counted. Without a mask avg_k = seq_k. ``causal`` is
    aligned bottom-right (the last query sees every key, as in a KV cache): avg_k = (max(0, seq_k −
    seq_q) + seq_k)/2, FlashAttention's benchmark convention (for seq_q > seq_k, where the first
    queries see nothing, the seq_k visible rows count seq_k/2 each). ``window`` w (a causal sliding
    window, Mistral's and Gemma's) caps each query at w keys along that ramp. ``pass`` (fwd unless given): bwd
    is 2.5× and fwd+bwd 3.5× the forward FLOPs.

    Bytes: Q + K + V + O, Q and O at ``heads`` and K, V at ``kv_heads`` (GQA/MQA: a decode kernel
    reads the KV cache once per KV head, not once per query head; LLM-Viewer#12 charged GQA as MHA),
    each at its dtype (``q_dtype``, ``kv_dtype``, ``o_dtype``). With a window only the last
    w + seq_q − 1 keys are read. ``shared_kv`` (MLA's latent cache: V is the first head_dim_v
    values of each cached K row) reads the cache once, kv_heads·keys·head_dim. The score matrix
    never leaves the chip (a non-fused kernel moves seq_q·seq_k more per head); a paged cache
    moves the same bytes. Backward reads Q, K, V, dO and
    writes dQ, dK, dV. Decode is seq_q=1. No complex form: its softmax needs real scores.
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


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _conv2d(p: Params, size: float) -> Cost:
    """Direct 2-D convolution, NCHW input, K filters of C×R×S, output N×K×P×Q.

    P = (H + 2·padding − R) // stride + 1 and Q likewise from W and S. FLOPs 2·N·K·P·Q·C·R·S; bytes
    (N·C·H·W + K·C·R·S + N·K·P·Q)·size: input, filters read once, output written once (an implicit
    GEMM keeps the R·S-fold reuse on chip; a naive kernel re-reads the input up to R·S times).
    Complex data: 8 real FLOPs per complex multiply-add (the count × 4).
    """
    n, c, h, w, k, r, s = (p[x] for x in ("N", "C", "H", "W", "K", "R", "S"))
    out_p = _conv_out(h, r, p["stride"], p["padding"])
    out_q = _conv_out(w, s, p["stride"], p["padding"])
    return Cost(
        flops=2 * n * k * out_p * out_q * c * r * s,
        bytes=(n * c * h * w + k * c * r * s + n * k * out_p * out_q) * size,
    )


def _fft(p: Params, size: float) -> Cost:
    """``batch`` complex-to-complex FFTs of n points each.

    FLOPs 5·batch·n·log2(n), the conventional count of a radix-2 transform in real FLOPs (the one
    FFT benchmarks quote for every n; an actual algorithm does somewhat fewer); bytes
    2·batch·n·size, size the complex item size: the input read once, the output written once. A
    multi-dimensional transform is counted with n its total number of points (the log of a product
    is the sum of the logs).
    """
    n, b = p["n"], p["batch"]
    return Cost(flops=5 * b * n * math.log2(n), bytes=2 * b * n * size)


def _custom(p: Params, size: float) -> Cost:
    """Any kernel whose work you counted yourself.

    FLOPs as given (real FLOPs on complex data); bytes as given, already in bytes (the dtype only
    picks the peak). ``unit`` says whether the kernel runs on tensor units.
    """
    return Cost(flops=p["flops"], bytes=p["bytes"])


def _check_conv2d(op: str, p: Params) -> None:
    for axis, length, kernel in (("H", p["H"], p["R"]), ("W", p["W"], p["S"])):
        if _conv_out(length, kernel, p["stride"], p["padding"]) < 1:
            raise OpError(
                f"{op}: the filter ({'R' if axis == 'H' else 'S'}={kernel}) does not fit in "
                f"{axis}={length} with padding={p['padding']}; the output would be empty"
            )


def _check_custom(op: str, p: Params) -> None:
    if not p["flops"] and not p["bytes"]:
        raise OpError(f"{op} needs flops or bytes greater than 0: with neither there is nothing to bound")


def _check_elementwise(op: str, p: Params) -> None:
    if p["inputs"] + p["outputs"] == 0:
        raise OpError(f"{op}: inputs and outputs cannot both be 0")


def _register_builtins() -> None:
    count: ParamKind = "count"
    builtin: list[tuple[str, list[Param], CostFunction, bool, str, str]] = [
        ("gemm",
         [Param("M"), Param("N"), Param("K"), Param("batch", 1), *operand_dtypes("abc"), *block_scales()],
         _gemm, True, "2·batch·M·N·K",
         "batch·(M·K·a + K·N·b + M·N·c + scales) (a, b, c: each operand's size, dtype's unless given; "
         "scales: K·N/group_size of scale_dtype)"),
        ("gemv", [Param("M"), Param("K"), *operand_dtypes("abc"), *block_scales()], _gemv, True, "2·M·K",
         "M·K·a + K·b + M·c + scales (a: the matrix, b: x, c: y; scales: M·K/group_size of scale_dtype)"),
        ("dot", [Param("n")], _dot, False, "2·n", "2·n + 1"),
        ("elementwise",
         [Param("n"), Param("inputs", 1, count), Param("outputs", 1, count),
          Param("flops_per_element", 1, "amount")],
         _elementwise, False, "n·flops_per_element", "n·(inputs + outputs)"),
        ("copy", [Param("n")], _copy, False, "0", "2·n"),
        ("transpose", [Param("rows"), Param("cols")], _transpose, False, "0", "2·rows·cols"),
        ("reduction", [Param("n"), Param("outputs", 1)], _reduction, False, "n", "n + outputs"),
        ("softmax", [Param("rows"), Param("cols")], _softmax, False, "5·rows·cols", "2·rows·cols"),
        ("layernorm", [Param("rows"), Param("cols")], _layernorm, False,
         "8·rows·cols", "2·rows·cols + 2·cols"),
        ("rmsnorm", [Param("rows"), Param("cols")], _rmsnorm, False, "4·rows·cols", "2·rows·cols + cols"),
        ("attention",
         [Param("batch"), Param("heads"), Param("seq_q"), Param("seq_k"), Param("head_dim"),
          Param("causal", False, "flag"), Param("kv_heads", None), Param("head_dim_v", None),
          Param("window", None), Param("pass", None, "choice", ("fwd", "bwd", "fwd+bwd")),
          Param("shared_kv", False, "flag"),
          *operand_dtypes(("q", "kv", "o"))],
         _attention, True,
         "2·batch·heads·seq_q·avg_k·(head_dim + head_dim_v) (avg_k = seq_k; causal: (max(0, seq_k − "
         "seq_q) + seq_k)/2, capped by window; bwd ×2.5, fwd+bwd ×3.5)",
         "batch·(heads·seq_q·(head_dim·q + head_dim_v·o) + kv_heads·keys·(head_dim + head_dim_v)·kv) "
         "(keys = seq_k, or window + seq_q − 1; shared_kv: the cache once, no head_dim_v; "
         "bwd: Q K V dO read, dQ dK dV written)"),
        ("conv2d",
         [Param("N"), Param("C"), Param("H"), Param("W"), Param("K"), Param("R"), Param("S"),
          Param("stride", 1), Param("padding", 0, count)],
         _conv2d, True, "2·N·K·P·Q·C·R·S", "N·C·H·W + K·C·R·S + N·K·P·Q"),
        ("fft", [Param("n"), Param("batch", 1)], _fft, False, "5·batch·n·log2(n)", "2·batch·n"),
        ("custom",
         [Param("flops", 0, "amount"), Param("bytes", 0, "amount"),
          Param("unit", "vector", "choice", ("vector", "tensor"))],
         _custom, False, "flops", "bytes (in bytes, not elements)"),
    ]  # fmt: skip
    cross_checks = {
        "conv2d": _check_conv2d, "custom": _check_custom, "elementwise": _check_elementwise,
        "gemm": _check_groups, "gemv": _check_groups, "attention": _check_attention,
    }  # fmt: skip
    sources = {
        "attention": "FlashAttention's benchmark (flash_attn/utils/benchmark.py, causal bottom-right from "
        "FA 2.1) and FlashInfer's (bench_batch_decode: GQA K/V at kv_heads); not vLLM's perf metrics, "
        "which count prefill attention without the causal halving",
        "gemm": "W4A16 as Marlin and GPTQ store it: int4 weights, one fp16 scale per group_size along K",
    }
    # real FLOPs per counted FLOP on complex data: multiply-adds 4, sums 2; elementwise and custom
    # count real FLOPs as given, fft's formula is already real FLOPs. Softmax, attention and the
    # norms need ordered or real values: no complex form
    complex_flops: dict[str, float | None] = {
        "gemm": 4, "gemv": 4, "dot": 4, "conv2d": 4, "reduction": 2,
        "attention": None, "softmax": None, "layernorm": None, "rmsnorm": None,
    }  # fmt: skip
    for name, params, fn, matrix, flops, nbytes in builtin:
        register_op(
            name,
            params,
            fn,
            matrix=matrix,
            flops=flops,
            bytes=nbytes,
            check=cross_checks.get(name),
            complex_flops=complex_flops.get(name, 1.0),
            real=name != "fft",
            packed=name in ("gemm", "gemv", "copy", "custom"),
            source=sources.get(name, ""),
            replace=True,
        )


_register_builtins()
