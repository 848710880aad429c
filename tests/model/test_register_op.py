"""``register_op``: a new op end to end, every field explicit, the mistakes it names, replacing and
unregistering, cost functions that return nonsense or overflow."""

from __future__ import annotations

import re
from typing import Any

import pytest
from op_costs import BUILTIN, H100, cost, on_h100

from pytest_roofline.model import op_registry
from pytest_roofline.model.core import Cost, Unit
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.op_registry import OpError, OpSpec, Param
from pytest_roofline.model.ops import get_op, op_names, register_op, unregister_op

V, TC = Unit.VECTOR, Unit.TENSOR


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register, replace and unregister ops without leaking into the next test."""
    monkeypatch.setattr(op_registry, "_REGISTRY", dict(op_registry._REGISTRY))
    monkeypatch.setattr(op_registry, "_ALIASES", dict(op_registry._ALIASES))


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


@pytest.mark.parametrize("name", ["stream", "block", "setup", "kwargs", "cache", "max_time"])
@pytest.mark.usefixtures("registry")
def test_register_op_rejects_what_the_marker_or_the_fixture_would_take(name: str) -> None:
    # a parameter named stream= once passed: the fixture then took its value as the CUDA stream
    with pytest.raises(OpError, match=f"'{name}' cannot be a parameter: every caller already uses it"):
        register_op("axpby", ["n", name], _axpby)
    assert "axpby" not in op_names()


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
