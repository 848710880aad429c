"""A baseline is a store, and a save merges this run into it. No pytest here.

Per test and device (:data:`.baseline.StoreKey`), after reading the baseline first; what replaces,
keeps or refuses what, and why: docs/ci.md ("What a save does"). :class:`Saved` says it in one line.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .baseline import (
    HISTORY_RUNS,
    Baseline,
    BaselineError,
    Key,
    StoreKey,
    baseline_of,
    check_report,
    read_json,
    read_records,
)
from .comparison import Change, RegressionRule
from .records import DeviceRecord, JsonObject, MeasurementRecord, Record


@dataclass(frozen=True, slots=True)
class RunFile:
    """A JSON report read whole: checked as a baseline, and every row typed, to be written again."""

    path: str
    baseline: Baseline
    records: tuple[Record, ...]
    devices: tuple[DeviceRecord, ...]
    environment: Mapping[str, Any] = field(default_factory=dict)


def read_run(path: str | Path, what: str = "baseline") -> RunFile:
    """The report at ``path``, every row of it; :class:`.BaselineError` names ``what``, the file and
    the fault (a row this version cannot read back is one)."""
    where = f"{what} {path}"
    data, rows, trimmed = check_report(read_json(path, what), where)
    records = read_records(enumerate(rows), where)
    # each measured row is compared as its record reads it
    entries = (r.comparable for r in records if r.comparable is not None)
    baseline = baseline_of(data, entries, where, str(path), trimmed=trimmed)
    rows = data.get("devices") or []
    if not isinstance(rows, list) or not all(isinstance(d, dict) for d in rows):
        raise BaselineError(f"{where}: 'devices' must be a list of objects")
    try:
        devices = tuple(DeviceRecord.from_json(d) for d in rows)
    except (ValueError, TypeError, OverflowError) as exc:
        raise BaselineError(f"{where}: a device cannot be read back ({exc})") from None
    environment = data.get("environment")
    return RunFile(
        str(path), baseline, tuple(records), devices,
        environment if isinstance(environment, dict) else {},
    )  # fmt: skip


def read_store(path: str | Path) -> RunFile | None:
    """The baseline a save at ``path`` merges into; None for no file, or a device or pipe."""
    return read_run(path) if os.path.isfile(path) else None


@dataclass(frozen=True, slots=True)
class Saved:
    """What a save writes (:meth:`payload`), and what it did (:meth:`lines`)."""

    path: str
    records: list[Record]
    devices: list[DeviceRecord]
    #: how the saved baseline is incomplete: a new one from a run cut short, or an old one that was
    interruption: str | None
    new_file: bool
    updated: int = 0
    added: int = 0
    #: the baseline's records this run did not measure, kept as they were
    kept: int = 0
    #: tests whose measurement failed its regression check, so their baseline record stays
    refused: tuple[str, ...] = ()
    #: tests that failed it but were saved all the same, as the user asked
    accepted: tuple[str, ...] = ()
    #: tests that changed beyond their noise (or were accepted): their history starts anew
    restarted: tuple[str, ...] = ()
    #: the devices measured now whose records went beside other devices' records of the same tests,
    #: and those other devices
    apart: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    #: the run was cut short: only what it measured changed
    cut_short: bool = False

    def payload(self) -> JsonObject:
        from .jsonfile import payload

        return payload(self.records, self.devices, interruption=self.interruption)

    def lines(self, accept_flag: str = "--roofline-accept") -> list[str]:
        """One line of what it saved, kept, added and refused; a second naming the tests that start a
        new history, when some do."""
        head = f"saved {self.path}, a new baseline" if self.new_file else f"saved {self.path}"
        if self.new_file:
            counts = [f"{self.added} added"]
        else:
            counts = [f"{self.updated} updated", f"{self.added} added", f"{self.kept} kept"]
        details = []
        if self.refused:
            counts.append(f"{len(self.refused)} refused")
            details.append(
                f"refused, since they regressed (their baseline records stay; {accept_flag} saves them):"
                f" {', '.join(self.refused)}"
            )
        if self.accepted:
            details.append(f"regressed, saved as {accept_flag} asked: {', '.join(self.accepted)}")
        now, other = self.apart
        if now:
            details.append(
                f"measured on {', '.join(now)}: kept apart from the records of {', '.join(other)}, each"
                " compared with its own device's"
            )
        if self.cut_short:
            details.append("the run was cut short: only what it measured changed")
        lines = [f"{head}: {', '.join(counts)}" + "".join(f"; {d}" for d in details)]
        if self.restarted:
            lines.append(
                f"saved {self.path}: {len(self.restarted)} tests changed beyond their noise and start a new"
                f" history: {', '.join(self.restarted)}"
            )
        return lines


def merge_run(
    store: RunFile | None,
    records: Sequence[Record],
    devices: Sequence[DeviceRecord],
    *,
    path: str,
    threshold: float,
    interruption: str | None = None,
    regressed: Collection[Key] = (),
    accept: bool = False,
) -> Saved:
    """The baseline ``store`` (None: there is none yet) with ``records`` (this run's, measured on
    ``devices``) merged in, as the module says. ``regressed``: the tests whose measurement failed the
    run's own regression check; ``accept``: save a regressed measurement all the same."""
    merge = _Merge(store)
    rule = RegressionRule(threshold)
    for record in records:
        merge.add(record, rule=rule, regressed=record.key in regressed, accept=accept)
    return merge.saved(devices, path=path, interruption=interruption)


