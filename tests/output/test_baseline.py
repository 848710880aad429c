"""Baselines read and checked, and measurements compared with them (attained fractions, with noise)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from pytest_roofline.output.baseline import Baseline, BaselineError, load_baseline
from pytest_roofline.output.comparison import (
    FALSE_ALARMS,
    RUN_NOISE,
    Change,
    RegressionRule,
    confidence_z,
    disturbed,
    parse_threshold,
    run_noise,
    summary_line,
)
from pytest_roofline.output.records import MeasurementRecord


def record(nodeid: str = "t.py::test_a", **fields: Any) -> dict[str, Any]:
    base = {
        "nodeid": nodeid, "name": "", "attained": 0.5, "attained_ci_rel": 0.02, "time_s": 1e-3,
        "device": "cpu", "device_name": "AMD EPYC", "verdict": "pass", "op": "copy", "label": "copy n=1",
    }  # fmt: skip
    return {**base, **fields}


def report(*records: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"schema": 2, "environment": {"created": "2026-11-20T10:00:00+00:00"}, "devices": [],
            "measurements": list(records), **top}  # fmt: skip


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "baseline.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


# -- reading ------------------------------------------------------------------------------------------


def test_a_json_report_is_a_baseline(tmp_path: Path) -> None:
    path = write(
        tmp_path, report(record(), record("t.py::test_b", name="big"), record("t.py::s", verdict="skipped"))
    )
    b = load_baseline(path)
    assert set(b.records) == {("t.py::test_a", ""), ("t.py::test_b", "big")}  # a skipped row measured nothing
    assert b.records[("t.py::test_b", "big")].test == "t.py::test_b[big]"
    assert b.records[("t.py::test_a", "")].attained_ci_rel == pytest.approx(0.02)
    assert b.describe() == f"{path} (AMD EPYC; 2026-11-20)"


@pytest.mark.parametrize(
    "field",
    [{"samples_s": "abc"}, {"params": 5}, {"measurements": "many"}, {"stats": {"n": "x"}}],
    ids=["samples", "params", "measurements", "stats"],
)
def test_a_field_that_cannot_be_read_back_is_a_clear_error(tmp_path: Path, field: dict[str, Any]) -> None:
    path = write(tmp_path, report(record(**field)))
    with pytest.raises(BaselineError, match=r"measurement 0 \(t.py::test_a\): cannot be read back"):
        load_baseline(path)


def test_a_baseline_without_intervals_compares_as_exact(tmp_path: Path) -> None:
    rec = record()
    del rec["attained_ci_rel"]
    assert load_baseline(write(tmp_path, report(rec))).records[("t.py::test_a", "")].attained_ci_rel == 0.0


def test_a_test_measured_twice_on_one_device_is_refused_and_on_two_devices_kept_apart(tmp_path: Path) -> None:
    with pytest.raises(
        BaselineError, match=r"measurements 0 and 1: t.py::test_a is measured twice on AMD EPYC"
    ):
        load_baseline(write(tmp_path, report(record(attained=0.1), record(attained=0.4))))
    b = load_baseline(write(tmp_path, report(record(attained=0.1), record(attained=0.4, device_name="Xeon"))))
    assert sorted(r.attained for r in b.stored.values()) == [0.1, 0.4]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON (Expecting property name enclosed in double quotes, line 1)"),
        ([1, 2], "not a pytest-roofline JSON report (a list at the top)"),
        ({"schema": 7, "measurements": []}, "schema 7 is not the one this version reads (2)"),
        ({"measurements": []}, "schema None is not the one this version reads"),
        ({"schema": 2, "measurements": {}}, "'measurements' must be a list; got object"),
        ({"schema": 2, "measurements": ["x"]}, "measurement 0 is a string, not an object"),
        (
            report({k: v for k, v in record().items() if k != "attained"}),
            "measurement 0 (t.py::test_a): no 'attained' field",
        ),
        (
            report(record(), record(time_s="1 ms")),
            "measurement 1 (t.py::test_a): 'time_s' is '1 ms', not a number",
        ),
        (report(record(attained=True)), "'attained' is True, not a number"),
        (report(record(attained=-0.5)), "'attained' is -0.5; it must be a positive number"),
        (report(record(nodeid=3)), "measurement 0: 'nodeid' is 3, not a string"),
    ],
    ids=[
        "not-json",
        "list",
        "schema",
        "no-schema",
        "measurements-object",
        "record-string",
        "missing-field",
        "wrong-type",
        "bool",
        "negative",
        "nodeid-int",
    ],
)
def test_every_bad_baseline_names_the_file_and_the_fault(
    tmp_path: Path, content: object, message: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert str(info.value).startswith(f"baseline {path}: ")
    assert message in str(info.value)


def test_a_missing_or_unreadable_baseline_is_named(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"baseline .*nowhere\.json: no such file"):
        load_baseline(tmp_path / "nowhere.json")
    with pytest.raises(BaselineError, match="a directory, not a JSON file"):
        load_baseline(tmp_path)
    (tmp_path / "latin1.json").write_bytes(b"\xff\xfe")
    with pytest.raises(BaselineError, match="cannot be read"):
        load_baseline(tmp_path / "latin1.json")


# -- comparing ----------------------------------------------------------------------------------------


def as_record(
    nodeid: str,
    name: str,
    attained: float,
    ci_rel: float,
    time_s: float,
    device: str,
    device_name: str,
    verdict: str,
    *,
    disturbed: bool = False,
) -> MeasurementRecord:
    """A measured record of these figures (``disturbed``: measured under busy contention)."""
    return MeasurementRecord.from_json({
        "nodeid": nodeid, "name": name, "attained": attained, "attained_ci_rel": ci_rel, "time_s": time_s,
        "device": device, "device_name": device_name, "verdict": verdict,
        "contention": {"level": "busy"} if disturbed else None,
    })  # fmt: skip


def measured(
    attained: float, ci_rel: float = 0.02, time_s: float = 1e-3, device: str = "cpu"
) -> MeasurementRecord:
    return MeasurementRecord.from_json(
        record(attained=attained, attained_ci_rel=ci_rel, time_s=time_s, device=device)
    )


@pytest.mark.parametrize(
    ("old", "new", "change"),
    [
        (measured(0.50), measured(0.25, time_s=2e-3), Change.REGRESSION),  # 2x slower
        (measured(0.50), measured(0.47), Change.UNCHANGED),  # -6%: under the 10% threshold
        (measured(0.50, 0.15), measured(0.42, 0.15), Change.INCONCLUSIVE),  # -16%, inside the noise
        (measured(0.50), measured(0.75), Change.IMPROVEMENT),
        (measured(0.50, 0.3), measured(0.60, 0.3), Change.INCONCLUSIVE),  # +20%, inside the noise
    ],
    ids=["2x-slower", "small-drop", "noisy-drop", "faster", "noisy-gain"],
)
def test_a_change_is_judged_on_attained_and_both_intervals(
    old: MeasurementRecord, new: MeasurementRecord, change: Change
) -> None:
    assert RegressionRule().compare(old, new).change is change


def test_the_threshold_is_the_users() -> None:
    assert RegressionRule().compare(measured(0.50), measured(0.35)).change is Change.REGRESSION  # -30%
    assert RegressionRule(threshold=0.4).compare(measured(0.50), measured(0.35)).change is Change.UNCHANGED


def test_the_regression_message_has_both_fractions_both_times_the_change_why_and_the_baseline() -> None:
    c = RegressionRule().compare(
        measured(0.50), measured(0.25, time_s=2e-3), source="base.json (AMD EPYC; 2026-11-20)"
    )
    assert c.message() == (
        "t.py::test_a: attained 25.0% of speed of light, 50.0% in the baseline: -50% (95% interval -60% to "
        "-38%); beyond the 10% regression threshold and beyond the 17% that run-to-run noise explains "
        "(±8% a run, assumed: the reference CI machine's, until the baseline keeps runs of its own); "
        "time 2000 µs, was 1000 µs. "
        "Baseline: base.json (AMD EPYC; 2026-11-20)."
    )
    assert c.summary() == "-50% (50.0% -> 25.0%)"


def with_history(attained: float, *history: float) -> MeasurementRecord:
    return MeasurementRecord.from_json(record(attained=attained, attained_ci_rel=0.02, history=list(history)))


def test_a_drop_within_a_single_runs_noise_is_inconclusive_never_a_regression() -> None:
    """Identical code moved -10% to -26% between runs on a shared VM (issue 22): a 1-run baseline with a
    tight interval did not cover it."""
    c = RegressionRule().compare(measured(0.50, 0.01), measured(0.42, 0.01))  # -16%, both intervals ±1%
    assert c.change is Change.INCONCLUSIVE
    assert c.ci_rel > 0.2  # the run-to-run noise is in the ratio's interval


def test_the_baseline_is_the_median_of_its_runs_so_one_slow_run_moves_it_little() -> None:
    old = with_history(0.30, 0.50, 0.51, 0.49, 0.50)  # the last save ran slow
    assert RegressionRule().compare(old, measured(0.49)).ratio == pytest.approx(0.49 / 0.50)
    assert RegressionRule().compare(old, measured(0.49)).change is Change.UNCHANGED


def test_a_history_that_agrees_catches_smaller_drops_than_one_run() -> None:
    tight = with_history(0.50, 0.50, 0.505, 0.495, 0.50, 0.502, 0.498, 0.50)
    assert (
        RegressionRule().compare(measured(0.50), measured(0.425)).change is Change.INCONCLUSIVE
    )  # -15%: one run
    assert RegressionRule().compare(tight, measured(0.425)).change is Change.REGRESSION
    assert "learned from 8 baseline runs" in RegressionRule().compare(tight, measured(0.425)).message()


def test_a_history_that_spreads_widens_the_noise() -> None:
    wide = with_history(0.50, 0.30, 0.70, 0.40, 0.60, 0.35, 0.65, 0.50)
    assert run_noise(wide.runs) > 2 * RUN_NOISE
    assert (
        RegressionRule().compare(wide, measured(0.35)).change is Change.INCONCLUSIVE
    )  # -30%, as the history has moved
    assert RegressionRule().compare(measured(0.50), measured(0.35)).change is Change.REGRESSION


def test_runs_that_agree_lower_the_noise_only_as_far_as_their_number_allows() -> None:
    assert run_noise([0.5]) == RUN_NOISE  # nothing learned yet
    assert run_noise([0.5] * 8) == pytest.approx(RUN_NOISE * (4 / 11) ** 0.5)  # the prior weighs 4 runs


def test_a_larger_suite_holds_each_test_to_a_higher_confidence() -> None:
    """The suite's false alarms stay at FALSE_ALARMS of runs however many tests it compares."""
    assert confidence_z(100) > confidence_z(6) > confidence_z(1)
    assert NormalDist().cdf(-confidence_z(6)) * 6 == pytest.approx(FALSE_ALARMS)
    drop = (measured(0.50), measured(0.33))  # -34%
    assert RegressionRule().compare(*drop, tests=1).change is Change.REGRESSION
    assert RegressionRule().compare(*drop, tests=10_000).change is Change.INCONCLUSIVE


