"""The typed records of a run: one per measurement, per skipped test, per device. No pytest here.

Made once (:meth:`MeasurementRecord.from_result`), read by every output, and plain JSON only where they
leave the process (``to_json``, ``from_json``): docs/architecture.md ("The layers"), docs/json.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from ..model import run_noise
from ..model.core import CacheSize, Device
from ..model.devices import describe_peaks
from ..model.measurement import Measurement
from ..model.stats import Stats
from ..model.verdict import Result, Verdict

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: a JSON object as ``json`` reads and writes it
JsonObject = dict[str, Any]


def _finite(value: float) -> float | None:
    """JSON has no infinity: an op that moves no bytes has intensity null."""
    return value if math.isfinite(value) else None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: how a record reads a field of each type from JSON: a value missing, null or of another kind reads as
#: "not known" (the field's :data:`_UNKNOWN`, else empty, zero or False); ``... | None`` fields of a
#: plain type are taken as written
_READ_AS: dict[str, Callable[[Any, Any], object]] = {
    "str": lambda value, unknown: str(value or unknown or ""),
    "int": lambda value, unknown: int(value or unknown or 0),
    "float": lambda value, unknown: float(value) if _number(value) else unknown or 0.0,
    "float | None": lambda value, _: float(value) if _number(value) else None,
    "bool": lambda value, _: value is True,
    "tuple[float, ...]": lambda value, _: tuple(map(float, value or ())),
    "JsonObject | None": lambda value, _: dict(value) if isinstance(value, Mapping) else None,
    "str | None": lambda value, _: value,
    "int | None": lambda value, _: value,
}
#: what a field an older version did not write reads as, where that is not empty, zero or False
_UNKNOWN: dict[str, object] = {
    "bound": "memory", "stat": "median", "mode": "enforce", "memory_level": "dram", "calls_per_sample": 1,
    "measurements": 1, "speed": 1.0, "share_of_best": 1.0, "found": "knee",
}  # fmt: skip


def _read_fields(cls: type[DataclassInstance], data: Mapping[str, Any], **read: object) -> dict[str, Any]:
    """The arguments that make a ``cls`` of ``data``: ``read`` as given, each other field by the rule of
    its type (:data:`_READ_AS`; a field of a type with no rule there needs its own, in ``read``)."""
    for f in fields(cls):
        if f.init and f.name not in read:
            read[f.name] = _READ_AS[str(f.type)](data.get(f.name), _UNKNOWN.get(f.name))
    return read


def _optional_index(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True, slots=True)
class CeilingRecord:
    """The ceiling measured beside the kernel: what the probe saw, and the machine's share of its best."""

    resource: str
    value: float
    calibrated: float
    speed: float
    share_of_best: float
    ci_rel: float
    probe: str
    probe_rates: tuple[float, ...]
    probe_wall_s: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CeilingRecord:
        resource, probe = str(data.get("resource", "")), str(data.get("probe", ""))
        return cls(**_read_fields(cls, data, resource=resource, probe=probe))


