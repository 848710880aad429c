"""A whole model's step, op by op: a Hugging Face ``config.json`` turned into the catalogue's ops, the
kernels an inference engine such as vLLM runs for one decode or prefill step, whose floor is the sum
of theirs. Which kernels, which families and fields, and why the sum: docs/llm.md ("A whole model").
Pure arithmetic: no pytest, no numpy, no network (only the file the user names).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import RooflineUsageError
from . import builtin_ops, llm_ops  # noqa: F401  (registered on import: the ops a step is made of)
from .core import parse_dtype
from .llm_quantization import Quantization, read_quantization
from .op_registry import get_op
from .unit_choice import select_unit

#: model types read as a dense decoder with a gated MLP
DENSE = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text")
#: model types with routed experts
MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3")
#: model types with multi-head latent attention
MLA = ("deepseek_v2", "deepseek_v3")
#: the public configs shipped as examples, by the name ``roofline llm NAME`` takes
EXAMPLES = ("llama-3-8b", "mixtral-8x7b", "qwen2-7b")
PHASES = ("decode", "prefill")
#: block scales a sub-byte weight format carries: (group_size, scale_dtype), as GPTQ/AWQ (int4,
#: fp16 per 128) and NVFP4 (fp4, fp8 per 16) store them
WEIGHT_GROUPS = {"int4": (128, "fp16"), "fp4": (16, "fp8_e4m3")}
#: the text model of a multimodal config whose text_config names none, as Hugging Face defaults it
TEXT_MODELS = {"llava": "llama", "llava_next": "llama", "vipllava": "llama", "gemma3": "gemma3_text"}
#: the largest size a config or a step may give (layers, widths, vocabulary, context, batch): past
#: every published model's by far, and small enough that a step's sums stay exact in a float
MAX_LLM_SIZE = 2**24
#: what a layer_types entry may say, and what each means here
LAYER_TYPES = ("full_attention", "sliding_attention")


class LlmError(RooflineUsageError, ValueError):
    """A config that cannot be read or modelled, or step options that do not fit: one line."""


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """What a step's cost needs from a config.json."""

    name: str
    model_type: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype: str
    #: layers with a sliding window, and its size (0: none)
    sliding_layers: int = 0
    window: int = 0
    experts: int = 0
    top_k: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0
    #: layers with a plain MLP in a MoE model (qwen2_moe's mlp_only_layers, decoder_sparse_step)
    dense_layers: int = 0
    #: multi-head latent attention: q_lora_rank (0: no query compression), kv_lora_rank,
    #: qk_nope_head_dim, qk_rope_head_dim, v_head_dim
    mla: tuple[int, int, int, int, int] | None = None
    #: the checkpoint's quantization_config, read; or why it could not be (then a step needs
    #: weight_dtype to say what the weights are)
    quantization: Quantization | None = None
    unread_quantization: str = ""


#: the step's kernels as they are listed: (name, op, parameters, count)
Ops = list[tuple[str, str, dict[str, Any], int]]


@dataclass(frozen=True, slots=True)
class StepOp:
    """One kernel of the step: the module it stands for, the catalogue op and its parameters."""

    name: str
    op: str
    params: dict[str, Any]
    dtype: str
    count: int
    flops: float
    bytes: float
    unit: str
    #: bytes over the interconnect (an all-reduce), timed at the link's bandwidth, not DRAM's
    link_bytes: float = 0.0


def config_path(source: str | Path) -> Path:
    """The file a config's path (or its model directory) names; ``source`` itself where it names
    none (a shipped example's name, or nothing)."""
    path = Path(source).expanduser()
    if path.is_dir() and (path / "config.json").is_file():  # a downloaded model's directory
        path = path / "config.json"
    return path


def config_key(source: str | Path) -> str:
    """What tells two spellings of one config apart from another config: the file's resolved path,
    or a shipped example's name (given as its name or as the path of its file)."""
    path = config_path(source)
    if not path.exists() and str(source) in EXAMPLES:
        return str(source)
    resolved = path.resolve()
    shipped = Path(str(resources.files("pytest_roofline").joinpath("configs"))).resolve()
    return resolved.stem if resolved.parent == shipped and resolved.stem in EXAMPLES else str(resolved)


