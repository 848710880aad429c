"""The warm-up runs until the kernel has settled: its calls no longer fault in fresh pages, its time
per call no longer falls; a kernel too slow for its budget costs one call and one sample, however
long its first call; a measurement whose samples still fall when it stops is not called settled.
All on a fake clock, with page faults scripted."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from fakes import FakeBackend

from pytest_roofline.model.core import Source
from pytest_roofline.model.measurement import StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.verdict import STILL_FALLING, Verdict, judge
from pytest_roofline.timing import engine
from pytest_roofline.timing import rotation as rot
from pytest_roofline.timing.cache import WARM, CachePlan
from pytest_roofline.timing.engine import SETTLE_SHARE, _Round, _settling, measure
from pytest_roofline.timing.rotation import Rotation, plan_rotation

MiB = 2**20


def noop(*_: object) -> None:
    pass


class FaultingBackend(FakeBackend):
    """A FakeBackend whose calls fault in ``faults(i)`` pages each, the i-th call over its life, and say
    so in ``last_page_faults`` as the CPU backend does (per call of the last run)."""

    def __init__(self, durations: Callable[[int], float], faults: Callable[[int], float]) -> None:
        super().__init__(durations, resolution_s=1e-9)
        self.faults = faults
        self.last_page_faults: float | None = None

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        first = self.calls
        windows = super().run(fn, args, calls=calls, samples=samples, flush=flush)
        self.last_page_faults = sum(self.faults(i) for i in range(first, self.calls)) / (calls * samples)
        return windows


@pytest.fixture
def ring() -> Rotation:
    """32 argument sets of 32 KiB: a cycle of 1 MiB, each call's output kept for a cycle."""
    rot.MIN_CYCLE_BYTES, before = MiB, rot.MIN_CYCLE_BYTES
    try:
        r = plan_rotation(
            noop, (np.ones(2**12),), None, op_bytes=2**15, llc_bytes=0, free_bytes=lambda _: 10**12
        )
    finally:
        rot.MIN_CYCLE_BYTES = before
    assert isinstance(r, Rotation)
    assert r.copies == 32
    return r


def rotating(r: Rotation) -> CachePlan:
    return CachePlan("rotation", rotation=r)


def first_cycle(copies: int, *, fresh: float, owned: float) -> Callable[[int], float]:
    """``fresh`` for the calls of the first cycle (their outputs land in pages never touched), then
    ``owned``."""
    return lambda i: fresh if i < copies + 1 else owned


# -- the first cycle of outputs is made in the warm-up, not in the samples --------------------------


def test_a_first_cycle_whose_calls_fault_runs_in_the_warm_up(ring: Rotation) -> None:
    # the first test of a process: each call of the first cycle writes an output into fresh pages,
    # 4 ms a call where the kernel takes 1.5 ms on memory the process owns (issue: 7-10x slow reads)
    backend = FaultingBackend(first_cycle(32, fresh=4e-3, owned=1.5e-3), first_cycle(32, fresh=420, owned=0))
    m = measure(noop, policy=Policy(max_time_s=0.4), backend=backend, cache=rotating(ring))
    assert "flush" not in backend.events  # no flush stood in for the faulting cycle
    assert m.warmup_calls > 32
    assert max(m.samples_s) == pytest.approx(1.5e-3)
    assert m.time_s == pytest.approx(1.5e-3)


def test_without_faults_to_read_the_cycle_is_flushed_and_the_samples_pay_for_it(ring: Rotation) -> None:
    # what the engine did before it read page faults: the same kernel, sampled while still slow
    backend = FaultingBackend(first_cycle(32, fresh=4e-3, owned=1.5e-3), lambda i: 0)
    m = measure(noop, policy=Policy(max_time_s=0.4), backend=backend, cache=rotating(ring))
    assert "flush" in backend.events
    assert m.warmup_calls < 32
    assert max(m.samples_s) == pytest.approx(4e-3)


def test_settling_is_bounded_by_a_share_of_the_budget_and_one_more_for_faults(ring: Rotation) -> None:
    # calls that fault and run slow forever, a cycle longer than the budget: a flush stands in for
    # the rest of the cycle, the warm-up stops within half the budget and one more (the faulting
    # rounds', paid apart), then samples within the budget
    backend = FaultingBackend(lambda i: 8e-3, lambda i: 420)
    policy = Policy(max_time_s=0.2)
    m = measure(noop, policy=policy, backend=backend, cache=rotating(ring))
    assert "flush" in backend.events
    assert m.warmup_s <= (SETTLE_SHARE + 1) * policy.max_time_s + 8e-3
    assert m.stats.n >= 3
    assert m.wall_s <= m.warmup_s + policy.max_time_s * 1.2


def test_the_faulting_first_cycle_is_paid_apart_from_a_short_budget(ring: Rotation) -> None:
    # the first test at --roofline-max-time 0.2: 32 faulting calls of 4 ms (128 ms) are more
    # than half the budget, but they are the process's, not the kernel's: they run, apart, and the
    # samples still get the budget
    backend = FaultingBackend(first_cycle(32, fresh=4e-3, owned=1.5e-3), first_cycle(32, fresh=420, owned=0))
    policy = Policy(max_time_s=0.2)
    m = measure(noop, policy=policy, backend=backend, cache=rotating(ring))
    assert "flush" not in backend.events
    assert m.warmup_calls > 32
    assert max(m.samples_s) == pytest.approx(1.5e-3)
    assert m.stats.n >= 10
    assert m.wall_s > policy.max_time_s  # what the process paid once shows in the wall time


