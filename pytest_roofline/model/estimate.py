"""``estimate()``: the speed-of-light floor of a named op on a device, checked from end to end."""

from __future__ import annotations

import re
from typing import Any

from .core import Device, Estimate, parse_dtype, roofline
from .devices import DeviceError, lookup
from .ops import get_op
from .unit_choice import select_unit

#: the specs that name this machine's hardware rather than a table entry
THIS_MACHINE = re.compile(r"auto|cpu|cuda(:.*)?")


def estimate(
    op: str, *, dtype: object, device: Device | str, math: str | None = None, **params: Any
) -> Estimate:
    """The speed-of-light floor of ``op`` with ``params`` in ``dtype`` on ``device``.

    ``device`` is a :class:`Device`, a key (``"h100-sxm"``) or a reported name (``"NVIDIA H100 80GB
    HBM3"``); this machine's devices (``"cpu"``, ``"cuda[:N]"``, ``"auto"``) are found, or measured,
    by :func:`pytest_roofline.estimate`, never here. ``math="tf32"`` lets an fp32 matrix op use TF32
    tensor units. Bad input raises ValueError naming the parameter and the value.

    >>> e = estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
    >>> round(e.floor_s * 1e6), e.bound
    (139, 'compute')
    """
    spec = get_op(op)
    checked = spec.check(params)
    precision = parse_dtype(dtype)
    spec.check_dtype(precision)
    peak_precision, unit = select_unit(spec, checked, precision, math)
    if isinstance(device, str) and THIS_MACHINE.fullmatch(device.strip().lower()):
        # this machine's devices need detection or a calibration: the machine layer's
        raise DeviceError(
            f"device {device!r} is this machine's: pytest_roofline.estimate(..., device={device!r}) finds it "
            "(the CPU from its cached calibration; measure=True measures it), or pass a Device or a "
            "table key (`roofline devices`)"
        )
    if not isinstance(device, Device):
        device = lookup(device)
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
