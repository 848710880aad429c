"""The session: state of one test run, its runtime hooks, and the ``roofline`` fixture's object.

:class:`RooflineSession` is registered as a plugin for the length of the run (``plugin.py`` does
that in ``pytest_configure``). It resolves devices and timer backends through the plugin's own
hooks, resolves each measurement's request (call > marker > parametrize values > settings),
measures, records, and in enforce mode fails the test that missed its budget. The
:class:`Roofline` object is what a test's ``roofline`` argument is.

Records travel on the test reports: each phase's report carries what was measured in it
(``roofline_records``), so under pytest-xdist a worker's measurements reach the controller as each
test finishes, and a serial run collects them the same way. Under pytest-xdist, one worker at a
time measures on a device (:mod:`.devicelock`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .marker import (
    FIXTURE,
    KEYWORDS,
    MARKER,
    MarkerArgs,
    check_fixtureless,
    check_keywords,
    check_op_params,
    has_marker,
    op_params,
    parametrize_values,
    read_marker,
)
from .options import PEAK_SOURCES, SessionSettings

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from .ceilings import ProbeReference
    from .cpupeak import CpuPeak
    from .detect import Target
    from .devicelock import DeviceLocks
    from .model import Device, Estimate
    from .ops import OpSpec
    from .report import Record
    from .timing.base import Backend, Policy
    from .timing.engine import Measurement
    from .verdict import Result

#: a probe this much faster than at calibration means the calibration was taken under load
_STALE_SPEED = 1.3

#: the test's markers, read and checked at setup
MARKER_KEY = pytest.StashKey["MarkerArgs | None"]()
#: the measurements a test's ``roofline`` fixture was asked for (``roofline(...)``, ``.measure``)
MEASURED_KEY = pytest.StashKey[int]()

#: attributes of a test report: the records measured in its phase, the device records and (from
#: a pytest-xdist worker) the notes that are new since the process's previous report
RECORDS_ATTR = "roofline_records"
DEVICES_ATTR = "roofline_devices"
NOTES_ATTR = "roofline_notes"


@dataclass(frozen=True, slots=True)
class KernelCall:
    """What a ``roofline(...)`` call runs: the kernel, its arguments and keywords, and its setup."""

    fn: Callable[..., object]
    args: tuple[object, ...] = ()
    kwargs: Mapping[str, object] | None = None
    setup: Callable[[], object] | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """Everything one measurement needs, resolved through the precedence chain."""

    op: str
    params: dict[str, Any]
    dtype: object
    math: str | None
    min_fraction: float
    device_spec: str
    policy: Policy
    name: str


class RooflineSession:
    """Session state and the runtime hooks; registered as a plugin for the length of the run."""

    def __init__(self, config: pytest.Config, settings: SessionSettings) -> None:
        self.config = config
        self.settings = settings
        #: every record of the run, as the reports bring them (on a worker: its own)
        self.records: list[Record] = []
        #: every device record, by key and figures (``report.device_version``): a device measured
        #: again during the run has one per set of figures, so each row's judge stays on record
        self.device_records: dict[str, Record] = {}
        #: measured in this process, not yet on a report
        self._unsent: list[Record] = []
        #: the device records as the last report carried them, and the notes reported so far
        self._sent_devices: dict[str, Record] = {}
        self._sent_notes = 0
        #: node ids whose last attempt ended in a rerun: their next attempt replaces their records
        self._reran: set[str] = set()
        workerinput: Mapping[str, Any] | None = getattr(config, "workerinput", None)
        #: pytest-xdist's worker id (gw0, ...) and run id, None outside a worker
        self._worker_id: str | None = workerinput.get("workerid") if workerinput else None
        self._run_id: str | None = workerinput.get("testrunuid") if workerinput else None
        #: the controller's run ids, for removing the lock files at the end
        self._run_ids: set[str] = set()
        self._locks: DeviceLocks | None = None
        self._lock_keys: dict[str, str] = {}
        self._session_spec: str | None = None
        self._devices: dict[str, Device] = {}
        self._backends: dict[str, Backend] = {}
        self._cpu_backend: Backend | None = None
        #: what the register hooks added, and what they replaced (restored at unconfigure)
        self.registered_ops: dict[str, OpSpec | None] = {}
        self.registered_devices: dict[str, Device | None] = {}
        self.json_error: str | None = None
        #: why the run stopped early (^C, -x, a pytest-xdist worker that went down), None if it did not
        self.interruption: str | None = None
        #: warnings raised while resolving devices (calibration), shown with the terminal summary
        self.notes: list[str] = []
        #: whether this session judges against the CPU ceilings calibrate.py measured (and so
        #: may pair them with probes timed beside each kernel)
        self._measured_cpu = False
        #: node ids of the tests that failed as expected (xfail)
        self.xfailed: set[str] = set()
        #: tests skipped at collection because their marker's device is absent: node id -> (op, reason)
        self.absent: dict[str, tuple[str, str]] = {}
        self._body_timer = _BodyTimer(self)
        from .gating import Gate

        #: the baseline comparison, and the outputs CI reads (save, step summary, plot)
        self.gate = Gate(settings, reporting=self._worker_id is None)
        self._measurement_check = _MeasurementCheck(self)
        #: whether the summary already says the calibration was taken under load
        self._said_stale = False

    # - registrations (the historic register hooks) -

    def add_op(self, *args: Any, **kwargs: Any) -> OpSpec:
        from .ops import OpError, op_names, register_op

        name = args[0] if args else kwargs.get("name")
        previous = None
        if isinstance(name, str) and name in op_names():
            from .ops import get_op

            previous = get_op(name)
        try:
            spec = register_op(*args, **kwargs)
        except (OpError, TypeError) as exc:
            raise pytest.UsageError(f"{_registering('pytest_roofline_register_ops')}: {exc}") from None
        self.registered_ops.setdefault(spec.name, previous)
        return spec

    def add_device(self, device: Device) -> Device:
        from .devices import DeviceError, find_device, register_device

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
        from .devices import register_device, unregister_device
        from .ops import register_op, unregister_op

        for name, op in self.registered_ops.items():
            if op is None:
                unregister_op(name)
            else:  # a built-in (or earlier) op a conftest replaced for this session
                register_op(
                    op.name, op.params, op.cost_fn, matrix=op.matrix, flops=op.flops_formula,
                    bytes=op.bytes_formula, replace=True,
                )  # fmt: skip
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

    # - devices and backends -

    def check_session_device(self) -> None:
        """Explicitly asking for a device that is not there is a usage error naming it.

        ``auto`` is always there; ``cpu`` too (its calibration waits for the first measurement). Any
        other spec is resolved now, through the device hooks, after the register hooks have run.
        """
        settings = self.settings
        spec = settings.device
        if settings.mode == "off" or spec.lower() in ("auto", "cpu"):
            return
        try:
            self.device(self.session_spec())  # a pytest-xdist worker's own GPU
        except (ValueError, RuntimeError) as exc:
            where = settings.origins.get("device", "--roofline-device")
            raise pytest.UsageError(
                f"{where} {spec}: {exc}; use auto or cpu, or --roofline-mode off to run kernels untimed"
            ) from None

    def device(self, spec: str) -> Device:
        """The device that judges measurements made with ``spec``: the hooks first, then detection.

        A peaks file (``--roofline-peaks FILE``) overrides figures of whichever device that is.
        """
        if spec not in self._devices:
            # Calibration may warn (a corrupt cache replaced). Inside a test, a suite's
            # filterwarnings=error would turn that into the test's failure, so the warnings
            # are kept and printed with the terminal summary instead. Calibrating measures too,
            # so it holds the device's lock.
            with self.measuring(spec), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                from .hookcalls import first_result, is_device

                hook = self.config.hook.pytest_roofline_device
                device = first_result(hook, is_device, config=self.config, spec=spec)
            self.notes.extend(f"{w.category.__name__}: {w.message}" for w in caught)
            if device is None:  # every implementation declined, ours included: cannot happen
                raise RuntimeError(f"no device for {spec!r}")
            peaks = self.settings.peaks
            if peaks not in PEAK_SOURCES:
                from .devices import DeviceError
                from .peaks import load_peaks_file

                base, device = device, load_peaks_file(peaks, base=device)
                if device.kind != base.kind:
                    raise DeviceError(
                        f"{self.settings.origins.get('peaks', '--roofline-peaks')} {peaks}: its kind "
                        f"{device.kind!r} does not match the device it "
                        f"refines, {base.name!r} ({base.kind}); give kind {base.kind!r} or leave it out"
                    )
            from .report import device_record, device_version

            self._devices[spec] = device
            record = device_record(device)
            self.device_records.setdefault(device_version(record), record)
        return self._devices[spec]

    def session_spec(self) -> str:
        """The run's device spec as this process measures with it: under pytest-xdist, worker
        ``gw<i>`` of a run on ``auto`` or ``cuda`` takes GPU i mod n (:func:`.detect.worker_device_spec`)."""
        if self._session_spec is None:
            from .detect import worker_device_spec

            def cuda_count() -> int:
                from .timing.cuda import device_count

                return device_count()

            self._session_spec = worker_device_spec(self.settings.device, self._worker_id, cuda_count)
        return self._session_spec

    def measuring(self, spec: str) -> AbstractContextManager[None]:
        """Hold the lock of the device ``spec`` measures on: one pytest-xdist worker at a time times it.

        A no-op outside pytest-xdist; only the timing is serialized, never a test's own code.
        """
        if self._run_id is None:
            return contextlib.nullcontext()
        if self._locks is None:
            from .devicelock import DeviceLocks

            self._locks = DeviceLocks(self._run_id, note=self.notes.append)
        if spec not in self._lock_keys:
            self._lock_keys[spec] = _lock_key(spec)
        return self._locks.hold(self._lock_keys[spec])

    def builtin_device(self, spec: str) -> Device:
        target = _target(spec)
        if target.kind == "cpu":
            from .calibrate import cpu_device

            self._measured_cpu = True
            return cpu_device()
        from .detect import require_local

        require_local(target)
        index = target.index or 0
        if self.settings.peaks == "measured":  # a visible GPU, or the table entry of one
            from .calibrate import calibrate_cuda

            return calibrate_cuda(index).device
        if target.kind == "table":
            from .devices import lookup

            return lookup(target.spec)
        from .timing.cuda import cuda_device

        return cuda_device(index)

    def backend(self, spec: str, device: Device) -> Backend:
        key = f"{spec}|{device.key}"
        if key not in self._backends:
            from .hookcalls import first_result, is_backend

            hook = self.config.hook.pytest_roofline_backend
            backend = first_result(hook, is_backend, config=self.config, device=device, spec=spec)
            if backend is None:
                raise RuntimeError(f"no timer backend for {spec!r}")
            self._backends[key] = backend
        return self._backends[key]

    def builtin_backend(self, spec: str, device: Device) -> Backend:
        """The host timer for the CPU, CUDA events for a GPU: chosen by where ``spec`` measures,
        not by the device's figures (a peaks file may describe any device)."""
        target = _target(spec)
        if target.kind == "cpu":
            if self._cpu_backend is None:  # one per session: its flush buffer is 2x the LLC
                from .timing.cpu import CpuBackend

                self._cpu_backend = CpuBackend()
            return self._cpu_backend
        from .timing.cuda import CudaBackend

        return CudaBackend(target.index or 0)

    # - per-test resolution -

    def policy(self, keywords: Mapping[str, Any]) -> Policy:
        from .timing.base import Policy

        s = self.settings
        return Policy(
            stat=keywords.get("stat", s.stat),
            max_time_s=float(keywords.get("max_time", s.max_time)),
            flush=keywords.get("flush", s.flush),
        )

    def resolve(
        self, item: pytest.Item, call: Mapping[str, Any], kernel: KernelCall | None = None
    ) -> Request:
        """Call keywords over the marker over parametrize values over session settings; a dtype given
        nowhere is read from the ``kernel``'s arguments (:func:`_dtype_of_arguments`).

        Raises ValueError (OpError, DeviceError) naming the parameter and the value.
        """
        # (a session made by a fixture a test requested dynamically did not set its test up)
        marker = (item.stash[MARKER_KEY] if MARKER_KEY in item.stash else read_marker(item)) or MarkerArgs()
        call = dict(call)
        op = call.pop("op", None) or marker.op
        name = _check_name(call.pop("name", None))
        if op is None:
            raise ValueError(
                f"no op: pass op=... to {FIXTURE}(...) or mark the test with "
                f"@pytest.mark.{MARKER}(op, ...) (`roofline ops` lists them)"
            )
        from .ops import get_op
        from .verdict import check_fraction

        parametrized = parametrize_values(item)
        params = op_params(get_op(op), parametrized)
        if op == marker.op:
            params.update(marker.params)
        keywords = dict(marker.keywords)
        keywords.update({k: call.pop(k) for k in KEYWORDS if k in call})
        params.update(call)
        # here too for mode off, which estimates nothing; before the dtype, which a kernel's keyword
        # passed as an op parameter (out=...) would otherwise hide
        check_op_params(op, params, complete=True, kernel_keywords=kernel is not None)
        dtype = keywords.get("dtype", parametrized.get("dtype"))
        if dtype is None:
            dtype = _dtype_of_arguments(op, kernel)
        check_keywords({**keywords, "dtype": dtype})
        min_fraction = check_fraction(keywords.get("min_fraction", self.settings.min_fraction))
        return Request(
            op=op,
            params=params,
            dtype=dtype,
            math=keywords.get("math"),
            min_fraction=min_fraction,
            device_spec=keywords["device"] if "device" in keywords else self.session_spec(),
            policy=self.policy(keywords),
            name=name,
        )

    def estimate(self, request: Request, *, measuring: bool = True) -> Estimate:
        """The floor of ``request``; a table device needs no local hardware unless it is measured on."""
        from .floor import estimate

        spec = request.device_spec
        if not measuring and _names_a_table_device(spec):
            from .devices import lookup

            device = lookup(spec)
        else:
            device = self.device(spec)
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
            _fail(f"{FIXTURE}: the kernel must be callable; got {fn!r} ({type(fn).__name__})")
        from .timing.engine import SetupError, call_once, check_call

        with _failing_the_test(TypeError):
            check_call(kwargs, setup)  # what the fixture's caller passed: any value at all
        kernel = KernelCall(fn, args, kwargs, setup)
        with _failing_the_test(ValueError):
            request = self.resolve(item, call, kernel)
        if request.device_spec != self.settings.device:
            self._skip_if_absent(item, request.op, request.device_spec)
        if self.settings.mode == "off":
            with _failing_the_test(SetupError):
                call_once(fn, args, kernel.kwargs, kernel.setup)
            return None
        with _failing_the_test(ValueError, RuntimeError):
            est = self.estimate(request)
            device = self.device(request.device_spec)
            backend = self.backend(request.device_spec, device)
        from .report import result_record
        from .verdict import Verdict, decide

        on_cpu = backend.name == "cpu"
        reference = self._probe_reference(est) if on_cpu else None
        measure_once = self._measurer(kernel, request, est, backend, reference, on_cpu=on_cpu)
        peak = self._cpu_peak() if on_cpu and est.device.kind == "cpu" else None
        # warm-up, probes, sampling, a re-measure: one window
        with self.measuring(request.device_spec), _failing_the_test(SetupError):
            result = decide(
                est,
                measure_once,
                request.min_fraction,
                budget_s=request.policy.max_time_s,
                remeasure=can_fail and self.settings.mode == "enforce",
                name=request.name,
                nodeid=item.nodeid,
                reference=reference,
                peak=peak,
            )
        if result.ceiling is not None and result.ceiling.speed > _STALE_SPEED and not self._said_stale:
            self._said_stale = True
            self.notes.append(
                f"this CPU ran {result.ceiling.speed:.1f}x faster than when it was calibrated (probe"
                f" {result.ceiling.probe}): the calibration was taken under load; paired ceilings make"
                " up for it, and `roofline calibrate --force` measures it again"
            )
        mode = self.settings.mode if can_fail else "measure"
        record = result_record(result, nodeid=item.nodeid, mode=mode)
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
                _fail(result.message())
            if self.settings.inconclusive == "skip":
                pytest.skip(result.message())
            from .calibrate import RooflineWarning

            item.warn(RooflineWarning(result.message()))
        if mode == "enforce":  # within budget, but perhaps well below where the baseline stood
            self.gate.check(record)
        return result

    def _measurer(
        self,
        kernel: KernelCall,
        request: Request,
        est: Estimate,
        backend: Backend,
        reference: ProbeReference | None,
        *,
        on_cpu: bool,
    ) -> Callable[[float], Measurement]:
        """``measure_once(budget_s)``: the engine, with this kernel's flush choice, probe and OS readings."""
        import dataclasses

        from .timing.engine import measure
        from .timing.flushing import choose_flush

        flush = choose_flush(est.bytes, est.device.llc_bytes, requested=request.policy.flush)
        policy = dataclasses.replace(
            request.policy, flush=flush.flush, flush_note=flush.note, rewarm=not flush.past_cache
        )
        snapshot = None
        if on_cpu:
            from .contention import take_snapshot

            snapshot = take_snapshot

        def measure_once(budget_s: float) -> Measurement:
            __tracebackhide__ = True
            probe = None
            if reference is not None:  # built here, inside the device lock: it allocates its arrays
                from .probes import probe_for

                probe = probe_for(reference)
            budgeted = dataclasses.replace(policy, max_time_s=budget_s)
            return measure(
                kernel.fn, *kernel.args, kwargs=kernel.kwargs, setup=kernel.setup, policy=budgeted,
                backend=backend, probe=probe, snapshot=snapshot,
            )  # fmt: skip

        return measure_once

    def _probe_reference(self, est: Estimate) -> ProbeReference | None:
        """The calibration's probe for the resource bounding ``est``, when its ceilings are this CPU's
        measured ones and paired ceilings are on."""
        if self.settings.ceilings != "paired" or not self._measured_cpu or est.device.kind != "cpu":
            return None
        from .calibrate import cpu_calibration
        from .ceilings import resource_of
        from .model import Source

        source = est.peak_source if est.bound == "compute" else est.bandwidth_source
        if source is not Source.MEASURED:  # a peaks file's figure is the user's, not the probe's
            return None

        return cpu_calibration().probes.get(resource_of(est))

    def _cpu_peak(self) -> CpuPeak | None:
        from .cpupeak import cpu_peak

        return cpu_peak()

    def _skip_if_absent(self, item: pytest.Item, op: str, spec: str) -> None:
        """A call's ``device=`` that is not on this machine skips the test, as the marker's does."""
        __tracebackhide__ = True  # pytest reports a skip at the innermost visible frame: the test's call
        with _failing_the_test(ValueError):
            reason = _device_skip_reason(spec)
        if reason:
            self._record_skip(item.nodeid, op, reason)
            pytest.skip(reason)

    def _record_skip(self, nodeid: str, op: str, reason: str) -> None:
        from .report import skipped_record

        self._unsent.append(skipped_record(nodeid=nodeid, label=op, reason=reason))

    # - hooks -

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_device(self, config: pytest.Config, spec: str) -> Device | None:
        return self.builtin_device(spec)

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_backend(self, config: pytest.Config, device: Device, spec: str) -> Backend | None:
        return self.builtin_backend(spec, device)

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
                reason = _device_skip_reason(spec) if spec is not None else ""
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
        with _failing_the_test(ValueError):
            marker = read_marker(item)
            item.stash[MARKER_KEY] = marker
            if marker is not None and "device" in marker.keywords:
                _device_skip_reason(marker.keywords["device"])  # a misspelled device is a mistake
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
            self.records = [r for r in self.records if r["nodeid"] != nodeid]
        if carried.get("outcome") == "rerun":
            self._reran.add(nodeid)
        self.records.extend(carried.get(RECORDS_ATTR) or ())
        for device in carried.get(DEVICES_ATTR) or ():
            version = f"{device['key']}@{device['figures']}"  # report.device_version, unimported
            self.device_records.setdefault(version, device)
            self._sent_devices[version] = self.device_records[version]  # received: never sent on again
        self.notes.extend(carried.get(NOTES_ATTR) or ())

    def _attach(self, report: pytest.TestReport) -> None:
        """Put on ``report`` what this process measured since the last one: plain JSON-ready values,
        since reports are serialized for the trip to the controller."""
        if self._unsent:
            setattr(report, RECORDS_ATTR, self._unsent)
            self._unsent = []
        changed = [r for key, r in self.device_records.items() if self._sent_devices.get(key) is not r]
        if changed:  # new, or its figures measured again
            setattr(report, DEVICES_ATTR, changed)
            self._sent_devices.update((f"{r['key']}@{r['figures']}", r) for r in changed)
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
        if self._worker_id is not None:  # a pytest-xdist worker: its reports carried everything
            return
        stopped = session.shouldfail or session.shouldstop  # -x, --maxfail, a plugin's stop
        if self.interruption is None and (stopped or exitstatus == pytest.ExitCode.INTERRUPTED):
            self.interruption = str(stopped) if stopped else "interrupted"
        from .devicelock import remove_lock_files

        # Every worker has finished or crashed. (After -x or ^C one may still be ending a test: its
        # results would be dropped anyway, so an overlap then would disturb nothing reported.)
        for run_id in self._run_ids:
            remove_lock_files(run_id)
        for record in self.records:  # xdist sends the workers' reports here, so every node is known
            record["xfailed"] = record["nodeid"] in self.xfailed
        self._keep_best_probe_rates()
        if self.settings.json:
            from .report import payload, write_json_atomic

            try:
                data = payload(self.records, self.device_records.values(), interruption=self.interruption)
                write_json_atomic(self.settings.json, data)
            except (OSError, ValueError) as exc:
                self.json_error = f"roofline: could not write --roofline-json {self.settings.json!r}: {exc}"
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self.gate.finish(self.records, list(self.device_records.values()), session)

    def _keep_best_probe_rates(self) -> None:
        """The calibration remembers the fastest this machine's probes have run (never the slowest),
        so "machine at 62% of its best" compares with the best it has really shown."""
        best: dict[str, float] = {}
        for record in self.records:
            ceiling = record.get("ceiling")
            if ceiling and ceiling.get("probe_rates"):
                resource = ceiling["resource"]
                best[resource] = max(best.get(resource, 0.0), *ceiling["probe_rates"])
        if best:
            from .calibrate import raise_probe_bests

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                raise_probe_bests(best)
            self.notes.extend(f"{w.category.__name__}: {w.message}" for w in caught)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self._worker_id is not None:
            return
        tr = terminalreporter
        for note in dict.fromkeys(self.notes):
            tr.write_line(f"roofline: {note}", yellow=True)
        if self.settings.report:
            import shutil

            from .report import format_device_headers, format_table, ordered, skipped_notes, summary_counts

            tr.write_sep("=", "roofline report")
            for line in format_device_headers(self.device_records.values(), self.records):
                tr.write_line(line)
            if self.records:
                columns = self.settings.columns
                width = None if columns else shutil.get_terminal_size().columns  # COLUMNS, as pytest
                lines = format_table(self.records, self.device_records.values(), width=width, columns=columns)
                for line in lines[:2]:
                    tr.write_line(line, bold=True)
                for line, record in zip(lines[2:], ordered(self.records), strict=True):
                    verdict = record["verdict"]
                    tr.write_line(
                        line,
                        red=verdict in ("MISS", "faster-than-light"),
                        bold=verdict in ("MISS", "faster-than-light"),
                        green=verdict == "pass",
                        yellow=verdict in ("skipped", "inconclusive"),
                    )
                for line in skipped_notes(self.records):
                    tr.write_line(line, yellow=True)
            tr.write_line(f"{summary_counts(self.records)}; mode {self.settings.mode}")
        if self.interruption and (self.settings.report or self.settings.json):
            tr.write_line(
                f"roofline: the run was cut short ({self.interruption}): the measurements of the tests "
                "that did not finish are missing",
                yellow=True,
            )
        for line in self.gate.summary_lines():
            tr.write_line(line, red=line.startswith("  regression"), bold=line.startswith("  regression"))
        for error in self.gate.errors:
            tr.write_line(error, red=True, bold=True)
        if self.json_error:
            tr.write_line(self.json_error, red=True, bold=True)
        elif self.settings.json:
            tr.write_line(f"roofline: wrote {len(self.records)} measurement(s) to {self.settings.json}")


