"""Arrays as the op inference reads them: a shape, a format and the bytes they hold, read from any
library's array (NumPy, CuPy, PyTorch) by duck typing, and what a call the catalogue knows maps to.

No library is imported here: an array is anything with a ``shape`` of integers and a ``dtype``
:func:`~.core.parse_dtype` accepts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidValueError
from .core import Precision, parse_dtype


@dataclass(frozen=True, slots=True)
class Operand:
    """One array of a call: its shape and the format it is stored in."""

    shape: tuple[int, ...]
    precision: Precision

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> float:
        return self.size * self.precision.itemsize


@dataclass(frozen=True, slots=True)
class Mapped:
    """What a library call is in the catalogue: an op, its parameters and its dtype; ``note`` says
    why a call counted by hand (``custom``) is not the op it resembles (broadcast inputs, mixed dtypes)."""

    op: str
    params: Mapping[str, Any]
    precision: Precision
    note: str = ""


def shape_of(value: object) -> tuple[int, ...] | None:
    """The shape of an array (a tuple of non-negative integers), or None for anything else."""
    if isinstance(value, type):
        return None
    shape = getattr(value, "shape", None)
    if not isinstance(shape, tuple) or getattr(value, "dtype", None) is None:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        return None
    return tuple(int(n) for n in shape)


def operand(value: object) -> Operand | None:
    """``value`` as an operand: an array whose dtype is a numeric format stored a byte or more per
    value (a packed sub-byte format is not how a NumPy, CuPy or PyTorch array stores values)."""
    shape = shape_of(value)
    if shape is None:
        return None
    try:
        precision = parse_dtype(getattr(value, "dtype", None))
    except ValueError:
        return None
    if precision.itemsize < 1:
        return None
    return Operand(shape, precision)


def is_scalar(value: object) -> bool:
    """A Python number, or a library's scalar (a NumPy scalar, a 0-d value with no ``__setitem__``):
    a value passed in a register, not bytes read from memory."""
    if isinstance(value, (bool, int, float, complex)):
        return True
    return shape_of(value) == () and not callable(getattr(type(value), "__setitem__", None))


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """NumPy's broadcast of ``shapes``, or None when they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    result: list[int] = []
    for axis in range(ndim, 0, -1):
        sizes = {s[-axis] for s in shapes if len(s) >= axis} - {1}
        if len(sizes) > 1:
            return None
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def counted(flops: float, nbytes: float, precision: Precision, note: str, *, unit: str = "vector") -> Mapped:
    """A call counted by hand: ``custom`` with its FLOPs and its bytes as the arrays really are."""
    params: dict[str, Any] = {"flops": flops, "bytes": nbytes}
    if unit != "vector":
        params["unit"] = unit
    return Mapped("custom", params, precision, note)


def inputs_read(values: Sequence[object], *, scalars: bool = True) -> dict[int, Operand] | None:
    """The arrays among ``values``, each once (an array passed twice is read once), by identity;
    scalars (where ``scalars``) left out; None when a value is neither."""
    read: dict[int, Operand] = {}
    for value in values:
        if scalars and is_scalar(value):
            continue
        found = operand(value)
        if found is None:
            return None
        read[id(value)] = found
    return read


def elementwise(
    name: str,
    read: Mapping[int, Operand],
    written: Sequence[Operand],
    results: Sequence[Precision],
    main: Precision | None,
    *,
    flops_per_element: float = 1,
) -> Mapped | None:
    """An elementwise call: ``read`` its distinct input arrays (scalars left out), ``written`` the
    arrays it writes into (``out=``; none when it allocates its result), ``results`` its outputs'
    formats. ``elementwise`` where every array has the output's shape and one format; else
    ``custom``, with the bytes of each array as it really is (a broadcast input read at its own size).
    """
    shape = broadcast_shape(*(o.shape for o in read.values()), *(w.shape for w in written))
    if shape is None or not results or any(w.shape != shape for w in written):
        return None
    n = math.prod(shape)
    if not n:  # an empty array: the op with its size, which no op takes (catalogue_call says so)
        return Mapped("elementwise", {"n": 0}, results[0])
    formats = {o.precision for o in read.values()} | set(results)
    if len(formats) == 1 and all(o.shape == shape for o in read.values()) and main in (None, *formats):
        params: dict[str, Any] = {"n": n}
        if len(read) != 1:
            params["inputs"] = len(read)
        if len(results) != 1:
            params["outputs"] = len(results)
        if flops_per_element != 1:
            params["flops_per_element"] = flops_per_element
        return Mapped("elementwise", params, results[0])
    nbytes = sum(o.nbytes for o in read.values()) + n * sum(p.itemsize for p in results)
    why = "inputs broadcast to the output" if len(formats) == 1 else "arrays in several dtypes"
    return counted(n * flops_per_element, nbytes, main or results[0], f"{name} with {why}")


