"""``roofline budgets RUN.json ...``: a min_fraction per test from report runs (0.6 of the lowest attained
by default), as markers to paste or a table; the markers, pasted in, pass the next run and fail the
kernel made 2x slower. Timed on the scripted backend (``fake_time``), never for real."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_roofline import cli
from pytest_roofline.budgets_cli import round_down

# a copy of 6.25M fp32 moves 50 MB: 0.5 ms at the fake device's 100 GB/s
TEST = """
import pytest

{marker}
@pytest.mark.fake_time({seconds!r})
def test_copy(roofline):
    roofline(lambda: None)
"""
MARKER = '@pytest.mark.speed_of_light("copy", n=6_250_000, dtype="fp32")'


def report_run(rl: pytest.Pytester, seconds: float, name: str, marker: str = MARKER) -> Path:
    rl.makepyfile(test_kernel=TEST.format(marker=marker, seconds=seconds))
    rl.runpytest("--roofline-mode=report", f"--roofline-json={name}").assert_outcomes(passed=1)
    return rl.path / name


def test_the_markers_pasted_in_pass_the_next_run_and_fail_the_kernel_2x_slower(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [report_run(rl, seconds, f"run{i}.json") for i, seconds in enumerate((6.0e-4, 6.3e-4, 6.1e-4))]

    assert cli.main(["budgets", *map(str, runs)]) == 0
    out = capsys.readouterr().out
    # the lowest attained: 0.5 ms / 0.63 ms = 0.794; 0.6 of it, rounded down
    assert "test_kernel.py::test_copy: lowest 0.794 of 3 run(s), spread 5.0%; now 0.5" in out
    (marker,) = re.findall(r"^    (@pytest\.mark\.speed_of_light\(.*\))$", out, re.MULTILINE)
    assert marker == '@pytest.mark.speed_of_light("copy", n=6250000, dtype="fp32", min_fraction=0.47)'

    rl.makepyfile(test_kernel=TEST.format(marker=marker, seconds=6.2e-4))
    rl.runpytest().assert_outcomes(passed=1)
    rl.makepyfile(test_kernel=TEST.format(marker=marker, seconds=2 * 6.3e-4))
    rl.runpytest().assert_outcomes(failed=1)


def test_the_table_and_another_fraction(rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    run = report_run(rl, 6.0e-4, "run.json")

    assert cli.main(["budgets", str(run), "--table", "--fraction", "0.5"]) == 0
    out = capsys.readouterr().out
    row = r"test_kernel.py::test_copy\s+0.833\s+0.0%\s+1\s+0.5\s+0.41\s+1 run\(s\): run it a few"
    assert re.search(row, out), out
    rule = (
        "min_fraction = 0.5 of the lowest attained over the runs, rounded down: a kernel more than 2x slower"
    )
    assert rule in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fraction", "1.5"], "expected a share of the lowest fraction in (0, 1), such as 0.5; got '1.5'"),
        (["--fraction", "half"], "got 'half'"),
        (["missing.json"], "report missing.json"),
        (["empty.json"], "no measurement in empty.json: run the suite with --roofline-json first"),
        (["bad.json"], "report bad.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.json").write_text(json.dumps({"schema": 2, "devices": [], "measurements": []}))
    (tmp_path / "bad.json").write_text("{ not json")
    (tmp_path / "ok.json").write_text(json.dumps({"schema": 2, "devices": [], "measurements": []}))
    if argv[0].startswith("--"):
        argv = ["ok.json", *argv]

    code = cli.main(["budgets", *argv])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert message in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("value", "rounded"),
    [(0.3815, 0.38), (0.00456, 0.0045), (0.5, 0.5), (0.0999, 0.099), (0.29, 0.29), (0.57, 0.57)],
)
def test_a_budget_is_rounded_down_to_two_figures(value: float, rounded: float) -> None:
    assert round_down(value) == rounded


def test_an_inferred_marker_gets_one_min_fraction_the_new_one(
    rl: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # a budget with no op on a wrapped NumPy matmul: its suggested marker carried the run's budget
    rl.makepyfile(
        test_kernel="""
        import numpy as np
        import pytest

        A = np.ones((64, 64), np.float32)

        def matmul(a, b):
            return a @ b

        @pytest.mark.speed_of_light()
        @pytest.mark.fake_time(1e-4)
        def test_mm(roofline):
            roofline(matmul, A, A)
        """
    )
    rl.runpytest("--roofline-mode=report", "--roofline-json=run.json").assert_outcomes(passed=1)

    assert cli.main(["budgets", str(rl.path / "run.json")]) == 0
    out = capsys.readouterr().out
    (marker,) = re.findall(r"^    (@pytest\.mark\.speed_of_light\(.*\))$", out, re.MULTILINE)
    assert "flops=524288.0" in marker  # 2 x 64^3, counted from the one NumPy call
    assert marker.count("min_fraction=") == 1
