"""Results as records, tables and JSON: the names this module had before it was split by concern.

The typed records live in :mod:`.records`, the JSON file in :mod:`.jsonfile` and the terminal report
in :mod:`.table`; every name is importable from here too, as tests and users import them. The three
functions below give a record as plain JSON, as this module's did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..model.core import Device
from ..model.verdict import Result
from .jsonfile import device_judgements, environment, payload, write_json_atomic
from .records import RECORD_FIELDS, SCHEMA_VERSION, DeviceRecord, JsonObject, MeasurementRecord, SkippedRecord
from .records import Record as Record
from .records import figures_id as figures_id
from .table import (
    COLUMNS,
    ESSENTIAL,
    MIN_TEST_WIDTH,
    PRIORITY,
    TABLE_HEADERS,
    achieved_cell,
    bound_cell,
    ceiling_cell,
    format_device_header,
    format_device_headers,
    format_table,
    machine_cell,
    ordered,
    parse_columns,
    skipped_notes,
    summary_counts,
    table_rows,
)

__all__ = [
    "COLUMNS", "ESSENTIAL", "MIN_TEST_WIDTH", "PRIORITY", "RECORD_FIELDS", "SCHEMA_VERSION", "TABLE_HEADERS",
    "Record", "achieved_cell", "bound_cell", "ceiling_cell", "device_record", "device_version",
    "environment", "figures_id", "format_device_header", "format_device_headers", "format_table",
    "judged_devices", "machine_cell", "ordered", "parse_columns", "payload", "result_record",
    "skipped_notes", "skipped_record", "summary_counts", "table_rows", "write_json_atomic",
]  # fmt: skip


def result_record(result: Result, *, nodeid: str, mode: str) -> JsonObject:
    """A judged measurement's record as JSON (:meth:`.MeasurementRecord.from_result`)."""
    return MeasurementRecord.from_result(result, nodeid=nodeid, mode=mode).to_json()


def skipped_record(*, nodeid: str, label: str, reason: str) -> JsonObject:
    """A marked test that did not measure, as JSON (:class:`.SkippedRecord`)."""
    return SkippedRecord(nodeid=nodeid, label=label, reason=reason).to_json()


def device_record(device: Device) -> JsonObject:
    """A device's record as JSON (:meth:`.DeviceRecord.of`)."""
    return DeviceRecord.of(device).to_json()


def device_version(device: Mapping[str, Any]) -> str:
    """``cpu@1a2b3c4d``: a device record's key together with its figures (:attr:`.DeviceRecord.version`)."""
    return DeviceRecord.from_json(device).version


def judged_devices(
    devices: Iterable[DeviceRecord | Mapping[str, Any]], records: Sequence[Record | Mapping[str, Any]]
) -> list[JsonObject]:
    """Each device record as JSON, with how many ``records`` its figures judged (``measurements``)
    and ``remeasured`` when its device had other figures too (:func:`.jsonfile.device_judgements`)."""
    return [
        {**device.to_json(), "remeasured": remeasured, "measurements": judged}
        for device, remeasured, judged in device_judgements(devices, records)
    ]
