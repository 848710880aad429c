"""A budget with no op, in the model: tier 1 maps each library call the catalogue knows to the floor an
explicit marker gives, to the byte and the FLOP; FLOPs and bytes given override their half; the
verdict with the FLOPs unknown; the marker that pins an inference (issue 30)."""

from __future__ import annotations

import ast
import functools
import math
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_verdict import measurement

from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.inference import (
    UNKNOWN_FLOPS,
    ArrayUse,
    FlopCount,
    Inference,
    catalogue_call,
    from_arrays,
    with_given,
)
from pytest_roofline.model.verdict import Verdict, judge, result_of

DEVICE = "h100-sxm"
Call = tuple[Callable[..., object], tuple[object, ...], dict[str, object]]
Explicit = tuple[str, dict[str, Any], str]

N = 1000
f32, f16, f64 = np.float32, np.float16, np.float64
x, y, z = np.ones(N, f32), np.ones(N, f32), np.empty(N, f32)
a, b = np.ones((64, 32), f32), np.ones((32, 16), f32)


def floor_of(op: str, params: dict[str, Any], dtype: str) -> tuple[float, float, float]:
    e = estimate(op, dtype=dtype, device=DEVICE, **params)
    return e.flops, e.bytes, e.floor_s


# - tier 1: NumPy -


