"""How much of each cache level this process gets: the knees of a footprint sweep (:func:`sweep`).

:func:`find_knees` and :func:`capacities` (pure) find each level's knee; :func:`repeated` and
:func:`widest` keep the largest over repeated sweeps. Why: docs/cache.md ("How big the caches are").
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeGuard

from ..model.core import CacheSize
from ..timing.host_caches import CacheInfo

__all__ = [
    "Knee",
    "Sweep",
    "capacities",
    "capacities_from_details",
    "capacity_details",
    "find_knees",
    "larger_capacities",
    "passed_at",
    "repeated",
    "roof_caches",
    "samples_from_details",
    "sweep",
    "sweep_details",
    "usable_caches",
    "widest",
]

Sample = tuple[int, float]
"""(footprint in bytes, bytes/s at that footprint)"""

#: the sweep's first footprint, and its step from one to the next (two a doubling)
SWEEP_START = 16 * 2**10
STEP = math.sqrt(2)
#: points within this share below a plateau's first rate are on it
PLATEAU_TOL = 0.15
#: a level's plateau spans at least this many doublings of the footprint (three points at STEP)
MIN_PLATEAU_OCTAVES = 0.75
#: two plateaus meet at a knee when the upper one's rate is at least this many times the lower's
MIN_STEP = 1.25
#: a level's knee lies within these factors (down, up) of its reported size: a shared level may be
#: a small share; a victim L3 holds more than it says
WINDOW = {"per core": (4.0, 4.0), "shared": (64.0, 4.0)}
#: a knee is where the rate has come this share of the way (in log) down to the next plateau: where
#: the level stops serving, not where it starts to miss (docs/methodology.md, "How big the caches are")
KNEE_SHARE = 0.75
#: the sweep goes on to this many times the last level's knee: a cache in two partitions steps twice
PAST_KNEE = 4.0
#: figures are kept to two significant digits: the sweep's points are STEP apart
_DIGITS = 2

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Knee:
    """Where a plateau of the rate ends: the footprint :data:`KNEE_SHARE` of the way down to the next."""

    footprint: int
    #: the rates (bytes/s) of the plateaus before and after it
    upper: float
    lower: float


@dataclass(frozen=True, slots=True)
class Sweep:
    """A footprint sweep: its samples, the capacities found, and why it stopped."""

    samples: tuple[Sample, ...]
    caches: tuple[CacheSize, ...]
    seconds: float
    #: ``past the l3's knee``, ``at its reach``, ``at its time budget``
    stopped: str
    #: the kernel swept, in words (``np.add``)
    kernel: str = ""

    #: how many sweeps were taken (:func:`widest`): the samples are those of the one whose last level
    #: came out largest
    sweeps: int = 1

    def describe(self) -> str:
        """``np.add over 16 KiB..181 MiB, 24 footprints in 0.42 s, stopped past the l3's knee``."""
        if not self.samples:
            return f"{self.kernel} swept nothing ({self.stopped})"
        first, last = self.samples[0][0], self.samples[-1][0]
        repeats = f"; the widest of {self.sweeps} sweeps" if self.sweeps > 1 else ""
        return (
            f"{self.kernel} over {_size_text(first)}..{_size_text(last)},"
            f" {len(self.samples)} footprints in {self.seconds:.2f} s, stopped {self.stopped}{repeats}"
        )

    def below_reported(self) -> bool:
        """Whether the last level's knee lies more than a :data:`STEP` below its reported size."""
        if not self.caches:
            return False
        last = self.caches[-1]
        return last.found == "knee" and last.sizing_bytes * STEP < last.reported_bytes


#: a sweep whose last level came out below its reported size is taken again, up to this many in all
MAX_SWEEPS = 3


def repeated(take: Callable[[], Sweep]) -> Sweep:
    """Sweeps taken by ``take()`` until one's last level agrees with its reported size, at most
    :data:`MAX_SWEEPS`, as one (:func:`widest`)."""
    sweeps = [take()]
    while len(sweeps) < MAX_SWEEPS and sweeps[-1].below_reported():
        sweeps.append(take())
    return widest(sweeps)