def load_config(source: str | Path) -> ModelConfig:
    """A config.json's path (or its model directory), or the name of a shipped example
    (``llama-3-8b``), as a ModelConfig."""
    path = config_path(source)
    text: str
    if not path.exists() and str(source) in EXAMPLES:
        text = resources.files("pytest_roofline").joinpath(f"configs/{source}.json").read_text("utf-8")
        name = str(source)
    else:
        if not path.is_file():
            known = ", ".join(EXAMPLES)
            raise LlmError(f"{source}: no such config file (a Hugging Face config.json, or one of: {known})")
        try:
            text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (some editors write one)
        except (OSError, UnicodeDecodeError) as exc:
            raise LlmError(f"{source}: cannot read it: {exc}") from None
        # a model's folder names it ("config.json" alone, in the folder: the folder's resolved name)
        name = path.resolve().parent.name if path.name == "config.json" else path.stem
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LlmError(f"{source}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LlmError(f"{source}: a config.json holds an object; got {type(data).__name__}")
    return parse_config(data, name=name, where=str(source))


def locate_config(source: str, folders: Sequence[tuple[str, Path]]) -> str:
    """A relative config path as its caller means it: in the first of ``folders`` (each with what it
    is, for the message) that holds it. An absolute path, or a shipped example's name found in
    none, is kept as it is; anything else is an LlmError saying where it looked."""
    path = Path(source).expanduser()
    if path.is_absolute():
        return str(path)
    for _, folder in folders:
        if (folder / path).exists():
            return str(folder / path)
    if source in EXAMPLES:
        return source
    looked = " and ".join(f"{what} {folder}" for what, folder in folders)
    raise LlmError(
        f"{source}: no such config file; looked in {looked} (a Hugging Face config.json, or one of:"
        f" {', '.join(EXAMPLES)})"
    )


def parse_config(data: dict[str, Any], *, name: str = "model", where: str = "config") -> ModelConfig:
    """The fields a step needs, from a Hugging Face config dict, each checked as docs/llm.md ("What is
    read from a config.json") says (a null field is absent; a multimodal config's is its text_config's)."""
    data = _text_model(data, where)
    model_type = data.get("model_type")
    if model_type not in DENSE + MOE:
        known = ", ".join(DENSE + MOE)
        raise LlmError(f"{where}: model_type {model_type!r} is not one modelled here; known: {known}")

    def number(key: str, default: int | None = None) -> int:
        value = data.get(key)
        value = default if value is None else value
        if value is None:
            raise LlmError(f"{where}: missing {key!r} (a {model_type} config has it)")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LlmError(f"{where}: {key} must be a positive integer; got {value!r}")
        if value > MAX_LLM_SIZE:
            raise LlmError(f"{where}: {key} must be at most {MAX_LLM_SIZE:,}; got {value:,}")
        return value

    hidden, heads = number("hidden_size"), number("num_attention_heads")
    kv_heads = number("num_key_value_heads", heads)
    if heads % kv_heads:
        raise LlmError(f"{where}: num_key_value_heads={kv_heads} does not divide num_attention_heads={heads}")
    layers = number("num_hidden_layers")
    if model_type in MLA:
        head_dim = 0  # from the MLA dimensions below
    elif data.get("head_dim") is None and hidden % heads:
        raise LlmError(
            f"{where}: no head_dim, and hidden_size / num_attention_heads is no whole number: {hidden}"
            f" is not divisible by {heads} (give head_dim)"
        )
    else:
        head_dim = number("head_dim", hidden // heads)
    dtype = data.get("torch_dtype") or data.get("dtype") or "bf16"
    sliding, window = _sliding(data, model_type, layers, where)
    moe: dict[str, int] = {}
    if model_type == "mixtral":
        moe = {"experts": number("num_local_experts"), "top_k": number("num_experts_per_tok"),
               "moe_intermediate": number("intermediate_size")}  # fmt: skip
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        step = number("decoder_sparse_step", 1)
        only = set(data.get("mlp_only_layers") or [])
        sparse = sum(1 for i in range(layers) if i not in only and (i + 1) % step == 0)
        moe = {"experts": number("num_experts"), "top_k": number("num_experts_per_tok"),
               "moe_intermediate": number("moe_intermediate_size"), "dense_layers": layers - sparse,
               "shared_intermediate": int(data.get("shared_expert_intermediate_size") or 0)}  # fmt: skip
    elif model_type in MLA:
        dense = int(data.get("first_k_dense_replace") or 0)
        shared = int(data.get("n_shared_experts") or 0) * number("moe_intermediate_size")
        moe = {"experts": number("n_routed_experts"), "top_k": number("num_experts_per_tok"),
               "moe_intermediate": number("moe_intermediate_size"), "dense_layers": min(dense, layers),
               "shared_intermediate": shared}  # fmt: skip
    mla = None
    if model_type in MLA:
        q_lora = data.get("q_lora_rank")
        dims = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        kv_lora, nope, rope_dim, v_dim = (number(key) for key in dims)
        mla = (0 if q_lora is None else number("q_lora_rank"), kv_lora, nope, rope_dim, v_dim)
        head_dim = mla[2] + mla[3]
    if moe and moe["top_k"] > moe["experts"]:
        raise LlmError(
            f"{where}: num_experts_per_tok={moe['top_k']} is more than the {moe['experts']} experts"
        )
    intermediate = number("intermediate_size") if model_type not in MOE or moe.get("dense_layers") else 0
    dtype = _dtype(dtype, f"{where}: torch_dtype")
    quantization, unread = read_quantization(data.get("quantization_config"), where)
    return ModelConfig(
        name=name, model_type=model_type, hidden=hidden, intermediate=intermediate, layers=layers,
        heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=number("vocab_size"), dtype=dtype,
        sliding_layers=sliding, window=window, mla=mla, quantization=quantization,
        unread_quantization=unread, **moe,
    )  # fmt: skip


def _text_model(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A multimodal config's text model: its ``text_config`` over the outer config's fields, its
    model_type defaulted as Hugging Face defaults it (:data:`TEXT_MODELS`)."""
    inner = data.get("text_config")
    if inner is None:
        return data
    if not isinstance(inner, dict):
        raise LlmError(f"{where}: text_config must be an object; got {inner!r}")
    outer = {k: v for k, v in data.items() if k != "text_config"}
    if inner.get("model_type") is None:
        default = TEXT_MODELS.get(str(outer.get("model_type")))
        if default is None:
            raise LlmError(
                f"{where}: text_config names no model_type, and a {outer.get('model_type')!r} config's"
                " default text model is not known here: give text_config a model_type"
            )
        inner = {**inner, "model_type": default}
    return {**outer, **{k: v for k, v in inner.items() if v is not None or k not in outer}}


def _sliding(data: dict[str, Any], model_type: str, layers: int, where: str) -> tuple[int, int]:
    """(layers with a sliding window, its size), family by family as docs/llm.md ("What is read from a
    config.json") says."""
    kinds = _layer_types(data.get("layer_types"), layers, where)
    window = data.get("sliding_window")
    if window is None or window is False:
        return 0, 0
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise LlmError(f"{where}: sliding_window must be a positive integer or null; got {window!r}")
    if model_type.startswith("qwen") and not data.get("use_sliding_window"):
        return 0, 0
    if kinds is not None:
        return kinds.count("sliding_attention"), window
    if model_type.startswith("qwen"):
        return max(0, layers - int(data.get("max_window_layers", layers))), window
    if model_type == "gemma2":
        return (layers + 1) // 2, window
    if model_type.startswith("gemma3"):
        pattern = int(data.get("sliding_window_pattern", 6))
        return sum(1 for i in range(layers) if (i + 1) % pattern), window
    return layers, window


def _layer_types(kinds: object, layers: int, where: str) -> list[str] | None:
    """The config's ``layer_types``, one per layer, each one of :data:`LAYER_TYPES` (None: not given)."""
    if kinds is None:
        return None
    if not isinstance(kinds, list) or len(kinds) != layers:
        size = f"{len(kinds)} entries" if isinstance(kinds, list) else repr(kinds)
        raise LlmError(f"{where}: layer_types must list one type per layer, {layers}; got {size}")
    for index, kind in enumerate(kinds):
        if kind not in LAYER_TYPES:
            raise LlmError(
                f"{where}: layer_types[{index}] is {kind!r}: not modelled here"
                f" (only {', '.join(LAYER_TYPES)})"
            )
    return kinds


def step_ops(config: ModelConfig, options: dict[str, Any]) -> list[StepOp]:
    """The kernels of one step, each with its count per step (layers, or 1).

    ``options``: phase, batch, context, prompt, dtype (activations, and the math), weight_dtype,
    kv_dtype, tp (per-GPU shards: heads, KV heads, the MLP's intermediate and the vocabulary split
    tp ways, KV heads replicated below one per GPU, and two all-reduces of the activations per layer).
    """
    phase = options.get("phase") or "decode"
    if phase not in PHASES:
        raise LlmError(f"phase must be one of {', '.join(PHASES)}; got {phase!r}")
    batch, tp = _positive(options, "batch", 1), _positive(options, "tp", 1)
    context = _positive(options, "context", 0)
    prompt = _positive(options, "prompt", 1) if options.get("prompt") is not None else None
    if phase == "prefill" and not prompt:
        raise LlmError("prefill needs prompt (the new tokens of each sequence)")
    if phase == "decode" and prompt:
        raise LlmError(f"prompt={prompt} is for prefill; a decode step adds one token per sequence")
    dtype = _dtype(options.get("dtype") or config.dtype, "dtype")
    weights, quant = step_weights(config, options)
    kv = _dtype(options.get("kv_dtype") or dtype, "kv_dtype")
    if config.heads % tp:
        raise LlmError(f"tp={tp} does not divide num_attention_heads={config.heads}")
    heads, kv_heads = config.heads // tp, max(1, config.kv_heads // tp)
    if config.kv_heads % tp and tp % config.kv_heads:
        raise LlmError(f"tp={tp} neither divides nor is a multiple of num_key_value_heads={config.kv_heads}")
    seq_q = 1 if phase == "decode" else int(prompt)  # type: ignore[arg-type]  # checked above
    tokens, seq_k = batch * seq_q, context + seq_q
    h = config.hidden
    w: dict[str, Any] = {"b_dtype": weights} if weights != dtype else {}
    if quant is not None and quant.group_size:
        w["group_size"], w["scale_dtype"] = quant.group_size, quant.scale_dtype
    elif quant is None and weights in WEIGHT_GROUPS:
        w["group_size"], w["scale_dtype"] = WEIGHT_GROUPS[weights]
    #: W8A8: the quantized layers' math (and their activations) in the weights' dtype, output at dtype
    w8a8 = quant is not None and quant.activations and weights != dtype
    if w8a8:
        w = {"c_dtype": dtype}
    math_of: dict[str, str] = {}  # a kernel whose math is not the step's dtype
    ops: Ops = []
    layers = config.layers

    def gemm(name: str, n: int, k: int, count: int, m: int = tokens, quantized: bool = True) -> None:
        params = dict(M=m, N=n, K=k, **(w if quantized else {}))
        if "group_size" in params and k % params["group_size"]:
            params["group_size"] = math.gcd(k, params["group_size"])
        if quantized and w8a8:
            math_of[name] = weights
        ops.append((name, "gemm", params, count))

    ops.append(("embed_tokens", "embedding", {"tokens": tokens, "vocab": config.vocab, "hidden": h}, 1))
    ops.append(("input_layernorm", "add_rmsnorm", {"rows": tokens, "cols": h}, layers))
    kv_params = {"kv_dtype": kv} if kv != dtype else {}
    if config.mla is not None:
        _mla(config.mla, config, ops, gemm, kv_params, batch, tokens, seq_q, seq_k, tp)
    else:
        _attention_block(config, ops, gemm, kv_params, batch, tokens, seq_q, seq_k, heads, kv_heads)
    ops.append(("post_attention_layernorm", "add_rmsnorm", {"rows": tokens, "cols": h}, layers))
    dense = layers if not config.experts else config.dense_layers
    if dense:
        inter = _shard(config.intermediate, tp, "intermediate_size")
        gemm("gate_up_proj", 2 * inter, h, dense)
        ops.append(("act_fn", "swiglu", {"rows": tokens, "cols": inter}, dense))
        gemm("down_proj", h, inter, dense)
    sparse = layers - dense
    if sparse:
        gemm("router", config.experts, h, sparse, quantized=False)
        moe: dict[str, Any] = {
            "tokens": tokens, "experts": config.experts, "top_k": config.top_k, "hidden": h,
            "intermediate": _shard(config.moe_intermediate, tp, "moe intermediate size"),
        }  # fmt: skip
        if w8a8:
            math_of["experts"] = weights
        elif weights != dtype:
            moe["w_dtype"] = weights
            if "group_size" in w:
                moe["group_size"], moe["scale_dtype"] = w["group_size"], w["scale_dtype"]
        ops.append(("experts", "moe", moe, sparse))
        if config.shared_intermediate:
            shared = _shard(config.shared_intermediate, tp, "shared_expert_intermediate_size")
            gemm("shared_expert.gate_up_proj", 2 * shared, h, sparse)
            ops.append(("shared_expert.act_fn", "swiglu", {"rows": tokens, "cols": shared}, sparse))
            gemm("shared_expert.down_proj", h, shared, sparse)
    ops.append(("norm", "add_rmsnorm", {"rows": tokens, "cols": h}, 1))
    # logits of each sequence's last token; quantized checkpoints keep the LM head (and the router) at dtype
    gemm("lm_head", -(-config.vocab // tp), h, 1, m=batch, quantized=False)
    result = [_step_op(name, op, params, math_of.get(name, dtype), count) for name, op, params, count in ops]
    if tp > 1:  # a ring all-reduce moves 2·(tp−1)/tp of the activations over each GPU's link
        moved = 2 * (tp - 1) / tp * tokens * h * parse_dtype(dtype).itemsize
        params = {"tp": tp, "elements": tokens * h}
        result.append(
            StepOp("all_reduce", "all_reduce", params, dtype, 2 * layers, 0.0, 0.0, "vector", moved)
        )
    return result


def _attention_block(
    config: ModelConfig, ops: Ops, gemm: Any, kv_params: dict[str, Any], batch: int, tokens: int,
    seq_q: int, seq_k: int, heads: int, kv_heads: int,
) -> None:  # fmt: skip
    """QKV projection, rotary embedding, KV-cache write, attention (full and sliding layers), o_proj."""
    h, d, layers = config.hidden, config.head_dim, config.layers
    gemm("qkv_proj", (heads + 2 * kv_heads) * d, h, layers)
    ops.append(("rotary_emb", "rope",
                {"tokens": tokens, "heads": heads, "kv_heads": kv_heads, "head_dim": d}, layers))  # fmt: skip
    ops.append(("kv_cache_write", "kv_cache_write",
                {"tokens": tokens, "kv_heads": kv_heads, "head_dim": d, **kv_params}, layers))  # fmt: skip
    attention = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "seq_q": seq_q, "seq_k": seq_k,
                 "head_dim": d, "causal": True, **kv_params}  # fmt: skip
    full = layers - config.sliding_layers
    if full:
        ops.append(("attention", "attention", attention, full))
    if config.sliding_layers:
        sliding = dict(attention, window=config.window)
        ops.append(("attention (sliding)", "attention", sliding, config.sliding_layers))
    gemm("o_proj", h, heads * d, layers)


def _mla(
    mla: tuple[int, int, int, int, int], config: ModelConfig, ops: Ops, gemm: Any,
    kv_params: dict[str, Any], batch: int, tokens: int, seq_q: int, seq_k: int, tp: int,
) -> None:  # fmt: skip
    """Multi-head latent attention as vLLM runs it: decode absorbed over the latent cache, prefill
    up-projected (docs/llm.md ("Multi-head latent attention"))."""
    q_lora, kv_lora, nope, rope_dim, v_dim = mla
    h, n, heads = config.hidden, config.layers, config.heads // tp
    if q_lora:
        gemm("q_a_proj", q_lora, h, n)
        ops.append(("q_a_layernorm", "rmsnorm", {"rows": tokens, "cols": q_lora}, n))
        gemm("q_b_proj", heads * (nope + rope_dim), q_lora, n)
    else:
        gemm("q_proj", heads * (nope + rope_dim), h, n)
    gemm("kv_a_proj_with_mqa", kv_lora + rope_dim, h, n)
    ops.append(("kv_a_layernorm", "rmsnorm", {"rows": tokens, "cols": kv_lora}, n))
    rope = {"tokens": tokens, "heads": heads, "kv_heads": 1, "head_dim": rope_dim}
    ops.append(("rotary_emb", "rope", rope, n))
    latent = {"tokens": tokens, "kv_heads": 1, "head_dim": kv_lora + rope_dim, "shared_kv": True}
    ops.append(("kv_cache_write", "kv_cache_write", {**latent, **kv_params}, n))
    causal = {"batch": batch, "heads": heads, "seq_q": seq_q, "seq_k": seq_k, "causal": True}
    if seq_q == 1:  # decode: absorbed, over the latent cache
        ops.append(("w_uk (absorbed)", "gemm", {"M": tokens, "N": kv_lora, "K": nope, "batch": heads}, n))
        ops.append(("attention (latent)", "attention",
                    {**causal, "kv_heads": 1, "head_dim": kv_lora + rope_dim, "head_dim_v": kv_lora,
                     "shared_kv": True, **kv_params}, n))  # fmt: skip
        ops.append(("w_uv (absorbed)", "gemm", {"M": tokens, "N": v_dim, "K": kv_lora, "batch": heads}, n))
    else:  # prefill: every key's latent up-projected to K (nope) and V
        gemm("kv_b_proj", heads * (nope + v_dim), kv_lora, n, m=batch * seq_k)
        up = {**causal, "head_dim": nope + rope_dim, "head_dim_v": v_dim}
        ops.append(("attention", "attention", up, n))
    gemm("o_proj", h, heads * v_dim, n)


def _step_op(name: str, op: str, params: dict[str, Any], dtype: str, count: int) -> StepOp:
    spec = get_op(op)
    checked = spec.check(params)
    precision = parse_dtype(dtype)
    cost = spec.cost(checked, precision)
    _, unit = select_unit(spec, checked, precision, None)
    return StepOp(name, spec.name, params, dtype, count, cost.flops, cost.bytes, str(unit))


def step_weights(config: ModelConfig, options: dict[str, Any]) -> tuple[str, Quantization | None]:
    """The weights' dtype, and the config's quantization behind it: ``weight_dtype`` when given
    (it replaces the config's quantization), else the quantization_config's, else the step's dtype.
    A quantization_config that could not be read needs ``weight_dtype``: an LlmError says so."""
    given = options.get("weight_dtype")
    if given:
        return _dtype(given, "weight_dtype"), None
    if config.unread_quantization:
        raise LlmError(
            f"{config.unread_quantization}: give the weights' storage with --weight-dtype (weight_dtype="
            " for op='llm'), such as int4 or fp8, rather than have them counted as the dtype"
        )
    quant = config.quantization
    dtype = _dtype(options.get("dtype") or config.dtype, "dtype")
    return (quant.weight_dtype if quant is not None else dtype), quant


def _positive(options: dict[str, Any], key: str, default: int) -> int:
    value = options.get(key, default)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "context" else 1):
        kind = "a non-negative" if key == "context" else "a positive"
        raise LlmError(f"{key} must be {kind} integer; got {value!r}")
    if value > MAX_LLM_SIZE:
        raise LlmError(f"{key} must be at most {MAX_LLM_SIZE:,}; got {value:,}")
    return value


def _shard(size: int, tp: int, what: str) -> int:
    if size % tp:
        raise LlmError(f"tp={tp} does not divide {what}={size}")
    return size // tp


def _dtype(value: object, what: str) -> str:
    try:
        return parse_dtype(value).label
    except ValueError as exc:
        raise LlmError(f"{what}: {exc}") from None
