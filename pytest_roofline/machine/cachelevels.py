"""The CPU's cache levels and their bandwidths: the roofs a warm measurement is judged against.

Each roof is the best of numpy's copy, add and dot over :data:`FILLS` of the level's swept capacity
(:func:`measure_capacities`), never below a larger level's nor DRAM's: docs/cache.md ("Warm (on request)").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..model.core import Figure, MemoryLevel, Source
from ..model.units import whole_binary_bytes
from ..timing.host_caches import CacheInfo

#: buffers fill these shares of a level: all of them served by it, with room for the rest (code, stack)
FILLS = (0.5, 0.7)
#: no measuring buffer is larger than this, whatever the level
MAX_BUFFER_BYTES = 64 * 2**20
#: each kernel's timed windows last about this long (seconds), and the best of REPEATS counts
WINDOW_S = 0.002
REPEATS = 5
#: the capacity sweep: its time budget (seconds), the best of how many windows each footprint
#: keeps, and its buffer's bounds: a share of the memory the process may still take, and a size
SWEEP_BUDGET_S = 1.5
SWEEP_REPEATS = 3
SWEEP_MEMORY_SHARE = 0.25
MAX_SWEEP_BYTES = 2**30

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .capacity import Clock, Sweep


def measure_capacities(
    caches: Sequence[CacheInfo],
    *,
    clock: Clock = time.perf_counter,
    budget_s: float = SWEEP_BUDGET_S,
    available: Callable[[], int | None] | None = None,
) -> Sweep:
    """The capacity of each of the ``caches`` sysfs lists, as this process sees it: sweeps of
    :class:`AddSweep` (:func:`.capacity.repeated`) within ``budget_s`` and the bounds above, on
    ``available()`` memory (default: :func:`..timing.host_memory.available_memory`)."""
    from ..timing.host_memory import available_memory
    from .capacity import Sweep, passed_at, repeated, sweep

    if not caches:
        return Sweep((), (), 0.0, "with no cache level to look for", AddSweep.kernel)
    memory = (available or available_memory)()
    reach = min(passed_at(max(caches, key=lambda cache: cache.level)), MAX_SWEEP_BYTES)
    if memory is not None:
        reach = min(reach, SWEEP_MEMORY_SHARE * memory)
    measure = AddSweep(clock, max_bytes=int(reach))
    return repeated(
        lambda: sweep(
            caches, measure, max_bytes=int(reach), budget_s=budget_s, clock=clock, kernel=AddSweep.kernel
        )
    )


class AddSweep:
    """``np.add(a, b, out=c)`` warm over a footprint of three equal float64 arrays, its best rate in
    bytes/s; the arrays are carved from one buffer that grows (touched once, untimed) with the sweep."""

    kernel = "np.add"

    def __init__(self, clock: Clock = time.perf_counter, *, max_bytes: int = MAX_SWEEP_BYTES) -> None:
        self._clock = clock
        self._max_elements = max(max_bytes // 8, 3)
        self._buffer: npt.NDArray[np.float64] | None = None

    def __call__(self, footprint: int) -> float:
        import numpy

        n = max(footprint // 24, 1)
        if self._buffer is None or self._buffer.size < 3 * n:
            grown = 0 if self._buffer is None else 2 * self._buffer.size
            self._buffer = None  # freed before the larger one is made
            self._buffer = numpy.ones(max(3 * n, min(grown, self._max_elements)))
        a, b, c = self._buffer[:n], self._buffer[n : 2 * n], self._buffer[2 * n : 3 * n]
        return 3 * n * 8 / _best_call_s(lambda: numpy.add(a, b, out=c), self._clock, SWEEP_REPEATS)


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
                    best = (rate, f"{name} {whole_binary_bytes(total)}")
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


def _best_call_s(fn: Callable[[], object], clock: Clock, repeats: int = REPEATS) -> float:
    """The best per-call time over ``repeats`` windows of back-to-back calls (warm)."""
    fn()
    t0 = clock()
    fn()
    one = max(clock() - t0, 1e-9)
    calls = max(1, int(WINDOW_S / one))
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, max(clock() - t0, 1e-9) / calls)
    return best


def levels_of(
    caches: Sequence[CacheInfo], rates: Mapping[str, tuple[float, str]], *, dram: float
) -> tuple[MemoryLevel, ...]:
    """The memory levels with measured roofs, smallest first, each roof at least every larger level's
    and DRAM's (``dram``, bytes/s). A level in ``rates`` but not in ``caches`` (the capacity sweep did
    not see it) is served by the next larger level, whose roof is then at least its rate
    (docs/cache.md, "Warm (on request)")."""
    levels: list[MemoryLevel] = []
    floor = dram
    below = 0
    best: dict[str, tuple[float, str]] = {}
    for cache in sorted(caches, key=lambda c: c.level):
        absorbed = [(rate, how) for name, (rate, how) in rates.items() if below < _level(name) <= cache.level]
        if absorbed:
            best[cache.name] = max(absorbed)
        below = cache.level
    for cache in sorted(caches, key=lambda c: -c.level):
        if cache.name not in best:
            continue
        rate, how = best[cache.name]
        note = f"{how}, numpy (best of {', '.join(f'{f:g}' for f in FILLS)} of the level)"
        if cache.name not in rates or rate > rates[cache.name][0]:
            note = f"{how}, numpy, in a smaller level the capacity sweep did not see"
        if rate < floor:
            rate, note = floor, f"{rate / 1e9:.1f} GB/s with {how}, raised to the larger level's roof"
        floor = rate
        figure = Figure(rate, Source.MEASURED, note)
        levels.append(MemoryLevel(cache.name, cache.size_bytes, figure, per_core=cache.per_core))
    return tuple(reversed(levels))


def _level(name: str) -> int:
    """``l3`` -> 3 (0 for a name of another shape)."""
    digits = name.removeprefix("l")
    return int(digits) if digits.isdigit() else 0


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
