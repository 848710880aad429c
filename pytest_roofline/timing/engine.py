"""The backend-neutral measurement loop: :func:`measure` checks its arguments, then warms the kernel
up, picks how many calls a sample times, and hands the call to the sampler (:mod:`.sampling`), all
against a :class:`Backend`. What each phase does and why is docs/measurement.md ("The phases of one
measurement", "The time budget"); what only a backend's author needs, docs/development.md ("The
engine's phases, for a backend's author"). One measurement runs at a time in a process
(:func:`measuring_alone`): two on two threads would each slow the other's kernel and both read clean.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from pytest_roofline.errors import InvalidTypeError, InvalidValueError
from pytest_roofline.model.measurement import Measurement, StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.units import seconds
from pytest_roofline.timing.base import Backend, Kernel, Probe
from pytest_roofline.timing.budget import (
    WARMUP_SHARE,
    floor_fits,
    saw_flush,
    seen_flush_s,
)
from pytest_roofline.timing.cache import FLUSHED, CachePlan
from pytest_roofline.timing.calls import KernelCall, check_call
from pytest_roofline.timing.sampling import Readings, Sampler, Seed, ceil_count

if TYPE_CHECKING:
    from pytest_roofline.timing.clocks import ClockWatcher
    from pytest_roofline.timing.contention import Snapshot

__all__ = [
    "CYCLE_SHARE",
    "DEFAULT_POLICY",
    "MAX_CALLS_PER_SAMPLE",
    "MAX_GRAPH_COPIES",
    "measure",
    "measuring_alone",
]


#: upper bound on the calls batched into one sample
MAX_CALLS_PER_SAMPLE = 1_000_000
#: a graph-mode measurement captures a whole rotation cycle of at most this many copies; a longer one
#: is flushed instead (capturing that many nodes costs more than the flushes)
MAX_GRAPH_COPIES = 1024
#: before a flush's cost on the backend is known, rotation's untimed cycle runs in full where it
#: costs at most this share of the time budget (or what the warm-up runs anyway); past it, a flush
#: evicts the fresh copies instead
CYCLE_SHARE = 0.1
#: the warm-up goes on past ``policy.warmup_s`` while a round's time per call falls by this share or
#: more from the round before, or its calls still fault in pages (:func:`_settling`) ...
SETTLING_SHIFT = 0.05
#: ... at least this many minor page faults per call (a page or more of memory never touched) ...
SETTLED_FAULTS = 1.0
#: ... up to this share of the time budget; rounds whose calls fault are paid apart from it, up to one
#: budget more (docs/measurement.md, "The phases of one measurement")
SETTLE_SHARE = 0.5
DEFAULT_POLICY = Policy()


#: held while a measurement runs: re-entrant, as the session holds it around a whole measurement
#: (rotation's copies, probes, a re-measure) and :func:`measure` takes it again inside
_MEASURING = threading.RLock()


class measuring_alone:  # lower case, like contextlib.suppress: it reads as a with-statement
    """Hold the process's measurement lock, then ``then`` (a device's lock across processes): a
    measurement on another thread waits until this one ends. ``with`` gives whether this one waited.
    """

    # the process's lock always first: a thread holding a device's lock never waits for another thread.
    # A class, not a generator: an exception from the kernel passes with no frame of ours
    def __init__(self, then: AbstractContextManager[object] | None = None) -> None:
        self._then = then

    def __enter__(self) -> bool:
        waited = not _MEASURING.acquire(blocking=False)
        if waited:
            _MEASURING.acquire()
        if self._then is not None:
            try:
                self._then.__enter__()
            except BaseException:
                _MEASURING.release()
                raise
        return waited

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._then is not None:
                self._then.__exit__(kind, exc, tb)
        finally:
            _MEASURING.release()


def measure(
    fn: Kernel,
    *args: object,
    kwargs: Mapping[str, object] | None = None,
    setup: Callable[[], object] | None = None,
    policy: Policy = DEFAULT_POLICY,
    backend: Backend | None = None,
    probe: Probe | None = None,
    snapshot: Callable[[], Snapshot] | None = None,
    cache: CachePlan = FLUSHED,
    throttle: ClockWatcher | None = None,
) -> Measurement:
    """Time ``fn(*args, **kwargs)`` under ``policy``; ``backend=None``: the process's :class:`CpuBackend`.

    ``setup``: called before every call, outside the timed window; it may return ``(args, kwargs)``
    for that call, which then must be the only place the kernel's arguments come from. ``cache``:
    how the cache is kept (:class:`~.cache.CachePlan`): :data:`~.cache.FLUSHED` (a flush before every
    call, the default), :data:`~.cache.WARM`, or :func:`~.cache.plan_cache`'s plan, whose rotation's
    copies the calls take in turn instead of ``args``. ``probe``: a reference kernel timed beside
    this one. ``snapshot``: reads the OS's contention counters (:func:`.contention.take_snapshot`).
    ``throttle``: a watch on the GPU's clocks (:class:`.clocks.ClockWatcher`), whose slowed samples
    are left out (:mod:`.throttle`). Exceptions raised by ``fn`` or ``setup`` propagate unchanged.
    """
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    if not callable(fn):
        raise InvalidTypeError(f"kernel must be callable; got {fn!r} ({type(fn).__name__})")
    check_call(kwargs, setup)
    if not isinstance(policy, Policy):
        raise InvalidTypeError(f"policy must be a Policy; got {policy!r} ({type(policy).__name__})")
    if probe is not None and not isinstance(probe, Probe):
        raise InvalidTypeError(f"probe must be a Probe; got {probe!r} ({type(probe).__name__})")
    if backend is None:
        backend = _default_backend()
    elif not isinstance(backend, Backend):
        raise InvalidTypeError(
            f"backend must be a pytest_roofline.timing.base.Backend (a subclass of it);"
            f" got {backend!r} ({type(backend).__name__})"
        )
    if not isinstance(cache, CachePlan):
        raise InvalidTypeError(
            f"cache must be a CachePlan (timing.cache.FLUSHED, timing.cache.WARM or plan_cache()'s);"
            f" got {cache!r} ({type(cache).__name__})"
        )
    if cache.rotation is not None and cache.rotation.copies > MAX_GRAPH_COPIES and backend.graph is True:
        cache = CachePlan(
            "flush",
            f"graph mode: {cache.rotation.copies} copies are too many to capture into one graph (at most"
            f" {MAX_GRAPH_COPIES}), so a flush before every replay instead of rotation",
        )
    rotation = cache.rotation
    if rotation is None:
        call = KernelCall(fn, tuple(args), kwargs, setup)
    elif setup is not None and rotation.reset is None:
        raise InvalidValueError(
            "rotation and setup exclude each other unless the rotation was planned with that setup"
            " (plan_cache(..., setup=setup))"
        )
    else:
        call = KernelCall(rotation.kernel, setup=rotation.reset)
    with measuring_alone():  # the budget starts once this thread has the machine to itself
        # in this frame, not a callee's: the frames from the fixture to the timer stay few
        each_setup = call.setup is not None
        flush = cache.flush
        start = backend.clock()
        replayed = rotation is not None and backend.graph is True
        # the copies' untimed first cycle, once per rotation (docs/measurement.md, "The time budget")
        grows = rotation is not None and rotation.kernel.grows
        turns = rotation is not None and not grows and (replayed or not rotation.kernel.turned)
        cycle = rotation.copies if rotation is not None and turns else 0
        warm = _warm_up(backend, call, policy, cycle=cycle, flush=flush, cut=not (replayed or grows))
        if rotation is not None:
            rotation.kernel.turned = True
        warmup_s = (warm.seed.start if warm.seed is not None else backend.clock()) - start
        batched = _calls_per_sample(warm.per_call_s, backend.resolution_s, policy.batch_factor)
        if rotation is not None:  # each call of a window on a copy of its own
            # a graph captures the whole cycle (docs/cache.md, "On a GPU")
            batched = rotation.copies if replayed else min(batched, rotation.copies)
        # setup or a flush comes before every call: a batch would time k - 1 calls without them
        k = 1 if each_setup or flush else batched
        if warm.seed is not None and k != 1:  # a batched sample is k calls: the seed was a warm-up call
            warm = dataclasses.replace(warm, calls=warm.calls + 1, seed=None)
            warmup_s = backend.clock() - start
        ready = None
        if grows:
            assert rotation is not None
            ready = rotation.kernel.take
            rotation.kernel.took(warm.calls)
        sampler = Sampler(
            backend,
            call,
            policy,
            k,
            flush,
            probe,
            budget_start=start + warm.apart_s,
            rewarm=cache.rewarm,
            throttle=throttle,
            ready=ready,
        )
        before = snapshot() if snapshot is not None else None
        samples, stats, reason = sampler.run(max(warm.per_call_s, warm.cost_s), seed=warm.seed)
        readings = sampler.readings()
        contention = None
        if snapshot is not None and before is not None:
            from pytest_roofline.timing.contention import between

            affinity = getattr(os, "sched_getaffinity", None)
            cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
            contention = between(
                before, snapshot(), samples=len(samples), preempted=sampler.preempted, cores=cores
            )
        return Measurement(
            samples_s=tuple(samples),
            calls_per_sample=k,
            stats=stats,
            stat=policy.stat,
            time_s=stats.value(policy.stat),
            wall_s=backend.clock() - start,
            warmup_calls=warm.calls,
            warmup_s=warmup_s,
            backend=backend.name,
            device=backend.device_name,
            cold_method=cache.method,
            stop_reason=reason,
            policy=policy,
            cache_note=_cache_note(
                cache,
                k,
                setup=each_setup,
                unbatched=batched,
                cycle_flushed=warm.flushed_for_cycle,
                replayed=replayed,
            ),
            cache_reason=cache.note,
            probe=sampler.probe_run(),
            contention=contention,
            excluded=len(samples) - sampler.transient - sampler.slowed - stats.n,
            transient=sampler.transient,
            still_falling=sampler.still_falling,
            slowed=sampler.slowed,
            slowed_kept=sampler.slowed_kept,
            clocks_per_sample=throttle is not None,
            # the least any round showed: BLAS threads a probe woke spin on for a while
            parallelism=min(parallelism) if (parallelism := readings.parallelism) else None,
            cpu_share=_middle(readings.cpu_share),
            threads=_kernel_threads(readings),
            wait_share=_middle(readings.wait_share),
            setup=each_setup,
            rotation_copies=rotation.kernel.made if rotation is not None else 0,
            budget_note=_budget_note(policy, warm.calls, len(samples), sampler.per_sample_s, reason),
        )


def _budget_note(
    policy: Policy, warmup_calls: int, samples: int, per_sample_s: float, reason: StopReason
) -> str:
    """Why the budget cut the measurement short of its wanted calls, or "" where it did not."""
    wanted_warmup = min(policy.warmup_calls, DEFAULT_POLICY.warmup_calls)
    short = samples < policy.min_samples or warmup_calls < wanted_warmup
    if reason is not StopReason.TIME or not short:
        return ""
    calls = f"{warmup_calls} warm-up call{'s' if warmup_calls != 1 else ''}"
    taken = f"{samples} sample{'s' if samples != 1 else ''}"
    return (
        f"the {seconds(policy.max_time_s)} time budget held {calls} and {taken} of {seconds(per_sample_s)}"
        f" ({policy.min_samples} wanted): a longer max_time gives more"
    )


def _cache_note(
    cache: CachePlan,
    k: int,
    *,
    setup: bool = False,
    unbatched: int = 1,
    cycle_flushed: bool = False,
    replayed: bool = False,
) -> str:
    """How the cache was kept, in words."""
    if cache.rotation is not None:
        batch = f"; {k} calls per sample" if k > 1 else ""
        if replayed:
            batch = f"; each graph replay calls every copy once ({k} calls per sample)"
        first = "; a flush instead of the untimed first cycle (too long)" if cycle_flushed else ""
        reset = (
            "; setup= resets your arrays after each call on them, a kept copy each other set after its"
            " call (one call per sample)"
            if setup
            else ""
        )
        return f"{cache.rotation.describe()}{batch}{first}{reset}"
    if cache.flush:
        if setup:
            note = "cold: setup, then a cache flush, before every call (one call per sample)"
        else:
            note = "cold: cache flushed before every call"
            if unbatched > 1:  # the timer is coarse for one call: more samples, not a warm batch
                note += f" (one call per sample, although the timer would batch {unbatched})"
        return f"{note}; {cache.note}" if cache.note else note
    note = f"{cache.state}: {cache.note}" if cache.note else cache.state
    if k > 1:
        note += f"; {k} calls per sample"
    return f"{note}; setup before every call (one call per sample)" if setup else note


@functools.cache
def _default_backend() -> Backend:
    # lazily: building a backend measures its clock
    from pytest_roofline.timing.cpu import CpuBackend

    return CpuBackend()


@dataclass(frozen=True, slots=True)
class _WarmUp:
    """What the warm-up did: calls, the per-call estimate, a call's wall cost in the last round,
    whether a flush stood in for the rest of rotation's untimed cycle, and the first sample where
    the budget held one warm-up call (:class:`~.sampling.Seed`)."""

    calls: int
    per_call_s: float
    cost_s: float
    flushed_for_cycle: bool = False
    seed: Seed | None = None
    #: the time of the rounds whose calls faulted in pages, paid apart from the budget
    apart_s: float = 0.0


def _warm_up(
    backend: Backend,
    call: KernelCall,
    policy: Policy,
    *,
    cycle: int = 0,
    flush: bool = False,
    cut: bool = True,
) -> _WarmUp:
    """Run the warm-up rounds (:class:`_WarmUp`). ``cycle``: the rotation's copies, each called once
    here, untimed, or one flush for the rest (:func:`_flush_instead`). ``flush``: flush before a
    second call taken as a sample (docs/measurement.md, "The time budget"). ``cut``: False where a
    sample is not one call (a graph replays the whole cycle).
    """
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    wanted_calls = max(policy.warmup_calls, cycle)  # rotation's untimed cycle, one call a copy
    budget_s = policy.max_time_s
    warmup_s = min(policy.warmup_s, WARMUP_SHARE * budget_s)  # a short budget warms up for less
    settle_until_s = max(warmup_s, SETTLE_SHARE * budget_s)
    sets = cycle  # the cycle as asked: ``cycle`` is zeroed where a flush stands in for it
    start = backend.clock()
    calls = rounds = 0
    size = 1
    largest = 0  # calls in the largest round after the first
    per_call_s = cost_s = first_s = 0.0
    flushed_for_cycle = deciding = settling = False
    before: _Round | None = None  # the last round after the first: per-call time and faults
    apart_s = 0.0  # the faulting rounds' time, paid apart from the budget
    while True:
        round_start = backend.clock()
        if deciding:  # one call, as a sample is taken
            (window,), (preempted,) = call.run(backend, calls=1, samples=1, flush=flush)
            seed = Seed(window, preempted, round_start, backend.clock())
            if window >= first_s / 2:  # as long as the first: the kernel's own time, a sample
                return _WarmUp(calls, first_s, cost_s, flushed_for_cycle, seed)
            # far shorter: the first call paid a one-off (docs/measurement.md, "The time budget")
            cost_s = backend.clock() - round_start
            if not floor_fits(0.0, cost_s, budget_s):
                return _WarmUp(calls, window, cost_s, flushed_for_cycle, seed)
            deciding = False  # this one warmed up too, and the warm-up goes on
        else:
            (window,), _ = call.run(backend, calls=size, samples=1, flush=False)
        cost_s = (backend.clock() - round_start) / size
        calls += size
        rounds += 1
        this = _Round(window / size, backend.last_page_faults)
        if rounds > 1 and size >= largest:
            largest, per_call_s = size, window / size
        if rounds > 1:
            settling = _settling(before, this, calls=calls, sets=sets)
            before = this
            if _faulting(this):  # the process populating its memory: once a process, not this kernel's
                apart_s = min(apart_s + cost_s * size, budget_s)
        elapsed = backend.clock() - start
        charged = elapsed - apart_s
        warmed = rounds >= 2 and calls >= wanted_calls and elapsed >= warmup_s
        if warmed and (not settling or charged >= settle_until_s):
            return _WarmUp(calls, per_call_s, cost_s, flushed_for_cycle, apart_s=apart_s)
        if rounds == 1 and cut and not floor_fits(elapsed, cost_s, budget_s):
            first_s, deciding = window, True
            if calls < cycle:  # the next call may be a sample: on a copy out of the cache
                wanted_calls, flushed_for_cycle, cycle = _flush_for_cycle(backend, calls), True, 0
            continue
        if rounds > 1 and calls < cycle:
            rest_s = (cycle - calls) * max(per_call_s, cost_s)
            # faulting calls fill the ring of kept outputs: a flush would leave that to the samples
            filling = _faulting(this) and rest_s <= budget_s - apart_s
            if not filling and _flush_instead(backend, rest_s, warmup_s - elapsed, budget_s):
                wanted_calls, flushed_for_cycle, cycle = _flush_for_cycle(backend, calls), True, 0
                elapsed = backend.clock() - start
                if elapsed >= warmup_s and not settling:
                    return _WarmUp(calls, per_call_s, cost_s, flushed_for_cycle, apart_s=apart_s)
        if rounds > 1:
            size *= 2
            per_call_cost = max(per_call_s, cost_s)
            if per_call_cost > 0:
                # never run much past the warm-up (or settling) time
                if settling and elapsed >= warmup_s:
                    left_s = settle_until_s - charged + (budget_s - apart_s) * _faulting(this)
                else:
                    left_s = warmup_s - elapsed
                size = min(size, ceil_count(left_s / per_call_cost))
            size = max(size, wanted_calls - calls, 1)


@dataclass(frozen=True, slots=True)
class _Round:
    """What a warm-up round showed: its time per call, and its minor page faults per call (None: the
    backend does not say)."""

    per_call_s: float
    faults: float | None


def _faulting(r: _Round) -> bool:
    return r.faults is not None and r.faults >= SETTLED_FAULTS


def _settling(before: _Round | None, now: _Round, *, calls: int, sets: int) -> bool:
    """Whether the warm-up has not settled yet after the round ``now`` (``before``: the round before
    it, None where ``now`` is the first to compare; ``sets``: the rotation's cycle). Rule:
    docs/measurement.md, "The phases of one measurement"."""
    if before is None:
        return _faulting(now) and calls <= sets
    if now.per_call_s < (1 - SETTLING_SHIFT) * before.per_call_s:
        return True
    if not _faulting(now):
        return False
    fewer = before.faults is None or (now.faults or 0.0) < (1 - SETTLING_SHIFT) * before.faults
    return calls <= sets or fewer


def _flush_for_cycle(backend: Backend, calls: int) -> int:
    """One flush in place of the rest of rotation's untimed cycle, its time remembered
    (:func:`.budget.saw_flush`); returns the calls the warm-up then wants."""
    start = backend.clock()
    backend.flush_cache()
    saw_flush(backend, backend.clock() - start)
    return max(DEFAULT_POLICY.warmup_calls, calls)


def _flush_instead(backend: Backend, rest_s: float, warmup_left_s: float, max_time_s: float) -> bool:
    """Whether one flush should stand in for the ``rest_s`` of rotation's untimed cycle: where that
    costs more than a flush on this backend (else :data:`CYCLE_SHARE` of the budget) and more than the
    warm-up still to run."""
    flush_s = seen_flush_s(backend)
    return rest_s > max(CYCLE_SHARE * max_time_s if flush_s is None else flush_s, warmup_left_s)


def _calls_per_sample(per_call_s: float, resolution_s: float, batch_factor: float) -> int:
    floor_s = batch_factor * resolution_s
    if per_call_s >= floor_s:
        return 1
    if per_call_s <= 0:
        return MAX_CALLS_PER_SAMPLE
    return min(MAX_CALLS_PER_SAMPLE, ceil_count(floor_s / per_call_s))


def _kernel_threads(readings: Readings) -> int | None:
    """The threads the kernel ran on: the middle round's count, but one where a round ran it alone
    (:attr:`~.contention.ThreadWait.alone`)."""
    if not readings.threads:
        return None
    return 1 if readings.alone else int(_middle(readings.threads) or 0)


def _middle(values: Sequence[float]) -> float | None:
    """The median of a round's readings (the upper one of an even count), None when there are none."""
    return sorted(values)[len(values) // 2] if values else None
