"""The sampling phase of a measurement (:class:`Sampler`), after the engine's warm-up and batching:
rounds of windows until the interval of the median is tight enough, the samples run out or the time
budget does (:class:`StopReason`), a slower start cut (:mod:`.transient`), a probe timed between
rounds, slowed samples left out (:mod:`.throttle`): docs/measurement.md ("The phases of one measurement").
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pytest_roofline.model.measurement import ProbeRun, StopReason
from pytest_roofline.model.paired_ceilings import BANDWIDTH
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.stats import MIN_PRECISION_SAMPLES, Stats
from pytest_roofline.timing.base import Backend, Probe
from pytest_roofline.timing.budget import samples_within, saw_flush, seen_flush_s
from pytest_roofline.timing.calls import KernelCall, checked_windows
from pytest_roofline.timing.throttle import SlowedSamples
from pytest_roofline.timing.transient import MIN_SHIFT, SETTLE_WITHIN_S, slower_start

if TYPE_CHECKING:
    from pytest_roofline.timing.clocks import ClockWatcher
    from pytest_roofline.timing.contention import ThreadWait

_T = TypeVar("_T")

#: ``policy.min_time_s`` holds for kernels whose median call takes at least this long
MIN_TIME_FROM_S = 10e-6


#: a planned round aims this much past the samples the interval is predicted to need
_ROUND_MARGIN = 1.1
#: rounds grow the sample count by at least this fraction (fewer, cheaper checks) and at most double it
_MIN_ROUND_GROWTH = 0.1


class Sampler:
    """The sampling phase: rounds of samples, the probes between them, the stopping rules."""

    def __init__(
        self,
        backend: Backend,
        call: KernelCall,
        policy: Policy,
        k: int,
        flush: bool,
        probe: Probe | None,
        *,
        budget_start: float,
        rewarm: bool = False,
        throttle: ClockWatcher | None = None,
        ready: Callable[[int, int, Callable[[], object]], object] | None = None,
    ) -> None:
        self.backend, self.call, self.policy = backend, call, policy
        #: ``ready(calls, ahead, flush)`` before a round: a rotation grown as used makes their sets;
        #: no flush where a probe streamed through more than a flush reads since the last round
        self.ready, self._evicted = ready, False
        #: which samples ran at slowed GPU clocks, and the GPU's rest before the next round
        self.slow = SlowedSamples(throttle)
        #: samples left out because the GPU's clocks were slowed over them, and those kept (too
        #: few others were left to leave them out), counted over the samples since the last cut
        self.slowed = self.slowed_kept = 0
        self.k, self.flush, self.probe = k, flush, probe
        #: a probe streamed through the cache: a warm measurement calls the kernel once after it
        self.rewarm = rewarm
        self.budget_start = budget_start
        self.preempted = 0
        #: leading samples left out: taken before the kernel settled (:mod:`.transient`), and when
        #: the samples after them began: the probes and readings that count are those from then on
        self.transient, self.kept_at = 0, -math.inf
        #: what the backend said after each of its runs (:meth:`_read_backend`)
        self._readings: list[_Reading] = []
        #: each probe timed: when it ended, its rate, and whether it was preempted
        self._probes: list[tuple[float, float, bool]] = []
        self._probe_wall, self._last_probe = 0.0, -math.inf
        #: (when it ended, how long it took) of each making of sets (``ready``), not the samples' span
        self._making: list[tuple[float, float]] = []
        #: what the last probe cost: kept in the budget for the probe that ends the measurement
        self._probe_s = 0.0
        #: what a sample cost when sampling stopped, flush and bookkeeping included
        self.per_sample_s = 0.0
        #: whether the samples the statistics use still ran slower first than last, beyond doubt,
        #: when sampling stopped: the kernel had not settled (:mod:`.transient`)
        self.still_falling = False
        self._rewarm_due = False

    def run(self, per_call_s: float, seed: Seed | None = None) -> tuple[list[float], Stats, StopReason]:
        """Sample until a stopping rule holds; ``per_call_s`` is what one call is expected to cost.

        ``seed``: a first sample already taken, as a sample is (:class:`Seed`), where the warm-up held
        only one call and the next one decided whether it was a sample.
        """
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        backend, policy = self.backend, self.policy
        samples: list[float] = []
        flags: list[bool] = []
        slow = self.slow.flags
        rounds: list[_Round] = []
        if seed is not None:
            samples.append(seed.window / self.k)
            flags.append(seed.preempted)
            self.preempted += seed.preempted
            rounds.append(_Round(0, 1, seed.start, seed.end))
            self.slow.judge(_spans(rounds[-1], samples, self.k), self._left_s())
        self._time_probe()
        start = seed.start if seed is not None else backend.clock()
        # samples[self.transient:] are those since the last cut (transient.slower_start), from kept_at
        self.kept_at = start
        # what a sample is expected to cost: a flush's, where a flush comes before each, once known
        flush_s = seen_flush_s(backend) if self.flush else 0.0
        per_sample_s = max(per_call_s * self.k + (flush_s or 0.0), 1e-12)
        # the first round: min_samples, or what the budget affords; one sample while the flush's
        # cost is not known yet
        size = 1 if flush_s is None else self._within(0, policy.min_samples, per_sample_s)
        size = 0 if seed is not None else min(size, policy.max_samples)
        ahead = size  # the samples the statistics are predicted to want
        while True:
            if size:
                taken = len(samples) - self.transient
                size = _cut_for_probe(
                    size, self._sampled_s() / taken if taken else per_sample_s, self.probe, policy
                )
                self.slow.rest()
                if self.ready is not None:  # the call's frames stay few: a flush is the backend's
                    made_at, flush = backend.clock(), (lambda: None) if self._evicted else backend.flush_cache
                    self.ready(size * self.k, ahead * self.k, flush)
                    made_by = backend.clock()
                    self._making.append((made_by, made_by - made_at))
                self._evicted = False
                self._rewarm()
                round_start = backend.clock()
                windows, hits = self.call.run(
                    backend, calls=self.k, samples=size, flush=self.flush, after=self._read_backend
                )
                rounds.append(_Round(len(samples), size, round_start, backend.clock()))
                for window, preempted in zip(windows, hits, strict=True):
                    samples.append(window / self.k)
                    flags.append(preempted)
                    self.preempted += preempted
                self.slow.judge(_spans(rounds[-1], samples, self.k), self._left_s())
                if self.flush:  # what the round spent outside its windows is its flushes, mostly
                    saw_flush(backend, (backend.clock() - round_start - math.fsum(windows)) / size)
            # a cut needs room to sample after it; preempted windows are load, not a slow start,
            # and slowed ones the GPU's power state
            steady_at, clean_at = self._usable_at(flags, slow)
            clean = [samples[i] for i in clean_at]
            room = len(samples) < policy.max_samples
            if room and slower_start(clean, min_shift=max(MIN_SHIFT, policy.target_rel_ci)):
                half = len(clean_at) // 2
                cut_at = _time_of(clean_at[half], rounds, samples, self.k)
                if cut_at - start <= SETTLE_WITHIN_S:  # later, a slower stretch is drift
                    self.transient, self.kept_at = clean_at[half], cut_at
                    steady_at, clean_at = self._usable_at(flags, slow)
            kept = [samples[i] for i in steady_at]
            used_at = _trusted(steady_at, clean_at)
            stats = Stats.from_samples([samples[i] for i in used_at])
            self.slowed = len(samples) - self.transient - len(steady_at)
            self.slowed_kept = sum(slow[i] for i in used_at)
            reason = _stop(len(samples), stats, policy)
            # the span matters from MIN_TIME_FROM_S a call (docs/measurement.md, "Stopping" bullet)
            spans = stats.median >= MIN_TIME_FROM_S
            short_s = policy.min_time_s - self._sampled_s() if spans else 0.0
            precise_but_short = reason is StopReason.PRECISION and short_s > 0
            if precise_but_short:
                reason = None  # precise, but over too short a span to trust: sample on
            if reason is None and backend.clock() - self._last_probe >= policy.probe_interval_s:
                self._time_probe()
            if reason is None:
                now, elapsed_s = backend.clock(), self._sampled_s()
                # what a sample costs, flush and bookkeeping included: the last round's, or the
                # average since the cut where less (docs/measurement.md, "The budget is used")
                last = rounds[-1]
                per_sample_s = min((now - last.start) / last.size, elapsed_s / max(len(kept), 1))
                wanted, ahead = _next_round(len(kept), stats.ci_rel, elapsed_s, policy, short_s=short_s)
                # min_samples in all where the budget affords them, after a first round of one
                wanted = max(wanted, policy.min_samples - len(samples))
                size = self._within(len(kept), wanted, per_sample_s)
                size = min(size, policy.max_samples - len(samples))
                if size == 0:
                    reason = StopReason.PRECISION if precise_but_short else StopReason.TIME
            if reason is not None:
                self.per_sample_s = per_sample_s
                self.still_falling = slower_start(
                    [samples[i] for i in clean_at], min_shift=max(MIN_SHIFT, policy.target_rel_ci)
                )
                self._time_probe(last=True)
                return samples, stats, reason

    def _within(self, n: int, wanted: int, per_sample_s: float) -> int:
        """Of ``wanted`` more samples after ``n``, those the budget affords (:func:`.budget.samples_within`),
        with the last probe's cost and the GPU's rest before the round kept out; the budget counts
        from the start of the measurement, warm-up included."""
        policy = self.policy
        left_s = self._left_s() - self.slow.rest_s
        return samples_within(n, wanted, left_s, per_sample_s, policy.max_time_s)

    def _sampled_s(self) -> float:
        """The time since the samples kept began, less what making sets for them took."""
        made_s = math.fsum(took for end, took in self._making if end > self.kept_at)
        return self.backend.clock() - self.kept_at - made_s

    def _left_s(self) -> float:
        spent_s = self.backend.clock() - self.budget_start
        return self.policy.max_time_s - spent_s - self._probe_s

    def _usable_at(self, flags: Sequence[bool], slow: Sequence[bool]) -> tuple[list[int], list[int]]:
        """The indices since the last cut the statistics may use: those not slowed while at least
        :data:`MIN_PRECISION_SAMPLES` remain (else all, the slowed kept), and of those, the ones not
        preempted (:func:`_trusted` chooses between the two)."""
        since = range(self.transient, len(flags))
        steady_at = [i for i in since if not slow[i]]
        if len(steady_at) < MIN_PRECISION_SAMPLES:
            steady_at = list(since)
        return steady_at, [i for i in steady_at if not flags[i]]

    def _read_backend(self) -> None:
        """What the backend saw of its last run: the kernel's parallelism, threads and waits."""
        backend = self.backend
        self._readings.append(
            _Reading(
                at=backend.clock(),
                parallelism=backend.last_parallelism,
                cpu_share=backend.last_cpu_share,
                wait=backend.last_thread_wait,
            )
        )

    def readings(self) -> Readings:
        """The backend's readings of the runs that ended after the last cut (all, without one)."""
        kept = [r for r in self._readings if r.at > self.kept_at]
        waits = [r.wait for r in kept if r.wait is not None]
        return Readings(
            parallelism=[r.parallelism for r in kept if r.parallelism is not None],
            cpu_share=[r.cpu_share for r in kept if r.cpu_share is not None],
            threads=[w.threads for w in waits],
            wait_share=[w.wait_share for w in waits],
            alone=any(w.alone for w in waits),
        )

    def _time_probe(self, *, last: bool = False) -> None:
        probe = self.probe
        if probe is None:
            return
        self.slow.rest()  # a probe after a slowed round would read the slowed machine
        backend = self.backend
        t0 = backend.clock()
        # untimed calls first where the probe wants them (BLAS wakes its threads), then the one timed
        for calls in (probe.warmup_calls, 1) if not self._probes and probe.warmup_calls else (1,):
            timed = backend.run(probe.fn, (), calls=calls, samples=1, flush=False)
            (window,), (preempted,) = checked_windows(backend, timed, 1)
        self._last_probe = self.backend.clock()
        self._probes.append((self._last_probe, probe.work / max(window, 1e-12), preempted))
        self._probe_s = self._last_probe - t0
        self._evicted = probe.resource == BANDWIDTH and probe.work >= (backend.flush_bytes or math.inf)
        self._probe_wall += self._probe_s
        self._rewarm_due = self.rewarm and not last

    def _rewarm(self) -> None:
        """After a probe, which streamed through the cache, one untimed call warms a warm
        measurement's cache again (after setup, like every call); its time is the probe's."""
        if self._rewarm_due:
            t0 = self.backend.clock()
            self.call.run(self.backend, calls=1, samples=1, flush=False)
            self._probe_wall += self.backend.clock() - t0
            self._rewarm_due = False

    def probe_run(self) -> ProbeRun | None:
        """The probe's rates beside the kept samples: the last one timed before them, and all after."""
        if self.probe is None or not self._probes:
            return None
        first = max(bisect.bisect_right(self._probes, self.kept_at, key=lambda p: p[0]) - 1, 0)
        rates = [rate for _, rate, _ in self._probes[first:]]
        clean = [rate for _, rate, hit in self._probes[first:] if not hit]
        return ProbeRun(
            name=self.probe.name,
            resource=self.probe.resource,
            rates=tuple(rates),
            stats=Stats.from_samples(_trusted(rates, clean, floor=2)),
            wall_s=self._probe_wall,
        )


