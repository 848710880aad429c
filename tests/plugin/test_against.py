"""``--roofline-against REF`` end to end: a repository of three marked tests, two commits, each side
timed on a fake clock (a kernel's ``cost`` is its time per call), the base in a real second process.

Nothing here is timed for real: the verdicts follow from the scripted costs, so each is certain.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import TESTS_DIR

CONFTEST = f"""
import math
import sys

if {str(TESTS_DIR)!r} not in sys.path:
    sys.path.insert(0, {str(TESTS_DIR)!r})

from fakes import FakeBackend

from pytest_roofline import Device, Figure, Precision, Source, Unit


class CostBackend(FakeBackend):
    '''Each call of a kernel takes its ``cost`` attribute's seconds (1% of wobble), on a fake clock.'''

    def __init__(self):
        super().__init__(0.0, resolution_s=1e-9, device_name="fake accelerator")
        self._cost = 1e-7
        self._durations = lambda i: self._cost * (1 + 0.01 * math.sin(i))

    def run(self, fn, args, *, calls, samples, flush):
        self._cost = getattr(fn, "cost", 1e-7)
        return super().run(fn, args, calls=calls, samples=samples, flush=flush)


BACKEND = CostBackend()


def pytest_roofline_device(config, spec):
    peak = Figure(1e12, Source.DATASHEET)
    return Device(
        key="fake", name="Fake Accelerator", kind="cpu",
        peaks={{(Precision.FP32, Unit.VECTOR): peak}}, bandwidth=Figure(1e11, Source.DATASHEET),
        llc_bytes=32 * 2**20, cores=4,
    )


def pytest_roofline_backend(config, device, spec):
    return BACKEND
"""

# a copy of 6.25M fp32 elements moves 50 MB: 0.5 ms at the fake device's 100 GB/s
TESTS = """
import pytest

import kernels

COPY = dict(n=6_250_000, dtype="fp32", min_fraction=0.1)


@pytest.mark.speed_of_light("copy", **COPY)
def test_a(roofline):
    roofline(kernels.a)


@pytest.mark.speed_of_light("copy", **COPY)
def test_b(roofline):
    roofline(kernels.b)


@pytest.mark.speed_of_light("copy", **COPY)
def test_c(roofline):
    roofline(kernels.c)
"""


def kernels(**costs: float) -> str:
    return "".join(
        f"def {name}():\n    pass\n\n\n{name}.cost = {cost!r}\n\n\n" for name, cost in costs.items()
    )


BASE = {"a": 1e-3, "b": 2e-3, "c": 1e-3}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.Pytester:
    """The base commit: three tests over three kernels; the tests' temporary folders in ``tmp``."""
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_kernels=TESTS, kernels=kernels(**BASE))
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    return pytester


def commit(repo: pytest.Pytester, message: str, **files: str) -> None:
    for name, text in files.items():
        (repo.path / name).write_text(textwrap.dedent(text))
    git(repo.path, "add", "-A")
    git(repo.path, "commit", "-q", "-m", message)


def vs_base(report: Path) -> dict[str, dict[str, object]]:
    records = json.loads(report.read_text())["measurements"]
    return {r["nodeid"].split("::")[-1]: r["vs_base"] for r in records}


def left_behind(repo: pytest.Pytester, tmp_path: Path) -> list[str]:
    """What a comparison may leave: worktrees git still knows, folders in the temporary folder."""
    worktrees = [line for line in git(repo.path, "worktree", "list").splitlines() if "roofline-base" in line]
    return worktrees + [p.name for p in (tmp_path / "tmp").iterdir()]


def test_a_kernel_doing_more_work_in_the_head_is_slower_and_fails(
    repo: pytest.Pytester, tmp_path: Path
) -> None:
    commit(repo, "b does 1.2x the work", **{"kernels.py": kernels(**{**BASE, "b": 2.4e-3})})
    result = repo.runpytest(
        "--roofline-against", "HEAD~1", "--roofline-report", "--roofline-json=r.json",
        "--roofline-markdown=summary.md",
    )  # fmt: skip
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*is slower than in HEAD~1: attained 20.8% against 25.0% (2400 µs against 200? µs a call),"
            " ratio 0.833 [[]0.83*, 0.83*] over * paired rounds, a drop beyond the 10.0% threshold and the"
            " *% that identical code moved (A/A)",
            "*vs base*",
            "*roofline: against HEAD~1: 1 slower, 2 same",
            "  slower test_kernels.py::test_b: -17% slower*",
        ]
    )
    found = vs_base(repo.path / "r.json")
    assert found["test_b"]["verdict"] == "slower"
    summary = (repo.path / "summary.md").read_text()
    assert "Against `HEAD~1`: 1 slower, 0 faster, of 3 compared." in summary
    assert "| `test_kernels.py::test_b` | **-17% slower (±0%)** | 25.0% | 20.8% |" in summary
    assert found["test_b"]["ratio"] == pytest.approx(1 / 1.2, rel=0.01)
    assert found["test_a"]["verdict"] == found["test_c"]["verdict"] == "same"
    assert left_behind(repo, tmp_path) == []


