"""Does a kernel run slow right after other work, and does the engine's slow-start cut correct it?

A 2^16-element ``np.add`` (about 25 µs) is measured right after one of three kinds of other work:
a cold measurement of it (a second of cache flushes), another kernel's ``timeit``, or a sleep.
Each round, per kind of work, takes a steady-state ``timeit`` reference, then, in alternating
order, the engine with the cut (:mod:`pytest_roofline.timing.transient`) and without it, each
right after that work. Printed: the engine over ``timeit`` with and without the cut (median and
range over the rounds), what a measurement cost, and, with ``--series``, how slow the kernel ran
over the first 600 ms after each kind of work (medians of its samples per time bin, over the
reference).

    python benchmarks/settling.py [--rounds 8] [--series]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from cpu_accuracy import timeit_median  # this folder is on the path: the script runs from it

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing import sampling
from pytest_roofline.timing.cache import FLUSHED, WARM
from pytest_roofline.timing.cpu import CpuBackend
from pytest_roofline.timing.engine import measure

BINS_S = (0.0, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--series", action="store_true", help="also sample 600 ms after each kind of work")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    a, b, c = (rng.random(1 << 16) for _ in range(3))
    x, y, z = (rng.random(1 << 12) for _ in range(3))

    def kernel() -> object:
        return np.add(a, b, out=c)

    def other() -> object:
        return np.add(x, y, out=z)

    backend = CpuBackend()
    work: dict[str, Callable[[], object]] = {
        "a cold measurement": lambda: measure(kernel, backend=backend, policy=Policy(), cache=FLUSHED),
        "another kernel's timeit": lambda: timeit_median(other),
        "a 0.5 s sleep": lambda: time.sleep(0.5),
    }
    with_cut = sampling.slower_start

    def without_cut(samples: object, *, min_shift: float) -> bool:
        return False

    ratios: dict[tuple[str, bool], list[float]] = {}
    walls: dict[bool, list[float]] = {True: [], False: []}
    cuts: list[int] = []
    bins: dict[str, list[list[float]]] = {name: [[] for _ in BINS_S[1:]] for name in work}
    for r in range(args.rounds):
        for name in list(work) if r % 2 == 0 else list(reversed(work)):
            reference = timeit_median(kernel)
            for cut in (True, False) if r % 2 == 0 else (False, True):
                sampling.slower_start = with_cut if cut else without_cut  # type: ignore[assignment]
                work[name]()
                start = time.perf_counter()
                m = measure(kernel, backend=backend, policy=Policy(), cache=WARM)
                walls[cut].append(time.perf_counter() - start)
                ratios.setdefault((name, cut), []).append(m.time_s / reference)
                cuts += [m.transient] if cut else []
            sampling.slower_start = with_cut
            if args.series:
                work[name]()
                series = Policy(warmup_s=0.0, min_time_s=0.5, max_time_s=0.6, target_rel_ci=1e-9)
                m = measure(kernel, backend=backend, policy=series, cache=WARM)
                _bin(m.samples_s, reference, bins[name])
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"np.add of 2^16 float64, engine over timeit, {args.rounds} rounds (median, range)")
    print(f"{'right after':<26} {'without the cut':>22} {'with the cut':>22}")
    for name in work:
        cells = []
        for cut in (False, True):
            xs = ratios[(name, cut)]
            cells.append(f"{statistics.median(xs):.3f} ({min(xs):.2f}-{max(xs):.2f})")
        print(f"{name:<26} {cells[0]:>22} {cells[1]:>22}")
    print(
        f"a measurement cost {statistics.median(walls[False]) * 1e3:.0f} ms without the cut,"
        f" {statistics.median(walls[True]) * 1e3:.0f} ms with it; the cut left out samples in"
        f" {sum(n > 0 for n in cuts)} of {len(cuts)} measurements"
    )
    if args.series:
        edges = " ".join(f"{lo * 1e3:.0f}-{hi * 1e3:.0f}" for lo, hi in itertools.pairwise(BINS_S))
        print(f"\nover the reference, by ms after the work ({edges}):")
        for name, per_bin in bins.items():
            cells = [f"{statistics.median(v):.3f}" if v else "-" for v in per_bin]
            print(f"{name:<26} " + " ".join(cells))


def _bin(samples_s: tuple[float, ...], reference: float, into: list[list[float]]) -> None:
    """Each time bin's median sample over ``reference``, placed by the samples' running total."""
    per_bin: list[list[float]] = [[] for _ in into]
    elapsed = 0.0
    for sample in samples_s:
        elapsed += sample
        for i, (lo, hi) in enumerate(itertools.pairwise(BINS_S)):
            if lo <= elapsed < hi:
                per_bin[i].append(sample)
    for i, values in enumerate(per_bin):
        if values:
            into[i].append(statistics.median(values) / reference)


if __name__ == "__main__":
    main()
