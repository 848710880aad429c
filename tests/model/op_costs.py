"""What the op tests share: the H100 they estimate on, the built-in ops, and an op's cost or
estimate in one call."""

from __future__ import annotations

from typing import Any

from pytest_roofline.model.core import Cost, parse_dtype
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.estimate import Estimate, estimate
from pytest_roofline.model.ops import get_op

H100 = lookup("h100-sxm")
BUILTIN = [
    "add_rmsnorm", "attention", "conv2d", "copy", "cross_entropy", "custom", "dot", "elementwise",
    "embedding", "fft", "gemm", "gemv", "kv_cache_write", "layernorm", "llm", "moe", "quantize", "reduction",
    "rmsnorm", "rope", "softmax", "swiglu", "transpose",
]  # fmt: skip


def cost(op: str, dtype: str = "fp32", **params: Any) -> Cost:
    spec = get_op(op)
    return spec.cost(spec.check(params), parse_dtype(dtype))


def on_h100(op: str, dtype: str = "bf16", **params: Any) -> Estimate:
    return estimate(op, dtype=dtype, device=H100, **params)
