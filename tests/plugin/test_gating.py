"""CI gating end to end: save a baseline, compare with it, the step summary and the plot.

The fake device and scripted backend of ``conftest.py``: 2.5 ms a call attains 80% of a 2 ms floor.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from conftest import COPY

SUITE = f"""
import pytest

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
@pytest.mark.fake_time({{slow}})
def test_slow(roofline):
    roofline(lambda: None)

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
def test_{{other}}(roofline):
    roofline(lambda: None)
"""


def suite(rl: pytest.Pytester, *, slow: float = 2.5e-3, other: str = "steady") -> None:
    rl.makepyfile(test_kernels=SUITE.format(slow=slow, other=other))


@pytest.fixture
def baseline(rl: pytest.Pytester) -> Path:
    """A baseline saved from a run where both tests attained 80%."""
    suite(rl)
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    return rl.path / "base.json"


def edit(path: Path, test: str, **fields: object) -> None:
    data = json.loads(path.read_text())
    for record in data["measurements"]:
        if record["nodeid"].endswith(test):
            record.update(fields)
    path.write_text(json.dumps(data))


def test_a_saved_run_is_a_baseline(baseline: Path) -> None:
    data = json.loads(baseline.read_text())
    assert data["schema"] == 2
    assert data["environment"]["created"][:2] == "20"
    assert [(r["nodeid"], r["attained"]) for r in data["measurements"]] == [
        ("test_kernels.py::test_slow", pytest.approx(0.8)),
        ("test_kernels.py::test_steady", pytest.approx(0.8)),
    ]


def test_a_kernel_made_2x_slower_fails_that_test_only(rl: pytest.Pytester, baseline: Path) -> None:
    suite(rl, slow=5e-3)  # 40%: within its 30% budget, but half where it stood
    result = rl.runpytest("--roofline-compare=base.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*roofline: regression: test_kernels.py::test_slow: attained 40.0% of speed of light, 80.0% in"
            " the baseline: -50% (95% interval -60% to -38%); beyond the 10% regression threshold and beyond"
            " the 20% that run-to-run noise explains (±8% a run, assumed: the reference CI machine's, until"
            " the baseline keeps runs of its own), and in a second measurement; time 5000 µs, was 2500 µs."
            " Baseline: base.json (Fake"
            " Accelerator; 20*",
            "roofline: compared with the baseline: 1 regression, 1 unchanged (base.json (Fake*",
            "*FAILED test_kernels.py::test_slow*",
        ]
    )


def reads_of(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Path]:
    """Every read of a file named ``name`` from now on."""
    reads: list[Path] = []
    read_text = Path.read_text

    def counted(path: Path, *args: object, **kwargs: object) -> str:
        if path.name == name:
            reads.append(path)
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    return reads


def test_the_gate_reads_no_baseline_the_options_read_already(
    rl: pytest.Pytester, baseline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The option's check reads it (pytest parses its command line twice, so twice), and the gate
    compares with what the check read, reading nothing more."""
    reads = reads_of(monkeypatch, "base.json")
    rl.runpytest("--roofline-compare=base.json").assert_outcomes(passed=2)
    assert len(reads) == 2
    # saved into as well: the option's check, then the save's read before the tests (whose baseline
    # the gate compares with) and its read at the end (another run may have saved into it since)
    reads.clear()
    rl.runpytest("--roofline-compare=base.json", "--roofline-save=base.json").assert_outcomes(passed=2)
    assert len(reads) == 4


def test_report_mode_reports_a_regression_without_failing(rl: pytest.Pytester, baseline: Path) -> None:
    suite(rl, slow=5e-3)
    result = rl.runpytest("--roofline-compare=base.json", "--roofline-mode=report")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["roofline: compared with the baseline: 1 regression, 1 unchanged*"])


def test_a_drop_inside_the_noise_is_inconclusive_not_failed(rl: pytest.Pytester, baseline: Path) -> None:
    edit(baseline, "test_slow", attained_ci_rel=0.6)  # a baseline that was very noisy
    suite(rl, slow=3.5e-3)  # 57%: -29%
    result = rl.runpytest("--roofline-compare=base.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "roofline: compared with the baseline: 1 inconclusive, 1 unchanged*",
            "  inconclusive: test_kernels.py::test_slow: -29% (80.0% -> 57.1%), within what runs of"
            " unchanged code move (±8% a run, assumed)",
            "roofline: one saved run cannot tell such a drop*--roofline-against REF measures the base*",
        ]
    )


