"""The backend-neutral measurement loop: warm-up, batching, sampling rounds, probes, stopping.

:func:`measure` checks its arguments, then runs three phases against a :class:`Backend`:

1. **Warm-up** (never sampled): rounds of 1, 1, 2, 4, ... back-to-back calls, each round capped
   so it does not overshoot the warm-up time, until at least ``policy.warmup_s`` of wall time
   *and* ``policy.warmup_calls`` calls have passed, and always at least two rounds. The per-call
   estimate comes from the largest round after the first, never from the first call, which may
   pay for compilation, page faults or lazy loading (a JIT kernel's 1 s first call must not hide
   its 1 µs calls), so even a slow kernel warms up in two calls.
2. **Batching**: when that estimate is below ``policy.batch_factor`` x ``backend.resolution_s``,
   each sample times ``k = ceil(batch_factor x resolution / per_call)`` calls (at most
   :data:`MAX_CALLS_PER_SAMPLE`) and reports the window divided by ``k``, unless the measurement
   is cold by a flush (``policy.flush``): a flush comes before every call, so a sample is one call
   however short (one cold call spread over k - 1 warm ones would be neither a cold nor a warm
   time); the timer's resolution then shows in the noise, which more samples average out, and the
   cache note says so. With a :class:`~.rotation.Rotation` every call takes the next copy of the
   arguments, so a batch is k cold calls (k at most the copies: no window calls one copy twice);
   its warm-up runs at least one whole cycle of the copies untimed (fresh copies are in the cache).
3. **Sampling** in rounds, the first of ``policy.min_samples`` samples (fewer when the time budget
   cannot afford them, never fewer than :data:`MIN_SAMPLES_FLOOR`), each later one sized from
   the samples the confidence interval still needs and the time budget left. After each round,
   when the first half of the samples since the last cut ran slower than the second half beyond
   doubt, by 5% or more (:func:`.transient.slower_start`), that first half is cut, if the cut
   falls within the first 250 ms of sampling (:data:`.transient.SETTLE_WITHIN_S`): the machine
   had not settled on the kernel yet, and the statistics, the interval and the minimum span count
   from the cut on (``Measurement.transient`` says how many were cut). Then the stopping rules
   are checked in this order: the 95% interval of the median within ``policy.target_rel_ci`` of
   it, over at least 6 samples and, for a kernel of 10 µs or more a
   call, ``policy.min_time_s`` of sampling (:attr:`StopReason.PRECISION`);
   ``policy.max_samples`` reached (:attr:`StopReason.MAX_SAMPLES`); the budget ``policy.max_time_s``
   for the whole measurement (warm-up, flushes and probes included) spent, or too little of it
   left for another sample (:attr:`StopReason.TIME`).

With a :class:`~.base.Probe`, a reference kernel is timed before the first round, after every round
that ends at least ``policy.probe_interval_s`` after the last probe (rounds are cut to that length),
and after the last round, so kernel and probe see the same load; its rates travel with the
measurement. A probe's first call in a measurement may be preceded by untimed ones
(``Probe.warmup_calls``: BLAS wakes its threads); in a warm measurement of an op that fits in the
cache (``policy.rewarm``) one untimed call of the kernel follows each probe, which has streamed
through the cache. With a ``snapshot`` reader, the OS's view of contention over the sampling phase is
kept too, and a sample whose window the backend saw preempted (``last_preempted``) is left out of
the statistics while enough clean samples remain.

With ``setup`` (an in-place kernel that must start from fresh inputs, as pytest-benchmark's
``pedantic(setup=...)``), every call of the kernel, warm-up and re-warming calls included, is a
window of its own with ``setup()`` run before it on the host, outside the window (and before the
flush, which then evicts what setup wrote): a CUDA event pair never spans host code. Samples are
never batched then (k = 1), and the cache note says so. ``setup`` may return ``(args, kwargs)``
for the next call, which then must be the only place the kernel's arguments come from.

One measurement runs at a time in a process (:func:`measuring_alone`): measurements on two threads
take turns, as two at once would each slow the other's kernel and both read clean.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import reprlib
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import Enum
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from pytest_roofline.model.stats import Stats
from pytest_roofline.model.units import seconds
from pytest_roofline.timing.base import MIN_SAMPLES_FLOOR, Backend, Kernel, Policy, Probe, Stat
from pytest_roofline.timing.transient import MIN_SHIFT, SETTLE_WITHIN_S, slower_start

from ..errors import InvalidTypeError, InvalidValueError, RooflineUsageError

if TYPE_CHECKING:
    from pytest_roofline.timing.clocks import ClockLog
    from pytest_roofline.timing.contention import Contention, Snapshot, ThreadWait
    from pytest_roofline.timing.rotation import Rotation

#: how a cold measurement kept the cache cold (``None``: a warm measurement)
ColdMethod = Literal["rotation", "flush", "past-cache"]

#: upper bound on the calls batched into one sample
MAX_CALLS_PER_SAMPLE = 1_000_000
#: rotation's untimed cycle runs in full when it costs at most this share of the time budget; past
#: it, a flush evicts the fresh copies instead (it costs a pass over twice the cache)
CYCLE_SHARE = 0.1
#: ``policy.min_time_s`` holds for kernels whose median call takes at least this long
MIN_TIME_FROM_S = 10e-6
DEFAULT_POLICY = Policy()

#: below six samples even [min, max] covers the median less than 95% of the time (1 - 2^(1-n)),
#: so a tight spread over fewer samples is luck, not precision
_MIN_PRECISION_SAMPLES = 6
#: a planned round aims this much past the samples the interval is predicted to need
_ROUND_MARGIN = 1.1
#: rounds grow the sample count by at least this fraction (fewer, cheaper checks) and at most double it
_MIN_ROUND_GROWTH = 0.1


#: held while a measurement runs: re-entrant, as the session holds it around a whole measurement
#: (rotation's copies, probes, a re-measure) and :func:`measure` takes it again inside
_MEASURING = threading.RLock()


class measuring_alone:  # lower case, like contextlib.suppress: it reads as a with-statement
    """Hold the process's measurement lock, then ``then`` (a device's lock across processes): a
    measurement on another thread waits until this one ends. ``with`` gives whether this one waited.

    Always the process's lock first, so a thread that holds a device's lock never waits for another
    thread. A class, not a generator: an exception from the kernel passes through with no frame of ours.
    """

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


class SetupError(RooflineUsageError, TypeError):
    """``setup`` returned neither None nor ``(args, kwargs)``, or arguments the call gave too."""


class StopReason(str, Enum):
    """Which rule ended sampling."""

    PRECISION = "precision"
    TIME = "time"
    MAX_SAMPLES = "max_samples"


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """A probe's rates over one measurement (work per second, in the order taken)."""

    name: str
    resource: str
    rates: tuple[float, ...]
    #: the rates the statistics use (those whose window was not preempted, while enough remain)
    stats: Stats
    #: wall time the probe cost, inside the measurement's budget
    wall_s: float

    def value(self, stat: Stat) -> float:
        """The rate matching the kernel's statistic: the best rate goes with the kernel's best time."""
        return self.stats.max if stat == "min" else self.stats.value(stat)


