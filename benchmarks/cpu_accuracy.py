"""Does the engine agree with :mod:`timeit`, and what does it cost?

For three numpy kernels (a 2^23 float64 copy and add, a 512³ float64 matmul) this prints the
engine's median per-call time with ``flush=False`` (``timeit`` cannot flush, so this is the
apples-to-apples figure), the median of ``timeit.Timer.repeat`` over the same kernel in the same
process (``number`` from ``autorange``), their ratio, the wall time each took, and, for
information, the engine's default (flushed, cold-cache) median. Engine and ``timeit`` take turns,
:data:`ROUNDS` times each, and the medians of the rounds are compared: on a shared machine whose
speed drifts by tens of percent over seconds (BLAS above all), one back-to-back pair can differ
by that drift alone; the per-round ratios are printed so the drift is visible.

Run from the repository root: ``python benchmarks/cpu_accuracy.py``. Expect ratios within
0.9-1.1 and under 1 s of engine wall time per kernel.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from pytest_roofline.timing import Policy, measure
from pytest_roofline.timing.cpu import last_level_cache_bytes
from pytest_roofline.units import seconds as format_seconds

N = 2**23
M = 512
TIMEIT_REPEATS = 7
ROUNDS = 3


def kernels() -> list[tuple[str, Callable[..., object], tuple[object, ...]]]:
    rng = np.random.default_rng(0)
    a, b, c = (rng.random(N) for _ in range(3))
    x, y, z = (rng.random((M, M)) for _ in range(3))
    return [
        ("copy 2^23 f64", np.copyto, (c, a)),
        ("add 2^23 f64", np.add, (a, b, c)),
        ("matmul 512³ f64", np.matmul, (x, y, z)),
    ]


def timeit_median(fn: Callable[..., object], args: tuple[object, ...]) -> tuple[float, float]:
    """Median seconds per call over ``Timer.repeat``, and the wall time it took (autorange included)."""
    start = time.perf_counter()
    timer = timeit.Timer(lambda: fn(*args))
    number, _ = timer.autorange()
    runs = timer.repeat(repeat=TIMEIT_REPEATS, number=number)
    return statistics.median(runs) / number, time.perf_counter() - start


def main() -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    print(
        f"numpy {np.__version__}; {os.cpu_count()} CPUs, load average {load};"
        f" last-level cache {last_level_cache_bytes() / 2**20:.0f} MiB"
    )
    header = (
        f"{'kernel':<16} {'engine':>10} {'timeit':>10} {'ratio':>6} {'rounds':>17} {'eng wall':>9}"
        f" {'ti wall':>8} {'n':>4} {'stop':>9} | {'flushed':>10} {'n':>3} {'wall':>6} {'stop':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, args in kernels():
        warm, reference, timeit_wall = [], [], []
        for _ in range(ROUNDS):  # taking turns, so a drift of the machine's speed hits both alike
            warm.append(measure(fn, *args, policy=Policy(flush=False)))
            ref, wall = timeit_median(fn, args)
            reference.append(ref)
            timeit_wall.append(wall)
        engine_s = statistics.median(m.time_s for m in warm)
        reference_s = statistics.median(reference)
        rounds = "/".join(f"{m.time_s / ref:.2f}" for m, ref in zip(warm, reference, strict=True))
        slowest = max(warm, key=lambda m: m.wall_s)
        cold = measure(fn, *args)
        print(
            f"{name:<16} {format_seconds(engine_s):>10} {format_seconds(reference_s):>10}"
            f" {engine_s / reference_s:>6.3f} {rounds:>17} {slowest.wall_s:>8.3f}s"
            f" {statistics.median(timeit_wall):>7.2f}s {slowest.stats.n:>4} {slowest.stop_reason.value:>9} |"
            f" {format_seconds(cold.time_s):>10} {cold.stats.n:>3} {cold.wall_s:>5.2f}s"
            f" {cold.stop_reason.value:>9}"
        )


if __name__ == "__main__":
    main()
