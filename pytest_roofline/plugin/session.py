"""The session: the runtime hooks of one test run.

:class:`RooflineSession` is registered once the run needs it (``plugin.session_of``); it only answers
hooks, and the objects it holds do the work (the measurer, the devices, the record transport, the
registrations, the run's state): docs/architecture.md ("The layers", "One measurement, hop by hop").
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import RooflineError
from .failing import failing_the_test
from .fixture import BodyTimer, MeasurementCheck
from .marker import FIXTURE, check_fixtureless, has_marker, read_marker
from .measurer import Measurer
from .options import SessionSettings
from .registrations import Registrations
from .request import MARKER_KEY
from .run_devices import Devices, device_skip_reason
from .run_state import RunState
from .transport import RecordTransport

if TYPE_CHECKING:
    from ..model.core import Device
    from ..timing.base import Backend
    from .gpus import Spread

#: the key of a pytest-xdist worker's output that carries the node ids it deselected
DESELECTED_OUTPUT = "roofline_deselected"


class RooflineSession:
    """The runtime hooks of the run; registered as a plugin for the length of the run."""

    def __init__(self, config: pytest.Config, settings: SessionSettings) -> None:
        self.config = config
        self.settings = settings
        workerinput: Mapping[str, Any] | None = getattr(config, "workerinput", None)
        #: pytest-xdist's worker id (gw0, ...), None outside a worker
        self._worker_id: str | None = workerinput.get("workerid") if workerinput else None
        #: the controller's run ids, for removing the lock files at the end
        self._run_ids: set[str] = set()
        #: on the controller, the GPU each pytest-xdist worker was given (:mod:`.gpus`)
        self._spread: Spread | None = None
        from .gate import Gate

        #: what the run gathered: records, device records, notes, why it stopped
        self.state = RunState(settings, Gate(settings, reporting=self._worker_id is None))
        #: the devices and timers specs mean, resolved on first use
        self.devices = Devices(
            config, settings, notes=self.state.notes, device_records=self.state.device_records
        )
        self.transport = RecordTransport(self.state, worker=self._worker_id is not None)
        self.registrations = Registrations()
        self.measurer = Measurer(self.state, self.devices, self.transport)
        self._body_timer = BodyTimer(self.measurer)
        self._measurement_check = MeasurementCheck(self.measurer)

    def unregister(self) -> None:
        """Take this session, and the per-test wrappers that tests needed, out of the plugin manager."""
        manager = self.config.pluginmanager
        for plugin in (self._body_timer, self._measurement_check, self):
            if manager.is_registered(plugin):
                manager.unregister(plugin)

    # - hooks -

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_device(self, config: pytest.Config, spec: str) -> Device | None:
        return self.devices.builtin_device(spec)

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_backend(self, config: pytest.Config, device: Device, spec: str) -> Backend | None:
        return self.devices.builtin_backend(spec, device)

    def skip_absent_devices(self, items: list[pytest.Item]) -> None:
        """A test whose marker names a device that is not on this machine gets a skip mark, with the
        reason; a marker with a mistake is left to :meth:`pytest_runtest_setup`, which fails the test."""
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
                self.transport.absent[item.nodeid] = (marker.op or "?", reason)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Check the marker before the test runs (a test skipped for its device never gets here)."""
        if not has_marker(item):  # most tests: read_marker's None, at a fraction of its cost
            item.stash[MARKER_KEY] = None
            return
        __tracebackhide__ = True
        with failing_the_test(RooflineError):
            marker = read_marker(item)
            item.stash[MARKER_KEY] = marker
            if marker is None:
                return
            if "device" in marker.keywords:
                device_skip_reason(marker.keywords["device"])  # a misspelled device is a mistake
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
        """Records travel on the report of the phase that measured them (:meth:`.RecordTransport.carry`)."""
        self.transport.carry(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        """pytest-xdist, on the controller, before any worker starts: one GPU per worker (:mod:`.gpus`)."""
        import os

        from .gpus import count_gpus, spread_workers

        settings = self.settings
        self._spread = spread_workers(
            specs, gpus=settings.gpus, count=count_gpus, device_setting=settings.device, environ=os.environ
        )
        self.state.spread = self._spread.line

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist, on the controller: note the run id, whose lock files go at the end, and tell
        the worker which GPU it was given (a restarted worker keeps its spec, and so its GPU)."""
        workerinput = getattr(node, "workerinput", {})
        run_id = workerinput.get("testrunuid")
        if isinstance(run_id, str):
            self._run_ids.add(run_id)
        spread, spec = self._spread, getattr(getattr(node, "gateway", None), "spec", None)
        gpu = spread.worker_gpu(spec) if spread is not None else None
        if gpu is not None:
            from .gpus import WORKER_GPU

            workerinput[WORKER_GPU] = gpu

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """^C, or pytest-xdist stopping the run (-x, a worker's ^C): say so in the JSON."""
        state = self.state
        state.interruption = state.interruption or str(excinfo.value) or excinfo.typename

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """With ``--roofline-against``, the base's collection too, before any test runs: a base that
        cannot collect is said in one line (exit 4 in enforce mode: the gate cannot hold)."""
        from .against import Against, BaseUnavailable

        against = self.state.against
        if not isinstance(against, Against):
            return

        try:
            against.wait_collected()
            ran = {item.nodeid for item in session.items}
            self.state.gone_from_head = tuple(sorted(against.collected - ran))  # only the base has them
        except BaseUnavailable as exc:
            self.state.against = None
            against.close()
            self.without_base(str(exc))

    def without_base(self, why: str) -> None:
        """The base cannot be compared with: in enforce mode the gate cannot hold (a usage error, exit 4);
        in report mode the run goes on without the comparison, and says so."""
        if self.settings.mode == "enforce":
            raise pytest.UsageError(why) from None
        self.state.notes.append(f"{why}; this run compares nothing")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """The head's test ended: the base's version of it ends too."""
        partner = self.state.partner()
        if partner is not None:
            partner.end_test(item.nodeid)

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        """``-k``, ``-m``, a shard's selection (pytest-split): a baseline's tests left out are not run,
        not vanished. A pytest-xdist worker, where they are deselected, sends them to the controller."""
        nodeids = [item.nodeid for item in items]
        self.state.deselected.update(nodeids)
        workeroutput = getattr(self.config, "workeroutput", None)
        if isinstance(workeroutput, dict):
            workeroutput.setdefault(DESELECTED_OUTPUT, []).extend(nodeids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist, on the controller: what the worker deselected; and a worker that went down
        with an error lost the measurements of the test it was running."""
        self.state.deselected.update(getattr(node, "workeroutput", {}).get(DESELECTED_OUTPUT, ()))
        if error is not None and self.state.interruption is None:
            worker = getattr(node, "workerinput", {}).get("workerid", "a worker")
            self.state.interruption = f"worker {worker} went down ({error})"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if (copies := sys.modules.get("pytest_roofline.timing.copies")) is not None:
            copies.HostPool.release()  # this thread's buffer rotation's copies were carved from
        if self._worker_id is not None:  # a pytest-xdist worker: its reports carried everything
            return
        state = self.state
        stopped = session.shouldfail or session.shouldstop  # -x, --maxfail, a plugin's stop
        if state.interruption is None and (stopped or exitstatus == pytest.ExitCode.INTERRUPTED):
            state.interruption = str(stopped) if stopped else "interrupted"
        from ..machine.devicelock import remove_lock_files

        # Every worker has finished or crashed. (After -x or ^C one may still be ending a test: its
        # results would be dropped anyway, so an overlap then would disturb nothing reported.)
        for run_id in self._run_ids:
            remove_lock_files(run_id)
        from dataclasses import replace

        # xdist sends the workers' reports here, so every node is known
        state.records = [replace(r, xfailed=r.nodeid in state.xfailed) for r in state.records]
        self._keep_best_probe_rates()
        # the gate first: its comparisons go in the JSON
        state.gate.finish(
            state.records, list(state.device_records.values()), session, interruption=state.interruption,
            deselected=state.deselected,
        )  # fmt: skip
        if self.settings.json:
            from ..output.jsonfile import payload, write_json_atomic

            try:
                data = payload(
                    state.records, state.device_records.values(), interruption=state.interruption,
                    comparisons=state.gate.comparisons,
                )  # fmt: skip
                write_json_atomic(self.settings.json, data)
            except (OSError, ValueError) as exc:
                state.json_error = f"roofline: could not write --roofline-json {self.settings.json!r}: {exc}"
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _keep_best_probe_rates(self) -> None:
        """The calibration remembers the fastest this machine's probes have run (never the slowest),
        so "machine at 62% of its best" compares with the best it has really shown."""
        if not self.state.records:
            return  # nothing measured: import nothing (the records' module pulls in the model)
        from ..output.records import MeasurementRecord

        best: dict[str, float] = {}
        for record in self.state.records:
            ceiling = record.ceiling if isinstance(record, MeasurementRecord) else None
            if ceiling is not None and ceiling.probe_rates:
                best[ceiling.resource] = max(best.get(ceiling.resource, 0.0), *ceiling.probe_rates)
        if best:
            from ..machine.calibrate import raise_probe_bests

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                raise_probe_bests(best)
            self.state.notes.extend(f"{w.category.__name__}: {w.message}" for w in caught)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self._worker_id is not None:  # the controller shows the run
            return
        from .summary import write_summary

        write_summary(terminalreporter, self.state)