def test_the_terminal_names_every_test_of_each_class_but_unchanged_and_the_json_keeps_them(
    rl: pytest.Pytester, baseline: Path
) -> None:
    """A newcomer's run said "1 inconclusive" and named none, and its JSON held no comparison."""
    edit(baseline, "test_slow", attained=0.4)  # the baseline's test_slow at half of today's 80%
    suite(rl, other="fresh")
    result = rl.runpytest("--roofline-compare=base.json", "--roofline-json=run.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "roofline: compared with the baseline: 1 improvement, 1 new, 1 vanished*",
            "  improvement: test_kernels.py::test_slow: +100% (40.0% -> 80.0%)",
            "  test_kernels.py::test_fresh: new: no baseline record",
        ]
    )
    compared = json.loads((rl.path / "run.json").read_text())["comparisons"]
    found = {c["nodeid"].split("::")[-1]: c for c in compared}
    slow = found["test_slow"]
    assert (slow["verdict"], slow["baseline"], slow["baseline_runs"]) == ("improvement", 0.4, 1)
    assert (slow["now"], slow["change"]) == (pytest.approx(0.8), pytest.approx(1.0))
    assert slow["change_lo"] < 1.0 < slow["change_hi"]
    assert slow["run_noise"] == pytest.approx(0.08)
    assert (found["test_fresh"]["verdict"], found["test_steady"]["verdict"]) == ("new", "vanished")


def test_new_and_vanished_tests_are_reported(rl: pytest.Pytester, baseline: Path) -> None:
    suite(rl, other="fresh")
    result = rl.runpytest("--roofline-compare=base.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "roofline: compared with the baseline: 1 new, 1 vanished, 1 unchanged*",
            "  vanished: test_kernels.py::test_steady (in the baseline, not measured now)",
        ]
    )


def test_another_devices_baseline_is_refused_unless_asked(rl: pytest.Pytester, baseline: Path) -> None:
    edit(baseline, "test_slow", device="h100-sxm", device_name="NVIDIA H100 SXM")
    suite(rl, slow=5e-3)
    result = rl.runpytest("--roofline-compare=base.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "  test_kernels.py::test_slow: not compared: baseline measured on NVIDIA H100 SXM (80.0% ->"
            " 40.0%); --roofline-compare-across-devices compares it"
        ]
    )
    rl.runpytest("--roofline-compare=base.json", "--roofline-compare-across-devices").assert_outcomes(
        passed=1, failed=1
    )


@pytest.mark.parametrize(
    ("content", "fault"),
    [
        (None, "no such file"),
        ("{oops", "not JSON"),
        ('{"schema": 9, "measurements": []}', "schema 9 is not the one this version reads"),
        ('{"schema": 2, "measurements": [{"nodeid": "t.py::t", "name": ""}]}', "measurement 0 (t.py::t): no"),
    ],
    ids=["missing", "not-json", "schema", "missing-field"],
)
def test_a_bad_baseline_is_a_usage_error_naming_the_file(
    rl: pytest.Pytester, content: str | None, fault: str
) -> None:
    if content is not None:
        (rl.path / "bad.json").write_text(content)
    suite(rl)
    result = rl.runpytest("--roofline-compare=bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--roofline-compare: baseline bad.json: {fault}*"])


