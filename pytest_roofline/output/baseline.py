"""Baselines: an earlier run's JSON report, read and checked. No pytest here.

A file is untrusted input, each fault a :class:`BaselineError` naming it; each measured row becomes a
:class:`~.records.MeasurementRecord`, one per :data:`StoreKey`. docs/ci.md ("What a save does").
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import RooflineUsageError

if TYPE_CHECKING:  # the records import the model: read only when a baseline is
    from .records import MeasurementRecord, Record

#: the JSON schema this version writes (:meth:`.records.MeasurementRecord.to_json`), the one it reads
SCHEMA_VERSION = 2
#: fields a measured record must have, and the JSON types they must be
REQUIRED: dict[str, type | tuple[type, ...]] = {
    "nodeid": str,
    "name": str,
    "attained": (int, float),
    "time_s": (int, float),
    "device": str,
    "verdict": str,
}
#: a record with this verdict (``Verdict.SKIPPED``'s) measured nothing
_UNMEASURED = "skipped"
#: the attained fractions a baseline may hold, its own and its history's: outside, a figure is broken
#: (and its logarithms and ratios would overflow the comparison)
ATTAINED_RANGE = (1e-12, 1e3)
#: the longest a call may have taken, in seconds (eleven days)
MAX_TIME_S = 1e6
#: the runs a baseline keeps per test, the newest (docs/ci.md, "The saved baseline")
HISTORY_RUNS = 8

#: a test and its measurement's name
Key = tuple[str, str]
#: a test, its measurement's name and the machine it ran on
#: (:attr:`~.records.MeasurementRecord.machine`): a baseline's record
StoreKey = tuple[str, str, str]


class BaselineError(RooflineUsageError, ValueError):
    """A baseline that cannot be read: the message names the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """A whole baseline file."""

    path: str
    #: when the run that wrote it ended (ISO 8601), when the file says
    created: str | None
    #: the device of each record, by key: name (for "measured on <name>")
    devices: Mapping[str, str]
    #: one record per test, for what does not ask which device (a test kept for several: its first)
    records: Mapping[Key, MeasurementRecord] = field(default_factory=dict)
    #: how the run that wrote it was cut short (``-x``, ^C, a worker that went down), None if it was not
    interruption: str | None = None
    #: every record, by test and machine (a store keeps one per device); empty: ``records`` alone
    stored: Mapping[StoreKey, MeasurementRecord] = field(default_factory=dict)
    #: what reading it changed, said to the user (histories trimmed to :data:`HISTORY_RUNS`)
    notes: tuple[str, ...] = ()

    def record_for(self, new: MeasurementRecord) -> MeasurementRecord | None:
        """The record ``new`` is judged against: the same test's on the same machine; else its record
        from another machine (compared only when asked); None for a test the baseline has not."""
        same = self.stored.get(new.store_key)
        return same if same is not None else self.records.get(new.key)

    def describe(self) -> str:
        """Where the baseline comes from: ``baseline.json (NVIDIA H100, 2026-11-20)``."""
        names = sorted(set(self.devices.values()))
        parts = [", ".join(names)] if names else []
        if self.created:
            parts.append(self.created[:10])
        return f"{self.path} ({'; '.join(parts)})" if parts else self.path


def load_baseline(path: str | Path, what: str = "baseline") -> Baseline:
    """Read and check the baseline at ``path``; :class:`BaselineError` names ``what`` and the file, and
    the fault."""
    return parse_baseline(read_json(path, what), f"{what} {path}", str(path))


def read_json(path: str | Path, what: str) -> object:
    """The decoded JSON at ``path``; :class:`BaselineError` names ``what`` and the file, and the fault."""
    where = f"{what} {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise BaselineError(f"{where}: a directory, not a JSON file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{where}: cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{where}: not JSON ({exc.msg}, line {exc.lineno})") from None
    except RecursionError:  # the decoder recurses once a level
        raise BaselineError(f"{where}: JSON nested too deeply to read") from None
    except ValueError:  # the only other: an integer past Python's limit on digits
        limit = sys.get_int_max_str_digits()
        raise BaselineError(f"{where}: an integer of more than {limit} digits, too long to read") from None
    return data


