"""What one call to measure in a test goes through (the ``roofline`` fixture's, or a marked test's
body): the checks up front -> the request (:mod:`.request`) -> the pipeline (:mod:`.pipeline`) ->
the outcome (:mod:`.outcome`).

Every step runs inside the test's own call, so what it fails or skips is the test's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import RooflineError
from .failing import fail_test, failing_the_test
from .marker import FIXTURE
from .request import Request, check_takes, kernel_call, resolve
from .run_devices import device_skip_reason, names_a_table_device

if TYPE_CHECKING:
    from ..model.core import Estimate
    from ..model.verdict import Result
    from ..output.records import MeasurementRecord
    from ..timing.calls import KernelCall
    from .options import SessionSettings
    from .run_devices import Devices
    from .run_state import RunState
    from .transport import RecordTransport

#: the kinds of function whose call only makes a coroutine or a generator: it runs nothing
_MAKES_AN_OBJECT = (
    (inspect.iscoroutinefunction, "a coroutine function (async def)"),
    (inspect.isasyncgenfunction, "an async generator function"),
    (inspect.isgeneratorfunction, "a generator function"),
)
#: the names (``name=``) this attempt of a test measured under: each is the test's key in a baseline
NAMES_KEY = pytest.StashKey[set[str]]()


class Measurer:
    """Measures the calls the tests make, on the run's devices, and settles what each result means."""

    def __init__(self, state: RunState, devices: Devices, transport: RecordTransport) -> None:
        self.state = state
        self.devices = devices
        self._transport = transport

    @property
    def settings(self) -> SessionSettings:
        return self.state.settings

    def resolve(
        self, item: pytest.Item, call: Mapping[str, Any], kernel: KernelCall | None = None
    ) -> Request:
        """The request of one call (:func:`.request.resolve`); ValueError names a mistake. Mode off
        infers no op: it runs the kernel once, as it is."""
        return resolve(
            item, call, kernel, settings=self.settings, session_spec=self.devices.session_spec,
            infer=self.settings.mode != "off",
        )  # fmt: skip

    def estimate(self, request: Request) -> Estimate:
        """The floor of ``request``, nothing measured (a table device needs no local hardware); a warm
        request's as a warm measurement is judged (:func:`.pipeline.warm_floor`)."""
        from .pipeline import estimate_of, warm_floor

        spec = request.device_spec
        table = names_a_table_device(spec)
        if table:
            from ..model.devices import lookup

            device = lookup(spec)
        else:
            device = self.devices.device(spec)
        floor = estimate_of(request, device)
        if request.cache == "warm":
            floor = warm_floor(floor, device if table else self.devices.with_cache_levels(spec))
        return floor

    def run(
        self,
        item: pytest.Item,
        fn: object,
        args: tuple[object, ...],
        call: Mapping[str, Any],
        *,
        can_fail: bool,
        kwargs: Mapping[str, object] | None = None,
        setup: Callable[[], object] | None = None,
        keywords: Mapping[str, Any] | None = None,
    ) -> Result | None:
        """Measure ``fn(*args, **kwargs)`` (``setup()`` before every call, untimed), record the result,
        and in enforce mode fail the test below budget.

        ``keywords`` are the fixture call's other keywords: the op's parameters and the marker's
        keywords join ``call``, the rest go to the kernel (:func:`.request.kernel_call`).
        ``can_fail=False`` (``roofline.measure``) records the result but never fails the test on it.
        """
        __tracebackhide__ = True
        if not callable(fn):
            fail_test(f"{FIXTURE}: the kernel must be callable; got {fn!r} ({type(fn).__name__})")
        lazy = next((kind for makes, kind in _MAKES_AN_OBJECT if makes(fn)), None)
        if lazy is not None:
            fail_test(
                f"{FIXTURE}: the kernel is {lazy} ({fn!r}): calling it runs nothing, it only makes"
                " an object that would run later, so its time would be no time at all; pass a function"
                " that does the work (asyncio.run(...) inside it, or list(...) of the generator)"
            )
        from ..timing.arguments import check_has_data
        from ..timing.calls import KernelCall, SetupError, call_once, check_call

        with failing_the_test(RooflineError):
            check_call(kwargs, setup)  # what the fixture's caller passed: any value at all
            call, kernel = kernel_call(item, KernelCall(fn, tuple(args), kwargs, setup), call, keywords or {})
            check_has_data(fn, args, kernel.kwargs)
            request = self.resolve(item, call, kernel)
            check_takes(kernel, request.op)
        if request.device_spec != self.settings.device:
            why = "the kernel's arrays live there" if request.device_from == "arguments" else ""
            self._skip_if_absent(item, request.op, request.device_spec, why=why)
        self._check_baseline_key(item, request.name)
        if self.settings.mode == "off":
            with failing_the_test(SetupError):
                call_once(fn, args, kernel.kwargs, kernel.setup)
            return None
        from .outcome import settle
        from .pipeline import measure_call

        records = _Records(
            item.nodeid, mode=self.settings.mode if can_fail else "measure",
            device_index=self.devices.gpu_index(request.device_spec), device_from=request.device_from,
        )  # fmt: skip
        gate = self.state.gate
        result = measure_call(
            request,
            kernel,
            devices=self.devices,
            state=self.state,
            nodeid=item.nodeid,
            remeasure=can_fail and self.settings.mode == "enforce",
            suspect=lambda first: gate.suspects(records.of(first)),
            failing_the_test=failing_the_test,
        )
        settle(
            item, result, records.of(result), request=request, kernel=kernel, can_fail=can_fail,
            state=self.state, transport=self._transport,
        )  # fmt: skip
        return result

    def _check_baseline_key(self, item: pytest.Item, name: str) -> None:
        """A baseline keeps one record per test and ``name=``: with one saved or compared, a test that
        measures twice under one name (a loop over sizes) fails, saying how to tell them apart."""
        __tracebackhide__ = True
        names = item.stash.get(NAMES_KEY, None)
        if names is None or not (self.settings.save or self.settings.compare):
            return
        if name in names:
            shown = f"name={name!r}" if name else "no name="
            fail_test(
                f"{FIXTURE}: this test measured a second kernel under {shown}; a baseline keeps one record"
                " per test and name, so the second would be compared with the first one's record. Give each"
                " roofline(...) call its own name=, such as name=f'n={n}' in a loop over sizes"
            )
        names.add(name)

    def _skip_if_absent(self, item: pytest.Item, op: str, spec: str, *, why: str = "") -> None:
        """A call's ``device=`` that is not on this machine skips the test, as the marker's does; so
        does a GPU the kernel's arrays live on that CuPy cannot see (``why`` says so)."""
        __tracebackhide__ = True  # pytest reports a skip at the innermost visible frame: the test's call
        with failing_the_test(RooflineError):
            reason = device_skip_reason(spec, why=why)
        if reason:
            self._transport.send_skip(item.nodeid, op, reason)
            pytest.skip(reason)


class _Records:
    """The one record of each result of a measurement (:meth:`.MeasurementRecord.from_result`).

    The gate judges the first result before the verdict (a suspected regression is measured again);
    unless a second measurement follows, that result is the final one, and its record is the one the
    test reports, sends and checks.
    """

    def __init__(self, nodeid: str, *, mode: str, device_index: int | None, device_from: str) -> None:
        self._nodeid = nodeid
        self._mode = mode
        self._device_index = device_index
        self._device_from = device_from
        self._last: tuple[Result, MeasurementRecord] | None = None

    def of(self, result: Result) -> MeasurementRecord:
        if self._last is None or self._last[0] is not result:
            from ..output.records import MeasurementRecord

            record = MeasurementRecord.from_result(
                result, nodeid=self._nodeid, mode=self._mode, device_index=self._device_index,
                device_from=self._device_from,
            )  # fmt: skip
            self._last = (result, record)
        return self._last[1]