@dataclass(frozen=True, slots=True)
class Measurement:
    """The result of :func:`measure`, raw samples included."""

    #: per-call seconds of every sample, in the order taken (each window divided by ``calls_per_sample``)
    samples_s: tuple[float, ...]
    #: back-to-back calls timed in one window (k)
    calls_per_sample: int
    #: statistics of the trusted samples: those after the ``transient`` ones, less the preempted
    #: ones while enough others remain
    stats: Stats
    #: the statistic the verdict uses, and its value in seconds per call
    stat: Stat
    time_s: float
    #: wall time the whole measurement cost: warm-up, flushes, probes and bookkeeping included
    wall_s: float
    warmup_calls: int
    #: wall time of the warm-up phase
    warmup_s: float
    backend: str
    device: str
    #: whether every timed call started from a flushed cache
    flushed: bool
    stop_reason: StopReason
    policy: Policy
    #: why the cache was (or was not) flushed, for the report
    cache_note: str = ""
    #: the reference probe timed beside the kernel, when one was given
    probe: ProbeRun | None = None
    #: what the OS said about contention over the sampling phase, when it was asked
    contention: Contention | None = None
    #: samples left out of the statistics because their window was preempted
    excluded: int = 0
    #: leading samples left out of the statistics because the kernel ran slower over them than
    #: over the samples after (:mod:`.transient`): the machine had not settled on it yet
    transient: int = 0
    #: the kernel's parallelism while sampled: process CPU time over the timing thread's (1 for a
    #: single-threaded kernel), the least of its rounds, when the backend can tell (``last_parallelism``)
    parallelism: float | None = None
    #: the share of the sampled windows' wall time the timing thread ran (median of the rounds)
    cpu_share: float | None = None
    #: the threads the kernel ran on and the share of their time they waited for a core (each the
    #: median of the rounds: beside a busy neighbour one round may see a BLAS thread starved below
    #: the count's cut), when the backend can tell (``last_thread_wait``)
    threads: int | None = None
    wait_share: float | None = None
    #: what a GPU's clocks did while it was measured (:mod:`.clocks`), when the backend watched them
    clocks: ClockLog | None = None
    #: whether ``setup`` ran before every call (so one call per sample, never a batch)
    setup: bool = False
    #: argument sets the calls rotated through (0: not rotated)
    rotation_copies: int = 0
    #: bytes one cycle through them touched
    rotation_bytes: int = 0
    #: the op moves enough to evict its own data: cold with neither a flush nor copies
    past_cache: bool = False

    @property
    def cold_method(self) -> ColdMethod | None:
        """How every timed call started from a cold cache; None for a warm measurement."""
        if self.rotation_copies:
            return "rotation"
        if self.flushed:
            return "flush"
        return "past-cache" if self.past_cache else None

    @property
    def cache(self) -> Literal["cold", "warm"]:
        """``"cold"`` when every timed call found its data out of the cache, ``"warm"`` otherwise."""
        return "warm" if self.cold_method is None else "cold"

    @property
    def low_confidence(self) -> bool:
        """Fewer samples than the policy's minimum: the time budget could not afford them."""
        return self.stats.n < self.policy.min_samples and self.stop_reason is StopReason.TIME

    def __str__(self) -> str:
        return (
            f"{seconds(self.time_s)} {self.stat} of {self.stats.n} samples"
            f" (±{self.stats.ci_rel:.2%} 95% CI of the median, {self.calls_per_sample} call(s)/sample,"
            f" {self.cache} cache; {self.backend}: {self.device}; stopped on {self.stop_reason.value})"
        )


