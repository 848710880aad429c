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


def embed(table: Array, tokens: Array) -> Array:
    """The rows of ``table`` (vocab, hidden) that the token ids name: the embedding gather."""
    rows: Array = table[tokens]
    return rows


def rms_norm(x: Array, gain: Array) -> Array:
    scale = 1 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)
    return x * scale * gain


def add_rms_norm(residual: Array, delta: Array, gain: Array) -> tuple[Array, Array]:
    """The residual stream plus ``delta``, and that sum RMS-normalized: the residual add fused with
    the norm after it (add_rmsnorm). Returns (new residual, normed)."""
    residual = residual + delta
    return residual, rms_norm(residual, gain)


def project(x: Array, w: Array) -> Array:
    """``x @ w``: a linear layer, its weight stored (in_features, out_features)."""
    out: Array = x @ w
    return out


def rope_qk(qkv: Array, heads: int, kv_heads: int, position: int) -> tuple[Array, Array, Array]:
    """q, k and v of the fused QKV projection's output (tokens, (heads + 2·kv_heads)·head_dim), q
    and k rotated by the position's angles (NeoX style: each head's first half paired with its
    second): q as (tokens, kv_heads, group, head_dim), k and v as (tokens, kv_heads, head_dim)."""
    tokens, d = qkv.shape[0], qkv.shape[1] // (heads + 2 * kv_heads)
    half = d // 2
    freqs = position * ROPE_THETA ** (-np.arange(half, dtype=np.float64) / half)
    cos, sin = np.cos(freqs).astype(qkv.dtype), np.sin(freqs).astype(qkv.dtype)

    def rotate(x: Array) -> Array:
        first, second = x[..., :half], x[..., half:]
        return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)

    q = rotate(qkv[:, : heads * d].reshape(tokens, kv_heads, heads // kv_heads, d))
    k = rotate(qkv[:, heads * d : (heads + kv_heads) * d].reshape(tokens, kv_heads, d))
    return q, k, qkv[:, (heads + kv_heads) * d :].reshape(tokens, kv_heads, d)


def kv_cache_write(k_cache: Array, v_cache: Array, k: Array, v: Array, position: int) -> None:
    """This step's K and V (batch, kv_heads, head_dim) into the caches' slot ``position``."""
    k_cache[:, :, position] = k
    v_cache[:, :, position] = v


def attention(q: Array, keys: Array, values: Array) -> Array:
    """Grouped-query softmax attention of one new token per sequence over the cached keys and
    values: q (batch, kv_heads, group, head_dim), keys and values (batch, kv_heads, seq_k,
    head_dim); returns (batch, kv_heads, group, head_dim)."""
    # the scale at q's dtype: a float64 scalar would make the scores, and all after them, float64
    scores = q @ keys.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1], dtype=q.dtype)  # (b, kv, group, seq_k)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out: Array = (scores / scores.sum(axis=-1, keepdims=True)) @ values
    return out


def silu_mul(gate_up: Array) -> Array:
    """SiLU of the gate half times the up half of the fused gate/up projection (swiglu)."""
    gate, up = np.split(gate_up, 2, axis=-1)
    out: Array = gate / (1 + np.exp(-gate)) * up
    return out


def decode_step(model: Decoder, cache: Cache, tokens: Array, position: int) -> Array:
    """The logits after one new token per sequence at ``position`` (the cache holds the ones before).

    A call of each op's function in turn, nothing else but reshapes and slices (views): the
    example's per-op tests (tests/test_decoder_ops.py) time these same functions. Each residual add
    is fused with the norm after it; the first layer's norm has nothing to add.
    """
    batch, heads, kv_heads = len(tokens), model.heads, model.kv_heads
    residual = embed(model.embed, tokens)
    x = rms_norm(residual, model.layers[0].ln1)
    after_mlp = [layer.ln1 for layer in model.layers[1:]] + [model.norm]  # the norm each MLP feeds
    for layer, k_cache, v_cache, next_gain in zip(model.layers, *cache, after_mlp, strict=True):
        q, k, v = rope_qk(project(x, layer.wqkv), heads, kv_heads, position)
        kv_cache_write(k_cache, v_cache, k, v, position)
        attended = attention(q, k_cache[:, :, : position + 1], v_cache[:, :, : position + 1])
        residual, x = add_rms_norm(residual, project(attended.reshape(batch, -1), layer.wo), layer.ln2)
        mlp = project(silu_mul(project(x, layer.w_gate_up)), layer.w_down)
        residual, x = add_rms_norm(residual, mlp, next_gain)
    return project(x, model.lm_head)