@dataclass(frozen=True, slots=True)
class Seed:
    """A first sample the warm-up took as a sample is taken (one call, after its flush): its window,
    whether it was preempted, and the clock around it."""

    window: float
    preempted: bool
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class _Round:
    """One sampling round: its first sample's index, how many it took, and the clock around it."""

    first: int
    size: int
    start: float
    end: float


def _spans(r: _Round, samples: Sequence[float], k: int) -> list[tuple[float, float]]:
    """When each sample of round ``r`` may have run: from the earliest its window can start (every
    window before it back to back from the round's start) to the latest it can end (every window
    after it back to back up to the round's end). Where the time outside the windows fell is not
    known: a flush before each, or, on a held GPU, the queueing of them all before any runs."""
    windows = [samples[i] * k for i in range(r.first, r.first + r.size)]
    before, after = 0.0, math.fsum(windows)
    spans = []
    for window in windows:
        after -= window
        spans.append((r.start + before, max(r.end - after, r.start + before + window)))
        before += window
    return spans


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
class Readings:
    """The readings of the kept runs, one list per figure."""

    parallelism: list[float]
    cpu_share: list[float]
    threads: list[int]
    wait_share: list[float]
    #: some round ran the kernel alone (:attr:`~.contention.ThreadWait.alone`)
    alone: bool = False


