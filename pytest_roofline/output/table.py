"""The terminal report: a header per device and its ceilings, then a table with a row per record.
No pytest here (the plugin's summary writes these lines)."""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from ..model import units
from ..model.core import Unit
from ..model.verdict import Verdict, budget_percent
from .jsonfile import device_judgements
from .records import DeviceRecord, MeasurementRecord, PeakRecord, Record, shown_test

#: a row of the report: a measurement's record or a skipped test's
AnyRecord = TypeVar("AnyRecord", bound="Record")


def format_device_headers(devices: Iterable[DeviceRecord], records: Sequence[Record]) -> list[str]:
    """Every device's header; a device whose figures changed during the run has one per set, each with
    the count of rows it judged."""
    lines: list[str] = []
    judged = device_judgements(devices, records)
    numbers = _figures_numbers(device for device, _, _ in judged)
    for device, remeasured, count in judged:
        lines.extend(format_device_header(device))
        if remeasured:
            number, sets = numbers[device.version]
            lines.append(
                f"  figures #{number} of {sets} this run (the device was measured again): "
                f"judged {count} row(s)"
            )
    return lines


def _figures_numbers(devices: Iterable[DeviceRecord]) -> dict[str, tuple[int, int]]:
    """For a device with several sets of figures this run, each set's number and the count."""
    by_key: dict[str, list[str]] = {}
    for device in devices:
        by_key.setdefault(device.key, []).append(device.version)
    return {
        version: (number, len(versions))
        for versions in by_key.values()
        if len(versions) > 1
        for number, version in enumerate(versions, 1)
    }


def format_device_header(device: DeviceRecord) -> list[str]:
    """Device, its ceilings with their sources, and the ridge point of each."""
    d = device
    bw = f"{units.byte_rate(d.bandwidth)} ({d.bandwidth_source})"
    where = d.kind if d.key == d.kind else f"{d.key}, {d.kind}"
    lines = [f"device: {d.name} [{where}]  DRAM bandwidth {bw}"]
    shown = [p for p in d.peaks if not (p.source == "derived" and p.note.startswith("no "))]
    for unit in (Unit.TENSOR.value, Unit.VECTOR.value):
        # precisions sharing one figure (a CPU's narrow formats use fp32's) share one entry
        groups: dict[tuple[float, str, float | None], list[PeakRecord]] = {}
        for p in shown:
            if p.unit == unit:
                groups.setdefault((p.flops, p.source, p.at_max_clock), []).append(p)
        row = [
            f"{'/'.join(p.precision for p in group)} {units.flop_rate(flops)} "
            f"({source}, ridge {units.intensity(group[0].ridge)} FLOP/B"
            + ("" if top is None else f"; {max_clock_words(top)}")
            + ")"
            for (flops, source, top), group in groups.items()
        ]
        if row:
            lines.append(f"  {unit:<6} peaks: " + "; ".join(row))
    caches = _caches(d)
    if caches:
        lines.append(f"  caches: {caches}")
    for note in d.notes:
        lines.append(f"  note: {note}")
    return lines


def max_clock_words(rate: float) -> str:
    """How the report names a figure's rate at the maximum SM clock (:attr:`.PeakRecord.at_max_clock`)."""
    return f"{units.flop_rate(rate)} at the max SM clock, for the faster-than-light limit only"


def _caches(d: DeviceRecord) -> str:
    """The cache levels as reported and as this process sees them, with their roofs, and the
    last-level cache ("" for a device with none)."""
    from ..model.devices import describe_cache

    roofs = {level.name: level.bandwidth for level in d.levels}
    by = "sysfs" if d.kind == "cpu" else "driver"
    parts = [f"{c.name} {describe_cache(c, reported_by=by, rate=roofs.get(c.name))}" for c in d.caches]
    if not d.caches:
        parts = [
            f"{level.name} {units.binary_bytes(level.capacity_bytes)}{' per core' if level.per_core else ''}"
            f" {units.byte_rate(level.bandwidth)}"
            for level in d.levels
        ]
    if parts and d.llc_bytes:
        parts.append(f"last-level cache {units.binary_bytes(d.llc_bytes)}")
    return "; ".join(parts)


