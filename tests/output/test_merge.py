"""A sharded run joined into one (issue 29, part II): ``roofline merge``, shards saved into one
baseline, and GPUs of one model that share a baseline.

The fake device and scripted backend of ``conftest.py``: 2.5 ms a call attains 80% of a 2 ms floor.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import COPY, GEMM

OPS = f"""
import pytest

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
@pytest.mark.fake_time({{slow}})
def test_alpha(roofline):
    roofline(lambda: None)

@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", min_fraction=0.3)
def test_beta(roofline, size):
    roofline(lambda: None, name=size)

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3, device="h100-sxm")
def test_gamma(roofline):
    roofline(lambda: None)
"""

MORE = f"""
import pytest

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
@pytest.mark.fake_time({{time}})
def test_delta(roofline):
    roofline(lambda: None)

@pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", min_fraction=0.3)
def test_epsilon(roofline):
    roofline(lambda: None)
"""

#: three disjoint -k selections that cover the suite
SHARDS = ("alpha or gamma", "beta", "delta or epsilon")
#: the timings: what differs between two runs of the same code (how many samples, and how long they took)
VOLATILE = ("wall_s", "stats", "samples_s", "stop_reason", "contention", "threads", "thread_wait_share")


def suite(rl: pytest.Pytester, *, slow: float = 2.5e-3, time: float = 2.5e-3) -> None:
    rl.makepyfile(test_sharded_ops=OPS.format(slow=slow), test_sharded_more=MORE.format(time=time))


def records(path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every row of a report, by test, name and device, its timings aside."""
    rows = json.loads(path.read_text())["measurements"]
    return {
        (r["nodeid"], r["name"], r["device"] or ""): {k: v for k, v in r.items() if k not in VOLATILE}
        for r in rows
    }


def store(path: Path) -> dict[tuple[str, str], tuple[float, list[float]]]:
    """A baseline as a comparison reads it: each test's figure and history."""
    rows = json.loads(path.read_text())["measurements"]
    return {
        (r["nodeid"], r["name"]): (r["attained"], r.get("history")) for r in rows if r["verdict"] != "skipped"
    }


