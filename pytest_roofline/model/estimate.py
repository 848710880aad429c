"""``estimate()``: the speed-of-light floor of a named op on a device, checked from end to end."""

from __future__ import annotations

from typing import Any, Literal

from .core import Device, Estimate, Precision, Unit, parse_dtype, roofline
from .ops import OpError, OpSpec, check_params, get_op

Math = Literal["tf32", "ieee"]
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
    """The (precision, unit) whose peak bounds this op.

    Matrix-shaped ops use tensor units when the device has them for the precision, except fp32,
    which runs on tensor units (as TF32) only when the caller says ``math="tf32"``: fp32 GEMMs are
    IEEE by default in cuBLAS, CuPy and PyTorch, so the TF32 peak would set an unreachable floor.
    Complex data is real arithmetic on its components: complex64 runs as fp32 does (TF32 tensor
    units with ``math="tf32"``), complex128 as fp64 (whose tensor units cuBLAS uses for ZGEMM).
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


def estimate(
    op: str, *, dtype: object, device: Device | str, math: str | None = None, **params: Any
) -> Estimate:
    """The speed-of-light floor of ``op`` with ``params`` in ``dtype`` on ``device``.

    ``device`` is a :class:`Device`, a key (``"h100-sxm"``), a reported name
    (``"NVIDIA H100 80GB HBM3"``), ``"cpu"`` (measured on first use), ``"cuda[:N]"`` or ``"auto"``.
    ``math="tf32"`` lets an fp32 matrix op use TF32 tensor units. Bad input raises ValueError naming
    the parameter and the value.

    >>> e = estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
    >>> round(e.floor_s * 1e6), e.bound
    (139, 'compute')
    """
    spec = get_op(op)
    checked = check_params(spec, params)
    precision = parse_dtype(dtype)
    spec.check_dtype(precision)
    peak_precision, unit = select_unit(spec, checked, precision, math)
    if not isinstance(device, Device):
        device = _device(device)
    cost = spec.cost(checked, precision)
    return roofline(
        cost,
        precision,
        unit,
        device,
        op=spec.name,
        # a parameter not given and with no default (an operand's dtype) is left out of the record
        params={name: value for name, value in checked.items() if value is not None},
        label=spec.label(checked, precision),
        shape=spec.shape(checked),
        peak_precision=peak_precision,
    )


def _device(spec: object) -> Device:
    """A device from a spec; detection (and CuPy) only for ``auto`` and ``cuda[:N]``."""
    from ..machine.detect import detect_device, get_device  # lazily: "cpu" calibrates on first use

    if isinstance(spec, str):
        keyword = spec.strip().lower()
        if keyword == "auto" or keyword == "cuda" or keyword.startswith("cuda:"):
            return detect_device(keyword)
    return get_device(spec)  # type: ignore[arg-type]  # get_device names a non-string in its error
