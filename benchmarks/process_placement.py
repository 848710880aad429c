"""Why ``--roofline-against`` shares its copies' memory and pins a kernel's rounds to one CPU.

Two processes take turns timing ``np.add`` of 4M fp32 (ABBA blocks, 12 calls a turn, the median
kept), identical code on both sides, so every job's ratio should be 1. Per job: the geometric mean
of the 24 paired ratios (head over base) and their spread. Modes, run in turns, ``--jobs`` each:

- ``own``: each process over arrays of its own;
- ``shared``: each over its own arrays carved from one memory file both map, its pages allocated in
  turns for the two sides (as :class:`pytest_roofline.timing.copies.SharedPool` does);
- ``pinned``: ``shared``, with both processes on CPU 0.

On our 2-core VM (2026-11-28): own 0.86-1.21, shared 0.98-1.03 (6 jobs each, a quiet hour); in a
noisier one, own 1.06-1.69, shared 0.96-1.07, pinned 0.96-1.05 (3 jobs each).

    python benchmarks/process_placement.py [--jobs 6] [--modes own shared pinned]
"""

from __future__ import annotations

import argparse
import math
import mmap
import os
import statistics
import subprocess
import sys
import time

import numpy as np

N = 4 * 1024 * 1024
NBYTES = 4 * N
SIDE = 3 * NBYTES
CHUNK = 2 * 1024 * 1024


def arrays(buffer: mmap.mmap, offset: int) -> list[np.ndarray]:
    return [np.ndarray((N,), np.float32, buffer=buffer, offset=offset + i * NBYTES) for i in range(3)]


def own() -> list[np.ndarray]:
    x, y = (np.random.rand(N).astype(np.float32) for _ in range(2))
    return [x, y, np.zeros_like(x)]


def measure(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    times = []
    for _ in range(12):
        start = time.perf_counter()
        np.add(x, y, out=z)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def side(mode: str, fd: int, half: int) -> list[np.ndarray]:
    if mode == "own":
        return own()
    if mode == "pinned":
        os.sched_setaffinity(0, {0})
    buffer = mmap.mmap(fd, 2 * SIDE)
    x, y, z = arrays(buffer, half * SIDE)
    x[:], y[:] = np.random.rand(N), np.random.rand(N)
    return [x, y, z]


def follower(mode: str, fd: int) -> None:
    x, y, z = side(mode, fd, 1)
    for line in sys.stdin:
        if line.strip() == "quit":
            return
        print(measure(x, y, z), flush=True)


def job(mode: str) -> tuple[float, float]:
    fd = -1
    if mode != "own":
        fd = os.memfd_create("placement")
        os.ftruncate(fd, 2 * SIDE)
        for offset in range(0, SIDE, CHUNK):  # the two halves' pages allocated in turns
            for half in (0, 1):
                os.posix_fallocate(fd, half * SIDE + offset, CHUNK)
    x, y, z = side(mode, fd, 0)
    base = subprocess.Popen(
        [sys.executable, __file__, "--follow", mode, str(fd)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, pass_fds=(fd,) if fd >= 0 else (),
    )  # fmt: skip
    assert base.stdin is not None
    assert base.stdout is not None

    def base_round() -> float:
        base.stdin.write("round\n")  # type: ignore[union-attr]
        base.stdin.flush()  # type: ignore[union-attr]
        return float(base.stdout.readline())  # type: ignore[union-attr]

    logs = []
    for _ in range(12):
        b1, h1, h2, b2 = base_round(), measure(x, y, z), measure(x, y, z), base_round()
        logs += [math.log(b1 / h1), math.log(b2 / h2)]  # head's speed over base's
    base.stdin.write("quit\n")
    base.stdin.flush()
    base.wait()
    if fd >= 0:
        os.close(fd)
    return math.exp(statistics.fmean(logs)), statistics.stdev(logs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--modes", nargs="+", choices=("own", "shared", "pinned"), default=["own", "shared"])
    parser.add_argument("--follow", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.follow:
        follower(args.follow[0], int(args.follow[1]))
        return
    ratios: dict[str, list[float]] = {mode: [] for mode in args.modes}
    for i in range(args.jobs):
        for mode in args.modes if i % 2 == 0 else reversed(args.modes):
            ratio, spread = job(mode)
            ratios[mode].append(ratio)
            print(f"job {i + 1} {mode:7s} ratio {ratio:.3f}  sd of log pairs {spread:.3f}", flush=True)
    print()
    for mode, values in ratios.items():
        print(f"{mode:7s} job ratios {min(values):.3f}-{max(values):.3f} (identical code: 1)")


if __name__ == "__main__":
    main()
