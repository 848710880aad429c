"""Is any correct kernel faster than light, at any size, cold or warm? And what does cold cost?

Five numpy kernels (``np.add``, ``np.copyto``, a scalar multiply, a sum reduction and a square
matmul) over working sets from 2^8 to 2^26 float64 elements by 4x (matmul to 2^22), each measured
as the plugin measures it (the op's estimate on this CPU's calibrated device, the cache plan, the
engine with the paired probe and the OS readings, the verdict), cold (the default) and warm
(``cache="warm"``), and timed by pytest-benchmark with its defaults, one after the other in each
round so that the machine's drift hits them alike (the order flips every round).

First printed: each cache level as sysfs says and as the calibration's capacity sweep found it (the
knee of ``np.add``'s rate against its footprint), with the sweep behind it. Then, per kernel and
size: attained (median of the rounds) and the verdict seen, the memory level
that judged it, the cold method, the median over pytest-benchmark's median, and the wall time each
took. Then the targets: no faster-than-light verdict; cold attained, wherever the floor is 10 µs
or more, at least half of the same op's at 2^24; warm attained at most 1.1 of its level's roof; and
what the whole sweep's measurements cost against pytest-benchmark's.

    python benchmarks/cache_sweep.py [--rounds 1] [--only add --only copy] [--max-exp 26]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from reference import pytest_benchmark_median

from pytest_roofline.machine.calibrate import cpu_calibration, cpu_device
from pytest_roofline.machine.calibration_report import cache_rows
from pytest_roofline.machine.capacity import samples_from_details
from pytest_roofline.machine.cpupeak import cpu_peak
from pytest_roofline.model.core import Device, Estimate, Source, at_level
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.paired_ceilings import resource_of
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.units import seconds as format_seconds
from pytest_roofline.model.verdict import Result, result_of
from pytest_roofline.plugin.run_devices import cpu_backend_for
from pytest_roofline.timing.base import Backend
from pytest_roofline.timing.cache import plan_cache
from pytest_roofline.timing.contention import take_snapshot
from pytest_roofline.timing.cpu_latency import cpu_latency_floor
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.probes import probe_for

STATES = ("cold", "warm", "pytest-benchmark")


@dataclass(frozen=True)
class Kernel:
    name: str
    exp: int
    op: str
    params: dict[str, object]
    fn: Callable[..., object]
    args: tuple[object, ...]
    kwargs: dict[str, object]


def kernels(max_exp: int, only: list[str] | None) -> list[Kernel]:
    rng = np.random.default_rng(0)
    out: list[Kernel] = []
    for exp in range(8, max_exp + 1, 2):
        n = 1 << exp
        x, y, z = rng.random(n), rng.random(n), np.empty(n)
        elementwise = {"n": n, "flops_per_element": 1}
        out += [
            Kernel("add", exp, "elementwise", {**elementwise, "inputs": 2}, np.add, (x, y), {"out": z}),
            Kernel("copy", exp, "copy", {"n": n}, np.copyto, (z, x), {}),
            Kernel(
                "scale", exp, "elementwise", {**elementwise, "inputs": 1}, np.multiply, (x, 3.0), {"out": z}
            ),
            Kernel("sum", exp, "reduction", {"n": n}, np.add.reduce, (x,), {}),
        ]
        if exp <= 22:  # 2048³: 17 GFLOP; 8192³ would take seconds a call
            m = 1 << (exp // 2)
            a, b, c = rng.random((m, m)), rng.random((m, m)), np.empty((m, m))
            out.append(Kernel("matmul", exp, "gemm", {"M": m, "N": m, "K": m}, np.matmul, (a, b), {"out": c}))
    return [k for k in out if not only or k.name in only]


def judged(kernel: Kernel, state: str, backend: Backend) -> Result:
    """One measurement as the plugin's session makes it (mode report: no re-measure)."""
    est: Estimate = estimate(kernel.op, dtype="fp64", device=cpu_device(), **kernel.params)
    plan = plan_cache(
        state, op_bytes=est.bytes, llc_bytes=est.device.llc_bytes, fn=kernel.fn, args=kernel.args,
        kwargs=kernel.kwargs, setup=None, budget_s=Policy().max_time_s,
    )  # fmt: skip
    if state == "warm" and (level := est.device.level_for(est.bytes)) is not None:
        est = at_level(est, level)
    source = est.peak_source if est.bound == "compute" else est.bandwidth_source
    reference = None
    if source is Source.MEASURED and not (est.bound == "memory" and est.memory_level != "dram"):
        reference = cpu_calibration().probes.get(resource_of(est))
    probe = probe_for(reference) if reference is not None else None
    m = measure(
        kernel.fn, *kernel.args, kwargs=kernel.kwargs, policy=Policy(), backend=backend, probe=probe,
        snapshot=take_snapshot, cache=plan,
    )  # fmt: skip
    plan.release()
    # the plugin's --roofline-latency-floor on: an empty call timed as the kernel is, flushed or not
    latency = cpu_latency_floor(flushed=plan.flush).floor_s
    return result_of(est, [m], 0.01, reference=reference, peak=cpu_peak(), latency_floor_s=latency)


