"""The backend-neutral measurement loop: warm-up, batching, sampling rounds, stopping.

:func:`measure` checks its arguments, then runs three phases against a :class:`Backend`:

1. **Warm-up** (never sampled): rounds of 1, 1, 2, 4, ... back-to-back calls, each round capped
   so it does not overshoot the warm-up time, until at least ``policy.warmup_s`` of wall time
   *and* ``policy.warmup_calls`` calls have passed, and always at least two rounds. The per-call
   estimate comes from the largest round after the first, never from the first call, which may
   pay for compilation, page faults or lazy loading.
2. **Batching**: when that estimate is below ``policy.batch_factor`` x ``backend.resolution_s``,
   each sample times ``k = ceil(batch_factor x resolution / per_call)`` calls (at most
   :data:`MAX_CALLS_PER_SAMPLE`) and reports the window divided by ``k``.
3. **Sampling** in rounds, the first of ``policy.min_samples`` samples, each later one sized from
   the samples the confidence interval still needs and the time budget left. After each round the
   stopping rules are checked in this order: the 95% interval of the median within
   ``policy.target_rel_ci`` of it, over at least 6 samples (:attr:`StopReason.PRECISION`);
   ``policy.max_samples`` reached (:attr:`StopReason.MAX_SAMPLES`); the budget ``policy.max_time_s``
   for the whole measurement (warm-up and flushes included) spent, or too little of it left for another sample
   (:attr:`StopReason.TIME`). The first round is always taken in full, whatever it costs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from pytest_roofline.stats import Stats
from pytest_roofline.timing.base import Backend, Kernel, Policy, Stat
from pytest_roofline.units import seconds

#: upper bound on the calls batched into one sample
MAX_CALLS_PER_SAMPLE = 1_000_000
DEFAULT_POLICY = Policy()

#: below six samples even [min, max] covers the median less than 95% of the time (1 - 2^(1-n)),
#: so a tight spread over fewer samples is luck, not precision
_MIN_PRECISION_SAMPLES = 6
#: a planned round aims this much past the samples the interval is predicted to need
_ROUND_MARGIN = 1.1
#: rounds grow the sample count by at least this fraction (fewer, cheaper checks) and at most double it
_MIN_ROUND_GROWTH = 0.1


class StopReason(str, Enum):
    """Which rule ended sampling."""

    PRECISION = "precision"
    TIME = "time"
    MAX_SAMPLES = "max_samples"


@dataclass(frozen=True, slots=True)
class Measurement:
    """The result of :func:`measure`, raw samples included."""

    #: per-call seconds of every sample, in the order taken (each window divided by ``calls_per_sample``)
    samples_s: tuple[float, ...]
    #: back-to-back calls timed in one window (k)
    calls_per_sample: int
    stats: Stats
    #: the statistic the verdict uses, and its value in seconds per call
    stat: Stat
    time_s: float
    #: wall time the whole measurement cost: warm-up, flushes and bookkeeping included
    wall_s: float
    warmup_calls: int
    #: wall time of the warm-up phase
    warmup_s: float
    backend: str
    device: str
    #: whether every timed call started from a flushed cache; False means a warm-cache time (flush
    #: off, or calls batched k > 1 per sample, where only the first call of a batch is cold)
    flushed: bool
    stop_reason: StopReason
    policy: Policy

    @property
    def cache(self) -> Literal["cold", "warm"]:
        """``"cold"`` when every timed call started from a flushed cache, ``"warm"`` otherwise."""
        return "cold" if self.flushed else "warm"

    def __str__(self) -> str:
        return (
            f"{seconds(self.time_s)} {self.stat} of {self.stats.n} samples"
            f" (±{self.stats.ci_rel:.2%} 95% CI of the median, {self.calls_per_sample} call(s)/sample,"
            f" {self.cache} cache; {self.backend}: {self.device}; stopped on {self.stop_reason.value})"
        )


def measure(
    fn: Kernel, *args: object, policy: Policy = DEFAULT_POLICY, backend: Backend | None = None
) -> Measurement:
    """Time ``fn(*args)`` under ``policy``; ``backend=None`` means the process's :class:`CpuBackend`.

    Exceptions raised by ``fn`` propagate unchanged.
    """
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    if not callable(fn):
        raise TypeError(f"kernel must be callable; got {fn!r} ({type(fn).__name__})")
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy; got {policy!r} ({type(policy).__name__})")
    if backend is None:
        backend = _default_backend()
    else:
        _check_backend(backend)

    start = backend.clock()
    warmup_calls, per_call_s = _warm_up(backend, fn, args, policy)
    warmup_s = backend.clock() - start
    k = _calls_per_sample(per_call_s, backend.resolution_s, policy.batch_factor)
    samples, stats, reason = _sample(backend, fn, args, policy, k, budget_start=start)
    return Measurement(
        samples_s=tuple(samples),
        calls_per_sample=k,
        stats=stats,
        stat=policy.stat,
        time_s=stats.value(policy.stat),
        wall_s=backend.clock() - start,
        warmup_calls=warmup_calls,
        warmup_s=warmup_s,
        backend=backend.name,
        device=backend.device_name,
        # a batch of k calls is flushed once, before its first call: the other k - 1 run warm
        flushed=policy.flush and k == 1,
        stop_reason=reason,
        policy=policy,
    )


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
        raise TypeError(
            f"backend must implement the Backend protocol;"
            f" {type(backend).__name__} lacks {', '.join(missing)}"
        )


def _run(
    backend: Backend, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
) -> list[float]:
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    windows = backend.run(fn, args, calls=calls, samples=samples, flush=flush)
    if len(windows) != samples:
        raise RuntimeError(f"backend {backend.name!r} returned {len(windows)} windows for {samples} samples")
    return windows


def _warm_up(backend: Backend, fn: Kernel, args: Sequence[object], policy: Policy) -> tuple[int, float]:
    """Run the warm-up rounds; return the calls made and the per-call estimate in seconds."""
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    start = backend.clock()
    calls = rounds = 0
    size = 1
    largest = 0  # calls in the largest round after the first
    per_call_s = 0.0
    while True:
        (window,) = _run(backend, fn, args, calls=size, samples=1, flush=False)
        calls += size
        rounds += 1
        if rounds > 1 and size >= largest:
            largest, per_call_s = size, window / size
        elapsed = backend.clock() - start
        if rounds >= 2 and calls >= policy.warmup_calls and elapsed >= policy.warmup_s:
            return calls, per_call_s
        if rounds > 1:
            size *= 2
            if per_call_s > 0:
                # never run much past the warm-up time: a 2 s kernel warms up in 2 calls
                size = min(size, _ceil((policy.warmup_s - elapsed) / per_call_s))
            size = max(size, policy.warmup_calls - calls, 1)


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


def _sample(
    backend: Backend, fn: Kernel, args: Sequence[object], policy: Policy, k: int, *, budget_start: float
) -> tuple[list[float], Stats, StopReason]:
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    start = backend.clock()
    samples: list[float] = []
    size = policy.min_samples
    while True:
        windows = _run(backend, fn, args, calls=k, samples=size, flush=policy.flush)
        samples.extend(w / k for w in windows)
        stats = Stats.from_samples(samples)
        if len(samples) >= _MIN_PRECISION_SAMPLES and stats.ci_rel <= policy.target_rel_ci:
            return samples, stats, StopReason.PRECISION
        if len(samples) >= policy.max_samples:
            return samples, stats, StopReason.MAX_SAMPLES
        now = backend.clock()
        # the budget counts from the start of the measurement, warm-up included, so that
        # --roofline-max-time bounds what a measurement costs; samples are priced on their own
        size = _next_round(len(samples), stats.ci_rel, now - start, now - budget_start, policy)
        if size == 0:
            return samples, stats, StopReason.TIME


def _next_round(n: int, ci_rel: float, elapsed_s: float, spent_s: float, policy: Policy) -> int:
    """Samples to take next; 0 when the time budget cannot afford one more.

    ``elapsed_s`` is what the ``n`` samples so far cost; ``spent_s`` is the whole measurement's.
    """
    remaining_s = policy.max_time_s - spent_s
    if remaining_s <= 0:
        return 0
    ratio = ci_rel / policy.target_rel_ci
    # the interval of the median narrows like 1/sqrt(n): about n * ratio² samples reach the target
    growth = ratio * ratio * _ROUND_MARGIN
    wanted = n if growth >= 2 else math.ceil(n * growth) - n
    size = min(max(wanted, math.ceil(n * _MIN_ROUND_GROWTH)), n)
    size = max(size, _MIN_PRECISION_SAMPLES - n)
    # what a sample has cost so far, flush and bookkeeping included, predicts the next ones
    affordable = remaining_s * n / elapsed_s if elapsed_s > 0 else math.inf
    if affordable < size:
        size = math.floor(affordable)
    return max(0, min(size, policy.max_samples - n))