def product(a: Operand, b: Operand, c: Precision, main: Precision | None) -> Mapped | None:
    """``a @ b`` with its result stored as ``c``: ``gemm``, ``gemv`` or ``dot`` (matmul's rules for
    1-D operands), or None where batch dimensions broadcast."""
    main = main or c
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        return None
    if len(sa) == 1 and len(sb) == 1:
        if sa != sb:
            return None
        if a.precision is b.precision is c is main:
            return Mapped("dot", {"n": sa[0]}, main)
        n = sa[0]
        return counted(2 * n, n * (a.precision.itemsize + b.precision.itemsize) + c.itemsize, main,
                       "a dot product across dtypes")  # fmt: skip
    if len(sb) == 1:  # y[..., M] = A[..., M, K] @ x[K]: the leading dimensions are rows of A
        if sa[-1] != sb[0]:
            return None
        dtypes = operand_dtypes(main, {"a": a.precision, "b": b.precision, "c": c})
        return Mapped("gemv", {"M": math.prod(sa[:-1]), "K": sa[-1], **dtypes}, main)
    if len(sa) == 1:  # y[N] = x[K] @ B[K, N] is Bᵀ x: the matrix is B
        if len(sb) != 2 or sa[0] != sb[0]:
            return None
        dtypes = operand_dtypes(main, {"a": b.precision, "b": a.precision, "c": c})
        return Mapped("gemv", {"M": sb[1], "K": sb[0], **dtypes}, main)
    if sa[-1] != sb[-2]:
        return None
    if len(sb) == 2:  # A's batch dimensions are more rows of one GEMM
        shape = {"M": math.prod(sa[:-1]), "N": sb[1], "K": sa[-1]}
    elif sa[:-2] == sb[:-2]:
        batch = math.prod(sa[:-2])
        shape = {"M": sa[-2], "N": sb[-1], "K": sa[-1], **({"batch": batch} if batch != 1 else {})}
    else:
        return None  # a matrix broadcast over a batch is read once, not once per product
    return Mapped(
        "gemm", {**shape, **operand_dtypes(main, {"a": a.precision, "b": b.precision, "c": c})}, main
    )


def operand_dtypes(main: Precision, operands: Mapping[str, Precision]) -> dict[str, str]:
    """``a_dtype=...`` for each operand stored in another format than ``main`` (the op's dtype)."""
    return {f"{name}_dtype": p.label for name, p in operands.items() if p is not main}


def argument_precision(op: str, where: str, dtype: object) -> Precision:
    """The format of an argument's ``dtype``, when neither the marker nor the call gives one; an error
    naming the argument when it is no numeric format, or a packed one its array cannot store."""
    try:
        precision = parse_dtype(dtype)
    except ValueError as exc:
        raise InvalidValueError(
            f"{op}: no dtype was given, and {where} has dtype {dtype}, which is not one: {exc}; "
            "pass dtype=... to the marker or the call"
        ) from None
    if precision.itemsize < 1:  # ml_dtypes' int4 and float4 take a byte per value
        raise InvalidValueError(
            f"{op}: no dtype was given, and {where} has dtype {dtype}, whose arrays store one value "
            f"per byte, not the packed {precision} the floor would count; pass dtype=... (and "
            "b_dtype='int4' for packed weights) to the marker or the call"
        )
    return precision