def parse_baseline(data: object, where: str, path: str = "") -> Baseline:
    """The baseline in ``data`` (a decoded JSON report), read from ``path`` (``where`` says so in errors)."""
    report, rows, trimmed = check_report(data, where)
    measured = ((index, row) for index, row in enumerate(rows) if row.get("verdict") != _UNMEASURED)
    entries = [r.comparable for r in read_records(measured, where) if r.comparable is not None]
    return baseline_of(report, entries, where, path, trimmed=trimmed)


def read_records(rows: Iterable[tuple[int, Mapping[str, Any]]], where: str) -> list[Record]:
    """The typed records of a checked report's rows, each with its index in the file: a row this
    version cannot read back is a :class:`BaselineError` naming it."""
    from .records import record_from_json

    records = []
    for index, row in rows:
        named = f"{where}: measurement {index}"
        if not isinstance(row.get("nodeid"), str):
            raise BaselineError(f"{named}: 'nodeid' is {row.get('nodeid')!r}, not a string")
        try:
            records.append(record_from_json(row))
        except OverflowError:  # a nested number past the largest float
            raise BaselineError(f"{named} ({row['nodeid']}): a number too large for a float") from None
        except (ValueError, TypeError, KeyError) as exc:  # a field of another kind than the record's
            raise BaselineError(f"{named} ({row['nodeid']}): cannot be read back ({exc})") from None
    return records


def check_report(data: object, where: str) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """``data`` checked as a report this version reads, as the module says: the report, its rows
    (every measured row checked, and its history trimmed to the :data:`HISTORY_RUNS` a baseline
    keeps), and how many histories were trimmed. :class:`BaselineError` names the first fault."""
    from .records import machine_of

    if not isinstance(data, dict):
        raise BaselineError(f"{where}: not a pytest-roofline JSON report (a {json_kind(data)} at the top)")
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise BaselineError(
            f"{where}: schema {schema!r} is not the one this version reads ({SCHEMA_VERSION}); "
            "is it a pytest-roofline --roofline-json file?"
        )
    measurements = data.get("measurements")
    if not isinstance(measurements, list):
        raise BaselineError(f"{where}: 'measurements' must be a list; got {json_kind(measurements)}")
    rows: list[dict[str, Any]] = []
    at: dict[StoreKey, int] = {}
    trimmed = 0
    for index, row in enumerate(measurements):
        if not isinstance(row, dict):
            raise BaselineError(f"{where}: measurement {index} is a {json_kind(row)}, not an object")
        if row.get("verdict") != _UNMEASURED:
            _check_record(row, f"{where}: measurement {index}")
            if len(row.get("history") or ()) >= HISTORY_RUNS:  # a hand-made file, or an older version's
                row = {**row, "history": row["history"][-(HISTORY_RUNS - 1) :]}
                trimmed += 1
            device_name = str(row.get("device_name") or row["device"])
            key = (row["nodeid"], row["name"], machine_of(row["device"], device_name))
            if key in at:
                test = f"{row['nodeid']}[{row['name']}]" if row["name"] else row["nodeid"]
                raise BaselineError(
                    f"{where}: measurements {at[key]} and {index}: {test} is measured twice on {device_name};"
                    " a baseline keeps one record per test, name and device (name each call of a test that"
                    " measures several: name=...)"
                )
            at[key] = index
        rows.append(row)
    return data, rows, trimmed


