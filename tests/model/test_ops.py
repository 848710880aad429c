"""The op catalogue and ``estimate()``: every formula by hand, every error, unit selection, the references."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from pytest_roofline.model import op_registry, ops
from pytest_roofline.model.core import Cost, Device, Precision, Source, Unit, parse_dtype
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.op_registry import REQUIRED, OpError, OpSpec, Param, check_params
from pytest_roofline.model.ops import get_op, op_names, register_op, unregister_op
from pytest_roofline.model.unit_choice import select_unit

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR
H100 = lookup("h100-sxm")
BUILTIN = [
    "add_rmsnorm", "attention", "conv2d", "copy", "cross_entropy", "custom", "dot", "elementwise",
    "embedding", "fft", "gemm", "gemv", "kv_cache_write", "layernorm", "llm", "moe", "quantize", "reduction",
    "rmsnorm", "rope", "softmax", "swiglu", "transpose",
]  # fmt: skip


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register, replace and unregister ops without leaking into the next test."""
    monkeypatch.setattr(op_registry, "_REGISTRY", dict(op_registry._REGISTRY))
    monkeypatch.setattr(op_registry, "_ALIASES", dict(op_registry._ALIASES))


def cost(op: str, dtype: str = "fp32", **params: Any) -> Cost:
    spec = get_op(op)
    return spec.cost(check_params(spec, params), parse_dtype(dtype))


def on_h100(op: str, dtype: str = "bf16", **params: Any) -> Any:
    return estimate(op, dtype=dtype, device=H100, **params)


# -- the catalogue -----------------------------------------------------------------------------


def test_builtin_catalogue() -> None:
    assert op_names() == BUILTIN
    assert [spec.name for spec in ops.all_ops()] == BUILTIN
    assert {name for name in BUILTIN if get_op(name).matrix} == {
        "gemm", "gemv", "attention", "conv2d", "moe", "llm"
    }  # fmt: skip


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_documents_its_formula(name: str) -> None:
    spec = get_op(name)
    assert spec.name == name
    assert spec.flops_formula
    assert spec.bytes_formula
    assert "FLOPs" in spec.doc
    assert spec.signature().startswith(f"{name}(")


# Each op, one shape, the FLOPs and bytes (in elements) worked out by hand.
HAND: list[tuple[str, dict[str, Any], float, float]] = [
    ("gemm", {"M": 2, "N": 3, "K": 5}, 2 * 2 * 3 * 5, 2 * 5 + 5 * 3 + 2 * 3),
    ("gemm", {"M": 2, "N": 3, "K": 5, "batch": 4}, 4 * 60, 4 * 31),
    ("gemv", {"M": 3, "K": 5}, 30, 15 + 5 + 3),
    ("dot", {"n": 7}, 14, 15),
    ("elementwise", {"n": 10}, 10, 20),
    ("elementwise", {"n": 10, "inputs": 2, "outputs": 1, "flops_per_element": 3}, 30, 30),
    ("elementwise", {"n": 10, "inputs": 0, "outputs": 1, "flops_per_element": 0}, 0, 10),  # a fill
    ("elementwise", {"n": 10, "inputs": 3, "outputs": 0}, 10, 30),  # reads only
    ("elementwise", {"n": 10, "flops_per_element": 0.5}, 5, 20),  # fractional FLOPs per element
    ("copy", {"n": 10}, 0, 20),
    ("transpose", {"rows": 3, "cols": 5}, 0, 30),
    ("reduction", {"n": 100}, 100, 101),
    ("reduction", {"n": 100, "outputs": 4}, 100, 104),
    ("softmax", {"rows": 3, "cols": 5}, 75, 30),
    ("layernorm", {"rows": 3, "cols": 5}, 120, 30 + 10),
    ("rmsnorm", {"rows": 3, "cols": 5}, 60, 30 + 5),
    # 2 batches, 3 heads, 4 queries, 4 keys, head_dim 8: 16 pairs; Q, K, V, O = 4·8 each per head
    ("attention", {"batch": 2, "heads": 3, "seq_q": 4, "seq_k": 4, "head_dim": 8},
     4 * 6 * 16 * 8, 6 * 16 * 8),
    # FlashAttention's causal convention: avg_k = (max(0, 4 - 4) + 4)/2 = 2 keys per query, 8 pairs
    # (the exact count is 4·5/2 = 10); bytes unchanged
    ("attention", {"batch": 2, "heads": 3, "seq_q": 4, "seq_k": 4, "head_dim": 8, "causal": True},
     4 * 6 * 8 * 8, 6 * 16 * 8),
    ("attention", {"batch": 1, "heads": 1, "seq_q": 2, "seq_k": 6, "head_dim": 4}, 4 * 12 * 4, (4 + 12) * 4),
    # conv2d: 2×3×8×8 input, 4 filters of 3×3: P = Q = 6
    ("conv2d", {"N": 2, "C": 3, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3},
     2 * 2 * 4 * 6 * 6 * 3 * 3 * 3, 2 * 3 * 64 + 4 * 3 * 9 + 2 * 4 * 36),
    # stride 2, padding 1: P = Q = (8 + 2 - 3) // 2 + 1 = 4
    ("conv2d", {"N": 2, "C": 3, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3, "stride": 2, "padding": 1},
     2 * 2 * 4 * 4 * 4 * 27, 384 + 108 + 2 * 4 * 16),
    # non-square: H=8, R=3 -> P = 6; W=5, S=1 -> Q = 5
    ("conv2d", {"N": 1, "C": 1, "H": 8, "W": 5, "K": 1, "R": 3, "S": 1}, 2 * 6 * 5 * 3, 40 + 3 + 30),
    # stride 3, padding 2: P = (7 + 4 - 5) // 3 + 1 = 3, Q = (9 + 4 - 1) // 3 + 1 = 5
    ("conv2d", {"N": 1, "C": 2, "H": 7, "W": 9, "K": 3, "R": 5, "S": 1, "stride": 3, "padding": 2},
     2 * 3 * 3 * 5 * 2 * 5 * 1, 2 * 63 + 3 * 2 * 5 + 3 * 3 * 5),
]  # fmt: skip


