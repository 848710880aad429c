"""A Llama-style decode step written in PyTorch, bf16, layer by layer as an inference engine runs it
(no transformers): the embedding gather, then per layer a fused residual-add RMSNorm, the fused QKV
projection, rotary embedding in place, the KV-cache write, GQA attention over the cache (SDPA), the
output projection, a second fused norm, the fused gate-and-up projection, SiLU-and-mul and the down
projection; the final norm and the LM head. The norms, rotary embedding and SiLU-and-mul are this
folder's Triton kernels (``llm_kernels.py``); the GEMMs are cuBLAS's through ``F.linear``.

The functions below are the step's kernels: ``test_gpu_decoder.py`` times the whole step and each of
them alone (what ``roofline llm CONFIG --from REPORT.json`` composes into the step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_kernels import fused_add_rms_norm, rope_cache, rotary_embedding, silu_and_mul

#: where the arrays are made: a CPU check sets "cpu" (with TRITON_INTERPRET=1)
DEVICE = "cuda"


@dataclass(frozen=True)
class Shape:
    """The config.json fields the step reads."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    layers: int
    vocab: int
    eps: float
    theta: float

    @classmethod
    def of(cls, path: str | Path) -> Shape:
        c = json.loads(Path(path).read_text())
        heads = c["num_attention_heads"]
        return cls(
            hidden=c["hidden_size"],
            heads=heads,
            kv_heads=c.get("num_key_value_heads", heads),
            head_dim=c.get("head_dim") or c["hidden_size"] // heads,
            intermediate=c["intermediate_size"],
            layers=c["num_hidden_layers"],
            vocab=c["vocab_size"],
            eps=c.get("rms_norm_eps", 1e-5),
            theta=c.get("rope_theta", 10000.0),
        )


@dataclass
class Decoder:
    shape: Shape
    embed: Any
    layers: list[dict[str, Any]]
    norm: Any
    lm_head: Any
    rope: Any


def random_decoder(torch: Any, shape: Shape, max_position: int) -> Decoder:
    """Random weights of the config's shapes, scaled so that activations stay near 1."""
    h, d = shape.hidden, shape.head_dim

    def w(n: int, k: int) -> Any:
        return torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16) * k**-0.5

    def gain() -> Any:
        return 1 + 0.1 * torch.randn(h, device=DEVICE, dtype=torch.bfloat16)

    layers = [
        {
            "input_norm": gain(),
            "qkv": w((shape.heads + 2 * shape.kv_heads) * d, h),
            "o": w(h, shape.heads * d),
            "post_norm": gain(),
            "gate_up": w(2 * shape.intermediate, h),
            "down": w(h, shape.intermediate),
        }
        for _ in range(shape.layers)
    ]
    embed = torch.randn(shape.vocab, h, device=DEVICE, dtype=torch.bfloat16)
    cache = rope_cache(torch, max_position, d, shape.theta, DEVICE, torch.bfloat16)
    return Decoder(shape, embed, layers, gain(), w(shape.vocab, h), cache)


def empty_cache(torch: Any, model: Decoder, batch: int, slots: int) -> list[tuple[Any, Any]]:
    """Per layer, K and V caches of (batch, kv_heads, slots, head_dim), random (a context already there)."""
    s = model.shape
    return [
        tuple(
            torch.randn(batch, s.kv_heads, slots, s.head_dim, device=DEVICE, dtype=torch.bfloat16)
            for _ in "kv"
        )
        for _ in range(s.layers)
    ]  # type: ignore[misc]


# -- the step's kernels ---------------------------------------------------------------------------------


def project(torch: Any, x: Any, weight: Any) -> Any:
    return torch.nn.functional.linear(x, weight)


def split_qkv(shape: Shape, qkv: Any) -> tuple[Any, Any, Any]:
    """Views of one fused projection's rows: q (tokens, heads, d), k and v (tokens, kv_heads, d)."""
    t, d = qkv.shape[0], shape.head_dim
    q_end, k_end = shape.heads * d, (shape.heads + shape.kv_heads) * d
    return (
        qkv[:, :q_end].view(t, shape.heads, d),
        qkv[:, q_end:k_end].view(t, shape.kv_heads, d),
        qkv[:, k_end:].view(t, shape.kv_heads, d),
    )


def write_kv(k_cache: Any, v_cache: Any, k: Any, v: Any, position: int) -> None:
    """This step's K and V (batch, kv_heads, d) into slot ``position`` of each sequence's cache."""
    k_cache[:, :, position].copy_(k)
    v_cache[:, :, position].copy_(v)


def attend(torch: Any, q: Any, k_cache: Any, v_cache: Any, length: int) -> Any:
    """One query per sequence (batch, heads, d) over the cache's first ``length`` slots, GQA."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.unsqueeze(2), k_cache[:, :, :length], v_cache[:, :, :length], enable_gqa=True
    )
    return out.reshape(q.shape[0], -1)


def decode_step(torch: Any, model: Decoder, cache: list[tuple[Any, Any]], tokens: Any, position: int) -> Any:
    """Logits (batch, vocab) of one new token per sequence at ``position`` (the context before it
    cached); writes that token's K and V at the same slot every call, so it may be called again."""
    s = model.shape
    batch = tokens.shape[0]
    positions = torch.full((batch,), position, device=DEVICE, dtype=torch.int64)
    x = torch.nn.functional.embedding(tokens, model.embed)
    residual = torch.zeros_like(x)
    for layer, (k_cache, v_cache) in zip(model.layers, cache, strict=True):
        fused_add_rms_norm(x, residual, layer["input_norm"], s.eps)
        q, k, v = split_qkv(s, project(torch, x, layer["qkv"]))
        rotary_embedding(positions, q, k, model.rope)
        write_kv(k_cache, v_cache, k, v, position)
        x = project(torch, attend(torch, q, k_cache, v_cache, position + 1), layer["o"])
        fused_add_rms_norm(x, residual, layer["post_norm"], s.eps)
        gate_up = project(torch, x, layer["gate_up"])
        act = torch.empty(batch, s.intermediate, device=DEVICE, dtype=torch.bfloat16)
        silu_and_mul(gate_up, act)
        x = project(torch, act, layer["down"])
    fused_add_rms_norm(x, residual, model.norm, s.eps)
    return project(torch, x, model.lm_head)
