"""The op catalogue and ``estimate()``: every formula by hand, causal attention, the references'
own numbers."""

from __future__ import annotations

from typing import Any

import pytest
from op_costs import BUILTIN, H100, cost, on_h100

from pytest_roofline.model import ops
from pytest_roofline.model.core import Cost, Device, Precision, Source, Unit, parse_dtype
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.ops import get_op, op_names

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR


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
    checked = spec.check(params)
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