def measure(
    fn: Kernel,
    *args: object,
    kwargs: Mapping[str, object] | None = None,
    setup: Callable[[], object] | None = None,
    policy: Policy = DEFAULT_POLICY,
    backend: Backend | None = None,
    probe: Probe | None = None,
    snapshot: Callable[[], Snapshot] | None = None,
    rotation: Rotation | None = None,
) -> Measurement:
    """Time ``fn(*args, **kwargs)`` under ``policy``; ``backend=None``: the process's :class:`CpuBackend`.

    ``setup``: called before every call, outside the timed window; it may return ``(args, kwargs)``
    for that call (see the module docstring). ``rotation``: copies of ``fn(*args, **kwargs)``'s
    arrays (:func:`.rotation.plan_rotation`), which the calls take in turn instead of ``args``: the
    measurement is cold without a flush. ``probe``: a reference kernel timed beside this one.
    ``snapshot``: reads the OS's contention counters (:func:`.contention.take_snapshot`).
    Exceptions raised by ``fn`` or ``setup`` propagate unchanged.
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
    else:
        _check_backend(backend)
    if rotation is not None and setup is not None:
        raise InvalidValueError("rotation and setup exclude each other: setup makes each call's arguments")

    call = _Call(fn, args, kwargs or {}, setup) if rotation is None else _Call(rotation.kernel, (), {}, None)
    with measuring_alone():  # the budget starts once this thread has the machine to itself
        return _measure(call, policy, backend, probe, snapshot, rotation, setup=setup is not None)


def _measure(
    call: _Call,
    policy: Policy,
    backend: Backend,
    probe: Probe | None,
    snapshot: Callable[[], Snapshot] | None,
    rotation: Rotation | None,
    *,
    setup: bool,
) -> Measurement:
    __tracebackhide__ = True
    # the flush is the cold method only without copies to rotate through
    flush = policy.flush and rotation is None
    start = backend.clock()
    warm = _warm_up(backend, call, policy, cycle=rotation.copies if rotation else 0)
    warmup_s = backend.clock() - start
    batched = _calls_per_sample(warm.per_call_s, backend.resolution_s, policy.batch_factor)
    if rotation is not None:  # each call of a window on a copy of its own
        batched = min(batched, rotation.copies)
    # setup comes before every call, a flush before every cold call: a batch would time k - 1 calls
    # without them
    k = 1 if setup or flush else batched
    sampler = _Sampler(backend, call, policy, k, flush, probe, budget_start=start, cold=rotation is not None)
    before = snapshot() if snapshot is not None else None
    samples, stats, reason = sampler.run(max(warm.per_call_s, warm.cost_s))
    readings = sampler.readings()
    contention = None
    if snapshot is not None and before is not None:
        from pytest_roofline.timing.contention import between

        contention = between(
            before, snapshot(), samples=len(samples), preempted=sampler.preempted, cores=_cores()
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
        flushed=flush,
        stop_reason=reason,
        policy=policy,
        cache_note=_cache_note(
            policy,
            k,
            setup=setup,
            rotation=rotation,
            unbatched=batched,
            cycle_flushed=warm.flushed_for_cycle,
        ),
        probe=sampler.probe_run(),
        contention=contention,
        excluded=len(samples) - sampler.transient - stats.n,
        transient=sampler.transient,
        # the least any round showed: BLAS threads that a probe woke spin on for a while after it
        parallelism=min(parallelism) if (parallelism := readings.parallelism) else None,
        cpu_share=_middle(readings.cpu_share),
        threads=int(m) if (m := _middle(readings.threads)) is not None else None,
        wait_share=_middle(readings.wait_share),
        setup=setup,
        rotation_copies=rotation.copies if rotation is not None else 0,
        rotation_bytes=rotation.cycle_bytes if rotation is not None else 0,
        past_cache=policy.past_cache and not flush and rotation is None,
    )


def call_once(
    fn: Kernel,
    args: Sequence[object] = (),
    kwargs: Mapping[str, object] | None = None,
    setup: Callable[[], object] | None = None,
) -> object:
    """One untimed call, ``setup`` first: what a run that times nothing does with a kernel."""
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    check_call(kwargs, setup)
    kernel, call_args = _Call(fn, args, kwargs or {}, setup).prepare()
    return kernel(*call_args)


def check_call(kwargs: object, setup: object) -> None:
    """A TypeError naming ``kwargs`` or ``setup`` and the value, unless both are usable."""
    if kwargs is not None:
        if not isinstance(kwargs, Mapping):
            raise InvalidTypeError(
                "kwargs must be a mapping of the kernel's keyword arguments, such as kwargs={'out': out};"
                f" got {_short(kwargs)} ({type(kwargs).__name__})"
            )
        _check_keys("kwargs", kwargs)
    if setup is not None and not callable(setup):
        raise InvalidTypeError(
            f"setup must be callable (it runs before every timed call); got {_short(setup)}"
            f" ({type(setup).__name__})"
        )


def _check_keys(what: str, kwargs: Mapping[object, object]) -> None:
    for key in kwargs:
        if not isinstance(key, str):
            raise InvalidTypeError(
                f"{what} keys are the kernel's keyword names, strings; got {key!r} ({type(key).__name__})"
            )


def _short(value: object) -> str:
    """A repr a message can hold: an array's is cut short."""
    return reprlib.repr(value)


