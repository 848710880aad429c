"""How long must rotation's cycle be for a small kernel to run fully cold?

Rotation (``pytest_roofline/timing/rotation.py``) calls the kernel on the next of several copies of
its arrays, so that a copy is out of the cache when its turn comes again. A cycle too short leaves
copies in the cache (the kernel reads warm); one too long costs memory and time for nothing. This
measures a small ``np.add`` (``--n`` float64 elements a set of three arrays) over rotated copies
whose cycle is a multiple of the last-level cache this process sees (the calibration's effective
figure, ``--llc-mib`` to override it), from 0.25x to 16x; the largest is the fully-cold reference.

Each round times every cycle once, in an order that alternates each round (so the machine's drift
hits them alike): one untimed pass over the cycle, then windows of back-to-back calls over it, the
median window's time per call. Printed per multiple: the median time per call over the rounds, its
ratio to the fully-cold figure of the same round (median and range over the rounds), and the ratio
of the warm figure (one set, called again and again). Then the smallest multiple from which on every
median ratio is within ``--tolerance`` of fully cold: rotation's ``COLD_CYCLE_MULTIPLE`` should be it (its
cycle is that times ``CYCLE_MARGIN``).

    python benchmarks/cold_cycle.py [--rounds 9] [--n 4096] [--llc-mib 48] [--tolerance 0.03]
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from pytest_roofline.timing.rotation import COLD_CYCLE_MULTIPLE, CYCLE_MARGIN

MiB = 2**20
MULTIPLES = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0)
#: a timed window lasts at least this long, and each cycle gets this many windows a round
WINDOW_S = 0.002
WINDOWS = 15


def per_call_s(calls: Sequence[Callable[[], object]]) -> float:
    """The median window's time per call, cycling through ``calls`` after one untimed pass."""
    for call in calls:  # the untimed cycle: fresh copies are in the cache
        call()
    start = time.perf_counter_ns()
    for call in calls[: min(len(calls), 64)]:
        call()
    one = max((time.perf_counter_ns() - start) / 1e9 / min(len(calls), 64), 1e-9)
    count = max(int(WINDOW_S / one), 1)
    rotating = itertools.cycle(calls)
    windows = []
    gc.disable()
    try:
        for _ in range(WINDOWS):
            batch = [next(rotating) for _ in range(count)]
            start = time.perf_counter_ns()
            for call in batch:
                call()
            windows.append((time.perf_counter_ns() - start) / 1e9 / count)
    finally:
        gc.enable()
    return statistics.median(windows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--n", type=int, default=4096, help="float64 elements in each of the three arrays")
    parser.add_argument("--llc-mib", type=float, help="the last-level cache (default: the calibration's)")
    parser.add_argument(
        "--tolerance", type=float, default=0.03, help="within this of fully cold counts as cold"
    )
    parser.add_argument("--multiples", default=",".join(f"{m:g}" for m in MULTIPLES))
    args = parser.parse_args()

    multiples = sorted(float(m) for m in args.multiples.split(","))
    if args.llc_mib is not None:
        llc, where = int(args.llc_mib * MiB), "given"
    else:
        from pytest_roofline.machine.calibrate import cpu_device
        from pytest_roofline.timing.cpu import last_level_cache_bytes

        llc = cpu_device().llc_bytes or last_level_cache_bytes()
        where = f"the calibration's effective figure (sysfs says {last_level_cache_bytes() / MiB:g} MiB)"
    set_bytes = 3 * args.n * 8
    sets = max(2, math.ceil(max(multiples) * llc / set_bytes))
    pool = np.ones((sets, 3, args.n))  # every copy touched now: page faults are not the kernel's
    calls = [functools.partial(np.add, row[0], row[1], out=row[2]) for row in pool]
    copies = {m: max(2, math.ceil(m * llc / set_bytes)) for m in multiples}
    print(
        f"np.add of {args.n} float64 ({set_bytes / 1024:g} KiB a set); last-level cache {llc / MiB:g} MiB"
        f" ({where}); {args.rounds} interleaved rounds; rule now: COLD_CYCLE_MULTIPLE {COLD_CYCLE_MULTIPLE},"
        f" CYCLE_MARGIN {CYCLE_MARGIN}"
    )
    times: dict[float, list[float]] = {m: [] for m in multiples}
    warm: list[float] = []
    for r in range(args.rounds):
        order = multiples if r % 2 == 0 else list(reversed(multiples))
        for m in order:
            times[m].append(per_call_s(calls[: copies[m]]))
        warm.append(per_call_s(calls[:1] * 2))
        print(f"round {r + 1} done", file=sys.stderr)

    cold = times[multiples[-1]]
    print(f"{'cycle':>8} {'MiB':>8} {'copies':>7} {'µs/call':>9} {'/ fully cold':>13} {'range':>15}")
    medians = {m: statistics.median(t / c for t, c in zip(times[m], cold, strict=True)) for m in multiples}
    # the smallest multiple from which on every cycle reads within the tolerance of fully cold
    cold_from = None
    for m in reversed(multiples):
        if medians[m] < 1 - args.tolerance:
            break
        cold_from = m
    for m in multiples:
        ratios = [t / c for t, c in zip(times[m], cold, strict=True)]
        median = medians[m]
        mib, us = copies[m] * set_bytes / MiB, statistics.median(times[m]) * 1e6
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}"
        print(f"{m:>7g}x {mib:>8.1f} {copies[m]:>7} {us:>9.2f} {median:>13.3f} {spread:>15}")
    warm_ratio = statistics.median(w / c for w, c in zip(warm, cold, strict=True))
    print(f"{'warm':>8} {'':>8} {1:>7} {statistics.median(warm) * 1e6:>9.2f} {warm_ratio:>13.3f}")
    print(
        f"fully cold (within {args.tolerance:.0%}) from a cycle of {cold_from:g}x the last-level cache"
        if cold_from is not None
        else "no cycle reached the fully-cold figure"
    )


if __name__ == "__main__":
    main()
