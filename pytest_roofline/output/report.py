"""Results as records, tables and JSON. No pytest here.

Everything the report shows goes through a plain JSON-ready *record* per measurement, so results
measured in pytest-xdist workers travel to the controller unchanged and the terminal table, the
JSON file and later formats (step summaries, plots, baselines) all read one shape.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import posixpath
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import outputs
from ..errors import InvalidValueError
from ..model import units
from ..model.core import Device, Unit
from ..model.devices import describe_peaks
from ..model.verdict import Result, Verdict, budget_percent
from ..timing.engine import Measurement

Record = dict[str, Any]
SCHEMA_VERSION = 1


def _finite(value: float) -> float | None:
    """JSON has no infinity: an op that moves no bytes has intensity null."""
    return value if math.isfinite(value) else None


def result_record(result: Result, *, nodeid: str, mode: str) -> Record:
    """Every field a CI job or a baseline needs, raw samples included."""
    est, m = result.estimate, result.measurement
    s = m.stats
    return {
        "nodeid": nodeid,
        "name": result.name,
        "label": est.label,
        "op": est.op,
        "shape": est.shape,
        "params": dict(est.params),
        "dtype": str(est.precision),
        "precision": str(est.peak_precision),
        "unit": str(est.unit),
        "flops": est.flops,
        "bytes": est.bytes,
        "intensity": _finite(est.intensity),
        "ridge": est.ridge,
        "bound": est.bound,
        "compute_s": est.compute_s,
        "memory_s": est.memory_s,
        "floor_s": result.floor_s,
        "peak_flops": est.peak_flops,
        "peak_source": None if est.peak_source is None else str(est.peak_source),
        "bandwidth": est.bandwidth,
        "bandwidth_source": str(est.bandwidth_source),
        "time_s": m.time_s,
        "stat": m.stat,
        "attained": _finite(result.attained),
        "min_fraction": result.min_fraction,
        "passed": result.passed,
        "verdict": str(result.verdict),
        "remeasured": result.remeasured,
        "xfailed": False,  # set when the session ends, for tests that failed as expected
        "mode": mode,
        "device": est.device.key,
        "device_name": est.device.name,
        "device_figures": figures_id(est.device),
        "backend": m.backend,
        "flushed": m.flushed,
        "stop_reason": m.stop_reason.value,
        "calls_per_sample": m.calls_per_sample,
        "wall_s": result.wall_s or m.wall_s,
        "measurements": result.measurements,
        "attained_ci_rel": result.ci_rel,
        "verdict_reason": result.reason or None,
        "calibrated_floor_s": est.floor_s,
        "latency_floor_s": result.latency_floor_s or None,
        "latency_bound": result.latency_bound,
        "diagnosis": None,  # the session's, when --roofline-diagnose asks for one
        "clocks": _clocks_record(m),
        "cache": m.cache_note,
        "cache_state": m.cache,
        "memory_level": est.memory_level,
        "cold_method": m.cold_method,
        "rotation_copies": m.rotation_copies or None,
        "low_confidence": m.low_confidence,
        "excluded_samples": m.excluded,
        "transient_samples": m.transient,
        "ceiling": _ceiling_record(result, m),
        "contention": m.contention.to_record() if m.contention is not None else None,
        "threads": m.threads,
        "thread_wait_share": m.wait_share,
        "stats": {
            "n": s.n,
            "min": s.min,
            "max": s.max,
            "median": s.median,
            "mean": s.mean,
            "stdev": s.stdev,
            "q1": s.q1,
            "q3": s.q3,
            "iqr_rel": s.iqr_rel,
            "ci_half": s.ci_half,
            "ci_rel": s.ci_rel,
        },
        "samples_s": list(m.samples_s),
        "reason": None,
    }


def _ceiling_record(result: Result, m: Measurement) -> Record | None:
    """The ceiling measured beside the kernel: what the probe saw, and the machine's share of its best."""
    c = result.ceiling
    if c is None or m.probe is None:
        return None
    return {
        "resource": c.resource,
        "value": c.value,
        "calibrated": c.figure,
        "speed": c.speed,
        "share_of_best": c.share_of_best,
        "ci_rel": c.ci_rel,
        "probe": c.probe,
        "probe_rates": list(m.probe.rates),
        "probe_wall_s": m.probe.wall_s,
    }