def _cache_note(
    policy: Policy,
    k: int,
    *,
    setup: bool = False,
    rotation: Rotation | None = None,
    unbatched: int = 1,
    cycle_flushed: bool = False,
) -> str:
    """How the cache was kept, in words: ``cold by rotation over 8 copies ...``, ``warm: ...``."""
    if rotation is not None:
        batch = f"; {k} calls per sample" if k > 1 else ""
        first = "; a flush instead of the untimed first cycle (too long)" if cycle_flushed else ""
        return f"{rotation.describe()}{batch}{first}"
    if policy.flush:
        if setup:
            note = "cold: setup, then a cache flush, before every call (one call per sample)"
        else:
            note = "cold: cache flushed before every call"
            if unbatched > 1:  # the timer is coarse for one call: more samples, not a warm batch
                note += f" (one call per sample, although the timer would batch {unbatched})"
        return f"{note}; {policy.flush_note}" if policy.flush_note else note
    state = "cold" if policy.past_cache else "warm"
    note = f"{state}: {policy.flush_note or 'flush off'}"
    if k > 1:
        note += f"; {k} calls per sample"
    return f"{note}; setup before every call (one call per sample)" if setup else note


def _cores() -> int:
    import os

    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@functools.cache
def _default_backend() -> Backend:
    # imported here so that importing the engine does not build a backend (it measures its clock)
    from pytest_roofline.timing.cpu import CpuBackend

    return CpuBackend()


def _check_backend(backend: object) -> None:
    missing = [
        attr for attr in ("name", "device_name", "resolution_s", "clock", "run") if not hasattr(backend, attr)
    ]
    if missing:
        raise InvalidTypeError(
            f"backend must implement the Backend protocol;"
            f" {type(backend).__name__} lacks {', '.join(missing)}"
        )


