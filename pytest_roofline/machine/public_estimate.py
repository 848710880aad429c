"""``pytest_roofline.estimate()``: the model's :func:`~pytest_roofline.model.estimate.estimate`, on this
machine's devices too (this CPU's cached or, with ``measure=True``, measured ceilings; a visible GPU).
"""

from __future__ import annotations

from typing import Any

from ..model.core import Device, Estimate
from ..model.devices import DeviceError, lookup
from ..model.estimate import estimate as model_estimate
from .detect import parse_target, target_device


def estimate(
    op: str,
    *,
    dtype: object,
    device: Device | str,
    math: str | None = None,
    measure: bool = False,
    **params: Any,
) -> Estimate:
    """The speed-of-light floor of ``op`` with ``params`` in ``dtype`` on ``device``.

    ``device`` is a :class:`Device`, a key (``"h100-sxm"``), a reported name
    (``"NVIDIA H100 80GB HBM3"``), ``"cpu"``, ``"cuda[:N]"`` or ``"auto"``. This CPU's ceilings come
    from its cached calibration; with none cached, ``measure=True`` measures them now (a few seconds,
    then cached), and without it a DeviceError says so. ``math="tf32"`` lets an fp32 matrix op use
    TF32 tensor units. Bad input raises ValueError naming the parameter and the value.

    >>> e = estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
    >>> round(e.floor_s * 1e6), e.bound
    (139, 'compute')
    """
    from ..model.ops import get_op

    get_op(op)  # a misspelled op is reported before any device is looked for
    found = resolve_device(device, measure=measure)
    return model_estimate(op, dtype=dtype, device=found, math=math, **params)


def resolve_device(spec: Device | str, *, measure: bool) -> Device:
    """The device an estimate is for: a Device as it is; a table key or a reported name, no hardware
    needed; this CPU without ``measure`` and with nothing cached is a DeviceError saying how to get
    its ceilings."""
    if isinstance(spec, Device):
        return spec
    keyword = spec.strip().lower() if isinstance(spec, str) else ""
    if keyword in ("auto", "cpu", "cuda") or keyword.startswith("cuda:"):
        target = parse_target(keyword)
        return this_cpu(measure=measure, spec=keyword) if target.kind == "cpu" else target_device(target)
    return lookup(spec)  # names a non-string in its error


def this_cpu(*, measure: bool, spec: str = "cpu") -> Device:
    """This CPU with its measured ceilings: calibrated now if need be when ``measure``, else only
    what this process or the cache already knows (a DeviceError saying how, when that is nothing)."""
    from . import calibrate

    if measure:
        return calibrate.cpu_device()
    device = calibrate.cached_cpu_device()
    if device is None:
        raise DeviceError(
            f"device {spec!r} is this machine's CPU, whose ceilings are measured (a few seconds) and not "
            "cached here yet: pass measure=True to measure them now, or run `roofline calibrate` once"
        )
    return device