def widest(sweeps: Sequence[Sweep]) -> Sweep:
    """Several sweeps of one machine as one: each level at the largest capacity a sweep found for it
    (a knee beats none), with every sweep's knee in ``seen``; the samples those of the sweep whose last
    level came out largest."""
    if len(sweeps) == 1:
        return sweeps[0]
    levels = sorted({cache.level for s in sweeps for cache in s.caches})
    merged = []
    for level in levels:
        found = [cache for s in sweeps for cache in s.caches if cache.level == level]
        knees = [cache for cache in found if cache.found == "knee"]
        best = max(knees, key=lambda cache: cache.sizing_bytes) if knees else found[0]
        seen = tuple(cache.sizing_bytes for cache in knees)
        note = best.note
        if len(set(seen)) > 1:
            sizes = ", ".join(_size_text(size) for size in seen)
            note += f"; {len(sweeps)} sweeps saw {sizes}: the largest is used"
        merged.append(dataclasses.replace(best, note=note, seen=seen))
    last = max(levels) if levels else None
    chosen = max(
        sweeps,
        key=lambda s: next((c.sizing_bytes for c in s.caches if c.level == last and c.found == "knee"), 0),
    )
    return dataclasses.replace(
        chosen, caches=tuple(merged), seconds=sum(s.seconds for s in sweeps), sweeps=len(sweeps)
    )


def find_knees(samples: Iterable[Sample]) -> list[Knee]:
    """The knees of a rate-against-footprint curve, smallest footprint first (see the module)."""
    points = _best_per_footprint(samples)
    if len(points) < 3:
        return []
    xs = [math.log2(footprint) for footprint, _ in points]
    ys = _median_of_three([math.log(rate) for _, rate in points])
    tol = math.log1p(PLATEAU_TOL)
    start = next(i for i, y in enumerate(ys) if y >= max(ys) - tol)  # the ramp before it is overhead
    xs, fit = xs[start:], _non_increasing(ys[start:])
    knees = []
    plateaus = _plateaus(xs, fit, tol)
    for (a0, a1), (b0, b1) in itertools.pairwise(plateaus):
        upper, lower = statistics.median(fit[a0 : a1 + 1]), statistics.median(fit[b0 : b1 + 1])
        x = _crossing(xs, fit, a0, b1, upper - KNEE_SHARE * (upper - lower))
        knees.append(Knee(round(2**x), math.exp(upper), math.exp(lower)))
    return knees


def capacities(
    guesses: Sequence[CacheInfo], knees: Sequence[Knee], *, reached: int, sweep_note: str = ""
) -> tuple[CacheSize, ...]:
    """Each level sysfs (``guesses``) lists, with the capacity the ``knees`` of a sweep that went up
    to the footprint ``reached`` say it has (see the module)."""
    found = _assign(guesses, knees)
    ordered = sorted(guesses, key=lambda cache: cache.level)
    return tuple(_capacity(cache, found.get(cache.level), reached, sweep_note) for cache in ordered)


def sweep(
    guesses: Sequence[CacheInfo],
    rate_at: Callable[[int], float],
    *,
    max_bytes: int,
    budget_s: float,
    clock: Clock = time.perf_counter,
    start: int = SWEEP_START,
    step: float = STEP,
    kernel: str = "",
) -> Sweep:
    """Measure ``rate_at`` over footprints growing by ``step`` from ``start``, up to ``max_bytes``
    and for about ``budget_s``, and find the capacity of each of the ``guesses`` levels (one at least)
    in it (:func:`capacities`)."""
    began = clock()
    samples: list[Sample] = []
    last = max(guesses, key=lambda cache: cache.level)
    stopped = "at its reach"
    point = 0
    while (footprint := round(start * step**point)) <= max_bytes:
        samples.append((footprint, rate_at(footprint)))
        point += 1
        knee = _assign(guesses, find_knees(samples)).get(last.level)
        if knee is not None and footprint >= PAST_KNEE * knee.footprint:
            stopped = f"past the {last.name}'s knee"
            break
        if clock() - began > budget_s:
            stopped = "at its time budget"
            break
    reached = samples[-1][0] if samples else 0
    found = capacities(guesses, find_knees(samples), reached=reached, sweep_note=f"stopped {stopped}")
    return Sweep(tuple(samples), found, clock() - began, stopped, kernel)


