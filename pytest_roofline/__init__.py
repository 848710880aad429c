"""pytest-roofline: speed-of-light performance budgets for kernel tests.

The model and the op catalogue import neither pytest nor CuPy, so they work from a notebook::

    >>> import pytest_roofline as rl
    >>> e = rl.estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
    >>> f"{e.floor_s * 1e6:.0f} µs, {e.bound}-bound"
    '139 µs, compute-bound'

Every name is imported on first use: pytest loads this package for its plugin entry point in every
run, and a run that measures nothing should pay for nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .detect import detect_device, get_device
    from .devices import DeviceError, DeviceProperties, register_device, unregister_device
    from .floor import estimate
    from .model import Cost, Device, Estimate, Figure, MemoryLevel, Precision, Source, Unit, parse_dtype
    from .ops import OpError, OpSpec, Param, get_op, op_names, register_op, unregister_op
    from .timing import Measurement, Policy, measure

#: public name -> the module that defines it
_LAZY = {
    "Cost": "model",
    "Device": "model",
    "Estimate": "model",
    "Figure": "model",
    "MemoryLevel": "model",
    "Precision": "model",
    "Source": "model",
    "Unit": "model",
    "parse_dtype": "model",
    "DeviceError": "devices",
    "DeviceProperties": "devices",
    "register_device": "devices",
    "unregister_device": "devices",
    "OpError": "ops",
    "OpSpec": "ops",
    "Param": "ops",
    "get_op": "ops",
    "op_names": "ops",
    "register_op": "ops",
    "unregister_op": "ops",
    "estimate": "floor",
    "detect_device": "detect",
    "get_device": "detect",
    "Measurement": "timing",
    "Policy": "timing",
    "measure": "timing",
}

__all__ = [
    "Cost",
    "Device",
    "DeviceError",
    "DeviceProperties",
    "Estimate",
    "Figure",
    "Measurement",
    "MemoryLevel",
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
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next lookup is an ordinary one
    return value


def __dir__() -> list[str]:
    return __all__
