"""Where does a cache flush stop mattering, and how big must the flush buffer be?

For ``np.add`` over working sets (3 float64 arrays) from 1/4 to 8x the last-level cache, each
round times the kernel unflushed and flushed with a buffer of 1x and 2x the cache, one after the
other (the CPU backend's own ``run``; 9 samples each, median). Printed per size: the medians over
the rounds of cold(1x)/warm, cold(2x)/warm and 1x/2x, with the per-round range. Where cold/warm
is ~1 the kernel evicts its own data and a flush only costs time: that is the threshold
:data:`pytest_roofline.timing.flushing.NO_FLUSH_MULTIPLE` encodes. Where 1x/2x is ~1, a 1x buffer
evicts as well as 2x at half the cost.

    python benchmarks/flush_policy.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from pytest_roofline.timing.cpu import CpuBackend, last_level_cache_bytes

MULTIPLES = (0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 8.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    llc = last_level_cache_bytes()
    # a backend flushes 2x what llc_bytes says: halve it for a 1x buffer
    one = CpuBackend(llc_bytes=lambda: llc // 2)
    two = CpuBackend(llc_bytes=lambda: llc)
    print(f"last-level cache {llc / 2**20:.0f} MiB; {args.rounds} interleaved rounds of 9 samples each")
    print(f"{'working set':>12} {'warm':>9} {'cold 1x / warm':>20} {'cold 2x / warm':>20} {'1x / 2x':>20}")
    for multiple in MULTIPLES:
        n = int(multiple * llc / 24)
        a, b, c = np.ones(n), np.ones(n), np.empty(n)

        def add(a: np.ndarray = a, b: np.ndarray = b, c: np.ndarray = c) -> object:
            return np.add(a, b, out=c)

        ratios: dict[str, list[float]] = {"1x": [], "2x": [], "1x/2x": []}
        warm_times = []
        for r in range(args.rounds):
            runs = [("warm", one, False), ("1x", one, True), ("2x", two, True)]
            if r % 2:
                runs.reverse()
            got = {name: statistics.median(backend.run(add, (), calls=1, samples=9, flush=flush))
                   for name, backend, flush in runs}  # fmt: skip
            warm_times.append(got["warm"])
            ratios["1x"].append(got["1x"] / got["warm"])
            ratios["2x"].append(got["2x"] / got["warm"])
            ratios["1x/2x"].append(got["1x"] / got["2x"])

        def cell(values: list[float]) -> str:
            return f"{statistics.median(values):.3f} ({min(values):.2f}-{max(values):.2f})"

        print(
            f"{multiple:>10.2f}x {statistics.median(warm_times) * 1e6:7.0f}µs {cell(ratios['1x']):>20}"
            f" {cell(ratios['2x']):>20} {cell(ratios['1x/2x']):>20}"
        )


if __name__ == "__main__":
    main()