#: a GPU's L2 sweep starts at this share of the L2 the driver reports, steps by this factor, and
#: takes about this long
GPU_START_SHARE = 1 / 16
GPU_STEP = 2**0.25
GPU_SWEEP_BUDGET_S = 2.0


def sweep_details(
    guess: CacheInfo, rate_at: Callable[[int], float], *, kernel: str, clock: Clock = time.perf_counter
) -> dict[str, float | int | str]:
    """A GPU's L2 swept (``rate_at`` times the L2 roof's kernel over a footprint) from
    :data:`GPU_START_SHARE` of its reported size on, as a calibration's ``details`` entries."""
    start = max(round(guess.size_bytes * GPU_START_SHARE), 1)
    swept = sweep(
        [guess], rate_at, max_bytes=int(passed_at(guess)), budget_s=GPU_SWEEP_BUDGET_S, clock=clock,
        start=start, step=GPU_STEP, kernel=kernel,
    )  # fmt: skip
    return capacity_details(swept)


def capacity_details(swept: Sweep) -> dict[str, float | int | str]:
    """A sweep as a calibration's ``details`` entries (``capacity_l3_reported``, ...)."""
    details: dict[str, float | int | str] = {
        "capacity_sweep": swept.describe(),
        "capacity_samples": " ".join(f"{footprint}:{rate / 1e9:.4g}" for footprint, rate in swept.samples),
    }
    for cache in swept.caches:
        details[f"capacity_{cache.name}_reported"] = cache.reported_bytes
        details[f"capacity_{cache.name}_effective"] = cache.effective_bytes or 0
        details[f"capacity_{cache.name}_per_core"] = int(cache.per_core)
        details[f"capacity_{cache.name}_found"] = cache.found
        details[f"capacity_{cache.name}_note"] = cache.note
        if cache.seen:
            details[f"capacity_{cache.name}_seen"] = " ".join(map(str, cache.seen))
    return details


def capacities_from_details(details: Mapping[str, object]) -> tuple[CacheSize, ...]:
    """What :func:`capacity_details` wrote, read back, smallest level first (entries of another
    shape are left out: a file edited by hand)."""
    found = []
    for key, reported in details.items():
        level = key.removeprefix("capacity_l").removesuffix("_reported")
        if key != f"capacity_l{level}_reported" or not level.isdigit() or not _positive_int(reported):
            continue
        effective = details.get(f"capacity_l{level}_effective")
        how = details.get(f"capacity_l{level}_found")
        note = details.get(f"capacity_l{level}_note")
        size = effective if _positive_int(effective) else None
        if how not in ("knee", "unreached") if size else how != "unseen":
            continue
        found.append(
            CacheSize(
                int(level), reported, size,
                per_core=details.get(f"capacity_l{level}_per_core") == 1,
                found="knee" if how == "knee" else "unreached" if how == "unreached" else "unseen",
                note=note if isinstance(note, str) else "",
                seen=_sizes(details.get(f"capacity_l{level}_seen")),
            )
        )  # fmt: skip
    return tuple(sorted(found, key=lambda cache: cache.level))


