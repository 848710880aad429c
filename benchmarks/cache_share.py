"""Cold kernels near the last-level cache over fresh calibrations: does any read faster than light?

The share of the last-level cache a process gets moves between runs on a shared VM (its sysfs says
32 MiB; sweeps found 32, 17 and 19 MiB), and rotation, the flush and "past the cache" are sized
from it. Each round here is a fresh calibration (its own cache folder) followed by a pytest process
that measures ``np.copyto`` of fp64 arrays moving 16 to 40 MiB, cold, in report mode. Printed per
round: the last level's capacity the calibration kept, what each sweep saw, and per size the cold
method and attained; at the end, how many verdicts were faster than light (target: none).

    python benchmarks/cache_share.py [--rounds 5] [--neighbour-round 5] [--kind mem]

``--neighbour-round N`` runs round N (calibration and kernels) beside ``../shared/tools/neighbour.py
--kind KIND``. Run it on an otherwise quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

MiB = 2**20
SIZES_MIB = (16, 20, 24, 28, 32, 36, 40)

KERNELS = """
import numpy as np
import pytest

SIZES_MIB = {sizes}


@pytest.mark.parametrize("mib", SIZES_MIB)
def test_copy(roofline, mib):
    n = mib * 2**20 // 16  # two fp64 arrays: the op moves n * 16 bytes
    src, dst = np.ones(n), np.zeros(n)
    roofline(np.copyto, dst, src, op="copy", n=n, dtype="float64", min_fraction=0.01)
"""


def neighbour(kind: str) -> subprocess.Popen[bytes]:
    tool = Path(__file__).resolve().parents[2] / "shared" / "tools" / "neighbour.py"
    # a session of its own: its worker processes go with it (os.killpg)
    return subprocess.Popen(
        [sys.executable, str(tool), "--kind", kind, "--seconds", "600"], start_new_session=True
    )


def one_round(folder: Path) -> tuple[str, list[dict[str, object]]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(folder / "cache")}
    calibrated = subprocess.run(
        [str(Path(sys.executable).parent / "roofline"), "calibrate"], env=env, capture_output=True, text=True
    )
    if calibrated.returncode != 0:
        sys.exit(f"roofline calibrate failed:\n{calibrated.stdout}\n{calibrated.stderr}")
    caches = [line.strip() for line in calibrated.stdout.splitlines() if line.strip().startswith("l3")]
    (folder / "test_kernels.py").write_text(KERNELS.format(sizes=SIZES_MIB))
    report = folder / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_kernels.py",
         "--roofline-mode", "report", "--roofline-json", str(report)],
        cwd=folder, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"pytest failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return (caches[0] if caches else "l3: not listed"), json.loads(report.read_text())["measurements"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, metavar="N", help="fresh calibrations (default: 5)")
    parser.add_argument(
        "--neighbour-round", type=int, default=5, metavar="N",
        help="the round run beside a neighbour (default: 5; 0: none)",
    )  # fmt: skip
    parser.add_argument("--kind", default="mem", choices=("mem", "cpu", "mix"), help="the neighbour's kind")
    args = parser.parse_args()
    ftl = total = 0
    for i in range(1, args.rounds + 1):
        beside = neighbour(args.kind) if i == args.neighbour_round else None
        try:
            with tempfile.TemporaryDirectory() as tmp:
                caches, records = one_round(Path(tmp))
        finally:
            if beside is not None:
                os.killpg(beside.pid, signal.SIGKILL)
                beside.wait()
        print(f"round {i}{f' beside neighbour --kind {args.kind}' if beside else ''}: {caches}")
        for record in sorted(records, key=lambda r: float(r["bytes"])):  # type: ignore[arg-type]
            verdict = str(record["verdict"])
            total += 1
            ftl += verdict == "faster-than-light"
            print(
                f"   {float(record['bytes']) / MiB:5.0f} MiB  {record['cold_method']!s:10}"  # type: ignore[arg-type]
                f"  attained {float(record['attained']):6.3f}  {verdict}"  # type: ignore[arg-type]
            )
    print(f"faster than light: {ftl} of {total} verdicts")


if __name__ == "__main__":
    main()
