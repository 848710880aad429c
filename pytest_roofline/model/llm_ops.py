"""The kernels of an LLM decoder layer beyond GEMM and attention, as vLLM names them.

Each op is registered under a plain name with the kernel names users know as aliases
(``silu_and_mul`` is ``swiglu``). Counts follow the rest of the catalogue: the ideal DRAM traffic of
a fused kernel, every input read once and every output written once; FLOPs count the arithmetic a
reader would count by hand (an exp is one). No pytest, no numpy.
"""

from __future__ import annotations

from .core import Cost
from .op_registry import OpError, OpSpec, Param, Params, register_op
from .operands import SCALE_SIZES, scale_bytes, storage

#: bytes of an index as PyTorch passes them (token ids, slot mappings, labels: int64)
INDEX_BYTES = 8
#: bytes of an fp32 scale or routing weight
FP32_BYTES = 4


def _swiglu(p: Params, size: float) -> Cost:
    """out[rows, cols] = act(x[:, :cols]) · x[:, cols:], vLLM's silu_and_mul / gelu_and_mul.

    FLOPs 5·rows·cols; bytes 3·rows·cols·size: the gate and up halves read, the product written.
    """
    rc = p["rows"] * p["cols"]
    return Cost(flops=5 * rc, bytes=3 * rc * size)


register_op(OpSpec(
    name="swiglu", params=(Param("rows"), Param("cols")), cost_fn=_swiglu,
    flops_formula="5·rows·cols", bytes_formula="3·rows·cols",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=("silu_and_mul", "gelu_and_mul"), cross_check=None,
    source="vLLM csrc/activation_kernels.cu: x[:, :d] activated times x[:, d:]",
))  # fmt: skip


def _add_rmsnorm(p: Params, size: float) -> Cost:
    """residual += x; x = rmsnorm(residual) · weight, in place: vLLM's fused_add_rms_norm.

    FLOPs 5·rows·cols (the add, then square, sum, scale, gain); bytes (4·rows·cols + cols)·size:
    x and the residual read, both written, the weight read once.
    """
    r, c = p["rows"], p["cols"]
    return Cost(flops=5 * r * c, bytes=(4 * r * c + c) * size)


register_op(OpSpec(
    name="add_rmsnorm", params=(Param("rows"), Param("cols")), cost_fn=_add_rmsnorm,
    flops_formula="5·rows·cols", bytes_formula="4·rows·cols + cols",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=("fused_add_rms_norm",), cross_check=None,
    source="vLLM csrc/layernorm_kernels.cu: x and residual read and written in place",
))  # fmt: skip


def _rope(p: Params, size: float) -> Cost:
    """Rotary embedding of q and k in place: vLLM's rotary_embedding.

    FLOPs 3·tokens·(heads + kv_heads)·rotary_dim (rotary_dim: default head_dim); bytes
    (2·tokens·(heads + kv_heads)·rotary_dim + tokens·rotary_dim)·size: q and k read and written,
    each token's cos/sin cache row read.
    """
    t, heads, rot = p["tokens"], p["heads"] + (p["kv_heads"] or p["heads"]), p["rotary_dim"] or p["head_dim"]
    return Cost(flops=3 * t * heads * rot, bytes=(2 * t * heads * rot + t * rot) * size)


register_op(OpSpec(
    name="rope",
    params=(Param("tokens"), Param("heads"), Param("head_dim"), Param("kv_heads", None),
            Param("rotary_dim", None)),
    cost_fn=_rope,
    flops_formula="3·tokens·(heads + kv_heads)·rotary_dim",
    bytes_formula="2·tokens·(heads + kv_heads)·rotary_dim + tokens·rotary_dim",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=("rotary_embedding",), cross_check=None,
    source="vLLM csrc/pos_encoding_kernels.cu: q and k in place, cos/sin cache",
))  # fmt: skip


def _moe(p: Params, size: float) -> Cost:
    """A fused MoE block, vLLM's fused_moe: each token routed to top_k experts, their MLPs run, combined.

    FLOPs 2·tokens·top_k·hidden·intermediate·(3 if gated else 2): gate and up, then down, per routed
    token. Bytes: hidden·intermediate·(3 or 2) weights per expert hit at ``w_dtype`` (with ``group_size``,
    their block scales), the tokens read and written (2·tokens·hidden·size) and the routing (top_k ids and
    fp32 weights per token). The experts hit: ``active``, else min(tokens·top_k, experts), the most any
    routing hits (docs/llm.md, "vLLM's kernel set").
    """
    t, k, h, i = p["tokens"], p["top_k"], p["hidden"], p["intermediate"]
    mats = 3 if p["gated"] else 2
    active = p["active"] or min(t * k, p["experts"])
    weights = active * h * i * mats
    nbytes = weights * storage(p, "w", size) + scale_bytes(p, weights) + 2 * t * h * size
    return Cost(flops=2 * t * k * h * i * mats, bytes=nbytes + t * k * (INDEX_BYTES + FP32_BYTES))


def _check_moe(op: str, p: Params) -> None:
    if p["top_k"] > p["experts"]:
        raise OpError(f"{op}: top_k={p['top_k']} is more than experts={p['experts']}")
    most = min(p["tokens"] * p["top_k"], p["experts"])
    if p["active"] is not None and not p["top_k"] <= p["active"] <= most:
        raise OpError(
            f"{op}: active={p['active']} experts cannot be hit by {p['tokens']} token(s) routed to "
            f"top_k={p['top_k']} of {p['experts']}"
        )
    group = p["group_size"]
    if group and p["hidden"] % group:
        raise OpError(f"{op}: group_size={group} does not divide hidden={p['hidden']}")


