"""Do verdicts hold on a busy machine? Attained fractions quiet against loaded, paired against cached.

For memory- and compute-bound kernels, single- and multi-threaded, this measures each with the
plugin's own path (estimate on the calibrated CPU, the engine with its flush choice, the probe of
the bounding resource timed beside the kernel, the verdict's paired ceiling) while this script
runs a synthetic neighbour (``../shared/tools/neighbour.py``: ``mem``, one process of memory
traffic; ``cpu``, one spinning core) or none. Conditions take turns, ``--rounds`` times, so slow
drift hits them alike. Printed per kernel: the median attained fraction quiet and under each
neighbour with paired ceilings (the default) and with cached ones (``--roofline-ceilings
cached``), the loaded/quiet ratios, and the median wall time of a measurement with and without
the probe. Target: paired ratios within 0.85-1.15 at no more than 1.5x the probe-less wall time.

Then the verdicts themselves: every measurement judged (paired) again at two budgets set from the
kernel's quiet median attained fraction q, one it should pass (q/2) and one it should miss (2q),
counted per condition as pass/MISS/inconclusive/faster-than-light. A verdict that holds on a busy
machine is the quiet one or, where the load made it unknowable, inconclusive: never the opposite.

    python benchmarks/contention.py [--rounds 3] [--max-time 1.0]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, not installed

from pytest_roofline.machine.calibrate import cpu_calibration  # noqa: E402
from pytest_roofline.model.estimate import estimate  # noqa: E402
from pytest_roofline.model.paired_ceilings import resource_of  # noqa: E402
from pytest_roofline.model.policy import Policy  # noqa: E402
from pytest_roofline.model.verdict import Verdict, judge  # noqa: E402
from pytest_roofline.timing.cache import plan_cache  # noqa: E402
from pytest_roofline.timing.contention import take_snapshot  # noqa: E402
from pytest_roofline.timing.cpu import CpuBackend  # noqa: E402
from pytest_roofline.timing.engine import measure  # noqa: E402
from pytest_roofline.timing.probes import probe_for  # noqa: E402

NEIGHBOUR = ROOT.parent / "shared" / "tools" / "neighbour.py"
CONDITIONS = ("quiet", "mem", "cpu")

Kernel = tuple[str, str, dict[str, object], Callable[[], object]]


def kernels() -> list[Kernel]:
    rng = np.random.default_rng(0)
    n = 1 << 23
    a, b, c = (rng.random(n) for _ in range(3))
    big_x, big_y = rng.random(1 << 24), rng.random(1 << 24)
    m = 512
    x, y, z = (rng.random((m, m)) for _ in range(3))
    xs, ys, zs = (rng.random((m, m)).astype(np.float32) for _ in range(3))
    small = 64
    bx, by = rng.random((256, small, small)), rng.random((256, small, small))
    bz = np.empty_like(bx)
    return [
        ("add 2^23 f64 (1 thread)", "elementwise",
         {"n": n, "inputs": 2, "dtype": "fp64"}, lambda: np.add(a, b, out=c)),
        ("dot 2^24 f64 (BLAS threads)", "dot", {"n": 1 << 24, "dtype": "fp64"}, lambda: np.dot(big_x, big_y)),
        ("matmul 512³ f64 (BLAS threads)", "gemm",
         {"M": m, "N": m, "K": m, "dtype": "fp64"}, lambda: np.matmul(x, y, out=z)),
        ("matmul 512³ f32 (BLAS threads)", "gemm",
         {"M": m, "N": m, "K": m, "dtype": "fp32"}, lambda: np.matmul(xs, ys, out=zs)),
        ("matmul 256×64³ f64 (small: 1 thread)", "gemm",
         {"M": small, "N": small, "K": small, "batch": 256, "dtype": "fp64"},
         lambda: np.matmul(bx, by, out=bz)),
    ]  # fmt: skip


def start(condition: str, seconds: float) -> subprocess.Popen[bytes] | None:
    if condition == "quiet":
        return None
    cmd = [sys.executable, str(NEIGHBOUR), "--kind", condition, "--procs", "1", "--seconds", str(seconds)]
    proc = subprocess.Popen(cmd, start_new_session=True)  # its own group: its workers stop with it
    time.sleep(0.5)  # let it reach its steady state
    return proc


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None:
        os.killpg(proc.pid, signal.SIGTERM)  # the neighbour's worker processes, not only its parent
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-time", type=float, default=1.0)
    args = parser.parse_args()
    if not NEIGHBOUR.is_file():
        sys.exit(f"contention.py: no neighbour at {NEIGHBOUR} (the shared/ folder beside the repository)")

    calibration = cpu_calibration()
    device = calibration.device
    backend = CpuBackend()
    work = kernels()
    # attained[(kernel, condition, paired)] and wall[(kernel, probed)]
    attained: dict[tuple[str, str, bool], list[float]] = {}
    #: every probed measurement, for judging again at budgets set from the quiet median
    measured: dict[tuple[str, str], list[tuple[Any, Any, Any]]] = {}
    wall: dict[tuple[str, bool], list[float]] = {}
    for r in range(args.rounds):
        order = CONDITIONS if r % 2 == 0 else tuple(reversed(CONDITIONS))
        for condition in order:
            neighbour = start(condition, seconds=60 * len(work) * args.max_time)
            try:
                for name, op, params, fn in work:
                    est = estimate(op, device=device, **params)  # type: ignore[arg-type]
                    reference = calibration.probes[resource_of(est)]
                    # the plugin's plan for a closure: flushed, or an op past the cache
                    cache = plan_cache(
                        "cold", op_bytes=est.bytes, llc_bytes=device.llc_bytes, fn=fn, args=(), kwargs=None,
                        setup=None,
                    )  # fmt: skip
                    policy = Policy(max_time_s=args.max_time)
                    for probed in (True, False):
                        m = measure(
                            fn, policy=policy, backend=backend, cache=cache,
                            probe=probe_for(reference) if probed else None, snapshot=take_snapshot,
                        )  # fmt: skip
                        wall.setdefault((name, probed), []).append(m.wall_s)
                        if probed:
                            measured.setdefault((name, condition), []).append((est, m, reference))
                            for paired in (True, False):
                                j = judge(est, m, 0.5, reference=reference if paired else None)
                                attained.setdefault((name, condition, paired), []).append(j.attained)
            finally:
                stop(neighbour)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"device: {device.name}; {args.rounds} interleaved rounds; --max-time {args.max_time}")
    head = f"{'kernel':<38} {'ceilings':<8} {'quiet':>7} {'mem':>7} {'cpu':>7} {'mem/q':>6} {'cpu/q':>6}"
    print(head + f" {'wall probed':>12} {'no probe':>9} {'ratio':>6}")
    for name, *_ in work:
        for paired in (True, False):
            med = {c: statistics.median(attained[(name, c, paired)]) for c in CONDITIONS}
            line = (
                f"{name:<38} {'paired' if paired else 'cached':<8} "
                + " ".join(f"{med[c] * 100:6.1f}%" for c in CONDITIONS)
                + f" {med['mem'] / med['quiet']:6.2f} {med['cpu'] / med['quiet']:6.2f}"
            )
            if paired:
                probed, plain = statistics.median(wall[(name, True)]), statistics.median(wall[(name, False)])
                line += f" {probed:11.2f}s {plain:8.2f}s {probed / plain:6.2f}"
            print(line)

    print("\nverdicts (paired) at budgets q/2 (should pass) and 2q (should miss), q = quiet median attained;")
    print("P pass, M MISS, I inconclusive, F faster-than-light, one letter a measurement")
    print(f"{'kernel':<38} {'q':>6}  " + "  ".join(f"{c + ' q/2':<10} {c + ' 2q':<10}" for c in CONDITIONS))
    letters = {
        Verdict.PASS: "P",
        Verdict.MISS: "M",
        Verdict.INCONCLUSIVE: "I",
        Verdict.FASTER_THAN_LIGHT: "F",
    }
    for name, *_ in work:
        q = statistics.median(attained[(name, "quiet", True)])
        cells = []
        for c in CONDITIONS:
            for budget in (q / 2, min(2 * q, 1.0)):
                verdicts = [judge(e, m, budget, reference=ref).verdict for e, m, ref in measured[(name, c)]]
                cells.append(f"{''.join(letters.get(v, '?') for v in verdicts):<10}")
        print(f"{name:<38} {q * 100:5.1f}%  " + " ".join(cells))


if __name__ == "__main__":
    main()
