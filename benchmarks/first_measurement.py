"""The first measurement of a process, against the second, and a kernel far past its time budget.

Two checks, each run in fresh pytest processes, their figures read from the JSON report:

1. **First against second.** A test file of two identical tests, ``roofline(np.add, x, y)`` on
   2M fp32 with no op and ``min_fraction=0.01`` (rotated: each call allocates its output, kept a
   cycle). In a fresh process the first cycle of outputs lands in pages never touched; before the
   warm-up waited for it, the first test read 7-10x the second in most processes. Printed per
   process: both times, their ratio, and the first's warm-up calls. Target (issue 40): the first
   within 15% of the second in every process.
2. **A 1 GiB kernel at max-time 0.2.** ``roofline(np.multiply, x, 2.0, out=z)``, x of 1 GiB fp32
   and ``z`` never written. Printed: the record's ``wall_s``, its ``budget_note``, and the pytest
   process's wall time. Target: one warm-up call (the first, which pays for ``z``'s page faults)
   and one sample.

    python benchmarks/first_measurement.py [--processes 10] [--max-time S] [--skip-large]

Run it on a quiet machine (no helpers, no other benchmark): a busy one's figures are not evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TWO_TESTS = """
import numpy as np
import pytest

x = np.random.default_rng(0).random(2_000_000, dtype=np.float32)
y = np.random.default_rng(1).random(2_000_000, dtype=np.float32)


@pytest.mark.speed_of_light(min_fraction=0.01)
def test_first(roofline):
    roofline(np.add, x, y)


@pytest.mark.speed_of_light(min_fraction=0.01)
def test_second(roofline):
    roofline(np.add, x, y)
"""

LARGE = """
import numpy as np
import pytest

x = np.ones(1 << 28, np.float32)  # 1 GiB
z = np.empty_like(x)  # never written: the first call pays its page faults


@pytest.mark.speed_of_light(min_fraction=0.01)
def test_large(roofline):
    roofline(np.multiply, x, 2.0, out=z)
"""


def run(folder: Path, source: str, *options: str) -> tuple[list[dict[str, Any]], float]:
    """The records of one fresh pytest process over ``source``, and its wall time."""
    (folder / "test_it.py").write_text(source)
    report = folder / "report.json"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py",
         "--roofline-json", str(report), *options],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"pytest failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(report.read_text())["measurements"], took


def first_against_second(processes: int, options: list[str]) -> None:
    print(
        f"1. first test against second, {processes} fresh processes (np.add, 2M fp32, rotated)"
        f" {' '.join(options)}"
    )
    print(f"{'process':>7}  {'first':>9}  {'second':>9}  {'first/second':>12}  first's samples")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(processes):
            records, _ = run(Path(tmp), TWO_TESTS, *options)
            by_name = {r["nodeid"].split("::")[-1]: r for r in records}
            first, second = by_name["test_first"], by_name["test_second"]
            ratio = first["time_s"] / second["time_s"]
            ratios.append(ratio)
            samples = ", ".join(f"{s * 1e3:.2f}" for s in first["samples_s"][:6])
            print(
                f"{i + 1:>7}  {first['time_s'] * 1e3:>7.3f}ms  {second['time_s'] * 1e3:>7.3f}ms"
                f"  {ratio:>12.3f}  {samples} ms ..."
            )
    within = sum(abs(r - 1) <= 0.15 for r in ratios)
    print(f"   within 15%: {within} of {processes}; ratios {min(ratios):.3f}..{max(ratios):.3f}")


def large_kernel() -> None:
    print("2. a 1 GiB np.multiply into an output never written, --roofline-max-time 0.2")
    with tempfile.TemporaryDirectory() as tmp:
        (record,), took = run(Path(tmp), LARGE, "--roofline-max-time", "0.2")
    print(
        f"   wall_s {record['wall_s']:.3f} s; pytest process {took:.2f} s;"
        f" time {record['time_s'] * 1e3:.1f} ms"
    )
    print(f"   budget_note: {record['budget_note']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--processes", type=int, default=10, metavar="N",
        help="fresh processes (default: 10; 0: the 1 GiB kernel alone)",
    )  # fmt: skip
    parser.add_argument("--skip-large", action="store_true", help="leave out the 1 GiB kernel")
    parser.add_argument(
        "--max-time", type=float, default=None, metavar="S",
        help="--roofline-max-time for the two tests (default: the plugin's, 1 s)",
    )  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    options = [] if args.max_time is None else ["--roofline-max-time", str(args.max_time)]
    if args.processes > 0:
        first_against_second(args.processes, options)
    if not args.skip_large:
        large_kernel()


if __name__ == "__main__":
    main()