register_op(OpSpec(
    name="moe",
    params=(Param("tokens"), Param("experts"), Param("top_k"), Param("hidden"), Param("intermediate"),
            Param("gated", True, "flag"), Param("active", None), Param("w_dtype", None, "dtype"),
            Param("group_size", None), Param("scale_dtype", None, "choice", tuple(SCALE_SIZES))),
    cost_fn=_moe,
    flops_formula="2·tokens·top_k·hidden·intermediate·(3 gated | 2)",
    bytes_formula="active·hidden·intermediate·(3 | 2)·w + 2·tokens·hidden + 12·tokens·top_k (bytes)",
    matrix=True, complex_flops=None, real=True, packed=True, needs_dtype=False,
    aliases=("fused_moe",), cross_check=_check_moe,
    source="vLLM fused_moe (model_executor/layers/fused_moe). active = min(tokens·top_k, experts), "
    "balanced routing: the most experts any routing hits, the upper bound of the weight traffic; a "
    "skewed routing hits fewer (as few as top_k): pass active= when the test knows its routing",
))  # fmt: skip


def _kv_cache_write(p: Params, size: float) -> Cost:
    """Write this step's K and V into the paged cache: vLLM's reshape_and_cache.

    FLOPs 0; bytes 2·tokens·kv_heads·head_dim·(size + kv) + 8·tokens: k and v read at dtype, written at
    ``kv_dtype``, the slot mapping (int64) read. ``shared_kv`` (MLA's latent cache, vLLM's
    concat_and_cache_mla) writes one row per token and head, not two.
    """
    elements = (1 if p["shared_kv"] else 2) * p["tokens"] * p["kv_heads"] * p["head_dim"]
    return Cost(flops=0, bytes=elements * (size + storage(p, "kv", size)) + INDEX_BYTES * p["tokens"])


register_op(OpSpec(
    name="kv_cache_write",
    params=(Param("tokens"), Param("kv_heads"), Param("head_dim"), Param("kv_dtype", None, "dtype"),
            Param("shared_kv", False, "flag")),
    cost_fn=_kv_cache_write,
    flops_formula="0", bytes_formula="2·tokens·kv_heads·head_dim·(1 + kv) + 8·tokens (bytes)",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=("reshape_and_cache", "reshape_and_cache_flash", "concat_and_cache_mla"), cross_check=None,
    source="vLLM csrc/cache_kernels.cu: k and v scattered to their slots",
))  # fmt: skip


def _embedding(p: Params, size: float) -> Cost:
    """out[tokens, hidden] = table[ids]: a gather.

    FLOPs 0; bytes 8·tokens + (min(tokens, vocab) + tokens)·hidden·size: the ids (int64) read, each
    distinct row read once (at most vocab of them), the output written.
    """
    t, h = p["tokens"], p["hidden"]
    return Cost(flops=0, bytes=INDEX_BYTES * t + (min(t, p["vocab"]) + t) * h * size)


register_op(OpSpec(
    name="embedding", params=(Param("tokens"), Param("vocab"), Param("hidden")), cost_fn=_embedding,
    flops_formula="0", bytes_formula="(min(tokens, vocab) + tokens)·hidden + 8·tokens (bytes)",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="a gather: VocabParallelEmbedding",
))  # fmt: skip


_QUANTIZED = {"fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}


def _quantize(p: Params, size: float) -> Cost:
    """Dynamic quantization to fp8 or int8, per token (one fp32 scale per row) or per tensor.

    FLOPs 2·rows·cols; bytes rows·cols·(size + 1) + scales·4: read at dtype, the quantized values
    written (1 byte each), the scales written (rows of them per token, 1 per tensor). vLLM's
    scaled_fp8_quant and scaled_int8_quant.
    """
    rc = p["rows"] * p["cols"]
    scales = p["rows"] if p["per"] == "token" else 1
    return Cost(flops=2 * rc, bytes=rc * (size + _QUANTIZED[p["to"]]) + scales * FP32_BYTES)


register_op(OpSpec(
    name="quantize",
    params=(Param("rows"), Param("cols"), Param("to", "fp8_e4m3", "choice", tuple(_QUANTIZED)),
            Param("per", "token", "choice", ("token", "tensor"))),
    cost_fn=_quantize,
    flops_formula="2·rows·cols", bytes_formula="rows·cols·(1 + 1 byte) + 4·scales (bytes)",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=("scaled_fp8_quant", "scaled_int8_quant"), cross_check=None,
    source="vLLM csrc/quantization: dynamic per-token or per-tensor scales",
))  # fmt: skip


def _cross_entropy(p: Params, size: float) -> Cost:
    """Softmax cross-entropy of rows × vocab logits against integer labels (Liger's fused kernel).

    FLOPs 4·rows·vocab; bytes rows·vocab·size + 12·rows: the logits read once, the labels (int64)
    read, the losses (fp32) written.
    """
    r, v = p["rows"], p["vocab"]
    return Cost(flops=4 * r * v, bytes=r * v * size + r * (INDEX_BYTES + FP32_BYTES))


register_op(OpSpec(
    name="cross_entropy", params=(Param("rows"), Param("vocab")), cost_fn=_cross_entropy,
    flops_formula="4·rows·vocab", bytes_formula="rows·vocab + 12·rows (bytes)",
    matrix=False, complex_flops=None, real=True, packed=False, needs_dtype=False,
    aliases=(), cross_check=None,
    source="Liger-Kernel's fused cross-entropy: logits read once",
))  # fmt: skip