@dataclass(frozen=True, slots=True)
class MeasurementRecord:
    """One judged measurement, every field a CI job or a baseline needs, raw samples included."""

    nodeid: str
    name: str
    label: str
    op: str
    shape: str
    params: Mapping[str, Any]
    #: the data's format, and the math's (whose peak judged it): fp32 data with TF32 math differ
    dtype: str
    peak_precision: str
    unit: str
    flops: float
    bytes: float
    #: FLOP per byte; None when the op moves no bytes
    intensity: float | None
    ridge: float | None
    bound: str
    compute_s: float | None
    memory_s: float
    floor_s: float
    peak_flops: float | None
    peak_source: str | None
    bandwidth: float
    bandwidth_source: str
    time_s: float
    stat: str
    attained: float | None
    min_fraction: float
    verdict: Verdict
    remeasured: bool
    mode: str
    device: str
    device_name: str
    #: which of the device's sets of ceilings judged it (:attr:`DeviceRecord.figures`)
    device_figures: str | None
    backend: str
    flushed: bool
    stop_reason: str
    calls_per_sample: int
    wall_s: float
    measurements: int
    attained_ci_rel: float
    verdict_reason: str | None
    #: the name of the rule that gave the verdict (docs/verdicts.md#the-rules-in-order)
    verdict_rule: str | None
    calibrated_floor_s: float | None
    latency_floor_s: float | None
    latency_bound: bool
    cache: str
    cache_state: str
    memory_level: str
    cold_method: str | None
    rotation_copies: int | None
    low_confidence: bool
    excluded_samples: int
    transient_samples: int
    still_falling: bool
    ceiling: CeilingRecord | None
    stats: Stats | None
    samples_s: tuple[float, ...]
    #: the OS's contention readings, a GPU's clocks and the bottleneck diagnosis, as their own types
    #: write them (``to_record``): shown and saved, never computed with here
    contention: JsonObject | None = None
    clocks: JsonObject | None = None
    diagnosis: JsonObject | None = None
    #: the comparison with the base's version of this measurement (``--roofline-against``), as
    #: :meth:`~..model.pairing.Pairing.to_record` writes it; None without one
    vs_base: JsonObject | None = None
    #: attained at the clock the GPU held (``Result.attained_at_held_clock``); None where not known
    attained_at_held_clock: float | None = None
    threads: int | None = None
    thread_wait_share: float | None = None
    #: why the time budget held fewer calls than the measurement wanted, None where it did not
    budget_note: str | None = None
    #: set when the session ends, for tests that failed as expected
    xfailed: bool = False
    #: a saved baseline's earlier runs of this test (``--roofline-save``), None in a plain report
    history: tuple[float, ...] | None = None
    #: the GPU it ran on, as the run numbers them (a pytest-xdist worker's by the controller's index);
    #: None on the CPU and in older files
    device_index: int | None = None
    #: what chose its device: ``arguments`` (where the kernel's arrays live, under ``auto``),
    #: ``session`` (no array among them), ``option`` (``--roofline-device``) or ``keyword`` (``device=``)
    device_from: str | None = None
    #: what was inferred of a call that named no op: its tier, what it read, the marker that pins it
    #: (:meth:`pytest_roofline.model.inference.Inference.to_record`); None where the op was given
    inferred: JsonObject | None = None

    @classmethod
    def from_result(
        cls,
        result: Result,
        *,
        nodeid: str,
        mode: str,
        device_index: int | None = None,
        device_from: str | None = None,
    ) -> MeasurementRecord:
        """The one place a record is made from a judged measurement (a diagnosis is added later)."""
        est, m = result.estimate, result.measurement
        c = result.ceiling
        ceiling = None
        if c is not None and m.probe is not None:
            ceiling = CeilingRecord(
                c.resource, c.value, c.figure, c.speed, c.share_of_best, c.ci_rel, c.probe,
                tuple(m.probe.rates), m.probe.wall_s,
            )  # fmt: skip
        return cls(
            nodeid=nodeid, name=result.name, label=est.label, op=est.op, shape=est.shape,
            params=dict(est.params), dtype=str(est.precision), peak_precision=str(est.peak_precision),
            unit=str(est.unit), flops=est.flops, bytes=est.bytes, intensity=_finite(est.intensity),
            ridge=est.ridge, bound=est.bound, compute_s=est.compute_s, memory_s=est.memory_s,
            floor_s=result.floor_s, peak_flops=est.peak_flops,
            peak_source=None if est.peak_source is None else str(est.peak_source),
            bandwidth=est.bandwidth, bandwidth_source=str(est.bandwidth_source), time_s=m.time_s,
            stat=m.stat, attained=_finite(result.attained), min_fraction=result.min_fraction,
            verdict=result.verdict, remeasured=result.remeasured, mode=mode, device=est.device.key,
            device_name=est.device.name, device_figures=figures_id(est.device), backend=m.backend,
            flushed=m.flushed, stop_reason=m.stop_reason.value, calls_per_sample=m.calls_per_sample,
            wall_s=result.wall_s or m.wall_s, measurements=result.measurements,
            attained_ci_rel=result.ci_rel, verdict_reason=result.reason or None,
            verdict_rule=result.rule or None,
            calibrated_floor_s=est.floor_s, latency_floor_s=result.latency_floor_s or None,
            latency_bound=result.latency_bound, cache=m.cache_note, cache_state=m.cache,
            memory_level=est.memory_level, cold_method=m.cold_method,
            rotation_copies=m.rotation_copies or None, low_confidence=m.low_confidence,
            budget_note=m.budget_note or None,
            excluded_samples=m.excluded, transient_samples=m.transient, still_falling=m.still_falling,
            ceiling=ceiling,
            stats=m.stats,
            samples_s=tuple(m.samples_s),
            contention=m.contention.to_record() if m.contention is not None else None,
            clocks=_clocks_json(m), attained_at_held_clock=result.attained_at_held_clock,
            vs_base=result.vs_base.to_record() if result.vs_base is not None else None,
            threads=m.threads, thread_wait_share=m.wait_share, device_index=device_index,
            device_from=device_from,
            inferred=None if result.inference is None else result.inference.to_record(result.min_fraction),
        )  # fmt: skip

    # - derived facts, worked out here only -

    @property
    def key(self) -> tuple[str, str]:
        """A baseline keeps one record per test and name."""
        return (self.nodeid, self.name)

    @property
    def comparable(self) -> MeasurementRecord | None:
        """The record where a baseline comparison can read it: None where it measured no fraction."""
        return self if self.attained and self.time_s else None

    @property
    def machine(self) -> str:
        return machine_of(self.device, self.device_name or self.device)

    @property
    def store_key(self) -> tuple[str, str, str]:
        """The test, its name and the machine: a baseline holds one record of each."""
        return (self.nodeid, self.name, self.machine)

    @property
    def test(self) -> str:
        """The test and, for a test with several measurements, the measurement's name."""
        return f"{self.nodeid}[{self.name}]" if self.name else self.nodeid

    @property
    def runs(self) -> tuple[float, ...]:
        """Every run's attained fraction this record holds, oldest first, its own last."""
        return (*(self.history or ()), self.attained or 0.0)

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def compute_bound(self) -> bool:
        return self.bound == "compute"

    @property
    def achieved_rate(self) -> float | None:
        """FLOP/s when compute-bound, else bytes per second; None for no such work or no time."""
        if self.time_s <= 0:
            return None
        work = self.flops if self.compute_bound and self.flops else self.bytes
        return work / self.time_s if work else None

    @property
    def ceiling_rate(self) -> float | None:
        """The ceiling it was judged against: its probe's, else the device's bounding figure."""
        if self.ceiling is not None and self.ceiling.value:
            return self.ceiling.value
        return (self.peak_flops if self.compute_bound else self.bandwidth) or None

    @property
    def device_version(self) -> str:
        """The :attr:`DeviceRecord.version` of the figures that judged it."""
        return f"{self.device}@{self.device_figures}"

    @property
    def between_runs(self) -> JsonObject:
        """How far such a measurement moves between runs (``rel``, a 95% half-width), and why."""
        sd = run_noise.prior(self.backend, self.bound)
        return {"rel": run_noise.between_runs_rel(sd), "why": run_noise.why(self.backend, self.bound)}

    @property
    def contention_level(self) -> str | None:
        level = (self.contention or {}).get("level")
        return level if isinstance(level, str) else None

    # - JSON -

    def to_json(self) -> JsonObject:
        """Plain JSON-ready values in the newest schema (every float finite or None)."""
        data: JsonObject = {
            f.name: _json_value(value)
            for f in fields(self)
            if f.init
            # only a saved baseline's records have runs before them
            if (value := getattr(self, f.name)) is not None or f.name not in _OPTIONAL
        }
        data["passed"] = self.passed
        data["between_runs"] = self.between_runs
        data["reason"] = None  # a skipped record's; in every record, so every record has every field
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MeasurementRecord:
        """A measured record of a JSON file or a report; a field the writer left out takes the value
        that means "not known"."""
        peak_precision = data.get("peak_precision")
        ceiling, stats, history = data.get("ceiling"), data.get("stats"), data.get("history")
        device_from = data.get("device_from")
        return cls(**_read_fields(
            cls, data, nodeid=str(data["nodeid"]), params=dict(data.get("params") or {}),
            dtype=str(data.get("dtype") or peak_precision or ""), peak_precision=str(peak_precision or ""),
            verdict=Verdict(data.get("verdict", Verdict.PASS)),
            device_name=str(data.get("device_name") or data.get("device") or ""),
            cache_state=str(data.get("cache_state") or ""),
            budget_note=data.get("budget_note") or None,
            ceiling=CeilingRecord.from_json(ceiling) if isinstance(ceiling, Mapping) else None,
            stats=Stats(**_read_fields(Stats, stats)) if isinstance(stats, Mapping) else None,
            history=tuple(map(float, history)) if isinstance(history, list) else None,
            device_index=_optional_index(data.get("device_index")),
            device_from=device_from if isinstance(device_from, str) else None,
        ))  # fmt: skip


