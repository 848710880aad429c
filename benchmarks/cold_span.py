"""Does a cold measurement by rotation need the samples' 60 ms span?

``policy.min_time_s`` makes a kernel of 10 µs or more sample for 60 ms at least: right after other
work the VM ran a warm 25 µs kernel 15-50% slow for tens of milliseconds (docs/methodology.md, "Why
60 ms of samples"). A cold kernel's calls wait on DRAM. This measures a cold ``np.add`` of
``--sizes`` float64 elements by rotation, as a suite does: each measurement right after another
test's (a cold ``np.multiply`` of 2^14 elements), with the span (``min_time_s`` 0.06) and without
(0), in an order that alternates each round, and a reference with a long span (0.5 s) each round.
Printed per size: each way's time over the round's reference (median and range over the rounds),
the samples it took and what a measurement cost. On the 2-core VM (2026-11-29, 15 rounds, n=4096):
with the span 1.006 (0.983-1.073), 2,363 samples, 267 ms; without 1.035 (0.919-1.104), 463
samples, 136 ms. The span stays: without it, cold reads 3% slow.

    python benchmarks/cold_span.py [--rounds 9] [--sizes 4096 16384]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from pytest_roofline.machine.calibrate import cpu_calibration, cpu_device
from pytest_roofline.model.measurement import Measurement
from pytest_roofline.model.paired_ceilings import BANDWIDTH
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.base import Probe
from pytest_roofline.timing.cache import plan_cache
from pytest_roofline.timing.cpu import CpuBackend
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.probes import probe_for

SPANS = {"span": 0.06, "none": 0.0}
REFERENCE_SPAN_S = 0.5


def cold(
    fn: Callable[..., object],
    arrays: tuple[np.ndarray, ...],
    span_s: float,
    backend: CpuBackend,
    probe: Probe | None,
) -> tuple[Measurement, float]:
    """One cold measurement of ``fn(*arrays)`` with a ``span_s`` span, and what it cost."""
    start = time.perf_counter()
    plan = plan_cache(
        "cold",
        op_bytes=sum(a.nbytes for a in arrays),
        llc_bytes=cpu_device().llc_bytes,
        fn=fn,
        args=arrays,
        kwargs=None,
        setup=None,
        budget_s=2.0,
        clock=time.perf_counter,
    )
    policy = Policy(max_time_s=2.0, min_time_s=span_s)
    try:
        m = measure(fn, *arrays, backend=backend, cache=plan, probe=probe, policy=policy)
    finally:
        plan.release()
    return m, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384])
    args = parser.parse_args()
    backend = CpuBackend()
    backend.prepare_flush()
    reference = cpu_calibration().probes.get(BANDWIDTH)
    probe = probe_for(reference) if reference is not None else None
    other = (np.ones(2**14), np.empty(2**14))
    for n in args.sizes:
        arrays = (np.ones(n), np.ones(n), np.empty(n))
        ratios: dict[str, list[float]] = {way: [] for way in SPANS}
        samples: dict[str, list[int]] = {way: [] for way in SPANS}
        costs: dict[str, list[float]] = {way: [] for way in SPANS}
        for r in range(args.rounds):
            cold(np.negative, other, 0.06, backend, probe)
            ref, _ = cold(np.add, arrays, REFERENCE_SPAN_S, backend, probe)
            for way in SPANS if r % 2 == 0 else reversed(SPANS):
                cold(np.negative, other, 0.06, backend, probe)  # the test before
                m, cost = cold(np.add, arrays, SPANS[way], backend, probe)
                ratios[way].append(m.time_s / ref.time_s)
                samples[way].append(m.stats.n)
                costs[way].append(cost)
        for way in SPANS:
            rs, median = ratios[way], statistics.median
            print(
                f"n={n:>6} {way:>5}: time / reference {median(rs):.3f} ({min(rs):.3f}-{max(rs):.3f}),"
                f" {median(samples[way]):.0f} samples, {median(costs[way]) * 1e3:.0f} ms"
            )


if __name__ == "__main__":
    main()
