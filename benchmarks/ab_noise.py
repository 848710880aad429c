"""How often does ``--roofline-against`` catch a slower kernel, and how often does it cry wolf?

A temporary git repository holds a kernel module and three marked tests (NumPy, cold, on this CPU):
``add`` (4M fp32, about 3 ms), ``scale`` (1M fp32, under a millisecond) and ``total`` (a sum of 4M
fp32). Its base commit is followed by a head commit in which one kernel does ``--slowdown`` times
the work (``add`` adds a further share of its arrays again). Each job is one pytest process:

- **detection**: ``pytest --roofline-against HEAD~1`` (enforce mode): the slowed test must be
  ``slower`` and fail, the other two neither;
- **A/A**: ``pytest --roofline-against HEAD`` on the head: no test may be ``slower``.

Printed: per job, each test's verdict and ratio; then the detection rate and the false alarms, and
the cost of a paired job against a plain ``pytest`` of the same tests, both timed as whole processes
in the same run, interleaved. ``--neighbour KIND`` runs every job beside
``../shared/tools/neighbour.py --kind KIND``.

    python benchmarks/ab_noise.py [--jobs 10] [--aa-jobs 20] [--slowdown 1.2] [--neighbour mem|mix]

Run it on an otherwise quiet machine (no helpers, no other benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNELS = """
import numpy as np


def add(x, y, z):
    np.add(x, y, out=z)
    if EXTRA:  # the head's extra work: a further share of the arrays, added again
        k = int(len(x) * EXTRA)
        np.add(x[:k], y[:k], out=z[:k])


def scale(x, z):
    np.multiply(x, 2.0, out=z)


def total(x):
    return np.sum(x)


EXTRA = {extra!r}
"""

TESTS = """
import numpy as np
import pytest

import kernels

N, SMALL = 4_000_000, 1_000_000
x, y, z = (np.random.default_rng(i).random(N, dtype=np.float32) for i in range(3))
s, t = (np.random.default_rng(i).random(SMALL, dtype=np.float32) for i in range(2))


@pytest.mark.speed_of_light("elementwise", n=N, inputs=2, dtype="fp32", min_fraction=0.02)
def test_add(roofline):
    roofline(kernels.add, x, y, z)


@pytest.mark.speed_of_light("elementwise", n=SMALL, inputs=1, dtype="fp32", min_fraction=0.02)
def test_scale(roofline):
    roofline(kernels.scale, s, t)


@pytest.mark.speed_of_light("reduction", n=N, dtype="fp32", min_fraction=0.02)
def test_total(roofline):
    roofline(kernels.total, x)