def _run(
    backend: Backend, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
) -> tuple[list[float], list[bool]]:
    """The backend's windows, and which of them it saw preempted (none, if it cannot tell)."""
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    windows = backend.run(fn, args, calls=calls, samples=samples, flush=flush)
    if len(windows) != samples:
        raise RuntimeError(f"backend {backend.name!r} returned {len(windows)} windows for {samples} samples")
    preempted = getattr(backend, "last_preempted", None)
    flags = list(preempted) if preempted is not None and len(preempted) == samples else [False] * samples
    return windows, flags


class _Call:
    """The kernel as the engine calls it: its arguments and keywords, and ``setup`` before every call.

    Without setup, a round is one backend run of back-to-back calls. With setup, each call is a
    backend run of its own, setup first: the backend opens and closes its window around that call
    alone, so setup (host code) is never timed, on a CUDA stream either. A window of several calls
    (a warm-up round) is then the sum of theirs.
    """

    def __init__(
        self,
        fn: Kernel,
        args: Sequence[object],
        kwargs: Mapping[str, object],
        setup: Callable[[], object] | None,
    ) -> None:
        self._raw = fn
        # bound once: the backends call fn(*args), and a partial costs a C-level call, not a Python frame
        self.fn: Kernel = functools.partial(fn, **kwargs) if kwargs else fn
        self.args = tuple(args)
        self.setup = setup
        self._given = bool(args or kwargs)

    def run(
        self,
        backend: Backend,
        *,
        calls: int,
        samples: int,
        flush: bool,
        after: Callable[[], None] | None = None,
    ) -> tuple[list[float], list[bool]]:
        """``samples`` windows of ``calls`` calls, and which were preempted; ``after()`` follows every
        backend run (the sampler reads the backend's view of the round there)."""
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        if self.setup is None:
            result = _run(backend, self.fn, self.args, calls=calls, samples=samples, flush=flush)
            if after is not None:
                after()
            return result
        windows: list[float] = []
        flags: list[bool] = []
        for _ in range(samples):
            window, preempted = 0.0, False
            for _ in range(calls):
                fn, args = self.prepare()
                (one,), (hit,) = _run(backend, fn, args, calls=1, samples=1, flush=flush)
                if after is not None:
                    after()
                window += one
                preempted = preempted or hit
            windows.append(window)
            flags.append(preempted)
        return windows, flags

    def prepare(self) -> tuple[Kernel, tuple[object, ...]]:
        """Run ``setup`` (if any) and return what to call next: the kernel and its positional arguments."""
        __tracebackhide__ = True  # a failing setup shows its own frames, not ours
        if self.setup is None:
            return self.fn, self.args
        made = self.setup()
        if made is None:
            return self.fn, self.args
        args, kwargs = self._arguments(made)
        return (functools.partial(self._raw, **kwargs) if kwargs else self._raw), args

    def _arguments(self, made: object) -> tuple[tuple[object, ...], Mapping[str, object]]:
        if not (
            isinstance(made, tuple)
            and len(made) == 2
            and isinstance(made[0], (tuple, list))
            and isinstance(made[1], Mapping)
        ):
            raise SetupError(
                "setup must return None, or (args, kwargs) for the kernel's next call (a tuple or list"
                f" and a dict); got {_short(made)} ({type(made).__name__})"
            )
        if self._given:
            raise SetupError(
                "setup returned the kernel's arguments, and the call gave arguments too:"
                " give them in one place (the call's, with a setup that returns None, or setup's)"
            )
        from pytest_roofline.timing.rotation import check_has_data

        try:
            _check_keys("setup's kwargs", made[1])
            check_has_data(None, made[0], made[1], given_by="setup's ")
        except (TypeError, ValueError) as exc:
            raise SetupError(str(exc)) from None
        return tuple(made[0]), made[1]


@dataclass(frozen=True, slots=True)
class _WarmUp:
    """What the warm-up did: calls, the per-call estimate, a call's wall cost in the last round, and
    whether a flush stood in for the rest of rotation's untimed cycle."""

    calls: int
    per_call_s: float
    cost_s: float
    flushed_for_cycle: bool = False


