"""The session: the state of one test run and its runtime hooks.

:class:`RooflineSession` is registered as a plugin once the run needs it (``plugin.session_of``).
It measures each call the ``roofline`` fixture (:mod:`.fixture`) or a marked test's body makes:
the request resolved through the precedence chain (:mod:`.request`), the device and timer a spec
means (:mod:`.resolution`), the engine, the verdict (:mod:`.verdict`); it records the result, and in
enforce mode fails the test that missed its budget. Beside it, the gate (:mod:`.gating`) compares
with a baseline and writes what CI reads.

Records travel on the test reports: each phase's report carries what was measured in it
(``roofline_records``), so under pytest-xdist a worker's measurements reach the controller as each
test finishes, and a serial run collects them the same way. The process that shows the run prints
the report (:mod:`.report`) at the end.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from .failing import fail_test, failing_the_test
from .fixture import BodyTimer, MeasurementCheck
from .marker import FIXTURE, check_fixtureless, has_marker, read_marker
from .options import SessionSettings
from .request import MARKER_KEY, KernelCall, Request, resolve
from .run_devices import Devices, device_skip_reason, names_a_table_device

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager

    from ..analysis.diagnosis import Diagnosis
    from ..machine.cpupeak import CpuPeak
    from ..model.ceilings import ProbeReference
    from ..model.core import Device, Estimate
    from ..model.ops import OpSpec
    from ..model.verdict import Result
    from ..output.records import DeviceRecord, Record
    from ..timing.base import Backend
    from ..timing.cache import CachePlan
    from ..timing.clocks import ClockWatcher
    from ..timing.engine import Measurement

#: a probe this much faster than at calibration means the calibration was taken under load
_STALE_SPEED = 1.3
#: what is left of a measurement's budget once rotation's copies took the rest: the engine's warm-up
#: and its three samples then overrun it, as they would any budget too short for them
_MIN_BUDGET_S = 1e-3

#: attributes of a test report: the records measured in its phase, the device records and (from
#: a pytest-xdist worker) the notes that are new since the process's previous report
RECORDS_ATTR = "roofline_records"
DEVICES_ATTR = "roofline_devices"
NOTES_ATTR = "roofline_notes"


class RooflineSession:
    """Session state and the runtime hooks; registered as a plugin for the length of the run."""

    def __init__(self, config: pytest.Config, settings: SessionSettings) -> None:
        self.config = config
        self.settings = settings
        #: every record of the run, as the reports bring them (on a worker: its own)
        self.records: list[Record] = []
        #: every device record, by key and figures (``DeviceRecord.version``): a device measured
        #: again during the run has one per set of figures, so each row's judge stays on record
        self.device_records: dict[str, DeviceRecord] = {}
        #: measured in this process, not yet on a report
        self._unsent: list[Record] = []
        #: the device records as the last report carried them, and the notes reported so far
        self._sent_devices: dict[str, DeviceRecord] = {}
        self._sent_notes = 0
        #: node ids whose last attempt ended in a rerun: their next attempt replaces their records
        self._reran: set[str] = set()
        workerinput: Mapping[str, Any] | None = getattr(config, "workerinput", None)
        #: pytest-xdist's worker id (gw0, ...), None outside a worker
        self._worker_id: str | None = workerinput.get("workerid") if workerinput else None
        #: the controller's run ids, for removing the lock files at the end
        self._run_ids: set[str] = set()
        #: what the register hooks added, and what they replaced (restored at unconfigure)
        self.registered_ops: dict[str, OpSpec | None] = {}
        self.registered_devices: dict[str, Device | None] = {}
        self.json_error: str | None = None
        #: why the run stopped early (^C, -x, a pytest-xdist worker that went down), None if it did not
        self.interruption: str | None = None
        #: warnings raised while resolving devices (calibration), shown with the terminal summary
        self.notes: list[str] = []
        #: the devices and timers specs mean, resolved on first use
        self.devices = Devices(config, settings, notes=self.notes, device_records=self.device_records)
        #: node ids of the tests that failed as expected (xfail)
        self.xfailed: set[str] = set()
        #: tests skipped at collection because their marker's device is absent: node id -> (op, reason)
        self.absent: dict[str, tuple[str, str]] = {}
        self._body_timer = BodyTimer(self)
        from .gate import Gate

        #: the baseline comparison, and the outputs CI reads (save, step summary, plot)
        self.gate = Gate(settings, reporting=self._worker_id is None)
        self._measurement_check = MeasurementCheck(self)
        #: whether the summary already says the calibration was taken under load
        self._said_stale = False
        #: whether the summary already says measurements on two threads took turns
        self._said_waited = False

    # - registrations (the historic register hooks) -

    def add_op(self, *args: Any, **kwargs: Any) -> OpSpec:
        from ..model.ops import OpError, op_names, register_op

        name = args[0] if args else kwargs.get("name")
        previous = None
        if isinstance(name, str) and name in op_names():
            from ..model.ops import get_op

            previous = get_op(name)
        try:
            spec = register_op(*args, **kwargs)
        except (OpError, TypeError) as exc:
            raise pytest.UsageError(f"{_registering('pytest_roofline_register_ops')}: {exc}") from None
        self.registered_ops.setdefault(spec.name, previous)
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
        self.registered_devices.setdefault(device.key, previous)
        return device

    def undo_registrations(self) -> None:
        if not self.registered_ops and not self.registered_devices:
            return  # nothing to undo: importing ops and devices would cost 10 to 30 ms for nothing
        from ..model.devices import register_device, unregister_device
        from ..model.ops import restore_op, unregister_op

        for name, op in self.registered_ops.items():
            if op is None:
                unregister_op(name)
            else:  # a built-in (or earlier) op a conftest replaced for this session
                restore_op(op)
        for key, device in self.registered_devices.items():
            if device is None:
                unregister_device(key)
            else:
                register_device(device, replace=True)
        self.registered_ops.clear()
        self.registered_devices.clear()

    def unregister(self) -> None:
        """Take this session, and the per-test wrappers that tests needed, out of the plugin manager."""
        manager = self.config.pluginmanager
        for plugin in (self._body_timer, self._measurement_check, self):
            if manager.is_registered(plugin):
                manager.unregister(plugin)

    # - per-test resolution -

    def resolve(
        self, item: pytest.Item, call: Mapping[str, Any], kernel: KernelCall | None = None
    ) -> Request:
        """The request of one call (:func:`.request.resolve`); ValueError names a mistake."""
        return resolve(item, call, kernel, settings=self.settings, session_spec=self.devices.session_spec)

    def estimate(self, request: Request, *, measuring: bool = True) -> Estimate:
        """The floor of ``request``; a table device needs no local hardware unless it is measured on."""
        from ..model.estimate import estimate

        spec = request.device_spec
        if not measuring and names_a_table_device(spec):
            from ..model.devices import lookup

            device = lookup(spec)
        else:
            device = self.devices.device(spec)
        return estimate(request.op, dtype=request.dtype, device=device, math=request.math, **request.params)

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
    ) -> Result | None:
        """Measure ``fn(*args, **kwargs)`` (``setup()`` before every call, untimed), record the result,
        and in enforce mode fail the test below budget.

        ``can_fail=False`` (``roofline.measure``) records the result but never fails the test on it.
        """
        __tracebackhide__ = True
        if not callable(fn):
            fail_test(f"{FIXTURE}: the kernel must be callable; got {fn!r} ({type(fn).__name__})")
        if (lazy := _runs_nothing(fn)) is not None:
            fail_test(
                f"{FIXTURE}: the kernel is {lazy} ({fn!r}): calling it runs nothing, it only makes"
                " an object that would run later, so its time would be no time at all; pass a function"
                " that does the work (asyncio.run(...) inside it, or list(...) of the generator)"
            )
        from ..timing.engine import SetupError, call_once, check_call
        from ..timing.rotation import check_has_data

        with failing_the_test(TypeError):
            check_call(kwargs, setup)  # what the fixture's caller passed: any value at all
        with failing_the_test(ValueError):
            check_has_data(fn, args, kwargs)
        kernel = KernelCall(fn, args, kwargs, setup)
        with failing_the_test(ValueError):
            request = self.resolve(item, call, kernel)
        if request.device_spec != self.settings.device:
            self._skip_if_absent(item, request.op, request.device_spec)
        self._check_baseline_key(item, request.name)
        if self.settings.mode == "off":
            with failing_the_test(SetupError):
                call_once(fn, args, kernel.kwargs, kernel.setup)
            return None
        with failing_the_test(ValueError, RuntimeError):
            est = self.estimate(request)
            device = self.devices.device(request.device_spec)
            backend = self.devices.backend(request.device_spec, device)
        from ..model.verdict import Verdict, decide
        from ..output.records import MeasurementRecord
        from ..timing.cache import plan_cache
        from ..timing.engine import measuring_alone

        # one measurement at a time in this process, from its copies to its re-measure: two threads
        # timing at once would each slow the other's kernel, and a rotation's copies must outlive it
        with measuring_alone() as waited:
            plan = plan_cache(
                request.cache, request.policy, op_bytes=est.bytes, llc_bytes=est.device.llc_bytes,
                fn=kernel.fn, args=kernel.args, kwargs=kernel.kwargs, setup=kernel.setup, clock=backend.clock,
            )  # fmt: skip
            # the copies rotation made are part of what the measurement costs: paid from its budget
            made_s = plan.rotation.made_s if plan.rotation is not None else 0.0
            budget_s = max(request.policy.max_time_s - made_s, _MIN_BUDGET_S)
            if plan.state == "warm":
                est = self._warm_estimate(est, request.device_spec)
            on_cpu = backend.name == "cpu"
            reference = self._probe_reference(est) if on_cpu else None
            with failing_the_test(ValueError):  # a stream= the backend cannot take
                measure_once = self._measurer(kernel, request, plan, backend, reference, on_cpu=on_cpu)
            peak = self._cpu_peak() if on_cpu and est.device.kind == "cpu" else None
            # warm-up, probes, sampling, a re-measure: one window
            with (
                self.devices.measuring(request.device_spec),
                failing_the_test(SetupError),
                _blocking(backend, request.block),
            ):
                flushed = plan.rotation is None and plan.policy.flush
                latency_floor_s = (
                    _latency_floor_s(backend, flushed=flushed) if self.settings.latency_floor == "on" else 0.0
                )
                result = decide(
                    est,
                    measure_once,
                    request.min_fraction,
                    budget_s=budget_s,
                    remeasure=can_fail and self.settings.mode == "enforce",
                    name=request.name,
                    nodeid=item.nodeid,
                    reference=reference,
                    peak=peak,
                    latency_floor_s=latency_floor_s,
                    suspect=lambda r: self.gate.suspects(
                        MeasurementRecord.from_result(r, nodeid=item.nodeid, mode="enforce")
                    ),
                )
        if waited and not self._said_waited:
            self._said_waited = True
            self.notes.append(
                "measurements on two threads at once waited for each other: one is timed at a time in a"
                " process, as two at once would slow each other's kernels"
            )
        if result.ceiling is not None and result.ceiling.speed > _STALE_SPEED and not self._said_stale:
            self._said_stale = True
            self.notes.append(
                f"this CPU ran {result.ceiling.speed:.1f}x faster than when it was calibrated (probe"
                f" {result.ceiling.probe}): the calibration was taken under load; paired ceilings make"
                " up for it, and `roofline calibrate --force` measures it again"
            )
        mode = self.settings.mode if can_fail else "measure"
        diagnosis = self._diagnosis(kernel, result)
        record = MeasurementRecord.from_result(
            result, nodeid=item.nodeid, mode=mode, diagnosis=diagnosis.to_record() if diagnosis else None
        )
        message = result.message()
        if diagnosis is not None:
            from ..analysis.diagnosis import format_diagnosis

            message += "\n" + format_diagnosis(diagnosis)
        self._unsent.append(record)
        prefix = f"roofline[{request.name}]" if request.name else "roofline"
        item.user_properties.extend(
            [
                (f"{prefix}_attained", round(result.attained, 6)),
                (f"{prefix}_floor_s", result.floor_s),
                (f"{prefix}_time_s", result.time_s),
                (f"{prefix}_min_fraction", result.min_fraction),
                (f"{prefix}_verdict", str(result.verdict)),
            ]
        )
        self.config.hook.pytest_roofline_result(item=item, result=result)
        if can_fail and self.settings.mode == "enforce" and result.verdict is not Verdict.PASS:
            if result.verdict is not Verdict.INCONCLUSIVE or self.settings.inconclusive == "fail":
                fail_test(message)
            if self.settings.inconclusive == "skip":
                pytest.skip(message)
            from ..machine.calibrate import RooflineWarning

            item.warn(RooflineWarning(message))
        if mode == "enforce":  # within budget, but perhaps well below where the baseline stood
            self.gate.check(record)
        return result

    def _check_baseline_key(self, item: pytest.Item, name: str) -> None:
        """A baseline keeps one record per test and ``name=``: with one saved or compared, a test that
        measures twice under one name (a loop over sizes) fails, saying how to tell them apart."""
        __tracebackhide__ = True
        from .fixture import NAMES_KEY

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

    def _warm_estimate(self, est: Estimate, spec: str) -> Estimate:
        """The cache-aware roofline: a warm op's bytes at the bandwidth of the cache level that holds
        them (DRAM's, when none does or the device names no level)."""
        import dataclasses

        from ..model.core import at_level

        with failing_the_test(ValueError, RuntimeError):
            device = self.devices.with_cache_levels(spec)
        if device is not est.device and device.levels and not est.device.levels:
            est = dataclasses.replace(est, device=dataclasses.replace(est.device, levels=device.levels))
        level = est.device.level_for(est.bytes)
        return est if level is None else at_level(est, level)

    def _diagnosis(self, kernel: KernelCall, result: Result) -> Diagnosis | None:
        """The bottleneck procedure's likely causes (:mod:`.diagnosis`), when ``--roofline-diagnose``
        asks for them: for a GPU measurement (the procedure is a GPU one), with what the compiler says
        of a CUDA C++ or Triton kernel the test passed (:func:`.kernelfacts.facts_for`)."""
        from ..model.verdict import Verdict

        when = self.settings.diagnose
        if when == "off" or result.estimate.device.kind == "cpu":
            return None
        if when == "miss" and result.verdict is not Verdict.MISS:
            return None
        from ..analysis.diagnosis import diagnose
        from ..analysis.kernelfacts import facts_for
        from ..analysis.occupancy import arch_of_device

        arch = arch_of_device(result.estimate.device.key)
        facts = facts_for(kernel.fn, arch=arch) if arch else None
        return diagnose(result, facts)

    def _measurer(
        self,
        kernel: KernelCall,
        request: Request,
        plan: CachePlan,
        backend: Backend,
        reference: ProbeReference | None,
        *,
        on_cpu: bool,
    ) -> Callable[[float], Measurement]:
        """``measure_once(budget_s)``: the engine, with this kernel's cache plan, probe and OS readings."""
        import dataclasses

        from ..timing.clocks import unwatched_note
        from ..timing.engine import measure

        policy = plan.policy
        snapshot = None
        if on_cpu:
            from ..timing.contention import take_snapshot

            snapshot = take_snapshot

        on_stream = _stream_of(backend, request.stream)

        def measure_once(budget_s: float) -> Measurement:
            __tracebackhide__ = True
            probe = None
            if reference is not None:  # built here, inside the device lock: it allocates its arrays
                from ..timing.probes import probe_for

                probe = probe_for(reference)
            budgeted = dataclasses.replace(policy, max_time_s=budget_s)
            with on_stream(request.stream), watching(backend) as watcher:
                m = measure(
                    kernel.fn, *kernel.args, kwargs=kernel.kwargs, setup=kernel.setup, policy=budgeted,
                    backend=backend, probe=probe, snapshot=snapshot, rotation=plan.rotation,
                )  # fmt: skip
            if watcher is None:
                return m
            if not watcher.log.watched and (note := unwatched_note()):
                self.notes.append(f"GPU clocks are not watched: {note}")
            return dataclasses.replace(m, clocks=watcher.log)

        return measure_once

    def _probe_reference(self, est: Estimate) -> ProbeReference | None:
        """The calibration's probe for the resource bounding ``est``, when its ceilings are this CPU's
        measured ones and paired ceilings are on."""
        if self.settings.ceilings != "paired" or not self.devices.measured_cpu or est.device.kind != "cpu":
            return None
        from ..machine.calibrate import cpu_calibration
        from ..model.ceilings import resource_of
        from ..model.core import Source

        # a peaks file's figure is the user's, not the probe's
        if est.bounding_figure.source is not Source.MEASURED:
            return None
        if est.bound == "memory" and est.memory_level != "dram":  # the probe streams from DRAM
            return None

        return cpu_calibration().probes.get(resource_of(est))

    def _cpu_peak(self) -> CpuPeak | None:
        from ..machine.cpupeak import cpu_peak

        return cpu_peak()

    def _skip_if_absent(self, item: pytest.Item, op: str, spec: str) -> None:
        """A call's ``device=`` that is not on this machine skips the test, as the marker's does."""
        __tracebackhide__ = True  # pytest reports a skip at the innermost visible frame: the test's call
        with failing_the_test(ValueError):
            reason = device_skip_reason(spec)
        if reason:
            self._record_skip(item.nodeid, op, reason)
            pytest.skip(reason)

    def _record_skip(self, nodeid: str, op: str, reason: str) -> None:
        from ..output.records import SkippedRecord

        self._unsent.append(SkippedRecord(nodeid=nodeid, label=op, reason=reason))

    # - hooks -

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_device(self, config: pytest.Config, spec: str) -> Device | None:
        return self.devices.builtin_device(spec)

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_backend(self, config: pytest.Config, device: Device, spec: str) -> Backend | None:
        return self.devices.builtin_backend(spec, device)

    def skip_absent_devices(self, items: list[pytest.Item]) -> None:
        """A test whose marker names a device that is not on this machine is skipped, with the reason
        (``plugin.py`` calls this at the end of collection, after -k and -m have deselected).

        Skipped through a mark, so pytest reports the test's own location; a marker with a mistake
        is left to :meth:`pytest_runtest_setup`, which fails the test with the message.
        """
        for item in items:
            if not has_marker(item):  # most tests: skip read_marker's walk and checks
                continue
            try:
                marker = read_marker(item)
                spec = marker.keywords.get("device") if marker is not None else None
                reason = device_skip_reason(spec) if spec is not None else ""
            except ValueError:
                continue
            if marker is not None and reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                self.absent[item.nodeid] = (marker.op or "?", reason)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Check the marker before the test runs (a test skipped for its device never gets here)."""
        if not has_marker(item):  # most tests: read_marker's None, at a fraction of its cost
            item.stash[MARKER_KEY] = None
            return
        __tracebackhide__ = True
        with failing_the_test(ValueError):
            marker = read_marker(item)
            item.stash[MARKER_KEY] = marker
            if marker is not None and "device" in marker.keywords:
                device_skip_reason(marker.keywords["device"])  # a misspelled device is a mistake
            if marker is None:
                return
            # each wrapper is registered on the first test that needs it: a suite without pays nothing
            if FIXTURE not in getattr(item, "fixturenames", ()):
                check_fixtureless(item, marker)
                self._register(self._body_timer, "roofline-body-timer")
            else:
                self._register(self._measurement_check, "roofline-measurement-check")

    def _register(self, plugin: object, name: str) -> None:
        if not self.config.pluginmanager.is_registered(plugin):
            self.config.pluginmanager.register(plugin, name)

    @pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker serializes the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Records travel on the report of the phase that measured them: under pytest-xdist to the
        controller as soon as the phase ends, so a worker that crashes later loses none of it.
        The process that shows the report (the controller, or a serial run) collects them, and
        remembers the tests that failed as expected (their misses are what bad variants show off).

        A test run again (pytest-rerunfailures reports the failed attempt as ``rerun``) keeps only
        its last attempt's records: they replace the earlier ones when the new attempt starts.
        """
        carried = report.__dict__  # (``report.nodeid`` is a property: read only where needed)
        if "wasxfail" in carried and report.when == "call":
            self.xfailed.add(report.nodeid)
        pending = self._unsent or self.absent or self._reran or self.device_records
        carries = RECORDS_ATTR in carried or DEVICES_ATTR in carried or NOTES_ATTR in carried
        if not pending and len(self.notes) == self._sent_notes and not carries:
            if carried.get("outcome") == "rerun":  # pytest-rerunfailures' outcome, beyond pytest's three
                self._reran.add(report.nodeid)
            return  # most reports of most suites: nothing measured, nothing carried
        nodeid = report.nodeid
        if report.when == "setup" and report.skipped and nodeid in self.absent:
            op, reason = self.absent.pop(nodeid)
            self._record_skip(nodeid, op, reason)
        if self._unsent or self.device_records or len(self.notes) > self._sent_notes:
            self._attach(report)
        if self._worker_id is not None:
            return
        if report.when == "setup" and nodeid in self._reran:
            self._reran.discard(nodeid)
            self.records = [r for r in self.records if r.nodeid != nodeid]
        if carried.get("outcome") == "rerun":
            self._reran.add(nodeid)
        if RECORDS_ATTR in carried or DEVICES_ATTR in carried:  # plain JSON, as it crossed from a worker
            from ..output.records import DeviceRecord, record_from_json

            self.records.extend(map(record_from_json, carried.get(RECORDS_ATTR) or ()))
            for device in map(DeviceRecord.from_json, carried.get(DEVICES_ATTR) or ()):
                version = device.version
                self.device_records.setdefault(version, device)
                self._sent_devices[version] = self.device_records[version]  # received: never sent on again
        self.notes.extend(carried.get(NOTES_ATTR) or ())

    def _attach(self, report: pytest.TestReport) -> None:
        """Put on ``report`` what this process measured since the last one: plain JSON-ready values,
        since reports are serialized for the trip to the controller."""
        if self._unsent:
            setattr(report, RECORDS_ATTR, [r.to_json() for r in self._unsent])
            self._unsent = []
        changed = [r for key, r in self.device_records.items() if self._sent_devices.get(key) is not r]
        if changed:  # new, or its figures measured again
            setattr(report, DEVICES_ATTR, [r.to_json() for r in changed])
            self._sent_devices.update((r.version, r) for r in changed)
        if self._worker_id is not None and len(self.notes) > self._sent_notes:
            setattr(report, NOTES_ATTR, self.notes[self._sent_notes :])  # a worker shows no summary
            self._sent_notes = len(self.notes)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist, on the controller: note the run id, whose lock files go at the end."""
        run_id = getattr(node, "workerinput", {}).get("testrunuid")
        if isinstance(run_id, str):
            self._run_ids.add(run_id)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """^C, or pytest-xdist stopping the run (-x, a worker's ^C): say so in the JSON."""
        self.interruption = self.interruption or str(excinfo.value) or excinfo.typename

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist, on the controller: a worker that went down with an error lost the
        measurements of the test it was running."""
        if error is not None and self.interruption is None:
            worker = getattr(node, "workerinput", {}).get("workerid", "a worker")
            self.interruption = f"worker {worker} went down ({error})"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if (rotation := sys.modules.get("pytest_roofline.timing.rotation")) is not None:
            rotation.release_host_pool()  # the buffer rotation's copies were carved from
        if self._worker_id is not None:  # a pytest-xdist worker: its reports carried everything
            return
        stopped = session.shouldfail or session.shouldstop  # -x, --maxfail, a plugin's stop
        if self.interruption is None and (stopped or exitstatus == pytest.ExitCode.INTERRUPTED):
            self.interruption = str(stopped) if stopped else "interrupted"
        from ..machine.devicelock import remove_lock_files

        # Every worker has finished or crashed. (After -x or ^C one may still be ending a test: its
        # results would be dropped anyway, so an overlap then would disturb nothing reported.)
        for run_id in self._run_ids:
            remove_lock_files(run_id)
        from dataclasses import replace

        # xdist sends the workers' reports here, so every node is known
        self.records = [replace(r, xfailed=r.nodeid in self.xfailed) for r in self.records]
        self._keep_best_probe_rates()
        if self.settings.json:
            from ..output.jsonfile import payload, write_json_atomic

            try:
                data = payload(self.records, self.device_records.values(), interruption=self.interruption)
                write_json_atomic(self.settings.json, data)
            except (OSError, ValueError) as exc:
                self.json_error = f"roofline: could not write --roofline-json {self.settings.json!r}: {exc}"
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.gate.finish(
            self.records, list(self.device_records.values()), session, interruption=self.interruption
        )

    def _keep_best_probe_rates(self) -> None:
        """The calibration remembers the fastest this machine's probes have run (never the slowest),
        so "machine at 62% of its best" compares with the best it has really shown."""
        best: dict[str, float] = {}
        if not self.records:
            return  # nothing measured: import nothing (the records' module pulls in the model)
        from ..output.records import MeasurementRecord

        for record in self.records:
            ceiling = record.ceiling if isinstance(record, MeasurementRecord) else None
            if ceiling is not None and ceiling.probe_rates:
                best[ceiling.resource] = max(best.get(ceiling.resource, 0.0), *ceiling.probe_rates)
        if best:
            from ..machine.calibrate import raise_probe_bests

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                raise_probe_bests(best)
            self.notes.extend(f"{w.category.__name__}: {w.message}" for w in caught)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self._worker_id is not None:  # the controller shows the run
            return
        from .summary import write_summary

        write_summary(terminalreporter, self)


def _runs_nothing(fn: object) -> str | None:
    """What kind of function ``fn`` is when calling it only makes a coroutine or a generator."""
    import inspect

    if inspect.iscoroutinefunction(fn):
        return "a coroutine function (async def)"
    if inspect.isasyncgenfunction(fn):
        return "an async generator function"
    if inspect.isgeneratorfunction(fn):
        return "a generator function"
    return None


def _latency_floor_s(backend: Backend, *, flushed: bool = False) -> float:
    """What an empty call costs on the plugin's own timers, measured once per process and device
    (an empty Python call on the CPU, an empty kernel launch on a GPU); 0 for a backend a plugin
    serves, whose calls the plugin cannot time empty. ``flushed``: the kernel is timed right after a
    cache flush, and so is the CPU's empty call."""
    from ..timing.cpu import CpuBackend

    if isinstance(backend, CpuBackend):
        from ..timing.latency import cpu_latency_floor

        return cpu_latency_floor(flushed=flushed).floor_s
    from ..timing.cuda import CudaBackend, latency_floor

    if isinstance(backend, CudaBackend):  # in the backend's mode: graph or eager, held or not
        return latency_floor(backend.device, graph=backend.graph, block=backend.block_mode).floor_s
    return 0.0


def _blocking(backend: Backend, block: str | None) -> AbstractContextManager[object]:
    """The CUDA backend's ``blocking(block)`` (a marker's or call's ``block=``), or a no-op."""
    blocking = getattr(backend, "blocking", None)
    if block is None or blocking is None:
        return contextlib.nullcontext()
    return blocking(block)  # type: ignore[no-any-return]


@contextlib.contextmanager
def watching(backend: Backend) -> Iterator[ClockWatcher | None]:
    """The backend's clock watcher around a measurement (a GPU's, through NVML), or None for a backend
    that has none."""
    watch = getattr(backend, "watch_clocks", None)
    if watch is None:
        yield None
        return
    with watch() as watcher:
        yield watcher


def _stream_of(backend: Backend, stream: object) -> Callable[[object], AbstractContextManager[object]]:
    """The backend's ``on_stream`` (the CUDA backend's), or, without a stream, a no-op; a stream given to
    a backend that cannot take one is a ValueError naming both."""
    on_stream = getattr(backend, "on_stream", None)
    if stream is None or on_stream is None:
        if stream is not None:
            raise ValueError(
                f"stream={stream!r} was given, but this measurement runs on the {backend.name!r} backend,"
                " which times no CUDA stream"
            )
        return lambda _: contextlib.nullcontext()
    return on_stream  # type: ignore[no-any-return]


# -- helpers ---------------------------------------------------------------------------------------


def _registering(hook: str) -> str:
    """``pytest_roofline_register_ops in /path/conftest.py``: the hook and the plugin calling ``register``."""
    from .hookcalls import registering_plugin

    plugin = registering_plugin(hook)
    return f"{hook} in {plugin}" if plugin else hook