@pytest.mark.parametrize(("op", "params", "flops", "elements"), HAND)
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp64", "int8"])
def test_cost_by_hand(op: str, params: dict[str, Any], flops: float, elements: float, dtype: str) -> None:
    assert cost(op, dtype, **params) == Cost(flops=flops, bytes=elements * parse_dtype(dtype).itemsize)


def test_gemm_fp8_bytes_are_one_per_element() -> None:
    assert cost("gemm", "fp8", M=2, N=3, K=5) == Cost(flops=60, bytes=31)


@pytest.mark.parametrize(("op", "params", "flops", "elements"), [h for h in HAND if not h[1].get("causal")])
def test_the_documented_formulas_match_the_cost_functions(
    op: str, params: dict[str, Any], flops: float, elements: float
) -> None:
    """``roofline ops`` prints flops_formula/bytes_formula: evaluate them and compare with the code."""
    spec = get_op(op)
    checked = check_params(spec, params)
    names: dict[str, Any] = dict(checked)
    # operands at the dtype's size (1 element), no block scales, every key visible, MHA, d_v = d_qk
    names.update(dict.fromkeys(("a", "b", "c", "q", "kv", "o"), 1), scales=0)
    if op == "attention":
        names.update(avg_k=checked["seq_k"], keys=checked["seq_k"], head_dim_v=checked["head_dim"],
                     kv_heads=checked["heads"])  # fmt: skip
    if op == "conv2d":
        names["P"] = (checked["H"] + 2 * checked["padding"] - checked["R"]) // checked["stride"] + 1
        names["Q"] = (checked["W"] + 2 * checked["padding"] - checked["S"]) // checked["stride"] + 1

    def evaluate(formula: str) -> float:
        return float(eval(formula.split(" (")[0].replace("·", "*"), {}, names))

    assert (evaluate(spec.flops_formula), evaluate(spec.bytes_formula)) == (flops, elements)


def test_custom_bytes_are_already_bytes_and_the_dtype_only_picks_the_peak() -> None:
    for dtype in ("fp32", "bf16", "fp64", "int8"):
        assert cost("custom", dtype, flops=1e9, bytes=2e6) == Cost(flops=1e9, bytes=2e6)
    fp32, bf16 = (on_h100("custom", dtype, flops=1e12, bytes=1.0) for dtype in ("fp32", "bf16"))
    assert fp32.bytes == bf16.bytes == 1.0
    assert (fp32.peak_flops, bf16.peak_flops) == (pytest.approx(66.9e12), pytest.approx(133.8e12))


# -- causal attention --------------------------------------------------------------------------


def brute_force_pairs(seq_q: int, seq_k: int) -> int:
    """Query i sees key j when j <= i + (seq_k - seq_q): the bottom-right aligned mask."""
    return sum(1 for i in range(seq_q) for j in range(seq_k) if j <= i + seq_k - seq_q)