def _warm_up(backend: Backend, call: _Call, policy: Policy, *, cycle: int = 0) -> _WarmUp:
    """Run the warm-up rounds; return the calls made, the per-call estimate in seconds, and what a
    call cost in wall time in the last round (setup and the backend's bookkeeping included).

    ``cycle``: the rotation's copies, each called once here, untimed: fresh copies are in the cache.
    Where the rest of that cycle would cost more than :data:`CYCLE_SHARE` of the time budget (86
    copies of a 15 ms GEMM), one flush evicts what the copies left in the cache instead: the calls
    after it take copies untouched since they were made.
    """
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    if cycle > policy.warmup_calls:
        policy = dataclasses.replace(policy, warmup_calls=cycle)
    start = backend.clock()
    calls = rounds = 0
    size = 1
    largest = 0  # calls in the largest round after the first
    per_call_s = cost_s = 0.0
    while True:
        round_start = backend.clock()
        (window,), _ = call.run(backend, calls=size, samples=1, flush=False)
        cost_s = (backend.clock() - round_start) / size
        calls += size
        rounds += 1
        if rounds > 1 and size >= largest:
            largest, per_call_s = size, window / size
        elapsed = backend.clock() - start
        if rounds >= 2 and calls >= policy.warmup_calls and elapsed >= policy.warmup_s:
            return _WarmUp(calls, per_call_s, cost_s)
        if (
            rounds > 1
            and calls < cycle
            and (cycle - calls) * max(per_call_s, cost_s) > CYCLE_SHARE * policy.max_time_s
        ):
            _run(backend, _nothing, (), calls=1, samples=1, flush=True)
            cycle = 0
            policy = dataclasses.replace(policy, warmup_calls=max(DEFAULT_POLICY.warmup_calls, calls))
            if elapsed >= policy.warmup_s:
                return _WarmUp(calls, per_call_s, cost_s, flushed_for_cycle=True)
        if rounds > 1:
            size *= 2
            per_call_cost = max(per_call_s, cost_s)
            if per_call_cost > 0:
                # never run much past the warm-up time: a 2 s kernel warms up in 2 calls
                size = min(size, _ceil((policy.warmup_s - elapsed) / per_call_cost))
            size = max(size, policy.warmup_calls - calls, 1)


def _nothing() -> None:
    """What a window holds when only its flush is wanted."""


def _calls_per_sample(per_call_s: float, resolution_s: float, batch_factor: float) -> int:
    floor_s = batch_factor * resolution_s
    if per_call_s >= floor_s:
        return 1
    if per_call_s <= 0:
        return MAX_CALLS_PER_SAMPLE
    return min(MAX_CALLS_PER_SAMPLE, _ceil(floor_s / per_call_s))


def _ceil(x: float) -> int:
    # the tolerance keeps float noise in an exact ratio (100.00000000000001) from adding a call
    return math.ceil(x - 1e-9)