class _BodyTimer:
    """The ``pyfunc_call`` wrapper of marked tests that take no fixture: a plugin of its own, so
    that it exists only once such a test is set up."""

    def __init__(self, session: RooflineSession) -> None:
        self._session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        """A marked test without the fixture runs once normally, then its body is timed as the kernel."""
        outcome = yield
        session = self._session
        marker = pyfuncitem.stash.get(MARKER_KEY, None)
        if marker is None or FIXTURE in pyfuncitem.fixturenames or session.settings.mode == "off":
            return outcome
        names = inspect.signature(pyfuncitem.obj).parameters
        kwargs = {n: pyfuncitem.funcargs[n] for n in names if n in pyfuncitem.funcargs}
        try:
            session.run(pyfuncitem, functools.partial(pyfuncitem.obj, **kwargs), (), {}, can_fail=True)
        except Exception as exc:
            fixture = _once_only_fixture(exc, pyfuncitem.funcargs)  # the test's own, and theirs
            if fixture is None:
                raise  # the body's own error, with its own traceback
            _fail(
                f"{FIXTURE}: {pyfuncitem.name} passed, then raised {type(exc).__name__} when run again to be"
                f" timed: its fixture {fixture!r} can be used only once per test ({exc}). Without the"
                f" {FIXTURE} fixture, @pytest.mark.{MARKER} times the whole test body by running it many"
                f" times; take the {FIXTURE} fixture and time the kernel alone: {FIXTURE}(kernel, *args)"
            )
        return outcome