"""


#: the selections whose paired cost is timed against a plain run of the same selection (issue 41 item 6:
#: at most 3x for kernels over 1 ms, 4x for sub-millisecond ones)
COST_SELECTIONS = {
    "all three": (),
    "over 1 ms (add, total)": ("-k", "add or total"),
    "sub-millisecond (scale)": ("-k", "scale"),
}
COST_TARGETS = {"all three": "-", "over 1 ms (add, total)": "3x", "sub-millisecond (scale)": "4x"}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], cwd=root, check=True,
                   capture_output=True)  # fmt: skip


def make_repo(root: Path, slowdown: float) -> None:
    (root / "kernels.py").write_text(KERNELS.format(extra=0.0))
    (root / "test_kernels.py").write_text(TESTS)
    (root / "pytest.ini").write_text("[pytest]\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    (root / "kernels.py").write_text(KERNELS.format(extra=round(slowdown - 1, 6)))
    git(root, "commit", "-q", "-am", "head: add does more work")


#: where ``--keep`` copies each job's JSON report (its rounds in ``vs_base``), numbered in order
KEEP: list[Path] = []


def job(root: Path, *options: str) -> tuple[dict[str, dict[str, object]], dict[str, str], float]:
    """Each test's vs_base record and outcome, and the process's wall time."""
    report = root / "report.json"
    report.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "--roofline-json",
         str(report), *options], cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    outcomes = {}
    for line in done.stdout.splitlines():
        for word in ("PASSED", "FAILED"):
            if line.startswith(word + " "):
                outcomes[line.split("::")[-1].split(" ")[0]] = word
    if KEEP:
        shutil.copy(report, KEEP[0] / f"job{len(list(KEEP[0].iterdir())) + 1:03d}.json")
    records = json.loads(report.read_text())["measurements"]
    return {r["nodeid"].split("::")[-1]: r.get("vs_base") or {} for r in records}, outcomes, took


def show(kind: str, i: int, found: dict[str, dict[str, object]], outcomes: dict[str, str]) -> None:
    cells = [
        f"{name.removeprefix('test_')} {vs.get('verdict')} {float(str(vs.get('ratio', 'nan'))):.3f}"
        f"{' FAILED' if outcomes.get(name) == 'FAILED' else ''}"
        for name, vs in sorted(found.items())
    ]
    print(f"{kind} {i + 1:>2}: " + "  ".join(cells), flush=True)
    # why a test was not decided (the load, the floor, the budget), or why identical code read slower
    for name, vs in sorted(found.items()):
        if vs.get("verdict") == "undecided" or (kind.startswith("A/A") and vs.get("verdict") == "slower"):
            said = f"{vs.get('reason')} ({vs.get('pairs')} pairs)"
            print(f"    {name.removeprefix('test_')}: {said}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10, help="detection jobs (default: 10)")
    parser.add_argument("--aa-jobs", type=int, default=20, help="A/A jobs (default: 20)")
    parser.add_argument(
        "--slowdown", type=float, default=1.2, help="the head's add, times the work (default: 1.2)"
    )
    parser.add_argument("--neighbour", choices=("mem", "cpu", "mix"), default=None)
    parser.add_argument("--keep", type=Path, help="a folder to copy each job's JSON report into")
    parser.add_argument("--cost-jobs", type=int, default=3, help="paired and plain jobs timed (default: 3)")
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        KEEP.append(args.keep)
    beside = None
    if args.neighbour:
        tool = Path(__file__).resolve().parents[2] / "shared" / "tools" / "neighbour.py"
        beside = subprocess.Popen([sys.executable, str(tool), "--kind", args.neighbour, "--seconds", "3600"],
                                  start_new_session=True)  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            make_repo(root, args.slowdown)
            caught = false = failed_others = 0
            for i in range(args.jobs):
                found, outcomes, _ = job(root, "--roofline-against", "HEAD~1")
                show("detect", i, found, outcomes)
                slower = found["test_add"].get("verdict") == "slower"
                caught += slower and outcomes.get("test_add") == "FAILED"
                others = [n for n in ("test_scale", "test_total") if found[n].get("verdict") == "slower"]
                false += len(others)
                failed_others += sum(outcomes.get(n) == "FAILED" for n in ("test_scale", "test_total"))
            aa_false = 0
            for i in range(args.aa_jobs):
                found, outcomes, _ = job(root, "--roofline-against", "HEAD")
                show("A/A   ", i, found, outcomes)
                aa_false += sum(vs.get("verdict") == "slower" for vs in found.values())
            costs: dict[str, tuple[list[float], list[float]]] = {kind: ([], []) for kind in COST_SELECTIONS}
            for _ in range(args.cost_jobs):  # interleaved: a paired job, then a plain one, per selection
                for kind, select in COST_SELECTIONS.items():
                    paired, plain = costs[kind]
                    against = ("--roofline-against", "HEAD~1")
                    paired.append(job(root, *select, *against, "--roofline-mode=report")[2])
                    plain.append(job(root, *select, "--roofline-mode=report")[2])
    finally:
        if beside is not None:
            os.killpg(beside.pid, signal.SIGKILL)
            beside.wait()
    where = f" beside neighbour --kind {args.neighbour}" if args.neighbour else ""
    print(f"\n{args.slowdown}x slower add{where}:")
    print(f"  caught (slower and failed): {caught} of {args.jobs} jobs")
    print(f"  unchanged tests called slower: {false} of {2 * args.jobs}; failed: {failed_others}")
    print(f"  A/A: tests called slower: {aa_false} of {3 * args.aa_jobs} (in {args.aa_jobs} jobs)")
    for kind, (paired, plain) in costs.items():
        if not paired:
            continue
        ratios = [p / q for p, q in zip(paired, plain, strict=True)]
        print(
            f"  cost, {kind}: paired job {min(paired):.1f}-{max(paired):.1f} s, plain"
            f" {min(plain):.1f}-{max(plain):.1f} s; paired/plain {min(ratios):.2f}-{max(ratios):.2f},"
            f" median {statistics.median(ratios):.2f} (target {COST_TARGETS[kind]})"
        )


if __name__ == "__main__":
    main()
