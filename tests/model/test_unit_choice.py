"""Which peak bounds an op: the tensor or the vector unit, TF32 math, and the fallbacks where a
datasheet has no figure."""

from __future__ import annotations

import re
from typing import Any

import pytest
from op_costs import H100, cost, on_h100

from pytest_roofline.model.core import Precision, Source, Unit, parse_dtype
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.op_registry import OpError
from pytest_roofline.model.ops import get_op
from pytest_roofline.model.unit_choice import select_unit

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR


# -- which peak bounds an op -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "params"),
    [
        ("gemm", {"M": 64, "N": 64, "K": 64}),
        ("gemv", {"M": 64, "K": 64}),
        ("attention", {"batch": 1, "heads": 1, "seq_q": 64, "seq_k": 64, "head_dim": 64}),
        ("conv2d", {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3}),
        ("custom", {"flops": 1e9, "unit": "tensor"}),
    ],
)
@pytest.mark.parametrize(
    ("dtype", "peak_precision", "peak"),
    [("bf16", P.BF16, 989.4e12), ("fp16", P.FP16, 989.4e12), ("fp8", P.FP8_E4M3, 1978.9e12),
     ("e5m2", P.FP8_E5M2, 1978.9e12), ("int8", P.INT8, 1978.9e12), ("fp64", P.FP64, 66.9e12)],
)  # fmt: skip
def test_matrix_ops_use_tensor_peaks(
    op: str, params: dict[str, Any], dtype: str, peak_precision: Precision, peak: float
) -> None:
    e = on_h100(op, dtype, **params)
    assert (e.unit, e.peak_precision, e.peak_flops) == (TC, peak_precision, pytest.approx(peak))


@pytest.mark.parametrize(
    ("op", "params"),
    [("gemm", {"M": 64, "N": 64, "K": 64}), ("gemv", {"M": 64, "K": 64}),
     ("attention", {"batch": 1, "heads": 1, "seq_q": 64, "seq_k": 64, "head_dim": 64}),
     ("conv2d", {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3}),
     ("custom", {"flops": 1e9, "unit": "tensor"})],
)  # fmt: skip
def test_fp32_matrix_ops_are_ieee_unless_math_is_tf32(op: str, params: dict[str, Any]) -> None:
    for math in (None, "ieee"):
        e = estimate(op, dtype="fp32", device=H100, math=math, **params)
        assert (e.unit, e.precision, e.peak_precision, e.peak_flops) == (
            V,
            P.FP32,
            P.FP32,
            pytest.approx(66.9e12),
        )
    e = estimate(op, dtype="fp32", device=H100, math="tf32", **params)
    assert (e.unit, e.precision, e.peak_precision, e.peak_flops) == (
        TC,
        P.FP32,
        P.TF32,
        pytest.approx(494.7e12),
    )
    assert e.bytes == cost(op, "fp32", **params).bytes  # the data stays 4 bytes per element


def test_tf32_dtype_on_a_matrix_op_is_tensor_unless_math_is_ieee() -> None:
    e = on_h100("gemm", "tf32", M=64, N=64, K=64)
    assert (e.unit, e.peak_precision, e.peak_flops) == (TC, P.TF32, pytest.approx(494.7e12))
    e = estimate("gemm", dtype="tf32", device=H100, math="ieee", M=64, N=64, K=64)
    assert (e.unit, e.peak_precision, e.peak_flops) == (V, P.FP32, pytest.approx(66.9e12))


@pytest.mark.parametrize(
    ("op", "params"),
    [("dot", {"n": 1024}), ("elementwise", {"n": 1024}), ("copy", {"n": 1024}), ("reduction", {"n": 1024}),
     ("transpose", {"rows": 32, "cols": 32}), ("softmax", {"rows": 32, "cols": 32}),
     ("layernorm", {"rows": 32, "cols": 32}), ("rmsnorm", {"rows": 32, "cols": 32}),
     ("custom", {"flops": 1e9})],
)  # fmt: skip
@pytest.mark.parametrize(
    ("dtype", "peak"), [("fp64", 33.5e12), ("fp32", 66.9e12), ("fp16", 133.8e12), ("bf16", 133.8e12)]
)
def test_non_matrix_ops_use_vector_peaks(op: str, params: dict[str, Any], dtype: str, peak: float) -> None:
    e = on_h100(op, dtype, **params)
    assert (e.unit, e.peak_flops, e.peak_source) == (V, pytest.approx(peak), Source.DATASHEET)


def test_math_tf32_on_a_vector_op_changes_nothing() -> None:
    plain = on_h100("softmax", "fp32", rows=64, cols=64)
    tf32 = estimate("softmax", dtype="fp32", device=H100, math="tf32", rows=64, cols=64)
    assert (tf32.unit, tf32.peak_flops, tf32.floor_s) == (V, plain.peak_flops, plain.floor_s)


