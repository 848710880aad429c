"""A stand-in for the plugin while ``-p no:roofline`` turns it off: its own ``pytest11`` entry point.

It keeps the marker registered, accepts and ignores the options, and serves a ``roofline`` fixture
that calls the kernel once, untimed. It imports only pytest until it knows the plugin is off, and
no NumPy after: docs/options.md ("Options") lists what it imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from .model.core import Estimate

#: the plugin's entry-point name: ``-p no:roofline`` blocks it
PLUGIN = "roofline"
DISABLED = "pytest-roofline is disabled (-p no:roofline)"


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The plugin's options and ini keys, accepted and ignored: a config file or ``addopts`` that
    names them must not become a usage error once the plugin is off."""
    if not pluginmanager.is_blocked(PLUGIN):
        return
    from .plugin.options import SETTINGS

    group = parser.getgroup("roofline", f"speed-of-light performance budgets ({DISABLED}; ignored)")
    for s in SETTINGS:
        if s.metavar is None:
            group.addoption(s.flag, action="store_true", default=None, dest=s.dest, help="ignored")
        else:
            group.addoption(s.flag, default=None, dest=s.dest, metavar=s.metavar, help="ignored")
        parser.addini(s.dest, f"ignored ({DISABLED})", type="string", default=None)


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.is_blocked(PLUGIN):
        return
    from .plugin.marker import MARKER_DOC

    config.addinivalue_line("markers", f"{MARKER_DOC} [{DISABLED}: the test runs once, untimed]")
    config.pluginmanager.register(_StubFixtures(), "roofline-stub-fixtures")


class _StubFixtures:
    """The ``roofline`` fixture, registered only while the plugin is off (it would shadow the plugin's)."""

    @pytest.fixture
    def roofline(self, request: pytest.FixtureRequest) -> Untimed:
        """The kernel runs once, untimed: pytest-roofline is disabled (-p no:roofline)."""
        return Untimed(request.node)


class Untimed:
    """What a test's ``roofline`` argument is while the plugin is off: every call runs the kernel once
    (after its setup) and returns None; nothing is timed or judged."""

    def __init__(self, item: pytest.Item) -> None:
        self._item = item

    def __call__(
        self,
        fn: Callable[..., object],
        *args: object,
        op: str | None = None,
        dtype: object = None,
        min_fraction: float | None = None,
        name: str | None = None,
        kwargs: Mapping[str, object] | None = None,
        setup: Callable[[], object] | None = None,
        **keywords: Any,
    ) -> None:
        __tracebackhide__ = True
        from .errors import RooflineError
        from .plugin.failing import failing_the_test
        from .plugin.request import kernel_call
        from .timing.calls import KernelCall, SetupError, call_once, check_call

        with failing_the_test(RooflineError):
            check_call(kwargs, setup)
            # the keywords neither the op's nor the fixture's go to the kernel, as with the plugin
            call = {"op": op} if op is not None else {}
            _, kernel = kernel_call(self._item, KernelCall(fn, tuple(args), kwargs, setup), call, keywords)
        with failing_the_test(SetupError):
            call_once(fn, args, kernel.kwargs, setup)  # the kernel's and setup's own errors pass unchanged

    measure = __call__

    def estimate(
        self, op: str | None = None, *, dtype: object = None, device: str | None = None, **params: Any
    ) -> Estimate:
        """The floor on a table device (there is no session device to default to); the marker and
        parametrize values fill in what the call leaves out, as with the plugin."""
        __tracebackhide__ = True
        from .errors import InvalidValueError, RooflineError
        from .model.devices import lookup
        from .model.estimate import estimate
        from .model.keywords import CALL_KEYWORDS
        from .model.ops import get_op
        from .plugin.failing import failing_the_test
        from .plugin.marker import op_params, parametrize_values, read_marker

        with failing_the_test(RooflineError):  # ours only: a bug keeps its traceback
            marker = read_marker(self._item)
            op = op or (marker.op if marker is not None else None)
            keywords = dict(marker.keywords) if marker is not None else {}
            keywords.update((k, params.pop(k)) for k in CALL_KEYWORDS if k in params)  # budget, stat: unused
            device = device or keywords.get("device")
            if op is None or device is None:
                raise InvalidValueError(
                    f"{DISABLED}: roofline.estimate needs op= and device= a table key (such as"
                    " 'h100-sxm'), given to the call or the marker: there is no session device"
                )
            parametrized = parametrize_values(self._item)
            merged = op_params(get_op(op), parametrized)
            if marker is not None and op == marker.op:
                merged.update(marker.params)
            merged.update(params)
            if dtype is None:
                dtype = keywords.get("dtype", parametrized.get("dtype"))
            return estimate(op, dtype=dtype, device=lookup(device), math=keywords.get("math"), **merged)

    @property
    def device(self) -> NoReturn:
        __tracebackhide__ = True
        from .plugin.failing import fail_test

        fail_test(f"roofline: {DISABLED}: there is no session device (enable the plugin to measure)")
