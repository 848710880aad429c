"""What a run leaves behind: the terminal report, the JSON file, junit properties, xdist merging."""

from __future__ import annotations

import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import COPY, GEMM, fake_conftest

import pytest_roofline.output.jsonfile
from pytest_roofline.output.table import TABLE_HEADERS

SUITE = f"""
import pytest

@pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
def test_gemm_marker():
    pass

def test_copy(roofline):
    roofline(lambda: None, op="copy", {COPY}, dtype="fp32")

@pytest.mark.fake_time(20e-3)
def test_slow_gemm(roofline):
    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32", min_fraction=0.7)

@pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", device="cuda:7")
def test_elsewhere():
    pass

def test_plain():
    pass
"""


# -- the terminal report ---------------------------------------------------------------------------


def table(result: pytest.RunResult) -> list[list[str]]:
    """The report table's lines, split into cells (columns are two or more spaces apart)."""
    lines = result.stdout.lines
    start = next(
        i for i, line in enumerate(lines) if line.startswith("test ") and line.rstrip().endswith("verdict")
    )
    end = next(i for i in range(start, len(lines)) if "measurement(s)" in lines[i] or "skipped:" in lines[i])
    return [re.split(r"\s{2,}", line.strip()) for line in lines[start:end] if not line.startswith("---")]


@pytest.mark.usefixtures("no_gpu")
def test_the_report_has_a_device_header_and_a_row_per_measurement(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-report", "--color=no")
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*= roofline report =*",
            "device: Fake Accelerator [[]fake, cpu[]]  DRAM bandwidth 100 GB/s (datasheet)",
            # precisions sharing a figure share an entry
            "  vector peaks: fp64/fp32 1.00 TFLOP/s (datasheet, ridge 10.0 FLOP/B)",
            "test *verdict",
            "---*",
            "4 measurement(s): 1 MISS, 2 pass, 1 skipped; mode enforce",
        ]
    )
    header, *rows = table(result)
    assert header == list(TABLE_HEADERS)
    # memory-bound rows first, then compute-bound, then skipped ones
    assert rows == [
        # 100 MB moved: six times the fake device's 32 MiB cache, so it evicts its own data (cold, unflushed)
        ["test_suite.py::test_copy", "copy n=25000000", "fp32", "memory", "0", "2000 µs",
         "2500 µs ± 0.0%", "80.0 GB/s", "100 GB/s", "80.0%", "50%", "pass"],
        ["test_suite.py::test_gemm_marker", "gemm M=1000 N=1000 K=1000", "fp32", "compute", "167", "2000 µs",
         "2500 µs ± 0.0%", "800 GFLOP/s", "1.00 TFLOP/s", "80.0%", "50%", "pass"],
        ["test_suite.py::test_slow_gemm", "gemm M=1000 N=1000 K=1000", "fp32", "compute", "167", "2000 µs",
         "20.0 ms ± 0.0%", "100 GFLOP/s", "1.00 TFLOP/s", "10.0%", "70%", "MISS"],
        ["test_suite.py::test_elsewhere", "gemm", "skipped"],
    ]  # fmt: skip
    result.stdout.fnmatch_lines(
        ["  test_suite.py::test_elsewhere skipped: needs CUDA device 7 (device='cuda:7'); 0 visible here*"]
    )


