"""``--roofline-against REF`` end to end: a repository of three marked tests, two commits, each side
timed on a fake clock (a kernel's ``cost`` is its time per call), the base in a real second process.

Nothing here is timed for real: the verdicts follow from the scripted costs, so each is certain.
"""

from __future__ import annotations

import json
import os
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


@pytest.fixture
def folders(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The head: plain folders, no git (the base a sibling folder holding the same tests, b cheaper)."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_kernels=TESTS, kernels=kernels(**{**BASE, "b": 2.4e-3}))
    base = tmp_path_factory.mktemp("base")
    for name in ("conftest.py", "test_kernels.py"):
        (base / name).write_text((pytester.path / name).read_text())
    (base / "kernels.py").write_text(kernels(**BASE))
    return base


def test_a_base_folder_outside_the_head_pairs_each_test_with_its_own(
    pytester: pytest.Pytester, folders: Path
) -> None:
    """A base that is no commit: a folder holding the base's tests, beside the head's."""
    result = pytester.runpytest(f"--roofline-against={folders}", "--roofline-json=r.json")
    result.assert_outcomes(passed=2, failed=1)
    found = vs_base(pytester.path / "r.json")
    assert [found[name]["verdict"] for name in ("test_a", "test_b", "test_c")] == ["same", "slower", "same"]


def test_a_base_folder_given_apart_that_moved_the_rootdir_is_a_usage_error(
    pytester: pytest.Pytester, folders: Path
) -> None:
    """As its own argument, pytest reads DIR as a test path when it picks the rootdir (before any
    plugin's options are known): here a folder above both, where no node id matches the base's (GPU
    run 2026-11-28: two copies of a test folder in /tmp compared as ``2 new; 2 gone``)."""
    result = pytester.runpytest("--roofline-against", str(folders))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--roofline-against {folders}: pytest read * as a test path when it chose the rootdir*"
         f"write --roofline-against={folders}, or set roofline_against in the ini file"]
    )  # fmt: skip


def test_a_base_folder_given_apart_inside_the_tests_folder_moves_nothing(
    pytester: pytest.Pytester, folders: Path
) -> None:
    inside = pytester.path / "base"
    folders.rename(inside)
    result = pytester.runpytest("test_kernels.py", "--roofline-against", "base", "--roofline-json=r.json")
    result.assert_outcomes(passed=2, failed=1)
    assert vs_base(pytester.path / "r.json")["test_b"]["verdict"] == "slower"


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


POOLED = """
import json
import os
import os

import numpy as np
import pytest

import kernels

x = np.arange(2**20, dtype=np.float32)  # 4 MiB: rotated over copies of it
z = np.zeros_like(x)


@pytest.mark.speed_of_light("copy", n=2**20, dtype="fp32", min_fraction=0.01)
def test_pooled(roofline):
    roofline(kernels.scale, x, z)
    side = "base" if os.environ.get("ROOFLINE_FOLLOW_FD") else "head"
    with open(os.path.join(os.environ["SEEN_DIR"], f"{side}.json"), "w") as out:
        json.dump({"calls": len(kernels.SEEN), "in_pool": sum(kernels.SEEN), "cpus": kernels.CPUS,
                   "own_result": bool(np.array_equal(z, 2 * x))}, out)
"""

SMALL_CACHE_CPU = """
from pytest_roofline import Device, Figure, Precision, Source, Unit


def pytest_roofline_device(config, spec):  # this CPU, timed for real; a small cache: few copies
    return Device(
        key="small-cache-cpu", name="Small Cache CPU", kind="cpu",
        peaks={(Precision.FP32, Unit.VECTOR): Figure(1e11, Source.DATASHEET)},
        bandwidth=Figure(1e10, Source.DATASHEET), llc_bytes=2**20, cores=1,
    )
"""


def against_itself_on_this_cpu(
    pytester: pytest.Pytester, max_time: float, *options: str, **files: str
) -> pytest.RunResult:
    """``files`` committed as the base, on this CPU with a small cache, then compared with itself in
    report mode (``--roofline-max-time=max_time``, no latency floor): the pytester run's result."""
    pytester.makepyfile(**files)
    pytester.makeconftest(SMALL_CACHE_CPU)
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "-A")
    git(pytester.path, "commit", "-q", "-m", "base")
    return pytester.runpytest(
        "--roofline-against", "HEAD", "--roofline-mode=report", f"--roofline-max-time={max_time}",
        "--roofline-latency-floor=off", *options,
    )  # fmt: skip


