"""Cold by rotation: copies of the kernel's arrays (:mod:`.copies`, :mod:`.arguments`), enough that one
cycle through them touches :data:`CYCLE_MULTIPLE` x the last-level cache this process sees, each call
on the next set; where a copy cannot be the same to the kernel, :func:`plan_rotation` says why and
the engine flushes instead. What is copied, its limits and why: docs/cache.md ("Rotation").
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .arguments import MAX_SCANNED, Entries, Found, Items, Slot, Template, contents, flat, scan_call
from .arrays import gpu_of, is_array, nbytes_of
from .copies import MIN_SPAN_COVER, Copier, HostPool, Unit, release_device_memory, settle, units_of
from .host_memory import mem_available

if TYPE_CHECKING:
    from pytest_roofline.timing.base import Kernel

#: the shortest cycle, in multiples of the effective last-level cache, after which a rotated kernel's
#: time stops changing (docs/methodology.md, "The rotation cycle")
COLD_CYCLE_MULTIPLE = 4
#: the margin over it, for a cache figure calibrated under load
CYCLE_MARGIN = 1.5
#: so one cycle through the copies aims at this many times the effective last-level cache ...
CYCLE_MULTIPLE = round(COLD_CYCLE_MULTIPLE * CYCLE_MARGIN)
#: ... and, where memory is short, touches no less than the shortest cold cycle
MIN_CYCLE_MULTIPLE = COLD_CYCLE_MULTIPLE
#: and at least this much (a small or unknown cache)
MIN_CYCLE_BYTES = 64 * 2**20
#: the copies take at most this much memory (the caller's own set, which is one of the cycle's, is
#: not new memory) ...
MAX_ROTATION_BYTES = 2**30
#: ... and at most this share of the memory free on the device that holds them
MAX_FREE_SHARE = 0.10
#: the arrays rotated must hold at least this share of the op's bytes, or the rest is out of reach
MIN_VISIBLE_SHARE = 0.5
#: at most this many objects made for the copies (each array's copies, each rebuilt container);
#: more is flushed instead
MAX_COPIED_OBJECTS = 1 << 18
#: making the copies takes at most this share of the measurement's time budget
MAX_COPY_SHARE = 0.25
#: ... as projected from the time the first 1/FIRST_FILL_SHARE of the sets took
FIRST_FILL_SHARE = 16
#: a cycle of at least this many sets of host arrays is made as the calls need it (:meth:`_Rotating.take`),
#: from its first 1/FIRST_FILL_SHARE (docs/cache.md, "Rotation") ...
GROWN_FROM = 8192
#: ... growing to this many times the sets made, or what the calls are predicted to need where that
#: is more, and whole where that is more than half of it
GROWTH = 2


@dataclass(frozen=True, slots=True)
class Rotation:
    """A cycle of argument sets: :attr:`kernel` calls the kernel on the next set at every call."""

    kernel: _Rotating
    #: argument sets in the cycle, the caller's own included
    copies: int
    #: bytes of the arrays in one set (arrays that share memory: the bytes they span)
    set_bytes: int
    #: seconds making the copies took (part of the measurement's cost)
    made_s: float = 0.0
    #: the memory the copies take (at most :func:`memory_cap`); the caller's set is not among them
    copy_bytes: int = 0
    #: with ``setup=``: what the engine runs before every call in its place (the set called last
    #: reset); None without
    reset: Callable[[], None] | None = None
    #: the caller's own set is one of the cycle's (False: copies only, an A/B comparison's)
    own_set: bool = True

    @property
    def cycle_bytes(self) -> int:
        return self.copies * self.set_bytes

    def describe(self) -> str:
        from pytest_roofline.model.units import binary_bytes

        sets = self.kernel.made
        if sets < self.copies:  # made as the calls needed them (_Rotating.take)
            return (
                f"cold by rotation over {sets} argument sets ({binary_bytes(sets * self.set_bytes)}), each"
                f" called once after a flush: the {self.copies} sets of a cycle out of the cache were"
                " made as the calls needed them"
            )
        made = f"yours and {_copies(self.copies - 1)}" if self.own_set else f"{_copies(self.copies)} of yours"
        return (
            f"cold by rotation over {self.copies} argument sets ({binary_bytes(self.cycle_bytes)} a cycle,"
            f" {made} taking {binary_bytes(self.copy_bytes)})"
        )

    def release(self) -> None:
        """Drop the copies (the measurement is over); what they took on a GPU goes back to it."""
        self.kernel.release()


@dataclass(frozen=True, slots=True)
class NoRotation:
    """Why the kernel's arguments cannot be rotated, in words the report shows."""

    reason: str


