"""Does the engine agree with pytest-benchmark and timeit, cold and warm, and what does it cost?

For memory- and compute-bound numpy kernels from ~1 µs to ~20 ms, each round times every kernel
four ways, one after the other, so the machine's drift hits them alike:

- the engine **warm** (``cache=WARM``): the figure pytest-benchmark and timeit also measure;
- the engine **cold**, with the plugin's flush choice (:mod:`pytest_roofline.timing.flushing`:
  flushed below 2x the last-level cache, unflushed above, and never a batch);
- pytest-benchmark with its defaults (its ``BenchmarkFixture``, driven in-process);
- ``timeit`` (``autorange``, then 7 repeats).

Printed per kernel: the medians of the rounds, warm/pytest-benchmark, warm/timeit and cold/warm
ratios (the median of the per-round ratios, with its distribution-free 95% interval), and the
wall time each method took. Targets: warm within ±5% of pytest-benchmark's median from 20 µs up;
cold/warm near 1 once the working set is past the threshold (the flush is not needed there).

    python benchmarks/cpu_accuracy.py [--rounds 3] [--only '2^16' --only 'matmul 64']
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from reference import pytest_benchmark_median

from pytest_roofline.model.policy import Policy
from pytest_roofline.model.stats import median_ci_ranks
from pytest_roofline.model.units import seconds as format_seconds
from pytest_roofline.timing.cache import CachePlan
from pytest_roofline.timing.cpu import CpuBackend, last_level_cache_bytes
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.flushing import choose_flush

METHODS = ("warm", "cold", "pytest-benchmark", "timeit")


def kernels() -> list[tuple[str, float, Callable[[], object]]]:
    """(name, bytes the op moves, the call)."""
    rng = np.random.default_rng(0)
    out: list[tuple[str, float, Callable[[], object]]] = []
    for n in (256, 4096, 65536, 1 << 20, 1 << 22):
        a, b, c = (rng.random(n) for _ in range(3))
        out.append((f"add 2^{n.bit_length() - 1} f64", 24.0 * n, lambda a=a, b=b, c=c: np.add(a, b, out=c)))
    for m in (64, 256, 512, 1024):
        x, y, z = (rng.random((m, m)) for _ in range(3))
        out.append((f"matmul {m}³ f64", 24.0 * m * m, lambda x=x, y=y, z=z: np.matmul(x, y, out=z)))
    return out


def timeit_median(fn: Callable[[], object]) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return statistics.median(timer.repeat(repeat=7, number=number)) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only", action="append", metavar="TEXT", help="only the kernels whose name holds TEXT (repeatable)"
    )
    args = parser.parse_args()

    backend = CpuBackend()
    llc = last_level_cache_bytes()
    work = [k for k in kernels() if not args.only or any(text in k[0] for text in args.only)]
    if not work:
        names = ", ".join(k[0] for k in kernels())
        parser.error(f"--only {' '.join(args.only)}: no kernel matches; kernels: {names}")
    times: dict[tuple[str, str], list[float]] = {}
    walls: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for name, nbytes, fn in work:
            methods = METHODS if r % 2 == 0 else tuple(reversed(METHODS))
            for method in methods:
                start = time.perf_counter()
                if method in ("warm", "cold"):
                    choice = choose_flush(nbytes, llc, requested=method == "cold")
                    cold = "flush" if choice.flush else "past-cache" if method == "cold" else None
                    m = measure(fn, policy=Policy(), backend=backend, cache=CachePlan(cold, choice.note))
                    value = m.time_s
                elif method == "pytest-benchmark":
                    value = pytest_benchmark_median(fn)
                else:
                    value = timeit_median(fn)
                walls.setdefault((name, method), []).append(time.perf_counter() - start)
                times.setdefault((name, method), []).append(value)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(
        f"{args.rounds} interleaved rounds; last-level cache {llc / 2**20:.0f} MiB; medians of the rounds;"
        " ratios: median of the per-round ratios [its 95% interval]"
    )
    print(
        f"{'kernel':<18} {'warm':>9} {'cold':>9} {'pytest-bm':>9} {'timeit':>9}  {'warm/pbm':>16}"
        f" {'warm/timeit':>16} {'cold/warm':>16}  wall: warm / cold / pbm / timeit"
    )

    def ratio(name: str, a: str, b: str) -> str:
        per_round = sorted(x / y for x, y in zip(times[(name, a)], times[(name, b)], strict=True))
        lo, hi = median_ci_ranks(len(per_round))
        return f"{statistics.median(per_round):.3f} [{per_round[lo - 1]:.2f}-{per_round[hi - 1]:.2f}]"

    for name, _, _ in work:
        med = {m: statistics.median(times[(name, m)]) for m in METHODS}
        wall = " / ".join(f"{statistics.median(walls[(name, m)]):.2f}s" for m in METHODS)
        print(
            f"{name:<18} "
            + " ".join(f"{format_seconds(med[m]):>9}" for m in METHODS)
            + f"  {ratio(name, 'warm', 'pytest-benchmark'):>16} {ratio(name, 'warm', 'timeit'):>16}"
            f" {ratio(name, 'cold', 'warm'):>16}  {wall}"
        )


if __name__ == "__main__":
    main()