def _once_only_fixture(error: Exception, funcargs: Mapping[str, object]) -> str | None:
    """The fixture whose value comes from the module that raised ``error``: a body that ran once and
    then failed with, say, pytest-benchmark's ``FixtureAlreadyUsed`` (its ``benchmark`` fixture's
    value is a ``BenchmarkFixture`` of the same module) is a body that cannot run twice."""
    module = type(error).__module__
    if module == "builtins":
        return None
    return next((name for name, value in funcargs.items() if type(value).__module__ == module), None)


class _MeasurementCheck:
    """The ``pyfunc_call`` wrapper of marked tests that take the fixture: a test that passed without
    measuring has lost its budget unnoticed (a refactor dropped the ``roofline(...)`` call)."""

    def __init__(self, session: RooflineSession) -> None:
        self._session = session

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        """After a passing body (a skip or a failure raises through here): warn, or fail when required."""
        __tracebackhide__ = True
        outcome = yield
        if pyfuncitem.stash.get(MEASURED_KEY, None) != 0 or pyfuncitem.stash.get(MARKER_KEY, None) is None:
            return outcome  # measured; or the fixture was replaced, or the test is not marked
        settings = self._session.settings
        message = (
            f"{pyfuncitem.nodeid} is marked @pytest.mark.{MARKER} and takes the {FIXTURE} fixture, but"
            f" measured nothing, so no budget was checked: call {FIXTURE}(kernel, *args) or"
            f" {FIXTURE}.measure(...) in the test ({FIXTURE}.estimate measures nothing), or drop the marker"
        )
        if settings.require_measurement:
            origin = settings.origins.get("require_measurement", "roofline_require_measurement")
            _fail(f"{FIXTURE}: {message} ({origin} requires a measurement)")
        from .calibrate import RooflineWarning

        pyfuncitem.warn(RooflineWarning(message))
        return outcome