def plan_rotation(
    fn: Kernel,
    args: Sequence[object],
    kwargs: Mapping[str, object] | None,
    *,
    op_bytes: float,
    llc_bytes: int | None,
    free_bytes: Callable[[bool], int | None] | None = None,
    clock: Callable[[], float] | None = None,
    budget_s: float | None = None,
    setup: Callable[[], object] | None = None,
    own_set: bool = True,
) -> Rotation | NoRotation:
    """Copies of the arrays in ``fn(*args, **kwargs)`` enough for one cycle to leave the cache cold.

    ``free_bytes(device)``: the memory free on the host (False) or the GPU (True), None when unknown
    (default: :func:`free_memory`). ``clock`` times the planning (:attr:`Rotation.made_s`; default
    ``time.perf_counter``). ``budget_s``: the measurement's time budget, of which the copies may take
    :data:`MAX_COPY_SHARE` (None: no bound). ``setup``: the call's ``setup=``, called here once and
    before every call through :attr:`Rotation.reset`. ``own_set=False`` (an A/B comparison's, without
    ``setup``): every set is a copy, none the caller's, whose arguments get one untimed call.
    """
    own_set = own_set or setup is not None
    clock = clock or time.perf_counter
    start = clock()
    found, kernel, positional, keywords = scan_call(fn, args, kwargs)
    rebuilt = not (
        flat(kernel) and all(map(flat, positional.items)) and all(map(flat, keywords.items.values()))
    )
    planned = _plan(
        found, op_bytes=op_bytes, llc_bytes=llc_bytes, free_bytes=free_bytes or free_memory,
        # a set's objects: its arrays' copies, and the containers rebuilt around them
        per_set=len(found.arrays) + (found.nodes if rebuilt else 0), own_set=own_set,
    )  # fmt: skip
    if isinstance(planned, NoRotation):
        return planned
    units, copies = planned
    # one untimed call on the caller's own arguments shows what the kernel does to its containers
    if found.mutable and (changed := _changes(fn, args, kwargs, found.mutable)):
        return NoRotation(changed)
    if setup is not None and setup() is not None:
        return NoRotation("setup= returns each call's arguments")
    if not own_set:
        fn(*args, **(kwargs or {}))
    made = _Made(units, copies - own_set + (setup is not None), clock)
    gpu_arrays = [array for array in found.arrays if gpu_of(array) is not None]
    # a long cycle of host copies is made as the calls need it (:meth:`_Rotating.take`); not an A/B
    # comparison's, whose many short rounds would each pay a flush where a whole cycle turns on
    grown = setup is None and own_set and not gpu_arrays and copies >= GROWN_FROM
    if why := made.fill(budget_s, spent_s=clock() - start - made.grown_s, stop=0 if grown else made.n):
        return NoRotation(why)
    settle(gpu_arrays)

    def calls_on(first: int, stop: int) -> list[Callable[[], object]]:
        """One bound call on each of copies ``first`` to ``stop - 1``."""
        columns: list[list[object]] = [[] for _ in found.arrays]
        for unit, copier in zip(units, made.copiers, strict=True):
            for made_copy in copier.copies[first:stop]:
                for member, copy in zip(unit.members, made_copy, strict=True):
                    columns[member].append(copy)
        return _calls(kernel, positional, keywords, columns, stop - first, rebuilt=rebuilt)

    def grow(sets: int) -> list[Callable[[], object]]:
        """The cycle made up to ``sets`` sets (the caller's one of them): the calls on the new copies."""
        first, stop = made.made, sets - own_set
        made.grow(stop)
        return calls_on(first, stop)

    # the caller's own objects, as given
    calls: list[Callable[[], object]] = [functools.partial(fn, *args, **(kwargs or {}))] if own_set else []
    calls += calls_on(0, min(made.made, copies - own_set))
    cycle_bytes = cycle_target(llc_bytes)
    rotating = (
        _Rotating(calls, gpu_arrays, cycle_bytes, copies, grow if grown else None)
        if setup is None
        else _Resetting(calls, gpu_arrays, cycle_bytes, setup, made)
    )
    return Rotation(
        kernel=rotating,
        copies=copies,
        set_bytes=sum(unit.nbytes for unit in units),
        made_s=clock() - start - made.grown_s,
        copy_bytes=made.footprint,
        reset=rotating.reset if isinstance(rotating, _Resetting) else None,
        own_set=own_set,
    )


