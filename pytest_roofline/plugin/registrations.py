"""What a run's register hooks (``pytest_roofline_register_ops``, ``..._register_devices``) added to the
op catalogue and the device table, and what they replaced: all of it is undone at unconfigure, so a
conftest's ops and devices last one run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..model.core import Device
    from ..model.op_registry import OpSpec


class Registrations:
    """The ``register`` callables the register hooks are given, and their undoing."""

    def __init__(self) -> None:
        #: what the register hooks added, and what they replaced (restored at unconfigure)
        self.ops: dict[str, OpSpec | None] = {}
        self.devices: dict[str, Device | None] = {}

    def add_op(self, *args: Any, **kwargs: Any) -> OpSpec:
        from ..model.op_registry import OpError
        from ..model.ops import get_op, op_names, register_op

        name = args[0] if args else kwargs.get("name")
        previous = get_op(name) if isinstance(name, str) and name in op_names() else None
        try:
            spec = register_op(*args, **kwargs)
        except (OpError, TypeError) as exc:
            raise pytest.UsageError(f"{_registering('pytest_roofline_register_ops')}: {exc}") from None
        self.ops.setdefault(spec.name, previous)
        return spec

    def add_device(self, device: Device) -> Device:
        from ..model.devices import DeviceError, find_device, register_device

        key = getattr(device, "key", None)
        previous = find_device(key) if isinstance(key, str) else None
        if previous is not None and previous.key != key:
            previous = None  # found by another device's name, not this key
        try:
            register_device(device, replace=True)
        except DeviceError as exc:
            raise pytest.UsageError(f"{_registering('pytest_roofline_register_devices')}: {exc}") from None
        self.devices.setdefault(device.key, previous)
        return device

    def undo(self) -> None:
        if not self.ops and not self.devices:
            return  # nothing to undo: importing ops and devices would cost 10 to 30 ms for nothing
        from ..model.devices import register_device, unregister_device
        from ..model.ops import restore_op, unregister_op

        for name, op in self.ops.items():
            if op is None:
                unregister_op(name)
            else:  # a built-in (or earlier) op a conftest replaced for this session
                restore_op(op)
        for key, device in self.devices.items():
            if device is None:
                unregister_device(key)
            else:
                register_device(device, replace=True)
        self.ops.clear()
        self.devices.clear()


def _registering(hook: str) -> str:
    """``pytest_roofline_register_ops in /path/conftest.py``: the hook and the plugin calling ``register``."""
    from .hookcalls import registering_plugin

    plugin = registering_plugin(hook)
    return f"{hook} in {plugin}" if plugin else hook