class Roofline:
    """The ``roofline`` fixture: ``roofline(fn, *args, op=..., **params)`` times and judges a kernel."""

    def __init__(self, item: pytest.Item, session: RooflineSession) -> None:
        self._item = item
        self._session = session
        item.stash[MEASURED_KEY] = 0

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

        Every other keyword is the op's (``**params``) or the marker's: the marker's values are
        defaults, and these override them (``math``, ``stat``, ``max_time``, ``flush`` and
        ``device`` too). ``setup()`` runs before every call, untimed, and may return ``(args,
        kwargs)`` for it. Returns the frozen result (``attained``, ``floor_s``, ``time_s``,
        ``bound``, ``passed``, ``stats``, ``estimate``, ...), or None in mode off, where the kernel
        is called once (after setup) and not timed.
        """
        __tracebackhide__ = True
        self._item.stash[MEASURED_KEY] += 1
        call = _given(dict(params, op=op, dtype=dtype, min_fraction=min_fraction, name=name))
        return self._session.run(self._item, fn, args, call, can_fail=True, kwargs=kwargs, setup=setup)

    def measure(
        self, fn: Callable[..., object], *args: object, op: str | None = None, dtype: object = None,
        name: str | None = None, kwargs: Mapping[str, object] | None = None,
        setup: Callable[[], object] | None = None, **params: Any,
    ) -> Result | None:  # fmt: skip
        """Like calling the fixture, but never fails the test on the result: a measurement for the report."""
        __tracebackhide__ = True
        self._item.stash[MEASURED_KEY] += 1
        call = _given(dict(params, op=op, dtype=dtype, name=name))
        return self._session.run(self._item, fn, args, call, can_fail=False, kwargs=kwargs, setup=setup)

    def estimate(self, op: str | None = None, *, dtype: object = None, **params: Any) -> Estimate:
        """The floor only, on this test's device: nothing runs."""
        __tracebackhide__ = True
        session = self._session
        with _failing_the_test(ValueError, RuntimeError):
            request = session.resolve(self._item, _given(dict(params, op=op, dtype=dtype)))
            floor = session.estimate(request, measuring=False)
        return floor

    @property
    def device(self) -> Device:
        """The session's device (resolved, and for the CPU calibrated, on first use)."""
        return self._session.device(self._session.session_spec())