def ordered(records: Sequence[AnyRecord]) -> list[AnyRecord]:
    """The table's order: memory-bound rows first, then compute-bound, then skipped, each in run order."""
    rank = {"memory": 0, "compute": 1}

    def key(run: tuple[int, AnyRecord]) -> tuple[int, int]:
        record = run[1]
        bound = record.bound if isinstance(record, MeasurementRecord) else ""
        return (rank.get(bound, 2), run[0])

    return [record for _, record in sorted(enumerate(records), key=key)]


def table_rows(
    records: Sequence[Record],
    devices: Iterable[DeviceRecord] = (),
    *,
    clocks: bool = False,
    against: bool = False,
) -> list[list[str]]:
    """One row per record, in :func:`ordered` order, a cell per column of :func:`table_columns`;
    ``devices``: the run's, so that a row judged by one of several sets of figures says which."""
    numbers = _figures_numbers(devices)
    prefix = _common_directory([r.nodeid for r in records])
    rows = []
    for r in ordered(records):
        row = Row(r, shown_test(r)[len(prefix) :], numbers)
        rows.append([column.read(row) for column in table_columns(clocks, against)])
    return rows


def _time_cell(r: MeasurementRecord) -> str:
    noise = f"{units.seconds(r.time_s)} ± {(r.stats.ci_rel if r.stats else 0.0) * 100:.1f}%"
    if r.cache_state == "warm":
        noise += " warm"
        if r.memory_level != "dram":
            noise += f" {r.memory_level.upper()}"
    return noise


def _attained_cell(r: MeasurementRecord) -> str:
    attained = "inf" if r.attained is None else units.percent(r.attained)
    return attained + (f" ±{r.attained_ci_rel * 100:.0f}%" if r.attained_ci_rel else "")


def _verdict_cell(record: Record) -> str:
    verdict = str(record.verdict)
    if not isinstance(record, MeasurementRecord):
        return verdict  # why: skipped_notes
    if record.verdict is not Verdict.PASS and record.mode in ("report", "measure"):
        verdict += f" ({record.mode})"  # recorded, but it did not fail the test
    elif record.xfailed:
        verdict += " (xfail)"  # the test expected to miss: a bad variant on display
    return verdict


def _dtype_cell(r: MeasurementRecord) -> str:
    """``bf16``, or ``complex64→fp32`` where the math's precision is another."""
    return r.dtype + (f"→{r.peak_precision}" if r.peak_precision != r.dtype else "")


def _intensity_cell(r: MeasurementRecord) -> str:
    return "inf" if r.intensity is None else units.intensity(r.intensity)


def _op_cell(record: Record) -> str:
    """``gemm M=4096 N=4096 K=4096``, or the label of an inferred call (``auto: gemm ...``) or of a
    skipped row."""
    if not isinstance(record, MeasurementRecord) or record.inferred:
        return record.label
    return f"{record.op} {record.shape}".strip()


def achieved_cell(record: MeasurementRecord) -> str:
    """What the kernel reached of the resource that bounds it: GB/s memory-bound, FLOP/s compute-bound."""
    rate = record.achieved_rate
    if rate is None:
        return ""
    return units.flop_rate(rate) if record.compute_bound and record.flops else units.byte_rate(rate)


def ceiling_cell(record: MeasurementRecord) -> str:
    """The ceiling the row was judged against: measured beside it when a probe ran, else the device's."""
    value = record.ceiling_rate
    if not value:
        return ""
    return units.flop_rate(value) if record.compute_bound else units.byte_rate(value)


def bound_cell(record: MeasurementRecord) -> str:
    """``memory``, ``latency`` when an empty call is slower than the roofline floor, ``memory
    (compute unknown)`` for integer work on a device with no integer peak, or ``memory (FLOPs
    unknown)`` for a call whose op was inferred without its FLOPs."""
    if record.latency_bound:
        return "latency"
    if record.inferred and record.inferred.get("flops_from") == "unknown":
        return f"{record.bound} (FLOPs unknown)"
    if record.compute_s is None:
        return f"{record.bound} (compute unknown)"
    return record.bound