class _Sampler:
    """The sampling phase: rounds of samples, the probes between them, the stopping rules."""

    def __init__(
        self,
        backend: Backend,
        call: _Call,
        policy: Policy,
        k: int,
        flush: bool,
        probe: Probe | None,
        *,
        budget_start: float,
        cold: bool = False,
    ) -> None:
        self.backend, self.call, self.policy = backend, call, policy
        self.k, self.flush, self.probe = k, flush, probe
        #: a probe streamed through the cache: a warm measurement calls the kernel once after it
        self.rewarm = policy.rewarm and not flush and not cold
        self.budget_start = budget_start
        self.preempted = 0
        #: leading samples left out: taken before the kernel settled (:mod:`.transient`), and when
        #: the samples after them began: the probes and readings that count are those from then on
        self.transient = 0
        self.kept_at = -math.inf
        #: what the backend said after each of its runs (:meth:`_read_backend`)
        self._readings: list[_Reading] = []
        self._probe_rates: list[float] = []
        self._probe_times: list[float] = []
        self._probe_preempted: list[bool] = []
        self._probe_wall = 0.0
        self._last_probe = -math.inf

    def run(self, per_call_s: float) -> tuple[list[float], Stats, StopReason]:
        """Sample until a stopping rule holds; ``per_call_s`` is what one call is expected to cost."""
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        backend, policy = self.backend, self.policy
        self._time_probe()
        start = backend.clock()
        samples: list[float] = []
        flags: list[bool] = []
        rounds: list[_Round] = []
        # samples[self.transient:] are those since the last cut (transient.slower_start), from kept_at
        self.kept_at = start
        # the first round: min_samples, or what the budget affords (never below the floor)
        guess_s = max(per_call_s * self.k, 1e-12)
        left = policy.max_time_s - (start - self.budget_start)
        size = max(MIN_SAMPLES_FLOOR, min(policy.min_samples, math.floor(left / guess_s + 1e-9)))
        size = min(size, policy.max_samples)
        while True:
            taken = len(samples) - self.transient
            size = self._cut_for_probe(size, (backend.clock() - self.kept_at) / taken if taken else guess_s)
            round_start = backend.clock()
            windows, hits = self.call.run(
                backend, calls=self.k, samples=size, flush=self.flush, after=self._read_backend
            )
            rounds.append(_Round(len(samples), size, round_start, backend.clock()))
            for window, preempted in zip(windows, hits, strict=True):
                samples.append(window / self.k)
                flags.append(preempted)
                self.preempted += preempted
            # a cut needs room to sample after it; preempted windows are load, not a slow start
            clean_at = [i for i in range(self.transient, len(samples)) if not flags[i]]
            clean = [samples[i] for i in clean_at]
            room = len(samples) < policy.max_samples
            if room and slower_start(clean, min_shift=max(MIN_SHIFT, policy.target_rel_ci)):
                half = len(clean_at) // 2
                cut_at = _time_of(clean_at[half], rounds, samples, self.k)
                if cut_at - start <= SETTLE_WITHIN_S:  # later, a slower stretch is drift
                    self.transient, self.kept_at, clean = clean_at[half], cut_at, clean[half:]
            kept = samples[self.transient :]
            stats = Stats.from_samples(_trusted(kept, clean))
            reason = self._stop(len(samples), stats)
            # the span matters from 10 µs a call: shorter kernels gained nothing measurable by it,
            # and a suite of them would pay it per test
            spans = stats.median >= MIN_TIME_FROM_S
            short_s = policy.min_time_s - (backend.clock() - self.kept_at) if spans else 0.0
            precise_but_short = reason is StopReason.PRECISION and short_s > 0
            if precise_but_short:
                reason = None  # precise, but over too short a span to trust: sample on
            if reason is None and backend.clock() - self._last_probe >= policy.probe_interval_s:
                self._time_probe()
            if reason is None:
                now = backend.clock()
                # the budget counts from the start of the measurement, warm-up included, so that
                # --roofline-max-time bounds what a measurement costs; samples are priced on their own
                spent_s = now - self.budget_start
                elapsed_s = now - self.kept_at
                size = _next_round(len(kept), stats.ci_rel, elapsed_s, spent_s, policy, short_s=short_s)
                size = min(size, policy.max_samples - len(samples))
                if len(kept) < MIN_SAMPLES_FLOOR:  # never judge on fewer, whatever the budget
                    size = max(size, MIN_SAMPLES_FLOOR - len(kept))
                if size == 0:
                    reason = StopReason.PRECISION if precise_but_short else StopReason.TIME
            if reason is not None:
                self._time_probe(last=True)
                return samples, stats, reason

    def _read_backend(self) -> None:
        """What the backend saw of its last run: the kernel's parallelism, threads and waits."""
        backend = self.backend
        parallelism = getattr(backend, "last_parallelism", None)
        share = getattr(backend, "last_cpu_share", None)
        self._readings.append(
            _Reading(
                at=backend.clock(),
                parallelism=float(parallelism) if isinstance(parallelism, (int, float)) else None,
                cpu_share=float(share) if isinstance(share, (int, float)) else None,
                wait=getattr(backend, "last_thread_wait", None),
            )
        )

    def readings(self) -> _Readings:
        """The backend's readings of the runs that ended after the last cut (all, without one)."""
        kept = [r for r in self._readings if r.at > self.kept_at]
        waits = [r.wait for r in kept if r.wait is not None]
        return _Readings(
            parallelism=[r.parallelism for r in kept if r.parallelism is not None],
            cpu_share=[r.cpu_share for r in kept if r.cpu_share is not None],
            threads=[w.threads for w in waits],
            wait_share=[w.wait_share for w in waits],
        )

    def _stop(self, n: int, stats: Stats) -> StopReason | None:
        if stats.n >= _MIN_PRECISION_SAMPLES and stats.ci_rel <= self.policy.target_rel_ci:
            return StopReason.PRECISION
        if n >= self.policy.max_samples:
            return StopReason.MAX_SAMPLES
        return None

    def _cut_for_probe(self, size: int, per_sample_s: float) -> int:
        """With a probe, a round lasts about one probe interval, so probes spread through the window."""
        if self.probe is None or per_sample_s <= 0:
            return size
        return max(1, min(size, math.floor(self.policy.probe_interval_s / per_sample_s)))

    def _time_probe(self, *, last: bool = False) -> None:
        probe = self.probe
        if probe is None:
            return
        t0 = self.backend.clock()
        if not self._probe_rates and probe.warmup_calls:
            _run(self.backend, probe.fn, (), calls=probe.warmup_calls, samples=1, flush=False)
        (window,), (preempted,) = _run(self.backend, probe.fn, (), calls=1, samples=1, flush=False)
        self._probe_rates.append(probe.work / max(window, 1e-12))
        self._probe_times.append(self.backend.clock())
        self._probe_preempted.append(preempted)
        if self.rewarm and not last:
            # the probe streamed through the cache: one untimed call warms it again, so a warm
            # measurement's next sample is not partly cold (after setup, like every call)
            self.call.run(self.backend, calls=1, samples=1, flush=False)
        self._last_probe = self.backend.clock()
        self._probe_wall += self._last_probe - t0

    def probe_run(self) -> ProbeRun | None:
        """The probe's rates beside the kept samples: the last one timed before them, and all after."""
        if self.probe is None or not self._probe_rates:
            return None
        first = max(bisect.bisect_right(self._probe_times, self.kept_at) - 1, 0)
        rates = self._probe_rates[first:]
        clean = [r for r, hit in zip(rates, self._probe_preempted[first:], strict=True) if not hit]
        return ProbeRun(
            name=self.probe.name,
            resource=self.probe.resource,
            rates=tuple(rates),
            stats=Stats.from_samples(_trusted(rates, clean, floor=2)),
            wall_s=self._probe_wall,
        )


