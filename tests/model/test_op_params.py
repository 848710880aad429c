"""An op's parameters checked: unknown ops and names with a "did you mean", sizes, counts, amounts,
flags, choices, the cross-checks, sizes and costs past what a float holds; ``OpSpec`` and ``Param``."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from op_costs import BUILTIN, H100, cost, on_h100

from pytest_roofline.model.core import Precision, Unit
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.op_registry import REQUIRED, OpError, Param
from pytest_roofline.model.ops import get_op

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR


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


# -- sizes and costs past what a float holds -------------------------------------------------------


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