def _machine(row: Row) -> str:
    """``GPU 3, 62% of best, heavy, figures #2``: the GPU the row ran on, as the run numbers them; the
    probe beside the kernel against the best it has shown; the contention the OS reported when more
    than quiet; the set of figures that judged it, where there were several."""
    record, numbers = row.record, row.figures
    if not isinstance(record, MeasurementRecord):
        return ""
    parts = []
    if record.device_index is not None:
        parts.append(f"GPU {record.device_index}")
    if record.ceiling is not None:
        parts.append(f"{units.percent(record.ceiling.share_of_best)} of best")
    if record.contention_level not in (None, "quiet"):
        parts.append(str(record.contention_level))
    if record.device_version in numbers:
        parts.append(f"figures #{numbers[record.device_version][0]}")
    return ", ".join(parts)


def _clock_cell(read: Callable[[Mapping[str, Any]], str]) -> Callable[[Row], str]:
    """A clock column's cell, read from the record's ``clocks``: empty where they were not watched."""
    return _measured(lambda r: read(r.clocks) if r.clocks and r.clocks.get("watched") else "")


def _mhz_cell(clock: str) -> Callable[[Row], str]:
    """``1500 (1485)``: the clock's median over the busy samples (the lowest)."""

    def read(clocks: Mapping[str, Any]) -> str:
        median, lowest = clocks.get(f"median_{clock}_mhz"), clocks.get(f"min_{clock}_mhz")
        return "" if median is None else f"{median:.0f} ({lowest})"

    return _clock_cell(read)


def _power_cell(clocks: Mapping[str, Any]) -> str:
    """``612 W of 700``: the median power drawn, and the enforced limit."""
    power, limit = clocks.get("median_power_w"), clocks.get("power_limit_w")
    if power is None:
        return ""
    return f"{power:.0f} W" + (f" of {limit:.0f}" if limit else "")


def _events_cell(clocks: Mapping[str, Any]) -> str:
    """``software power cap, 3 left out``: every clock-event reason seen and why the clocks counted as
    slowed, then the samples at slowed clocks left out (and kept, too few others being left)."""
    parts = list(dict.fromkeys([*clocks.get("events", ()), *clocks.get("reasons", ())]))
    if left_out := clocks.get("slowed_samples_left_out"):
        parts.append(f"{left_out} left out")
    if kept := clocks.get("slowed_samples_kept"):
        parts.append(f"{kept} slowed kept")
    return ", ".join(parts)


def _held_cell(r: MeasurementRecord) -> str:
    return "" if r.attained_at_held_clock is None else units.percent(r.attained_at_held_clock)


def _common_directory(nodeids: Sequence[str]) -> str:
    """``example_project/tests/`` when every test lives below it: the table leaves it out."""
    directories = [nodeid.split("::", 1)[0].rpartition("/")[0] for nodeid in nodeids]
    if not directories or "" in directories:
        return ""
    common = posixpath.commonpath(directories)  # node ids use "/" on every platform
    return f"{common}/" if common else ""


@dataclass(frozen=True, slots=True)
class Row:
    """What a column reads: a record, its test as the table names it (the shared directory left
    out), and each device's figures numbers where a device had several sets this run."""

    record: Record
    test: str
    figures: Mapping[str, tuple[int, int]]


class Cut(Enum):
    """How a cell too wide for the terminal is shortened."""

    #: keeps its start: ``layernorm rows=8192 co…``
    HEAD = "head"
    #: keeps its start and its end, the parameters: ``test_lay…[numpy-fused]``
    ENDS = "ends"


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the terminal table: its name (``--roofline-columns``), its header, how it reads
    a row, and how it fits a narrow terminal."""

    name: str
    header: str
    read: Callable[[Row], str]
    #: 0 for a column a narrow terminal always keeps; the others join by this rank while the table fits
    keep: int = 0
    #: how a kept column's cells are shortened when the kept columns alone are too wide, or None: never
    cut: Cut | None = None


def _measured(read: Callable[[MeasurementRecord], str]) -> Callable[[Row], str]:
    """A column that only a measurement fills: a skipped row's cell is empty."""
    return lambda row: read(row.record) if isinstance(row.record, MeasurementRecord) else ""