def test_another_devices_baseline_is_compared_only_when_asked() -> None:
    old, new = measured(0.50, device="h100-sxm"), measured(0.25)
    assert RegressionRule().compare(old, new).change is Change.OTHER_DEVICE
    assert (
        RegressionRule().compare(old, new).summary()
        == "not compared: baseline measured on AMD EPYC (50.0% -> 25.0%)"
    )
    assert RegressionRule(across_devices=True).compare(old, new).change is Change.REGRESSION


def test_new_and_vanished_tests_are_listed() -> None:
    kept, gone = measured(0.5), MeasurementRecord.from_json(record("t.py::test_gone"))
    baseline = Baseline("b.json", None, {"cpu": "AMD EPYC"}, {kept.key: kept, gone.key: gone})
    fresh = MeasurementRecord.from_json(record("t.py::test_new"))
    result = RegressionRule().compare_all(baseline, [measured(0.5), fresh])
    assert [(c.test, c.change) for c in result] == [
        ("t.py::test_a", Change.UNCHANGED),
        ("t.py::test_new", Change.NEW),
        ("t.py::test_gone", Change.VANISHED),
    ]
    assert summary_line(result) == "compared with the baseline: 1 new, 1 vanished, 1 unchanged"
    assert result[1].summary() == "new: no baseline record"
    assert result[2].summary() == "vanished: in the baseline, not measured now"


