"""This CPU's ceilings measured with numpy: DRAM bandwidth (STREAM's kernels and a BLAS dot) and
fp64/fp32 matmul FLOP/s, each with its probe, within :data:`CPU_BUDGET_S`; and the sanity rules a
measurement must keep. Which kernels and why: docs/measurement.md, "Calibration".
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..errors import InvalidValueError
from ..model.core import Figure, Precision, Source, Unit
from ..model.devices import GB, MiB
from ..model.paired_ceilings import BANDWIDTH, RESOURCES, ProbeReference
from ..model.units import whole_binary_bytes
from .calibration_cache import Ceilings, plain_rate

if TYPE_CHECKING:
    import numpy as np

    from ..model.peaks import CpuPeak
    from ..timing.host_caches import CacheInfo
    from .capacity import Clock, Sweep

__all__ = [
    "ARRAY_MEMORY_SHARE",
    "CPU_BUDGET_S",
    "CPU_NOTE",
    "LLC_MULTIPLE",
    "MATMUL_TARGET_S",
    "MAX_KERNEL_RUNS",
    "PROBE_RATIO_RANGE",
    "array_bytes_for",
    "measure_cpu",
    "sanity_problems",
]

#: wall-time budget of a CPU calibration, in seconds; the first run of every kernel is always taken
CPU_BUDGET_S = 3.5
#: how long one ``np.matmul`` call should take when measuring FLOP/s
MATMUL_TARGET_S = 0.06
#: bandwidth arrays are this many times the (effective) last-level cache (STREAM's rule) ...
LLC_MULTIPLE = 4
#: ... and, three at once, take at most this share of the memory the process may still take
ARRAY_MEMORY_SHARE = 0.5
#: but never less than this each, whatever memory says (a figure over smaller arrays is a cache's)
MIN_ARRAY_BYTES = 16 * MiB
#: the most timed runs of any one bandwidth kernel
MAX_KERNEL_RUNS = 5

CPU_NOTE = "measured with numpy (single-threaded elementwise; BLAS dot and matmul)"

#: two rounds of one calibration kernel further apart than this are not a measurement
_DISAGREE = 2.0
#: a figure / probe ratio outside this range means the two did not run under one load
PROBE_RATIO_RANGE = (0.5, 10.0)


def measure_cpu(
    *,
    array_bytes: int | None = None,
    budget_s: float = CPU_BUDGET_S,
    matmul_target_s: float = MATMUL_TARGET_S,
    matmul_n: int | None = None,
    matmul_runs: int = 3,
    clock: Clock = time.perf_counter,
    caches: Sequence[CacheInfo] | None = None,
    available: Callable[[], int | None] | None = None,
    sweep: Callable[[Sequence[CacheInfo]], Sweep] | None = None,
) -> Ceilings:
    """Measure this CPU's cache capacities, bandwidth and fp64/fp32 matmul FLOP/s with numpy; the
    bandwidth kernels share what matmul leaves of ``budget_s``. ``caches`` (default: sysfs's) are
    ``sweep``'s first guess (default :func:`.cachelevels.measure_capacities`); ``available()``: the
    memory the process may still take; ``array_bytes`` defaults to :func:`array_bytes_for`,
    ``matmul_n`` to a call of about ``matmul_target_s``; ``clock`` times every call."""
    import numpy as np

    from ..timing.host_caches import cpu_caches
    from ..timing.host_memory import available_memory
    from .cachelevels import level_details, measure_capacities, measure_level_rates
    from .capacity import capacity_details, roof_caches

    if array_bytes is not None and (not isinstance(array_bytes, int) or array_bytes < 8):
        raise InvalidValueError(f"array_bytes must be an integer >= 8; got {array_bytes!r}")
    if not (math.isfinite(budget_s) and budget_s > 0):
        raise InvalidValueError(f"budget_s must be a positive number; got {budget_s!r}")
    if matmul_n is not None and (not isinstance(matmul_n, int) or matmul_n < 1):
        raise InvalidValueError(f"matmul_n must be a positive integer; got {matmul_n!r}")
    if not isinstance(matmul_runs, int) or matmul_runs < 1:
        raise InvalidValueError(f"matmul_runs must be a positive integer; got {matmul_runs!r}")

    from ..timing import probes as probe_kernels

    free = available or available_memory
    levels = cpu_caches() if caches is None else caches
    swept = measure_capacities(levels, clock=clock, available=free) if sweep is None else sweep(levels)
    if array_bytes is None:
        from ..timing.cpu import last_level_cache_bytes

        llc = swept.caches[-1].sizing_bytes if swept.caches else last_level_cache_bytes()
        array_bytes = array_bytes_for(llc, free())
    start = clock()
    today = datetime.now(timezone.utc).date().isoformat()
    details: dict[str, float | int | str] = {}
    matmuls = ((Precision.FP64, np.float64), (Precision.FP32, np.float32))
    sizes = {p: matmul_n or _matmul_size(dtype, matmul_target_s, clock) for p, dtype in matmuls}
    probe_n = {p: probe_kernels.matmul_probe_n(_matmul_rate(dtype, 256, 2, clock)) for p, dtype in matmuls}
    # each probe runs right after its figure, so that each figure/probe ratio is taken under one load
    first = {p: _paired_matmul(dtype, sizes[p], probe_n[p], matmul_runs, clock) for p, dtype in matmuls}

    copy_bytes = probe_kernels.copy_probe_bytes(array_bytes // LLC_MULTIPLE)
    copy_probe = probe_kernels.kernel(BANDWIDTH, "copy", copy_bytes)
    deadline = start + budget_s
    rates, runs, passes = _stream(array_bytes // 8, deadline=deadline, clock=clock, probe=copy_probe)
    rescale = copy_bytes / (array_bytes // 8 * 8)  # _stream counted the probe as moving its own arrays
    rates.pop("probe")
    runs.pop("probe")

    # matmul again seconds later, the better round counting: one slowed moment must not set a ceiling
    peaks: dict[tuple[Precision, Unit], Figure] = {}
    found: dict[str, ProbeReference] = {}
    for precision, dtype in matmuls:
        n = sizes[precision]
        second = _paired_matmul(dtype, n, probe_n[precision], matmul_runs, clock)
        pairs = first[precision] + second
        rate = max(figure for figure, _ in pairs)
        ratio = statistics.median(figure / probe for figure, probe in pairs)
        details[f"matmul_n_{precision}"] = n
        details[f"matmul_flops_{precision}"] = rate
        details[f"matmul_round1_{precision}"] = max(figure for figure, _ in first[precision])
        details[f"matmul_round2_{precision}"] = max(figure for figure, _ in second)
        details[f"probe_ratio_{precision}"] = ratio
        note = f"np.matmul n={n}, best of {2 * matmul_runs} in two rounds"
        peaks[(precision, Unit.VECTOR)] = Figure(rate, Source.MEASURED, note)
        probe_rate = rate / ratio
        found[precision.label] = ProbeReference(
            precision.label, "matmul", probe_n[precision], rate, probe_rate, probe_rate, today
        )

    details.update(capacity_details(swept))
    details.update(level_details(measure_level_rates(roof_caches(swept.caches), clock=clock)))
    best = max(rates, key=lambda name: rates[name])
    ratio = statistics.median(kernels / (probe * rescale) for kernels, probe in passes)
    details[f"probe_ratio_{BANDWIDTH}"] = ratio
    copy_rate = rates[best] / ratio
    found[BANDWIDTH] = ProbeReference(BANDWIDTH, "copy", copy_bytes, rates[best], copy_rate, copy_rate, today)
    details.update({f"bandwidth_{name}": rate for name, rate in rates.items()})
    details.update({f"runs_{name}": count for name, count in runs.items()})
    details["array_bytes"] = array_bytes // 8 * 8
    details["bandwidth_kernel"] = best
    listed = ", ".join(f"{name} {rate / GB:.1f}" for name, rate in rates.items())
    note = f"{best} kernel; all: {listed} GB/s over {whole_binary_bytes(array_bytes // 8 * 8)} float64 arrays"
    return Ceilings(
        bandwidth=Figure(rates[best], Source.MEASURED, note), peaks=peaks, details=details, probes=found
    )


def array_bytes_for(llc_bytes: int, available: int | None) -> int:
    """Each bandwidth array's bytes: :data:`LLC_MULTIPLE` x the effective last-level cache, the three
    together within :data:`ARRAY_MEMORY_SHARE` of the ``available`` memory (never below
    :data:`MIN_ARRAY_BYTES`)."""
    wanted = LLC_MULTIPLE * llc_bytes
    if available is not None:
        wanted = min(wanted, int(ARRAY_MEMORY_SHARE * available / 3))
    return max(wanted, MIN_ARRAY_BYTES) // 8 * 8


def _matmul_size(dtype: type[np.floating[Any]], target_s: float, clock: Clock, probe: int = 512) -> int:
    """The n (a multiple of 64, 256..8192) for which one n×n matmul takes about ``target_s``."""
    rate = _matmul_rate(dtype, probe, 2, clock)  # the first call also wakes BLAS's threads
    n = int((rate * target_s / 2) ** (1 / 3)) // 64 * 64
    return min(max(n, 256), 8192)


def _paired_matmul(
    dtype: type[np.floating[Any]], n: int, probe_n: int, runs: int, clock: Clock
) -> list[tuple[float, float]]:
    """``runs`` pairs of FLOP/s: an n×n matmul, then right after it the probe's ``probe_n`` one."""
    import numpy as np

    def operands(size: int) -> tuple[Any, Any, Any]:
        return (np.full((size, size), 1.0, dtype=dtype), np.full((size, size), 0.5, dtype=dtype),
                np.empty((size, size), dtype=dtype))  # fmt: skip

    big, small = operands(n), operands(probe_n)
    np.matmul(small[0], small[1], out=small[2])  # untimed: the probe's first call pays for its pages
    pairs = []
    for _ in range(runs):
        rates = []
        for (x, y, out), size in ((big, n), (small, probe_n)):
            t0 = clock()
            np.matmul(x, y, out=out)
            rates.append(2.0 * size**3 / _elapsed(t0, clock()))
        pairs.append((rates[0], rates[1]))
    return pairs


def _matmul_rate(dtype: type[np.floating[Any]], n: int, runs: int, clock: Clock) -> float:
    import numpy as np

    x = np.full((n, n), 1.0, dtype=dtype)
    y = np.full((n, n), 0.5, dtype=dtype)
    out = np.empty((n, n), dtype=dtype)
    best = 0.0
    for _ in range(runs):
        t0 = clock()
        np.matmul(x, y, out=out)
        best = max(best, 2.0 * n**3 / _elapsed(t0, clock()))
    return best


def _stream(
    n: int, *, deadline: float, clock: Clock, probe: Callable[[], object]
) -> tuple[dict[str, float], dict[str, int], list[tuple[float, float]]]:
    """Best bytes/s of each bandwidth kernel over ``n``-element float64 arrays, how often each ran,
    and per pass that ran ``probe``, (the pass's best kernel, the probe); ``probe`` is one more kernel,
    named ``probe``, counted as moving 2 arrays of ``n`` elements (the caller rescales it)."""
    import numpy as np

    a = np.full(n, 1.0)
    b = np.full(n, 2.0)
    c = np.empty(n)
    np.copyto(c, a)  # first touch of c, untimed: page faults are not bandwidth
    nbytes = n * 8
    scalar = 3.0

    def triad() -> None:
        np.multiply(b, scalar, out=c)
        np.add(c, a, out=c)

    kernels: tuple[tuple[str, int, Callable[[], object]], ...] = (
        ("copy", 2, lambda: np.copyto(c, a)),
        ("scale", 2, lambda: np.multiply(b, scalar, out=c)),
        ("add", 3, lambda: np.add(a, b, out=c)),
        ("triad", 5, triad),
        ("dot", 2, lambda: np.dot(a, b)),
        ("probe", 2, probe),
    )
    rates: dict[str, float] = {}
    runs: dict[str, int] = {}
    last: dict[str, float] = {}
    passes: list[tuple[float, float]] = []
    this_pass: dict[str, float] = {}

    def run(name: str, arrays: int, kernel: Callable[[], object]) -> None:
        t0 = clock()
        kernel()
        seconds = _elapsed(t0, clock())
        rate = arrays * nbytes / seconds
        rates[name] = max(rates.get(name, 0.0), rate)
        runs[name] = runs.get(name, 0) + 1
        last[name] = seconds
        this_pass[name] = rate

    def end_pass() -> None:
        others = [rate for name, rate in this_pass.items() if name != "probe"]
        if "probe" in this_pass and others:
            passes.append((max(others), this_pass["probe"]))
        this_pass.clear()

    for kernel in kernels:  # every kernel once, whatever the budget
        run(*kernel)
    end_pass()
    more = True
    while more:  # more passes while the budget allows, the fastest kernels first
        more = False
        for name, arrays, fn in sorted(kernels, key=lambda kernel: -rates[kernel[0]]):
            if runs[name] < MAX_KERNEL_RUNS and clock() + last[name] <= deadline:
                run(name, arrays, fn)
                more = True
        end_pass()
    return rates, runs, passes  # a, b and c are freed here


def _elapsed(t0: float, t1: float) -> float:
    return max(t1 - t0, 1e-9)


def sanity_problems(ceilings: Ceilings, peak: CpuPeak | None) -> list[str]:
    """What makes a CPU calibration impossible: fp32 below fp64, a rate above the CPU's theoretical
    peak, two rounds of one kernel further apart than :data:`_DISAGREE`, a figure and its probe
    whose ratio is outside :data:`PROBE_RATIO_RANGE`."""
    from .cpupeak import check_rate

    problems = []
    fp64 = ceilings.peaks.get((Precision.FP64, Unit.VECTOR))
    fp32 = ceilings.peaks.get((Precision.FP32, Unit.VECTOR))
    if fp64 is not None and fp32 is not None and fp32.value < fp64.value:
        problems.append(f"fp32 {plain_rate(fp32.value, 'fp32')} below fp64 {plain_rate(fp64.value, 'fp64')}")
    for precision, figure in ((Precision.FP64, fp64), (Precision.FP32, fp32)):
        message = None if figure is None else check_rate(figure.value, precision, peak)
        if message:
            problems.append(message)
    lo, hi = PROBE_RATIO_RANGE
    for resource in RESOURCES:
        ratio = ceilings.details.get(f"probe_ratio_{resource}")
        if isinstance(ratio, (int, float)) and not lo <= ratio <= hi:
            problems.append(f"{resource} figure / probe ratio {ratio:.2f} is outside {lo:g}-{hi:g}")
    for precision in (Precision.FP64, Precision.FP32):
        rounds = [ceilings.details.get(f"matmul_round{i}_{precision}") for i in (1, 2)]
        if all(isinstance(r, (int, float)) and r > 0 for r in rounds):
            lo, hi = sorted(float(r) for r in rounds)  # type: ignore[arg-type]
            if hi > _DISAGREE * lo:
                problems.append(
                    f"{precision} matmul rounds disagree ({lo / 1e9:.1f} vs {hi / 1e9:.1f} GFLOP/s)"
                )
    return problems
