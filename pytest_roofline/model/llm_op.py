"""The ``llm`` op: one decode or prefill step of a whole model (:mod:`.llm`) as one catalogue entry,
registered on import. The config file is read only when a test or a command asks for the op."""

from __future__ import annotations

from .core import Cost
from .llm import LlmError, load_config, step_ops
from .op_registry import OpError, OpSpec, Param, Params, register_op


def _llm(p: Params, size: float) -> Cost:
    """One decode or prefill step of a whole model, from its Hugging Face config.json: its FLOPs and
    bytes are its kernels' sums, its floor the sum of their floors (docs/llm.md ("A whole model:
    `roofline llm`"))."""
    config = load_config(p["config"])
    ops = step_ops(config, step_options(p))
    return Cost(
        flops=sum(op.flops * op.count for op in ops),
        bytes=sum(op.bytes * op.count for op in ops),
        parts=tuple((op.flops * op.count, op.bytes * op.count, op.unit) for op in ops),
    )


def step_options(p: Params) -> dict[str, object]:
    """The ``llm`` op's parameters as the step model takes them."""
    keys = ("phase", "batch", "context", "prompt", "dtype", "weight_dtype", "kv_dtype", "tp")
    return {k: p[k] for k in keys if k in p}


def _check_llm(op: str, p: Params) -> None:
    try:
        step_ops(load_config(p["config"]), step_options(p))
    except LlmError as exc:
        raise OpError(f"{op}: {exc}") from None


register_op(OpSpec(
    name="llm",
    params=(Param("config", kind="text"), Param("phase", "decode", "choice", ("decode", "prefill")),
            Param("batch", 1), Param("context", 0, "count"), Param("prompt", None),
            Param("weight_dtype", None, "dtype"), Param("kv_dtype", None, "dtype"), Param("tp", 1)),
    cost_fn=_llm,
    flops_formula="Σ ops (roofline llm CONFIG)",
    bytes_formula="Σ ops; the floor is the sum of the ops' floors",
    matrix=True, complex_flops=None, real=True, packed=False, needs_dtype=True,
    aliases=(), cross_check=_check_llm,
    source="one step of a Hugging Face config.json, op by op (roofline llm)",
))  # fmt: skip
