"""Tier 2 for NumPy: a kernel's NumPy calls, counted in its untimed first call through a thin ndarray
subclass and priced by the catalogue, give its FLOPs; what the counter cannot see leaves them unknown,
with the reason (issue 43, item 1)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

from pytest_roofline.model.estimate import estimate
from pytest_roofline.timing.footprint import first_call, infer_call
from pytest_roofline.timing.numpy_counter import Counted, counting, plain

DEVICE = "h100-sxm"
f32 = np.float32


def seen(kernel: Any, *args: Any, **kwargs: Any) -> tuple[list[str], Any]:
    """The names of the calls ``kernel(*args, **kwargs)`` made on its counted arguments, and its result."""
    with counting(args, kwargs) as run:
        result = kernel(*run.args, **run.kwargs)
    return [call.name for call in run.calls], result


def floor_of(op: str, params: dict[str, Any], dtype: str) -> tuple[float, float, float]:
    e = estimate(op, dtype=dtype, device=DEVICE, **params)
    return e.flops, e.bytes, e.floor_s


# - a newcomer's kernels: the explicit marker's floor, counted -


def matmul(a: Any, b: Any) -> Any:
    return a @ b


def fused(x: Any, y: Any) -> Any:
    return np.maximum(2 * x + y, 0)  # relu(2x + y): three ufunc calls


def rowsum(x: Any) -> Any:
    return x.sum(axis=1)


A, B = np.ones((256, 128), f32), np.ones((128, 64), f32)
X, Y = np.ones(100_000, f32), np.full(100_000, -1.0, f32)
M = np.ones((1000, 300), f32)

NEWCOMER: list[Any] = [
    pytest.param(matmul, (A, B), ("gemm", {"M": 256, "N": 64, "K": 128}, "fp32"), 1, id="matmul"),
    pytest.param(
        fused,
        (X, Y),
        ("elementwise", {"n": 100_000, "inputs": 2, "flops_per_element": 3}, "fp32"),
        3,
        id="fused",
    ),
    pytest.param(rowsum, (M,), ("reduction", {"n": 300_000, "outputs": 1000}, "fp32"), 1, id="rowsum"),
]


@pytest.mark.parametrize(("kernel", "args", "explicit", "calls"), NEWCOMER)
def test_a_wrapped_kernel_counts_the_floor_of_its_explicit_marker(
    kernel: Any, args: tuple[Any, ...], explicit: tuple[str, dict[str, Any], str], calls: int
) -> None:
    inferred = infer_call(kernel, args, None)
    assert (inferred.tier, inferred.flops_from, inferred.counter) == ("flop_counter", "flop_counter", "NumPy")
    assert inferred.label.startswith(f"auto: FLOPs counted from {calls} NumPy call")
    counted = floor_of(inferred.op, dict(inferred.params), inferred.dtype)
    assert counted == pytest.approx(floor_of(*explicit), rel=0.01)


def test_one_counted_call_is_its_op_and_several_are_custom() -> None:
    gemm = infer_call(matmul, (A, B), None)
    assert gemm.summary == "FLOPs counted from 1 NumPy call: gemm M=256 N=64 K=128 fp32"
    assert (
        gemm.marker(0.5)
        == '@pytest.mark.speed_of_light("gemm", M=256, N=64, K=128, dtype="fp32", min_fraction=0.5)'
    )
    several = infer_call(fused, (X, Y), None)
    assert several.summary == "FLOPs counted from 3 NumPy calls, bytes from 3 arrays"
    # elementwise work on the vector peak, as the explicit elementwise op
    assert several.params == {"flops": 300_000.0, "bytes": 1_200_000}


# - each protocol: one recorded call each -


def test_a_ufunc_and_an_operator_are_recorded() -> None:
    names, result = seen(lambda x, y: np.add(x, y) - y, X, Y)
    assert names == ["np.add", "np.subtract"]
    assert type(result) is Counted  # what a call made is counted, for the next call


def test_out_writes_the_callers_array_and_comes_back_as_given() -> None:
    x, out = np.full(8, 3.0), np.zeros(8)
    names, result = seen(lambda a, o: np.multiply(a, 2.0, out=o), x, out)
    assert names == ["np.multiply"]
    assert list(out) == [6.0] * 8
    assert plain(result).base is out or np.shares_memory(plain(result), out)
    footprint = first_call(lambda a, o: np.multiply(a, 2.0, out=o), (x, np.zeros(8)), {})
    assert [(u.where, u.written) for u in footprint.arrays] == [("argument 0", False), ("argument 1", True)]
    assert footprint.count is not None
    assert footprint.count.flops == 8


def test_an_in_place_operator_writes_the_callers_array() -> None:
    x, y = np.ones(8), np.full(8, 2.0)

    def scale(a: Any, b: Any) -> None:
        a *= b

    footprint = first_call(scale, (x, y), {})
    assert list(x) == [2.0] * 8
    assert [u.written for u in footprint.arrays] == [True, False]
    assert footprint.count is not None
    assert (footprint.count.calls, footprint.count.flops) == (1, 8)


def test_reductions_as_functions_methods_and_ufunc_reduce() -> None:
    names, _ = seen(lambda m: (np.sum(m), m.sum(axis=1), m.max(), m.mean(), np.add.reduce(m, axis=1)), M)
    assert names == ["np.sum", ".sum()", ".max()", ".mean()", "np.add.reduce"]
    inferred = infer_call(lambda m: np.add.reduce(m), (M,), None)  # axis 0: reduce's default
    assert (inferred.op, dict(inferred.params)) == ("reduction", {"n": 300_000, "outputs": 300})


def test_matmul_dot_and_einsum_are_each_a_gemm() -> None:
    explicit = floor_of("gemm", {"M": 256, "N": 64, "K": 128}, "fp32")
    for kernel in (
        lambda a, b: a @ b,
        lambda a, b: np.dot(a, b),
        lambda a, b: a.dot(b),
        lambda a, b: np.einsum("ij,jk->ik", a, b),
    ):
        inferred = infer_call(kernel, (A, B), None)
        assert inferred.op == "gemm"
        assert floor_of(inferred.op, dict(inferred.params), inferred.dtype) == explicit


def test_a_call_is_counted_once_at_its_outermost_level() -> None:
    """einsum calls tensordot or dot inside, mean a sum, std several ufuncs: each is one call."""
    names, _ = seen(lambda a, b: np.einsum("ij,jk->ik", a, b, optimize=True), A, B)
    assert names == ["np.einsum"]
    assert seen(lambda m: np.mean(m, axis=0), M)[0] == ["np.mean"]
    assert seen(lambda m: m.std(), M)[0] == [".std()"]


def test_the_counted_run_computes_what_a_normal_call_does() -> None:
    for kernel, args in ((matmul, (A, B)), (fused, (X, Y)), (rowsum, (M,))):
        _, result = seen(kernel, *args)
        np.testing.assert_array_equal(plain(result), kernel(*args))
        assert type(plain(result)) is np.ndarray


def test_a_counted_array_outside_a_count_is_a_plain_one() -> None:
    """One the kernel kept in the caller's objects: it records nothing and makes plain arrays."""
    kept: list[Any] = []
    seen(lambda x: kept.append(x * 2), X)
    assert type(kept[0]) is Counted
    assert type(kept[0] + 1) is np.ndarray
    assert type(np.sum(kept[0], keepdims=True)) is np.ndarray
    assert type(kept[0].sum()) is not Counted


