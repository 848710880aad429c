"""A whole model's step: the config parser on each family (the configs of ``tests/llm_configs.py``),
configs as Hugging Face writes them, the step's ops against hand counts, and its floor as the sum of
the ops' floors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llm_configs import (
    DEEPSEEK_V2_LITE,
    DEEPSEEK_V3,
    GEMMA2,
    GEMMA3,
    LLAMA,
    MISTRAL,
    MIXTRAL,
    QWEN2,
    QWEN2_MOE,
)

from pytest_roofline.llm_cli import floors
from pytest_roofline.model.devices import INTERCONNECTS, lookup
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.llm import LlmError, ModelConfig, load_config, parse_config, step_ops

H100 = lookup("h100-sxm")


def by_name(config: ModelConfig, **options: Any) -> dict[str, Any]:
    return {op.name: op for op in step_ops(config, options)}


# -- the parser, family by family --------------------------------------------------------------


def test_llama() -> None:
    c = parse_config(LLAMA)
    assert (c.hidden, c.heads, c.kv_heads, c.head_dim, c.layers, c.dtype) == (4096, 32, 8, 128, 32, "bf16")
    assert (c.sliding_layers, c.experts) == (0, 0)


def test_mistral_slides_every_layer() -> None:
    c = parse_config(MISTRAL)
    assert (c.sliding_layers, c.window) == (32, 4096)
    ops = by_name(c, context=8191)
    assert "attention" not in ops
    assert ops["attention (sliding)"].params["window"] == 4096
    assert ops["attention (sliding)"].count == 32


def test_qwen2_slides_only_when_use_sliding_window_says_so() -> None:
    assert parse_config(QWEN2).sliding_layers == 0
    c = parse_config({**QWEN2, "use_sliding_window": True, "max_window_layers": 21, "sliding_window": 4096})
    assert (c.sliding_layers, c.window) == (7, 4096)


def test_gemma2_alternates_and_reads_its_head_dim() -> None:
    c = parse_config(GEMMA2)
    assert (c.head_dim, c.sliding_layers, c.window, c.dtype) == (256, 13, 4096, "fp32")
    ops = by_name(c, context=100)
    assert (ops["attention"].count, ops["attention (sliding)"].count) == (13, 13)
    assert ops["qkv_proj"].params["N"] == (8 + 2 * 4) * 256


def test_gemma3_slides_five_layers_of_six() -> None:
    c = parse_config(GEMMA3)
    assert (c.sliding_layers, c.window) == (26 - 4, 512)  # layers 6, 12, 18, 24 are global


def test_gemma3_nested_text_config() -> None:
    c = parse_config({"model_type": "gemma3", "text_config": {**GEMMA3, "model_type": "gemma3"}})
    assert c.hidden == 1152


def test_mixtral_experts() -> None:
    c = parse_config(MIXTRAL)
    assert (c.experts, c.top_k, c.moe_intermediate, c.dense_layers) == (8, 2, 14336, 0)
    ops = by_name(c, batch=1)
    assert "gate_up_proj" not in ops
    assert ops["experts"].params == {
        "tokens": 1,
        "experts": 8,
        "top_k": 2,
        "hidden": 4096,
        "intermediate": 14336,
    }
    assert ops["router"].params["N"] == 8


def test_qwen2_moe_shared_expert_and_dense_layers() -> None:
    c = parse_config(QWEN2_MOE)
    assert (c.experts, c.top_k, c.dense_layers, c.shared_intermediate) == (60, 4, 2, 5632)
    ops = by_name(c)
    assert (ops["gate_up_proj"].count, ops["experts"].count) == (2, 22)
    assert ops["shared_expert.down_proj"].params["K"] == 5632


def test_deepseek_v3_multi_head_latent_attention() -> None:
    c = parse_config(DEEPSEEK_V3)
    assert c.mla == (1536, 512, 128, 64, 128)
    assert (c.head_dim, c.experts, c.top_k, c.dense_layers, c.shared_intermediate) == (192, 256, 8, 3, 2048)
    ops = by_name(c, context=4095)
    assert [n for n in ops if n not in ("embed_tokens", "norm", "lm_head")][:12] == [
        "input_layernorm", "q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm",
        "rotary_emb", "kv_cache_write", "w_uk (absorbed)", "attention (latent)", "w_uv (absorbed)", "o_proj",
    ]  # fmt: skip
    # decode over the latent cache: one shared head of 512 + 64 per token, read once; Q 128 heads of
    # 576 (the nope part absorbed into the latent space), O 128 heads of 512
    latent = ops["attention (latent)"]
    assert latent.bytes == (128 * 576 + 4096 * 576 + 128 * 512) * 2
    assert latent.flops == 2 * 128 * (4096 - 0.5) * (576 + 512)
    assert ops["kv_cache_write"].bytes == 576 * (2 + 2) + 8  # one latent row, read and written
    assert ops["w_uk (absorbed)"].params == {"M": 1, "N": 512, "K": 128, "batch": 128}
    assert (ops["gate_up_proj"].count, ops["experts"].count) == (3, 58)
    assert ops["shared_expert.down_proj"].params["K"] == 2048


def test_deepseek_prefill_up_projects_the_latents() -> None:
    ops = by_name(parse_config(DEEPSEEK_V3), phase="prefill", prompt=256, context=768, batch=2)
    assert ops["kv_b_proj"].params == {"M": 2 * 1024, "N": 128 * (128 + 128), "K": 512}
    assert ops["attention"].params == {
        "batch": 2, "heads": 128, "seq_q": 256, "seq_k": 1024, "causal": True, "head_dim": 192,
        "head_dim_v": 128,
    }  # fmt: skip


def test_deepseek_v2_lite_has_no_query_compression() -> None:
    ops = by_name(parse_config(DEEPSEEK_V2_LITE), tp=2)
    assert "q_a_proj" not in ops
    assert ops["q_proj"].params["N"] == 8 * 192
    assert ops["kv_a_proj_with_mqa"].params["N"] == 576  # replicated under tp
    assert ops["shared_expert.gate_up_proj"].params["N"] == 2 * 2 * 1408 // 2


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({**DEEPSEEK_V3, "kv_lora_rank": None}, r"missing 'kv_lora_rank' \(a deepseek_v3 config"),
        ({"model_type": "bert"}, r"model_type 'bert' is not one modelled here; known: llama, mistral"),
        ({k: v for k, v in LLAMA.items() if k != "hidden_size"}, r"missing 'hidden_size' \(a llama config"),
        ({**LLAMA, "num_hidden_layers": 0}, r"num_hidden_layers must be a positive integer; got 0$"),
        ({**LLAMA, "num_key_value_heads": 5}, r"num_key_value_heads=5 does not divide num_attention_heads"),
        ({**LLAMA, "torch_dtype": "float13"}, r"torch_dtype: unknown dtype 'float13'"),
        ({**MISTRAL, "sliding_window": "big"}, r"sliding_window must be a positive integer or null"),
        ({k: v for k, v in MIXTRAL.items() if k != "num_local_experts"}, r"missing 'num_local_experts'"),
    ],
)  # fmt: skip
def test_a_bad_config_is_one_line(config: dict[str, Any], message: str) -> None:
    with pytest.raises(LlmError, match=message):
        parse_config(config)


def test_load_config_errors(tmp_path: Path) -> None:
    with pytest.raises(LlmError, match=r"no such config file .*one of: llama-3-8b"):
        load_config(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(LlmError, match=r"bad.json: not JSON"):
        load_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(LlmError, match=r"holds an object; got list"):
        load_config(bad)


def test_a_model_directory_is_read_through_its_config_json(tmp_path: Path) -> None:
    (tmp_path / "Meta-Llama-3-8B").mkdir()
    (tmp_path / "Meta-Llama-3-8B" / "config.json").write_text(json.dumps(LLAMA))
    assert load_config(tmp_path / "Meta-Llama-3-8B").name == "Meta-Llama-3-8B"
    with pytest.raises(LlmError, match=r"no such config file"):
        load_config(tmp_path)


# -- configs as Hugging Face writes them ---------------------------------------------------------


def test_null_is_the_default_as_hugging_face_reads_it() -> None:
    # Mistral-NeMo-shaped: "head_dim": null, and a null num_key_value_heads is one per head
    c = parse_config({**MISTRAL, "head_dim": None, "num_key_value_heads": None})
    assert (c.head_dim, c.kv_heads) == (128, 32)


def test_a_head_dim_from_a_hidden_size_the_heads_do_not_divide_is_refused_saying_so() -> None:
    with pytest.raises(LlmError, match=r"no whole number: 4096 is not divisible by 24 \(give"):
        parse_config({**LLAMA, "num_attention_heads": 24, "num_key_value_heads": 8})
    assert (
        parse_config({**LLAMA, "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128}).head_dim
        == 128
    )


LLAVA_TEXT = {k: v for k, v in LLAMA.items() if k not in ("model_type", "torch_dtype")}


@pytest.mark.parametrize(
    "config",
    [
        {
            "model_type": "llava",
            "text_config": {**LLAVA_TEXT, "model_type": "llama"},
            "torch_dtype": "float16",
        },
        {"model_type": "llava", "text_config": LLAVA_TEXT, "torch_dtype": "float16"},  # llama by default
        {
            "model_type": "llava_next",
            "text_config": {**LLAVA_TEXT, "torch_dtype": None},
            "torch_dtype": "float16",
        },
    ],
    ids=["named", "defaulted", "null-dtype"],
)
def test_a_multimodal_configs_llama_text_model_is_read(config: dict[str, Any]) -> None:
    c = parse_config(config)
    assert (c.model_type, c.hidden, c.layers, c.dtype) == ("llama", 4096, 32, "fp16")


def test_a_text_config_with_no_model_type_and_no_known_default_is_refused() -> None:
    with pytest.raises(LlmError, match=r"text_config names no model_type, and a 'idefics9' config's default"):
        parse_config({"model_type": "idefics9", "text_config": LLAVA_TEXT})


QWEN2_SLIDING = {**QWEN2, "use_sliding_window": True, "sliding_window": 4096}


def test_qwen2_reads_layer_types() -> None:
    types = ["full_attention"] * 20 + ["sliding_attention"] * 8
    c = parse_config({**QWEN2_SLIDING, "layer_types": types})  # max_window_layers 28 would say none
    assert (c.sliding_layers, c.window) == (8, 4096)
    ops = by_name(c, context=8191)
    assert (ops["attention"].count, ops["attention (sliding)"].count) == (20, 8)
    # without use_sliding_window there is no window, as Hugging Face reads it
    assert parse_config({**QWEN2, "layer_types": types}).sliding_layers == 0


@pytest.mark.parametrize(
    ("types", "message"),
    [
        (["full_attention"] * 27, r"layer_types must list one type per layer, 28; got 27 entries"),
        ("full_attention", r"layer_types must list one type per layer, 28; got 'full_attention'"),
        (
            ["full_attention"] * 27 + ["linear_attention"],
            r"layer_types\[27\] is 'linear_attention': not modelled",
        ),
    ],
)
def test_a_wrong_layer_types_is_refused(types: object, message: str) -> None:
    with pytest.raises(LlmError, match=message):
        parse_config({**QWEN2_SLIDING, "layer_types": types})


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}


def test_an_awq_checkpoint_has_int4_weights_with_their_scales() -> None:
    c = parse_config({**LLAMA, "quantization_config": AWQ})
    ops = by_name(c)
    qkv = ops["qkv_proj"]
    assert (qkv.dtype, qkv.params["b_dtype"], qkv.params["group_size"], qkv.params["scale_dtype"]) == (
        "bf16",
        "int4",
        128,
        "fp16",
    )
    assert "b_dtype" not in ops["lm_head"].params  # the LM head stays at dtype
    assert by_name(c, weight_dtype="bf16")["qkv_proj"].bytes > 3.5 * qkv.bytes  # weight_dtype replaces it


def test_an_fp8_checkpoint_with_an_activation_scheme_runs_its_linear_layers_in_fp8() -> None:
    ops = by_name(parse_config({**LLAMA, "quantization_config": FP8}))
    assert (ops["gate_up_proj"].dtype, ops["gate_up_proj"].params) == (
        "fp8_e4m3",
        {"M": 1, "N": 28672, "K": 4096, "c_dtype": "bf16"},
    )
    assert (ops["lm_head"].dtype, ops["attention"].dtype) == ("bf16", "bf16")
    moe = by_name(parse_config({**MIXTRAL, "quantization_config": FP8}))["experts"]
    assert moe.dtype == "fp8_e4m3"


def test_a_quantization_config_not_read_here_needs_weight_dtype() -> None:
    c = parse_config({**LLAMA, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}})
    with pytest.raises(
        LlmError, match=r"quantization_config 'bitsandbytes' is not read here .*--weight-dtype"
    ):
        step_ops(c, {})
    assert by_name(c, weight_dtype="int4")["qkv_proj"].params["b_dtype"] == "int4"


def test_top_k_past_the_experts_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "moe.json"
    path.write_text(json.dumps({**MIXTRAL, "num_experts_per_tok": 9}))
    with pytest.raises(LlmError, match=rf"^{path}: num_experts_per_tok=9 is more than the 8 experts$"):
        load_config(path)


def test_a_byte_order_mark_is_no_error(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(LLAMA).encode())
    assert load_config(path).hidden == 4096


def test_absurd_sizes_are_refused_with_the_bound() -> None:
    with pytest.raises(LlmError, match=r"num_hidden_layers must be at most 16,777,216; got 1,000,000,"):
        parse_config({**LLAMA, "num_hidden_layers": 10**30})
    with pytest.raises(LlmError, match=r"^context must be at most 16,777,216; got 10,000,000,000$"):
        step_ops(parse_config(LLAMA), {"context": 10**10})
    with pytest.raises(LlmError, match=r"^prompt must be at most"):
        step_ops(parse_config(LLAMA), {"phase": "prefill", "prompt": 2**30})


@pytest.mark.parametrize("name", ["llama-3-8b", "mixtral-8x7b", "qwen2-7b"])
def test_the_shipped_examples_load(name: str) -> None:
    assert load_config(name).name == name


# -- the step ----------------------------------------------------------------------------------


def test_llama_3_8b_decode_reads_every_weight_once() -> None:
    ops = step_ops(load_config("llama-3-8b"), {"context": 4096})
    # per layer: qkv 4096·6144, o 4096·4096, gate_up 4096·28672, down 14336·4096; then the LM head
    weights = 32 * (4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096) + 128256 * 4096
    assert weights == 7_504_658_432
    gemm_b = sum(op.params["N"] * op.params["K"] * op.count for op in ops if op.op == "gemm")
    assert gemm_b == weights
    names = [op.name for op in ops]
    assert names == [
        "embed_tokens", "input_layernorm", "qkv_proj", "rotary_emb", "kv_cache_write", "attention", "o_proj",
        "post_attention_layernorm", "gate_up_proj", "act_fn", "down_proj", "norm", "lm_head",
    ]  # fmt: skip
    attention = next(op for op in ops if op.name == "attention")
    assert attention.params == {
        "batch": 1, "heads": 32, "kv_heads": 8, "seq_q": 1, "seq_k": 4097, "head_dim": 128, "causal": True
    }  # fmt: skip


def test_prefill_runs_the_prompt_and_the_lm_head_once_per_sequence() -> None:
    ops = by_name(load_config("llama-3-8b"), phase="prefill", batch=2, prompt=512, context=0)
    assert ops["qkv_proj"].params["M"] == 1024
    assert ops["attention"].params["seq_q"] == ops["attention"].params["seq_k"] == 512
    assert ops["lm_head"].params["M"] == 2


def test_weight_and_kv_dtypes() -> None:
    ops = by_name(load_config("llama-3-8b"), weight_dtype="int4", kv_dtype="fp8")
    assert ops["down_proj"].params == {"M": 1, "N": 4096, "K": 14336, "b_dtype": "int4", "group_size": 128,
                                       "scale_dtype": "fp16"}  # fmt: skip
    assert "b_dtype" not in ops["lm_head"].params  # quantized checkpoints keep the LM head at dtype
    assert ops["attention"].params["kv_dtype"] == "fp8_e4m3"
    assert ops["kv_cache_write"].params["kv_dtype"] == "fp8_e4m3"


def test_tensor_parallel_shards_and_all_reduces() -> None:
    ops = by_name(load_config("llama-3-8b"), tp=2, batch=4)
    assert ops["qkv_proj"].params["N"] == (16 + 2 * 4) * 128
    assert ops["down_proj"].params["K"] == 7168
    reduce = ops["all_reduce"]
    # two all-reduces per layer of 4 tokens · 4096 bf16; a ring moves 2·(2−1)/2 of them
    assert (reduce.count, reduce.link_bytes) == (64, 1.0 * 4 * 4096 * 2)
    rows = floors(list(ops.values()), H100)
    assert (
        next(r for r in rows if r.op.name == "all_reduce").floor_s
        == 4 * 4096 * 2 / INTERCONNECTS["h100-sxm"][0]
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"phase": "prefill"}, r"^prefill needs prompt"),
        ({"prompt": 8}, r"^prompt=8 is for prefill"),
        ({"tp": 3}, r"^tp=3 does not divide num_attention_heads=32$"),
        ({"tp": 64}, r"^tp=64 does not divide num_attention_heads=32$"),
        ({"batch": 0}, r"^batch must be a positive integer; got 0$"),
        ({"dtype": "fp9"}, r"^dtype: unknown dtype 'fp9'"),
        ({"weight_dtype": "int3"}, r"^weight_dtype: unknown dtype 'int3'"),
        ({"phase": "train"}, r"^phase must be one of decode, prefill; got 'train'$"),
    ],
)
def test_bad_step_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(LlmError, match=message):
        step_ops(load_config("llama-3-8b"), options)


def test_the_llm_op_floors_the_sum_of_the_ops_floors() -> None:
    config = load_config("qwen2-7b")
    ops = step_ops(config, {"phase": "prefill", "prompt": 512})
    summed = sum(r.floor_s * r.op.count for r in floors(ops, H100))
    e = estimate("llm", config="qwen2-7b", phase="prefill", prompt=512, dtype="bf16", device=H100)
    assert e.floor_s == pytest.approx(summed, rel=1e-12)
    # a prefill mixes compute-bound GEMMs and memory-bound norms: the floor of the sums is lower
    assert e.floor_s > max(e.flops / e.peak_flops, e.bytes / e.bandwidth)  # type: ignore[operator]
    assert e.bound == "compute"


def test_the_llm_op_checks_its_config(tmp_path: Path) -> None:
    from pytest_roofline.model.op_registry import OpError

    with pytest.raises(OpError, match=r"^llm: .*nope.json: no such config file"):
        estimate("llm", config=str(tmp_path / "nope.json"), dtype="bf16", device=H100)
    with pytest.raises(OpError, match=r"^llm: phase must be one of 'decode', 'prefill'; got 'train'$"):
        estimate("llm", config="llama-3-8b", phase="train", dtype="bf16", device=H100)
