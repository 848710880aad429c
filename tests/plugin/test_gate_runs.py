"""The gate through pytest, at its edges: a save that measured nothing or was cut short, a baseline read
once at start-up (relative, from an ini file, deleted mid-run) or that no reader holds, the report of
a regressed run in 80 columns, ``roofline compare`` into a closed pipe; and the outputs a run cannot
write (two options naming one file, a read-only file, a FIFO, a folder gone by the end, an unwritable
step summary) refused or named.

The fake device and scripted backend of ``conftest.py``: 2.5 ms a call attains 80% of a 2 ms floor.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import COPY

SUITE = f"""
import pytest

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
def test_first(roofline):
    roofline(lambda: None)

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
def test_second(roofline):
    roofline(lambda: None)
"""


@pytest.fixture
def baseline(rl: pytest.Pytester) -> Path:
    rl.makepyfile(test_kernels=SUITE)
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    return rl.path / "base.json"


def test_a_save_that_measured_nothing_keeps_the_old_baseline(rl: pytest.Pytester, baseline: Path) -> None:
    before = baseline.read_text()
    result = rl.runpytest("--roofline-save=base.json", "--roofline-mode=off")
    result.assert_outcomes(passed=2)
    assert baseline.read_text() == before  # not replaced by an empty one: the gate stays on
    result.stdout.fnmatch_lines(["*--roofline-save: nothing was measured*base.json*kept*"])
    result = rl.runpytest("--roofline-save=base.json", "-k", "no_such_test")
    assert baseline.read_text() == before


def test_a_run_cut_short_is_marked_in_its_baseline(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        test_kernels=SUITE
        + """
def test_broken():
    assert False

def test_last():
    pass