def baseline_of(
    report: Mapping[str, Any],
    entries: Iterable[MeasurementRecord],
    where: str,
    path: str = "",
    *,
    trimmed: int = 0,
) -> Baseline:
    """The baseline of a checked ``report`` (:func:`check_report`) whose measured rows are ``entries``."""
    stored = {entry.store_key: entry for entry in entries}
    records: dict[Key, MeasurementRecord] = {}
    for entry in stored.values():
        records.setdefault(entry.key, entry)
    devices = {r.device: r.device_name for r in stored.values()}
    environment = report.get("environment")
    created = environment.get("created") if isinstance(environment, dict) else None
    interruption = None
    if report.get("interrupted") is True:
        reason = report.get("interruption")
        interruption = reason if isinstance(reason, str) and reason else "cut short"
    created = created if isinstance(created, str) else None
    notes: tuple[str, ...] = ()
    if trimmed:
        notes = (
            f"{where}: {trimmed} record(s) kept more than the {HISTORY_RUNS - 1} earlier runs a baseline"
            " keeps; the oldest were left out",
        )
    return Baseline(path or where, created, devices, records, interruption, stored, notes)


def refuse_interrupted(baseline: Baseline, how_to_accept: str) -> None:
    """A :class:`BaselineError` for a baseline saved from a run cut short, unless the user accepts it
    with ``how_to_accept``."""
    if baseline.interruption is not None:
        raise BaselineError(
            f"baseline {baseline.path}: saved from a run that was cut short ({baseline.interruption}), so"
            f" the tests it did not reach would go unchecked; save a complete run, or pass {how_to_accept}"
            " to compare with it anyway"
        )


def _check_record(record: Mapping[str, Any], where: str) -> None:
    label = record.get("nodeid") if isinstance(record.get("nodeid"), str) else None
    named = f"{where} ({label})" if label else where
    for name, value in record.items():
        # JSON's integers have no bound; as a float, one past the largest is an OverflowError
        if isinstance(value, int) and abs(value) > sys.float_info.max:
            digits = len(str(abs(value)))
            raise BaselineError(f"{named}: {name!r} is an integer of {digits} digits, too large for a number")
    for name, kind in REQUIRED.items():
        if name not in record:
            raise BaselineError(f"{named}: no {name!r} field")
        value = record[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            expected = "number" if isinstance(kind, tuple) else "string"
            raise BaselineError(f"{named}: {name!r} is {value!r}, not a {expected}")
    for name in ("attained", "time_s"):
        value = record[name]
        if not math.isfinite(value) or value <= 0:
            raise BaselineError(f"{named}: {name!r} is {value!r}; it must be a positive number")
    low, high = ATTAINED_RANGE
    if not low <= record["attained"] <= high:
        raise BaselineError(
            f"{named}: 'attained' is {record['attained']!r}, outside the {low:g} to {high:g} a fraction of"
            " speed of light can be"
        )
    if record["time_s"] > MAX_TIME_S:
        raise BaselineError(f"{named}: 'time_s' is {record['time_s']!r}, more than {MAX_TIME_S:g} s a call")
    from ..model.verdict import Verdict

    verdicts = [v.value for v in Verdict]
    if record["verdict"] not in verdicts:
        raise BaselineError(f"{named}: 'verdict' is {record['verdict']!r}, not one of {', '.join(verdicts)}")
    history = record.get("history", [])
    if not isinstance(history, list) or not all(positive_number(a) for a in history):
        raise BaselineError(f"{named}: 'history' is {_short(history)}, not a list of positive numbers")
    if not all(low <= a <= high for a in history):
        raise BaselineError(
            f"{named}: 'history' is {_short(history)}: a fraction of speed of light is {low:g} to {high:g}"
        )


def _short(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut short: a message names a value, it does not print a file."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-1]}"


def finite_number(value: object) -> TypeGuard[float]:
    """Whether a JSON value is a finite number (a bool is none, nor an integer too large for a float)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def positive_number(value: object) -> bool:
    return finite_number(value) and value > 0


def json_kind(value: object) -> str:
    """A decoded JSON value's kind as a message names it: ``object``, ``list``, ``string``, ``null``."""
    return {dict: "object", list: "list", str: "string", type(None): "null"}.get(
        type(value), type(value).__name__
    )