def roofline(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from pytest_roofline import cli

    capsys.readouterr()  # what the pytester runs before printed
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def run_shards(rl: pytest.Pytester, *extra: str, prefix: str = "shard") -> list[str]:
    paths = []
    for index, selection in enumerate(SHARDS):
        path = str(rl.path / f"{prefix}{index}.json")
        rl.runpytest("-k", selection, f"--roofline-json={path}", *extra)
        paths.append(path)
    return paths


# -- the round trip ------------------------------------------------------------------------------------


def test_three_shards_merged_hold_the_records_of_one_serial_run(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(rl)
    rl.runpytest("--roofline-json=serial.json").assert_outcomes(passed=5, skipped=1)
    shards = run_shards(rl)
    status, out, err = roofline(capsys, "merge", *shards, "-o", str(rl.path / "merged.json"))
    assert (status, err) == (0, "")
    assert out == f"roofline: merged 3 shard(s), 5 measurement(s), into {rl.path / 'merged.json'}\n"
    serial, merged = records(rl.path / "serial.json"), records(rl.path / "merged.json")
    assert len(serial) == 6  # five measurements and the test skipped for its device
    assert merged == serial
    data = json.loads((rl.path / "merged.json").read_text())
    assert [s["path"] for s in data["shards"]] == shards
    assert data["interrupted"] is False
    assert {d["key"] for d in data["devices"]} == {"fake"}


def test_the_merged_run_compares_with_a_baseline_as_the_serial_run_does(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(rl, time=4e-3)
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=5, skipped=1)
    suite(rl, slow=5.5e-3)  # test_alpha regressed; test_delta improved
    rl.runpytest("--roofline-json=serial.json")
    run_shards(rl)
    assert roofline(capsys, "merge", *(f"shard{i}.json" for i in range(3)), "-o", "merged.json")[0] == 0
    verdicts = []
    for run in ("serial.json", "merged.json"):
        status, out, _ = roofline(capsys, "compare", "base.json", run)
        table = [line.split()[0] + " " + line.split()[-1] for line in out.splitlines() if "::" in line[:40]]
        verdicts.append((status, sorted(table), out.splitlines()[-2:]))  # the totals, the regression
    assert verdicts[0] == verdicts[1]
    status, table, _ = verdicts[0]
    assert status == 1
    assert "test_sharded_ops.py::test_alpha regression" in table
    assert "test_sharded_more.py::test_delta improvement" in table


def test_shards_saved_one_after_another_or_merged_first_leave_the_store_one_full_run_does(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(rl)
    for _ in range(2):  # a new baseline, then one that keeps runs
        rl.runpytest("--roofline-save=full.json").assert_outcomes(passed=5, skipped=1)
        run_shards(rl, "--roofline-save=sequential.json")
        shards = [f"shard{i}.json" for i in range(3)]
        assert roofline(capsys, "merge", *shards, "-o", "merged.json", "--save", "merged-first.json")[0] == 0
    full = store(rl.path / "full.json")
    assert len(full) == 5
    assert all(len(history) == 1 for _, history in full.values())
    assert store(rl.path / "sequential.json") == full
    assert store(rl.path / "merged-first.json") == full
    for path in ("full.json", "sequential.json", "merged-first.json"):
        data = json.loads((rl.path / path).read_text())
        assert data["interrupted"] is False
        skipped = [r["nodeid"] for r in data["measurements"] if r["verdict"] == "skipped"]
        assert skipped == ["test_sharded_ops.py::test_gamma"]  # once, however often it was skipped


def test_merge_saves_as_a_run_does_and_says_so(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(rl)
    rl.runpytest("--roofline-save=base.json")
    suite(rl, slow=5.5e-3)
    shards = run_shards(rl)
    status, out, _ = roofline(capsys, "merge", *shards, "-o", "merged.json", "--save", "base.json")
    assert status == 0
    assert (
        "roofline: saved base.json: 4 updated, 0 added, 0 kept, 1 refused; refused, since they regressed"
        " (their baseline records stay; --accept saves them): test_sharded_ops.py::test_alpha"
    ) in out.splitlines()
    status, out, _ = roofline(
        capsys, "merge", *shards, "-o", "merged.json", "--save", "base.json", "--accept"
    )
    assert "regressed, saved as --accept asked: test_sharded_ops.py::test_alpha" in out
    assert store(rl.path / "base.json")[("test_sharded_ops.py::test_alpha", "")][0] == pytest.approx(2 / 5.5)


def test_a_shard_cut_short_makes_the_merged_run_cut_short(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(rl)
    rl.makepyfile(test_zz="def test_broken():\n    assert False\n")
    rl.runpytest("-k", "alpha or broken or delta", "-x", "-p", "no:randomly", "--roofline-json=cut.json")
    rl.runpytest("-k", "beta", "--roofline-json=whole.json")
    status, out, _ = roofline(capsys, "merge", "whole.json", "cut.json", "-o", "merged.json")
    assert status == 0
    data = json.loads((rl.path / "merged.json").read_text())
    assert data["interrupted"] is True
    assert data["interruption"].startswith("cut.json: ")
    assert [s["interrupted"] for s in data["shards"]] == [False, True]
    assert "a shard was cut short (cut.json: " in out


def test_the_same_test_on_two_devices_is_kept_apart(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(rl)
    rl.runpytest("-k", "alpha", "--roofline-json=fake.json")
    other = json.loads((rl.path / "fake.json").read_text())
    for r in other["measurements"]:
        r.update(device="h100-sxm", device_name="NVIDIA H100 SXM")
    (rl.path / "h100.json").write_text(json.dumps(other))
    assert roofline(capsys, "merge", "fake.json", "h100.json", "-o", "merged.json")[0] == 0
    assert sorted(k[2] for k in records(rl.path / "merged.json")) == ["fake", "h100-sxm"]


def test_the_same_file_twice_is_no_conflict(rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    suite(rl)
    rl.runpytest("-k", "beta", "--roofline-json=one.json")
    assert roofline(capsys, "merge", "one.json", "one.json", "-o", "merged.json")[0] == 0
    assert records(rl.path / "merged.json") == records(rl.path / "one.json")


# -- what merge refuses: one line, exit 2 ---------------------------------------------------------------


def test_conflicting_shards_a_missing_file_and_mixed_schemas_are_one_line_and_exit_2(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(rl.path)
    suite(rl)
    rl.runpytest("-k", "alpha or beta", "--roofline-json=a.json")
    suite(rl, slow=3e-3)
    rl.runpytest("-k", "alpha", "--roofline-json=b.json")
    old = json.loads((rl.path / "a.json").read_text())
    old["schema"] = 1
    (rl.path / "old.json").write_text(json.dumps(old))
    cases = {
        (
            "a.json",
            "b.json",
        ): "roofline: error: test_sharded_ops.py::test_alpha is measured on Fake Accelerator in two"
        " shards, a.json and b.json: each test belongs to one shard (are their selections disjoint?)",
        ("a.json", "missing.json"): "roofline: error: shard missing.json: no such file",
        ("b.json", "old.json"): "roofline: error: shard old.json: schema 1 is not the one this version"
        " reads (2); is it a pytest-roofline --roofline-json file?",
        ("a.json", "test_sharded_ops.py"): "roofline: error: shard test_sharded_ops.py: not JSON*",
    }
    for shards, message in cases.items():
        status, out, err = roofline(capsys, "merge", *shards, "-o", "merged.json")
        assert (status, out) == (2, "")
        assert err.count("\n") == 1
        assert err.rstrip("\n").startswith(message.rstrip("*"))
        assert not (rl.path / "merged.json").exists()  # written whole or not at all


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["a.json", "-o", "a.json"], "-o a.json is also shard a.json: give each file a path of its own"),
        (["a.json", "-o", "nowhere/m.json"], "-o nowhere/m.json: cannot write it: directory"),
        (["a.json", "-o", "m.json", "--accept"], "--accept and --threshold judge what --save saves"),
        (["a.json", "-o", "m.json", "--save", "m.json"], "--save m.json is also -o: give each file"),
        (["a.json", "-o", "m.json", "--save", "a.json"], "--save a.json is also shard a.json"),
        (["-o", "m.json"], "the following arguments are required: SHARD.json"),
    ],
)
def test_bad_merge_command_lines_are_one_line_and_exit_2(
    rl: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(rl.path)
    (rl.path / "a.json").write_text(json.dumps({"schema": 2, "measurements": []}))
    status, out, err = roofline(capsys, "merge", *argv)
    assert (status, out) == (2, "")
    assert message in err
    assert err.count("\n") == 1


def test_a_baseline_merge_cannot_read_is_refused_before_anything_is_written(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(rl.path)
    suite(rl)
    rl.runpytest("-k", "beta", "--roofline-json=a.json")
    (rl.path / "base.json").write_text("{oops")
    status, _, err = roofline(capsys, "merge", "a.json", "-o", "merged.json", "--save", "base.json")
    assert status == 2
    assert "baseline base.json: not JSON" in err
    assert not (rl.path / "merged.json").exists()
    assert (rl.path / "base.json").read_text() == "{oops"


# -- the merged file reads as one run --------------------------------------------------------------------


def test_the_markdown_summary_reads_the_merged_run(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suite(rl)
    rl.runpytest("--roofline-save=base.json")
    shards = run_shards(rl)
    summary = rl.path / "summary.md"
    assert roofline(capsys, "merge", *shards, "-o", "merged.json", "--markdown", str(summary))[0] == 0
    text = summary.read_text()
    assert text.startswith("## pytest-roofline\n")
    assert len([line for line in text.splitlines() if line.startswith("| `")]) == 6
    assert roofline(capsys, "compare", "base.json", "merged.json", "--markdown", str(summary))[0] == 0
    compared = summary.read_text()[len(text) :]
    assert "| vs baseline |" in compared
    assert "+0% (80.0% -> 80.0%)" in compared


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="the plot extra is not installed")
def test_the_plot_reads_the_merged_run(rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    suite(rl)
    shards = run_shards(rl)
    assert roofline(capsys, "merge", *shards, "-o", "merged.json")[0] == 0
    assert roofline(capsys, "plot", "merged.json", "-o", "plot.svg")[0] == 0
    assert all(name in (rl.path / "plot.svg").read_text() for name in ("test_beta", "test_epsilon"))


def test_runs_of_identical_code_compared_with_each_other_show_no_regression(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs of one code, each a little faster or slower as runs are (within +-6%), some serial and
    some sharded and merged, each saved into one baseline: no run is a regression of any other, nor
    of the baseline they build."""
    jitter = (1.00, 1.06, 0.95, 1.03, 0.97, 1.05)
    runs = []
    for index, factor in enumerate(jitter):
        suite(rl, slow=2.5e-3 * factor, time=2.5e-3 / factor)
        run = f"run{index}.json"
        if index % 2:
            shards = run_shards(rl, prefix=f"r{index}-")
            assert roofline(capsys, "merge", *shards, "-o", run, "--save", "base.json")[0] == 0
        else:
            result = rl.runpytest(f"--roofline-json={run}", "--roofline-compare=base.json" if index else "-q")
            result.assert_outcomes(passed=5, skipped=1)
            rl.runpytest("--roofline-save=base.json")
        runs.append(run)
    for old in runs:
        for new in runs:
            status, out, _ = roofline(capsys, "compare", old, new)
            assert status == 0, out
            assert "regression" not in out.split("verdict", 1)[1]
    status, out, _ = roofline(capsys, "compare", "base.json", runs[-1])
    assert status == 0
    assert "5 unchanged" in out


# -- GPUs of one model share a baseline ---------------------------------------------------------------


def gpu_record(
    nodeid: str, attained: float, index: int, device: str = "h100-sxm", **extra: Any
) -> dict[str, Any]:
    name = {"h100-sxm": "NVIDIA H100 SXM", "a100-sxm": "NVIDIA A100 SXM"}[device]
    return {
        "nodeid": nodeid, "name": "", "attained": attained, "attained_ci_rel": 0.02,
        "time_s": 1e-3 / attained, "device": device, "device_name": name, "device_index": index,
        "verdict": "pass", "op": "copy", "label": "copy", **extra,
    }  # fmt: skip


def gpu_report(*rows: dict[str, Any]) -> str:
    return json.dumps({"schema": 2, "environment": {}, "devices": [], "measurements": list(rows)})


def test_a_record_from_gpu_3_compares_with_gpu_0s_of_the_same_model_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "base.json").write_text(
        gpu_report(gpu_record("t.py::a", 0.5, 0), gpu_record("t.py::b", 0.5, 0))
    )
    (tmp_path / "run.json").write_text(
        gpu_report(gpu_record("t.py::a", 0.25, 3), gpu_record("t.py::b", 0.5, 3))
    )
    status, out, _ = roofline(capsys, "compare", str(tmp_path / "base.json"), str(tmp_path / "run.json"))
    assert status == 1  # the regression is found across the two slots
    assert (
        "2 measurement(s) on GPU 3 compared with the baseline's from GPU 0: the same model (NVIDIA H100 SXM)"
        in out
    )
    (tmp_path / "a100.json").write_text(gpu_report(gpu_record("t.py::a", 0.25, 3, "a100-sxm")))
    status, out, _ = roofline(capsys, "compare", str(tmp_path / "base.json"), str(tmp_path / "a100.json"))
    assert status == 0  # another model: not compared, as before
    assert "other device" in out
    assert "compared with the baseline's from GPU" not in out


def test_a_gpu_3_record_continues_the_history_gpu_0_saved(tmp_path: Path) -> None:
    from pytest_roofline.output.records import MeasurementRecord
    from pytest_roofline.output.store import merge_run, read_store

    (tmp_path / "base.json").write_text(gpu_report(gpu_record("t.py::a", 0.5, 0, history=[0.5])))
    run = MeasurementRecord.from_json(gpu_record("t.py::a", 0.49, 3))
    saved = merge_run(read_store(tmp_path / "base.json"), [run], [], path="base.json", threshold=0.1)
    assert (saved.updated, saved.added) == (1, 0)
    (record,) = saved.records
    assert isinstance(record, MeasurementRecord)
    assert (record.device_index, record.history) == (3, (0.5, 0.5))
