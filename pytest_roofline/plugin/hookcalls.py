"""Calling the plugin's own hooks so that a plugin's mistake names the plugin.

:func:`first_result` checks a ``firstresult`` hook's answer and names the hook and the plugin that
gave a wrong one; :func:`registering_plugin` finds the plugin whose register hook made a bad
``register(...)`` call. No pytest here, only pluggy's public API. docs/usage.md ("Hooks").
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from pluggy import HookCaller

from ..errors import RooflineUsageError
from ..model.units import brief

#: what an answer's check returns: "" when the answer is fine, else what is wrong with it
Check = Callable[[object], str]


class HookResultError(RooflineUsageError, RuntimeError):
    """A hook implementation returned something the plugin cannot use; the message names it."""


def first_result(hook: HookCaller, check: Check, **kwargs: Any) -> Any:
    """The first non-None answer of ``hook``'s implementations (pluggy's ``firstresult``); a wrong one
    raises HookResultError naming the hook, the plugin (unless a wrapper exists) and the value."""
    impls = hook.get_hookimpls()
    if any(impl.wrapper or impl.hookwrapper for impl in impls):
        result = hook(**kwargs)
        _raise_if_wrong(hook.name, "", result, check)
        return result
    for impl in reversed(impls):  # pluggy calls the last registered (and tryfirst) first
        result = impl.function(*(kwargs[name] for name in impl.argnames))
        if result is not None:
            _raise_if_wrong(hook.name, impl.plugin_name, result, check)
            return result
    return None


def _raise_if_wrong(hook: str, plugin: str, result: object, check: Check) -> None:
    problem = check(result) if result is not None else ""
    if problem:
        where = f"{hook} in {plugin}" if plugin else hook
        raise HookResultError(f"{where} returned {brief(result)} (a {type(result).__name__}): {problem}")


def registering_plugin(hook_name: str) -> str:
    """The file of the ``hook_name`` implementation that is calling us (a register hook's
    ``register``), or "" when none is on the stack."""
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name == hook_name:
            return frame.f_code.co_filename
        frame = frame.f_back
    return ""


# -- checks --------------------------------------------------------------------------------------


def is_device(result: object) -> str:
    from ..model.core import Device

    return "" if isinstance(result, Device) else "expected a pytest_roofline.Device"


def is_backend(result: object) -> str:
    """Why ``result`` is no :class:`~.timing.base.Backend`: what it lacks, or that it is no subclass."""
    from ..timing.base import Backend

    lacks = [name for name in ("run", "clock") if not callable(getattr(result, name, None))]
    lacks += [name for name in ("name", "device_name") if not isinstance(getattr(result, name, None), str)]
    resolution = getattr(result, "resolution_s", None)
    if (
        isinstance(resolution, bool)
        or not isinstance(resolution, (int, float))
        or not (math.isfinite(resolution) and resolution > 0)
    ):
        lacks.append("resolution_s")
    expected = "expected a timer backend (a subclass of pytest_roofline.timing.base.Backend)"
    if not lacks:
        return "" if isinstance(result, Backend) else f"{expected}; a {type(result).__name__} is not one"
    return (
        f"{expected}; missing or wrong: {', '.join(lacks)} (run and clock are methods, name and"
        " device_name strings, resolution_s a positive number of seconds)"
    )
