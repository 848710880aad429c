"""Which compute unit's peak bounds an op, at which precision: tensor units for matrix-shaped ops where
the device has them, vector units otherwise, and the math mode (``"ieee"`` or ``"tf32"``) that lets an
fp32 matrix op use TF32 tensor units."""

from __future__ import annotations

from typing import Any

from .core import Precision, Unit
from .op_registry import OpError, OpSpec

MATH_MODES: tuple[str, ...] = ("ieee", "tf32")


def check_math(math: object, precision: Precision | None = None) -> None:
    """None, ``"ieee"`` or ``"tf32"``, and tf32 only for fp32 data (when ``precision`` is known); an
    OpError naming the value otherwise."""
    if math is not None and math not in MATH_MODES:
        raise OpError(f"math must be one of {', '.join(map(repr, MATH_MODES))}; got {math!r}")
    tf32_data = (Precision.FP32, Precision.TF32, Precision.COMPLEX64)
    if math == "tf32" and precision is not None and precision not in tf32_data:
        raise OpError(f"math='tf32' applies to fp32 (or complex64) data only; dtype is {precision}")


def select_unit(
    spec: OpSpec, params: dict[str, Any], precision: Precision, math: str | None
) -> tuple[Precision, Unit]:
    """The (precision, unit) whose peak bounds this op: a matrix-shaped op's tensor units (fp32's only
    with ``math="tf32"``, as TF32), complex data as its components' precision. Why: docs/floor.md
    ("Precisions and units").
    """
    check_math(math, precision)
    if precision.component is not None:
        return select_unit(spec, params, precision.component, math)
    unit = spec.unit_for(params)
    if unit is Unit.VECTOR:
        return precision, unit
    if precision is Precision.FP32:
        return (Precision.TF32, Unit.TENSOR) if math == "tf32" else (Precision.FP32, Unit.VECTOR)
    if precision is Precision.TF32 and math == "ieee":
        return Precision.FP32, Unit.VECTOR
    return precision, unit