# -- roofline compare OLD NEW -------------------------------------------------------------------------


def compare_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from pytest_roofline import cli

    status = cli.main(["compare", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def two_reports(tmp_path: Path, new_attained: float, **new: Any) -> tuple[str, str]:
    old_path, new_path = tmp_path / "old.json", tmp_path / "new.json"
    old_path.write_text(json.dumps(report(record(), record("t.py::test_b"))))
    new_path.write_text(json.dumps(report(record(attained=new_attained, **new), record("t.py::test_b"))))
    return str(old_path), str(new_path)


def test_compare_reads_each_file_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``--markdown`` the new run's rows are wanted too: they come from the one read of it."""
    old, new = two_reports(tmp_path, 0.5)
    reads: list[str] = []
    read_text = Path.read_text

    def counted(path: Path, *args: object, **kwargs: object) -> str:
        if path.suffix == ".json":
            reads.append(path.name)
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    status, _, err = compare_cli(capsys, old, new, "--markdown", str(tmp_path / "summary.md"))
    assert (status, err) == (0, "")
    assert sorted(reads) == ["new.json", "old.json"]
    assert "| vs baseline |" in (tmp_path / "summary.md").read_text()


def test_compare_exits_1_on_a_regression_and_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = compare_cli(capsys, *two_reports(tmp_path, 0.25, time_s=2e-3))
    assert (status, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith("baseline: ")
    assert lines[0].endswith("old.json (AMD EPYC; 2026-11-20)")
    header = next(i for i, line in enumerate(lines) if line.startswith("test "))
    assert lines[header].split() == ["test", "op", "baseline", "now", "change", "noise", "verdict"]
    assert lines[header + 2].split() == [
        "t.py::test_a",
        "copy",
        "n=1",
        "50.0%",
        "25.0%",
        "-50%",
        "±25%",
        "regression",
    ]
    assert lines[header + 3].split()[-1] == "unchanged"  # regressions first
    assert "compared with the baseline: 1 regression, 1 unchanged" in lines
    assert lines[-1].startswith("t.py::test_a: attained 25.0% of speed of light, 50.0% in the baseline: -50%")


def test_compare_exits_0_without_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = compare_cli(capsys, *two_reports(tmp_path, 0.48))
    assert status == 0
    assert "compared with the baseline: 2 unchanged" in out.splitlines()


def test_compare_refuses_another_device_unless_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = two_reports(tmp_path, 0.25, device="other-cpu")
    status, out, _ = compare_cli(capsys, old, new)
    assert status == 0
    assert "--across-devices compares them" in out
    assert compare_cli(capsys, old, new, "--across-devices")[0] == 1


@pytest.mark.parametrize(("threshold", "status"), [("60%", 0), ("0.4", 1)])
def test_compare_takes_the_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], threshold: str, status: int
) -> None:
    assert compare_cli(capsys, *two_reports(tmp_path, 0.25), "--threshold", threshold)[0] == status


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.json", "missing.json"], "roofline: error: baseline missing.json: no such file"),
        (
            ["a.json", "b.json", "--threshold", "150%"],
            "expected a drop such as 10% or 0.1, in (0, 1); got '150%'",
        ),
        (["a.json"], "the following arguments are required: new"),
    ],
    ids=["missing-file", "bad-threshold", "one-file"],
)
def test_compare_exits_2_on_bad_input(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(report(record())))
    status, out, err = compare_cli(capsys, *argv)
    assert (status, out) == (2, "")
    assert message in err