def larger_capacities(
    old: Mapping[str, float | int | str], new: Mapping[str, float | int | str]
) -> dict[str, float | int | str]:
    """``new``'s details with each level's capacity the larger knee of the two sweeps (a knee beats
    none): a re-measure never lowers a calibration's figure."""
    kept = {cache.level: cache for cache in capacities_from_details(old) if cache.found == "knee"}
    merged = dict(new)
    for cache in capacities_from_details(new):
        previous = kept.get(cache.level)
        if previous is not None and (cache.found != "knee" or previous.sizing_bytes > cache.sizing_bytes):
            for key in (
                f"capacity_{cache.name}_{part}"
                for part in ("reported", "effective", "per_core", "found", "note", "seen")
            ):
                if key in old:
                    merged[key] = old[key]
                else:
                    merged.pop(key, None)
    return merged


def usable_caches(found: Sequence[CacheSize]) -> tuple[CacheInfo, ...]:
    """The levels a warm measurement may be served by, at the size this process sees: every level
    but those the sweep went past without seeing."""
    return tuple(
        CacheInfo(cache.level, cache.effective_bytes, cache.per_core)
        for cache in found
        if cache.effective_bytes is not None
    )


def roof_caches(found: Sequence[CacheSize]) -> tuple[CacheInfo, ...]:
    """The levels whose roofs are measured: each at the size this process sees, a level the sweep did
    not see at its reported size (its roof may still bound the next level's, :func:`.levels_of`)."""
    return tuple(CacheInfo(cache.level, cache.sizing_bytes, cache.per_core) for cache in found)


def samples_from_details(details: Mapping[str, object]) -> list[Sample]:
    """The sweep's samples :func:`capacity_details` kept (an unreadable entry gives none)."""
    text = details.get("capacity_samples")
    try:
        pairs = [item.split(":") for item in text.split()] if isinstance(text, str) else []
        return [(int(footprint), float(rate) * 1e9) for footprint, rate in pairs]
    except ValueError:
        return []


# -- the parts ---------------------------------------------------------------------------------


def _best_per_footprint(samples: Iterable[Sample]) -> list[Sample]:
    best: dict[int, float] = {}
    for footprint, rate in samples:
        if footprint > 0 and math.isfinite(rate) and rate > 0:
            best[footprint] = max(rate, best.get(footprint, 0.0))
    return sorted(best.items())


def _median_of_three(values: Sequence[float]) -> list[float]:
    """Each value the median of it and its two neighbours (the ends stay): one outlier moves nothing."""
    inner = [statistics.median(values[i - 1 : i + 2]) for i in range(1, len(values) - 1)]
    return [values[0], *inner, values[-1]] if len(values) > 2 else list(values)


