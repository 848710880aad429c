"""A GPU's clocks in the record, its JSON and the report's clock columns (a fake NVML; no pytest run)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fake_nvml import FakeNvml
from fakes import FakeBackend

from pytest_roofline.model.conditions import ClockLog
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.verdict import Result, result_of
from pytest_roofline.output.records import MeasurementRecord
from pytest_roofline.output.table import COLUMNS, format_table, table_rows
from pytest_roofline.timing.cache import FLUSHED
from pytest_roofline.timing.clocks import ClockWatcher
from pytest_roofline.timing.engine import measure

FULL = (1980, 2619, 62, 0x0, 650_000)
#: NVML's readings of a GPU whose power limit pulled its SM clock down halfway through (the software
#: power cap's reason bit set, its clock within nvbench's 75%), idle once the kernel ended
READINGS = [FULL, FULL, (1560, 2619, 70, 0x4, 700_000), (1500, 2619, 71, 0x4, 700_000),
            (1500, 2619, 71, 0x4, 699_000), (345, 405, 50, 0x1, 90_000)]  # fmt: skip


def watched(monkeypatch: pytest.MonkeyPatch) -> ClockLog:
    """The clock log of a measurement over :data:`READINGS`: read at the start, by the watcher's thread
    (four times) and at the end."""
    FakeNvml(READINGS, power_limit_mw=700_000).install(monkeypatch)
    with ClockWatcher(interval_s=3600) as watcher:
        for _ in range(4):
            watcher.sample()
    return watcher.log


def h200_gemm(clocks: ClockLog | None, *, slowed: int = 0) -> Result:
    """An 8192³ bf16 GEMM on an H200 attaining 60% of its floor."""
    est = estimate("gemm", M=8192, N=8192, K=8192, dtype="bf16", device=lookup("h200"))
    m = measure(lambda: None, cache=FLUSHED, backend=FakeBackend(est.floor_s / 0.6))
    return result_of(est, [dataclasses.replace(m, clocks=clocks, slowed=slowed)], 0.7)


def record(result: Result) -> MeasurementRecord:
    return MeasurementRecord.from_result(result, nodeid="t.py::test_gemm", mode="enforce")


def test_clocks_that_drop_mid_measurement_are_recorded_as_held(monkeypatch: pytest.MonkeyPatch) -> None:
    clocks = record(h200_gemm(watched(monkeypatch), slowed=3)).to_json()["clocks"]

    # the busy readings' median and lowest: the idle one at the end is no clock the kernel ran at
    assert (clocks["median_sm_mhz"], clocks["min_sm_mhz"], clocks["max_sm_mhz"]) == (1560, 1500, 1980)
    assert (clocks["median_mem_mhz"], clocks["min_mem_mhz"], clocks["max_mem_mhz"]) == (2619, 2619, 2619)
    assert (clocks["median_power_w"], clocks["power_limit_w"]) == (699.0, 700.0)
    assert (clocks["events"], clocks["reasons"], clocks["throttled"]) == (["software power cap"], [], False)
    assert (clocks["samples"], clocks["slowed_samples_left_out"], clocks["slowed_samples_kept"]) == (6, 3, 0)
    assert clocks["summary"].startswith(
        "SM 1560 MHz median, 1500 at the lowest, of 1980 MHz max; memory 2619 MHz median, 2619 at the lowest;"
        " drawing 699 W of its 700 W limit;"
    )


def test_the_json_record_carries_the_clocks_and_attained_at_held_clock_and_reads_them_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = record(h200_gemm(watched(monkeypatch)))
    data = json.loads(json.dumps(gpu.to_json(), allow_nan=False))

    assert data["attained"] == pytest.approx(0.6)
    assert data["attained_at_held_clock"] == pytest.approx(0.6 * 1830 / 1560)
    assert MeasurementRecord.from_json(data) == gpu
    cpu = record(h200_gemm(None)).to_json()  # a measurement with no clock log: null, never absent
    assert (cpu["clocks"], cpu["attained_at_held_clock"]) == (None, None)


def test_the_clock_columns_are_added_before_the_verdict_and_empty_without_clocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = dataclasses.replace(record(h200_gemm(watched(monkeypatch), slowed=3)), nodeid="t.py::test_gpu")
    cpu = record(h200_gemm(None))

    header = format_table([gpu, cpu], clocks=True)[0].split("  ")
    assert [cell.strip() for cell in header if cell][-6:] == [
        "SM MHz (min)", "mem MHz (min)", "power", "clock events", "at held clock", "verdict",
    ]  # fmt: skip
    gpu_row, cpu_row = table_rows([gpu, cpu], clocks=True)
    clock_cells = slice(len(COLUMNS) - 1, -1)
    assert gpu_row[clock_cells] == [
        "1560 (1500)", "2619 (2619)", "699 W of 700", "software power cap, 3 left out", "70.4%",
    ]  # fmt: skip
    assert cpu_row[clock_cells] == ["", "", "", "", ""]
    assert "clock events" not in format_table([gpu, cpu])[0]  # only when asked for
    # chosen columns keep their order, the clock columns after them
    assert format_table([gpu], columns=("test", "verdict"), clocks=True)[0].split()[:3] == [
        "test",
        "verdict",
        "SM",
    ]
