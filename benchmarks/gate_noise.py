"""Does the regression gate hold across runs? False alarms on identical code, and slowed kernels caught.

Writes a suite of six kernels (``np.add`` and ``np.multiply`` of 2^16, 2^20 and 2^23 float32, the
red team's suite of issue 22), then:

1. saves ``--history`` runs of it as the baseline (``--roofline-save`` appends: the baseline keeps
   their median and their spread);
2. runs it ``--identical`` times unchanged and ``--slowed`` times with every kernel doing 1.5x and
   1.2x its work (the marker still names the original shape, so the kernel is 1.5x or 1.2x slower
   than the code the baseline measured), each run with ``--roofline-compare`` against the baseline as
   CI would, the three kinds of run interleaved in a shuffled order;
3. counts, from each run's JSON, what the gate said of each test (the same comparison the run's own
   verdict made: the JSON holds the records after any second measurement).

Printed: the identical runs in which any test was called a regression (the target is at most 1 in
20), and the share of slowed kernels called a regression at 1.5x (at least 8 in 9) and at 1.2x; the
run-to-run spread of each test's attained fraction over the identical runs; and each slowed
verdict's counts. ``--neighbour mem|cpu|mix`` runs the compared runs (not the baseline's) beside
``../shared/tools/neighbour.py``, as on a busy CI runner: a measurement it disturbs must read
inconclusive, never a regression.

    python benchmarks/gate_noise.py [--history 3] [--identical 20] [--slowed 9] [--seed 1] [--neighbour mem]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, not installed

from pytest_roofline.output.baseline import load_baseline  # noqa: E402
from pytest_roofline.output.comparison import Change, RegressionRule  # noqa: E402
from pytest_roofline.output.records import record_from_json  # noqa: E402

SUITE = """
import os

import numpy as np
import pytest

SLOW = float(os.environ.get("GATE_NOISE_SLOW", "1"))


@pytest.mark.parametrize("ufunc", [np.add, np.multiply], ids=["add", "multiply"])
@pytest.mark.parametrize("log2n", [16, 20, 23])
def test_kernel(roofline, ufunc, log2n):
    n = 2**log2n
    work = int(n * SLOW)  # a slowed kernel does more work than the shape it names
    a, b, c = (np.full(work, 1.5, dtype=np.float32) for _ in range(3))
    roofline(ufunc, a, b, c, op="elementwise", n=n, inputs=2, dtype="fp32", min_fraction=0.001)
"""

KINDS = {"identical": 1.0, "slowed 1.5x": 1.5, "slowed 1.2x": 1.2}


def run(folder: Path, slow: float, *extra: str) -> Path:
    """One pytest run of the suite at ``slow``; returns its JSON report."""
    out = folder / f"run-{time.monotonic_ns()}.json"
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
        "-p", "no:benchmark", str(folder / "test_gate_suite.py"), f"--roofline-json={out}", *extra,
    ]  # fmt: skip
    env = {**os.environ, "GATE_NOISE_SLOW": str(slow)}
    subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, check=False)
    if not out.exists():
        raise SystemExit(f"gate_noise: the run at slow={slow} wrote no JSON report")
    return out


def verdicts(baseline_path: Path, report: Path) -> dict[str, Change]:
    """What the gate said of each test of ``report`` against the baseline."""
    baseline = load_baseline(baseline_path)
    measured = (record_from_json(m).comparable for m in json.loads(report.read_text())["measurements"])
    records = [r for r in measured if r]
    return {c.test: c.change for c in RegressionRule().compare_all(baseline, records) if c.new is not None}


def attained(report: Path) -> dict[str, float]:
    return {r["nodeid"]: r["attained"] for r in json.loads(report.read_text())["measurements"]}


def start_neighbour(kind: str | None) -> subprocess.Popen[bytes] | None:
    """The shared synthetic neighbour, running until terminated (at most an hour)."""
    if kind is None:
        return None
    tool = ROOT.parent / "shared" / "tools" / "neighbour.py"
    if not tool.exists():
        raise SystemExit(f"gate_noise: --neighbour needs {tool}")
    # its own process group: it forks a worker per --procs, and stopping it must stop them all
    return subprocess.Popen(
        [sys.executable, str(tool), "--kind", kind, "--seconds", "3600"], start_new_session=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=3, help="runs the baseline keeps (default: 3)")
    parser.add_argument("--identical", type=int, default=20, help="unchanged runs (default: 20)")
    parser.add_argument("--slowed", type=int, default=9, help="runs at each slowdown (default: 9)")
    parser.add_argument("--seed", type=int, default=1, help="the shuffle of the runs' order")
    parser.add_argument("--neighbour", choices=("mem", "cpu", "mix"), help="load beside the compared runs")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "test_gate_suite.py").write_text(SUITE)
        baseline = folder / "base.json"
        started = time.monotonic()
        for _ in range(args.history):
            run(folder, 1.0, f"--roofline-save={baseline}")
        order = ["identical"] * args.identical + ["slowed 1.5x", "slowed 1.2x"] * args.slowed
        random.Random(args.seed).shuffle(order)
        seen: dict[str, list[dict[str, Change]]] = {kind: [] for kind in KINDS}
        fractions: dict[str, list[float]] = {}
        neighbour = start_neighbour(args.neighbour)
        try:
            for kind in order:
                report = run(folder, KINDS[kind], f"--roofline-compare={baseline}")
                seen[kind].append(verdicts(baseline, report))
                if kind == "identical":
                    for test, value in attained(report).items():
                        fractions.setdefault(test, []).append(value)
        finally:
            if neighbour is not None:
                os.killpg(neighbour.pid, signal.SIGTERM)
        elapsed = time.monotonic() - started

    beside = f"; compared runs beside a {args.neighbour} neighbour" if args.neighbour else ""
    runs = len(order) + args.history
    print(f"gate_noise: {runs} runs in {elapsed:.0f} s; baseline of {args.history} runs{beside}")
    print("run-to-run spread over the identical runs (sd of log attained):")
    for test, values in sorted(fractions.items()):
        spread = statistics.stdev(math.log(v) for v in values) if len(values) > 1 else 0.0
        print(f"  {test:<45} median {statistics.median(values):7.2%}  spread {spread:.3f}")
    alarms = sum(Change.REGRESSION in run.values() for run in seen["identical"])
    identical = len(seen["identical"])
    print(f"identical code: a regression in {alarms} of {identical} runs (target: at most 1 in 20)")
    for kind in ("slowed 1.5x", "slowed 1.2x"):
        by_test: dict[str, Counter[Change]] = {}
        for run_seen in seen[kind]:
            for test, change in run_seen.items():
                by_test.setdefault(test, Counter())[change] += 1
        for test, counted in sorted(by_test.items()):
            print(f"  {kind} {test:<45} caught {counted[Change.REGRESSION]} of {sum(counted.values())}")
        changes = Counter(change for run in seen[kind] for change in run.values())
        caught, total = changes[Change.REGRESSION], sum(changes.values())
        rate = caught / total if total else 0.0
        detail = ", ".join(f"{n} {change}" for change, n in changes.most_common())
        target = " (target: at least 8 in 9)" if kind == "slowed 1.5x" else ""
        print(f"{kind}: caught {caught} of {total} kernels ({rate:.0%}){target}; {detail}")


if __name__ == "__main__":
    main()
