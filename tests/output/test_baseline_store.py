"""A baseline is a store, and a save merges into it (issue 29, part I): each case a red team found, with
the test that failed before the fix.

The fake device and scripted backend of ``conftest.py``: 2.5 ms a call attains 80% of a 2 ms floor.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import COPY

KERNEL = """
@pytest.mark.speed_of_light("copy", {copy}, dtype="fp32", min_fraction=0.3)
@pytest.mark.fake_time({time})
def test_{name}(roofline):
    roofline(lambda: None)
"""


def kernels(*names: str, slow: float = 2.5e-3) -> str:
    """A test file of marked tests; ``test_slow`` takes ``slow`` seconds a call, the others 2.5 ms."""
    return "import pytest\n" + "".join(
        KERNEL.format(copy=COPY, name=name, time=slow if name == "slow" else 2.5e-3) for name in names
    )


FIVE = ("plain", "slow", "third", "fourth", "fifth")


def rows(path: Path) -> dict[str, dict[str, Any]]:
    """The measured records of a JSON file, by test function name (and device where two share one)."""
    data = json.loads(path.read_text())
    found: dict[str, dict[str, Any]] = {}
    for r in data["measurements"]:
        name = r["nodeid"].split("::")[1]
        found[name if name not in found else f"{name}@{r['device']}"] = r
    return found


def histories(path: Path) -> dict[str, int]:
    """How many earlier runs each test keeps, by the name after ``test_``."""
    return {name.removeprefix("test_"): len(r.get("history") or []) for name, r in rows(path).items()}


@pytest.fixture
def store(rl: pytest.Pytester) -> Path:
    """A 5-test baseline saved three times: every test keeps 2 earlier runs."""
    rl.makepyfile(test_kernels=kernels(*FIVE))
    for _ in range(3):
        rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=5)
    path = rl.path / "base.json"
    assert histories(path) == dict.fromkeys(FIVE, 2)
    return path


# -- a save loses nothing it did not measure ---------------------------------------------------------


def test_a_partial_save_keeps_every_test_it_did_not_measure(rl: pytest.Pytester, store: Path) -> None:
    result = rl.runpytest("-k", "plain", "--roofline-save=base.json")
    result.assert_outcomes(passed=1, deselected=4)
    result.stdout.fnmatch_lines(["roofline: saved base.json: 1 updated, 0 added, 4 kept"])
    assert histories(store) == {"plain": 3, "slow": 2, "third": 2, "fourth": 2, "fifth": 2}


def test_two_jobs_saving_different_files_into_one_baseline_keep_both(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_one=kernels("a", "b"), test_two=kernels("c"))
    rl.runpytest("test_one.py", "--roofline-save=base.json").assert_outcomes(passed=2)
    result = rl.runpytest("test_two.py", "--roofline-save=base.json")
    result.stdout.fnmatch_lines(["roofline: saved base.json: 0 updated, 1 added, 2 kept"])
    assert sorted(rows(rl.path / "base.json")) == ["test_a", "test_b", "test_c"]


def test_a_run_cut_short_updates_only_what_it_measured_and_leaves_a_usable_baseline(
    rl: pytest.Pytester, store: Path
) -> None:
    broken = (
        "\n\ndef test_broken():  # unrelated, and it fails before the rest are reached\n    assert False\n"
    )
    rl.makepyfile(test_kernels=kernels("plain") + broken + kernels(*FIVE[1:]).removeprefix("import pytest\n"))
    result = rl.runpytest("-x", "-p", "no:randomly", "--roofline-save=base.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["roofline: saved base.json: 1 updated, 0 added, 4 kept; the run was cut short: only what it*"]
    )
    assert histories(store) == {"plain": 3, "slow": 2, "third": 2, "fourth": 2, "fifth": 2}
    assert json.loads(store.read_text())["interrupted"] is False  # as complete as it was
    compared = rl.runpytest("--roofline-compare=base.json")
    compared.assert_outcomes(passed=5, failed=1)  # not refused as a baseline cut short


def test_a_new_baseline_from_a_run_cut_short_is_still_marked_so(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        test_a=kernels("plain"), test_b="def test_broken():\n    assert False\n", test_c=kernels("x")
    )
    rl.runpytest("-x", "-p", "no:randomly", "--roofline-save=cut.json")
    assert json.loads((rl.path / "cut.json").read_text())["interrupted"] is True


def test_a_new_baseline_gets_a_confirmation_line(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=kernels("a", "b"))
    result = rl.runpytest("--roofline-save=new.json")
    result.stdout.fnmatch_lines(["roofline: saved new.json, a new baseline: 2 added"])


# -- what a save cannot read, it refuses, and leaves as it is ----------------------------------------


@pytest.mark.parametrize(
    ("target", "content", "fault"),
    [
        ("test_kernels.py", None, "not JSON*"),
        (
            "base.json",
            "edited",
            "measurement 0 (test_kernels.py::test_a): 'attained' is '0.8', not a number*",
        ),
        ("base.json", "future", "schema 3 is not the one this version reads*"),
    ],
    ids=["python-file", "hand-edited", "future-schema"],
)
def test_a_save_refuses_a_file_it_cannot_read_before_any_test_runs(
    rl: pytest.Pytester, target: str, content: str | None, fault: str
) -> None:
    rl.makepyfile(
        test_kernels=kernels("a", "b") + "\n\ndef test_side_effect():\n    open('ran', 'w').close()\n"
    )
    if content is not None:
        rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=3)
        (rl.path / "ran").unlink()
        data = json.loads((rl.path / "base.json").read_text())
        if content == "edited":
            data["measurements"][0]["attained"] = "0.8"
        else:
            data["schema"] = 3
        (rl.path / "base.json").write_text(json.dumps(data))
    before = (rl.path / target).read_bytes()
    result = rl.runpytest(f"--roofline-save={target}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--roofline-save: baseline {target}: {fault}*save to another path*"])
    assert (rl.path / target).read_bytes() == before
    assert not (rl.path / "ran").exists()  # refused before any test ran


def test_a_save_named_in_the_ini_file_is_refused_as_well(rl: pytest.Pytester) -> None:
    rl.makeini("[pytest]\nroofline_save = base.json\n")
    (rl.path / "base.json").write_text("{oops")
    rl.makepyfile(test_kernels=kernels("a"))
    result = rl.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (rl.path / "base.json").read_text() == "{oops"


# -- a regression does not become the baseline -------------------------------------------------------


def test_a_regressing_run_does_not_replace_its_baseline_so_a_retry_fails_again(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=kernels("slow", "steady"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    rl.makepyfile(test_kernels=kernels("slow", "steady", slow=5.5e-3))  # -55%
    gate = ("--roofline-compare=base.json", "--roofline-save=base.json")
    for _ in range(2):  # the job, and its retry
        result = rl.runpytest(*gate)
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines(
            [
                "roofline: saved base.json: 1 updated, 0 added, 0 kept, 1 refused; refused, since they"
                " regressed (their baseline records stay; --roofline-accept saves them):"
                " test_kernels.py::test_slow"
            ]
        )
        assert rows(rl.path / "base.json")["test_slow"]["attained"] == pytest.approx(0.8)


def test_a_save_alone_refuses_a_regression_against_the_baseline_it_saves_into(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=kernels("slow", "steady"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    rl.makepyfile(test_kernels=kernels("slow", "steady", slow=5.5e-3))
    result = rl.runpytest("--roofline-save=base.json")
    result.stdout.fnmatch_lines(["*1 refused; refused, since they regressed*test_slow"])
    assert rows(rl.path / "base.json")["test_slow"]["attained"] == pytest.approx(0.8)


def test_an_accepted_regression_is_saved_and_said(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=kernels("slow", "steady"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    rl.makepyfile(test_kernels=kernels("slow", "steady", slow=5.5e-3))
    result = rl.runpytest("--roofline-compare=base.json", "--roofline-save=base.json", "--roofline-accept")
    result.assert_outcomes(passed=1, failed=1)  # the test still fails: accepting is the save's
    result.stdout.fnmatch_lines(
        [
            "*2 updated, 0 added, 0 kept; regressed, saved as --roofline-accept asked:"
            " test_kernels.py::test_slow"
        ]
    )
    rl.runpytest("--roofline-compare=base.json").assert_outcomes(passed=2)  # the new baseline


# -- devices kept apart ------------------------------------------------------------------------------


def test_saving_onto_another_devices_baseline_keeps_its_records_apart_and_says_so(
    rl: pytest.Pytester,
) -> None:
    rl.makepyfile(test_kernels=kernels("a", "b"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    path = rl.path / "base.json"
    data = json.loads(path.read_text())
    for r in data["measurements"]:
        r.update(device="h100-sxm", device_name="NVIDIA H100 SXM", attained=0.4)
    path.write_text(json.dumps(data))
    result = rl.runpytest("--roofline-save=base.json")
    result.stdout.fnmatch_lines(
        [
            "roofline: saved base.json: 0 updated, 2 added, 2 kept; measured on Fake Accelerator: kept apart"
            " from the records of NVIDIA H100 SXM, each compared with its own device's"
        ]
    )
    assert sorted(rows(path)) == ["test_a", "test_a@fake", "test_b", "test_b@fake"]
    again = rl.runpytest("--roofline-compare=base.json", "--roofline-save=base.json")
    again.stdout.fnmatch_lines(
        [
            "roofline: compared with the baseline: 2 unchanged (*",
            "roofline: saved base.json: 2 updated, 0 added, 2 kept",
        ]
    )


# -- bounded reading ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "fault"),
    [
        (
            {"attained": 1e308},
            "'attained' is 1e+308, outside the 1e-12 to 1000 a fraction of speed of light can be",
        ),
        (
            {"history": [1e-300, 1e300]},
            "'history' is [1e-300, 1e+300]: a fraction of speed of light is 1e-12 to 1000",
        ),
        (
            {"verdict": "great"},
            "'verdict' is 'great', not one of pass, MISS, inconclusive, faster-than-light, skipped",
        ),
    ],
    ids=["attained-1e308", "history-1e-300-to-1e300", "unknown-verdict"],
)
def test_figures_out_of_range_and_unknown_verdicts_are_refused_never_a_traceback(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], fault: str
) -> None:
    rl.makepyfile(test_kernels=kernels("a"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=1)
    path = rl.path / "base.json"
    data = json.loads(path.read_text())
    data["measurements"][0].update(fields)
    path.write_text(json.dumps(data))
    for option in ("--roofline-compare=base.json", "--roofline-save=base.json"):
        result = rl.runpytest(option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{fault.replace('[', '?').replace(']', '?')}*"])
        assert "Traceback" not in result.stdout.str() + result.stderr.str()
    from pytest_roofline import cli

    assert cli.main(["compare", str(path), str(path)]) == 2  # never 1, the exit status of a regression
    assert fault in capsys.readouterr().err


def test_the_comparison_maths_is_clamped_where_figures_are_extreme() -> None:
    from pytest_roofline.output.comparison import Change, RegressionRule
    from pytest_roofline.output.records import MeasurementRecord

    def rec(attained: float, *history: float, ci: float = 0.0) -> MeasurementRecord:
        return MeasurementRecord.from_json({
            "nodeid": "t.py::t", "name": "", "attained": attained, "attained_ci_rel": ci, "time_s": 1e-3,
            "device": "cpu", "device_name": "CPU", "verdict": "pass", "history": list(history),
        })  # fmt: skip

    spread = rec(0.5, 1e-300, 1e300)  # a history whose logs' spread overflows exp()
    for old, new in [(spread, rec(0.5)), (rec(1e308), rec(1e-300)), (rec(0.5), rec(0.5, ci=1e308))]:
        c = RegressionRule().compare(old, new)
        assert c.change in (Change.INCONCLUSIVE, Change.UNCHANGED, Change.REGRESSION, Change.IMPROVEMENT)
        assert c.message()
        assert c.summary()


def test_a_history_longer_than_a_baseline_keeps_is_trimmed_with_a_word(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=kernels("a"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=1)
    path = rl.path / "base.json"
    data = json.loads(path.read_text())
    data["measurements"][0]["history"] = [0.8] * 50
    path.write_text(json.dumps(data))
    result = rl.runpytest("--roofline-compare=base.json", "--roofline-save=base.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: baseline base.json: 1 record(s) kept more than the 7 earlier runs a baseline keeps;"
            " the oldest*"
        ]
    )
    assert result.stdout.str().count("earlier runs a baseline keeps") == 1  # compared and saved: one file
    assert histories(path) == {"a": 7}


def test_a_baseline_with_a_test_twice_on_one_device_is_refused(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=kernels("a"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=1)
    path = rl.path / "base.json"
    data = json.loads(path.read_text())
    data["measurements"].append(dict(data["measurements"][0], attained=0.1))
    path.write_text(json.dumps(data))
    result = rl.runpytest("--roofline-compare=base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*measurements 0 and 1: test_kernels.py::test_a is measured twice on Fake Accelerator*"]
    )


# -- what a comparison calls vanished -----------------------------------------------------------------


@pytest.mark.parametrize("xdist", [(), ("-p", "xdist", "-n", "2")], ids=["serial", "xdist"])
def test_tests_deselected_with_k_are_not_run_not_vanished(
    rl: pytest.Pytester, xdist: tuple[str, ...]
) -> None:
    rl.makepyfile(test_kernels=kernels("a", "b", "c"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=3)
    rl.makepyfile(test_kernels=kernels("a", "b"))  # test_c is gone
    run = rl.runpytest_subprocess if xdist else rl.runpytest
    result = run(*xdist, "-k", "not b", "--roofline-compare=base.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: compared with the baseline: 1 vanished, 1 unchanged, 1 not run (*",
            "  vanished: test_kernels.py::test_c (in the baseline, not measured now)",
        ]
    )
    result.stdout.no_fnmatch_line("*vanished: test_kernels.py::test_b*")


def test_mode_off_compares_nothing_and_calls_no_test_vanished(rl: pytest.Pytester) -> None:
    """Issue 40: with --roofline-mode=off (docs/ci.md's runner without a GPU) every test was vanished."""
    rl.makepyfile(test_kernels=kernels("a", "b"))
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    result = rl.runpytest("--roofline-mode=off", "--roofline-compare=base.json")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["roofline: --roofline-mode=off measures nothing, so nothing was compared: the baseline's 2 test(s)"
         " not run (*"]
    )  # fmt: skip
    assert result.stdout.str().count("roofline: --roofline-mode=off") == 1
    result.stdout.no_fnmatch_line("*vanished:*")
    result.stdout.no_fnmatch_line("*compared with the baseline:*")


def test_compare_never_exits_1_for_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_roofline import cli

    path = tmp_path / "base.json"
    path.write_text(json.dumps({"schema": 2, "measurements": []}))

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("float division by zero")

    # the module cli.py imports now (an in-process pytester run may have left a stale attribute path)
    rule = importlib.import_module("pytest_roofline.output.comparison").RegressionRule
    monkeypatch.setattr(rule, "compare_all", broken)
    assert cli.main(["compare", str(path), str(path)]) == 2
    assert "ZeroDivisionError" in capsys.readouterr().err  # a bug keeps its traceback