#: the terminal table's columns, in their order
TABLE_COLUMNS: tuple[Column, ...] = (
    Column("test", "test", lambda row: row.test, cut=Cut.ENDS),
    Column("op", "op and shape", lambda row: _op_cell(row.record), cut=Cut.HEAD),
    Column("dtype", "dtype", _measured(_dtype_cell), keep=7),
    Column("bound", "bound", _measured(bound_cell), keep=4),
    Column("intensity", "FLOP/B", _measured(_intensity_cell), keep=8),
    Column("floor", "floor", _measured(lambda r: units.seconds(r.floor_s)), keep=6),
    Column("time", "measured (± noise)", _measured(_time_cell), keep=3),
    Column("achieved", "achieved", _measured(achieved_cell), keep=1),
    Column("ceiling", "ceiling", _measured(ceiling_cell), keep=2),
    Column("attained", "attained", _measured(_attained_cell)),
    Column("budget", "budget", _measured(lambda r: budget_percent(r.min_fraction))),
    Column("machine", "machine", _machine, keep=5),
    Column("verdict", "verdict", lambda row: _verdict_cell(row.record)),
)  # fmt: skip
#: the columns ``--roofline-report-clocks`` adds, before the verdict: a GPU's clocks, power and clock
#: events over the measurement, and attained at the clock it held; never dropped to fit (asked for)
CLOCK_COLUMNS: tuple[Column, ...] = (
    Column("sm_clock", "SM MHz (min)", _mhz_cell("sm")),
    Column("mem_clock", "mem MHz (min)", _mhz_cell("mem")),
    Column("power", "power", _clock_cell(_power_cell)),
    Column("clock_events", "clock events", _clock_cell(_events_cell)),
    Column("held", "at held clock", _measured(_held_cell)),
)  # fmt: skip
#: the column ``--roofline-against`` adds before the verdict: the comparison with the base's version
#: (``-18% slower (±4%)``, ``new``); never dropped to fit (asked for)
AGAINST_COLUMNS: tuple[Column, ...] = (
    Column("vs_base", "vs base", _measured(lambda r: str((r.vs_base or {}).get("summary", "")))),
)  # fmt: skip
#: every column's name -> its header, in the table's order (``--roofline-columns`` chooses among them)
COLUMNS: dict[str, str] = {column.name: column.header for column in TABLE_COLUMNS}
TABLE_HEADERS = tuple(COLUMNS.values())
#: the op and test columns are shortened to no fewer characters than this to fit
MIN_TEST_WIDTH = 20


def skipped_notes(records: Sequence[Record]) -> list[str]:
    """A line under the table for each skipped row: why it measured nothing."""
    notes = []
    for r in ordered(records):
        if not isinstance(r, MeasurementRecord):
            notes.append(f"  {shown_test(r)} skipped: {r.reason}")
    return notes


