"""The decode step's kernels one by one: what ``roofline llm CONFIG --from REPORT.json`` composes.

The cases are the step's own ops, as ``roofline llm`` lists them (``step_ops``), so a new config or
batch is a new entry in ``budgets.DECODER_VARIANTS``, not new tests. Ops of one shape (the three
norms) are one kernel, measured once. Each test makes arrays of its op's shapes (weights at
random, a KV cache holding the context) and times the very function ``decode_step`` calls for it.
Fixture only, the op and its parameters given as keywords, straight from the step's op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from budgets import DECODER_CONTEXT, DECODER_OP_BUDGETS, decoder_variants
from kernels import numpy_decoder

from pytest_roofline import Roofline
from pytest_roofline.model.llm import StepOp, load_config, step_ops

HERE = Path(__file__).resolve().parents[1]
#: the longest each kernel is timed: a cold one the default 1 s, whose budget affords rotation's
#: copies (with less, a flush comes before every call instead, and the BLAS threads it leaves asleep
#: make a GEMV 20-40% slower than in the step); a warm one half that
MAX_TIME_S = {"cold": 1.0, "warm": 0.5}
#: ops timed warm, as the step runs them: their inputs are what the op before just wrote (and a
#: norm's gain; the cache write's one slot), still in the cache. The others read what a step finds
#: in DRAM (the weights, the embedding table, the KV cache) and are timed cold, as the plugin does
#: by default (docs/llm.md: where composing ops loses accuracy)
WARM_OPS = ("add_rmsnorm", "rope", "swiglu", "kv_cache_write")
#: in the step each warm op follows a projection that streamed MiBs of weights through the core's
#: caches, and takes 2-4x as long as when called back to back with itself: each call of a warm op is
#: timed after a read of this much (twice the L2 this CPU's calibration sees), untimed
STEP_PRELUDE_BYTES = 8 * 2**20

Array = numpy_decoder.Array
#: what a kernel's test times: the function and its arguments, and the shapes it must return
Case = tuple[Callable[..., Any], tuple[Any, ...], list[tuple[int, ...]]]


@dataclass(frozen=True)
class Kernel:
    """One kernel of a variant's step: its op, and every module of the step it stands for."""

    variant: str
    op: StepOp
    modules: tuple[str, ...]


