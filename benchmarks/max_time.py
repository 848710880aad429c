"""Does ``--roofline-max-time`` bound what a measurement costs, and is the budget used?

Two checks, each a pytest process per setting, its figures read from the JSON report:

1. The 0.4 s closure ``roofline(lambda: time.sleep(0.4), op="copy", n=1 << 20, dtype="float64")``
   (nothing to rotate, so flushed; a miss) under ``--roofline-max-time 1``, in enforce mode (a miss
   is measured again) and report mode. Printed: the ``wall_s`` of the test's records summed (every
   measurement of the test, the copies and the latency floor it made included), the measurements,
   the samples, the pytest run's own wall time, and the record's ``budget_note``. Targets (issue 28):
   enforce <= 2.4 s, report <= 1.2 s.
2. A cold ``np.add`` of about 30 µs (``--n`` elements of fp64, rotated) at max-time 0.15, 0.2,
   0.21, 0.25 and 0.3 s: its samples, the stop reason, ``wall_s`` and the share of the budget it
   used. Target: the sample count grows with the budget, no cliff; a measurement that stopped for
   time used most of its budget.

    python benchmarks/max_time.py [--max-time 1] [--budgets 0.15 0.2 0.21 0.25 0.3] [--n 49152]

Run it on a quiet machine: the figures of a busy one are not evidence.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CLOSURE = """
import time

def test_closure(roofline):
    roofline(lambda: time.sleep(0.4), op="copy", n=1 << 20, dtype="float64")
"""

COLD_ADD = """
import numpy as np

def test_cold_add(roofline):
    x, y, out = np.ones({n}), np.ones({n}), np.empty({n})
    roofline(np.add, x, y, kwargs={{"out": out}}, op="elementwise", n={n}, inputs=2, dtype="fp64")
"""


def run(source: str, folder: Path, name: str, *options: str) -> tuple[float, list[dict[str, Any]]]:
    """The pytest run's wall seconds, and its JSON report's records."""
    test = folder / f"test_{name}.py"
    test.write_text(source)
    out = folder / f"{name}.json"
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(test),
        f"--roofline-json={out}", *options,
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if not out.exists():  # a miss fails the test in enforce mode; no report is a failure of the run
        sys.exit(f"max_time.py: {name} wrote no report:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    records: list[dict[str, Any]] = json.loads(out.read_text())["measurements"]
    return wall, records


def closure(max_time: float, folder: Path) -> None:
    print(f"0.4 s closure under --roofline-max-time {max_time:g}:")
    for mode, target in (("enforce", 2.4 * max_time), ("report", 1.2 * max_time)):
        wall, records = run(
            CLOSURE, folder, f"closure_{mode}", f"--roofline-mode={mode}", f"--roofline-max-time={max_time}"
        )
        summed = sum(r["wall_s"] for r in records)
        measurements = sum(r["measurements"] for r in records)
        samples = sum(len(r["samples_s"]) for r in records)
        verdict = "within" if summed <= target else "PAST"
        print(
            f"  {mode:8} wall_s summed {summed:6.3f} s ({verdict} {target:.1f} s),"
            f" {measurements} measurement(s), {samples} sample(s) judged, pytest run {wall:5.2f} s"
        )
        for r in records:
            if r.get("budget_note"):
                print(f"           {r['budget_note']}")


def cold_add(budgets: list[float], n: int, folder: Path) -> None:
    print(f"cold np.add of {n} fp64 (rotated) by max-time, report mode:")
    print("  max-time  samples  stop        wall_s   used   low confidence  cache")
    for budget in budgets:
        options = ("--roofline-mode=report", f"--roofline-max-time={budget}")
        _, records = run(COLD_ADD.format(n=n), folder, "cold_add", *options)
        r = records[0]
        wall = r["wall_s"]
        print(
            f"  {budget:8.3f}  {len(r['samples_s']):7}  {r['stop_reason']:10}  {wall:6.3f}"
            f"  {wall / budget:5.0%}  {r['low_confidence']!s:14}  {r['cache']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-time", type=float, default=1.0, help="the closure's budget (default: 1)")
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.15, 0.2, 0.21, 0.25, 0.3])
    parser.add_argument("--n", type=int, default=49152, help="np.add's elements (about 30 µs cold)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        closure(args.max_time, folder)
        cold_add(args.budgets, args.n, folder)


if __name__ == "__main__":
    main()