#: the fields of every record; what a skipped test did not measure is null
RECORD_FIELDS = (
    "nodeid", "name", "label", "op", "shape", "params", "dtype", "precision", "unit", "flops", "bytes",
    "intensity", "ridge", "bound", "compute_s", "memory_s", "floor_s", "peak_flops", "peak_source",
    "bandwidth", "bandwidth_source", "time_s", "stat", "attained", "min_fraction", "passed", "verdict",
    "remeasured", "xfailed", "mode", "device", "device_name", "device_figures", "backend", "flushed",
    "stop_reason",
    "calls_per_sample", "wall_s", "measurements", "attained_ci_rel", "verdict_reason", "calibrated_floor_s",
    "cache", "cache_state", "memory_level", "cold_method", "rotation_copies", "low_confidence",
    "excluded_samples", "transient_samples", "ceiling", "contention", "threads",
    "thread_wait_share", "latency_floor_s", "latency_bound", "diagnosis", "clocks", "stats", "samples_s",
    "reason",
)  # fmt: skip


def _clocks_record(m: Measurement) -> Record | None:
    """What a GPU's clocks did over the measurement, when they were watched (None otherwise)."""
    log = m.clocks
    if log is None:
        return None
    return {
        "watched": log.watched,
        "summary": log.summary(),
        "min_sm_mhz": log.min_sm_mhz,
        "max_sm_mhz": log.max_sm_mhz,
        "max_temperature_c": log.max_temperature_c,
        "throttled": log.throttled,
        "reasons": list(log.reasons),
        "samples": len(log.samples),
    }


def skipped_record(*, nodeid: str, label: str, reason: str) -> Record:
    """A marked test that did not measure (its device is not here): it still shows in the report."""
    record: Record = dict.fromkeys(RECORD_FIELDS)
    record.update(
        nodeid=nodeid,
        name="",
        label=label,
        op=label,
        verdict=str(Verdict.SKIPPED),
        reason=reason,
        xfailed=False,
    )
    return record


def figures_id(device: Device) -> str:
    """A short name for the set of ceilings a device has: a device measured again during a run (a
    forced calibration, another worker's cache) has two, and each row says which judged it."""
    figures = [(str(p), str(u), f.value, str(f.source)) for p, u, f in describe_peaks(device)]
    figures.append(("bandwidth", "", device.bandwidth.value, str(device.bandwidth.source)))
    return hashlib.sha256(json.dumps(figures).encode()).hexdigest()[:8]


def device_version(device: Record) -> str:
    """``cpu@1a2b3c4d``: a device record's key together with its figures."""
    return f"{device['key']}@{device['figures']}"


def device_record(device: Device) -> Record:
    peaks = [
        {
            "precision": str(precision),
            "unit": str(unit),
            "flops": figure.value,
            "source": str(figure.source),
            "note": figure.note,
            "ridge": figure.value / device.bandwidth.value,
        }
        for precision, unit, figure in describe_peaks(device)
    ]
    return {
        "key": device.key,
        "figures": figures_id(device),
        "name": device.name,
        "kind": device.kind,
        "bandwidth": device.bandwidth.value,
        "bandwidth_source": str(device.bandwidth.source),
        "bandwidth_note": device.bandwidth.note,
        "llc_bytes": device.llc_bytes,
        "cores": device.cores,
        "peaks": peaks,
        # the cache levels a warm measurement is judged against, smallest first
        "levels": [
            {
                "name": level.name,
                "capacity_bytes": level.capacity_bytes,
                "per_core": level.per_core,
                "bandwidth": level.bandwidth.value,
                "source": str(level.bandwidth.source),
                "note": level.bandwidth.note,
            }
            for level in device.levels
        ],
        "notes": list(device.notes),
    }


def environment() -> Record:
    """Versions that change what a time means; CuPy is looked up, never imported, for this."""
    from importlib.metadata import PackageNotFoundError, version

    def dist_version(*names: str) -> str | None:
        for name in names:
            try:
                return version(name)
            except PackageNotFoundError:
                continue
        return None

    import datetime

    cupy = sys.modules.get("cupy")
    return {
        # when the run ended: a baseline's regression message says how old the baseline is
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "numpy": dist_version("numpy"),
        "cupy": getattr(cupy, "__version__", None)
        or dist_version("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x"),
        "pytest": dist_version("pytest"),
        "pytest_roofline": dist_version("pytest-roofline"),
    }


def payload(
    records: Sequence[Record], devices: Iterable[Record], *, interruption: str | None = None
) -> Record:
    """The JSON file: every device with the figures that judged the measurements, and whether the
    run was cut short (``interruption`` says how: its measurements are not all there)."""
    return {
        "schema": SCHEMA_VERSION,
        "environment": environment(),
        "interrupted": interruption is not None,
        "interruption": interruption,
        "devices": judged_devices(devices, records),
        "measurements": list(records),
    }


