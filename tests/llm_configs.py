"""Hugging Face configs of each family, written here as their ``config.json`` files hold them, for the
tests of the config parser, ``roofline llm`` and ``op="llm"``."""

from __future__ import annotations

from typing import Any

LLAMA: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16",
}  # fmt: skip
MISTRAL = {**LLAMA, "model_type": "mistral", "vocab_size": 32000, "sliding_window": 4096}
QWEN2 = {
    "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "sliding_window": 131072,
    "use_sliding_window": False, "max_window_layers": 28, "torch_dtype": "bfloat16",
}  # fmt: skip
GEMMA2 = {
    "model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 256000,
    "sliding_window": 4096, "torch_dtype": "float32",
}  # fmt: skip
GEMMA3 = {
    "model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
    "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
}  # fmt: skip
MIXTRAL = {
    **LLAMA,
    "model_type": "mixtral",
    "vocab_size": 32000,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
}
QWEN2_MOE = {
    "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936, "num_experts": 60,
    "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
    "decoder_sparse_step": 1, "mlp_only_layers": [0, 1], "torch_dtype": "bfloat16",
}  # fmt: skip

DEEPSEEK_V3 = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256,
    "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 129280, "torch_dtype": "bfloat16",
}  # fmt: skip
DEEPSEEK_V2_LITE = {
    **DEEPSEEK_V3, "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
    "moe_intermediate_size": 1408, "num_hidden_layers": 27, "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
    "q_lora_rank": None, "vocab_size": 102400,
}  # fmt: skip
