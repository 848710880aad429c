"""The CPU's cache levels and their bandwidths: the roofs a warm measurement is judged against.

The floor of a cold kernel counts DRAM bytes at DRAM bandwidth. A kernel timed warm, on request,
has its bytes served by a cache level; judged against DRAM it can read faster than light, so it
is judged against the roof of the smallest level that holds its bytes (the cache-aware roofline,
CARM; :meth:`.model.Device.level_for`).

The levels come from ``/sys/devices/system/cpu/cpu0/cache/index*/`` (data and unified caches;
a level shared by one CPU is per core; :mod:`pytest_roofline.timing.host_caches` reads them). Each
level's bandwidth is measured with numpy, in the manner of the Empirical Roofline Toolkit: several
kernels over buffers that fill part of the level (:data:`FILLS`), each called back to back so that
the buffers stay in it, the best rate kept:

============  ===========================================  ================
kernel        numpy                                        bytes counted
============  ===========================================  ================
copy          ``np.copyto(c, a)``                          read a, write c
add           ``np.add(a, b, out=c)``                      read a, b, write c
dot           ``np.dot(a, b)`` (BLAS, read only)           read a, b
============  ===========================================  ================

numpy's call overhead keeps it below what compiled code reaches in the L1, so these roofs are the
best this machine showed with numpy, not the silicon's. A roof is never below the roof of a larger
level (a kernel served by the L2 is at least as fast as one served by the L3), nor below DRAM's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from ..model.core import Figure, MemoryLevel, Source

# the OS's description of the levels is read in the timing layer (the CPU backend sizes its flush by it)
from ..timing.host_caches import SYSFS_CACHE as SYSFS_CACHE
from ..timing.host_caches import CacheInfo as CacheInfo
from ..timing.host_caches import cpu_caches as cpu_caches
from ..timing.host_caches import parse_cache_size as parse_cache_size

#: buffers fill these shares of a level (below LEVEL_FILL: the level holds them with the rest)
FILLS = (0.5, 0.7)
#: no measuring buffer is larger than this, whatever the level (a 504 MiB L3 shared by a host's
#: cores is measured in its first 64 MiB)
MAX_BUFFER_BYTES = 64 * 2**20
#: each kernel's timed windows last about this long (seconds), and the best of REPEATS counts
WINDOW_S = 0.002
REPEATS = 5

Clock = Callable[[], float]


def measure_level_rates(
    caches: Sequence[CacheInfo], *, clock: Clock = time.perf_counter
) -> dict[str, tuple[float, str]]:
    """Per level name, the best bytes/s any kernel reached with its buffers in that level, and the
    kernel's name with its buffer size (``"copy 24 KiB"``)."""
    rates: dict[str, tuple[float, str]] = {}
    for cache in caches:
        best = (0.0, "")
        for fill in FILLS:
            total = min(int(cache.size_bytes * fill), MAX_BUFFER_BYTES)
            for name, rate in _kernel_rates(total // 8, clock).items():
                if rate > best[0]:
                    best = (rate, f"{name} {_kib(total)}")
        if best[0] > 0:
            rates[cache.name] = best
    return rates


def _kernel_rates(elements: int, clock: Clock) -> dict[str, float]:
    """Each kernel's best rate with ``elements`` float64 elements in all of its buffers together."""
    import numpy

    three = max(elements // 3, 1)
    a, b, c = numpy.ones(three), numpy.full(three, 2.0), numpy.zeros(three)
    half = max(elements // 2, 1)
    x, y = numpy.ones(half), numpy.zeros(half)
    kernels: tuple[tuple[str, int, Callable[[], object]], ...] = (
        ("copy", 2 * half * 8, lambda: numpy.copyto(y, x)),
        ("add", 3 * three * 8, lambda: numpy.add(a, b, out=c)),
        ("dot", 2 * half * 8, lambda: numpy.dot(x, y)),
    )
    return {name: nbytes / _best_call_s(fn, clock) for name, nbytes, fn in kernels}


def _best_call_s(fn: Callable[[], object], clock: Clock) -> float:
    """The best per-call time over :data:`REPEATS` windows of back-to-back calls (warm)."""
    fn()
    t0 = clock()
    fn()
    one = max(clock() - t0, 1e-9)
    calls = max(1, int(WINDOW_S / one))
    best = float("inf")
    for _ in range(REPEATS):
        t0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, max(clock() - t0, 1e-9) / calls)
    return best


def _kib(nbytes: int) -> str:
    return f"{nbytes / 2**20:.0f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.0f} KiB"


def levels_of(
    caches: Sequence[CacheInfo], rates: Mapping[str, tuple[float, str]], *, dram: float
) -> tuple[MemoryLevel, ...]:
    """The memory levels with measured roofs, smallest first; each roof at least every larger
    level's and DRAM's (``dram``, bytes/s): a smaller level never serves bytes slower."""
    levels: list[MemoryLevel] = []
    floor = dram
    for cache in sorted(caches, key=lambda c: -c.level):
        if cache.name not in rates:
            continue
        rate, how = rates[cache.name]
        note = f"{how}, numpy (best of {', '.join(f'{f:g}' for f in FILLS)} of the level)"
        if rate < floor:
            rate, note = floor, f"{rate / 1e9:.1f} GB/s with {how}, raised to the larger level's roof"
        floor = rate
        figure = Figure(rate, Source.MEASURED, note)
        levels.append(MemoryLevel(cache.name, cache.size_bytes, figure, per_core=cache.per_core))
    return tuple(reversed(levels))


def level_details(rates: Mapping[str, tuple[float, str]]) -> dict[str, float | str]:
    """The rates as a calibration's ``details`` entries (``level_l1_bandwidth``, ``level_l1_kernel``)."""
    details: dict[str, float | str] = {}
    for name, (rate, how) in rates.items():
        details[f"level_{name}_bandwidth"] = rate
        details[f"level_{name}_kernel"] = how
    return details


def rates_from_details(details: Mapping[str, object]) -> dict[str, tuple[float, str]]:
    """What :func:`level_details` wrote, read back (entries of another shape are left out)."""
    rates: dict[str, tuple[float, str]] = {}
    for key, value in details.items():
        if key.startswith("level_") and key.endswith("_bandwidth") and isinstance(value, (int, float)):
            name = key[len("level_") : -len("_bandwidth")]
            how = details.get(f"level_{name}_kernel")
            if value > 0:
                rates[name] = (float(value), how if isinstance(how, str) else "")
    return rates