def judged_devices(devices: Iterable[Record], records: Sequence[Record]) -> list[Record]:
    """Each device record with how many ``records`` its figures judged, and ``remeasured`` when its
    device had other figures too during the run (each such set is an entry of its own)."""
    devices = list(devices)
    versions: dict[str, int] = {}
    for device in devices:
        versions[device["key"]] = versions.get(device["key"], 0) + 1
    return [
        {
            **device,
            "remeasured": versions[device["key"]] > 1,
            "measurements": sum(
                r["device"] == device["key"] and r.get("device_figures") == device["figures"] for r in records
            ),
        }
        for device in devices
    ]


def write_json_atomic(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write ``data`` as JSON to ``path`` as :func:`outputs.write` does: never a half-written file, never
    a replaced special file, errors naming ``path``. Returns the path of what was written."""
    try:  # first: bad data leaves nothing behind
        text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    except ValueError as exc:  # a NaN or an infinity (a TypeError, an object JSON lacks, is a bug)
        raise ValueError(f"{path}: {exc}") from None
    return outputs.write(path, text.encode("utf-8"))


# -- terminal -----------------------------------------------------------------------------------


def format_device_headers(devices: Iterable[Record], records: Sequence[Record]) -> list[str]:
    """Every device's header; a device whose figures changed during the run has one per set of
    figures, each saying how many rows it judged (the rows' ``machine`` cells say which)."""
    lines: list[str] = []
    judged = judged_devices(devices, records)
    numbers = _figures_numbers(judged)
    for device in judged:
        lines.extend(format_device_header(device))
        if device["remeasured"]:
            number, count = numbers[device_version(device)]
            lines.append(
                f"  figures #{number} of {count} this run (the device was measured again): "
                f"judged {device['measurements']} row(s)"
            )
    return lines


def _figures_numbers(devices: Iterable[Record]) -> dict[str, tuple[int, int]]:
    """For a device with several sets of figures this run, each set's number and the count."""
    by_key: dict[str, list[str]] = {}
    for device in devices:
        by_key.setdefault(device["key"], []).append(device_version(device))
    return {
        version: (number, len(versions))
        for versions in by_key.values()
        if len(versions) > 1
        for number, version in enumerate(versions, 1)
    }


def format_device_header(device: Record) -> list[str]:
    """Device, its ceilings with their sources, and the ridge point of each."""
    bw = f"{units.byte_rate(device['bandwidth'])} ({device['bandwidth_source']})"
    where = device["kind"] if device["key"] == device["kind"] else f"{device['key']}, {device['kind']}"
    lines = [f"device: {device['name']} [{where}]  DRAM bandwidth {bw}"]
    peaks = device["peaks"]
    shown = [p for p in peaks if not (p["source"] == "derived" and p["note"].startswith("no "))]
    for unit in (Unit.TENSOR.value, Unit.VECTOR.value):
        # precisions sharing one figure (a CPU's narrow formats use fp32's) share one entry
        groups: dict[tuple[float, str], list[Record]] = {}
        for p in shown:
            if p["unit"] == unit:
                groups.setdefault((p["flops"], p["source"]), []).append(p)
        row = [
            f"{'/'.join(p['precision'] for p in group)} {units.flop_rate(flops)} "
            f"({source}, ridge {units.intensity(group[0]['ridge'])} FLOP/B)"
            for (flops, source), group in groups.items()
        ]
        if row:
            lines.append(f"  {unit:<6} peaks: " + "; ".join(row))
    for note in device.get("notes", []):
        lines.append(f"  note: {note}")
    return lines


#: every column of the terminal table, in its order: name -> header
COLUMNS: dict[str, str] = {
    "test": "test",
    "op": "op and shape",
    "dtype": "dtype",
    "bound": "bound",
    "intensity": "FLOP/B",
    "floor": "floor",
    "time": "measured (± noise)",
    "achieved": "achieved",
    "ceiling": "ceiling",
    "attained": "attained",
    "budget": "budget",
    "machine": "machine",
    "verdict": "verdict",
}
TABLE_HEADERS = tuple(COLUMNS.values())
#: what a narrow terminal keeps first; the rest join, in this order, while the table fits
ESSENTIAL = ("test", "op", "attained", "budget", "verdict")
PRIORITY = (*ESSENTIAL, "achieved", "ceiling", "time", "bound", "machine", "floor", "dtype", "intensity")
#: the op and test columns are shortened to no fewer characters than this to fit
MIN_TEST_WIDTH = 20


def ordered(records: Sequence[Record]) -> list[Record]:
    """The table's order: memory-bound rows first, then compute-bound, then skipped, each in run order."""
    rank = {"memory": 0, "compute": 1}
    runs = sorted(enumerate(records), key=lambda run: (rank.get(run[1].get("bound", ""), 2), run[0]))
    return [record for _, record in runs]


def table_rows(records: Sequence[Record], devices: Iterable[Record] = ()) -> list[list[str]]:
    """One row per record, in :func:`ordered` order; readable without color (MISS is upper case).

    Where a device had several sets of figures this run (``devices``), the ``machine`` cell says
    which judged the row (``figures #2``), as the device headers number them.
    """
    rows = []
    numbers = _figures_numbers(devices)
    prefix = _common_directory([r["nodeid"] for r in records])
    for r in ordered(records):
        test = r["nodeid"][len(prefix) :] + (f" [{r['name']}]" if r.get("name") else "")
        if r["verdict"] == Verdict.SKIPPED.value:
            rows.append([test, r["label"], *[""] * (len(COLUMNS) - 3), "skipped"])  # why: skipped_notes
            continue
        noise = f"{units.seconds(r['time_s'])} ± {r['stats']['ci_rel'] * 100:.1f}%"
        if r.get("cache_state", "cold" if r["flushed"] else "warm") == "warm":
            noise += " warm"
            if r.get("memory_level") not in (None, "dram"):
                noise += f" {r['memory_level'].upper()}"
        attained = "inf" if r["attained"] is None else units.percent(r["attained"])
        if r.get("attained_ci_rel"):
            attained += f" ±{r['attained_ci_rel'] * 100:.0f}%"
        verdict = r["verdict"]
        if verdict != Verdict.PASS.value and r["mode"] in ("report", "measure"):
            verdict += f" ({r['mode']})"  # recorded, but it did not fail the test
        elif r.get("xfailed"):
            verdict += " (xfail)"  # the test expected to miss: a bad variant on display
        rows.append(
            [
                test,
                f"{r['op']} {r['shape']}".strip(),
                r["dtype"] + (f"→{r['precision']}" if r["precision"] != r["dtype"] else ""),
                bound_cell(r),
                "inf" if r["intensity"] is None else units.intensity(r["intensity"]),
                units.seconds(r["floor_s"]),
                noise,
                achieved_cell(r),
                ceiling_cell(r),
                attained,
                budget_percent(r["min_fraction"]),
                _with_figures(machine_cell(r), r, numbers),
                verdict,
            ]
        )
    return rows


def achieved_cell(record: Record) -> str:
    """What the kernel reached of the resource that bounds it: GB/s when memory-bound, FLOP/s when
    compute-bound (the failure message's figure, for every row)."""
    time_s = record.get("time_s") or 0.0
    if time_s <= 0:
        return ""
    if record.get("bound") == "compute" and record.get("flops"):
        return units.flop_rate(record["flops"] / time_s)
    return units.byte_rate(record["bytes"] / time_s) if record.get("bytes") else ""


def ceiling_cell(record: Record) -> str:
    """The ceiling the row was judged against: measured beside it when a probe ran, else the device's."""
    paired = record.get("ceiling")
    compute = record.get("bound") == "compute"
    if paired and paired.get("value"):
        value = paired["value"]
    else:
        value = record.get("peak_flops") if compute else record.get("bandwidth")
    if not value:
        return ""
    return units.flop_rate(value) if compute else units.byte_rate(value)


def bound_cell(record: Record) -> str:
    """``memory``, ``latency`` when an empty call is slower than the roofline floor, or ``memory
    (compute unknown)`` for integer work on a device with no integer peak."""
    if record.get("latency_bound"):
        return "latency"
    if record.get("compute_s") is None:
        return f"{record['bound']} (compute unknown)"
    return str(record["bound"])


def machine_cell(record: Record) -> str:
    """``62% of best`` (the probe beside the kernel against the best it has shown), and the
    contention the OS reported when it was more than quiet."""
    parts = []
    ceiling = record.get("ceiling")
    if ceiling:
        parts.append(f"{units.percent(ceiling['share_of_best'])} of best")
    contention = record.get("contention")
    if contention and contention.get("level") not in (None, "quiet"):
        parts.append(contention["level"])
    return ", ".join(parts)


def _with_figures(cell: str, record: Record, numbers: Mapping[str, tuple[int, int]]) -> str:
    version = f"{record['device']}@{record.get('device_figures')}"
    if version not in numbers:
        return cell
    return ", ".join(part for part in (cell, f"figures #{numbers[version][0]}") if part)


def _common_directory(nodeids: Sequence[str]) -> str:
    """``example_project/tests/`` when every test lives below it: the table leaves it out."""
    directories = [nodeid.split("::", 1)[0].rpartition("/")[0] for nodeid in nodeids]
    if not directories or "" in directories:
        return ""
    common = posixpath.commonpath(directories)  # node ids use "/" on every platform
    return f"{common}/" if common else ""


def skipped_notes(records: Sequence[Record]) -> list[str]:
    """A line under the table for each skipped row: why it measured nothing."""
    notes = []
    for r in ordered(records):
        if r["verdict"] == Verdict.SKIPPED.value:
            name = f" [{r['name']}]" if r.get("name") else ""
            notes.append(f"  {r['nodeid']}{name} skipped: {r.get('reason', '')}")
    return notes


def parse_columns(text: str) -> tuple[str, ...]:
    """``test,attained,verdict`` (or ``all``) -> the column names; ValueError naming a wrong one."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if names == ("all",):
        return tuple(COLUMNS)
    if not names:
        raise InvalidValueError(f"expected column names separated by commas, or all; got {text!r}")
    from ..model.core import did_you_mean

    for name in names:
        if name not in COLUMNS:
            raise InvalidValueError(
                f"unknown column {name!r}{did_you_mean(name, tuple(COLUMNS))}; choose from "
                f"{', '.join(COLUMNS)}, or all"
            )
        if names.count(name) > 1:
            raise InvalidValueError(f"column {name!r} is named twice in {text!r}; name each column once")
    return names


def format_table(
    records: Sequence[Record],
    devices: Iterable[Record] = (),
    *,
    width: int | None = None,
    columns: Sequence[str] | None = None,
) -> list[str]:
    """The table as lines: ``columns`` when given, else the columns that fit ``width`` (every one
    when no width is given): the essential ones, then others by priority while the table fits; if
    the essential ones alone are wider, the test and op columns lose their middles. ``devices``:
    the run's device records, so that a row judged by one of several sets of figures says which."""
    rows = table_rows(records, devices)
    if columns is not None or width is None:
        return _tabulate(rows, tuple(columns or COLUMNS))
    chosen: list[str] = list(ESSENTIAL)
    for name in PRIORITY[len(ESSENTIAL) :]:
        if _width(_tabulate(rows, _in_order([*chosen, name]))) <= width:
            chosen.append(name)
    lines = _tabulate(rows, _in_order(chosen))
    # the essential columns alone are too wide: the op keeps its name and first parameters, then the
    # test its end (the function and its parameters say more than the module's path)
    for name, keep_head in (("op", True), ("test", False)):
        excess = _width(lines) - width
        if excess <= 0:
            break
        at = list(COLUMNS).index(name)
        longest = max(len(row[at]) for row in rows) if rows else 0
        room = max(MIN_TEST_WIDTH, longest - excess)
        rows = [[*row[:at], _shorten(row[at], room, keep_head), *row[at + 1 :]] for row in rows]
        lines = _tabulate(rows, _in_order(chosen))
    return lines


def _in_order(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(name for name in COLUMNS if name in names)


def _tabulate(rows: Sequence[Sequence[str]], columns: Sequence[str]) -> list[str]:
    from tabulate import tabulate

    index = [list(COLUMNS).index(name) for name in columns]
    picked = [[row[i] for i in index] for row in rows]
    text = tabulate(picked, headers=[COLUMNS[name] for name in columns], disable_numparse=True)
    return str(text).splitlines()


def _width(lines: Sequence[str]) -> int:
    return max(map(len, lines), default=0)


def _shorten(text: str, width: int, keep_head: bool) -> str:
    """``layernorm rows=8192 co…`` (the head kept) or ``…test_layernorm[numpy-fused]`` (the tail)."""
    if len(text) <= width:
        return text
    return f"{text[: width - 1]}…" if keep_head else f"…{text[len(text) - (width - 1) :]}"


def summary_counts(records: Sequence[Mapping[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in records:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    parts = [f"{n} {verdict}" for verdict, n in sorted(counts.items(), key=lambda kv: kv[0].lower())]
    return f"{len(records)} measurement(s): " + ", ".join(parts) if parts else "no measurements"
