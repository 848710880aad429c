"""One report from many: the ``--roofline-json`` files of a sharded run joined. No pytest here.

:func:`merge_shards` checks what it joins as docs/ci.md ("Scaling out") says; a skipped row of a test
another shard measured goes (the measurement says more).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidValueError
from .baseline import Key, StoreKey
from .records import DeviceRecord, JsonObject, Record
from .store import RunFile, read_run


@dataclass(frozen=True, slots=True)
class Merged:
    """The joined run: its records and devices, whether a shard was cut short, where it came from."""

    records: list[Record]
    devices: list[DeviceRecord]
    interruption: str | None
    #: the first shard's environment (versions, platform), the newest shard's time
    environment: JsonObject
    #: each shard: its path, when it ran, how many rows it gave and whether it was cut short
    shards: list[JsonObject]

    def payload(self) -> JsonObject:
        """The merged JSON file: a run's schema, with ``shards`` saying what it was joined from."""
        from .jsonfile import payload

        data = payload(self.records, self.devices, interruption=self.interruption)
        data["environment"] = self.environment
        data["shards"] = self.shards
        return data


def merge_shards(paths: Sequence[str]) -> Merged:
    """The shards at ``paths`` joined, in the order given; an InvalidValueError naming the shards (or a
    :class:`.BaselineError` for a shard that cannot be read) says what is wrong."""
    shards = [read_run(path, "shard") for path in paths]
    measured: dict[StoreKey, tuple[Record, str]] = {}
    skipped: set[Key] = set()
    rows: list[Record] = []  # in the shards' order
    for shard in shards:
        for record in shard.records:
            new = record.comparable
            if new is None:
                if record.key not in skipped:
                    skipped.add(record.key)
                    rows.append(record)
                continue
            earlier = measured.get(new.store_key)
            if earlier is None:
                measured[new.store_key] = (record, shard.path)
                rows.append(record)
            elif earlier[0].to_json() != record.to_json():
                raise InvalidValueError(
                    f"{new.test} is measured on {new.device_name} in two shards, {earlier[1]} and"
                    f" {shard.path}: each test belongs to one shard (are their selections disjoint?)"
                )
    measured_tests = {key[:2] for key in measured}
    records = [r for r in rows if r.comparable is not None or r.key not in measured_tests]
    devices: dict[str, DeviceRecord] = {}
    for shard in shards:
        for device in shard.devices:
            devices.setdefault(device.version, device)
    cut = [f"{s.path}: {s.baseline.interruption}" for s in shards if s.baseline.interruption is not None]
    return Merged(
        records, list(devices.values()), "; ".join(cut) or None, _environment(shards),
        [_describe(shard) for shard in shards],
    )  # fmt: skip


def _environment(shards: Sequence[RunFile]) -> JsonObject:
    environment: dict[str, Any] = dict(shards[0].environment)
    times = [str(s.environment["created"]) for s in shards if isinstance(s.environment.get("created"), str)]
    if times:
        environment["created"] = max(times)  # ISO 8601 in UTC: the newest sorts last
    return environment


def _describe(shard: RunFile) -> JsonObject:
    created = shard.environment.get("created")
    return {
        "path": shard.path,
        "created": created if isinstance(created, str) else None,
        "measurements": len(shard.records),
        "interrupted": shard.baseline.interruption is not None,
        "interruption": shard.baseline.interruption,
    }