def test_a_kernel_that_faults_as_much_every_round_after_its_cycle_has_settled() -> None:
    # an output past the allocator's largest reused block is mapped afresh by every call: its own cost
    backend = FaultingBackend(lambda i: 1e-3, lambda i: 2048)
    m = measure(noop, policy=Policy(max_time_s=1.0), backend=backend, cache=WARM)
    assert m.warmup_s == pytest.approx(Policy().warmup_s, abs=2e-3)


@pytest.mark.parametrize(
    ("before", "now", "calls", "sets", "settling"),
    [
        (None, _Round(1e-3, 420), 1, 32, True),  # the first cycle's outputs, still being made
        (_Round(1e-3, 420), _Round(1e-3, 420), 40, 32, False),  # as many, past the cycle: its own
        (_Round(1e-3, 420), _Round(1e-3, 100), 40, 32, True),  # fewer: the allocator catching up
        (_Round(1e-3, 0), _Round(0.9e-3, 0), 40, 0, True),  # faster by 10%: still warming up
        (_Round(1e-3, 0), _Round(0.97e-3, 0), 40, 0, False),  # by 3%: noise
        (_Round(1e-3, None), _Round(1e-3, None), 4, 32, False),  # nothing known of faults
    ],
)
def test_what_settling_means(
    before: _Round | None, now: _Round, calls: int, sets: int, settling: bool
) -> None:
    assert _settling(before, now, calls=calls, sets=sets) is settling


def test_a_slow_phase_on_the_fake_clock_ends_in_the_warm_up() -> None:
    # a time per call that keeps falling round after round (a clock ramping up): the warm-up runs on
    # until it stops falling, and the samples start on the settled kernel
    backend = FaultingBackend(lambda i: max(1e-3, 8e-3 * 0.9**i), lambda i: 0)
    m = measure(noop, policy=Policy(max_time_s=1.0), backend=backend, cache=WARM)
    assert m.time_s == pytest.approx(1e-3)
    assert max(m.samples_s) < 1.06e-3


# -- a kernel past its budget: one warm-up call and one sample -----------------------------------


def test_a_one_off_first_call_of_a_kernel_past_its_budget_leaves_one_call_and_one_sample() -> None:
    # 1 GiB np.multiply into an output never written: 1.2 s of page faults, then 0.15 s a call,
    # under a 0.2 s budget: the second call is the sample, not a second warm-up call
    backend = FakeBackend(lambda i: 1.2 if i == 0 else 0.15)
    m = measure(noop, policy=Policy(max_time_s=0.2), backend=backend, cache=WARM)
    assert m.warmup_calls == 1
    assert m.stats.n == 1
    assert backend.calls == 2
    assert m.time_s == pytest.approx(0.15)
    assert m.budget_note.startswith("the 200.0 ms time budget held 1 warm-up call and 1 sample of 150")


# -- samples still falling when sampling stops --------------------------------------------------


def falling_late() -> FakeBackend:
    """20% slow until 0.7 s of a 1 s measurement: past the reach of a cut, still falling at the end."""
    backend = FakeBackend(0.0, resolution_s=1e-9)
    backend._durations = lambda i: (1.2e-3 if backend.clock() < 0.7 else 1e-3) * (1 + 0.3 * math.sin(i * 2.4))
    return backend


def test_samples_still_falling_at_the_end_are_not_called_settled() -> None:
    m = measure(noop, backend=falling_late(), policy=Policy(), cache=WARM)
    assert m.stop_reason is StopReason.TIME
    assert m.transient == 0  # a cut 0.5 s in would be drift
    assert m.still_falling


def test_a_steady_kernel_is_settled() -> None:
    m = measure(noop, backend=FakeBackend(lambda i: 1e-3 * (1 + 0.05 * ((i % 3) - 1))), cache=WARM)
    assert not m.still_falling


def test_a_miss_on_samples_still_falling_is_inconclusive() -> None:
    from pytest_roofline.model.devices import lookup
    from pytest_roofline.model.estimate import estimate

    m = measure(noop, backend=falling_late(), policy=Policy(), cache=WARM)
    est = estimate("copy", n=1000, dtype="fp32", device=lookup("h100-sxm"))
    assert est.bounding_figure.source is Source.DATASHEET
    # a budget its median misses and its fastest call reaches
    at_median = judge(est, engine.dataclasses.replace(m, still_falling=False), 1.0).attained
    budget = at_median * math.sqrt(m.time_s / m.stats.min)
    judged = judge(est, m, budget)
    assert judged.verdict is Verdict.INCONCLUSIVE
    assert STILL_FALLING in judged.reason
    settled = judge(est, engine.dataclasses.replace(m, still_falling=False), budget)
    assert settled.verdict is Verdict.MISS


def test_a_miss_that_its_fastest_call_made_too_is_a_miss_though_the_samples_were_still_falling() -> None:
    from pytest_roofline.model.devices import lookup
    from pytest_roofline.model.estimate import estimate

    m = measure(noop, backend=falling_late(), policy=Policy(), cache=WARM)
    assert m.still_falling
    est = estimate("copy", n=1000, dtype="fp32", device=lookup("h100-sxm"))
    # far below the budget: its fastest call attained a small share of it
    judged = judge(est, m, 0.9)
    assert judged.attained * m.time_s / m.stats.min < 0.9 / 100
    assert judged.verdict is Verdict.MISS
    assert STILL_FALLING not in (judged.reason or "")
