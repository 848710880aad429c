"""Records' travel from the process that measures to the one that shows the run: on each phase's
test report (``roofline_records``), so under pytest-xdist they reach the controller as each test
ends. The controller reads a worker's records from their JSON; a serial run keeps its own typed
records, and its reports carry the JSON only for other plugins. docs/json.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

    from ..output.records import DeviceRecord, Record
    from .run_state import RunState

#: attributes of a test report: the records measured in its phase, the device records and (from
#: a pytest-xdist worker) the notes that are new since the process's previous report
RECORDS_ATTR = "roofline_records"
DEVICES_ATTR = "roofline_devices"
NOTES_ATTR = "roofline_notes"


class RecordTransport:
    """What this process measured, put on the next report; what the reports carry, gathered."""

    def __init__(self, state: RunState, *, worker: bool) -> None:
        self._state = state
        #: whether this is a pytest-xdist worker (it sends everything and gathers nothing)
        self._worker = worker
        #: measured in this process, not yet on a report
        self._unsent: list[Record] = []
        #: the device records as the last report carried them, and the notes reported so far
        self._sent_devices: dict[str, DeviceRecord] = {}
        self._sent_notes = 0
        #: node ids whose last attempt ended in a rerun: their next attempt replaces their records
        self._reran: set[str] = set()
        #: tests skipped at collection because their marker's device is absent: node id -> (op, reason)
        self.absent: dict[str, tuple[str, str]] = {}

    def send(self, record: Record) -> None:
        """Put ``record`` on the report of the phase that measured it."""
        self._unsent.append(record)

    def send_skip(self, nodeid: str, op: str, reason: str) -> None:
        """A test skipped because its device is absent: a row in the report all the same."""
        from ..output.records import SkippedRecord

        self._unsent.append(SkippedRecord(nodeid=nodeid, label=op, reason=reason))

    def carry(self, report: pytest.TestReport) -> None:
        """Put the records measured in this phase on its ``report``; in the process that shows the run
        (the controller, or a serial run), collect them, and remember the tests that failed as expected.
        A test run again (pytest-rerunfailures' ``rerun``) keeps only its last attempt's records:
        docs/options.md ("pytest-xdist and reruns").
        """
        state = self._state
        carried = report.__dict__  # (``report.nodeid`` is a property: read only where needed)
        if "wasxfail" in carried and report.when == "call":
            state.xfailed.add(report.nodeid)
        pending = self._unsent or self.absent or self._reran or state.device_records
        carries = RECORDS_ATTR in carried or DEVICES_ATTR in carried or NOTES_ATTR in carried
        if not pending and len(state.notes) == self._sent_notes and not carries:
            if carried.get("outcome") == "rerun":  # pytest-rerunfailures' outcome, beyond pytest's three
                self._reran.add(report.nodeid)
            return  # most reports of most suites: nothing measured, nothing carried
        nodeid = report.nodeid
        if report.when == "setup" and report.skipped and nodeid in self.absent:
            op, reason = self.absent.pop(nodeid)
            self.send_skip(nodeid, op, reason)
        # what a pytest-xdist worker sent (read before this process puts its own on the report)
        arrived = {attr: carried.get(attr) or () for attr in (RECORDS_ATTR, DEVICES_ATTR, NOTES_ATTR)}
        own = self._unsent
        if self._unsent or state.device_records or len(state.notes) > self._sent_notes:
            self._attach(report)
        if self._worker:
            return
        if report.when == "setup" and nodeid in self._reran:
            self._reran.discard(nodeid)
            state.records = [r for r in state.records if r.nodeid != nodeid]
        if carried.get("outcome") == "rerun":
            self._reran.add(nodeid)
        state.records.extend(own)  # typed as they were made: this process measured them
        if arrived[RECORDS_ATTR] or arrived[DEVICES_ATTR]:  # plain JSON, as it crossed from a worker
            from ..output.records import DeviceRecord, record_from_json

            state.records.extend(map(record_from_json, arrived[RECORDS_ATTR]))
            for device in map(DeviceRecord.from_json, arrived[DEVICES_ATTR]):
                version = device.version
                state.device_records.setdefault(version, device)
                self._sent_devices[version] = state.device_records[version]  # received: never sent on again
        state.notes.extend(arrived[NOTES_ATTR])

    def _attach(self, report: pytest.TestReport) -> None:
        """Put on ``report`` what this process measured since the last one, as plain JSON-ready values:
        a worker's reports are serialized for the trip to the controller, and in any process a
        ``pytest_runtest_logreport`` hook reads ``report.roofline_records`` (docs/json.md)."""
        state = self._state
        if self._unsent:
            setattr(report, RECORDS_ATTR, [r.to_json() for r in self._unsent])
            self._unsent = []
        changed = [r for key, r in state.device_records.items() if self._sent_devices.get(key) is not r]
        if changed:  # new, or its figures measured again
            setattr(report, DEVICES_ATTR, [r.to_json() for r in changed])
            self._sent_devices.update((r.version, r) for r in changed)
        if self._worker and len(state.notes) > self._sent_notes:
            setattr(report, NOTES_ATTR, state.notes[self._sent_notes :])  # a worker shows no summary
            self._sent_notes = len(state.notes)
