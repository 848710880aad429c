"""One decode step of a small Llama-style decoder in NumPy: the kernels an inference engine runs.

Per layer: RMSNorm, the fused QKV projection, rotary embedding, the KV-cache write, grouped-query
attention over the cache, the output projection and the residual, RMSNorm, the fused gate/up
projection, SiLU-and-mul, the down projection and the residual; then the final norm and the LM
head. Weights are stored as ``x @ W`` wants them (in_features, out_features), so every projection
of a single token is one BLAS matrix-vector product that streams its weight once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
EPS = 1e-6
ROPE_THETA = 10000.0


Cache = tuple[list[Array], list[Array]]  # K and V, one array per layer


@dataclass(frozen=True)
class Layer:
    ln1: Array  # (hidden,)
    wqkv: Array  # (hidden, (heads + 2·kv_heads)·head_dim)
    wo: Array  # (heads·head_dim, hidden)
    ln2: Array  # (hidden,)
    w_gate_up: Array  # (hidden, 2·intermediate)
    w_down: Array  # (intermediate, hidden)


@dataclass(frozen=True)
class Decoder:
    embed: Array  # (vocab, hidden)
    layers: tuple[Layer, ...]
    norm: Array  # (hidden,)
    lm_head: Array  # (hidden, vocab)
    heads: int
    kv_heads: int

    @property
    def head_dim(self) -> int:
        return int(self.layers[0].wo.shape[0]) // self.heads


def random_decoder(config: dict[str, Any], rng: np.random.Generator, dtype: Any = np.float32) -> Decoder:
    """A decoder of ``config``'s shape (a Hugging Face config.json's fields) with random weights."""
    h, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    d = h // heads

    def weight(rows: int, cols: int) -> Array:
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(rows)).astype(dtype)

    def gain() -> Array:
        return (1 + 0.1 * rng.standard_normal(h, dtype=np.float32)).astype(dtype)

    def layer() -> Layer:
        qkv = weight(h, (heads + 2 * kv_heads) * d)
        return Layer(gain(), qkv, weight(heads * d, h), gain(), weight(h, 2 * inter), weight(inter, h))

    layers = tuple(layer() for _ in range(config["num_hidden_layers"]))
    return Decoder(weight(vocab, h), layers, gain(), weight(h, vocab), heads, kv_heads)


def cast(model: Decoder, dtype: Any) -> Decoder:
    """The same decoder with every weight converted to ``dtype`` (float64 for a reference)."""
    layers = tuple(Layer(*(w.astype(dtype) for w in vars(layer).values())) for layer in model.layers)
    convert = {"embed": model.embed, "norm": model.norm, "lm_head": model.lm_head}
    return replace(model, layers=layers, **{name: w.astype(dtype) for name, w in convert.items()})


def empty_cache(model: Decoder, batch: int, max_tokens: int) -> Cache:
    """K and V caches, one (batch, kv_heads, max_tokens, head_dim) array each per layer."""
    shape = (batch, model.kv_heads, max_tokens, model.head_dim)
    dtype = model.embed.dtype
    return [np.zeros(shape, dtype) for _ in model.layers], [np.zeros(shape, dtype) for _ in model.layers]


def rms_norm(x: Array, gain: Array) -> Array:
    scale = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)
    return x * scale * gain


def rope(x: Array, position: int) -> Array:
    """Rotate pairs (first half, second half) of the last axis by the position's angles (NeoX style)."""
    half = x.shape[-1] // 2
    freqs = position * ROPE_THETA ** (-np.arange(half, dtype=np.float64) / half)
    cos, sin = np.cos(freqs).astype(x.dtype), np.sin(freqs).astype(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def decode_step(model: Decoder, cache: Cache, tokens: Array, position: int) -> Array:
    """The logits after one new token per sequence at ``position`` (the cache holds the ones before)."""
    batch, heads, kv_heads, d = len(tokens), model.heads, model.kv_heads, model.head_dim
    group = heads // kv_heads
    residual = model.embed[tokens]
    for layer, k_cache, v_cache in zip(model.layers, *cache, strict=True):
        qkv = rms_norm(residual, layer.ln1) @ layer.wqkv
        q = rope(qkv[:, : heads * d].reshape(batch, kv_heads, group, d), position)
        k = rope(qkv[:, heads * d : (heads + kv_heads) * d].reshape(batch, kv_heads, d), position)
        k_cache[:, :, position] = k
        v_cache[:, :, position] = qkv[:, (heads + kv_heads) * d :].reshape(batch, kv_heads, d)
        keys, values = k_cache[:, :, : position + 1], v_cache[:, :, : position + 1]
        scores = q @ keys.transpose(0, 1, 3, 2) / np.sqrt(d)  # (batch, kv_heads, group, keys)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attended = (scores / scores.sum(axis=-1, keepdims=True)) @ values  # (batch, kv_heads, group, d)
        residual = residual + attended.reshape(batch, heads * d) @ layer.wo
        gate, up = np.split(rms_norm(residual, layer.ln2) @ layer.w_gate_up, 2, axis=-1)
        residual = residual + (gate / (1 + np.exp(-gate)) * up) @ layer.w_down
    logits: Array = rms_norm(residual, model.norm) @ model.lm_head
    return logits