def test_compare_refuses_a_baseline_cut_short_unless_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(
        json.dumps(report(record(), interrupted=True, interruption="stopped after 1 failure (-x)"))
    )
    new.write_text(json.dumps(report(record())))
    status, out, err = compare_cli(capsys, str(old), str(new))
    assert (status, out) == (2, "")
    assert err == (
        f"roofline: error: baseline {old}: saved from a run that was cut short (stopped after 1 failure"
        " (-x)), so the tests it did not reach would go unchecked; save a complete run, or pass"
        " --interrupted to compare with it anyway\n"
    )
    assert compare_cli(capsys, str(old), str(new), "--interrupted")[0] == 0


def test_a_baseline_history_that_is_not_a_list_of_positive_numbers_is_named(tmp_path: Path) -> None:
    for bad in ("0.5", [0.5, -1], [0.5, True], [10**400]):
        with pytest.raises(
            BaselineError, match=r"measurement 0 \(t.py::test_a\): 'history' is .*, not a list"
        ):
            load_baseline(write(tmp_path, report(record(history=bad))))


def test_a_run_noisier_than_the_run_to_run_noise_counts_its_own_interval() -> None:
    steady, noisy = measured(0.50, 0.02), measured(0.35, 0.60)  # -30%, the new run itself ±60%
    assert RegressionRule().compare(steady, measured(0.35, 0.02)).change is Change.REGRESSION
    assert RegressionRule().compare(steady, noisy).change is Change.INCONCLUSIVE