def _non_increasing(values: Sequence[float]) -> list[float]:
    """The least-squares non-increasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for value in values:
        blocks.append([value, 1.0])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            mean, count = blocks.pop()
            previous = blocks[-1]
            previous[0] = (previous[0] * previous[1] + mean * count) / (previous[1] + count)
            previous[1] += count
    return [mean for mean, count in blocks for _ in range(int(count))]


def _plateaus(xs: Sequence[float], fit: Sequence[float], tol: float) -> list[tuple[int, int]]:
    """(first, last) index of each plateau of the fit long enough to be a level's, two whose rates
    differ by less than MIN_STEP joined into one."""
    runs: list[tuple[int, int]] = []
    first = 0
    for i in range(1, len(fit) + 1):
        if i == len(fit) or fit[i] < fit[first] - tol:
            if xs[i - 1] - xs[first] >= MIN_PLATEAU_OCTAVES - 1e-9:
                runs.append((first, i - 1))
            first = i
    joined: list[tuple[int, int]] = []
    for run in runs:
        if joined:
            previous = joined[-1]
            step = statistics.median(fit[previous[0] : previous[1] + 1]) - statistics.median(
                fit[run[0] : run[1] + 1]
            )
            if step < math.log(MIN_STEP):
                joined[-1] = (previous[0], run[1])
                continue
        joined.append(run)
    return joined


def _crossing(xs: Sequence[float], fit: Sequence[float], first: int, last: int, target: float) -> float:
    """The x where the (non-increasing) fit falls to ``target`` between indices first and last."""
    for i in range(first, last):
        if fit[i + 1] <= target:
            drop = fit[i] - fit[i + 1]
            share = (fit[i] - target) / drop if drop > 0 else 0.0
            return xs[i] + min(max(share, 0.0), 1.0) * (xs[i + 1] - xs[i])
    return xs[last]


def passed_at(cache: CacheInfo) -> float:
    """The footprint past which a sweep that saw no knee for ``cache`` has not seen it: a plateau's
    doubling past the top of its window."""
    return 2 * _window(cache)[1]


def _window(cache: CacheInfo) -> tuple[float, float]:
    down, up = WINDOW["per core" if cache.per_core else "shared"]
    return cache.size_bytes / down, cache.size_bytes * up


def _assign(guesses: Sequence[CacheInfo], knees: Sequence[Knee]) -> dict[int, Knee]:
    """Per level, the knee that ends it (see the module); a level without one is left out."""
    *smaller, last = sorted(guesses, key=lambda cache: cache.level)
    found: dict[int, Knee] = {}
    reach = max((_window(cache)[1] for cache in smaller), default=0.0)
    lo, hi = _window(last)
    candidates = [k for k in knees if max(lo, reach) < k.footprint <= hi]
    if candidates:
        found[last.level] = candidates[-1]
    before = [k for k in knees if not candidates or k.footprint < candidates[-1].footprint]
    return {**found, **_nearest(smaller, before)}


def _nearest(levels: Sequence[CacheInfo], knees: Sequence[Knee]) -> dict[int, Knee]:
    """Levels and knees matched in order, each knee within its level's window: the most matches,
    then the nearest (in doublings) to the reported sizes."""

    @functools.cache
    def best(i: int, j: int) -> tuple[int, float, tuple[tuple[int, int], ...]]:
        if i == len(levels) or j == len(knees):
            return (0, 0.0, ())
        options = [best(i + 1, j), best(i, j + 1)]
        lo, hi = _window(levels[i])
        if lo <= knees[j].footprint <= hi:
            matches, cost, pairs = best(i + 1, j + 1)
            distance = abs(math.log2(knees[j].footprint / levels[i].size_bytes))
            options.append((matches + 1, cost - distance, ((i, j), *pairs)))
        return max(options, key=lambda option: (option[0], option[1]))

    return {levels[i].level: knees[j] for i, j in best(0, 0)[2]}


def _capacity(cache: CacheInfo, knee: Knee | None, reached: int, sweep_note: str) -> CacheSize:
    def size(effective: int | None, found: Literal["knee", "unseen", "unreached"], note: str) -> CacheSize:
        return CacheSize(cache.level, cache.size_bytes, effective, cache.per_core, found, note)

    if knee is not None:
        note = (
            f"the rate steps from {knee.upper / 1e9:.3g} to {knee.lower / 1e9:.3g} GB/s at"
            f" {_size_text(knee.footprint)}"
        )
        at_reported = cache.size_bytes / STEP <= knee.footprint <= cache.size_bytes * STEP
        return size(cache.size_bytes if at_reported else _rounded(knee.footprint), "knee", note)
    if reached >= passed_at(cache):
        return size(None, "unseen", "the sweep went past it and saw no step in bandwidth")
    return size(cache.size_bytes, "unreached", f"the sweep {sweep_note or 'stopped'} before it")


def _rounded(nbytes: float) -> int:
    """Two significant digits in binary units: 45.3 MiB -> 45 MiB, 1.37 MiB -> 1.4 MiB."""
    scale = next((s for s in (2**30, 2**20, 2**10) if nbytes >= s), 1)
    return round(float(f"{nbytes / scale:.{_DIGITS}g}") * scale)


def _size_text(nbytes: float) -> str:
    from ..model.units import binary_bytes

    return binary_bytes(_rounded(nbytes))


def _sizes(text: object) -> tuple[int, ...]:
    """``"17825792 33554432"`` read back (anything else: none)."""
    parts = text.split() if isinstance(text, str) else []
    return tuple(int(part) for part in parts) if all(part.isdigit() for part in parts) else ()


def _positive_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