def print_capacities(device: Device) -> None:
    """Each cache level: sysfs's size, the effective one, its roof; and the sweep that found them."""
    for name, text in cache_rows(device):
        print(f"  {name}: {text}")
    calibration = cpu_calibration()
    if calibration.cache_path is not None:  # the sweep's samples are kept in the calibration file
        details = json.loads(calibration.cache_path.read_text(encoding="utf-8")).get("details", {})
        print(f"  sweep: {details.get('capacity_sweep', 'none (calibrated before the sweep)')}")
        samples = samples_from_details(details)
        if samples:
            print("  " + "  ".join(f"{f / 2**20:.3g} MiB {r / 1e9:.3g} GB/s" for f, r in samples))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-exp", type=int, default=26, help="largest size, as a power of two (even)")
    parser.add_argument("--only", action="append", metavar="KERNEL", help="add, copy, scale, sum, matmul")
    args = parser.parse_args()

    device = cpu_device()
    backend = cpu_backend_for(device)  # as the plugin makes it: its flush twice the effective cache
    work = kernels(args.max_exp, args.only)
    results: dict[tuple[str, int, str], list[Result]] = {}
    pbm: dict[tuple[str, int], list[float]] = {}
    walls: dict[tuple[str, int, str], list[float]] = {}
    for r in range(args.rounds):
        for k in work:
            order = STATES if r % 2 == 0 else tuple(reversed(STATES))
            for state in order:
                start = time.perf_counter()
                if state == "pytest-benchmark":
                    pbm.setdefault((k.name, k.exp), []).append(
                        pytest_benchmark_median(lambda k=k: k.fn(*k.args, **k.kwargs))
                    )
                else:
                    results.setdefault((k.name, k.exp, state), []).append(judged(k, state, backend))
                walls.setdefault((k.name, k.exp, state), []).append(time.perf_counter() - start)
            print(f"round {r + 1}: {k.name} 2^{k.exp} done", file=sys.stderr)

    print(
        f"{device.name}: DRAM {device.bandwidth.value / 1e9:.1f} GB/s; last-level cache"
        f" {(device.llc_bytes or 0) / 2**20:.0f} MiB as this process sees it; {args.rounds} round(s), medians"
    )
    print_capacities(device)
    print(
        f"{'kernel':<8} {'n':>5} {'floor':>9} | {'cold':>7} {'method':<10} {'cold/pbm':>8} {'wall':>6} |"
        f" {'warm':>7} {'level':<5} {'warm/pbm':>8} {'wall':>6} | {'pbm':>9} {'wall':>6}  verdicts"
    )
    ftl: list[str] = []
    cold_attained: dict[tuple[str, int], float] = {}
    warm_over: list[str] = []
    floors: dict[tuple[str, int], float] = {}
    for k in work:
        key = (k.name, k.exp)
        cold, warm = results[(k.name, k.exp, "cold")], results[(k.name, k.exp, "warm")]
        pb = statistics.median(pbm[key])
        row = [f"{k.name:<8} 2^{k.exp:<3} {format_seconds(cold[0].estimate.floor_s):>9} |"]
        verdicts = []
        for state, rs in (("cold", cold), ("warm", warm)):
            attained = statistics.median(r.attained for r in rs)
            time_s = statistics.median(r.time_s for r in rs)
            wall = statistics.median(walls[(k.name, k.exp, state)])
            m = rs[0].measurement
            how = (m.cold_method or "") if state == "cold" else rs[0].estimate.memory_level
            width = 10 if state == "cold" else 5
            row.append(f" {attained:>7.1%} {how:<{width}} {time_s / pb:>8.3f} {wall:>5.2f}s |")
            verdicts += [f"{state[0]}:{r.verdict}" for r in rs]
            if any(str(r.verdict) == "faster-than-light" for r in rs):
                ftl.append(f"{k.name} 2^{k.exp} {state} ({attained:.1%})")
            if state == "cold":
                cold_attained[key] = attained
                floors[key] = rs[0].estimate.floor_s
            elif attained > 1.1:
                warm_over.append(f"{k.name} 2^{k.exp} ({attained:.1%} of its {how} roof)")
        pb_wall = statistics.median(walls[(k.name, k.exp, "pytest-benchmark")])
        row.append(f" {format_seconds(pb):>9} {pb_wall:>5.2f}s")
        print("".join(row) + "  " + " ".join(sorted(set(verdicts))))

    print()
    print(f"faster than light: {', '.join(ftl) if ftl else 'none'}")
    low = []
    for (name, exp), attained in cold_attained.items():
        ref = cold_attained.get((name, 24))
        if ref is not None and floors[(name, exp)] >= 10e-6 and attained < 0.5 * ref:
            low.append(f"{name} 2^{exp} {attained:.1%} < half of {ref:.1%} at 2^24")
    print(
        f"cold attained below half of the op's at 2^24 (floor >= 10 µs): {', '.join(low) if low else 'none'}"
    )
    print(f"warm attained above 1.1 of its level's roof: {', '.join(warm_over) if warm_over else 'none'}")
    cost = {s: sum(statistics.median(v) for (_, _, st), v in walls.items() if st == s) for s in STATES}
    print(
        f"wall time of the sweep: cold {cost['cold']:.1f} s, warm {cost['warm']:.1f} s, pytest-benchmark"
        f" {cost['pytest-benchmark']:.1f} s (cold/pbm {cost['cold'] / cost['pytest-benchmark']:.2f},"
        f" warm/pbm {cost['warm'] / cost['pytest-benchmark']:.2f})"
    )


if __name__ == "__main__":
    main()
