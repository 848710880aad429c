"""NumPy's and CuPy's calls the catalogue knows, mapped to its ops with the shape from the arguments.

Which calls, and how each counts: docs/usage.md ("Budgets without an op"), docs/floor.md ("A call
with no op"). A call is matched by identity with the library's own function, in the module already
imported (``sys.modules``: nothing is imported here); one that does not fit maps to nothing.
"""

from __future__ import annotations

import math
import operator
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from .array_operands import (
    Mapped,
    broadcast_shape,
    counted,
    elementwise,
    inputs_read,
    is_scalar,
    operand,
    product,
)
from .core import Precision, parse_dtype

#: reductions, by the library's name, and the kind of reduction each is
_REDUCTIONS = {"sum": "sum", "max": "max", "amax": "max", "min": "min", "amin": "min", "mean": "mean"}
_LIBRARIES = ("numpy", "cupy")
#: keywords that change neither the work nor the bytes of the call
_HARMLESS = frozenset({"casting", "order", "subok", "keepdims", "initial"})
#: functions that view, copy or rearrange their arguments and compute nothing
_MOVES_ONLY = frozenset({
    "reshape", "ravel", "transpose", "swapaxes", "moveaxis", "squeeze", "expand_dims", "broadcast_to",
    "atleast_1d", "atleast_2d", "atleast_3d", "concatenate", "stack", "hstack", "vstack", "copy",
    "empty_like", "zeros_like", "ones_like", "full_like", "take", "flip", "roll", "tile", "repeat",
})  # fmt: skip


def map_array_call(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    """The op a NumPy or CuPy call is, or None; ``main`` is the dtype the caller gave (None: the
    output's)."""
    numpy = sys.modules.get("numpy")
    if numpy is None:  # no NumPy, no CuPy (which imports it): no array of theirs to call
        return None
    if fn is operator.matmul:
        if len(args) == 2 and not kwargs and all(_library_array(a) for a in args):
            return _matmul(numpy, args, {}, main)
        return None
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    if name in _REDUCTIONS and _library_array(owner):  # x.sum(axis=1)
        return _reduction(numpy, _REDUCTIONS[name], owner, args, kwargs, main)
    if name == "dot" and _library_array(owner):  # a.dot(b)
        return _dot(numpy, (owner, *args), kwargs, main)
    for library in _LIBRARIES:
        module = sys.modules.get(library)
        if module is None:
            continue
        names = vars(module)
        known = next((n for n in (*_FUNCTIONS, *_REDUCTIONS) if names.get(n) is fn), None)
        if known in _FUNCTIONS:
            return _FUNCTIONS[known](numpy, args, kwargs, main)
        if known in _REDUCTIONS:
            return _reduction(numpy, _REDUCTIONS[known], args[0] if args else None, args[1:], kwargs, main)
        ufunc = getattr(module, "ufunc", None)
        if isinstance(ufunc, type) and isinstance(fn, ufunc) and getattr(fn, "signature", None) is None:
            return _ufunc(numpy, fn, args, kwargs, main)
    return None


def moves_only(fn: object) -> bool:
    """Whether ``fn`` is a NumPy or CuPy function that only views or moves data: no FLOPs."""
    for library in _LIBRARIES:
        module = sys.modules.get(library)
        name = getattr(fn, "__name__", None)
        if module is not None and name in _MOVES_ONLY and vars(module).get(name) is fn:
            return True
    return False


def _library_array(value: object) -> bool:
    return type(value).__module__.split(".")[0] in _LIBRARIES and operand(value) is not None


def _bind(
    args: Sequence[object], kwargs: Mapping[str, object], names: Sequence[str]
) -> dict[str, object] | None:
    """The call's arguments by name; None for one the mapping does not know (it may change the work)
    or a ``where=`` mask (it does only part of it)."""
    if len(args) > len(names):
        return None
    bound = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key in bound:
            return None
        if key in names:
            bound[key] = value
        elif key == "where":
            if value is not True:
                return None
        elif key not in _HARMLESS:
            return None
    return bound


def _matmul(
    numpy: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    kw = dict(kwargs)
    dtype = kw.pop("dtype", None)
    bound = _bind(args, kw, ("x1", "x2", "out"))
    if bound is None or "x2" not in bound:
        return None
    a, b = operand(bound["x1"]), operand(bound["x2"])
    if a is None or b is None:
        return None
    c = _result(numpy, bound.get("out"), dtype, (bound["x1"], bound["x2"]))
    return None if c is None else product(a, b, c, main)


def _dot(
    numpy: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    bound = _bind(args, kwargs, ("a", "b", "out"))
    if bound is None or "b" not in bound:
        return None
    a, b = operand(bound["a"]), operand(bound["b"])
    if a is None or b is None or len(a.shape) > 2 or len(b.shape) > 2:
        return None  # dot of N-D arrays is no matrix product of the kind counted here
    c = _result(numpy, bound.get("out"), None, (bound["a"], bound["b"]))
    return None if c is None else product(a, b, c, main)


def _einsum(
    numpy: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    """``einsum`` of two operands whose subscripts are a matrix product, batched or not
    (``ij,jk->ik``, ``ij,jk``, ``bij,bjk->bik``): ``matmul``'s op; any other einsum maps to nothing."""
    if len(args) != 3 or not isinstance(args[0], str) or not _is_matmul(args[0]):
        return None
    kw = {k: v for k, v in kwargs.items() if k != "optimize"}  # the path of two operands is one product
    return _matmul(numpy, args[1:], kw, main)


def _is_matmul(subscripts: str) -> bool:
    """Whether einsum's ``subscripts`` are ``...mk,...kn->...mn`` with the same batch letters on each
    side and no letter repeated within an operand (the output implicit or explicit)."""
    inputs, arrow, output = subscripts.replace(" ", "").partition("->")
    a, _, b = inputs.partition(",")
    if not arrow:  # NumPy's implicit output: the letters seen once, in alphabetical order
        output = "".join(sorted(c for c in set(a + b) if (a + b).count(c) == 1))
    letters = a + b + output
    if not letters.isalpha() or not letters.isascii() or len(a) < 2 or not len(a) == len(b) == len(output):
        return False
    batch = a[:-2]
    m, k, n = a[-2], a[-1], b[-1]
    return (
        b == f"{batch}{k}{n}" and output == f"{batch}{m}{n}"
        and len(set(batch + m + k + n)) == len(batch) + 3
    )  # fmt: skip


def _result(numpy: Any, out: object, dtype: object, operands: Sequence[object]) -> Precision | None:
    """The format of a product's result: ``out``'s, ``dtype=``'s, or the operands' promoted."""
    try:
        if out is not None:
            given = operand(out)
            return None if given is None else given.precision
        dtypes = [getattr(x, "dtype", None) for x in operands]
        return parse_dtype(numpy.dtype(dtype) if dtype is not None else numpy.result_type(*dtypes))
    except (TypeError, ValueError):
        return None


def _copyto(
    numpy: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    bound = _bind(args, kwargs, ("dst", "src", "casting", "where"))
    if bound is None or "src" not in bound or bound.get("where", True) is not True:
        return None
    dst = operand(bound["dst"])
    if dst is None:
        return None
    if not dst.size:
        return Mapped("copy", {"n": 0}, dst.precision)
    src_value = bound["src"]
    if is_scalar(src_value):
        return counted(0, dst.nbytes, main or dst.precision, "copyto of a scalar: written only")
    src = operand(src_value)
    if src is None or broadcast_shape(src.shape, dst.shape) != dst.shape:
        return None
    if src.shape == dst.shape and src.precision is dst.precision and main in (None, dst.precision):
        return Mapped("copy", {"n": dst.size}, dst.precision)
    return counted(
        0, src.nbytes + dst.nbytes, main or dst.precision, "copyto across dtypes or from a broadcast source"
    )


def _axes(axis: object, ndim: int) -> tuple[int, ...] | None:
    """The axes a reduction runs over, each in range; None for an axis that is not one."""
    if axis is None:
        return tuple(range(ndim))
    given = axis if isinstance(axis, tuple) else (axis,)
    if not all(isinstance(a, int) and not isinstance(a, bool) and -ndim <= a < ndim for a in given):
        return None
    axes = tuple(sorted({a % ndim for a in given}))
    return axes if len(axes) == len(given) else None


def _reduction(
    numpy: Any, kind: str, array: object, args: Sequence[object], kwargs: Mapping[str, object],
    main: Precision | None,
) -> Mapped | None:  # fmt: skip
    names = ("axis", "dtype", "out") if kind in ("sum", "mean") else ("axis", "out")
    bound = _bind(args, kwargs, names)
    a = operand(array)
    if bound is None or a is None:
        return None
    if not a.size:
        return Mapped("reduction", {"n": 0}, a.precision)
    axes = _axes(bound.get("axis"), len(a.shape))
    if axes is None:
        return None
    outputs = math.prod(n for i, n in enumerate(a.shape) if i not in axes)
    out = bound.get("out")
    given = operand(out) if out is not None else None
    result = given.precision if given is not None else _reduced(numpy, kind, array, bound.get("dtype"))
    if result is None:
        return None
    p = a.precision
    if result is p and main in (None, p):
        return Mapped("reduction", {"n": a.size, **({"outputs": outputs} if outputs != 1 else {})}, p)
    return counted(a.size, a.nbytes + outputs * result.itemsize, main or result,
                   f"a {kind} of {p} into {result}")  # fmt: skip


def _reduced(numpy: Any, kind: str, array: object, dtype: object) -> Precision | None:
    """The format a reduction's result takes (NumPy's rules, which CuPy follows: a sum of int8 is an
    int64, a mean of integers a float64), read off the same reduction of one element."""
    try:
        probe = numpy.ones(1, dtype=numpy.dtype(array.dtype))  # type: ignore[attr-defined]
        reduce = {"sum": numpy.sum, "mean": numpy.mean, "max": numpy.max, "min": numpy.min}[kind]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = reduce(probe, **({"dtype": dtype} if dtype is not None else {}))
        return parse_dtype(result.dtype)
    except (TypeError, ValueError):
        return None


def _ufunc(
    numpy: Any, fn: Any, args: Sequence[object], kwargs: Mapping[str, object], main: Precision | None
) -> Mapped | None:
    nin, nout = int(fn.nin), int(fn.nout)
    if not nin <= len(args) <= nin + nout:
        return None
    inputs, outs = list(args[:nin]), list(args[nin:])
    kw = dict(kwargs)
    out = kw.pop("out", None)
    if out is not None:
        if outs:
            return None
        outs = list(out) if isinstance(out, tuple) else [out]
    dtype = kw.pop("dtype", None)
    if _bind((), kw, ()) is None or (outs and len(outs) != nout):
        return None
    read, written = inputs_read(inputs), inputs_read(outs, scalars=False)
    if read is None or written is None:
        return None
    results = [w.precision for w in written.values()] or _resolved(numpy, fn, inputs, dtype)
    return elementwise(str(fn.__name__), read, list(written.values()), results, main)


def _resolved(numpy: Any, fn: Any, inputs: Sequence[object], dtype: object) -> list[Precision]:
    """The formats of a ufunc's outputs, by NumPy's own type resolution (``ufunc.resolve_dtypes``;
    a CuPy ufunc by NumPy's of the same name); [] when it cannot say."""
    ufunc = fn if isinstance(fn, numpy.ufunc) else getattr(numpy, str(fn.__name__), None)
    if not isinstance(ufunc, numpy.ufunc) or (ufunc.nin, ufunc.nout) != (fn.nin, fn.nout):
        return []
    given: list[object] = []
    for value in inputs:
        if isinstance(value, bool):
            given.append(numpy.dtype(bool))
        elif isinstance(value, (int, float, complex)):
            given.append(type(value))  # a Python number: a weak type, NumPy 2's promotion
        else:
            given.append(numpy.dtype(value.dtype))  # type: ignore[attr-defined]
    wanted = [numpy.dtype(dtype) if dtype is not None else None] * int(fn.nout)
    try:
        resolved = ufunc.resolve_dtypes((*given, *wanted))
        return [parse_dtype(d) for d in resolved[ufunc.nin :]]
    except (TypeError, ValueError, AttributeError):  # AttributeError: NumPy before 1.24
        return []


#: the library functions mapped here beside the reductions, by name
_FUNCTIONS = {"matmul": _matmul, "dot": _dot, "einsum": _einsum, "copyto": _copyto}
