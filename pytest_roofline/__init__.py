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

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import RooflineError, RooflineUsageError, RooflineWarning
    from .machine.detect import detect_device, get_device
    from .machine.estimate import estimate
    from .model.core import Cost, Device, Estimate, Figure, MemoryLevel, Precision, Source, Unit, parse_dtype
    from .model.devices import DeviceError, DeviceProperties, register_device, unregister_device
    from .model.ops import OpError, OpSpec, Param, get_op, op_names, register_op, unregister_op
    from .model.verdict import Result, Verdict
    from .plugin.fixture import Roofline
    from .timing import Measurement, Policy, measure

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
    "OpError": "model.ops",
    "OpSpec": "model.ops",
    "Param": "model.ops",
    "get_op": "model.ops",
    "op_names": "model.ops",
    "register_op": "model.ops",
    "unregister_op": "model.ops",
    "Result": "model.verdict",
    "Verdict": "model.verdict",
    "Roofline": "plugin.fixture",
    "estimate": "machine.estimate",
    "detect_device": "machine.detect",
    "get_device": "machine.detect",
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


# - the import paths modules had before they were grouped by layer, kept working for one release -

#: old module path -> where the module lives now
_MOVED = {
    f"pytest_roofline.{old}": f"pytest_roofline.{new}"
    for old, new in {
        "stats": "model.stats", "units": "model.units", "ops": "model.ops", "llm_ops": "model.llm_ops",
        "llm": "model.llm", "devices": "model.devices", "floor": "model.estimate", "peaks": "model.peaks",
        "ceilings": "model.ceilings", "verdict": "model.verdict",
        "contention": "timing.contention", "probes": "timing.probes",
        "calibrate": "machine.calibrate", "cachelevels": "machine.cachelevels",
        "cpupeak": "machine.cpupeak", "detect": "machine.detect", "devicelock": "machine.devicelock",
        "compiler": "analysis.compiler", "ptx": "analysis.ptx", "sass": "analysis.sass",
        "occupancy": "analysis.occupancy", "kernelfacts": "analysis.kernelfacts",
        "diagnosis": "analysis.diagnosis",
        "report": "output.report", "markdown": "output.markdown", "plot": "output.plot",
        "baseline": "output.baseline", "comparison": "output.comparison",
        "hookspecs": "plugin.hookspecs", "hookcalls": "plugin.hookcalls", "options": "plugin.options",
        "marker": "plugin.marker", "fixture": "plugin.fixture", "session": "plugin.session",
        "request": "plugin.request", "failing": "plugin.failing",
        "summary": "plugin.summary", "gating": "plugin.gate", "resolution": "plugin.run_devices",
    }.items()
}  # fmt: skip


class _MovedModules:
    """A finder (on ``sys.meta_path``) and loader for the old paths only: ``import pytest_roofline.ops``
    gives the module now at ``pytest_roofline.model.ops`` (the same object), with a DeprecationWarning."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> Any:
        if fullname not in _MOVED:
            return None
        from importlib.util import spec_from_loader

        return spec_from_loader(fullname, self)  # type: ignore[arg-type]

    def create_module(self, spec: Any) -> Any:
        import warnings

        new = _MOVED[spec.name]
        warnings.warn(
            f"{spec.name} has moved to {new}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        module = import_module(new)
        spec.loader_state = module.__spec__  # importlib gives the module this spec: exec_module undoes it
        return module

    def exec_module(self, module: Any) -> None:
        """The module at the new path has run already. Imported under its old name it was given the
        old name's spec: its own goes back, or every relative import it makes later warns
        ``__package__ != __spec__.parent`` (an ImportWarning; an error under ``-W error``)."""
        module.__spec__ = module.__spec__.loader_state


if not any(type(finder).__name__ == "_MovedModules" for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


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