def test_the_step_summary_gets_a_section(
    rl: pytest.Pytester, baseline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = rl.path / "summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    suite(rl, slow=5e-3)
    rl.runpytest("--roofline-compare=base.json").assert_outcomes(passed=1, failed=1)
    text = summary.read_text()
    assert text.startswith("# earlier step\n\n## pytest-roofline\n")
    assert "**Fake Accelerator** (cpu): DRAM 100 GB/s" in text
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert rows == [
        "| `test_kernels.py::test_slow` | copy[n=25000000 fp32] | 40.0% | 30.0% | pass "
        "| **-50% (80.0% -> 40.0%)** |",
        "| `test_kernels.py::test_steady` | copy[n=25000000 fp32] | 80.0% | 30.0% | pass "
        "| +0% (80.0% -> 80.0%) |",
    ]
    assert "<br>Against the baseline base.json (Fake Accelerator; 20" in text


def test_no_step_summary_when_nothing_was_measured(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = rl.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    rl.makepyfile("def test_plain():\n    pass\n")
    rl.runpytest().assert_outcomes(passed=1)
    assert not summary.exists()  # a suite that measures nothing is not the plugin's to summarize


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="the plot extra is not installed")
def test_the_plot_is_drawn_at_the_end(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.speed_of_light("gemm", M=1000, N=1000, K=1000, dtype="fp32", min_fraction=0.3)
        def test_gemm(roofline):
            roofline(lambda: None)
        """
    )
    rl.runpytest("--roofline-plot=roofline.svg").assert_outcomes(passed=1)
    svg = (rl.path / "roofline.svg").read_text()
    assert "test_gemm" in svg
    assert "fp32 vector 1.00 TFLOP/s" in svg


@pytest.mark.parametrize(
    ("value", "fault"),
    [("plot.pdf", "the plot is written as .svg or .png; got '.pdf'"), ("nowhere/plot.svg", "does not exist")],
)
def test_a_bad_plot_path_is_a_usage_error(rl: pytest.Pytester, value: str, fault: str) -> None:
    rl.makepyfile("def test_plain():\n    pass\n")
    result = rl.runpytest(f"--roofline-plot={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--roofline-plot*{fault}*"])


def test_a_plot_without_matplotlib_is_a_usage_error_naming_the_extra(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the plot extra were not installed
    rl.makepyfile("def test_plain():\n    pass\n")
    result = rl.runpytest("--roofline-plot=roofline.svg")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    extra = "pytest-roofline[[]plot[]]"  # fnmatch's brackets, escaped
    result.stderr.fnmatch_lines([f"*--roofline-plot*needs matplotlib: pip install '{extra}'"])


# -- a baseline that keeps several runs ---------------------------------------------------------------


def histories(path: Path) -> dict[str, list[float]]:
    return {
        r["nodeid"].split("::")[1]: r.get("history") for r in json.loads(path.read_text())["measurements"]
    }


def test_saving_onto_a_baseline_appends_this_run_to_each_tests_history(
    rl: pytest.Pytester, baseline: Path
) -> None:
    from pytest_roofline.output.baseline import HISTORY_RUNS

    assert histories(baseline) == {"test_slow": [], "test_steady": []}
    result = rl.runpytest("--roofline-save=base.json")
    result.stdout.fnmatch_lines(["roofline: saved base.json: 2 updated, 0 added, 0 kept"])
    assert histories(baseline) == {"test_slow": [pytest.approx(0.8)], "test_steady": [pytest.approx(0.8)]}
    for _ in range(HISTORY_RUNS):
        rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    assert len(histories(baseline)["test_slow"]) == HISTORY_RUNS - 1  # the newest runs, its own the last


@pytest.mark.parametrize(
    ("slow", "args"), [(5e-3, ["--roofline-accept"]), (2e-3, [])], ids=["accepted", "faster"]
)
def test_a_test_that_changed_beyond_its_noise_starts_a_new_history(
    rl: pytest.Pytester, baseline: Path, slow: float, args: list[str]
) -> None:
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    suite(rl, slow=slow)  # 2x slower, which the team accepts; or faster, which needs no word
    result = rl.runpytest("--roofline-save=base.json", *args)
    result.stdout.fnmatch_lines(
        ["*saved base.json: 1 tests changed beyond their noise and start a new*test_slow*"]
    )
    assert histories(baseline) == {"test_slow": [], "test_steady": [pytest.approx(0.8)] * 2}


@pytest.mark.parametrize(
    ("args", "ini", "said"),
    [
        (["--roofline-accept", "--roofline-compare=base.json"], "", "--roofline-accept"),
        (["-p", "xdist", "-n", "2"], "roofline_accept = true", "ini roofline_accept"),
    ],
    ids=["flag", "ini-xdist"],
)
def test_accept_without_save_warns_once_that_it_has_no_effect(
    rl: pytest.Pytester, baseline: Path, args: list[str], ini: str, said: str
) -> None:
    """Issue 40: --roofline-accept without --roofline-save did nothing, silently."""
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    if ini:
        rl.makeini(f"[pytest]\n{ini}\n")
    run = rl.runpytest_subprocess if "xdist" in args else rl.runpytest
    result = run(*args)
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [f"*RooflineWarning: {said} has no effect without --roofline-save: it lets a save replace*"]
    )
    assert result.stdout.str().count("has no effect without --roofline-save") == 1
    assert "has no effect" not in rl.runpytest("--roofline-accept", "--roofline-save=base.json").stdout.str()


def test_a_baseline_with_runs_judges_against_their_median_and_says_so(
    rl: pytest.Pytester, baseline: Path
) -> None:
    for _ in range(3):
        rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    suite(rl, slow=5e-3)
    result = rl.runpytest("--roofline-compare=base.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*80.0% in the baseline (median of 4 runs): -50%*learned from 4 baseline runs*"]
    )


def test_a_baseline_cut_short_is_refused_unless_accepted(rl: pytest.Pytester) -> None:
    suite(rl)
    rl.makepyfile(test_z_broken="def test_broken():\n    assert False\n\ndef test_after():\n    pass\n")
    rl.runpytest("--roofline-save=cut.json", "-x", "-p", "no:randomly")
    assert json.loads((rl.path / "cut.json").read_text())["interrupted"] is True
    result = rl.runpytest("--roofline-compare=cut.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*baseline cut.json: saved from a run that was cut short*--roofline-compare-interrupted*"]
    )
    accepted = rl.runpytest(
        "--roofline-compare=cut.json", "--roofline-compare-interrupted", "test_kernels.py"
    )
    accepted.assert_outcomes(passed=2)