# -- what a comparison reads from a record ---------------------------------------------------------


def test_a_threshold_reads_the_same_with_spaces_either_side() -> None:
    assert parse_threshold("10% ") == parse_threshold(" 10%") == parse_threshold("10%") == pytest.approx(0.1)


def test_a_drop_measured_under_contention_is_inconclusive_never_a_regression() -> None:
    old = as_record("t.py::test_mm", "", 0.8, 0.01, 1e-3, "cpu", "CPU", "pass")
    busy = as_record("t.py::test_mm", "", 0.02, 0.01, 4e-2, "cpu", "CPU", "pass", disturbed=True)
    quiet = as_record("t.py::test_mm", "", 0.02, 0.01, 4e-2, "cpu", "CPU", "MISS")
    assert (
        RegressionRule().compare(old, busy).change is Change.INCONCLUSIVE
    )  # beside a busy neighbour: -98%, not confirmed
    assert RegressionRule().compare(old, quiet).change is Change.REGRESSION
    disturbed_old = as_record("t.py::test_mm", "", 0.8, 0.01, 1e-3, "cpu", "CPU", "pass", disturbed=True)
    assert (
        RegressionRule().compare(disturbed_old, quiet).change is Change.INCONCLUSIVE
    )  # the baseline's figure is the load's


def test_a_baseline_from_another_cpu_model_is_another_device() -> None:
    old = as_record("t.py::test_add", "", 0.8, 0.01, 1e-3, "cpu", "AMD EPYC 7J13", "pass")
    other = as_record("t.py::test_add", "", 0.4, 0.01, 2e-3, "cpu", "Intel(R) Xeon(R) Processor", "pass")
    same = as_record("t.py::test_add", "", 0.4, 0.01, 2e-3, "cpu", "AMD EPYC 7J13", "pass")
    assert RegressionRule().compare(old, other).change is Change.OTHER_DEVICE
    assert RegressionRule(across_devices=True).compare(old, other).change is Change.REGRESSION
    assert RegressionRule().compare(old, same).change is Change.REGRESSION


@pytest.mark.parametrize(
    "disturbance",
    [{"contention": {"level": "heavy"}}, {"thread_wait_share": 0.5}, {"verdict": "inconclusive"}],
)
def test_a_record_the_load_could_have_slowed_is_disturbed(disturbance: dict[str, object]) -> None:
    record = {"nodeid": "t.py::t", "name": "", "attained": 0.5, "time_s": 1e-3, "device": "cpu",
              "verdict": "pass", "contention": {"level": "quiet"}, "thread_wait_share": 0.01}  # fmt: skip
    assert not disturbed(MeasurementRecord.from_json(record))
    assert disturbed(MeasurementRecord.from_json({**record, **disturbance}))