# -- failing the test --------------------------------------------------------------------------------


def _fail(message: str) -> NoReturn:
    """Fail the current test with ``message`` only: no traceback, no chained exception above it."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None


class _failing_the_test:  # lower case, like contextlib.suppress: it reads as a with-statement
    """Any of ``errors`` raised inside fails the current test with ``roofline: <its message>``.

    A class, not a generator: its ``__exit__`` hides its own frame, so a failure in a hook shows no
    frame at all, as it would without the ``with``.
    """

    def __init__(self, *errors: type[Exception]) -> None:
        self.errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        __tracebackhide__ = True
        if isinstance(exc, self.errors):
            _fail(f"{FIXTURE}: {exc}")


# -- helpers -----------------------------------------------------------------------------------------


def _registering(hook: str) -> str:
    """``pytest_roofline_register_ops in /path/conftest.py``: the hook and the plugin calling ``register``."""
    from .hookcalls import registering_plugin

    plugin = registering_plugin(hook)
    return f"{hook} in {plugin}" if plugin else hook


def _given(call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if v is not None}


def _dtype_of_arguments(op: str, kernel: KernelCall | None) -> object:
    """The dtype of the first argument that has one, when neither the marker nor the call gives it:
    the positional arguments, then ``kwargs``' values, then a ``functools.partial``'s (the kernel
    itself, or a partial inside it)."""
    from .model import parse_dtype

    for where, arg in _arguments_of(kernel):
        dtype = getattr(arg, "dtype", None)
        if dtype is not None:
            try:
                return parse_dtype(dtype)
            except ValueError as exc:
                raise ValueError(
                    f"{op}: no dtype was given, and {where} has dtype {dtype}, which is not one: {exc}; "
                    "pass dtype=... to the marker or the call"
                ) from None
    late = (
        " (it cannot be read from the arguments setup returns: they are made while measuring)"
        if kernel is not None and kernel.setup is not None
        else ""
    )
    raise ValueError(f"{op} needs dtype: pass dtype=... to the marker or the call{late}")


def _arguments_of(kernel: KernelCall | None) -> Iterator[tuple[str, object]]:
    """Each argument the kernel will get, with where it comes from, in the order dtypes are read."""
    if kernel is None:  # roofline.estimate runs nothing
        return
    yield from ((f"argument {i}", arg) for i, arg in enumerate(kernel.args))
    yield from ((f"kwargs[{key!r}]", value) for key, value in (kernel.kwargs or {}).items())
    fn: object = kernel.fn
    while isinstance(fn, functools.partial):
        yield from ((f"argument {i} of the functools.partial", arg) for i, arg in enumerate(fn.args))
        yield from ((f"keyword {key!r} of the functools.partial", v) for key, v in fn.keywords.items())
        fn = fn.func


def _check_name(name: object) -> str:
    """A measurement's name, as the report, the JSON and ``--junitxml`` will show it: one printable line."""
    if name is None:
        return ""
    if not isinstance(name, str):
        raise ValueError(f"name must be a string; got {name!r} ({type(name).__name__})")
    if not name.isprintable():
        raise ValueError(
            f"name must be printable text on one line (no newline, tab or control character); got {name!r}"
        )
    return name