def _plan(
    found: Found,
    *,
    op_bytes: float,
    llc_bytes: int | None,
    free_bytes: Callable[[bool], int | None],
    per_set: int,
    own_set: bool = True,
) -> tuple[list[Unit], int] | NoRotation:
    """What is copied as one, and how many sets the cycle has; or why there is no rotation."""
    from pytest_roofline.model.units import binary_bytes

    if found.truncated:
        return NoRotation(
            f"the arguments hold more than {MAX_SCANNED} objects, too many to search for arrays"
        )
    kept = f"; {', '.join(found.kept)} is passed as it is" if found.kept else ""
    if not found.arrays:
        return NoRotation(f"no array among the kernel's arguments (a closure or lambda keeps its own{kept})")
    if found.used_bytes < MIN_VISIBLE_SHARE * op_bytes:  # an array passed twice counts twice, as in the op
        return NoRotation(
            f"the kernel's array arguments hold {binary_bytes(found.used_bytes)} of the op's "
            f"{binary_bytes(int(op_bytes))}: the rest is out of reach (captured by a closure?{kept})"
        )
    most = max(MAX_COPIED_OBJECTS // max(per_set, 1), 2)
    # a bound before reading layouts (slow for 20,000 arrays): shared memory spans >= 1/MIN_SPAN_COVER
    nbytes = sum(map(nbytes_of, found.arrays))
    if _too_few(most, nbytes / MIN_SPAN_COVER, llc_bytes):
        return NoRotation(f"{_objects(most, per_set)}, {_too_few(most, nbytes, llc_bytes)}")
    units = units_of(found.arrays, found.places)
    if isinstance(units, str):
        return NoRotation(units)
    set_bytes = sum(unit.nbytes for unit in units)
    if set_bytes == 0:
        return NoRotation("the kernel's arrays hold no bytes")
    cap = memory_cap(found.on_device, free_bytes)
    # each copy's memory, padded as the pool carves it; the caller's own set is no new memory
    per_copy = sum(unit.footprint(1) for unit in units)
    fixed = sum(unit.footprint(0) for unit in units)
    wanted = math.ceil(cycle_target(llc_bytes) / set_bytes)
    by_memory = max(cap - fixed, 0) // per_copy + own_set
    copies = max(2, min(wanted, by_memory, most))
    if (copies - own_set) * per_copy + fixed > cap:
        return NoRotation(
            f"memory allows {binary_bytes(cap)} of copies, less than one set of {binary_bytes(set_bytes)}"
        )
    if too_few := _too_few(copies, set_bytes, llc_bytes):
        limit = (
            _objects(copies, per_set)
            if copies == most
            else f"memory allows {binary_bytes(cap)} of copies"
            if copies == by_memory
            else f"{copies} sets"
        )
        return NoRotation(f"{limit}, {too_few}")
    return units, copies


def _copies(n: int) -> str:
    return f"{n} copy" if n == 1 else f"{n} copies"


def _objects(copies: int, per_set: int) -> str:
    return f"{copies} sets of {per_set} objects each (at most {MAX_COPIED_OBJECTS} made)"


def _too_few(copies: int, set_bytes: float, llc_bytes: int | None) -> str:
    """Why ``copies`` sets of ``set_bytes`` are too few for a cycle ("" when they are enough)."""
    from pytest_roofline.model.units import binary_bytes

    if copies * set_bytes >= MIN_CYCLE_MULTIPLE * (llc_bytes or 0):
        return ""
    return (
        f"too few to cycle through {MIN_CYCLE_MULTIPLE}x the {binary_bytes(llc_bytes or 0)} cache"
        f" in sets of {binary_bytes(set_bytes)}"
    )


def _changes(
    fn: Kernel, args: Sequence[object], kwargs: Mapping[str, object] | None, mutable: list[tuple[str, object]]
) -> str:
    """Which of the lists, dicts and mutable dataclasses in the call the kernel changes (one call,
    untimed), if any."""
    before = [_contents(container) for _, container in mutable]
    fn(*args, **(kwargs or {}))
    for (where, container), was in zip(mutable, before, strict=True):
        if _contents(container) != was:
            return f"the kernel changes {where}, which each set's copy would keep apart from yours"
    return ""


def _contents(container: object) -> tuple[object, ...]:
    """What a list, dict or mutable dataclass holds: each item's key and identity."""
    return tuple((key, id(value)) for key, value in contents(container))


class _Made:
    """The copies of every unit, made within the time budget."""

    def __init__(self, units: list[Unit], n: int, clock: Callable[[], float]) -> None:
        self.n, self.clock = n, clock
        #: the copies made so far
        self.made = 0
        pooled = [unit for unit in units if unit.pooled]
        self.footprint = sum(unit.footprint(n) for unit in units)
        pool = HostPool.get() if pooled else None
        start = clock()
        if pool is not None:
            pool.reserve(sum(unit.footprint(n) for unit in pooled))
        #: seconds growing the pool took (once a process: not the measurement's)
        self.grown_s = clock() - start
        self.copiers: list[Copier] = [unit.copier(n, pool) for unit in units]

    def fill(self, budget_s: float | None, *, spent_s: float, stop: int) -> str:
        """Make the first ``stop`` copies; why not, when the first of them show that all ``n`` would
        cost too much of the budget."""
        from pytest_roofline.model.units import seconds

        allowed = math.inf if budget_s is None else MAX_COPY_SHARE * budget_s
        projected = spent_s
        # projected from a share of the sets, not one: a pooled fill's overhead would count n times
        first = -(-self.n // FIRST_FILL_SHARE)
        try:
            start = self.clock()
            for copier in self.copiers:
                copier.fill(0, first)
                if (projected := spent_s + (self.clock() - start) * self.n / first) > allowed:
                    break  # already too much, however fast the rest
            if projected > allowed:
                self.copiers = []
                return (
                    f"making {_copies(self.n)} of the arguments would take about {seconds(projected)}, more"
                    f" than {MAX_COPY_SHARE:.0%} of the {seconds(budget_s or 0)} time budget"
                )
            self.made = first
            self.grow(max(stop, first))
        except (TypeError, ValueError, RuntimeError, MemoryError) as exc:  # a copy of the user's own kind
            self.copiers = []
            return f"copying the arrays failed ({type(exc).__name__}: {exc})"
        return ""

    def grow(self, stop: int) -> None:
        """Make the copies up to ``stop - 1``."""
        for copier in self.copiers:
            copier.fill(self.made, stop)
        self.made = stop

    def restore(self, index: int) -> None:
        """Give copy ``index`` the values the copies were made with (the last copy's, never called)."""
        for copier in self.copiers:
            copier.restore(index, self.n - 1)


def _calls(
    fn: Template, args: Items, kwargs: Entries, columns: list[list[object]], copies: int, *, rebuilt: bool
) -> list[Callable[[], object]]:
    """One bound call per argument set (``copies`` of them); ``rebuilt``: containers are rebuilt
    around each set."""
    if rebuilt:
        sets = ([column[i] for column in columns] for i in range(copies))
        return [functools.partial(fn.build(a), *args.build(a), **kwargs.build(a)) for a in sets]

    def column(t: Template) -> Iterable[object]:
        return columns[t.index] if isinstance(t, Slot) else itertools.repeat(t.build([]))

    kernel, keys = fn.build([]), list(kwargs.items)
    # constants repeat without end: the arrays' columns, of ``copies`` each, end every zip
    arg_rows = zip(*map(column, args.items), strict=False) if args.items else itertools.repeat(())
    kw_rows = zip(*map(column, kwargs.items.values()), strict=False) if keys else itertools.repeat(())
    return [
        functools.partial(kernel, *row, **dict(zip(keys, kw, strict=True)))
        for row, kw in itertools.islice(zip(arg_rows, kw_rows, strict=False), copies)
    ]


def cycle_target(llc_bytes: int | None) -> int:
    """Bytes one cycle through the copies should touch, for a last-level cache of ``llc_bytes`` as the
    process sees it (``Device.llc_bytes``: the calibration's effective figure)."""
    return max(CYCLE_MULTIPLE * (llc_bytes or 0), MIN_CYCLE_BYTES)


def memory_cap(on_device: bool, free_bytes: Callable[[bool], int | None]) -> int:
    """What the copies may take: :data:`MAX_ROTATION_BYTES`, or less where memory is short."""
    free = free_bytes(on_device)
    return MAX_ROTATION_BYTES if free is None else min(MAX_ROTATION_BYTES, int(MAX_FREE_SHARE * free))


def free_memory(on_device: bool) -> int | None:
    """Bytes free on the host (``MemAvailable``) or on the current GPU (through the framework already
    loaded); None when it cannot be told."""
    if not on_device:
        available = mem_available()
        if available is not None:
            return available
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            return None
    try:  # the framework the arrays came from is loaded already; a driver that fails is "unknown"
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            return int(cupy.cuda.runtime.memGetInfo()[0])
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            return int(torch.cuda.mem_get_info()[0])
    except Exception:  # CUDA's and the frameworks' own error types
        return None
    return None


def _released() -> Callable[[], object]:
    raise RuntimeError("this rotation's copies were released: its measurement is over")


class _Rotating:
    """The kernel as rotation calls it: each call on the next argument set (the engine passes none)."""

    __slots__ = (
        "_calls",
        "_cycle_bytes",
        "_fresh",
        "_gpu_arrays",
        "_grow",
        "_keep",
        "_next",
        "_sets",
        "turned",
    )

    def __init__(
        self,
        calls: list[Callable[[], object]],
        gpu_arrays: Sequence[object],
        cycle_bytes: int = 0,
        sets: int = 0,
        grow: Callable[[int], list[Callable[[], object]]] | None = None,
    ) -> None:
        #: while the cycle is made as the calls need it (None once whole), ``grow(sets)``: the cycle
        #: made up to ``sets`` sets, the calls on the new ones returned (docs/cache.md, "Rotation")
        self._grow = grow
        self._calls = calls
        #: while growing, the sets ahead of the next call that no call has touched since the last flush
        self._fresh = 0
        self._next: Callable[[], Callable[[], object]] = itertools.cycle(calls).__next__
        #: the caller's arrays on a GPU, whose copies' memory goes back to it on release
        self._gpu_arrays = list(gpu_arrays)
        #: the calls' results are kept for a cycle, of ``sets`` sets touching ``cycle_bytes``; 0: none
        self._cycle_bytes = cycle_bytes
        self._sets = sets
        #: keeps a result: sizes the ring on the first call, then the ring's own append (no Python
        #: frame of ours in a timed window)
        self._keep: Callable[[object], None] = self._first_result
        #: a whole cycle has run untimed (or a flush stood in for it) since the copies were made
        self.turned = False

    def _first_result(self, result: object) -> None:
        """Size the ring of kept results to a cycle's bytes, then keep ``result`` (why results are kept:
        docs/cache.md, "Rotation")."""
        returned = result if isinstance(result, (tuple, list)) else [result]
        nbytes = sum(nbytes_of(value) for value in returned if is_array(value))
        kept = min(self._sets, math.ceil(self._cycle_bytes / nbytes)) if nbytes else 0
        self._keep = collections.deque[object](maxlen=kept).append
        self._keep(result)

    def __call__(self, *_: object) -> object:
        result = self._next()()
        self._keep(result)
        return result

    @property
    def made(self) -> int:
        """The argument sets made so far."""
        return len(self._calls)

    @property
    def grows(self) -> bool:
        """Whether the cycle is made as the calls need it, and not whole yet (:meth:`take`)."""
        return self._grow is not None

    def took(self, calls: int) -> None:
        """``calls`` calls were made, on sets out of the cache as far as there were any."""
        if self._grow is not None:
            self._fresh = max(self._fresh - calls, 0)

    def take(self, calls: int, ahead: int, flush: Callable[[], object]) -> None:
        """Make the next ``calls`` calls each find a set out of the cache: ``flush`` where too few are
        left, after growing the cycle where fewer sets are made than the ``ahead`` calls predicted."""
        if self._grow is None:
            return
        if calls > self._fresh:
            sets = made = len(self._calls)
            if (needed := max(calls, ahead)) > made:
                sets = self._sets if 2 * needed > self._sets else max(needed, GROWTH * made)
                sets = min(sets, self._sets)
                self._calls += self._grow(sets)
            flush()
            self._fresh = sets
            self._next = itertools.cycle(self._calls).__next__
            if sets == self._sets:
                self._grow = None
                return
        self._fresh -= calls

    def release(self) -> None:
        self._grow = None
        self._next = _released
        self._keep = self._first_result  # the kept results go with the ring
        release_device_memory(self._gpu_arrays)


class _Resetting(_Rotating):
    """Rotation with ``setup=``: :meth:`reset`, run before every call, resets the set called last."""

    __slots__ = ("_last", "_made", "_setup", "_turn")

    def __init__(
        self,
        calls: list[Callable[[], object]],
        gpu_arrays: Sequence[object],
        cycle_bytes: int,
        setup: Callable[[], object],
        made: _Made,
    ) -> None:
        super().__init__(calls, gpu_arrays, cycle_bytes, len(calls))
        self._setup, self._made = setup, made
        self._turn = 0
        self._last: int | None = None

    def __call__(self, *_: object) -> object:
        call = self._next()
        turn = self._last = self._turn
        self._turn = (turn + 1) % self._sets
        result = call()
        self._keep(result)
        return result

    def reset(self) -> None:
        last, self._last = self._last, None
        if last is None:
            return
        if last > 0:
            self._made.restore(last - 1)
            settle(self._gpu_arrays)
        elif self._setup() is not None:
            from .calls import SetupError

            raise SetupError(
                "setup returned the kernel's arguments after returning None: it must do one or the other"
            )

    def release(self) -> None:
        self._made.copiers = []
        super().release()