class _Merge:
    """The rows of the store as a run's records go in, and what became of each."""

    def __init__(self, store: RunFile | None) -> None:
        self.store = store
        self.previous = store.baseline if store is not None else Baseline("", None, {})
        #: the rows in the file's order (a row updated stays where it was; added ones go last)
        self.rows: list[Record | None] = list(store.records) if store is not None else []
        self.at: dict[StoreKey, int] = {}
        self.skipped_at: dict[Key, int] = {}
        #: the tests with a measured row
        self.measured_tests: set[Key] = set()
        for index, row in enumerate(self.rows):
            new = row.comparable if row is not None else None
            if new is not None:
                self.at[new.store_key] = index
                self.measured_tests.add(new.key)
            elif row is not None:
                self.skipped_at.setdefault(row.key, index)
        #: each test's devices in the store, by name (for "kept apart")
        self.devices_of: dict[Key, list[str]] = {}
        for record in self.previous.stored.values():
            self.devices_of.setdefault(record.key, []).append(record.device_name)
        self.changed: set[StoreKey] = set()
        #: the tests whose baseline record stays because their measurement regressed
        self.kept_back: set[StoreKey] = set()
        self.added = 0
        self.refused: list[str] = []
        self.accepted: list[str] = []
        self.restarted: list[str] = []
        self.apart_now: dict[str, None] = {}
        self.apart_other: dict[str, None] = {}

    def add(self, record: Record, *, rule: RegressionRule, regressed: bool, accept: bool) -> None:
        new = record.comparable
        if new is None or not isinstance(record, MeasurementRecord):
            self._add_unmeasured(record)
            return
        key = new.store_key
        old = self.previous.stored.get(key)
        change = None
        if old is not None:
            tests = len(self.previous.records)
            change = rule.compare(old, new, tests=tests).change
            regressed = regressed or change is Change.REGRESSION
        if regressed and not accept:
            self.refused.append(new.test)
            self.kept_back.add(key)
            return
        if regressed:
            self.accepted.append(new.test)
        if old is None or regressed or change is Change.IMPROVEMENT:
            if old is not None:
                self.restarted.append(new.test)
            history: tuple[float, ...] = ()
        else:
            history = old.runs[-(HISTORY_RUNS - 1) :]
        saved = replace(record, history=history)
        if key in self.at:  # the baseline's record, or one this run measured twice
            self.rows[self.at[key]] = saved
        else:
            others = self.devices_of.get(new.key)
            if others:  # beside another device's records of the test
                self.apart_now[new.device_name] = None
                self.apart_other.update(dict.fromkeys(others))
            self.at[key] = len(self.rows)
            self.rows.append(saved)
            self.added += 1
            self.measured_tests.add(new.key)
        self.changed.add(key)
        if new.key in self.skipped_at:  # the test measures now: its skipped row goes
            self.rows[self.skipped_at.pop(new.key)] = None

    def _add_unmeasured(self, record: Record) -> None:
        """A record that measured nothing: a row only for a test the store has no measurement of."""
        if record.key in self.skipped_at:
            self.rows[self.skipped_at[record.key]] = record
        elif record.key not in self.measured_tests:
            self.skipped_at[record.key] = len(self.rows)
            self.rows.append(record)

    def saved(self, devices: Sequence[DeviceRecord], *, path: str, interruption: str | None) -> Saved:
        rows = [r for r in self.rows if r is not None]
        used = {r.device_version for r in rows if isinstance(r, MeasurementRecord)}
        kept_devices = self.store.devices if self.store is not None else ()
        by_version = {d.version: d for d in kept_devices if d.version in used}
        by_version.update((d.version, d) for d in devices)
        if interruption is None:
            incomplete = None
        else:  # what it measured is in; the rest is as complete as it was
            incomplete = interruption if self.store is None else self.previous.interruption
        kept = sum(k not in self.changed and k not in self.kept_back for k in self.previous.stored)
        return Saved(
            path, rows, list(by_version.values()), incomplete, self.store is None,
            updated=len(self.changed) - self.added, added=self.added, kept=kept,
            refused=tuple(self.refused), accepted=tuple(self.accepted), restarted=tuple(self.restarted),
            apart=(tuple(self.apart_now), tuple(self.apart_other)), cut_short=interruption is not None,
        )  # fmt: skip