def _target(spec: str) -> Target:
    """Where measurements made with ``spec`` run (``auto`` is what it means on this machine)."""
    from .detect import auto_spec, parse_target

    return parse_target(auto_spec() if spec == "auto" else spec)


def _lock_key(spec: str) -> str:
    """What ``spec`` measures on, as a device lock's name: ``cpu``, ``cuda<N>`` or the spec itself."""
    from .devices import DeviceError

    try:
        target = _target(spec)
    except DeviceError:  # a device only a plugin's hook knows
        return spec.strip().lower()
    if target.kind == "cpu":
        return "cpu"
    return f"cuda{target.index}" if target.index is not None else target.spec


def _names_a_table_device(spec: str) -> bool:
    keyword = spec.strip().lower()
    from .detect import CUDA_SPEC

    return keyword not in ("auto", "cpu") and not CUDA_SPEC.fullmatch(keyword)


def _device_skip_reason(spec: str) -> str:
    """Why a marker's device is not on this machine ("" when it is); ValueError for a wrong spec."""
    from .detect import CUDA_SPEC

    cuda = CUDA_SPEC.fullmatch(spec.strip().lower())
    if cuda:
        from .timing.cuda import device_count

        index, count = int(cuda["index"] or 0), device_count()
        if index < count:
            return ""
        return f"needs CUDA device {index} (device={spec!r}); {count} visible here (CuPy missing or no GPU)"
    from .detect import parse_target

    target = parse_target(spec)  # an unknown name is a mistake, not a missing device
    if target.local:
        return ""
    return f"needs {spec!r} (device={spec!r}): a table device that is not on this machine"