def _trusted(samples: list[_T], clean: list[_T], *, floor: int = MIN_PRECISION_SAMPLES) -> list[_T]:
    """The unpreempted samples while there are enough of them (at least half, and ``floor``), else all
    (samples, or their indices)."""
    if len(clean) == len(samples) or len(clean) < max(floor, len(samples) / 2):
        return samples
    return clean


def _stop(n: int, stats: Stats, policy: Policy) -> StopReason | None:
    if stats.n >= MIN_PRECISION_SAMPLES and stats.ci_rel <= policy.target_rel_ci:
        return StopReason.PRECISION
    if n >= policy.max_samples:
        return StopReason.MAX_SAMPLES
    return None


def _cut_for_probe(size: int, per_sample_s: float, probe: Probe | None, policy: Policy) -> int:
    """With a probe, a round lasts about one probe interval, so probes spread through the window."""
    if probe is None or per_sample_s <= 0:
        return size
    return max(1, min(size, math.floor(policy.probe_interval_s / per_sample_s)))


def _next_round(
    n: int, ci_rel: float, elapsed_s: float, policy: Policy, *, short_s: float = 0.0
) -> tuple[int, int]:
    """Samples the statistics want next (the budget decides how many of them are taken), and all
    they are predicted to want.

    ``elapsed_s`` is what the ``n`` samples so far cost; ``short_s`` what they still lack of
    ``policy.min_time_s``.
    """
    ratio = ci_rel / policy.target_rel_ci
    # the interval of the median narrows like 1/sqrt(n): about n * ratio² samples reach the target
    wanted = math.ceil(n * min(ratio * ratio * _ROUND_MARGIN, policy.max_samples)) - n
    if short_s > 0 and elapsed_s > 0:  # the rest of the minimum span, at what samples have cost
        wanted = max(wanted, ceil_count(short_s * n / elapsed_s))
    size = min(max(wanted, math.ceil(n * _MIN_ROUND_GROWTH)), n)
    return max(size, MIN_PRECISION_SAMPLES - n, 0), wanted


def ceil_count(x: float) -> int:
    """``math.ceil`` of a count of calls or samples, with a tolerance: float noise in an exact ratio
    (100.00000000000001) must not add one."""
    return math.ceil(x - 1e-9)
