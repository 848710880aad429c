"""PyTorch's calls the catalogue knows, mapped to its ops with the shape from the tensors.

Which calls, and how each counts: docs/usage.md ("Budgets without an op"), docs/floor.md ("A call
with no op"). Matched by identity with PyTorch's own functions, in the ``torch`` module already
imported: without PyTorch nothing here runs, and nothing imports it.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from .array_operands import Mapped, counted, elementwise, inputs_read, operand, operand_dtypes, product
from .core import Precision, parse_dtype

Handler = Callable[[Any, Sequence[object], Mapping[str, object], "Precision | None"], "Mapped | None"]

#: FLOPs an element of each activation (an exp, erf or tanh counted as one)
ACTIVATION_FLOPS = {"silu": 4, "gelu": 5, "gelu_tanh": 9}


def map_torch_call(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    """The op a PyTorch call is, or None; ``main`` is the dtype the caller gave (None: the output's)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if fn is operator.matmul:
        tensor = getattr(torch, "Tensor", None)
        if (
            len(args) == 2
            and not kwargs
            and isinstance(tensor, type)
            and all(isinstance(a, tensor) for a in args)
        ):
            return _matmul(torch, args, {}, main)
        return None
    functional = getattr(getattr(torch, "nn", None), "functional", None)
    for module, handlers in ((torch, _TORCH), (functional, _FUNCTIONAL)):
        if module is None:
            continue
        names = vars(module)
        for name, handler in handlers.items():
            if names.get(name) is fn:
                return handler(torch, args, kwargs, main)
    return None


def _bind(
    args: Sequence[object], kwargs: Mapping[str, object], names: Sequence[str]
) -> dict[str, object] | None:
    """The call's arguments by name, or None for one PyTorch's signature does not have here."""
    if len(args) > len(names):
        return None
    bound = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key in bound or key not in names:
            return None
        bound[key] = value
    return bound


def _result(torch: Any, out: object, *operands: object) -> Precision | None:
    """The format of the result: ``out``'s, or the operands' promoted (``torch.result_type``)."""
    try:
        if out is not None:
            given = operand(out)
            return None if given is None else given.precision
        dtype = operands[0].dtype if len(operands) == 1 else torch.result_type(*operands)  # type: ignore[attr-defined]
        return parse_dtype(dtype)
    except (TypeError, ValueError, RuntimeError):
        return None


def _product(
    names: Sequence[str],
    first: str,
    second: str,
    ndim: int | None,
    torch: Any,
    args: Sequence[object],
    kwargs: Mapping[str, object],
    main: Precision | None,
) -> Mapped | None:
    """A matrix product whose signature is ``names``, its operands ``first`` and ``second`` (of
    ``ndim`` dimensions each, where given)."""
    bound = _bind(args, kwargs, names)
    if bound is None or second not in bound:
        return None
    a, b = operand(bound[first]), operand(bound[second])
    if a is None or b is None or (ndim is not None and not len(a.shape) == len(b.shape) == ndim):
        return None
    c = _result(torch, bound.get("out"), bound[first], bound[second])
    return None if c is None else product(a, b, c, main)


_mm = partial(_product, ("input", "mat2", "out"), "input", "mat2", 2)
_bmm = partial(_product, ("input", "mat2", "out"), "input", "mat2", 3)
_matmul = partial(_product, ("input", "other", "out"), "input", "other", None)
_addmm = partial(_product, ("input", "mat1", "mat2", "beta", "alpha", "out"), "mat1", "mat2", 2)


def _linear(
    torch: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    bound = _bind(args, kwargs, ("input", "weight", "bias"))
    if bound is None or "weight" not in bound:
        return None
    x, w = operand(bound["input"]), operand(bound["weight"])
    if x is None or w is None or len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
        return None
    c = x.precision
    main = main or c
    dtypes = operand_dtypes(main, {"a": x.precision, "b": w.precision, "c": c})
    return Mapped("gemm", {"M": math.prod(x.shape[:-1]), "N": w.shape[0], "K": w.shape[1], **dtypes}, main)


def _rows_cols(shape: tuple[int, ...], normalized: object) -> tuple[int, int] | None:
    """(rows, cols) of a norm over the trailing ``normalized`` dimensions."""
    dims = (normalized,) if isinstance(normalized, int) else normalized
    if (
        not isinstance(dims, (tuple, list))
        or not dims
        or tuple(shape[len(shape) - len(dims) :]) != tuple(dims)
    ):
        return None
    cols = math.prod(dims)
    return (math.prod(shape) // cols, cols) if cols else None


def _norm(
    kind: str,
    flops: int,
    names: Sequence[str],
    torch: Any,
    args: Sequence[object],
    kwargs: Mapping[str, object],
    main: Precision | None,
) -> Mapped | None:
    bound = _bind(args, kwargs, names)
    if bound is None or "normalized_shape" not in bound:
        return None
    x = operand(bound["input"])
    shape = _rows_cols(x.shape, bound["normalized_shape"]) if x is not None else None
    if x is None or shape is None:
        return None
    rows, cols = shape
    affine = [bound.get(name) for name in names if name in ("weight", "bias")]
    found = [operand(value) for value in affine if value is not None]
    p = main or x.precision
    affine_fits = all(f is not None and f.shape == (cols,) and f.precision is p for f in found)
    if len(found) == len(affine) and affine_fits and x.precision is p:
        return Mapped(kind, {"rows": rows, "cols": cols}, p)
    moved = 2 * x.nbytes + sum(f.nbytes for f in found if f is not None)
    return counted(flops * rows * cols, moved, p, f"{kind} without its affine parameters, or across dtypes")


def _softmax(
    torch: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    bound = _bind(args, kwargs, ("input", "dim", "_stacklevel", "dtype"))
    x = operand(bound["input"]) if bound is not None and "input" in bound else None
    if bound is None or x is None or not x.size:
        return None
    dim = bound.get("dim")
    if dim is None:  # PyTorch's implicit choice (it warns): F._get_softmax_dim
        dim = 0 if len(x.shape) in (0, 1, 3) else 1
    if not isinstance(dim, int) or not x.shape or not -len(x.shape) <= dim < len(x.shape):
        return None
    cols = x.shape[dim]
    rows = x.size // cols
    dtype = bound.get("dtype")
    try:
        result = parse_dtype(dtype) if dtype is not None else x.precision
    except ValueError:
        return None
    p = main or result
    if result is x.precision is p:
        return Mapped("softmax", {"rows": rows, "cols": cols}, p)
    return counted(
        5 * x.size, x.size * (x.precision.itemsize + result.itemsize), p, "a softmax across dtypes"
    )


def _activation(
    name: str,
    names: Sequence[str],
    torch: Any,
    args: Sequence[object],
    kwargs: Mapping[str, object],
    main: Precision | None,
) -> Mapped | None:
    bound = _bind(args, kwargs, names)
    if bound is None or "input" not in bound:
        return None
    read = inputs_read([bound["input"]], scalars=False)
    if not read:
        return None
    flops = ACTIVATION_FLOPS["gelu_tanh" if bound.get("approximate") == "tanh" else name]
    results = [next(iter(read.values())).precision]
    return elementwise(name, read, [], results, main, flops_per_element=flops)


def _binary(
    name: str,
    names: Sequence[str],
    torch: Any,
    args: Sequence[object],
    kwargs: Mapping[str, object],
    main: Precision | None,
) -> Mapped | None:
    bound = _bind(args, kwargs, names)
    if bound is None or "other" not in bound:
        return None
    read = inputs_read([bound["input"], bound["other"]])
    out = bound.get("out")
    written = inputs_read([out], scalars=False) if out is not None else {}
    if read is None or written is None:
        return None
    result = _result(torch, out, bound["input"], bound["other"])
    if result is None:
        return None
    flops = 2 if bound.get("alpha", 1) != 1 else 1
    return elementwise(name, read, list(written.values()), [result], main, flops_per_element=flops)


def _attention(
    torch: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    bound = _bind(args, kwargs, names)
    if bound is None or "value" not in bound or bound.get("attn_mask") is not None:
        return None
    q, k, v = (operand(bound[name]) for name in ("query", "key", "value"))
    if q is None or k is None or v is None or not len(q.shape) == len(k.shape) == len(v.shape) >= 2:
        return None
    lead = q.shape[:-3]
    if (
        k.shape[:-3] != lead
        or v.shape[:-3] != lead
        or k.shape[-2] != v.shape[-2]
        or q.shape[-1] != k.shape[-1]
    ):
        return None
    heads, kv_heads = (q.shape[-3], k.shape[-3]) if len(q.shape) >= 3 else (1, 1)
    if (len(q.shape) >= 3 and v.shape[-3] != kv_heads) or k.precision is not v.precision:
        return None
    if kv_heads != heads and not bound.get("enable_gqa"):
        return None  # PyTorch refuses the call
    seq_q, seq_k, causal = q.shape[-2], k.shape[-2], bool(bound.get("is_causal"))
    if causal and seq_q != seq_k:
        return None  # PyTorch's causal mask is aligned top-left, the catalogue's bottom-right
    p = main or q.precision
    params: dict[str, Any] = {
        "batch": math.prod(lead), "heads": heads, "seq_q": seq_q, "seq_k": seq_k, "head_dim": q.shape[-1],
        **operand_dtypes(p, {"q": q.precision, "kv": k.precision, "o": q.precision}),
    }  # fmt: skip
    if causal:
        params["causal"] = True
    if kv_heads != heads:
        params["kv_heads"] = kv_heads
    if v.shape[-1] != q.shape[-1]:
        params["head_dim_v"] = v.shape[-1]
    return Mapped("attention", params, p)


_layer_norm = partial(_norm, "layernorm", 8, ("input", "normalized_shape", "weight", "bias", "eps"))
_rms_norm = partial(_norm, "rmsnorm", 4, ("input", "normalized_shape", "weight", "eps"))
_silu = partial(_activation, "silu", ("input", "inplace"))
_gelu = partial(_activation, "gelu", ("input", "approximate"))
_add = partial(_binary, "add", ("input", "other", "alpha", "out"))
_mul = partial(_binary, "mul", ("input", "other", "out"))

_TORCH: dict[str, Handler] = {
    "mm": _mm, "bmm": _bmm, "matmul": _matmul, "addmm": _addmm, "add": _add, "mul": _mul, "multiply": _mul,
}  # fmt: skip
_FUNCTIONAL: dict[str, Handler] = {
    "linear": _linear, "layer_norm": _layer_norm, "rms_norm": _rms_norm, "softmax": _softmax,
    "silu": _silu, "gelu": _gelu, "scaled_dot_product_attention": _attention,
}  # fmt: skip
