"""pytest-roofline: speed-of-light performance budgets for kernel tests.

The public API: the model and the op catalogue import neither pytest nor CuPy (``rl.estimate`` in a
notebook: docs/cli.md), and every name is imported on first use (a run that measures nothing pays
for nothing: docs/options.md ("Options")).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import RooflineError, RooflineUsageError, RooflineWarning
    from .machine.detect import detect_device, get_device
    from .machine.public_estimate import estimate
    from .model.core import Cost, Device, Estimate, Figure, MemoryLevel, Precision, Source, Unit, parse_dtype
    from .model.devices import DeviceError, DeviceProperties, register_device, unregister_device
    from .model.measurement import Measurement
    from .model.op_registry import OpError, OpSpec, Param
    from .model.ops import get_op, op_names, register_op, unregister_op
    from .model.policy import Policy
    from .model.verdict import Result, Verdict
    from .plugin.fixture import Roofline
    from .timing.engine import measure

#: public name -> the module that defines it
_LAZY = {
    "RooflineError": "errors",
    "RooflineUsageError": "errors",
    "RooflineWarning": "errors",
    "Cost": "model.core",
    "Device": "model.core",
    "Estimate": "model.core",
    "Figure": "model.core",
    "MemoryLevel": "model.core",
    "Precision": "model.core",
    "Source": "model.core",
    "Unit": "model.core",
    "parse_dtype": "model.core",
    "DeviceError": "model.devices",
    "DeviceProperties": "model.devices",
    "register_device": "model.devices",
    "unregister_device": "model.devices",
    "OpError": "model.op_registry",
    "OpSpec": "model.op_registry",
    "Param": "model.op_registry",
    # defined in model.op_registry; taken from model.ops, whose import registers the built-in ops
    "get_op": "model.ops",
    "op_names": "model.ops",
    "register_op": "model.ops",
    "unregister_op": "model.ops",
    "Result": "model.verdict",
    "Verdict": "model.verdict",
    "Roofline": "plugin.fixture",
    "estimate": "machine.public_estimate",
    "detect_device": "machine.detect",
    "get_device": "machine.detect",
    "Measurement": "model.measurement",
    "Policy": "model.policy",
    "measure": "timing.engine",
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
    "Result",
    "Roofline",
    "RooflineError",
    "RooflineUsageError",
    "RooflineWarning",
    "Source",
    "Unit",
    "Verdict",
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