SCALE = """
import os

import numpy as np

SEEN = []
CPUS = []


def in_pool(a):
    address = a.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            low, high = (int(end, 16) for end in line.split()[0].split("-"))
            if low <= address < high:
                return "roofline-pool" in line
    return False


def scale(x, z):
    SEEN.append(in_pool(x) and in_pool(z))
    CPUS.append(sorted(os.sched_getaffinity(0)))
    np.multiply(x, 2, out=z)
"""


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the shared pool needs memfd_create (Linux)")
@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2, reason="needs 2 CPUs")
def test_both_sides_time_their_kernels_on_copies_in_the_pool_they_share_and_on_one_cpu(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # where each process's own memory landed moved its times by 10-20% on a shared VM: every timed
    # call of either side runs on copies carved from the one pool, none on the caller's arrays, which
    # still get the kernel's results (one untimed call); and which CPU each process ran on moved its
    # times by up to 15%: a single-threaded kernel's rounds run on one CPU, the same on both sides
    monkeypatch.setenv("SEEN_DIR", str(pytester.path))  # the base's test runs in its own checkout
    result = against_itself_on_this_cpu(pytester, 0.5, test_pooled=POOLED, kernels=SCALE)
    result.assert_outcomes(passed=1)
    for side in ("head", "base"):
        seen = json.loads((pytester.path / f"{side}.json").read_text())
        # the untimed call on the caller's arrays is the one call not in the pool
        assert seen["calls"] > 2, (side, seen)
        assert seen["in_pool"] == seen["calls"] - 1, (side, seen)
        assert seen["own_result"], side
    head = json.loads((pytester.path / "head.json").read_text())["cpus"]
    base = json.loads((pytester.path / "base.json").read_text())["cpus"]
    assert len(head[0]) > 1  # the head's own measurement: where the OS put it
    assert len({tuple(c) for c in base[1:]}) == 1  # the base's rounds, on one CPU ...
    assert len(base[-1]) == 1
    assert base[-1] == head[-1]  # ... the head's rounds' CPU


TWO_CALLS = """
import json
import os
import time

import numpy as np
import pytest

import kernels

x = np.arange(2**20, dtype=np.float32)
z = np.zeros_like(x)


@pytest.mark.speed_of_light("copy", n=2**20, dtype="fp32", min_fraction=0.01)
def test_two_calls(roofline):
    side = "base" if os.environ.get("ROOFLINE_FOLLOW_FD") else "head"
    roofline(kernels.scale, x, z, name="first")
    if side == "base":  # the base's work before its second call: slow; nothing of the head's timed beside it
        time.sleep(0.5)
        prepared = time.monotonic()
    kernels.CALLS.clear()
    roofline(kernels.scale, x, z, name="second")
    with open(os.path.join(os.environ["SEEN_DIR"], f"{side}.json"), "w") as out:
        json.dump({"calls": kernels.CALLS, "prepared": prepared if side == "base" else None}, out)
"""

TIMESTAMPED = """
import time

import numpy as np

CALLS = []


def scale(x, z):
    CALLS.append(time.monotonic())  # CLOCK_MONOTONIC: one clock for both processes
    np.multiply(x, 2, out=z)
"""


def test_the_head_times_nothing_while_the_base_goes_on_to_its_next_call(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # after a call's rounds, the base's test goes on to its next call (its own code, its copies) while
    # the head's does: the head's measurement of that call waits until the base is ready there
    monkeypatch.setenv("SEEN_DIR", str(pytester.path))
    report = pytester.path / "r.json"
    result = against_itself_on_this_cpu(
        pytester, 0.5, f"--roofline-json={report}", test_two_calls=TWO_CALLS, kernels=TIMESTAMPED
    )
    result.assert_outcomes(passed=1)
    head = json.loads((pytester.path / "head.json").read_text())["calls"]
    prepared = json.loads((pytester.path / "base.json").read_text())["prepared"]
    before = [t for t in head if t < prepared]
    # the head's one untimed call on its own arrays (its copies hold the timed ones) may come first
    assert len(before) <= 1, f"{len(before)} of the head's {len(head)} calls ran while the base prepared"
    assert len(head) - len(before) > 10  # its measurement and its rounds came after
    records = json.loads(report.read_text())["measurements"]
    assert [r["vs_base"]["rounds"] != [] for r in records] == [True, True]  # both calls were paired


RAISES_LATER = """
import os

import numpy as np

CALLS = []


def scale(x, z):
    CALLS.append(1)
    if os.environ.get("ROOFLINE_FOLLOW_FD") is None and len(CALLS) > 3:  # the head's, once it times
        raise RuntimeError("head broke")
    np.multiply(x, 2, out=z)


def twice(x, z):
    np.multiply(x, 2, out=z)
"""

TWO_TESTS = """
import numpy as np
import pytest

import kernels

x = np.arange(2**20, dtype=np.float32)
z = np.zeros_like(x)


@pytest.mark.speed_of_light("copy", n=2**20, dtype="fp32", min_fraction=0.01)
def test_breaks(roofline):
    roofline(kernels.scale, x, z)


@pytest.mark.speed_of_light("copy", n=2**20, dtype="fp32", min_fraction=0.01)
def test_next(roofline):
    roofline(kernels.twice, x, z)
"""


def test_a_head_kernel_that_raises_after_the_base_is_ready_ends_the_base_s_test_too(
    pytester: pytest.Pytester,
) -> None:
    # the base stood ready at its call when the head's kernel raised in its measurement: the base is
    # told to skip that call, and the next test pairs as usual
    report = pytester.path / "r.json"
    result = against_itself_on_this_cpu(
        pytester, 0.3, f"--roofline-json={report}", test_two=TWO_TESTS, kernels=RAISES_LATER
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: head broke*"])
    paired = vs_base(report)["test_next"]  # timed for real: which verdict is the machine's to say
    assert paired["verdict"] not in ("new", "gone"), paired
    assert len(paired["rounds"]) >= 4, paired