"""
    )
    rl.runpytest("--roofline-save=cut.json", "-x")
    data = json.loads((rl.path / "cut.json").read_text())
    assert data["interrupted"] is True  # as the JSON of the same run says
    assert data["interruption"]


def test_a_relative_baseline_path_is_resolved_once_at_start(rl: pytest.Pytester, baseline: Path) -> None:
    rl.makepyfile(
        test_kernels=SUITE.replace(
            "def test_first(roofline):",
            "def test_first(roofline, monkeypatch, tmp_path):\n    monkeypatch.chdir(tmp_path)",
        )
    )
    result = rl.runpytest("--roofline-compare=base.json", "--roofline-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*BaselineError*")
    assert (rl.path / "out.json").is_file()  # written where the path pointed at start-up


@pytest.mark.parametrize("config", ["pytest.ini", "pyproject.toml"])
def test_a_relative_baseline_in_the_ini_file_is_read_beside_it_once_at_start(
    rl: pytest.Pytester, baseline: Path, monkeypatch: pytest.MonkeyPatch, config: str
) -> None:
    if config == "pytest.ini":
        rl.makeini("[pytest]\nroofline_compare = base.json\n")
    else:
        rl.makepyprojecttoml('[tool.pytest.ini_options]\nroofline_compare = "base.json"\n')
    rl.makepyfile(
        test_kernels=SUITE.replace(
            "def test_first(roofline):",
            "def test_first(roofline, monkeypatch, tmp_path):\n    monkeypatch.chdir(tmp_path)",
        )
    )
    data = json.loads(baseline.read_text())
    for record in data["measurements"]:
        record["attained"] *= 2  # found and read: every test regressed
    baseline.write_text(json.dumps(data))
    monkeypatch.chdir(rl.mkdir("elsewhere"))  # pytest started away from the ini file
    result = rl.runpytest(str(rl.path / "test_kernels.py"), "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*regress*"])
    result.stdout.no_fnmatch_line("*BaselineError*")


def test_a_baseline_deleted_mid_run_is_no_traceback(rl: pytest.Pytester, baseline: Path) -> None:
    # the file goes before any test measures: the baseline was read once, at start-up
    rl.makepyfile(
        test_kernels=f"def test_aaa_delete():\n    import os\n    os.remove({str(baseline)!r})\n" + SUITE
    )
    result = rl.runpytest("--roofline-compare=base.json", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK


#: faults in a baseline file that escaped as tracebacks: a number no float holds, JSON nested past the
#: recursion limit, an integer past Python's 4300-digit limit
UNREADABLE = {
    "attained": ("attained", 10**400, "*(*::test_first): 'attained' is an integer of 401 digits*"),
    "time_s": ("time_s", 10**400, "*(*::test_first): 'time_s' is an integer of 401 digits*"),
    "ci": ("attained_ci_rel", -(10**400), "*(*::test_first): 'attained_ci_rel' is an integer of 401 digits*"),
    "digits": ("attained", None, "*: an integer of more than 4300 digits, too long to read"),
    "deep": (None, None, "*: JSON nested too deeply to read"),
}


def _spoil(baseline: Path, fault: str) -> str:
    """Spoil ``baseline`` with ``fault``; the message that names it, as a pattern."""
    field, value, message = UNREADABLE[fault]
    if field is None:
        baseline.write_text("[" * 100_000 + "]" * 100_000)
        return message
    data = json.loads(baseline.read_text())
    first = min(data["measurements"], key=lambda record: record["nodeid"])  # test_first, whatever the order
    data["measurements"] = [first]
    first[field] = value if value is not None else 0
    text = json.dumps(data)
    if value is None:  # json.dumps would not write it either
        text = text.replace(f'"{field}": 0', f'"{field}": {"1" * 5000}')
    baseline.write_text(text)
    return message


@pytest.mark.parametrize("fault", UNREADABLE)
@pytest.mark.parametrize("where", ["option", "pytest.ini", "pyproject.toml"])
def test_a_baseline_no_float_or_json_reader_holds_is_a_usage_error(
    rl: pytest.Pytester, baseline: Path, fault: str, where: str
) -> None:
    message = _spoil(baseline, fault)
    if where == "pytest.ini":
        rl.makeini("[pytest]\nroofline_compare = base.json\n")
    elif where == "pyproject.toml":
        rl.makepyprojecttoml('[tool.pytest.ini_options]\nroofline_compare = "base.json"\n')
    result = rl.runpytest("--roofline-compare=base.json") if where == "option" else rl.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    origin = "--roofline-compare" if where == "option" else "ini option roofline_compare = 'base.json'"
    result.stderr.fnmatch_lines([f"*{origin}*baseline *base.json{message}"])
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output


@pytest.mark.parametrize("fault", UNREADABLE)
@pytest.mark.parametrize("side", ["old", "new"])
def test_roofline_compare_of_an_unreadable_baseline_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, baseline: Path, fault: str, side: str
) -> None:
    from pytest_roofline import cli

    good = tmp_path / "good.json"
    good.write_text(baseline.read_text())
    message = _spoil(baseline, fault)
    old, new = (baseline, good) if side == "old" else (good, baseline)
    capsys.readouterr()  # the run that wrote the baseline
    assert cli.main(["compare", str(old), str(new)]) == 2  # 1 would be a regression to CI
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err
    named = "baseline" if side == "old" else "compared"  # the new file is no baseline
    pytest.LineMatcher(err.splitlines()).fnmatch_lines([f"roofline: error: {named} *{message}"])


def test_compare_into_a_closed_pipe_keeps_its_exit_status(tmp_path: Path, baseline: Path) -> None:
    data = json.loads(baseline.read_text())
    first = data["measurements"][0]
    # 3000 tests, one of which lost half: more output than a pipe holds, so head closes it early
    data["measurements"] = [{**first, "nodeid": f"test_many.py::test_{i}"} for i in range(3000)]
    data["measurements"][-1] = {**first, "nodeid": "test_many.py::test_2999"}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    baseline = old
    data["measurements"][-1]["attained"] /= 2
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    script = (
        f"{sys.executable} -m pytest_roofline compare {baseline} {new} | head -1; exit ${{PIPESTATUS[0]}}"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr  # the regression, not the broken pipe's 0
    assert "Traceback" not in done.stderr


def test_the_roofline_section_fits_an_80_column_terminal(
    rl: pytest.Pytester, baseline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(baseline.read_text())
    for record in data["measurements"]:
        record["attained"] *= 2  # the baseline stood twice as high: every test regressed
    baseline.write_text(json.dumps(data))
    monkeypatch.setenv("COLUMNS", "80")
    result = rl.runpytest("--roofline-report", "--roofline-mode=report", "--roofline-compare=base.json")
    lines = result.stdout.lines
    section = lines[next(i for i, line in enumerate(lines) if "roofline report" in line) :]
    section = section[: next(i for i, line in enumerate(section) if line.startswith("=====") and i > 0)]
    assert any("regression" in line for line in section)  # the regression lines are in it, wrapped
    assert max(len(line) for line in section) <= 80, max(section, key=len)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--roofline-json=out.json", "--roofline-markdown=out.json"],
         "--roofline-markdown and --roofline-json name the same file*out.json*"),
        (["--roofline-json=out.json", "--roofline-save=./out.json"],
         "--roofline-save and --roofline-json name the same file*"),
    ],
)  # fmt: skip
def test_two_outputs_to_one_file_is_a_usage_error(rl: pytest.Pytester, args: list[str], message: str) -> None:
    result = rl.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])


def test_a_read_only_output_is_refused_not_replaced(rl: pytest.Pytester) -> None:
    out = rl.path / "out.json"
    out.write_text("{}")
    out.chmod(0o444)
    result = rl.runpytest("--roofline-json=out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-json: cannot write 'out.json': it is read-only*"])
    assert out.read_text() == "{}"


@pytest.mark.parametrize("option", ["json", "save", "markdown", "plot"])
def test_a_fifo_as_an_output_is_a_usage_error_not_a_hang(rl: pytest.Pytester, option: str) -> None:
    rl.makepyfile(test_kernels=SUITE)
    name = "out.svg" if option == "plot" else "out.json"
    os.mkfifo(rl.path / name)
    # a subprocess, so that a hang fails this test instead of hanging the suite
    result = rl.runpytest_subprocess(f"--roofline-{option}={name}", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--roofline-{option}: cannot write '{name}': it is a FIFO, not a regular file*"]
    )
    assert stat.S_ISFIFO((rl.path / name).stat().st_mode)


@pytest.mark.parametrize(("option", "name"), [("save", "base.json"), ("plot", "roofline.svg")])
def test_a_gate_output_that_fails_at_the_end_names_its_file(
    rl: pytest.Pytester, option: str, name: str
) -> None:
    rl.makepyfile(
        test_kernels="def test_aaa_remove():\n    import shutil\n    shutil.rmtree('out')\n" + SUITE
    )
    rl.mkdir("out")
    result = rl.runpytest(f"--roofline-{option}=out/{name}", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"roofline: could not write --roofline-{option}: *out/{name}*"])


def test_an_unwritable_step_summary_warns_and_leaves_the_run_green(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rl.makepyfile(test_kernels=SUITE)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "such" / "dir" / "summary.md"))
    result = rl.runpytest()
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK  # the step summary is GitHub's, not a file the user asked for
    result.stdout.fnmatch_lines(["*could not write the Markdown summary*summary.md*"])