NUMPY: list[Any] = [
    pytest.param((np.matmul, (a, b), {}), ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"), id="matmul"),
    pytest.param((operator.matmul, (a, b), {}), ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"), id="@"),
    pytest.param((np.dot, (a, b), {}), ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"), id="dot-2d"),
    pytest.param(
        (np.matmul, (np.ones((4, 8, 3), f16), np.ones((4, 3, 5), f16)), {}),
        ("gemm", {"M": 8, "N": 5, "K": 3, "batch": 4}, "fp16"),
        id="matmul-batched",
    ),
    pytest.param(
        (np.matmul, (np.ones((4, 64, 32), f32), b), {}),
        ("gemm", {"M": 256, "N": 16, "K": 32}, "fp32"),
        id="matmul-batch-folds-into-M",
    ),
    pytest.param(
        (np.matmul, (a, np.ones(32, f64)), {}),
        ("gemv", {"M": 64, "K": 32, "a_dtype": "fp32"}, "fp64"),
        id="matvec-mixed-dtypes",
    ),
    pytest.param((np.matmul, (np.ones(32, f32), b), {}), ("gemv", {"M": 16, "K": 32}, "fp32"), id="vecmat"),
    pytest.param((np.dot, (x, y), {}), ("dot", {"n": N}, "fp32"), id="dot-1d"),
    pytest.param(
        (np.matmul, (a, b), {"out": np.empty((64, 16), f64)}),
        ("gemm", {"M": 64, "N": 16, "K": 32, "a_dtype": "fp32", "b_dtype": "fp32"}, "fp64"),
        id="matmul-out-in-another-dtype",
    ),
    pytest.param((np.add, (x, y), {"out": z}), ("elementwise", {"n": N, "inputs": 2}, "fp32"), id="add-out"),
    pytest.param(
        (np.add, (x, y, z), {}), ("elementwise", {"n": N, "inputs": 2}, "fp32"), id="add-positional-out"
    ),
    pytest.param((np.exp, (x,), {}), ("elementwise", {"n": N}, "fp32"), id="exp"),
    pytest.param((np.multiply, (x, 2.0), {}), ("elementwise", {"n": N}, "fp32"), id="scalar-operand"),
    pytest.param((np.add, (x, x), {}), ("elementwise", {"n": N}, "fp32"), id="one-array-twice"),
    pytest.param((np.add, (x, y), {"out": x}), ("elementwise", {"n": N, "inputs": 2}, "fp32"), id="in-place"),
    pytest.param(
        (np.divmod, (x, y), {}),
        ("elementwise", {"n": N, "inputs": 2, "outputs": 2}, "fp32"),
        id="two-outputs",
    ),
    pytest.param(
        (functools.partial(np.multiply, out=z), (x, 2.0), {}), ("elementwise", {"n": N}, "fp32"), id="partial"
    ),
    pytest.param(
        (np.add, (a, np.ones(32, f32)), {}),
        ("custom", {"flops": 2048, "bytes": (2048 + 32 + 2048) * 4}, "fp32"),
        id="broadcast-row",
    ),
    pytest.param(
        (np.greater, (x, y), {}),
        ("custom", {"flops": N, "bytes": 2 * N * 4 + N}, "bool"),
        id="compare-into-bool",
    ),
    pytest.param(
        (np.add, (np.ones(N, f16), y), {}),
        ("custom", {"flops": N, "bytes": N * (2 + 4 + 4)}, "fp32"),
        id="mixed-dtypes",
    ),
    pytest.param((np.copyto, (z, x), {}), ("copy", {"n": N}, "fp32"), id="copyto"),
    pytest.param(
        (np.copyto, (z, 0.0), {}), ("custom", {"flops": 0, "bytes": N * 4}, "fp32"), id="copyto-scalar"
    ),
    pytest.param(
        (np.sum, (a,), {"axis": 1}), ("reduction", {"n": 2048, "outputs": 64}, "fp32"), id="sum-axis"
    ),
    pytest.param((np.sum, (a,), {}), ("reduction", {"n": 2048}, "fp32"), id="sum-all"),
    pytest.param((np.max, (a,), {"axis": (0, 1)}), ("reduction", {"n": 2048}, "fp32"), id="max-axes"),
    pytest.param((np.mean, (a, 0), {}), ("reduction", {"n": 2048, "outputs": 32}, "fp32"), id="mean-axis"),
    pytest.param((a.sum, (), {"axis": -1}), ("reduction", {"n": 2048, "outputs": 64}, "fp32"), id="method"),
    pytest.param(
        (np.sum, (np.ones(N, np.int8),), {}),
        ("custom", {"flops": N, "bytes": N + 8}, "int64"),
        id="sum-of-int8-is-int64",
    ),
    pytest.param(
        (np.sum, (np.ones((4, 250), f16),), {"axis": 1, "dtype": f64}),
        ("custom", {"flops": N, "bytes": N * 2 + 4 * 8}, "fp64"),
        id="sum-of-fp16-into-fp64",
    ),
    # issue 40: each fell to "FLOPs unknown"
    pytest.param((a.dot, (b,), {}), ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"), id="dot-method"),
    pytest.param((a.dot, (np.ones(32, f32),), {}), ("gemv", {"M": 64, "K": 32}, "fp32"), id="dot-method-1d"),
    pytest.param(
        (np.einsum, ("ij,jk->ik", a, b), {}), ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"), id="einsum"
    ),
    pytest.param(
        (np.einsum, ("mk, kn", a, b), {"optimize": True}),
        ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"),
        id="einsum-implicit",
    ),
    pytest.param(
        (np.einsum, ("bij,bjk->bik", np.ones((4, 8, 3), f16), np.ones((4, 3, 5), f16)), {}),
        ("gemm", {"M": 8, "N": 5, "K": 3, "batch": 4}, "fp16"),
        id="einsum-batched",
    ),
]


@pytest.mark.parametrize(("call", "explicit"), NUMPY)
def test_a_numpy_call_has_the_floor_of_its_explicit_marker(call: Call, explicit: Explicit) -> None:
    fn, args, kwargs = call
    inferred = catalogue_call(fn, args, kwargs)
    assert inferred is not None
    op, params, dtype = explicit
    assert (inferred.tier, inferred.op, dict(inferred.params), inferred.dtype) == (
        "catalogue",
        op,
        params,
        dtype,
    )
    assert floor_of(inferred.op, dict(inferred.params), inferred.dtype) == floor_of(op, params, dtype)


def test_a_sum_into_another_dtype_says_so() -> None:
    inferred = catalogue_call(np.sum, (np.ones(N, f16),), {"dtype": f64})
    assert inferred is not None
    assert inferred.summary == f"custom flops={N} bytes={N * 2 + 8} fp64 (a sum of fp16 into fp64)"


def test_elementwise_bytes_are_the_arrays_own() -> None:
    """The catalogue's count is what the arrays hold: each input read once, the output written once."""
    inferred = catalogue_call(np.add, (x, y), {"out": z})
    assert inferred is not None
    assert floor_of(inferred.op, dict(inferred.params), inferred.dtype)[1] == x.nbytes + y.nbytes + z.nbytes


def _user_add(*args: object) -> None:
    """A function of the user's that shares a name with NumPy's."""


_user_add.__name__ = "add"

UNMAPPED: list[Any] = [
    pytest.param((np.add, (x, y), {"where": x > 0}), id="where-mask"),
    pytest.param((np.matmul, (np.ones((1, 8, 3)), np.ones((4, 3, 5))), {}), id="broadcast-batch"),
    pytest.param((np.dot, (np.ones((2, 3, 4)), np.ones((4, 5))), {}), id="dot-of-3d"),
    pytest.param((_user_add, (x, y), {}), id="same-name-other-function"),
    pytest.param((np.add, ([1.0, 2.0], y[:2]), {}), id="a-list"),
    pytest.param((np.sum, (a,), {"axis": 5}), id="axis-out-of-range"),
    pytest.param((lambda: None, (), {}), id="a-lambda"),
    pytest.param((np.einsum, ("ij,kj->ik", a, b.T), {}), id="einsum-transposed"),
    pytest.param((np.einsum, ("ij,jk->ki", a, b), {}), id="einsum-transposed-out"),
    pytest.param((np.einsum, ("...ij,...jk->...ik", a, b), {}), id="einsum-ellipsis"),
    pytest.param((np.einsum, ("ij,jk,kl->il", a, b, b.T), {}), id="einsum-three"),
    pytest.param((np.einsum, (a, [0, 1], b, [1, 2]), {}), id="einsum-sublists"),
    pytest.param((np.einsum, ("ij,jk->ik", a, b[:31]), {}), id="einsum-shapes-disagree"),
    pytest.param((a.dot, (np.ones((2, 32, 4)),), {}), id="dot-method-of-3d"),
]


@pytest.mark.parametrize("call", UNMAPPED)
def test_a_call_that_does_not_fit_maps_to_nothing(call: Call) -> None:
    fn, args, kwargs = call
    assert catalogue_call(fn, args, kwargs) is None


EMPTY: list[Any] = [
    pytest.param((np.sqrt, (np.ones(0, f32),), {}), "elementwise: n", id="ufunc"),
    pytest.param(
        (np.add, (np.ones(0, f32), 1.0), {"out": np.ones(0, f64)}), "elementwise: n", id="ufunc-out"
    ),
    pytest.param((np.sum, (np.ones(0, f32),), {}), "reduction: n", id="sum"),
    pytest.param((np.ones((0, 3), f32).max, (), {"axis": 0}), "reduction: n", id="max-method"),
    pytest.param((np.copyto, (np.ones(0, f32), np.ones(0, f32)), {}), "copy: n", id="copyto"),
    pytest.param((np.matmul, (np.ones((0, 3), f32), b[:3]), {}), "gemm: M", id="matmul"),
]


@pytest.mark.parametrize(("call", "culprit"), EMPTY)
def test_a_known_call_on_an_empty_array_says_its_size_is_zero(call: Call, culprit: str) -> None:
    """Issue 40: it fell to the arguments' tier, which said the kernel held no array."""
    fn, args, kwargs = call
    zero = f"the kernel's call is .* on an empty array: {culprit} must be a positive integer; got 0$"
    with pytest.raises(ValueError, match=zero):
        catalogue_call(fn, args, kwargs)


def test_a_given_dtype_is_the_ops_and_keeps_each_operands_storage() -> None:
    inferred = catalogue_call(np.matmul, (a, b), {}, dtype=None)
    from pytest_roofline.model.core import Precision

    tf = catalogue_call(np.matmul, (a.astype(f16), b.astype(f16)), {}, dtype=Precision.FP32)
    assert inferred is not None
    assert tf is not None
    assert dict(tf.params) == {
        "M": 64,
        "N": 16,
        "K": 32,
        "a_dtype": "fp16",
        "b_dtype": "fp16",
        "c_dtype": "fp16",
    }
    assert tf.dtype == "fp32"
    # an elementwise op has no operand dtypes: counted as the arrays are, with the given dtype's peak
    add = catalogue_call(np.add, (x, y), {}, dtype=Precision.BF16)
    assert add is not None
    assert add.op == "custom"
    assert add.params["bytes"] == 3 * N * 4
    assert add.dtype == "bf16"


# - tier 1: PyTorch, on a small fake of its API (CI has no PyTorch), and on the real one where installed -


class FakeDtype:
    def __init__(self, name: str, itemsize: int) -> None:
        self.name, self.itemsize = name, itemsize

    def __str__(self) -> str:
        return f"torch.{self.name}"


class FakeTensor:
    """Shape, dtype and bytes: what tier 1 reads of a tensor."""

    def __init__(self, shape: tuple[int, ...], dtype: FakeDtype) -> None:
        self.shape, self.dtype = tuple(shape), dtype
        self.nbytes = math.prod(shape) * dtype.itemsize

    def __setitem__(self, key: object, value: object) -> None:
        raise NotImplementedError


def fake_torch() -> types.ModuleType:
    """``torch`` with the functions tier 1 maps (each a distinct object), ``Tensor``, ``empty``,
    ``result_type`` and ``nn.functional``."""
    torch = types.ModuleType("torch")
    for name, size in (("float32", 4), ("bfloat16", 2), ("float16", 2)):
        setattr(torch, name, FakeDtype(name, size))
    torch.Tensor = FakeTensor
    torch.empty = lambda *shape, dtype: FakeTensor(shape, dtype)
    torch.result_type = lambda p, q: max(
        (t.dtype for t in (p, q) if isinstance(t, FakeTensor)), key=lambda d: d.itemsize
    )

    def function(name: str) -> Callable[..., object]:
        def fn(*args: object, **kwargs: object) -> object:
            raise NotImplementedError(name)

        fn.__name__ = name
        return fn

    for name in ("mm", "bmm", "matmul", "addmm", "add", "mul"):
        setattr(torch, name, function(name))
    torch.nn = types.ModuleType("torch.nn")
    functional = torch.nn.functional = types.ModuleType("torch.nn.functional")
    for name in (
        "linear",
        "layer_norm",
        "rms_norm",
        "softmax",
        "silu",
        "gelu",
        "scaled_dot_product_attention",
    ):
        setattr(functional, name, function(name))
    return torch


@pytest.fixture(params=["fake", "real"])
def torch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    if request.param == "real":
        return pytest.importorskip("torch")
    module = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", module)
    return module


TorchCall = Callable[[Any], Call]


def t(torch: Any, *shape: int, dtype: str = "float32") -> Any:
    return torch.empty(*shape, dtype=getattr(torch, dtype))


TORCH: list[Any] = [
    pytest.param(
        lambda T: (T.mm, (t(T, 64, 32), t(T, 32, 16)), {}),
        ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"),
        id="mm",
    ),
    pytest.param(
        lambda T: (T.bmm, (t(T, 4, 8, 3), t(T, 4, 3, 5)), {}),
        ("gemm", {"M": 8, "N": 5, "K": 3, "batch": 4}, "fp32"),
        id="bmm",
    ),
    pytest.param(
        lambda T: (T.matmul, (t(T, 2, 64, 32, dtype="bfloat16"), t(T, 32, 16, dtype="bfloat16")), {}),
        ("gemm", {"M": 128, "N": 16, "K": 32}, "bf16"),
        id="matmul",
    ),
    pytest.param(
        lambda T: (operator.matmul, (t(T, 64, 32), t(T, 32, 16)), {}),
        ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"),
        id="@",
    ),
    pytest.param(
        lambda T: (T.addmm, (t(T, 16), t(T, 64, 32), t(T, 32, 16)), {}),
        ("gemm", {"M": 64, "N": 16, "K": 32}, "fp32"),
        id="addmm",
    ),
    pytest.param(
        lambda T: (T.nn.functional.linear, (t(T, 8, 10, 32), t(T, 16, 32), t(T, 16)), {}),
        ("gemm", {"M": 80, "N": 16, "K": 32}, "fp32"),
        id="linear",
    ),
    pytest.param(
        lambda T: (T.nn.functional.layer_norm, (t(T, 64, 128), (128,), t(T, 128), t(T, 128)), {}),
        ("layernorm", {"rows": 64, "cols": 128}, "fp32"),
        id="layer_norm",
    ),
    pytest.param(
        lambda T: (T.nn.functional.layer_norm, (t(T, 64, 128), [128]), {}),
        ("custom", {"flops": 8 * 64 * 128, "bytes": 2 * 64 * 128 * 4}, "fp32"),
        id="layer_norm-no-affine",
    ),
    pytest.param(
        lambda T: (T.nn.functional.rms_norm, (t(T, 4, 16, 128), (128,)), {"weight": t(T, 128)}),
        ("rmsnorm", {"rows": 64, "cols": 128}, "fp32"),
        id="rms_norm",
    ),
    pytest.param(
        lambda T: (T.nn.functional.softmax, (t(T, 64, 128),), {"dim": -1}),
        ("softmax", {"rows": 64, "cols": 128}, "fp32"),
        id="softmax",
    ),
    pytest.param(
        lambda T: (T.nn.functional.softmax, (t(T, 64, 128), 0), {}),
        ("softmax", {"rows": 128, "cols": 64}, "fp32"),
        id="softmax-dim-0",
    ),
    pytest.param(
        lambda T: (T.nn.functional.silu, (t(T, 1000),), {}),
        ("elementwise", {"n": 1000, "flops_per_element": 4}, "fp32"),
        id="silu",
    ),
    pytest.param(
        lambda T: (T.nn.functional.gelu, (t(T, 1000),), {"approximate": "tanh"}),
        ("elementwise", {"n": 1000, "flops_per_element": 9}, "fp32"),
        id="gelu-tanh",
    ),
    pytest.param(
        lambda T: (T.add, (t(T, 1000), t(T, 1000)), {"alpha": 2}),
        ("elementwise", {"n": 1000, "inputs": 2, "flops_per_element": 2}, "fp32"),
        id="add-alpha",
    ),
    pytest.param(
        lambda T: (T.mul, (t(T, 1000), 3.0), {}), ("elementwise", {"n": 1000}, "fp32"), id="mul-scalar"
    ),
    pytest.param(
        lambda T: (
            T.nn.functional.scaled_dot_product_attention,
            (
                t(T, 2, 8, 64, 32, dtype="float16"),
                t(T, 2, 2, 64, 32, dtype="float16"),
                t(T, 2, 2, 64, 32, dtype="float16"),
            ),
            {"is_causal": True, "enable_gqa": True},
        ),
        (
            "attention",
            {"batch": 2, "heads": 8, "seq_q": 64, "seq_k": 64, "head_dim": 32, "causal": True, "kv_heads": 2},
            "fp16",
        ),
        id="sdpa-gqa-causal",
    ),
    pytest.param(
        lambda T: (
            T.nn.functional.scaled_dot_product_attention,
            (t(T, 2, 4, 1, 64), t(T, 2, 4, 300, 64), t(T, 2, 4, 300, 128)),
            {},
        ),
        (
            "attention",
            {"batch": 2, "heads": 4, "seq_q": 1, "seq_k": 300, "head_dim": 64, "head_dim_v": 128},
            "fp32",
        ),
        id="sdpa-decode",
    ),
]


@pytest.mark.parametrize(("call", "explicit"), TORCH)
def test_a_torch_call_has_the_floor_of_its_explicit_marker(
    torch: Any, call: TorchCall, explicit: Explicit
) -> None:
    fn, args, kwargs = call(torch)
    inferred = catalogue_call(fn, args, kwargs)
    assert inferred is not None
    op, params, dtype = explicit
    assert (inferred.op, dict(inferred.params), inferred.dtype) == (op, params, dtype)
    assert floor_of(inferred.op, dict(inferred.params), inferred.dtype) == floor_of(op, params, dtype)


TORCH_UNMAPPED: list[Any] = [
    pytest.param(
        lambda T: (
            T.nn.functional.scaled_dot_product_attention,
            (t(T, 2, 4, 8, 16),) * 3,
            {"attn_mask": t(T, 8, 8)},
        ),
        id="sdpa-mask",
    ),
    pytest.param(
        lambda T: (
            T.nn.functional.scaled_dot_product_attention,
            (t(T, 2, 4, 8, 16), t(T, 2, 4, 32, 16), t(T, 2, 4, 32, 16)),
            {"is_causal": True},
        ),
        id="sdpa-causal-top-left",
    ),
    pytest.param(
        lambda T: (
            T.nn.functional.scaled_dot_product_attention,
            (t(T, 2, 8, 8, 16), t(T, 2, 2, 8, 16), t(T, 2, 2, 8, 16)),
            {},
        ),
        id="sdpa-gqa-not-enabled",
    ),
    pytest.param(lambda T: (T.mm, (t(T, 4, 5), t(T, 6, 7)), {}), id="mm-shapes-disagree"),
]


@pytest.mark.parametrize("call", TORCH_UNMAPPED)
def test_a_torch_call_that_does_not_fit_maps_to_nothing(torch: Any, call: TorchCall) -> None:
    fn, args, kwargs = call(torch)
    assert catalogue_call(fn, args, kwargs) is None


def test_without_torch_no_torch_call_is_recognised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    fake = fake_torch()
    assert catalogue_call(fake.mm, (FakeTensor((4, 5), FakeDtype("float32", 4)),) * 2, {}) is None
    assert "torch" not in sys.modules


# - flops= and bytes= override their half -


def test_flops_given_replace_the_flops_alone() -> None:
    gemm = catalogue_call(np.matmul, (a, b), {})
    assert gemm is not None
    flops, nbytes, _ = floor_of("gemm", {"M": 64, "N": 16, "K": 32}, "fp32")
    given = with_given(gemm, flops=1e9)
    assert (given.op, given.params) == ("custom", {"flops": 1e9, "bytes": nbytes, "unit": "tensor"})
    assert (given.flops_from, given.bytes_from) == ("given", "catalogue")
    only_bytes = with_given(gemm, nbytes=123.0)
    assert only_bytes.params == {"flops": flops, "bytes": 123.0, "unit": "tensor"}
    assert with_given(gemm) is gemm


def test_arrays_give_the_bytes_and_no_flops() -> None:
    uses = (ArrayUse("argument 0", 4000), ArrayUse("argument 1", 4000, written=True))
    from pytest_roofline.model.core import Precision

    unknown = from_arrays(uses, Precision.FP32)
    assert (unknown.tier, unknown.params, unknown.flops_known) == (
        "arguments",
        {"flops": 0.0, "bytes": 8000},
        False,
    )
    assert unknown.label == "auto: bytes from 2 arrays, FLOPs unknown"
    counted = from_arrays(uses, Precision.FP32, counted=FlopCount("FlopCounterMode", 6144))
    assert counted.tier == "flop_counter"
    assert counted.params == {
        "flops": 6144.0,
        "bytes": 8000,
        "unit": "tensor",
    }
    # FlopCounterMode saw no matmul
    none_counted = from_arrays(uses, Precision.FP32, counted=FlopCount("FlopCounterMode", 0))
    assert none_counted.tier == "arguments"
    assert not none_counted.flops_known
    both = from_arrays((), Precision.FP32, flops=10.0, nbytes=20.0)
    assert both.summary == "bytes= given, flops= given"
    assert both.bytes_from == "given"
    with pytest.raises(ValueError, match="nothing to infer one from"):
        from_arrays((), Precision.FP32)
    empty = (ArrayUse("argument 0", 0), ArrayUse("the return value", 0, returned=True))
    zero = r"every array the kernel holds is empty \(argument 0, the return value\): their size must be"
    with pytest.raises(ValueError, match=zero + " a positive integer; got 0$"):
        from_arrays(empty, Precision.FP32)
    with pytest.raises(ValueError, match="no array to read a dtype from"):
        from_arrays((), None, flops=1.0)


# - the marker that pins an inference -


def _marker_call(text: str) -> tuple[str, dict[str, Any]]:
    call = ast.parse(text.split("  #")[0].removeprefix("@"), mode="eval").body
    assert isinstance(call, ast.Call)
    op = ast.literal_eval(call.args[0])
    return op, {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}


@pytest.mark.parametrize(("call", "explicit"), NUMPY[:12])
def test_the_suggested_marker_gives_the_same_floor(call: Call, explicit: Explicit) -> None:
    fn, args, kwargs = call
    inferred = catalogue_call(fn, args, kwargs)
    assert inferred is not None
    op, params = _marker_call(inferred.marker(0.5))
    dtype, min_fraction = params.pop("dtype"), params.pop("min_fraction")
    assert min_fraction == 0.5
    assert floor_of(op, params, dtype) == floor_of(*explicit)


def test_a_marker_with_the_flops_unknown_says_so() -> None:
    from pytest_roofline.model.core import Precision

    inferred = from_arrays((ArrayUse("argument 0", 4096),), Precision.FP32)
    assert inferred.marker() == (
        '@pytest.mark.speed_of_light("custom", bytes=4096, dtype="fp32")'
        "  # FLOPs unknown: count them and add flops="
    )


# - the verdict from partial knowledge -


def _arguments_inference(nbytes: int = 2**28) -> Inference:
    from pytest_roofline.model.core import Precision

    return from_arrays((ArrayUse("argument 0", nbytes),), Precision.BF16)


def _memory_estimate(nbytes: int = 2**28) -> Any:
    return estimate("custom", bytes=nbytes, dtype="bf16", device=DEVICE)


def test_a_miss_with_the_flops_unknown_is_inconclusive() -> None:
    est, inference = _memory_estimate(), _arguments_inference()
    slow = measurement(est.floor_s * 10)
    assert judge(est, slow, 0.5).verdict is Verdict.MISS  # the same floor, given as an op: a miss
    judged = judge(est, slow, 0.5, inference=inference)
    assert (judged.verdict, judged.reason) == (Verdict.INCONCLUSIVE, UNKNOWN_FLOPS)
    result = result_of(est, [slow], 0.5, inference=inference)
    assert result.flops_unknown
    assert "Attained is a lower bound" in result.message()
    assert "never fails the test" in result.message()


def test_a_miss_with_the_flops_counted_from_numpy_calls_is_a_miss() -> None:
    """Issue 43: counted FLOPs are known FLOPs; the miss fails, as an explicit marker's does."""
    from pytest_roofline.model.core import Precision

    uses = (ArrayUse("argument 0", 2**27), ArrayUse("the return value", 2**27, written=True, returned=True))
    counted = from_arrays(uses, Precision.BF16, counted=FlopCount("NumPy", 2.0**40, calls=3))
    assert counted.summary == "FLOPs counted from 3 NumPy calls, bytes from 2 arrays"
    est = estimate(counted.op, dtype=counted.dtype, device=DEVICE, **counted.params)
    judged = judge(est, measurement(est.floor_s * 3), 0.5, inference=counted)
    assert (judged.verdict, judged.reason) == (Verdict.MISS, "")
    unknown = from_arrays(
        uses, Precision.BF16, counted=FlopCount("NumPy", None, 3, why="np.cumsum has no price")
    )
    assert unknown.summary == "bytes from 2 arrays, FLOPs unknown (np.cumsum has no price)"
    assert judge(est, measurement(est.floor_s * 3), 0.5, inference=unknown).verdict is Verdict.INCONCLUSIVE


def test_a_pass_with_the_flops_unknown_is_a_pass() -> None:
    est = _memory_estimate()
    assert (
        judge(est, measurement(est.floor_s * 1.5), 0.5, inference=_arguments_inference()).verdict
        is Verdict.PASS
    )


def test_a_partial_reader_reads_faster_than_light_and_is_told_to_declare_the_op() -> None:
    """An embedding table read at a few rows: its bytes, counted whole, are far more than it moves."""
    est = _memory_estimate()
    result = result_of(est, [measurement(est.floor_s / 50)], 0.5, inference=_arguments_inference())
    assert result.verdict is Verdict.FASTER_THAN_LIGHT
    message = result.message()
    assert "its bytes were inferred from the arrays it was given or captured, each counted whole" in message
    assert "argument 0 (256 MiB, not written)" in message
    assert 'declare the op, @pytest.mark.speed_of_light("<op>", ...)' in message
    explicit = result_of(est, [measurement(est.floor_s / 50)], 0.5)  # the op was given: the usual message
    assert "declare the op" not in explicit.message()