def test_without_the_option_there_is_no_report(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest()
    result.stdout.no_fnmatch_line("*roofline report*")


def test_report_rows_are_colored_by_verdict(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-report", "--color=yes")
    red, green = "\x1b[31m", "\x1b[32m"
    lines = result.stdout.lines
    (miss,) = [line for line in lines if "test_slow_gemm" in line and "MISS" in line]
    (passed,) = [line for line in lines if "test_copy" in line and "memory" in line]
    assert red in miss
    assert green in passed


def test_an_ini_file_turns_the_report_on(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    rl.makeini("[pytest]\nroofline_report = true\n")
    result = rl.runpytest()
    result.stdout.fnmatch_lines(["*= roofline report =*"])


def test_an_empty_report_says_so(rl: pytest.Pytester) -> None:
    rl.makepyfile("def test_plain():\n    pass\n")
    result = rl.runpytest("--roofline-report")
    result.stdout.fnmatch_lines(["*= roofline report =*", "no measurements; mode enforce"])


# -- JSON ------------------------------------------------------------------------------------------


MEASUREMENT_FIELDS = {
    "nodeid", "name", "label", "op", "shape", "params", "dtype", "peak_precision", "unit", "flops", "bytes",
    "intensity", "ridge", "bound", "compute_s", "memory_s", "floor_s", "peak_flops", "peak_source",
    "bandwidth", "bandwidth_source", "time_s", "stat", "attained", "attained_at_held_clock", "min_fraction",
    "passed", "verdict", "remeasured", "xfailed", "mode", "device", "device_name", "device_figures",
    "device_index", "device_from", "backend", "flushed",
    "stop_reason", "calls_per_sample", "wall_s", "measurements", "attained_ci_rel", "between_runs",
    "verdict_reason", "verdict_rule",
    "calibrated_floor_s", "cache", "cache_state", "memory_level", "cold_method", "rotation_copies",
    "low_confidence", "budget_note", "excluded_samples", "transient_samples", "still_falling", "ceiling",
    "contention", "threads", "thread_wait_share", "latency_floor_s", "latency_bound", "diagnosis", "clocks",
    "vs_base", "stats", "samples_s", "reason", "inferred",
}  # fmt: skip


@pytest.mark.usefixtures("no_gpu")
def test_the_json_file_has_every_measurement_device_and_environment(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-json=out.json")
    result.stdout.fnmatch_lines(["roofline: wrote 4 measurement(s) to out.json"])
    data = json.loads((rl.path / "out.json").read_text(encoding="utf-8"))
    assert data["schema"] == 2
    assert (data["interrupted"], data["interruption"]) == (False, None)
    env = data["environment"]
    assert set(env) >= {"python", "numpy", "cupy", "pytest", "pytest_roofline", "platform"}
    assert env["pytest"] == pytest.__version__
    (device,) = data["devices"]
    assert (device["key"], device["name"], device["bandwidth"], device["bandwidth_source"]) == (
        "fake", "Fake Accelerator", 1e11, "datasheet",
    )  # fmt: skip
    assert {(p["precision"], p["unit"], p["flops"]) for p in device["peaks"]} >= {
        ("fp32", "vector", 1e12), ("fp64", "vector", 1e12),
    }  # fmt: skip

    by_test = {m["nodeid"].split("::")[1]: m for m in data["measurements"]}
    assert list(by_test) == ["test_gemm_marker", "test_copy", "test_slow_gemm", "test_elsewhere"]
    gemm = by_test["test_gemm_marker"]
    assert set(gemm) == MEASUREMENT_FIELDS
    # the figures that judged each row are the device entry's, which judged the three measured rows
    assert {m["device_figures"] for m in data["measurements"]} == {device["figures"], None}
    assert (device["remeasured"], device["measurements"]) == (False, 3)
    expected: dict[str, Any] = {
        "nodeid": "test_suite.py::test_gemm_marker", "name": "", "op": "gemm",
        "params": {"M": 1000, "N": 1000, "K": 1000, "batch": 1}, "dtype": "fp32", "peak_precision": "fp32",
        "unit": "vector", "flops": 2e9, "bytes": 1.2e7, "bound": "compute", "stat": "median",
        "min_fraction": 0.5, "passed": True, "verdict": "pass", "mode": "enforce", "device": "fake",
        "backend": "fake", "flushed": True, "remeasured": False,
    }  # fmt: skip
    assert {k: gemm[k] for k in expected} == expected
    assert gemm["intensity"] == pytest.approx(166.67, rel=1e-4)
    assert gemm["floor_s"] == pytest.approx(2e-3)
    assert gemm["time_s"] == pytest.approx(2.5e-3)
    assert gemm["attained"] == pytest.approx(0.8)
    assert gemm["stats"]["n"] == len(gemm["samples_s"]) >= 10
    assert set(gemm["stats"]) >= {"n", "min", "max", "median", "mean", "stdev", "q1", "q3", "ci_rel"}
    assert all(s == pytest.approx(2.5e-3) for s in gemm["samples_s"])

    assert by_test["test_copy"]["intensity"] == 0
    slow = by_test["test_slow_gemm"]
    assert (slow["verdict"], slow["passed"], slow["min_fraction"], slow["remeasured"]) == (
        "MISS",
        False,
        0.7,
        True,
    )
    skipped = by_test["test_elsewhere"]
    assert set(skipped) == MEASUREMENT_FIELDS  # every field, what was not measured null
    assert (skipped["verdict"], skipped["op"], skipped["attained"], skipped["floor_s"]) == (
        "skipped",
        "gemm",
        None,
        None,
    )
    assert "needs CUDA device 7" in skipped["reason"]


def test_the_json_file_of_a_copy_op_has_a_null_intensity(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        def test_nothing_to_move(roofline):
            roofline.measure(lambda: None, op="custom", flops=1e9, dtype="fp32")
        """
    )
    rl.runpytest("--roofline-json=out.json").assert_outcomes(passed=1)
    (m,) = json.loads((rl.path / "out.json").read_text())["measurements"]
    assert m["intensity"] is None  # JSON has no infinity
    assert m["mode"] == "measure"


def test_a_json_write_that_fails_at_the_end_is_an_error_and_the_report_still_prints(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: object, data: object) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(pytest_roofline.output.jsonfile, "write_json_atomic", refuse)
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-json=out.json", "--roofline-report", "--roofline-mode=report")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # every test passed, but the file is missing
    result.assert_outcomes(passed=4, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*= roofline report =*",
            "*test_copy*pass*",
            "roofline: could not write --roofline-json 'out.json': "
            "[[]Errno 13[]] Permission denied: 'out.json'",
        ]
    )
    assert not (rl.path / "out.json").exists()


def test_an_unwritable_json_path_is_a_usage_error_naming_it(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-json=missing/out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*argument --roofline-json: cannot write 'missing/out.json': directory '*missing' does not exist"]
    )


def test_the_json_file_is_written_atomically(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    (rl.path / "out.json").write_text("old")
    rl.runpytest("--roofline-json=out.json")
    assert json.loads((rl.path / "out.json").read_text())["schema"] == 2
    assert [p.name for p in rl.path.iterdir() if p.name.startswith(".out.json")] == []


@pytest.mark.parametrize("points_to", ["a file elsewhere", "/dev/null"])
def test_the_json_file_is_written_through_a_symlink_which_stays(rl: pytest.Pytester, points_to: str) -> None:
    rl.makepyfile(test_suite=SUITE)
    if points_to == "/dev/null":
        target = Path(os.devnull)  # a character device: written in place, never replaced
    else:
        target = rl.mkdir("artifacts") / "roofline.json"
        target.write_text("old")
    (rl.path / "out.json").symlink_to(target)
    result = rl.runpytest("--roofline-json=out.json", "--roofline-mode=report")
    assert result.ret == pytest.ExitCode.OK
    assert (rl.path / "out.json").is_symlink()
    if points_to == "/dev/null":
        assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    else:
        assert json.loads(target.read_text())["schema"] == 2


def test_a_json_fifo_nobody_reads_is_an_error_at_the_end_and_stays_a_fifo(rl: pytest.Pytester) -> None:
    # made after the up-front check, which refuses a FIFO (test_gate_runs.py): the write must not hang
    made = "def test_fifo():\n    import os\n    os.mkfifo('out.json')\n"
    rl.makepyfile(test_suite=SUITE, test_aaa_fifo=made)
    result = rl.runpytest("--roofline-json=out.json", "--roofline-mode=report", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["roofline: could not write --roofline-json 'out.json': *it is a FIFO that no process is reading*"]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    assert stat.S_ISFIFO((rl.path / "out.json").stat().st_mode)


_MEASURED_AGAIN = """

import dataclasses


def pytest_roofline_device(config, spec):  # replaces the one above: "cpu" is the device measured again
    if spec == "cpu":
        return dataclasses.replace(fake_device(), bandwidth=Figure(5e10, Source.MEASURED))
    return fake_device() if spec == "auto" else None
"""


def test_a_device_whose_figures_change_during_the_run_shows_each_set_and_the_rows_it_judged(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One device key, two sets of ceilings (as when a calibration is forced between two workers'
    starts): the header and the JSON keep both, and every row names the one that judged it."""
    monkeypatch.setenv("COLUMNS", "400")  # every column, the machine cell's figures included
    pytester.makeconftest(fake_conftest(extra=_MEASURED_AGAIN))
    pytester.makepyfile(
        f"""
        import pytest

        def test_first(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32")

        @pytest.mark.fake_time(5e-3)
        def test_again(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", device="cpu")

        def test_first_again(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32")
        """
    )
    result = pytester.runpytest("--roofline-report", "--roofline-json=out.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "device: Fake Accelerator [[]fake, cpu[]]  DRAM bandwidth 100 GB/s (datasheet)",
            "  figures #1 of 2 this run (the device was measured again): judged 2 row(s)",
            "device: Fake Accelerator [[]fake, cpu[]]  DRAM bandwidth 50.0 GB/s (measured)",
            "  figures #2 of 2 this run (the device was measured again): judged 1 row(s)",
            "test_*.py::test_first *figures #1  *pass",
            "test_*.py::test_again *figures #2  *pass",
            "test_*.py::test_first_again *figures #1  *pass",
        ]
    )
    data = json.loads((pytester.path / "out.json").read_text())
    devices = {d["figures"]: d for d in data["devices"]}
    assert [(d["key"], d["bandwidth"], d["remeasured"], d["measurements"]) for d in data["devices"]] == [
        ("fake", 1e11, True, 2),
        ("fake", 5e10, True, 1),
    ]
    for m in data["measurements"]:  # the figures on the row are those of the entry it names
        assert m["bandwidth"] == devices[m["device_figures"]]["bandwidth"]
    assert [devices[m["device_figures"]]["bandwidth"] for m in data["measurements"]] == [1e11, 5e10, 1e11]


@pytest.mark.parametrize(
    ("how", "args", "interruption"),
    [
        ("raise KeyboardInterrupt", (), "KeyboardInterrupt"),
        ("assert False", ("-x",), "stopping after 1 failures"),
        ("pytest.exit('enough')", (), "enough"),
    ],
    ids=["ctrl-c", "exitfirst", "pytest.exit"],
)
def test_the_json_of_a_run_cut_short_says_so_and_keeps_what_was_measured(
    rl: pytest.Pytester, how: str, args: tuple[str, ...], interruption: str
) -> None:
    rl.makepyfile(
        f"""
        import pytest

        def test_one(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32")

        def test_two():
            {how}

        def test_three(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32")
        """
    )
    result = rl.runpytest("--roofline-json=out.json", *args, no_reraise_ctrlc=True)
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            f"roofline: the run was cut short ({interruption}): the measurements of the tests that did not "
            "finish are missing",
            "roofline: wrote 1 measurement(s) to out.json",
        ]
    )
    data = json.loads((rl.path / "out.json").read_text())
    assert (data["interrupted"], data["interruption"]) == (True, interruption)
    assert [m["nodeid"].split("::")[1] for m in data["measurements"]] == ["test_one"]


# -- junit ------------------------------------------------------------------------------------------


def test_junit_xml_carries_the_attained_fraction_and_the_floor(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        def test_two(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
            roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32", name="gemm")

        def test_plain():
            pass
        """
    )
    rl.runpytest("--junitxml=junit.xml").assert_outcomes(passed=2)
    root = ET.parse(rl.path / "junit.xml").getroot()
    cases = {case.get("name"): case for case in root.iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_two"].iter("property")}
    assert float(props["roofline_attained"]) == pytest.approx(0.8)
    assert float(props["roofline_floor_s"]) == pytest.approx(2e-3)
    assert float(props["roofline_time_s"]) == pytest.approx(2.5e-3)
    assert float(props["roofline_min_fraction"]) == 0.5
    assert props["roofline_verdict"] == "pass"
    assert float(props["roofline[gemm]_attained"]) == pytest.approx(0.8)
    assert float(props["roofline[gemm]_floor_s"]) == pytest.approx(2e-3)
    assert list(cases["test_plain"].iter("property")) == []


# -- xdist -------------------------------------------------------------------------------------------


def test_xdist_workers_measurements_reach_the_controllers_report_and_json(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        test_a="""
        import pytest

        @pytest.mark.parametrize("n", [25_000_000, 50_000_000, 75_000_000])
        def test_copy(roofline, n):
            roofline.measure(lambda: None, op="copy", n=n, dtype="fp32")
        """,
        test_b=f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_gemm_marker():
            pass

        @pytest.mark.fake_time(20e-3)
        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_slow():
            pass

        @pytest.mark.xfail(strict=True, reason="a bad variant")
        @pytest.mark.fake_time(20e-3)
        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_bad_variant():
            pass
        """,
    )
    result = rl.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--roofline-report", "--roofline-json=out.json"
    )
    result.assert_outcomes(passed=4, failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["test_b.py::test_bad_variant *MISS (xfail)"])
    result.stdout.fnmatch_lines(["*2 workers*"])
    result.stdout.fnmatch_lines(
        [
            "*= roofline report =*",
            "device: Fake Accelerator [[]fake, cpu[]]*",
            "6 measurement(s): 2 faster-than-light, 2 MISS, 2 pass; mode enforce",
            "roofline: wrote 6 measurement(s) to out.json",
        ]
    )
    for test in ("test_a.py::test_copy[[]25000000[]]", "test_a.py::test_copy[[]75000000[]]",
                 "test_b.py::test_gemm_marker", "test_b.py::test_slow"):  # fmt: skip
        result.stdout.fnmatch_lines([f"{test} *"])
    data = json.loads((rl.path / "out.json").read_text())
    assert sorted(m["nodeid"] for m in data["measurements"]) == [
        "test_a.py::test_copy[25000000]", "test_a.py::test_copy[50000000]", "test_a.py::test_copy[75000000]",
        "test_b.py::test_bad_variant", "test_b.py::test_gemm_marker", "test_b.py::test_slow",
    ]  # fmt: skip
    assert [m["nodeid"] for m in data["measurements"] if m["xfailed"]] == ["test_b.py::test_bad_variant"]
    assert [d["key"] for d in data["devices"]] == ["fake"]
    assert {m["verdict"] for m in data["measurements"]} == {"pass", "MISS", "faster-than-light"}


@pytest.mark.parametrize(
    "args", [("--roofline-json=out.json",), ("-p", "xdist", "-n", "2", "--roofline-json=out.json")]
)
def test_numpy_scalars_in_params_and_costs_survive_json_and_xdist(
    rl: pytest.Pytester, args: tuple[str, ...]
) -> None:
    # sizes often come out of numpy (np.prod(shape), a.size): they must not reach JSON or execnet as numpy
    rl.makepyfile(
        """
        import numpy as np
        import pytest

        @pytest.mark.parametrize("n", [np.int64(25_000_000)])
        def test_copy(roofline, n):
            roofline(lambda: None, op="copy", dtype=np.float32)

        def test_custom(roofline):
            roofline(lambda: None, op="custom", flops=np.prod((1000, 1000, 2000)), bytes=np.float64(2e8),
                     dtype="fp32")
        """
    )
    result = rl.runpytest_subprocess(*args) if "xdist" in args else rl.runpytest(*args)
    result.assert_outcomes(passed=2)
    data = json.loads((rl.path / "out.json").read_text())
    assert {m["nodeid"].split("::")[1]: m["flops"] for m in data["measurements"]} == {
        "test_copy[n0]": 0, "test_custom": 2e9,
    }  # fmt: skip


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize("columns", [80, 200])
def test_the_report_fits_the_terminal(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-report", "--color=no")
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if line.startswith("test "))
    end = next(i for i in range(start, len(lines)) if "skipped:" in lines[i])  # notes follow the table
    assert max(len(line) for line in lines[start:end]) <= columns
    assert lines[start].split()[:3] == ["test", "op", "and"]
    assert ("achieved" in lines[start]) is (columns == 200)  # the achieved rate, when there is room


#: a module whose test ids are longer than a narrow terminal's table has room for
LONG_IDS = f"""
import pytest

@pytest.mark.parametrize("variant", ["numpy-fused", "numpy-unfused"])
def test_bias_relu_of_a_rather_long_name(roofline, variant):
    roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
"""
LONG_MODULE = "test_kernels_in_a_module_with_a_long_name"


def test_the_report_in_a_ci_log_has_every_column_and_whole_test_ids(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS")
    rl.makepyfile(**{LONG_MODULE: LONG_IDS})
    result = rl.runpytest_subprocess("--roofline-report", "--color=no")  # its stdout a pipe: no terminal
    result.assert_outcomes(passed=2)
    rows = table(result)
    assert rows[0] == list(TABLE_HEADERS)  # floor, measured, achieved and ceiling among them
    assert [row[0] for row in rows[1:]] == [
        f"{LONG_MODULE}.py::test_bias_relu_of_a_rather_long_name[{variant}]"
        for variant in ("numpy-fused", "numpy-unfused")
    ]
    # the floor, measured, achieved and ceiling cells: what a cut row loses first
    assert all(row[5:9] == ["2000 µs", "2500 µs ± 0.0%", "80.0 GB/s", "100 GB/s"] for row in rows[1:])
    assert max(map(len, result.stdout.lines)) > 80  # a whole row, however wide


def run_in_a_terminal(path: Path, columns: int, *args: str) -> list[str]:
    """The lines ``pytest ARGS`` prints in ``path`` with its stdout a terminal ``columns`` wide (a
    pseudo-terminal) and no COLUMNS in its environment."""
    import fcntl
    import pty
    import select
    import struct
    import subprocess
    import sys
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "PYTEST_ADDOPTS")}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    process = subprocess.Popen(
        command, cwd=path, env=env, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower
    )
    os.close(follower)
    output = b""
    try:
        while select.select([leader], [], [], 120)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the run ended and closed the terminal
                break
            if not chunk:
                break
            output += chunk
    finally:
        process.kill()
        process.wait()
        os.close(leader)
    return output.decode().replace("\r\n", "\n").splitlines()


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminal on this platform")
def test_the_report_in_an_80_column_terminal_fits_it_ids_keeping_their_start_and_end(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS")
    rl.makepyfile(**{LONG_MODULE: LONG_IDS})
    lines = run_in_a_terminal(rl.path, 80, "--roofline-report", "--color=no")
    assert any("2 passed" in line for line in lines), "\n".join(lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("test ") and "verdict" in line)
    rows = lines[start : start + 4]
    assert max(map(len, rows)) <= 80, "\n".join(rows)
    assert "floor" not in rows[0]  # the columns that did not fit left out, and the report says which
    text = " ".join(line.strip() for line in lines)  # the note wraps at the terminal's width
    assert "8 of 13 columns left out to fit 80 characters: dtype, bound, intensity, floor," in text
    assert "--roofline-columns=all (or a wider COLUMNS) shows them" in text
    for row, variant in zip(rows[2:], ("numpy-fused", "numpy-unfused"), strict=True):
        test = row.split("  ")[0]
        assert "…" in test
        assert test.startswith("test_kernels_in")
        assert test.endswith(f"{variant}]")


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="no pseudo-terminal on this platform")
def test_the_table_fits_columns_where_set_else_a_terminal_and_is_whole_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import fcntl
    import io
    import pty
    import struct
    import sys
    import termios

    from pytest_roofline.plugin.summary import table_width

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 97, 0, 0))
    with open(follower, "w") as terminal, open(tmp_path / "log", "w") as log:
        monkeypatch.setattr(sys, "__stdout__", terminal)
        monkeypatch.setenv("COLUMNS", "123")
        assert table_width() == 123  # set by the user: it wins, as in pytest
        monkeypatch.delenv("COLUMNS")
        assert table_width() == 97
        for stdout in (log, io.StringIO(), None):  # a file, no file descriptor at all, no stdout
            monkeypatch.setattr(sys, "__stdout__", stdout)
            assert table_width() is None
    os.close(leader)


def test_the_columns_option_chooses_them(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-report", "--roofline-columns=test,achieved,verdict")
    result.stdout.fnmatch_lines(
        ["test *achieved *verdict", "---*", "test_suite.py::test_copy *80.0 GB/s *pass"]
    )
    bad = rl.runpytest("--roofline-columns=test,acheived")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--roofline-columns*unknown column 'acheived' (did you mean 'achieved'?)*"])
