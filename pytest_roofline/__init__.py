"""pytest-roofline: speed-of-light performance budgets for kernel tests.

The model and the op catalogue import neither pytest nor CuPy, so they work from a notebook::

    >>> import pytest_roofline as rl
    >>> e = rl.estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
    >>> f"{e.floor_s * 1e6:.0f} µs, {e.bound}-bound"
    '139 µs, compute-bound'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .devices import DeviceError, DeviceProperties, register_device, unregister_device
from .floor import estimate
from .model import (
    Cost,
    Device,
    Estimate,
    Figure,
    Precision,
    Source,
    Unit,
    parse_dtype,
)
from .ops import OpError, OpSpec, Param, get_op, op_names, register_op, unregister_op

if TYPE_CHECKING:
    from .detect import detect_device, get_device
    from .timing import Measurement, Policy, measure

__all__ = [
    "Cost",
    "Device",
    "DeviceError",
    "DeviceProperties",
    "Estimate",
    "Figure",
    "Measurement",
    "OpError",
    "OpSpec",
    "Param",
    "Policy",
    "Precision",
    "Source",
    "Unit",
    "__version__",
    "detect_device",
    "estimate",
    "get_device",
    "get_op",
    "measure",
    "op_names",
    "parse_dtype",
    "register_device",
    "register_op",
    "unregister_device",
    "unregister_op",
]

# Loaded on first use: detection may calibrate or import CuPy, and timing is not needed for estimates.
_LAZY = {
    "detect_device": "detect",
    "get_device": "detect",
    "measure": "timing",
    "Measurement": "timing",
    "Policy": "timing",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("pytest-roofline")
        except PackageNotFoundError:  # running from a source tree
            return "0+unknown"
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_roofline' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)