def test_an_index_array_is_used_and_a_gather_counts_its_sum() -> None:
    table, ids = np.ones((100, 16), f32), np.arange(8)
    inferred = infer_call(lambda t, i: t[i].sum(axis=1), (table, ids), None)
    assert inferred.summary == "FLOPs counted from 1 NumPy call, bytes from 3 arrays"
    assert inferred.params["flops"] == 8 * 16


# - what the counter cannot see: FLOPs unknown, with the reason -


def test_arrays_stripped_by_asarray_fall_back_to_the_arguments_tier() -> None:
    inferred = infer_call(lambda a, b: np.asarray(a) @ np.asarray(b), (A, B), None)
    assert (inferred.tier, inferred.flops_known) == ("arguments", False)
    assert inferred.summary == "bytes from 3 arrays, FLOPs unknown (the counter saw no NumPy call)"
    assert inferred.counter == "NumPy"


def test_one_argument_stripped_leaves_the_flops_unknown_not_short() -> None:
    def kernel(x: Any, y: Any) -> Any:
        return np.asarray(y) * 3 + x.sum()

    inferred = infer_call(kernel, (X, Y), None)
    assert not inferred.flops_known
    assert inferred.summary.endswith("FLOPs unknown (the counter did not see argument 1 used)")


def test_an_array_captured_in_a_closure_leaves_the_flops_unknown() -> None:
    weights = np.ones((128, 64), f32)
    inferred = infer_call(lambda a: a @ weights, (A,), None)
    assert not inferred.flops_known
    assert inferred.summary.endswith("(the counter did not see captured 'weights' used)")


def test_a_call_the_catalogue_cannot_price_leaves_the_flops_unknown() -> None:
    inferred = infer_call(lambda x: np.cumsum(x) * 2, (X,), None)
    assert inferred.summary == "bytes from 2 arrays, FLOPs unknown (np.cumsum has no price in the catalogue)"
    assert not infer_call(lambda x: np.multiply.accumulate(x), (X,), None).flops_known


def test_moving_data_costs_no_flops() -> None:
    inferred = infer_call(lambda a, b: np.transpose(a) @ np.concatenate([b, b], axis=1), (A.T, B), None)
    assert inferred.summary == "FLOPs counted from 3 NumPy calls, bytes from 3 arrays"
    assert inferred.params["flops"] == 2 * 256 * 128 * 128  # the product alone


def test_a_kernel_without_a_numpy_argument_is_not_counted() -> None:
    x, y = np.ones(8), np.empty(8)
    inferred = infer_call(lambda: np.multiply(x, 2.0, out=y), (), None)
    assert (inferred.summary, inferred.counter) == ("bytes from 2 arrays, FLOPs unknown", None)
    given = infer_call(matmul, (A, B), None, flops=10.0)  # flops= given: nothing to count
    assert (given.counter, given.params["flops"]) == (None, 10.0)


def test_the_counter_is_not_imported_with_the_plugin() -> None:
    script = textwrap.dedent(
        """
        import sys
        import pytest_roofline.plugin
        import pytest_roofline.timing.footprint
        assert "pytest_roofline.timing.numpy_counter" not in sys.modules
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr
