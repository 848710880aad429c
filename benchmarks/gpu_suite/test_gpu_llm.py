"""The kernels an LLM engine runs, each timed under its catalogue op (``llm_cases.py`` lists them):
fused RMSNorm and residual-add RMSNorm at hidden 4096 and 8192 over 1-4096 tokens, rotary embedding,
SiLU-and-mul, per-token fp8 quantization, the embedding gather, a skinny-GEMM sweep that crosses the
ridge (M = 1 to 1024), a MoE layer's grouped GEMMs, paged-KV decode attention, an fp8 GEMM with
128x128 block scales and a Triton bf16 matmul.

Run in report mode (a budget missed is a figure), cold (the plugin's default: the data in DRAM, as
the catalogue's bytes assume), each kernel checked against a reference once before it is timed.
"""

from __future__ import annotations

import pytest
from llm_cases import Case, cases

from pytest_roofline import Roofline

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

#: the longest a case is timed: a few hundred cold calls of a short kernel, a few of a GEMM
MAX_TIME_S = 0.5


@pytest.mark.parametrize("case", cases(), ids=lambda case: case.name)
def test_llm_kernel(case: Case, roofline: Roofline) -> None:
    try:
        built = case.build(torch)
    except RuntimeError as exc:  # a kernel this PyTorch or GPU does not run (blockwise fp8 scales)
        pytest.skip(f"{case.name}: {exc}")
    fn, args, kwargs = built
    fn(*args, **kwargs)
    if case.check is not None:
        case.check(torch, built)
    roofline(
        fn,
        *args,
        kwargs=kwargs,
        op=case.op,
        dtype=case.dtype,
        **case.params,
        max_time=MAX_TIME_S,
        name=case.name,
        min_fraction=0.5,
    )
