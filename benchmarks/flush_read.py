"""How fast does each NumPy reduction read the CPU's flush buffer? (The flush is a read of 2x the
last-level cache before a cold sample or in place of rotation's untimed cycle: its time is cost.)

Each candidate reads the same buffer, the candidates taking turns round after round; printed: each
one's median time and its ratio to the reduction the flush used before (``np.bitwise_or.reduce``
over uint64). Every candidate is single-threaded: a BLAS read (``np.dot``) wakes threads that spin
on after it, on the core a single-threaded kernel's measurement counts as idle.

    python benchmarks/flush_read.py [--mib 380] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

CANDIDATES = {
    "bitwise_or u64 (before)": lambda b: np.bitwise_or.reduce(b),
    "max u64": lambda b: b.max(),
    "min u8": lambda b: b.view(np.uint8).min(),
    "max f64": lambda b: b.view(np.float64).max(),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=380, help="buffer size (default: 2x a 190 MiB cache)")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    buffer = np.empty(args.mib * 2**20 // 8, dtype=np.uint64)
    buffer.fill(0x0101010101010101)  # as the flush buffer is made
    times: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    order = list(CANDIDATES)
    for r in range(args.rounds):
        for name in order if r % 2 == 0 else reversed(order):  # ABBA: drift falls on all alike
            start = time.perf_counter()
            CANDIDATES[name](buffer)
            times[name].append(time.perf_counter() - start)
    reference = statistics.median(times[order[0]])
    print(f"{args.mib} MiB read, {args.rounds} interleaved rounds; median ms and ratio to the first")
    for name in order:
        median = statistics.median(times[name])
        rate = args.mib / 1024 / median
        print(f"  {name:26s} {median * 1e3:7.1f} ms  {median / reference:5.2f}x  ({rate:.1f} GiB/s)")


if __name__ == "__main__":
    main()