def parse_columns(text: str) -> tuple[str, ...]:
    """``test,attained,verdict`` (or ``all``) -> the column names; ValueError naming a wrong one."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if names == ("all",):
        return tuple(COLUMNS)
    if not names:
        raise ValueError(f"expected column names separated by commas, or all; got {text!r}")
    from ..model.core import did_you_mean

    for name in names:
        if name not in COLUMNS:
            raise ValueError(
                f"unknown column {name!r}{did_you_mean(name, tuple(COLUMNS))}; choose from "
                f"{', '.join(COLUMNS)}, or all"
            )
        if names.count(name) > 1:
            raise ValueError(f"column {name!r} is named twice in {text!r}; name each column once")
    return names


def table_columns(clocks: bool = False, against: bool = False) -> tuple[Column, ...]:
    """The table's columns: :data:`TABLE_COLUMNS`, with ``clocks`` the :data:`CLOCK_COLUMNS` and with
    ``against`` the :data:`AGAINST_COLUMNS` before the verdict."""
    extra = (*(CLOCK_COLUMNS if clocks else ()), *(AGAINST_COLUMNS if against else ()))
    return (*TABLE_COLUMNS[:-1], *extra, TABLE_COLUMNS[-1])


def format_table(
    records: Sequence[Record],
    devices: Iterable[DeviceRecord] = (),
    *,
    width: int | None = None,
    columns: Sequence[str] | None = None,
    clocks: bool = False,
    against: bool = False,
) -> list[str]:
    """The table as lines: ``columns`` when given, else those that fit ``width`` (all when None), the op
    and test cells cut when the essential columns alone are wider. The rest as :func:`table_rows`."""
    table = table_columns(clocks, against)
    rows = table_rows(records, devices, clocks=clocks, against=against)
    if columns is not None:  # as asked, then the clock and comparison columns
        return _tabulate(rows, table, [*columns, *(c.name for c in table if c.name not in COLUMNS)])
    if width is None:  # every column
        return _tabulate(rows, table, [column.name for column in table])
    chosen = _fitting(rows, table, width)
    lines = _tabulate(rows, table, _in_order(table, chosen))
    # the essential columns alone are too wide: the columns that may be cut give way, those that keep
    # their head first (the op loses its last parameters: detail), then the others (the test)
    cuttable = [(at, c.cut) for at, c in enumerate(table) if c.cut is not None and c.name in chosen]
    for at, cut in sorted(cuttable, key=lambda column: column[1] is not Cut.HEAD):
        excess = _width(lines) - width
        if excess <= 0:
            break
        longest = max(len(row[at]) for row in rows) if rows else 0
        room = max(MIN_TEST_WIDTH, longest - excess)
        rows = [[*row[:at], _shorten(row[at], room, cut), *row[at + 1 :]] for row in rows]
        lines = _tabulate(rows, table, _in_order(table, chosen))
    return lines


def _fitting(rows: Sequence[Sequence[str]], table: Sequence[Column], width: int) -> list[str]:
    """The columns a table of ``width`` characters keeps: the essential ones, then others by priority
    while the table fits."""
    chosen = [column.name for column in table if column.keep == 0]
    for column in sorted((c for c in table if c.keep), key=lambda c: c.keep):
        if _width(_tabulate(rows, table, _in_order(table, [*chosen, column.name]))) <= width:
            chosen.append(column.name)
    return chosen


def hidden_columns_note(
    records: Sequence[Record],
    devices: Iterable[DeviceRecord],
    width: int,
    *,
    clocks: bool = False,
    against: bool = False,
) -> str:
    """What a report of ``width`` characters leaves out, and how to show it ("" when nothing)."""
    table = table_columns(clocks, against)
    rows = table_rows(records, devices, clocks=clocks, against=against)
    chosen = _fitting(rows, table, width)
    hidden = [column.name for column in table if column.name not in chosen]
    if not hidden:
        return ""
    show = "--roofline-columns=all (or a wider COLUMNS)"
    return left_out_note(hidden, len(table), width, show, "--roofline-json")


def left_out_note(left_out: Sequence[str], columns: int, width: int, show: str, keep: str) -> str:
    """What a table of ``width`` characters left out of its ``columns``, what shows them (``show``) and
    what keeps every figure (``keep``): the report's and ``roofline llm``'s alike."""
    return (
        f"{len(left_out)} of {columns} columns left out to fit {width} characters: {', '.join(left_out)};"
        f" {show} shows them, and {keep} keeps every figure"
    )


def _in_order(table: Sequence[Column], names: Sequence[str]) -> tuple[str, ...]:
    return tuple(column.name for column in table if column.name in names)


def _tabulate(rows: Sequence[Sequence[str]], table: Sequence[Column], columns: Sequence[str]) -> list[str]:
    from tabulate import tabulate

    names = [column.name for column in table]
    index = [names.index(name) for name in columns]
    picked = [[row[i] for i in index] for row in rows]
    text = tabulate(picked, headers=[table[i].header for i in index], disable_numparse=True)
    return str(text).splitlines()


def _width(lines: Sequence[str]) -> int:
    return max(map(len, lines), default=0)


def _shorten(text: str, width: int, cut: Cut) -> str:
    """``text`` in ``width`` characters, as ``cut`` says. A test id keeps its parameters (from the
    test name's first ``[``) at its end, in up to half the room, and its start in the rest."""
    if len(text) <= width:
        return text
    room = width - 1
    if cut is Cut.HEAD:
        return f"{text[:room]}…"
    opening, half = text.find("[", text.rfind("::") + 1), room // 2
    end = min(len(text) - opening, half) if opening >= 0 else half
    return f"{text[: room - end]}…{text[len(text) - end :]}"


def summary_counts(records: Sequence[Record]) -> str:
    counts = Counter(str(r.verdict) for r in records)
    parts = [f"{n} {verdict}" for verdict, n in sorted(counts.items(), key=lambda kv: kv[0].lower())]
    return f"{len(records)} measurement(s): " + ", ".join(parts) if parts else "no measurements"