@pytest.mark.parametrize(
    ("seq_q", "seq_k", "pairs"),
    [
        (1, 1, 1),
        (4, 4, 10),  # square: s(s+1)/2
        (4096, 4096, 4096 * 4097 // 2),
        (1, 4096, 4096),  # decode: the one new query sees every key
        (2, 5, 4 + 5),  # chunked prefill: queries see 4 and 5 keys
        (8, 4, 0 + 0 + 0 + 0 + 1 + 2 + 3 + 4),  # more queries than keys: the first four see nothing
        (5, 1, 1),
    ],
)
def test_causal_pairs_by_hand(seq_q: int, seq_k: int, pairs: int) -> None:
    # the visible pairs, counted exactly; the floor counts FlashAttention's convention, avg_k =
    # (max(0, seq_k - seq_q) + seq_k)/2 per query, which is min(seq_q, seq_k)/2 pairs fewer
    c = cost("attention", batch=1, heads=1, seq_q=seq_q, seq_k=seq_k, head_dim=1, causal=True)
    assert c.flops == 4 * (pairs - min(seq_q, seq_k) / 2)
    if seq_q * seq_k < 10_000:
        assert brute_force_pairs(seq_q, seq_k) == pairs


@pytest.mark.parametrize("seq_q", range(1, 9))
@pytest.mark.parametrize("seq_k", range(1, 9))
def test_causal_pairs_against_brute_force(seq_q: int, seq_k: int) -> None:
    causal = cost("attention", batch=2, heads=3, seq_q=seq_q, seq_k=seq_k, head_dim=5, causal=True)
    full = cost("attention", batch=2, heads=3, seq_q=seq_q, seq_k=seq_k, head_dim=5)
    convention = brute_force_pairs(seq_q, seq_k) - min(seq_q, seq_k) / 2  # FlashAttention's avg_k
    assert causal.flops == 4 * 2 * 3 * 5 * convention
    assert causal.flops <= full.flops
    assert causal.bytes == full.bytes


def test_causal_decode_costs_half_a_key_less_than_non_causal() -> None:
    # FlashAttention's convention: avg_k = (seq_k - 1 + seq_k)/2 for the one query; the bytes are the same
    params = {"batch": 8, "heads": 32, "seq_q": 1, "seq_k": 2048, "head_dim": 128}
    causal, full = cost("attention", "bf16", causal=True, **params), cost("attention", "bf16", **params)
    assert causal.bytes == full.bytes
    assert full.flops - causal.flops == 4 * 8 * 32 * 128 * 0.5


# -- the references' own numbers on h100-sxm ---------------------------------------------------


def test_reference_gemm_4096_bf16_is_139_us_compute_bound() -> None:
    e = on_h100("gemm", M=4096, N=4096, K=4096)
    assert e.flops == 2 * 4096**3
    assert e.bytes == 3 * 4096**2 * 2
    assert e.compute_s == pytest.approx(139e-6, rel=0.005)
    assert e.memory_s == pytest.approx(30e-6, rel=0.005)
    assert e.floor_s == e.compute_s
    assert e.bound == "compute"
    assert e.intensity == pytest.approx(4096 / 3)
    assert (e.unit, e.peak_flops, e.peak_source) == (TC, pytest.approx(989.4e12), Source.DATASHEET)
    assert (e.label, e.shape) == ("gemm[M=4096 N=4096 K=4096 bf16]", "M=4096 N=4096 K=4096")


def test_reference_elementwise_4096_squared_bf16_is_20_us_memory_bound() -> None:
    e = on_h100("elementwise", n=4096 * 4096)
    assert e.bytes == 2 * 4096**2 * 2
    assert e.floor_s == pytest.approx(20e-6, rel=0.005)
    assert e.floor_s == e.memory_s
    assert e.bound == "memory"
    assert e.unit is V


def test_reference_bf16_ridge_is_295() -> None:
    assert H100.ridge(P.BF16, TC) == pytest.approx(295.3, abs=0.1)
    assert on_h100("gemm", M=1, N=1, K=1).ridge == pytest.approx(295.3, abs=0.1)


@pytest.mark.parametrize(("m", "intensity", "bound"), [(1, 1.0, "memory"), (512, 409.6, "compute")])
def test_reference_gemm_intensity_grows_with_m(m: int, intensity: float, bound: str) -> None:
    e = on_h100("gemm", "fp16", M=m, N=4096, K=4096)
    assert e.intensity == pytest.approx(intensity, rel=0.002)
    assert e.bound == bound


def test_reference_softmax_intensity_is_1_25_in_fp16() -> None:
    assert on_h100("softmax", "fp16", rows=4096, cols=4096).intensity == 1.25


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


# -- parameter checking and its errors ---------------------------------------------------------


def test_unknown_op_suggests_the_closest_and_lists_all() -> None:
    with pytest.raises(
        OpError, match=r"unknown op 'softmaxx' \(did you mean 'softmax'\?\); known ops: "
    ) as info:
        get_op("softmaxx")
    assert ", ".join(BUILTIN) in str(info.value)


def test_gemn_suggests_gemm() -> None:
    # 'gemn' is as close to 'gemv' as to 'gemm' by difflib's ratio; the hint must still offer gemm
    with pytest.raises(OpError, match=r"unknown op 'gemn' \(did you mean [^)]*'gemm'"):
        estimate("gemn", dtype="bf16", device=H100, M=1, N=1, K=1)


@pytest.mark.parametrize("name", [None, 3, ("gemm",)])
def test_get_op_with_a_non_string(name: object) -> None:
    with pytest.raises(OpError, match=rf"unknown op {re.escape(repr(name))}; known ops"):
        get_op(name)


@pytest.mark.parametrize(
    ("op", "params", "missing"),
    [("gemm", {"M": 1, "N": 1}, "K"), ("gemm", {}, "M"), ("gemv", {"M": 1}, "K"), ("dot", {}, "n"),
     ("attention", {"batch": 1, "heads": 1, "seq_q": 1, "head_dim": 1}, "seq_k"),
     ("conv2d", {"N": 1, "C": 1, "H": 1, "W": 1, "K": 1, "R": 1}, "S")],
)  # fmt: skip
def test_missing_param_names_it_and_the_signature(op: str, params: dict[str, Any], missing: str) -> None:
    signature = re.escape(get_op(op).signature())
    with pytest.raises(OpError, match=rf"^{op} needs {missing} \(it takes {signature}\)$"):
        on_h100(op, **params)


@pytest.mark.parametrize(
    ("op", "wrong", "hint"),
    [("gemm", "k", "K"), ("gemm", "m", "M"), ("gemm", "bacth", "batch"), ("softmax", "row", "rows"),
     ("attention", "head_dims", "head_dim"), ("elementwise", "N", "n"), ("conv2d", "stirde", "stride")],
)  # fmt: skip
def test_unknown_param_suggests_the_closest(op: str, wrong: str, hint: str) -> None:
    spec = get_op(op)
    params = {p.name: 1 for p in spec.params if p.required} | {wrong: 1}
    with pytest.raises(
        OpError, match=rf"^{op} has no parameter '{wrong}' \(did you mean '{hint}'\?\); it takes "
    ):
        on_h100(op, **params)


def test_unknown_param_without_a_close_match_has_no_hint() -> None:
    expected = r"^gemm has no parameter 'zzz'; it takes gemm\(M, N, K, batch=1, a_dtype=None, .*\)$"
    with pytest.raises(OpError, match=expected):
        on_h100("gemm", M=1, N=1, K=1, zzz=1)


@pytest.mark.parametrize("value", [0, -1, 2.5, 4096.0, "4096", True, False, None, [4096], np.float64(8)])
def test_sizes_must_be_positive_integers(value: object) -> None:
    with pytest.raises(OpError, match=rf"^gemm: M must be a positive integer; got {re.escape(repr(value))}$"):
        on_h100("gemm", M=value, N=64, K=64)


@pytest.mark.parametrize("value", [np.int64(64), np.int32(64), np.int8(64), np.uint16(64)])
def test_numpy_integers_are_sizes(value: object) -> None:
    e = on_h100("gemm", M=value, N=64, K=64)
    assert e.flops == on_h100("gemm", M=64, N=64, K=64).flops
    assert type(e.params["M"]) is int
    assert e.label == "gemm[M=64 N=64 K=64 bf16]"


@pytest.mark.parametrize("value", [-1, 1.5, "2", True, np.bool_(True)])
def test_counts_must_be_non_negative_integers(value: object) -> None:
    with pytest.raises(
        OpError, match=rf"^elementwise: inputs must be a non-negative integer; got {re.escape(repr(value))}$"
    ):
        on_h100("elementwise", n=8, inputs=value)


@pytest.mark.parametrize("value", [-1, -0.5, float("nan"), float("inf"), "1", True, None])
def test_amounts_must_be_non_negative_finite_numbers(value: object) -> None:
    with pytest.raises(
        OpError,
        match=rf"^elementwise: flops_per_element must be a non-negative number; "
        rf"got {re.escape(repr(value))}$",
    ):
        on_h100("elementwise", n=8, flops_per_element=value)


@pytest.mark.parametrize("value", [0, 0.25, 3, np.float32(2.0), np.int64(4)])
def test_amounts_accept_real_numbers(value: object) -> None:
    assert on_h100("elementwise", n=8, flops_per_element=value).flops == 8 * float(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yes", 1, 0, None, "True"])
def test_flags_must_be_bools(value: object) -> None:
    with pytest.raises(
        OpError, match=rf"^attention: causal must be True or False; got {re.escape(repr(value))}$"
    ):
        on_h100("attention", batch=1, heads=1, seq_q=4, seq_k=4, head_dim=8, causal=value)


def test_numpy_bools_are_flags() -> None:
    e = on_h100("attention", batch=1, heads=1, seq_q=4, seq_k=4, head_dim=8, causal=np.bool_(True))
    assert e.params["causal"] is True
    assert e.flops == 4 * 8 * 8  # causal 4 x 4: avg_k = 2 keys per query (FlashAttention's convention)


@pytest.mark.parametrize("value", ["matrix", "Tensor", "", None, 1])
def test_choices_must_be_listed(value: object) -> None:
    with pytest.raises(
        OpError, match=rf"^custom: unit must be one of 'vector', 'tensor'; got {re.escape(repr(value))}$"
    ):
        on_h100("custom", flops=1.0, unit=value)


@pytest.mark.parametrize("params", [{}, {"flops": 0}, {"bytes": 0}, {"flops": 0.0, "bytes": 0.0}])
def test_custom_needs_flops_or_bytes(params: dict[str, Any]) -> None:
    with pytest.raises(OpError, match="custom needs flops or bytes greater than 0"):
        on_h100("custom", **params)


def test_custom_with_only_flops_or_only_bytes() -> None:
    flops_only = on_h100("custom", flops=989.4e12, unit="tensor")
    assert (flops_only.floor_s, flops_only.bound, flops_only.intensity) == (
        pytest.approx(1.0),
        "compute",
        float("inf"),
    )
    bytes_only = on_h100("custom", bytes=3.35e12)
    assert (bytes_only.floor_s, bytes_only.bound, bytes_only.intensity) == (pytest.approx(1.0), "memory", 0.0)


@pytest.mark.parametrize(
    ("params", "message"),
    [({"H": 2, "R": 3}, "the filter (R=3) does not fit in H=2 with padding=0"),
     ({"W": 2, "S": 5, "padding": 1}, "the filter (S=5) does not fit in W=2 with padding=1"),
     ({"H": 1, "W": 1, "R": 4, "S": 1, "padding": 1}, "the filter (R=4) does not fit in H=1 with padding=1")],
)  # fmt: skip
def test_conv2d_filter_larger_than_the_padded_input(params: dict[str, Any], message: str) -> None:
    shape = {"N": 1, "C": 1, "H": 8, "W": 8, "K": 1, "R": 1, "S": 1} | params
    with pytest.raises(OpError, match=rf"^conv2d: {re.escape(message)}; the output would be empty$"):
        on_h100("conv2d", **shape)


def test_conv2d_padding_can_make_a_large_filter_fit() -> None:
    # H=2, R=3, padding=1: P = (2 + 2 - 3) // 1 + 1 = 2
    c = cost("conv2d", N=1, C=1, H=2, W=2, K=1, R=3, S=3, padding=1)
    assert c.flops == 2 * 2 * 2 * 9


@pytest.mark.parametrize(("name", "value"), [("stride", 0), ("stride", -1), ("padding", -1), ("R", 0)])
def test_conv2d_stride_and_padding_are_checked(name: str, value: int) -> None:
    shape = {"N": 1, "C": 1, "H": 8, "W": 8, "K": 1, "R": 1, "S": 1, name: value}
    with pytest.raises(
        OpError, match=rf"^conv2d: {name} must be a (positive|non-negative) integer; got {value}$"
    ):
        on_h100("conv2d", **shape)


def test_elementwise_needs_an_input_or_an_output() -> None:
    with pytest.raises(OpError, match=r"^elementwise: inputs and outputs cannot both be 0$"):
        on_h100("elementwise", n=8, inputs=0, outputs=0)


def test_errors_are_value_errors() -> None:
    assert issubclass(OpError, ValueError)


# -- OpSpec and Param --------------------------------------------------------------------------


def test_check_fills_defaults_and_returns_a_new_dict() -> None:
    spec = get_op("conv2d")
    given = {"N": 1, "C": 1, "H": 8, "W": 8, "K": 1, "R": 3, "S": 3}
    checked = spec.check(given)
    assert checked == given | {"stride": 1, "padding": 0}
    assert checked is not given
    assert "stride" not in given


def test_shape_and_label_leave_defaults_out() -> None:
    spec = get_op("gemm")
    assert spec.shape(spec.check({"M": 1, "N": 2, "K": 3})) == "M=1 N=2 K=3"
    assert spec.shape(spec.check({"M": 1, "N": 2, "K": 3, "batch": 1})) == "M=1 N=2 K=3"
    batched = spec.check({"M": 1, "N": 2, "K": 3, "batch": 8})
    assert spec.shape(batched) == "M=1 N=2 K=3 batch=8"
    assert spec.label(batched, P.FP8_E4M3) == "gemm[M=1 N=2 K=3 batch=8 fp8_e4m3]"
    custom = get_op("custom")
    assert custom.label(custom.check({"flops": 1e9, "unit": "tensor"}), P.BF16) == (
        "custom[flops=1e+09 unit=tensor bf16]"
    )
    attention = get_op("attention")
    params = {"batch": 1, "heads": 2, "seq_q": 3, "seq_k": 4, "head_dim": 5, "causal": True}
    assert (
        attention.shape(attention.check(params)) == "batch=1 heads=2 seq_q=3 seq_k=4 head_dim=5 causal=True"
    )


def test_signature_and_param_text() -> None:
    assert get_op("gemm").signature() == (
        "gemm(M, N, K, batch=1, a_dtype=None, b_dtype=None, c_dtype=None, group_size=None, scale_dtype=None)"
    )
    assert get_op("custom").signature() == "custom(flops=0, bytes=0, unit='vector')"
    assert str(Param("n")) == "n"
    assert str(Param("stride", 1)) == "stride=1"
    assert Param("n").required
    assert not Param("stride", 1).required
    assert repr(REQUIRED) == "REQUIRED"


def test_unit_for() -> None:
    assert get_op("gemm").unit_for({}) is TC
    assert get_op("softmax").unit_for({}) is V
    assert get_op("custom").unit_for({"unit": "tensor"}) is TC
    assert get_op("custom").unit_for({}) is V


def test_param_check_returns_converted_values() -> None:
    assert Param("n").check("op", np.int64(3)) == 3
    assert type(Param("n").check("op", np.int64(3))) is int
    assert Param("f", False, "flag").check("op", np.bool_(False)) is False
    assert Param("u", "a", "choice", ("a", "b")).check("op", "b") == "b"


# -- registering ops ---------------------------------------------------------------------------


def _axpby(p: Any, size: int) -> Cost:
    """z = a·x + b·y: FLOPs 3·n; bytes 3·n·size."""
    return Cost(flops=3 * p["n"], bytes=3 * p["n"] * size)


@pytest.mark.usefixtures("registry")
def test_register_and_use_a_new_op_end_to_end() -> None:
    spec = register_op("axpby", ["n"], _axpby, flops="3·n", bytes="3·n")
    assert isinstance(spec, OpSpec)
    assert get_op("axpby") is spec
    assert "axpby" in op_names()
    assert spec.doc == "z = a·x + b·y: FLOPs 3·n; bytes 3·n·size."
    e = estimate("axpby", dtype="fp32", device=H100, n=1000)
    assert (e.flops, e.bytes, e.unit, e.op) == (3000, 12000, V, "axpby")
    assert e.label == "axpby[n=1000 fp32]"
    assert e.floor_s == pytest.approx(12000 / 3.35e12)
    with pytest.raises(OpError, match="axpby needs n"):
        estimate("axpby", dtype="fp32", device=H100)
    with pytest.raises(OpError, match=r"axpby has no parameter 'N' \(did you mean 'n'\?\)"):
        estimate("axpby", dtype="fp32", device=H100, N=1000)


@pytest.mark.usefixtures("registry")
def test_register_a_matrix_op_with_param_objects() -> None:
    def batched_outer(p: Any, size: int) -> Cost:
        return Cost(
            flops=p["batch"] * p["m"] * p["n"], bytes=p["batch"] * (p["m"] + p["n"] + p["m"] * p["n"]) * size
        )

    register_op("outer", [Param("m"), Param("n"), Param("batch", 2)], batched_outer, matrix=True)
    e = estimate("outer", dtype="bf16", device=H100, m=4, n=8)
    assert (e.flops, e.bytes, e.unit, e.peak_flops) == (64, 2 * 44 * 2, TC, pytest.approx(989.4e12))
    assert e.label == "outer[m=4 n=8 bf16]"


@pytest.mark.usefixtures("registry")
def test_register_duplicate_without_replace_is_an_error() -> None:
    with pytest.raises(OpError, match="op 'gemm' is already registered; pass replace=True to redefine it"):
        register_op("gemm", ["n"], _axpby)
    assert get_op("gemm").param_names == (
        "M", "N", "K", "batch", "a_dtype", "b_dtype", "c_dtype", "group_size", "scale_dtype"
    )  # fmt: skip
    register_op("axpby", ["n"], _axpby)
    with pytest.raises(OpError, match="op 'axpby' is already registered"):
        register_op("axpby", ["n"], _axpby)


@pytest.mark.usefixtures("registry")
def test_register_replace_redefines() -> None:
    register_op("axpby", ["n"], _axpby)
    new = register_op("axpby", ["n", Param("k", 1)], _axpby, replace=True)
    assert get_op("axpby") is new
    assert new.param_names == ("n", "k")


def axpby_spec(**changes: Any) -> OpSpec:
    """axpby declared as the catalogues declare their ops: every field given."""
    fields: dict[str, Any] = {
        "name": "axpby", "params": (Param("n"),), "cost_fn": _axpby, "flops_formula": "3·n",
        "bytes_formula": "3·n", "matrix": False, "complex_flops": None, "real": True, "packed": False,
        "needs_dtype": False, "aliases": ("waxpby",), "cross_check": None, "source": "BLAS-like",
    }  # fmt: skip
    return OpSpec(**{**fields, **changes})


@pytest.mark.usefixtures("registry")
def test_an_op_spec_with_every_field_registers_as_it_is() -> None:
    spec = axpby_spec()
    assert register_op(spec) is spec
    assert get_op("waxpby") is spec
    assert estimate("axpby", dtype="fp32", device=H100, n=1000).bytes == 12000
    with pytest.raises(OpError, match="axpby takes no complex data"):
        estimate("axpby", dtype="complex64", device=H100, n=1000)
    with pytest.raises(OpError, match="op 'axpby' is already registered"):
        register_op(axpby_spec())


@pytest.mark.parametrize("missing", ["complex_flops", "matrix", "real", "packed", "aliases", "cross_check"])
def test_an_op_spec_missing_a_field_is_an_error_where_it_is_declared(missing: str) -> None:
    fields = {name: getattr(axpby_spec(), name) for name in OpSpec.__dataclass_fields__ if name != missing}
    with pytest.raises(TypeError, match=f"missing 1 required keyword-only argument: '{missing}'"):
        OpSpec(**fields)


@pytest.mark.usefixtures("registry")
def test_an_op_spec_is_registered_with_no_other_field_beside_it() -> None:
    with pytest.raises(
        OpError, match="op 'axpby': an OpSpec holds every field; give register_op only replace="
    ):
        register_op(axpby_spec(), matrix=True)  # type: ignore[call-overload]
    with pytest.raises(OpError, match=r"op 'axpby': an OpSpec's params must be Param objects; got \('n',\)"):
        register_op(axpby_spec(params=("n",)))
    with pytest.raises(OpError, match="op 'axpby': complex_flops must be a positive number or None; got 0"):
        register_op(axpby_spec(complex_flops=0))
    assert "axpby" not in op_names()


@pytest.mark.usefixtures("registry")
def test_a_wrong_keyword_of_register_op_is_named_with_the_closest() -> None:
    with pytest.raises(OpError, match=r"register_op has no keyword 'matrx' \(did you mean 'matrix'\?\)"):
        register_op("axpby", ["n"], _axpby, matrx=True)  # type: ignore[call-overload]
    assert "axpby" not in op_names()


@pytest.mark.usefixtures("registry")
def test_replacing_a_builtin_drops_its_old_cross_check() -> None:
    # elementwise's own check reads p["inputs"]; a replacement without that parameter must still work
    register_op("elementwise", ["n"], _axpby, replace=True)
    assert estimate("elementwise", dtype="fp32", device=H100, n=10).flops == 30


@pytest.mark.parametrize("name", ["my-op", "", "1op", "two words", None, 3])
@pytest.mark.usefixtures("registry")
def test_register_op_name_must_be_an_identifier(name: object) -> None:
    with pytest.raises(OpError, match=rf"op name must be an identifier; got {re.escape(repr(name))}"):
        register_op(name, ["n"], _axpby)  # type: ignore[arg-type]
    assert op_names() == BUILTIN


@pytest.mark.usefixtures("registry")
def test_register_op_rejects_dtype_as_a_param() -> None:
    with pytest.raises(OpError, match="op 'axpby': 'dtype' cannot be a parameter: every caller already"):
        register_op("axpby", ["n", "dtype"], _axpby)
    with pytest.raises(OpError, match="'dtype' cannot be a parameter"):
        register_op("axpby", [Param("dtype", "fp32", "choice", ("fp32",))], _axpby)
    assert "axpby" not in op_names()


@pytest.mark.parametrize("name", ["device", "math", "op"])
@pytest.mark.usefixtures("registry")
def test_register_op_rejects_the_other_names_estimate_takes(name: str) -> None:
    # estimate(op, *, dtype, device, math, **params): a parameter named like these can never be passed
    with pytest.raises(OpError, match=name):
        register_op("axpby", ["n", name], _axpby)


@pytest.mark.usefixtures("registry")
def test_register_op_rejects_a_repeated_param() -> None:
    with pytest.raises(OpError, match=r"op 'axpby' lists a parameter twice: \['n', 'n'\]"):
        register_op("axpby", ["n", Param("n", 1)], _axpby)


@pytest.mark.parametrize("cost_fn", [None, 3, "2·n"])
@pytest.mark.usefixtures("registry")
def test_register_op_cost_must_be_callable(cost_fn: object) -> None:
    with pytest.raises(
        OpError, match=rf"cost for op 'axpby' must be callable; got {re.escape(repr(cost_fn))}"
    ):
        register_op("axpby", ["n"], cost_fn)  # type: ignore[arg-type]
    assert "axpby" not in op_names()


@pytest.mark.usefixtures("registry")
def test_unregister_op() -> None:
    register_op("axpby", ["n"], _axpby)
    unregister_op("axpby")
    assert op_names() == BUILTIN
    with pytest.raises(OpError, match="unknown op 'axpby'"):
        estimate("axpby", dtype="fp32", device=H100, n=10)
    unregister_op("never-registered")  # a no-op, not an error
    assert op_names() == BUILTIN


@pytest.mark.parametrize(
    "returned",
    [(1.0, 2.0), None, Cost(flops=-1, bytes=8), Cost(flops=1, bytes=-8), Cost(flops=float("nan"), bytes=8),
     Cost(flops=1, bytes=float("inf"))],
    ids=["tuple", "None", "negative-flops", "negative-bytes", "nan-flops", "inf-bytes"],
)  # fmt: skip
@pytest.mark.usefixtures("registry")
def test_a_registered_cost_function_returning_nonsense_is_an_op_error(returned: object) -> None:
    # a plugin's mistake must be a clear OpError naming the op, not an AttributeError deep in
    # roofline() nor a negative or NaN floor
    register_op("broken", ["n"], lambda p, size: returned)
    with pytest.raises(OpError, match="broken"):
        estimate("broken", dtype="fp32", device=H100, n=10)


@pytest.mark.parametrize("param", ["M", "N", "K"])
def test_a_size_past_a_64_bit_index_is_refused_naming_it_and_the_value_shortened(param: str) -> None:
    sizes = {"M": 64, "N": 64, "K": 64, param: 10**200}  # 2·M·N·K would overflow a float
    with pytest.raises(
        OpError, match=rf"^gemm: {param} must be at most 2\*\*63 - 1 \(9.22e\+18\); got 1.00e\+200$"
    ):
        on_h100("gemm", **sizes)
    assert on_h100("gemm", M=2**63 - 1, N=2**63 - 1, K=2**63 - 1).flops > 1e56  # the largest: finite


def test_an_amount_past_the_largest_float_is_refused_naming_it() -> None:
    with pytest.raises(
        OpError, match=r"^custom: flops is past the largest float \(1.8e\+308\); got 1.00e\+400$"
    ):
        on_h100("custom", flops=10**400)


def test_a_cost_that_overflows_says_so_briefly_with_the_parameters() -> None:
    with pytest.raises(OpError) as info:
        on_h100("elementwise", n=10**10, flops_per_element=1e300)
    assert str(info.value) == (
        "op 'elementwise' costs flops=inf; expected a finite number >= 0 (are the sizes right? "
        "n=10000000000, inputs=1, outputs=1, flops_per_element=1e+300)"
    )


@pytest.mark.usefixtures("registry")
def test_a_registered_cost_that_overflows_prints_no_hundreds_of_digits() -> None:
    register_op("power", ["n"], lambda p, size: Cost(p["n"] ** 20, 0))
    with pytest.raises(OpError) as info:
        estimate("power", dtype="fp32", device=H100, n=10**18)
    assert str(info.value) == (
        "op 'power' costs flops=1.00e+360; expected a finite number >= 0 (are the sizes right? n=1.00e+18)"
    )


@pytest.mark.usefixtures("registry")
def test_unregister_a_builtin_then_register_it_again() -> None:
    unregister_op("softmax")
    assert "softmax" not in op_names()
    register_op("softmax", ["rows", "cols"], lambda p, size: Cost(p["rows"], p["cols"] * size))
    assert cost("softmax", rows=2, cols=3) == Cost(flops=2, bytes=12)


def test_the_registry_fixture_left_the_builtins_alone() -> None:
    assert op_names() == BUILTIN
    assert get_op("elementwise").param_names == ("n", "inputs", "outputs", "flops_per_element")
    with pytest.raises(OpError, match="inputs and outputs cannot both be 0"):
        on_h100("elementwise", n=8, inputs=0, outputs=0)


# -- estimate() and devices --------------------------------------------------------------------


def test_estimate_on_a_device_object_never_touches_detection() -> None:
    toy = Device(
        key="toy", name="Toy", kind="cuda",
        peaks={(P.FP32, V): H100.peaks[(P.FP32, V)]}, bandwidth=H100.bandwidth,
    )  # fmt: skip
    e = estimate("copy", dtype="fp32", device=toy, n=1000)
    assert (e.device, e.bytes, e.flops) == (toy, 8000, 0)


def test_estimate_with_an_unknown_dtype_names_it() -> None:
    with pytest.raises(ValueError, match=r"^unknown dtype 'bf17'") as info:
        estimate("gemm", dtype="bf17", device=H100, M=1, N=1, K=1)
    assert "accepted: fp64, fp32, tf32, fp16, bf16, fp8_e4m3, fp8_e5m2, fp4, int4, int8" in str(info.value)


def test_estimate_by_table_key_and_reported_name() -> None:
    by_key = estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
    by_name = estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="NVIDIA H100 80GB HBM3")
    assert by_key.device.key == by_name.device.key == "h100-sxm"
    assert by_key.floor_s == by_name.floor_s == pytest.approx(139e-6, rel=0.005)