@pytest.mark.parametrize("dtype", ["fp8", "e5m2"])
def test_narrow_vector_ops_fall_back_to_the_fastest_vector_peak_marked_derived(dtype: str) -> None:
    e = on_h100("elementwise", dtype, n=1024)
    assert (e.unit, e.peak_flops, e.peak_source) == (V, pytest.approx(133.8e12), Source.DERIVED)
    assert e.peak_note == f"no {e.precision} vector figure; fp16 vector peak used"


def test_v100_has_no_bf16_so_a_bf16_gemm_falls_back_to_a_derived_vector_peak() -> None:
    v100 = lookup("v100-sxm2")
    e = estimate("gemm", dtype="bf16", device=v100, M=64, N=64, K=64)
    assert (e.unit, e.peak_flops, e.peak_source) == (V, pytest.approx(31.3e12), Source.DERIVED)
    assert e.peak_note == "no bf16 vector figure; fp16 vector peak used"
    fp16 = estimate("gemm", dtype="fp16", device=v100, M=64, N=64, K=64)
    assert (fp16.unit, fp16.peak_flops, fp16.peak_source) == (TC, pytest.approx(125e12), Source.DATASHEET)


def test_a_missing_tensor_peak_falls_back_to_the_datasheet_vector_peak() -> None:
    e = estimate("gemm", dtype="fp64", device=lookup("t4"), M=64, N=64, K=64)  # T4 has no FP64 tensor cores
    assert (e.unit, e.peak_flops, e.peak_source, e.peak_note) == (
        V,
        pytest.approx(0.25e12),
        Source.DATASHEET,
        "",
    )


def test_a100_bf16_vector_peak_is_half_its_fp16() -> None:
    a100 = lookup("a100-sxm-80gb")
    bf16 = estimate("elementwise", dtype="bf16", device=a100, n=1024)
    fp16 = estimate("elementwise", dtype="fp16", device=a100, n=1024)
    assert (bf16.peak_flops, fp16.peak_flops) == (pytest.approx(39e12), pytest.approx(78e12))


def test_fp32_with_tf32_math_on_a_device_without_tf32_runs_at_the_fp32_rate() -> None:
    # V100 has no TF32: the fp32 GEMM runs as IEEE fp32 at 15.7 TFLOP/s, not on the fp16 units
    e = estimate("gemm", dtype="fp32", device=lookup("v100-sxm2"), math="tf32", M=64, N=64, K=64)
    assert e.unit is V
    assert e.peak_flops == pytest.approx(15.7e12)


def test_tf32_data_in_a_vector_op_runs_at_the_fp32_rate() -> None:
    # TF32 is fp32 storage; off the tensor cores it is ordinary fp32 arithmetic
    e = on_h100("elementwise", "tf32", n=1024)
    assert e.bytes == 2 * 1024 * 4
    assert e.peak_flops == pytest.approx(66.9e12)


def test_select_unit_directly() -> None:
    gemm, softmax = get_op("gemm"), get_op("softmax")
    assert select_unit(gemm, {}, P.BF16, None) == (P.BF16, TC)
    assert select_unit(gemm, {}, P.FP32, None) == (P.FP32, V)
    assert select_unit(gemm, {}, P.FP32, "tf32") == (P.TF32, TC)
    assert select_unit(gemm, {}, P.TF32, "tf32") == (P.TF32, TC)
    assert select_unit(softmax, {}, P.BF16, None) == (P.BF16, V)
    custom = get_op("custom")
    assert select_unit(custom, {"unit": "tensor"}, P.BF16, None) == (P.BF16, TC)
    assert select_unit(custom, {"unit": "vector"}, P.BF16, None) == (P.BF16, V)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp64", "fp8", "int8"])
def test_math_tf32_on_non_fp32_data_is_an_error(dtype: str) -> None:
    expected = rf"^math='tf32' applies to fp32 \(or complex64\) data only; dtype is {parse_dtype(dtype)}$"
    with pytest.raises(OpError, match=expected):
        estimate("gemm", dtype=dtype, device=H100, math="tf32", M=64, N=64, K=64)


@pytest.mark.parametrize("math", ["fast", "TF32", "fp16", ""])
def test_unknown_math_is_an_error_naming_it(math: str) -> None:
    with pytest.raises(OpError, match=rf"math must be one of 'ieee', 'tf32'; got {re.escape(repr(math))}"):
        estimate("gemm", dtype="fp32", device=H100, math=math, M=64, N=64, K=64)
