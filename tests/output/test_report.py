"""Records, the terminal table and header, and the JSON file (no pytest run, no timing)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.verdict import Result, result_of
from pytest_roofline.output.baseline import SCHEMA_VERSION
from pytest_roofline.output.jsonfile import environment, payload, write_json_atomic
from pytest_roofline.output.records import (
    DeviceRecord,
    JsonObject,
    MeasurementRecord,
    Record,
    SkippedRecord,
    figures_id,
    record_from_json,
)
from pytest_roofline.output.table import (
    COLUMNS,
    TABLE_HEADERS,
    format_device_header,
    format_device_headers,
    format_table,
    ordered,
    parse_columns,
    skipped_notes,
    summary_counts,
    table_rows,
)
from pytest_roofline.timing.cache import FLUSHED, WARM
from pytest_roofline.timing.engine import measure

DEVICE = Device(
    key="toy",
    name="Toy Accelerator",
    kind="cuda",
    peaks={
        (Precision.FP32, Unit.VECTOR): Figure(1e12, Source.DATASHEET),
        (Precision.TF32, Unit.TENSOR): Figure(8e12, Source.MEASURED, "tf32 probe"),
    },
    bandwidth=Figure(1e11, Source.USER, "peaks.json"),
    notes=("a note",),
)


def a_result(op: str, seconds: float, *, name: str = "", flush: bool = True, **params: Any) -> Result:
    est = estimate(op, dtype="fp32", device=DEVICE, **params)
    m = measure(lambda: None, policy=Policy(), cache=FLUSHED if flush else WARM, backend=FakeBackend(seconds))
    return result_of(est, [m], 0.5, name=name)


def result_record(result: Result, *, nodeid: str, mode: str) -> JsonObject:
    return MeasurementRecord.from_result(result, nodeid=nodeid, mode=mode).to_json()


def skipped_record(*, nodeid: str, label: str, reason: str) -> JsonObject:
    return SkippedRecord(nodeid=nodeid, label=label, reason=reason).to_json()


def device_record(device: Device) -> JsonObject:
    return DeviceRecord.of(device).to_json()


def typed(rs: list[JsonObject] | list[dict[str, Any]]) -> list[Record]:
    """The records a report's functions take, read from their JSON as a file's are."""
    return [record_from_json(r) for r in rs]


def typed_devices(ds: list[JsonObject]) -> list[DeviceRecord]:
    return [DeviceRecord.from_json(d) for d in ds]


def records() -> list[dict[str, Any]]:
    return [
        result_record(a_result("gemm", 2e-3, M=1000, N=1000, K=1000), nodeid="t.py::test_gemm",
                      mode="enforce"),
        skipped_record(nodeid="t.py::test_gpu", label="gemm", reason="needs CUDA device 0"),
        result_record(a_result("copy", 1e-3, n=1000, name="small", flush=False), nodeid="t.py::test_copy",
                      mode="report"),
        result_record(a_result("gemm", 2e-3, M=1000, N=1000, K=1000, math="tf32"), nodeid="t.py::test_tf32",
                      mode="measure"),
    ]  # fmt: skip


def test_a_result_record_has_every_field_and_is_plain_json() -> None:
    r = records()[0]
    text = json.dumps(r, allow_nan=False)
    assert json.loads(text) == r
    assert r["nodeid"] == "t.py::test_gemm"
    assert (r["op"], r["params"], r["dtype"], r["peak_precision"], r["unit"]) == (
        "gemm", {"M": 1000, "N": 1000, "K": 1000, "batch": 1}, "fp32", "fp32", "vector",
    )  # fmt: skip
    assert (r["flops"], r["bytes"], r["bound"], r["stat"]) == (2e9, 1.2e7, "compute", "median")
    assert r["floor_s"] == pytest.approx(2e-3)
    assert r["time_s"] == pytest.approx(2e-3)
    assert r["attained"] == pytest.approx(1.0)
    assert (r["min_fraction"], r["passed"], r["verdict"], r["mode"]) == (0.5, True, "pass", "enforce")
    assert r["stats"]["n"] == len(r["samples_s"]) >= 10
    assert (r["device"], r["device_name"], r["backend"], r["flushed"]) == (
        "toy",
        "Toy Accelerator",
        "fake",
        True,
    )
    assert r["peak_source"] == "datasheet"
    assert r["bandwidth_source"] == "user"


def test_a_record_counts_the_samples_left_out_and_why() -> None:
    result = a_result("copy", 1e-3, n=1000)
    m = dataclasses.replace(result.measurement, transient=4, excluded=2)
    r = result_record(dataclasses.replace(result, measurement=m), nodeid="t", mode="enforce")
    assert (r["transient_samples"], r["excluded_samples"]) == (4, 2)


def test_an_op_without_bytes_has_a_null_intensity() -> None:
    r = result_record(a_result("custom", 1e-3, flops=1e9), nodeid="t", mode="enforce")
    assert r["intensity"] is None
    json.dumps(r, allow_nan=False)


def test_a_device_record_lists_every_ceiling_with_its_source_and_ridge() -> None:
    d = device_record(DEVICE)
    json.dumps(d, allow_nan=False)
    assert (d["key"], d["name"], d["kind"], d["bandwidth"], d["bandwidth_source"]) == (
        "toy", "Toy Accelerator", "cuda", 1e11, "user",
    )  # fmt: skip
    peaks = {(p["precision"], p["unit"]): p for p in d["peaks"]}
    assert peaks["fp32", "vector"]["ridge"] == 10
    assert peaks["tf32", "tensor"]["source"] == "measured"
    assert d["notes"] == ["a note"]


def test_a_devices_figures_are_named_by_their_values_and_sources_only() -> None:
    same = dataclasses.replace(DEVICE, name="renamed", notes=())
    slower = DEVICE.with_figures(bandwidth=Figure(5e10, Source.USER, "peaks.json"))
    measured = DEVICE.with_figures(bandwidth=Figure(1e11, Source.MEASURED))
    assert figures_id(same) == figures_id(DEVICE) == device_record(DEVICE)["figures"]
    assert len({figures_id(DEVICE), figures_id(slower), figures_id(measured)}) == 3
    assert result_record(a_result("copy", 1e-3, n=1000), nodeid="t", mode="enforce")["device_figures"] == (
        figures_id(DEVICE)
    )


def test_a_device_with_two_sets_of_figures_has_a_header_for_each_and_rows_that_say_which() -> None:
    slower = DEVICE.with_figures(bandwidth=Figure(5e10, Source.USER, "peaks.json"))
    first = result_record(a_result("copy", 1e-3, n=1000), nodeid="t.py::test_first", mode="enforce")
    other = device_record(slower)
    second = dict(first, nodeid="t.py::test_second", device_figures=other["figures"])
    devices = [device_record(DEVICE), other]
    judged = payload(typed([first, second]), typed_devices(devices))["devices"]
    assert [(d["remeasured"], d["measurements"]) for d in judged] == [(True, 1), (True, 1)]
    headers = format_device_headers(typed_devices(devices), typed([first, second]))
    assert [line for line in headers if "figures #" in line] == [
        "  figures #1 of 2 this run (the device was measured again): judged 1 row(s)",
        "  figures #2 of 2 this run (the device was measured again): judged 1 row(s)",
    ]
    rows, one_set = typed([first, second]), typed_devices(devices[:1])
    assert [row[11] for row in table_rows(rows, typed_devices(devices))] == ["figures #1", "figures #2"]
    assert [row[11] for row in table_rows(rows, one_set)] == ["", ""]  # one set: no number
    assert not any("figures #" in line for line in format_device_headers(one_set, rows[:1]))


def test_the_device_header() -> None:
    lines = format_device_header(DeviceRecord.of(DEVICE))
    assert lines[0] == "device: Toy Accelerator [toy, cuda]  DRAM bandwidth 100 GB/s (user)"
    assert "  tensor peaks: tf32 8.00 TFLOP/s (measured, ridge 80.0 FLOP/B)" in lines
    assert any(
        line.startswith("  vector peaks: fp32 1.00 TFLOP/s (datasheet, ridge 10.0 FLOP/B)") for line in lines
    )
    assert lines[-1] == "  note: a note"


def test_a_figure_quoted_below_the_max_clock_shows_its_rate_there_as_the_faster_than_light_limits() -> None:
    from pytest_roofline.model.devices import lookup
    from pytest_roofline.output.markdown import section

    d = device_record(lookup("h200"))
    json.dumps(d, allow_nan=False)
    peaks = {(p["precision"], p["unit"]): p for p in d["peaks"]}
    assert peaks["bf16", "tensor"]["flops"] == 989.5e12  # the datasheet's, as quoted
    assert peaks["bf16", "tensor"]["at_max_clock"] == pytest.approx(989.5e12 * 1980 / 1830)
    assert peaks["fp64", "tensor"]["at_max_clock"] is None  # quoted at the maximum clock
    assert DeviceRecord.from_json(d) == DeviceRecord.of(lookup("h200"))  # read back as written
    header = format_device_header(DeviceRecord.from_json(d))
    assert (
        "fp16/bf16 990 TFLOP/s (datasheet, ridge 206 FLOP/B; 1.07 PFLOP/s at the max SM clock, for the"
        " faster-than-light limit only)"
    ) in header[1]
    assert "fp64 67.0 TFLOP/s (datasheet, ridge 14.0 FLOP/B);" in header[1]
    assert (
        "bf16 tensor 990 TFLOP/s (1.07 PFLOP/s at the max SM clock, for the faster-than-light limit only)"
    ) in section([], [DeviceRecord.from_json(d)])


def test_the_device_header_and_json_carry_both_cache_capacities() -> None:
    from pytest_roofline.model.core import CacheSize, MemoryLevel
    from pytest_roofline.output.records import DeviceRecord

    caches = (
        CacheSize(1, 48 * 2**10, None, per_core=True, found="unseen", note="no step"),
        CacheSize(3, 480 * 2**20, 40 * 2**20, note="the rate steps from 27 to 13.5 GB/s at 40 MiB"),
    )
    l3 = MemoryLevel("l3", 40 * 2**20, Figure(27e9, Source.MEASURED, "add 20 MiB"))
    cpu = dataclasses.replace(
        DEVICE, kind="cpu", key="cpu", llc_bytes=40 * 2**20, levels=(l3,), caches=caches
    )
    lines = format_device_header(DeviceRecord.of(cpu))
    assert (
        "  caches: l1 48 KiB per core (sysfs), not seen by the capacity sweep: not used;"
        " l3 480 MiB (sysfs), 40 MiB effective, 27.0 GB/s; last-level cache 40 MiB"
    ) in lines
    data = device_record(cpu)
    assert data["llc_bytes"] == 40 * 2**20  # what cold measurements were sized by
    assert data["levels"][0]["capacity_bytes"] == 40 * 2**20
    assert data["caches"] == [
        {"name": "l1", "reported_bytes": 48 * 2**10, "effective_bytes": None, "per_core": True,
         "found": "unseen", "note": "no step"},
        {"name": "l3", "reported_bytes": 480 * 2**20, "effective_bytes": 40 * 2**20, "per_core": False,
         "found": "knee", "note": "the rate steps from 27 to 13.5 GB/s at 40 MiB"},
    ]  # fmt: skip
    assert DeviceRecord.from_json(data) == DeviceRecord.of(cpu)
    assert DeviceRecord.from_json({**data, "caches": None}).caches == ()  # an older file


def test_rows_are_memory_then_compute_then_skipped_in_run_order() -> None:
    rs = records()
    assert [r.nodeid for r in ordered(typed(rs))] == [
        "t.py::test_copy",
        "t.py::test_gemm",
        "t.py::test_tf32",
        "t.py::test_gpu",
    ]
    rows = table_rows(typed(rs))
    assert all(len(row) == len(TABLE_HEADERS) for row in rows)
    copy, gemm, tf32, gpu = rows
    assert copy[:4] == ["t.py::test_copy [small]", "copy n=1000", "fp32", "memory"]
    assert copy[6].endswith(" warm")  # a warm-cache time says so
    assert copy[12] == "MISS (report)"  # recorded in report mode: it failed nothing
    assert gemm == ["t.py::test_gemm", "gemm M=1000 N=1000 K=1000", "fp32", "compute", "167", "2000 µs",
                    "2000 µs ± 0.0%", "1.00 TFLOP/s", "1.00 TFLOP/s", "100.0%", "50%", "",
                    "pass"]  # fmt: skip
    assert tf32[2] == "fp32→tf32"
    assert tf32[12] == "MISS (measure)"  # roofline.measure: never a failure
    assert gpu == ["t.py::test_gpu", "gemm", *[""] * 10, "skipped"]
    assert skipped_notes(typed(rs)) == ["  t.py::test_gpu skipped: needs CUDA device 0"]


def test_the_table_is_plain_text() -> None:
    lines = format_table(typed(records()))
    assert lines[0].split() == [
        "test", "op", "and", "shape", "dtype", "bound", "FLOP/B", "floor", "measured", "(±", "noise)",
        "achieved", "ceiling", "attained", "budget", "machine", "verdict",
    ]  # fmt: skip
    assert set(lines[1]) <= {"-", " "}
    assert len(lines) == 2 + len(records())
    assert all("\x1b" not in line for line in lines)


def test_the_machine_cell_says_the_share_of_best_and_any_contention() -> None:
    record = result_record(a_result("gemm", 2e-3, M=1000, N=1000, K=1000), nodeid="t.py::t", mode="enforce")

    def cell(ceiling: JsonObject | None, contention: JsonObject | None) -> str:
        rows = table_rows(
            [MeasurementRecord.from_json({**record, "ceiling": ceiling, "contention": contention})]
        )
        return rows[0][list(COLUMNS).index("machine")]

    assert cell(None, None) == ""
    assert cell({"share_of_best": 0.62}, {"level": "quiet"}) == "62.0% of best"
    assert cell({"share_of_best": 0.5}, {"level": "heavy"}) == "50.0% of best, heavy"
    # an inconclusive row shows the interval of attained next to it
    record.update(attained_ci_rel=0.04)
    assert table_rows(typed([record]))[0][9] == "100.0% ±4%"


def test_summary_counts() -> None:
    assert summary_counts([]) == "no measurements"
    assert summary_counts(typed(records())) == "4 measurement(s): 2 MISS, 1 pass, 1 skipped"


def test_payload_and_environment() -> None:
    cupy_before = "cupy" in sys.modules
    data = payload(typed(records()), [DeviceRecord.of(DEVICE)])
    assert data["schema"] == SCHEMA_VERSION
    assert len(data["measurements"]) == 4
    assert data["devices"][0]["key"] == "toy"
    env = environment()
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["pytest"] == pytest.__version__
    assert set(env) >= {"numpy", "cupy", "pytest_roofline", "platform", "machine"}
    assert ("cupy" in sys.modules) == cupy_before  # looked up, never imported


def test_write_json_atomic_writes_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    assert write_json_atomic(target, {"a": 1}) == target
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


@pytest.mark.parametrize("bad", [{"x": math.nan}, {"x": object()}])
def test_write_json_atomic_leaves_the_old_file_and_no_temporary_on_failure(tmp_path: Path, bad: Any) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises((ValueError, TypeError)):
        write_json_atomic(target, bad)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_json_atomic_to_a_missing_directory_names_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing"):
        write_json_atomic(tmp_path / "missing" / "out.json", {})


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_json_file_gets_the_umasks_mode(
    tmp_path: Path, umask: Callable[[int], None], mask: int, mode: int
) -> None:
    umask(mask)
    write_json_atomic(tmp_path / "out.json", {})
    assert stat.S_IMODE((tmp_path / "out.json").stat().st_mode) == mode


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_replaced_json_file_keeps_its_mode(tmp_path: Path, umask: Callable[[int], None], mode: int) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(mode)
    umask(0o077)  # a root container's tight umask must not make an existing artifact unreadable
    write_json_atomic(target, {"a": 1})
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert json.loads(target.read_text()) == {"a": 1}


def test_write_json_atomic_replaces_a_symlinks_target_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "out.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert write_json_atomic(link, {"a": 1}) == real
    assert link.is_symlink()
    assert link.resolve() == real
    assert json.loads(real.read_text()) == {"a": 1}
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["out.json"]  # no temporary left


def test_write_json_atomic_creates_a_dangling_symlinks_target(tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "new.json")
    write_json_atomic(link, {"a": 1})
    assert link.is_symlink()
    assert json.loads((tmp_path / "new.json").read_text()) == {"a": 1}


def test_write_json_atomic_writes_a_character_device_in_place(tmp_path: Path) -> None:
    """Through a link to /dev/null: the link stays, and so does the device (replaced, as root, it
    would have become a regular file)."""
    link = tmp_path / "null.json"
    link.symlink_to(os.devnull)
    write_json_atomic(link, {"a": 1})
    assert link.is_symlink()
    assert stat.S_ISCHR(os.stat(link).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["null.json"]


def test_write_json_atomic_writes_a_fifo_in_place_for_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as pipe:
            received.append(pipe.read())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(500):  # until the reader has opened its end: a FIFO nobody reads is refused
            try:
                write_json_atomic(fifo, {"a": 1})
                break
            except OSError:
                time.sleep(0.01)
    finally:
        # unblock a reader that never got its data; one that is just closing its end (the write went
        # through) leaves no reader, and nothing to unblock
        if reader.is_alive():
            with (
                contextlib.suppress(OSError),
                open(fifo, "wb", opener=lambda p, f: os.open(p, f | os.O_NONBLOCK)),
            ):
                pass
        reader.join(5)
    assert json.loads(received[0]) == {"a": 1}
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_write_json_atomic_refuses_a_fifo_nobody_reads_and_leaves_it_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="it is a FIFO that no process is reading"):
        write_json_atomic(fifo, {"a": 1})
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_json_atomic_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        write_json_atomic(tmp_path, {})


def test_the_table_leaves_out_the_directory_all_tests_share() -> None:
    rs = [dict(r, nodeid=f"example_project/tests/{r['nodeid']}") for r in records()]
    assert [row[0] for row in table_rows(typed(rs))] == [
        "t.py::test_copy [small]", "t.py::test_gemm", "t.py::test_tf32", "t.py::test_gpu",
    ]  # fmt: skip
    rs[0]["nodeid"] = "other/t.py::test_gemm"
    assert table_rows(typed(rs))[1][0] == "other/t.py::test_gemm"  # nothing shared: full node ids


@pytest.mark.parametrize("width", [80, 200])
def test_the_table_fits_the_terminal(width: int) -> None:
    rs = [{**r, "nodeid": "tests/kernels/test_a_rather_long_module_name.py::TestClass::" + r["nodeid"][6:]}
          for r in records()]  # fmt: skip
    lines = format_table(typed(rs), width=width)
    assert max(map(len, lines)) <= width
    headers = lines[0]
    for kept in ("test", "op and shape", "attained", "budget", "verdict"):
        assert kept in headers
    if width == 200:
        assert "achieved" in headers
        assert "ceiling" in headers
        assert "measured (± noise)" in headers
    else:
        assert "FLOP/B" not in headers
        assert "…" in lines[2]  # the long test ids lose their middle


def test_a_test_id_cut_to_fit_keeps_its_start_and_its_end() -> None:
    rs = [{**r, "nodeid": "tests/kernels/test_a_rather_long_module_name.py::TestClass::" + r["nodeid"][6:]}
          for r in records()]  # fmt: skip
    tests = [line.split("  ")[0] for line in format_table(typed(rs), width=80)[2:]]
    # the module's start, then the parameters (or the function's end): never only one of them
    assert tests == [
        "test_a_rathe…[small]", "test_a_rat…test_gemm", "test_a_rat…test_tf32", "test_a_rat…:test_gpu",
    ]  # fmt: skip


def test_columns_can_be_chosen() -> None:
    lines = format_table(typed(records()), columns=("test", "achieved", "verdict"))
    assert lines[0].split() == ["test", "achieved", "verdict"]
    assert parse_columns("all") == tuple(parse_columns("test,op,dtype,bound,intensity,floor,time,achieved,"
                                                      "ceiling,attained,budget,machine,verdict"))  # fmt: skip
    with pytest.raises(
        ValueError, match=r"unknown column 'atained' \(did you mean 'attained'\?\); choose from test, op,"
    ):
        parse_columns("test,atained")
    with pytest.raises(ValueError, match="expected column names separated by commas, or all; got ','"):
        parse_columns(",")