def test_report_mode_reports_a_slower_kernel_without_failing(repo: pytest.Pytester) -> None:
    commit(repo, "b does 1.2x the work", **{"kernels.py": kernels(**{**BASE, "b": 2.4e-3})})
    result = repo.runpytest("--roofline-against=HEAD~1", "--roofline-mode=report", "--roofline-report")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_b*-17% slower (±*", "*roofline: against HEAD~1: 1 slower, 2 same"])


def test_the_head_against_itself_is_the_same(repo: pytest.Pytester) -> None:
    result = repo.runpytest("--roofline-against", "HEAD", "--roofline-json=r.json")
    result.assert_outcomes(passed=3)
    assert {v["verdict"] for v in vs_base(repo.path / "r.json").values()} == {"same"}


def test_a_test_on_one_side_only_is_new_or_gone(repo: pytest.Pytester, tmp_path: Path) -> None:
    head_tests = TESTS.replace("def test_c(roofline):", "def test_d(roofline):")
    commit(repo, "c renamed d", **{"test_kernels.py": head_tests})
    result = repo.runpytest("--roofline-against", "HEAD~1", "--roofline-json=r.json")
    result.assert_outcomes(passed=3)
    assert vs_base(repo.path / "r.json")["test_d"]["verdict"] == "new"
    result.stdout.fnmatch_lines(
        ["*roofline: against HEAD~1: 2 same, 1 new; 1 gone", "  gone test_kernels.py::test_c: in the base*"]
    )
    assert left_behind(repo, tmp_path) == []


def test_a_ref_that_is_no_commit_is_a_usage_error(repo: pytest.Pytester, tmp_path: Path) -> None:
    result = repo.runpytest("--roofline-against", "mian")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--roofline-against: 'mian' is not a commit of the repository*did you mean 'main'?*"]
    )
    assert left_behind(repo, tmp_path) == []


def test_a_base_that_cannot_import_stops_an_enforced_gate(repo: pytest.Pytester, tmp_path: Path) -> None:
    commit(repo, "broken", **{"kernels.py": "import not_a_module\n"})
    commit(repo, "fixed", **{"kernels.py": kernels(**BASE)})
    result = repo.runpytest("--roofline-against", "HEAD~1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-against HEAD~1: the base cannot collect:*not_a_module*"])
    assert left_behind(repo, tmp_path) == []


def test_a_base_that_cannot_import_is_said_once_in_report_mode(repo: pytest.Pytester) -> None:
    commit(repo, "broken", **{"kernels.py": "import not_a_module\n"})
    commit(repo, "fixed", **{"kernels.py": kernels(**BASE)})
    result = repo.runpytest("--roofline-against", "HEAD~1", "--roofline-mode=report")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*the base cannot collect:*not_a_module*; this run compares nothing*"])


def test_an_interrupted_run_leaves_no_worktree_and_no_process(repo: pytest.Pytester, tmp_path: Path) -> None:
    ends = "    roofline(kernels.b)\n"
    interrupted = TESTS.replace(ends, ends + "    raise KeyboardInterrupt\n")
    commit(repo, "interrupt", **{"test_kernels.py": interrupted})
    result = repo.runpytest_subprocess("--roofline-against", "HEAD~1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert left_behind(repo, tmp_path) == []
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
    assert str(repo.path) not in ps


def test_the_comparison_needs_a_serial_run(repo: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = repo.runpytest("--roofline-against", "HEAD", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-against*needs a serial run*"])


ROTATED = """
import json
import os

import numpy as np
import pytest

import kernels

x = np.ones(2**17)  # 1 MiB: rotated over copies of it


@pytest.mark.speed_of_light("copy", n=2**16, dtype="fp64", min_fraction=0.01)
def test_rotated(roofline):
    roofline(kernels.touch, x)
    side = "base" if os.environ.get("ROOFLINE_FOLLOW_FD") else "head"
    with open(f"{side}.json", "w") as out:
        json.dump(len(set(kernels.SEEN)), out)
"""

TOUCH = """
SEEN = []


def touch(x):
    SEEN.append(id(x))


touch.cost = 1e-4
"""


def test_each_side_rounds_over_two_sets_of_copies(repo: pytest.Pytester) -> None:
    # where one set of copies landed moved one side's median for a whole comparison on a shared VM;
    # with two, each ABBA block's pair of rounds of one side is two placements of identical code
    commit(repo, "rotated", **{"test_rotated.py": ROTATED, "kernels.py": TOUCH})
    repo.runpytest("test_rotated.py", "--roofline-mode=report").assert_outcomes(passed=1)
    alone = json.loads((repo.path / "head.json").read_text())
    # report mode: the fake backend times a rotated kernel at its default cost, faster than light
    result = repo.runpytest(
        "test_rotated.py", "--roofline-against", "HEAD", "--roofline-json=r.json", "--roofline-mode=report"
    )
    result.assert_outcomes(passed=1)
    assert json.loads((repo.path / "head.json").read_text()) > alone  # a second set of copies
    assert vs_base(repo.path / "r.json")["test_rotated"]["verdict"] in ("same", "undecided")
