"""The ``roofline`` fixture's object, and the two per-test wrappers a marked test may need.

:class:`Roofline` is a test's ``roofline``; :class:`BodyTimer` times a marked test without the fixture,
:class:`MeasurementCheck` notices one that takes it and measures nothing (each registered on the first
test that needs it). All measure through the run's :class:`~.measurer.Measurer`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import RooflineError, RooflineWarning
from .failing import fail_test, failing_the_test, fitted
from .marker import FIXTURE, MARKER
from .measurer import NAMES_KEY
from .request import MARKER_KEY, given

if TYPE_CHECKING:
    from ..model.core import Device, Estimate
    from ..model.verdict import Result
    from .measurer import Measurer

#: the measurements a test's ``roofline`` fixture was asked for (``roofline(...)``, ``.measure``)
MEASURED_KEY = pytest.StashKey[int]()


class BodyTimer:
    """The ``pyfunc_call`` wrapper of marked tests that take no fixture: a plugin of its own, so
    that it exists only once such a test is set up."""

    def __init__(self, measurer: Measurer) -> None:
        self._measurer = measurer

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        """A marked test without the fixture runs once normally, then its body is timed as the kernel."""
        outcome = yield
        measurer = self._measurer
        marker = pyfuncitem.stash.get(MARKER_KEY, None)
        if marker is None or FIXTURE in pyfuncitem.fixturenames or measurer.settings.mode == "off":
            return outcome
        names = inspect.signature(pyfuncitem.obj).parameters
        kwargs = {n: pyfuncitem.funcargs[n] for n in names if n in pyfuncitem.funcargs}
        try:
            measurer.run(pyfuncitem, functools.partial(pyfuncitem.obj, **kwargs), (), {}, can_fail=True)
        except Exception as exc:
            fixture = once_only_fixture(exc, pyfuncitem.funcargs)  # the test's own, and theirs
            if fixture is None:
                raise  # the body's own error, with its own traceback
            fail_test(
                f"{FIXTURE}: {pyfuncitem.name} passed, then raised {type(exc).__name__} when run again to be"
                f" timed: its fixture {fixture!r} can be used only once per test ({exc}). Without the"
                f" {FIXTURE} fixture, @pytest.mark.{MARKER} times the whole test body by running it many"
                f" times; take the {FIXTURE} fixture and time the kernel alone: {FIXTURE}(kernel, *args)"
            )
        return outcome


def once_only_fixture(error: Exception, funcargs: Mapping[str, object]) -> str | None:
    """The fixture whose value comes from the module that raised ``error``: a body that ran once and
    then failed with, say, pytest-benchmark's ``FixtureAlreadyUsed`` (its ``benchmark`` fixture's
    value is a ``BenchmarkFixture`` of the same module) is a body that cannot run twice."""
    module = type(error).__module__
    if module == "builtins":
        return None
    return next((name for name, value in funcargs.items() if type(value).__module__ == module), None)


class MeasurementCheck:
    """The ``pyfunc_call`` wrapper of marked tests that take the fixture: a test that passed without
    measuring has lost its budget unnoticed (a refactor dropped the ``roofline(...)`` call)."""

    def __init__(self, measurer: Measurer) -> None:
        self._measurer = measurer

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        """After a passing body (a skip or a failure raises through here): warn, or fail when required."""
        __tracebackhide__ = True
        outcome = yield
        if pyfuncitem.stash.get(MEASURED_KEY, None) != 0 or pyfuncitem.stash.get(MARKER_KEY, None) is None:
            return outcome  # measured; or the fixture was replaced, or the test is not marked
        settings = self._measurer.settings
        message = (
            f"{pyfuncitem.nodeid} is marked @pytest.mark.{MARKER} and takes the {FIXTURE} fixture, but"
            f" measured nothing, so no budget was checked: call {FIXTURE}(kernel, *args) or"
            f" {FIXTURE}.measure(...) in the test ({FIXTURE}.estimate measures nothing), or drop the marker"
        )
        if settings.require_measurement:
            origin = settings.origins.get("require_measurement", "roofline_require_measurement")
            fail_test(f"{FIXTURE}: {message} ({origin} requires a measurement)")
        pyfuncitem.warn(RooflineWarning(fitted(message, pyfuncitem.config, warning=True)))
        return outcome


class Roofline:
    """The ``roofline`` fixture: ``roofline(fn, *args, op=..., **params)`` times and judges a kernel."""

    def __init__(self, item: pytest.Item, measurer: Measurer) -> None:
        self._item = item
        self._measurer = measurer
        item.stash[MEASURED_KEY] = 0
        item.stash[NAMES_KEY] = set()  # a fixture per attempt: a rerun starts afresh

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
        **params: Any,
    ) -> Result | None:
        """Measure ``fn(*args, **kwargs)``, compute the floor, record it, and fail the test below budget.

        Every other keyword is the op's (one of its parameters), the marker's (the marker's values
        are defaults, and these override them: ``math``, ``stat``, ``max_time``, ``cache``,
        ``device``, ...), or else the kernel's: ``roofline(np.add, x, y, out=z)`` calls ``np.add(x,
        y, out=z)``. A kernel keyword named like one of the others goes in ``kwargs``. ``setup()``
        runs before every call, untimed, and may return ``(args, kwargs)`` for it. Returns the
        frozen result (``attained``, ``floor_s``, ``time_s``, ``bound``, ``passed``, ``stats``,
        ``estimate``, ...), or None in mode off, where the kernel is called once (after setup) and
        not timed.
        """
        __tracebackhide__ = True
        self._item.stash[MEASURED_KEY] += 1
        call = given({"op": op, "dtype": dtype, "min_fraction": min_fraction, "name": name})
        return self._measurer.run(
            self._item, fn, args, call, can_fail=True, kwargs=kwargs, setup=setup, keywords=params
        )

    def measure(
        self, fn: Callable[..., object], *args: object, op: str | None = None, dtype: object = None,
        name: str | None = None, kwargs: Mapping[str, object] | None = None,
        setup: Callable[[], object] | None = None, **params: Any,
    ) -> Result | None:  # fmt: skip
        """Like calling the fixture, but never fails the test on the result: a measurement for the report."""
        __tracebackhide__ = True
        self._item.stash[MEASURED_KEY] += 1
        call = given({"op": op, "dtype": dtype, "name": name})
        return self._measurer.run(
            self._item, fn, args, call, can_fail=False, kwargs=kwargs, setup=setup, keywords=params
        )

    def estimate(self, op: str | None = None, *, dtype: object = None, **params: Any) -> Estimate:
        """The floor only, on this test's device: nothing runs."""
        __tracebackhide__ = True
        measurer = self._measurer
        with failing_the_test(RooflineError):
            request = measurer.resolve(self._item, given(dict(params, op=op, dtype=dtype)))
            return measurer.estimate(request)

    @property
    def device(self) -> Device:
        """The session's device (resolved, and for the CPU calibrated, on first use)."""
        devices = self._measurer.devices
        return devices.device(devices.session_spec())