def step_kernels(variant: str, config: str, batch: int) -> list[Kernel]:
    """The distinct kernels of one decode step, in the step's order."""
    options = {"phase": "decode", "batch": batch, "context": DECODER_CONTEXT, "dtype": "fp32"}
    kernels: dict[tuple[str, str, str], list[StepOp]] = {}
    for op in step_ops(load_config(HERE / config), options):
        kernels.setdefault((op.op, repr(sorted(op.params.items())), op.dtype), []).append(op)
    return [Kernel(variant, ops[0], tuple(op.name for op in ops)) for ops in kernels.values()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One case per kernel of each decoder variant the run measures (--decoder-variants)."""
    if "kernel" in metafunc.fixturenames:
        kernels = [k for variant in decoder_variants(metafunc.config) for k in step_kernels(*variant)]
        ids = [f"{k.variant}-{k.op.name}" for k in kernels]
        metafunc.parametrize("kernel", kernels, ids=ids)


def weight(rng: np.random.Generator, rows: int, cols: int) -> Array:
    return rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(np.sqrt(rows))


def embedding(p: dict[str, Any], rng: np.random.Generator) -> Case:
    tokens = rng.integers(0, p["vocab"], p["tokens"])
    return numpy_decoder.embed, (weight(rng, p["vocab"], p["hidden"]), tokens), [(p["tokens"], p["hidden"])]


def add_rmsnorm(p: dict[str, Any], rng: np.random.Generator) -> Case:
    shape = (p["rows"], p["cols"])
    residual, delta = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
    gain = 1 + 0.1 * rng.standard_normal(p["cols"], dtype=np.float32)
    return numpy_decoder.add_rms_norm, (residual, delta, gain), [shape, shape]


def gemm(p: dict[str, Any], rng: np.random.Generator) -> Case:
    x = rng.standard_normal((p["M"], p["K"]), dtype=np.float32)
    return numpy_decoder.project, (x, weight(rng, p["K"], p["N"])), [(p["M"], p["N"])]


def rope(p: dict[str, Any], rng: np.random.Generator) -> Case:
    t, heads, kv_heads, d = p["tokens"], p["heads"], p["kv_heads"], p["head_dim"]
    qkv = rng.standard_normal((t, (heads + 2 * kv_heads) * d), dtype=np.float32)
    shapes = [(t, kv_heads, heads // kv_heads, d), (t, kv_heads, d), (t, kv_heads, d)]
    return numpy_decoder.rope_qk, (qkv, heads, kv_heads, DECODER_CONTEXT), shapes


def kv_cache(batch: int, kv_heads: int, d: int, rng: np.random.Generator) -> Array:
    """A cache of the context and this step's token, the context's slots filled."""
    cache = np.zeros((batch, kv_heads, DECODER_CONTEXT + 1, d), np.float32)
    cache[:, :, :DECODER_CONTEXT] = rng.standard_normal(cache[:, :, :DECODER_CONTEXT].shape)
    return cache


def kv_cache_write(p: dict[str, Any], rng: np.random.Generator) -> Case:
    new = (p["tokens"], p["kv_heads"], p["head_dim"])
    caches = [kv_cache(*new, rng) for _ in range(2)]
    k, v = (rng.standard_normal(new, dtype=np.float32) for _ in range(2))
    return numpy_decoder.kv_cache_write, (*caches, k, v, DECODER_CONTEXT), []


def attention(p: dict[str, Any], rng: np.random.Generator) -> Case:
    assert (p["seq_q"], p["seq_k"]) == (1, DECODER_CONTEXT + 1), "a decode step's attention"
    batch, kv_heads, d = p["batch"], p["kv_heads"], p["head_dim"]
    q = rng.standard_normal((batch, kv_heads, p["heads"] // kv_heads, d), dtype=np.float32)
    keys, values = kv_cache(batch, kv_heads, d, rng), kv_cache(batch, kv_heads, d, rng)
    return numpy_decoder.attention, (q, keys, values), [q.shape]


def swiglu(p: dict[str, Any], rng: np.random.Generator) -> Case:
    gate_up = rng.standard_normal((p["rows"], 2 * p["cols"]), dtype=np.float32)
    return numpy_decoder.silu_mul, (gate_up,), [(p["rows"], p["cols"])]


#: each op of the step: the arguments of the numpy_decoder function decode_step calls for it
CASES: dict[str, Callable[[dict[str, Any], np.random.Generator], Case]] = {
    "embedding": embedding, "add_rmsnorm": add_rmsnorm, "gemm": gemm, "rope": rope,
    "kv_cache_write": kv_cache_write, "attention": attention, "swiglu": swiglu,
}  # fmt: skip


def step_prelude() -> Callable[[], None]:
    """What the step does before a warm op, as its setup: a read of STEP_PRELUDE_BYTES."""
    streamed = np.ones(STEP_PRELUDE_BYTES // 8)

    def read() -> None:
        streamed.max()

    return read


def returned(out: object) -> list[tuple[tuple[int, ...], np.dtype[Any]]]:
    """The shape and dtype of each array a kernel returned (none, one, or a tuple of them)."""
    arrays = out if isinstance(out, tuple) else () if out is None else (out,)
    return [(a.shape, a.dtype) for a in arrays]


def test_decoder_op(kernel: Kernel, roofline: Roofline, rng: np.random.Generator) -> None:
    op = kernel.op
    if op.op not in CASES:
        pytest.fail(f"{op.name}: numpy_decoder has no kernel for op {op.op!r}: add one, and its case here")
    fn, args, shapes = CASES[op.op](op.params, rng)
    assert returned(fn(*args)) == [(shape, np.dtype(np.float32)) for shape in shapes]  # fp32 throughout

    cache = "warm" if op.op in WARM_OPS else "cold"
    roofline(fn, *args, op=op.op, dtype=op.dtype, **op.params, device="cpu", max_time=MAX_TIME_S[cache],
             cache=cache,
             name="+".join(kernel.modules) if len(kernel.modules) > 1 else None,
             setup=step_prelude() if cache == "warm" else None,
             min_fraction=DECODER_OP_BUDGETS[op.op])  # fmt: skip
