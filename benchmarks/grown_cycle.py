"""Does a rotation made as the calls need it read the same time as one made whole, for less?

A long cycle of small host sets (:data:`~pytest_roofline.timing.rotation.GROWN_FROM` sets or more)
is made as the samples need it, each set called at most once between flushes, instead of being made
whole before the warm-up. This measures a cold ``np.add`` of ``--sizes`` float64 elements (three
arrays a set) both ways in one process, taking turns each round in an order that alternates (so the
machine's drift hits both alike): the cycle made whole (``GROWN_FROM`` set past any cycle) and grown.
Each measurement is the engine's, as the fixture runs it (the calibration's bandwidth probe beside
it), with the cache plan made inside the timed cost. Printed per size: the median over rounds of
grown/whole for the measured time (the same within the noise: 1.00) and for the cost (planning,
copies, warm-up, probes and samples), with their ranges, and the sets each made.

    python benchmarks/grown_cycle.py [--rounds 9] [--sizes 1024 4096 8192]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from pytest_roofline.machine.calibrate import cpu_calibration, cpu_device
from pytest_roofline.model.paired_ceilings import BANDWIDTH
from pytest_roofline.timing import rotation
from pytest_roofline.timing.base import Probe
from pytest_roofline.timing.cache import plan_cache
from pytest_roofline.timing.cpu import CpuBackend
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.probes import probe_for

WAYS = ("whole", "grown")


def measured(
    n: int, way: str, backend: CpuBackend, llc: int, probe: Probe | None
) -> tuple[float, float, int] | None:
    """One cold measurement of ``np.add`` over ``n`` elements: its time, its cost, the sets made;
    None where the copies would take too much of the budget (a flush instead: not this comparison)."""
    grown_from = rotation.GROWN_FROM
    rotation.GROWN_FROM = grown_from if way == "grown" else sys.maxsize
    try:
        a, b, c = np.ones(n), np.ones(n), np.empty(n)
        start = time.perf_counter()
        plan = plan_cache(
            "cold", op_bytes=3 * a.nbytes, llc_bytes=llc, fn=np.add, args=(a, b, c), kwargs=None,
            setup=None, budget_s=1.0, clock=time.perf_counter,
        )  # fmt: skip
        try:
            m = measure(np.add, a, b, c, backend=backend, cache=plan, probe=probe)
        finally:
            plan.release()
        if m.cold_method != "rotation":
            return None
        return m.time_s, time.perf_counter() - start, m.rotation_copies
    finally:
        rotation.GROWN_FROM = grown_from


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384])
    args = parser.parse_args()
    backend = CpuBackend()
    backend.prepare_flush()
    llc = cpu_device().llc_bytes or 0
    reference = cpu_calibration().probes.get(BANDWIDTH)
    probe = probe_for(reference) if reference is not None else None
    print(f"effective last-level cache {llc / 2**20:.0f} MiB (the calibration's); {args.rounds} rounds")
    for n in args.sizes:
        got: dict[str, list[tuple[float, float, int]]] = {way: [] for way in WAYS}
        measured(n, "whole", backend, llc, probe)  # the pool grown once, as a process does
        skipped = 0
        for r in range(args.rounds):
            pair = {
                way: measured(n, way, backend, llc, probe) for way in (WAYS if r % 2 == 0 else WAYS[::-1])
            }
            if None in pair.values():
                skipped += 1
                continue
            for way, m in pair.items():
                got[way].append(m)  # type: ignore[arg-type]
        if not got["whole"]:
            print(f"n={n:>6}: every round flushed instead of rotating (the copies cost too much)")
            continue
        times = [g[0] / w[0] for g, w in zip(got["grown"], got["whole"], strict=True)]
        costs = [g[1] / w[1] for g, w in zip(got["grown"], got["whole"], strict=True)]
        whole_s, grown_s = (statistics.median(m[1] for m in got[way]) for way in WAYS)
        print(
            f"n={n:>6} ({3 * 8 * n / 1024:g} KiB a set): time grown/whole {statistics.median(times):.3f}"
            f" ({min(times):.3f}-{max(times):.3f}); cost {statistics.median(costs):.3f}"
            f" ({min(costs):.3f}-{max(costs):.3f}); whole {whole_s:.3f} s over {got['whole'][0][2]} sets,"
            f" grown {grown_s:.3f} s over {statistics.median(g[2] for g in got['grown']):.0f} sets"
            + (f"; {skipped} rounds flushed instead of rotating, left out" if skipped else "")
        )


if __name__ == "__main__":
    main()