def machine_of(device: str, device_name: str) -> str:
    """What a record was measured on: a table device's key (its model); a CPU's model (every CPU's key is
    ``cpu``)."""
    return f"cpu:{device_name}" if device == "cpu" else device


def _json_value(value: object) -> object:
    """A record field's value as JSON: a verdict a string; nested records, caches and tuples plain."""
    if isinstance(value, Verdict):
        return str(value)
    if isinstance(value, _NESTED):
        return _fields_json(value)
    if isinstance(value, CacheSize):
        return _cache_json(value)
    if isinstance(value, tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _fields_json(record: DataclassInstance) -> JsonObject:
    """A nested record's fields, in their order, as JSON."""
    return {f.name: _json_value(getattr(record, f.name)) for f in fields(record)}


def _clocks_json(m: Measurement) -> JsonObject | None:
    """What a GPU's clocks did over the measurement, when they were watched (None otherwise)."""
    log = m.clocks
    if log is None:
        return None
    record = log.to_record()
    if m.slowed:
        record["summary"] += f"; {m.slowed} sample(s) at slowed clocks left out"
    if m.slowed_kept:
        record["summary"] += f"; {m.slowed_kept} sample(s) at slowed clocks kept (too few others)"
    return {**record, "slowed_samples_left_out": m.slowed, "slowed_samples_kept": m.slowed_kept}


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A marked test that did not measure (its device is not here): it still shows in the report."""

    nodeid: str
    label: str
    reason: str
    name: str = ""
    xfailed: bool = False

    @property
    def verdict(self) -> Verdict:
        return Verdict.SKIPPED

    @property
    def comparable(self) -> None:
        """It measured nothing: no baseline compares with it."""
        return None

    @property
    def key(self) -> tuple[str, str]:
        return (self.nodeid, self.name)

    def to_json(self) -> JsonObject:
        """Every field a measured record has; what it did not measure is null."""
        record: JsonObject = dict.fromkeys(RECORD_FIELDS)
        record.update(
            nodeid=self.nodeid, name=self.name, label=self.label, op=self.label,
            verdict=str(Verdict.SKIPPED), reason=self.reason, xfailed=self.xfailed,
        )  # fmt: skip
        return record

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SkippedRecord:
        label = str(data.get("label") or data.get("op") or "")
        return cls(**_read_fields(cls, data, nodeid=str(data["nodeid"]), label=label))


#: a row of the report: a measurement, or a test that measured nothing
Record = MeasurementRecord | SkippedRecord


def shown_test(record: Record) -> str:
    """The test as the reports show it: with the measurement's name, for a test with several."""
    return record.nodeid + (f" [{record.name}]" if record.name else "")


def record_from_json(data: Mapping[str, Any]) -> Record:
    """The record a JSON object holds, skipped or measured."""
    if data.get("verdict") == Verdict.SKIPPED.value:
        return SkippedRecord.from_json(data)
    return MeasurementRecord.from_json(data)


#: fields a record has only where they apply
_OPTIONAL = ("history",)
#: the fields of every record, in the JSON file's order (its own, then what is derived from them);
#: what a skipped test did not measure is null
RECORD_FIELDS = (
    *(f.name for f in fields(MeasurementRecord) if f.name not in _OPTIONAL),
    "passed", "between_runs", "reason",
)  # fmt: skip


# -- devices ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeakRecord:
    """One compute ceiling of a device, its source and its ridge point."""

    precision: str
    unit: str
    flops: float
    source: str = ""
    note: str = ""
    ridge: float = 0.0
    #: the rate at the device's maximum SM clock, where ``flops`` is quoted at a lower one: what the
    #: faster-than-light limit allows for, never the floor (:attr:`~..model.core.Figure.at_max_clock`)
    at_max_clock: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PeakRecord:
        precision, unit = str(data.get("precision", "")), str(data.get("unit", ""))
        return cls(**_read_fields(cls, data, precision=precision, unit=unit))


@dataclass(frozen=True, slots=True)
class LevelRecord:
    """A cache level a warm measurement is judged against."""

    name: str
    capacity_bytes: int
    bandwidth: float
    per_core: bool = False
    source: str = ""
    note: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LevelRecord:
        return cls(**_read_fields(cls, data, name=str(data.get("name", ""))))


def _cache_json(cache: CacheSize) -> JsonObject:
    """A cache level as a report writes it (its sweeps' ``seen`` stay in the calibration)."""
    return {
        "name": cache.name, "reported_bytes": cache.reported_bytes, "effective_bytes": cache.effective_bytes,
        "per_core": cache.per_core, "found": cache.found, "note": cache.note,
    }  # fmt: skip


def _cache_from_json(data: Mapping[str, Any]) -> CacheSize:
    level, effective, found = str(data.get("name", ""))[1:], data.get("effective_bytes"), data.get("found")
    return CacheSize(
        int(level) if level.isdigit() else 0, int(data.get("reported_bytes") or 0),
        effective if isinstance(effective, int) and not isinstance(effective, bool) else None,
        data.get("per_core") is True, found if found in ("unseen", "unreached") else "knee",
        str(data.get("note") or ""),
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class DeviceRecord:
    """A device as the run used it: its ceilings with their sources, named by :attr:`figures`."""

    key: str
    figures: str
    name: str
    kind: str
    bandwidth: float
    bandwidth_source: str = ""
    bandwidth_note: str = ""
    llc_bytes: int | None = None
    cores: int | None = None
    peaks: tuple[PeakRecord, ...] = ()
    #: the cache levels a warm measurement is judged against, smallest first
    levels: tuple[LevelRecord, ...] = ()
    notes: tuple[str, ...] = ()
    #: every cache level the OS or driver reports, with the capacity this process sees
    caches: tuple[CacheSize, ...] = ()

    @classmethod
    def of(cls, device: Device) -> DeviceRecord:
        peaks = tuple(
            PeakRecord(
                str(precision),
                str(unit),
                figure.value,
                str(figure.source),
                figure.note,
                figure.value / device.bandwidth.value,
                figure.at_max_clock,
            )
            for precision, unit, figure in describe_peaks(device)
        )
        levels = tuple(
            LevelRecord(
                level.name,
                level.capacity_bytes,
                level.bandwidth.value,
                level.per_core,
                str(level.bandwidth.source),
                level.bandwidth.note,
            )
            for level in device.levels
        )
        return cls(
            key=device.key, figures=figures_id(device), name=device.name, kind=device.kind,
            bandwidth=device.bandwidth.value, bandwidth_source=str(device.bandwidth.source),
            bandwidth_note=device.bandwidth.note, llc_bytes=device.llc_bytes, cores=device.cores,
            peaks=peaks, levels=levels, notes=tuple(device.notes),
            caches=tuple(dataclasses.replace(c, seen=()) for c in device.caches),
        )  # fmt: skip

    @property
    def version(self) -> str:
        """``cpu@1a2b3c4d``: the device's key together with its figures."""
        return f"{self.key}@{self.figures}"

    def to_json(self) -> JsonObject:
        return _fields_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeviceRecord:
        return cls(**_read_fields(
            cls, data, key=str(data.get("key", "")), name=str(data.get("name") or data.get("key") or ""),
            peaks=tuple(PeakRecord.from_json(p) for p in data.get("peaks") or ()),
            levels=tuple(LevelRecord.from_json(level) for level in data.get("levels") or ()),
            notes=tuple(map(str, data.get("notes") or ())),
            caches=tuple(_cache_from_json(cache) for cache in data.get("caches") or ()),
        ))  # fmt: skip


#: the records that nest in another, each its fields as JSON (``Stats``: of the trusted samples, seconds
#: per call)
_NESTED = (Stats, CeilingRecord, PeakRecord, LevelRecord)


def figures_id(device: Device) -> str:
    """A short name for the set of ceilings a device has (docs/json.md: a device may have several a run)."""
    figures = [(str(p), str(u), f.value, str(f.source)) for p, u, f in describe_peaks(device)]
    figures.append(("bandwidth", "", device.bandwidth.value, str(device.bandwidth.source)))
    return hashlib.sha256(json.dumps(figures).encode()).hexdigest()[:8]
