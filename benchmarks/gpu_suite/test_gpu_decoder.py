"""A Llama-3-8B-shaped decode step on the GPU (``torch_decoder.py``; 2 of its 32 layers, bf16, a cache
of ``CONTEXT`` tokens), batch 1 and 16: the whole step under ``op="llm"`` with the config, eager and
replayed as a CUDA graph (as vLLM runs decode), and each of its kernels alone under its catalogue op,
the cases ``roofline llm CONFIG --from REPORT.json`` composes into the step.

The step is timed through a closure (no arrays as arguments), so it is flushed before every call, the
weights in DRAM; the per-op cases time the very functions the step calls, cold where the step reads
DRAM (weights, the embedding table, the KV cache), warm where it reads what the kernel before wrote
(norms, rotary embedding, SiLU-and-mul, the cache write), as the example project's CPU decoder does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_roofline import Roofline
from pytest_roofline.model.llm import StepOp, load_config, step_ops

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
import torch_decoder as td  # noqa: E402  # Triton's kernels: after the skip where it is missing

CONFIG = Path(__file__).with_name("llama-3-8b-2-layers.json")
CONTEXT = 2048
BATCHES = (1, 16)
MAX_TIME_S = 0.5
WARM_OPS = ("add_rmsnorm", "rope", "swiglu", "kv_cache_write")


def kernels(batch: int) -> list[tuple[StepOp, tuple[str, ...]]]:
    """The distinct kernels of one step (one case per op and shape), each with the modules it stands for."""
    options = {"phase": "decode", "batch": batch, "context": CONTEXT, "dtype": "bf16"}
    found: dict[tuple[str, str], list[StepOp]] = {}
    for op in step_ops(load_config(CONFIG), options):
        found.setdefault((op.op, repr(sorted(op.params.items()))), []).append(op)
    return [(ops[0], tuple(op.name for op in ops)) for ops in found.values()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel" in metafunc.fixturenames:
        cases = [
            pytest.param(batch, op, names, id=f"b{batch}-{op.name}")
            for batch in BATCHES
            for op, names in kernels(batch)
        ]
        # not "batch": a test parameter named as an op's fills it (a GEMM's batch would count 16 GEMMs)
        metafunc.parametrize(("sequences", "kernel", "modules"), cases)


@pytest.fixture(scope="module")
def shape() -> td.Shape:
    return td.Shape.of(CONFIG)


@pytest.fixture(scope="module")
def model(shape: td.Shape) -> td.Decoder:
    torch.manual_seed(0)
    return td.random_decoder(torch, shape, CONTEXT + 1)


@pytest.mark.parametrize("batch", BATCHES, ids=lambda b: f"b{b}")
@pytest.mark.parametrize("mode", ["eager", "graph"])
@pytest.mark.speed_of_light("llm", config=str(CONFIG), phase="decode", context=CONTEXT, dtype="bf16")
def test_decode_step(roofline: Roofline, model: td.Decoder, batch: int, mode: str) -> None:
    cache = td.empty_cache(torch, model, batch, CONTEXT + 1)
    tokens = torch.randint(0, model.shape.vocab, (batch,), device="cuda")
    logits = td.decode_step(torch, model, cache, tokens, CONTEXT)
    assert logits.shape == (batch, model.shape.vocab)
    assert bool(torch.isfinite(logits).all())

    def eager() -> Any:
        return td.decode_step(torch, model, cache, tokens, CONTEXT)

    step = eager
    if mode == "graph":  # captured after warm-up on a side stream, as torch.cuda.graphs says
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            eager()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            replayed = eager()
        graph.replay()
        torch.testing.assert_close(replayed, eager(), rtol=0, atol=0)
        step = graph.replay
    roofline(
        step, batch=batch, max_time=2 * MAX_TIME_S, name=f"decode_step-b{batch}-{mode}", min_fraction=0.5
    )


def _case(shape: td.Shape, model: td.Decoder, op: StepOp, batch: int) -> tuple[Any, tuple[Any, ...]]:
    """The function the step calls for ``op`` and arrays of its shapes (the first layer's weights)."""
    layer = model.layers[0]
    bf16 = torch.bfloat16

    def rand(*dims: int) -> Any:
        return torch.randn(*dims, device="cuda", dtype=bf16)

    if op.op == "embedding":
        return torch.nn.functional.embedding, (
            torch.randint(0, shape.vocab, (batch,), device="cuda"),
            model.embed,
        )
    if op.op == "add_rmsnorm":
        return td.fused_add_rms_norm, (
            rand(batch, shape.hidden),
            rand(batch, shape.hidden),
            model.norm,
            shape.eps,
        )
    if op.op == "gemm":
        weights = {
            "qkv_proj": layer["qkv"],
            "o_proj": layer["o"],
            "gate_up_proj": layer["gate_up"],
            "down_proj": layer["down"],
            "lm_head": model.lm_head,
        }
        weight = weights[op.name]
        return (lambda x, w: td.project(torch, x, w)), (rand(batch, weight.shape[1]), weight)
    if op.op == "rope":
        q, k, _ = td.split_qkv(shape, rand(batch, (shape.heads + 2 * shape.kv_heads) * shape.head_dim))
        positions = torch.full((batch,), CONTEXT, device="cuda", dtype=torch.int64)
        return td.rotary_embedding, (positions, q, k, model.rope)
    cache = td.empty_cache(torch, model, batch, CONTEXT + 1)[0]
    if op.op == "kv_cache_write":
        return td.write_kv, (
            *cache,
            rand(batch, shape.kv_heads, shape.head_dim),
            rand(batch, shape.kv_heads, shape.head_dim),
            CONTEXT,
        )
    if op.op == "attention":
        q = rand(batch, shape.heads, shape.head_dim)
        return (lambda q, k, v: td.attend(torch, q, k, v, CONTEXT + 1)), (q, *cache)
    if op.op == "swiglu":
        return td.silu_and_mul, (rand(batch, 2 * shape.intermediate), rand(batch, shape.intermediate))
    raise AssertionError(f"{op.name}: the torch decoder has no kernel for op {op.op!r}")


def test_decoder_op(
    roofline: Roofline,
    shape: td.Shape,
    model: td.Decoder,
    sequences: int,
    kernel: StepOp,
    modules: tuple[str, ...],
) -> None:
    fn, args = _case(shape, model, kernel, sequences)
    fn(*args)
    cache = "warm" if kernel.op in WARM_OPS else "cold"
    roofline(
        fn,
        *args,
        op=kernel.op,
        dtype=kernel.dtype,
        **kernel.params,
        max_time=MAX_TIME_S,
        cache=cache,
        name="+".join(modules) if len(modules) > 1 else None,
        min_fraction=0.5,
    )