@dataclass(frozen=True, slots=True)
class _Round:
    """One sampling round: its first sample's index, how many it took, and the clock around it."""

    first: int
    size: int
    start: float
    end: float


def _time_of(index: int, rounds: Sequence[_Round], samples: Sequence[float], k: int) -> float:
    """When sample ``index`` began: its round's start, the windows before it in the round, and their
    share of what the round spent outside windows (flushes, bookkeeping: alike for every sample)."""
    for r in rounds:
        if r.first <= index < r.first + r.size:
            busy = math.fsum(samples[r.first : r.first + r.size]) * k
            outside = max(0.0, r.end - r.start - busy) / r.size
            return r.start + math.fsum(samples[r.first : index]) * k + outside * (index - r.first)
    return rounds[-1].end


@dataclass(frozen=True, slots=True)
class _Reading:
    """What the backend said of one run (``last_parallelism`` and the rest), and when it ended."""

    at: float
    parallelism: float | None
    cpu_share: float | None
    wait: ThreadWait | None


@dataclass(frozen=True, slots=True)
class _Readings:
    """The readings of the kept runs, one list per figure."""

    parallelism: list[float]
    cpu_share: list[float]
    threads: list[int]
    wait_share: list[float]


def _trusted(samples: list[float], clean: list[float], *, floor: int = _MIN_PRECISION_SAMPLES) -> list[float]:
    """The unpreempted samples while there are enough of them (at least half, and ``floor``), else all."""
    if len(clean) == len(samples) or len(clean) < max(floor, len(samples) / 2):
        return samples
    return clean


def _next_round(
    n: int, ci_rel: float, elapsed_s: float, spent_s: float, policy: Policy, *, short_s: float = 0.0
) -> int:
    """Samples to take next; 0 when the time budget cannot afford one more.

    ``elapsed_s`` is what the ``n`` samples so far cost; ``spent_s`` is the whole measurement's;
    ``short_s`` what the samples still lack of ``policy.min_time_s``.
    """
    remaining_s = policy.max_time_s - spent_s
    if remaining_s <= 0:
        return 0
    ratio = ci_rel / policy.target_rel_ci
    # the interval of the median narrows like 1/sqrt(n): about n * ratio² samples reach the target
    growth = ratio * ratio * _ROUND_MARGIN
    wanted = n if growth >= 2 else math.ceil(n * growth) - n
    if short_s > 0 and elapsed_s > 0:  # the rest of the minimum span, at what samples have cost
        wanted = max(wanted, _ceil(short_s * n / elapsed_s))
    size = min(max(wanted, math.ceil(n * _MIN_ROUND_GROWTH)), n)
    size = max(size, _MIN_PRECISION_SAMPLES - n)
    # what a sample has cost so far, flush and bookkeeping included, predicts the next ones
    affordable = remaining_s * n / elapsed_s if elapsed_s > 0 else math.inf
    if affordable < size:
        size = math.floor(affordable)
    return max(0, min(size, policy.max_samples - n))


def _middle(values: Sequence[float]) -> float | None:
    """The median of a round's readings (the upper one of an even count), None when there are none."""
    return sorted(values)[len(values) // 2] if values else None
