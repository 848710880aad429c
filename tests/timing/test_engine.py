"""The engine on a fake clock: warm-up, batching, the stopping rules, flushing and wall time, the
result, keywords and ``setup=``, the checks before a measurement, the policy, and two threads
measuring at once taking turns."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from typing import Any

import pytest
from fakes import FakeBackend, Overlap, Run, in_threads

from pytest_roofline.model.measurement import Measurement, StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing import engine
from pytest_roofline.timing.cache import FLUSHED, WARM
from pytest_roofline.timing.calls import SetupError, call_once
from pytest_roofline.timing.contention import ThreadWait
from pytest_roofline.timing.cpu import CpuBackend
from pytest_roofline.timing.engine import measure


def noop() -> None:
    pass


def alternating(fast: float, slow: float) -> Callable[[int], float]:
    """Half the calls fast, half slow: the interval of the median never narrows."""
    return lambda i: slow if i % 2 else fast


def cycling(*values: float) -> Callable[[int], float]:
    return lambda i: values[i % len(values)]


def sampling_runs(backend: FakeBackend, m: Measurement) -> list[Run]:
    return backend.split_runs(m.warmup_calls)[1]


# -- warm-up -----------------------------------------------------------------------------------


def test_warmup_runs_until_its_time_has_passed() -> None:
    backend = FakeBackend(1e-3)
    m = measure(noop, backend=backend)
    warmup, _ = backend.split_runs(m.warmup_calls)
    # doubling rounds, the last one cut to end on the 25 ms mark rather than overshoot it
    assert [r.calls for r in warmup] == [1, 1, 2, 4, 8, 9]
    assert all(r == Run(r.calls, 1, False) for r in warmup)
    assert m.warmup_calls == 25
    assert m.warmup_s == pytest.approx(0.025)


def test_warmup_runs_until_its_calls_have_passed() -> None:
    backend = FakeBackend(1e-3)
    m = measure(noop, policy=Policy(warmup_s=0.0, warmup_calls=10), backend=backend)
    warmup, _ = backend.split_runs(m.warmup_calls)
    assert [r.calls for r in warmup] == [1, 1, 8]
    assert m.warmup_calls == 10


def test_slow_kernel_warms_up_in_one_call_and_its_next_call_is_its_sample() -> None:
    # a second warm-up call and three samples of 2 s would overrun a 1 s budget many times: the next
    # call, as long as the first, is taken as the one sample the budget holds
    backend = FakeBackend(2.0)
    m = measure(noop, backend=backend, policy=Policy(max_time_s=1.0))
    assert m.warmup_calls == 1
    assert m.warmup_s == pytest.approx(2.0)
    assert m.samples_s == (2.0,)
    assert backend.runs == [Run(1, 1, False), Run(1, 1, True)]  # the sample after its flush
    assert m.stop_reason is StopReason.TIME
    assert m.low_confidence
    assert m.budget_note == (
        "the 1000 ms time budget held 1 warm-up call and 1 sample of 2000 ms (10 wanted): a longer"
        " max_time gives more"
    )


def test_warmup_takes_two_rounds_even_when_one_call_is_enough() -> None:
    backend = FakeBackend(1e-3)
    m = measure(noop, policy=Policy(warmup_s=0.0, warmup_calls=1), backend=backend)
    assert m.warmup_calls == 2
    assert backend.runs[:2] == [Run(1, 1, False), Run(1, 1, False)]


def test_first_call_is_neither_a_sample_nor_the_estimate() -> None:
    # a 1 s first call (compilation) followed by 1 µs calls: batching must see the 1 µs
    backend = FakeBackend([1.0, 1e-6], resolution_s=1e-6)
    m = measure(noop, cache=WARM, backend=backend)
    assert m.calls_per_sample == 100
    assert max(m.samples_s) == pytest.approx(1e-6)
    assert backend.runs[0] == Run(1, 1, False)


# -- batching ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("per_call", "resolution", "batch_factor", "k"),
    [
        (1e-3, 1e-6, 100.0, 1),
        (1e-4, 1e-6, 100.0, 1),  # exactly at the threshold: one call is long enough
        (1e-5, 1e-6, 100.0, 10),
        (1e-6, 1e-6, 100.0, 100),
        (3e-7, 1e-6, 100.0, 334),
        (1e-5, 1e-6, 10.0, 1),
        (1e-5, 1e-7, 1000.0, 10),
    ],
)
def test_batching(per_call: float, resolution: float, batch_factor: float, k: int) -> None:
    backend = FakeBackend(per_call, resolution_s=resolution)
    policy = Policy(warmup_s=1e-3, batch_factor=batch_factor)
    m = measure(noop, policy=policy, backend=backend, cache=WARM)
    assert m.calls_per_sample == k
    assert all(r.calls == k for r in sampling_runs(backend, m))
    # per-call time is the window divided by k
    assert m.samples_s == pytest.approx([per_call] * m.stats.n)


@pytest.mark.parametrize(("per_call", "cache"), [(1e-3, "cold"), (1e-6, "cold"), (1e-6, "warm")])
def test_a_cold_request_is_never_batched_warm(per_call: float, cache: str) -> None:
    # a flush comes before every call, however short: a batch of k would make k - 1 of them warm
    backend = FakeBackend(per_call, resolution_s=1e-6)
    flush = cache == "cold"
    m = measure(noop, policy=Policy(warmup_s=1e-3), cache=FLUSHED if flush else WARM, backend=backend)
    assert all(r.flush == flush for r in sampling_runs(backend, m))
    assert (m.flushed, m.cache) == (flush, cache)
    assert m.calls_per_sample == (1 if flush or per_call >= 1e-4 else 100)
    if flush and per_call < 1e-4:  # the timer would have batched: the note says so
        timer = "although the timer would batch 100"
        assert m.cache_note == f"cold: cache flushed before every call (one call per sample, {timer})"


def test_batching_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "MAX_CALLS_PER_SAMPLE", 50)
    m = measure(noop, policy=Policy(warmup_s=1e-6), cache=WARM, backend=FakeBackend(1e-9, resolution_s=1e-6))
    assert m.calls_per_sample == 50


def test_per_call_samples_divide_windows_by_k() -> None:
    # warm-up is two 2 µs calls; then each window of k=50 calls holds 48 of 2 µs and 2 of 3 µs
    calls_per_window = 50
    durations = [2e-6, 2e-6] + ([2e-6] * 48 + [3e-6] * 2) * 20
    backend = FakeBackend(durations, resolution_s=1e-6)
    policy = Policy(warmup_s=0.0, batch_factor=calls_per_window * 2, min_samples=3, max_samples=3)
    m = measure(noop, policy=policy, backend=backend, cache=WARM)
    assert m.calls_per_sample == calls_per_window
    assert m.samples_s == pytest.approx([(48 * 2e-6 + 2 * 3e-6) / 50] * 3)


# -- stopping ----------------------------------------------------------------------------------


def test_stops_on_precision_after_min_samples() -> None:
    backend = FakeBackend(1e-3)
    m = measure(noop, policy=Policy(min_time_s=0), backend=backend)
    assert m.stop_reason is StopReason.PRECISION
    assert m.stats.n == 10
    # the flush's cost on this backend is not known before its first: a first round of one sample
    assert sampling_runs(backend, m) == [Run(1, 1, True), Run(1, 9, True)]


def test_precision_waits_for_the_minimum_span_from_10us_a_call() -> None:
    # 1 ms a call: precise after 10 samples (10 ms), but a machine that was busy elsewhere runs
    # slow for tens of ms, so a kernel of 10 µs or more samples on until min_time_s (60 ms) has passed
    backend = FakeBackend(1e-3)
    m = measure(noop, backend=backend)
    assert m.stop_reason is StopReason.PRECISION
    assert Policy().min_time_s == 0.06
    assert m.stats.n == 60
    # one sample (the flush's cost not known yet), min_samples in all, then at most doubling
    assert [r.samples for r in sampling_runs(backend, m)] == [1, 9, 10, 20, 20]


@pytest.mark.parametrize(("per_call", "resolution"), [(1e-8, 1e-6), (5e-6, 1e-9), (9.9e-6, 1e-9)])
def test_kernels_below_10us_need_no_minimum_span(per_call: float, resolution: float) -> None:
    # batched or not: a suite of such tests would pay the span per test, for nothing measurable
    backend = FakeBackend(per_call, resolution_s=resolution)
    m = measure(noop, cache=WARM, backend=backend)
    assert (m.stop_reason, m.stats.n) == (StopReason.PRECISION, 10)
    assert m.calls_per_sample > 1 if resolution == 1e-6 else m.calls_per_sample == 1


def test_a_10us_kernel_samples_for_the_minimum_span() -> None:
    backend = FakeBackend(10e-6, resolution_s=1e-9)
    m = measure(noop, backend=backend)
    assert m.calls_per_sample == 1
    assert m.stop_reason is StopReason.PRECISION
    assert sum(m.samples_s) >= 0.06


def test_the_time_budget_wins_over_the_minimum_span() -> None:
    # precise, and the budget ends before the span: it stopped on precision, within the budget
    backend = FakeBackend(1e-3)
    m = measure(noop, policy=Policy(max_time_s=0.05, min_time_s=0.2, warmup_s=0.0), backend=backend)
    assert m.stop_reason is StopReason.PRECISION
    assert m.wall_s <= 0.05 + 1e-3
    assert not m.low_confidence


def test_stops_on_precision_once_the_interval_narrows() -> None:
    backend = FakeBackend(cycling(0.98e-3, 1e-3, 1.02e-3))
    m = measure(noop, backend=backend)
    assert m.stop_reason == "precision"
    assert 10 < m.stats.n < 1000
    assert m.stats.ci_rel <= 0.01
    runs = sampling_runs(backend, m)
    assert [r.samples for r in runs[:2]] == [1, 9]  # min_samples first, after one that finds the flush's cost
    assert len(runs) > 2


def test_stops_on_time() -> None:
    policy = Policy(max_time_s=0.1)
    backend = FakeBackend(alternating(1e-3, 2e-3))
    m = measure(noop, policy=policy, backend=backend)
    assert m.stop_reason is StopReason.TIME
    # the budget covers the whole measurement, warm-up included; rounds are planned to fit, so it
    # is neither overrun by more than a sample nor wasted
    assert 0.1 - 2e-3 <= m.wall_s <= 0.1 + 2e-3
    assert m.stats.n < policy.max_samples


def test_does_not_start_a_round_that_would_overrun_the_time_budget() -> None:
    # 10 ms warm-up calls, then samples of 0.1 s and 0.2 s: rounds of 3, 3 and 2 leave 0.08 s,
    # which affords no sample of the 0.15 s they average
    policy = Policy(warmup_s=0.0, min_samples=3, max_time_s=1.3)
    m = measure(
        noop, policy=policy, backend=FakeBackend(lambda i: 0.01 if i < 2 else (0.1, 0.2)[i % 2]), cache=WARM
    )
    assert m.stop_reason is StopReason.TIME
    assert m.stats.n == 8
    assert m.wall_s == pytest.approx(1.22)


@pytest.mark.parametrize(("min_samples", "max_samples"), [(10, 50), (10, 10), (1, 7)])
def test_stops_on_max_samples(min_samples: int, max_samples: int) -> None:
    policy = Policy(min_samples=min_samples, max_samples=max_samples, max_time_s=1e6)
    backend = FakeBackend(alternating(1e-3, 2e-3))
    m = measure(noop, policy=policy, backend=backend)
    assert m.stop_reason is StopReason.MAX_SAMPLES
    assert m.stats.n == max_samples
    assert sum(r.samples for r in sampling_runs(backend, m)) == max_samples


def test_min_samples_give_way_to_the_time_budget_and_the_floor_to_its_overrun() -> None:
    # 1 s and 2 s calls under a 0.5 s budget: three samples would overrun it eightfold; one warm-up
    # call and one sample, the least a kernel is judged on, are all it takes
    policy = Policy(min_samples=10, max_time_s=0.5)
    m = measure(noop, policy=policy, backend=FakeBackend(alternating(1.0, 2.0)))
    assert m.stop_reason is StopReason.TIME
    assert (m.warmup_calls, m.stats.n) == (1, 1)
    assert m.low_confidence
    assert m.wall_s - m.warmup_s == pytest.approx(2.0)


def test_the_floor_of_three_samples_may_overrun_the_budget_by_a_fifth() -> None:
    # 1 s calls under 4.5 s: two warm-up calls and two samples fit, the third sample ends at 5 s,
    # within a fifth past the budget (5.4 s)
    m = measure(noop, policy=Policy(max_time_s=4.5), backend=FakeBackend(1.0), cache=WARM)
    assert (m.warmup_calls, m.stats.n) == (2, 3)
    assert m.wall_s == pytest.approx(5.0)
    # at 4 s a second warm-up call and three samples would end past 4.8 s: the warm-up is one
    # call, the next is the first of three samples, and they end on the budget
    m = measure(noop, policy=Policy(max_time_s=4.0), backend=FakeBackend(1.0), cache=WARM)
    assert (m.warmup_calls, m.stats.n) == (1, 3)
    assert m.wall_s == pytest.approx(4.0)


def test_max_samples_wins_over_time_when_both_apply() -> None:
    policy = Policy(min_samples=3, max_samples=3, max_time_s=5e-3)
    m = measure(noop, policy=policy, backend=FakeBackend(alternating(1e-3, 2e-3)))
    assert m.stop_reason is StopReason.MAX_SAMPLES


def test_precision_wins_when_every_rule_applies() -> None:
    # two 1 ms warm-up calls and six samples spend the 8 ms budget exactly
    policy = Policy(warmup_s=0.0, min_samples=6, max_samples=6, max_time_s=8e-3)
    m = measure(noop, policy=policy, backend=FakeBackend(1e-3))
    assert m.stop_reason is StopReason.PRECISION


def test_precision_needs_six_samples() -> None:
    # one sample has no spread, but says nothing about the median's interval
    backend = FakeBackend(1e-3)
    m = measure(noop, policy=Policy(min_samples=1, min_time_s=0), backend=backend)
    assert m.stop_reason is StopReason.PRECISION
    assert m.stats.n == 6
    # the first round finds the flush's cost; the floor of three is kept however few min_samples asks
    assert [r.samples for r in sampling_runs(backend, m)] == [1, 5]


def test_a_zero_median_with_spread_never_counts_as_precise() -> None:
    # 60% of the samples are 0: the median is 0, the 95% interval reaches past it
    policy = Policy(max_samples=50, max_time_s=1e3)
    m = measure(noop, policy=policy, backend=FakeBackend(cycling(0.0, 0.0, 0.0, 1e-3, 1e-3)))
    assert m.stats.median == 0.0
    assert m.stats.ci_rel == float("inf")
    assert m.stop_reason is StopReason.MAX_SAMPLES
    assert m.stats.n == 50


# -- flushing and wall time --------------------------------------------------------------------


@pytest.mark.parametrize("flush", [True, False])
def test_flush_flag_reaches_the_backend_for_samples_only(flush: bool) -> None:
    backend = FakeBackend(1e-3)
    m = measure(noop, policy=Policy(), cache=FLUSHED if flush else WARM, backend=backend)
    warmup, sampling = backend.split_runs(m.warmup_calls)
    assert not any(r.flush for r in warmup)
    assert all(r.flush is flush for r in sampling)
    assert m.flushed is flush
    assert m.cache == ("cold" if flush else "warm")
    assert ("warm cache" in str(m)) is not flush
    assert backend.events.count("flush") == (m.stats.n if flush else 0)


def test_wall_time_includes_warmup_and_flushes() -> None:
    backend = FakeBackend(1e-3, flush_s=0.05)
    m = measure(noop, backend=backend)
    assert m.stats.n == 10
    assert m.warmup_s == pytest.approx(0.025)
    assert m.wall_s == pytest.approx(0.025 + 10 * (0.05 + 1e-3))
    assert m.wall_s == pytest.approx(backend.clock())


def test_time_budget_counts_flushes() -> None:
    # 1 ms kernels behind 99 ms flushes: a 1 s budget affords about ten samples, not a thousand
    policy = Policy(max_time_s=1.0)
    m = measure(noop, policy=policy, backend=FakeBackend(alternating(1e-3, 1.1e-3), flush_s=0.099))
    assert m.stop_reason is StopReason.TIME
    assert m.stats.n <= 11


# -- the result ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("stat", "expected"), [("median", 2e-3), ("min", 1e-3), ("mean", 3e-3)])
def test_stat_selects_the_verdict_time(stat: Any, expected: float) -> None:
    # two warm-up calls, then exactly three samples of 1, 2 and 6 ms
    durations = [5e-3, 5e-3, 1e-3, 2e-3, 6e-3]
    policy = Policy(warmup_s=0.0, min_samples=3, max_samples=3, stat=stat)
    m = measure(noop, policy=policy, backend=FakeBackend(durations, resolution_s=1e-9))
    assert m.samples_s == pytest.approx((1e-3, 2e-3, 6e-3))
    assert m.stat == stat
    assert m.time_s == pytest.approx(expected)
    assert m.time_s == m.stats.value(stat)


def test_measurement_describes_its_origin() -> None:
    policy = Policy(min_time_s=0)
    m = measure(noop, policy=policy, backend=FakeBackend(1e-3, device_name="Fake GPU 9000"), cache=WARM)
    assert (m.backend, m.device, m.policy) == ("fake", "Fake GPU 9000", policy)
    assert isinstance(m.samples_s, tuple)
    assert len(m.samples_s) == m.stats.n
    assert str(m) == (
        "1000 µs median of 10 samples (±0.00% 95% CI of the median, 1 call(s)/sample, warm cache;"
        " fake: Fake GPU 9000; stopped on precision)"
    )


def test_measurement_is_frozen_and_slotted() -> None:
    m = measure(noop, backend=FakeBackend(1e-3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.time_s = 0.0  # type: ignore[misc]
    assert not hasattr(m, "__dict__")


def test_kernel_receives_its_arguments() -> None:
    seen: list[tuple[object, ...]] = []
    measure(lambda *a: seen.append(a), 1, "x", policy=Policy(min_samples=1), backend=FakeBackend(1e-3))
    assert set(seen) == {(1, "x")}


# -- keywords and setup --------------------------------------------------------------------------


class SetupLog:
    """A setup that logs itself among the backend's events and costs ``cost_s`` of the fake clock."""

    def __init__(
        self, backend: FakeBackend, cost_s: float = 0.0, returns: Callable[[int], object] | None = None
    ) -> None:
        self.backend, self.cost_s, self.returns = backend, cost_s, returns
        self.calls = 0

    def __call__(self) -> object:
        self.backend.events.append("setup")
        self.backend.fake_clock.advance(self.cost_s)
        self.calls += 1
        return None if self.returns is None else self.returns(self.calls)


def test_kernel_receives_its_keywords() -> None:
    seen: list[tuple[tuple[object, ...], dict[str, object]]] = []
    measure(
        lambda *a, **kw: seen.append((a, kw)), 1, kwargs={"out": "o"}, policy=Policy(min_samples=1),
        backend=FakeBackend(1e-3),
    )  # fmt: skip
    assert len(seen) > 2
    assert all(call == ((1,), {"out": "o"}) for call in seen)


@pytest.mark.parametrize("flush", [True, False])
def test_setup_runs_before_every_call_outside_its_window(flush: bool) -> None:
    backend = FakeBackend(1e-3, flush_s=0.002)
    setup = SetupLog(backend, cost_s=0.005)
    m = measure(noop, setup=setup, policy=Policy(), cache=FLUSHED if flush else WARM, backend=backend)
    # warm-up and samples alike: every window is one call, setup (then the flush) right before it
    assert setup.calls == backend.calls == m.warmup_calls + len(m.samples_s)
    assert all(r.calls == 1 and r.samples == 1 for r in backend.runs)
    head = ["setup", "flush"] if flush else ["setup"]
    sampling = backend.events[backend.events.index("flush") - 1 :] if flush else backend.events
    assert sampling == [*head, "window"] * (len(sampling) // len([*head, "window"]))
    # the windows hold the kernel alone: 1 ms, not 1 ms + 5 ms of setup
    assert m.samples_s == pytest.approx([1e-3] * len(m.samples_s))
    assert m.setup is True
    assert m.cache_note == (
        "cold: setup, then a cache flush, before every call (one call per sample)"
        if flush
        else "warm; setup before every call (one call per sample)"
    )


def test_setup_means_one_call_per_sample() -> None:
    # a 10 ns kernel would be batched 10 000 to a window; setup must come before each call
    backend = FakeBackend(1e-8, resolution_s=1e-6)
    m = measure(noop, setup=SetupLog(backend), policy=Policy(warmup_s=1e-6, max_samples=20), backend=backend)
    assert m.calls_per_sample == 1
    assert (
        measure(noop, policy=Policy(warmup_s=1e-6), cache=WARM, backend=FakeBackend(1e-8)).calls_per_sample
        > 1
    )


def test_setup_is_paid_from_the_time_budget() -> None:
    # 200 ms of setup before each 1 ms call: a 1 s budget affords the two warm-up calls and three samples
    backend = FakeBackend(1e-3)
    m = measure(noop, setup=SetupLog(backend, cost_s=0.2), policy=Policy(max_time_s=1.0), backend=backend)
    assert m.stats.n == 3
    assert m.wall_s <= 1.0 + 0.21
    assert m.stop_reason is StopReason.TIME


def test_setup_may_return_the_arguments_of_each_call() -> None:
    seen: list[tuple[tuple[object, ...], dict[str, object]]] = []
    backend = FakeBackend(1e-3)
    setup = SetupLog(backend, returns=lambda i: ((i,), {"fresh": True}))
    measure(lambda *a, **kw: seen.append((a, kw)), setup=setup, policy=Policy(min_samples=3), backend=backend)
    assert seen == [((i,), {"fresh": True}) for i in range(1, setup.calls + 1)]


@pytest.mark.parametrize(
    ("args", "kwargs", "returns", "message"),
    [
        ((), None, 5, "setup must return None, or (args, kwargs) for the kernel's next call (a tuple or list"
                      " and a dict); got 5 (int)"),
        ((), None, ((1,),), "setup must return None, or (args, kwargs)*; got ((1,),) (tuple)"),
        ((), None, ((), {1: 2}), "setup's kwargs keys are the kernel's keyword names, strings; got 1 (int)"),
        ((1,), None, ((2,), {}), "setup returned the kernel's arguments, and the call gave arguments too*"),
        ((), {"out": 1}, ((2,), {}), "setup returned the kernel's arguments, and the call gave*"),
    ],
)  # fmt: skip
def test_what_setup_returns_is_checked(
    args: tuple[object, ...], kwargs: dict[str, object] | None, returns: object, message: str
) -> None:
    calls: list[object] = []
    backend = FakeBackend(1e-3)
    with pytest.raises(SetupError) as info:
        measure(
            lambda *a, **kw: calls.append(a), *args, kwargs=kwargs, setup=lambda: returns, backend=backend
        )
    assert re.fullmatch(re.escape(message).replace(r"\*", ".*"), str(info.value))
    assert calls == []  # before the kernel's first call


def test_a_setup_exception_propagates_unchanged() -> None:
    error = KeyError("stale")

    def setup() -> None:
        raise error

    with pytest.raises(KeyError) as info:
        measure(noop, setup=setup, backend=FakeBackend(1e-3))
    assert info.value is error


def test_call_once_runs_setup_then_the_kernel_with_its_arguments() -> None:
    log: list[object] = []
    call_once(lambda *a, **kw: log.append((a, kw)), (1,), {"k": 2}, setup=lambda: log.append("setup"))
    assert log == ["setup", ((1,), {"k": 2})]
    call_once(lambda *a, **kw: log.append((a, kw)), setup=lambda: ((3,), {}))
    assert log[-1] == ((3,), {})


# -- the checking front ------------------------------------------------------------------------


def test_non_callable_kernel_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=re.escape("kernel must be callable; got 3 (int)")):
        measure(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "setup", "message"),
    [
        ([1, 2], None, "kwargs must be a mapping of the kernel's keyword arguments, such as"
                       " kwargs={'out': out}; got [1, 2] (list)"),
        ({1: "x"}, None, "kwargs keys are the kernel's keyword names, strings; got 1 (int)"),
        (None, 3, "setup must be callable (it runs before every timed call); got 3 (int)"),
    ],
)  # fmt: skip
def test_keywords_and_setup_are_checked_before_anything_runs(kwargs: Any, setup: Any, message: str) -> None:
    backend = FakeBackend(1e-3)
    with pytest.raises(TypeError, match=re.escape(message)):
        measure(noop, kwargs=kwargs, setup=setup, backend=backend)
    assert backend.runs == []


def test_policy_must_be_a_policy() -> None:
    with pytest.raises(TypeError, match=re.escape("policy must be a Policy; got {'flush': False} (dict)")):
        measure(noop, policy={"flush": False})  # type: ignore[arg-type]


def test_backend_must_look_like_a_backend() -> None:
    with pytest.raises(TypeError, match=r"must be a pytest_roofline\.timing\.base\.Backend .*\(object\)"):
        measure(noop, backend=object())  # type: ignore[arg-type]


def test_backend_returning_the_wrong_number_of_windows_is_an_error() -> None:
    class Short(FakeBackend):
        def run(self, *args: Any, **kwargs: Any) -> list[float]:
            return super().run(*args, **kwargs)[:-1]

    with pytest.raises(RuntimeError, match="backend 'fake' returned 0 windows for 1 samples"):
        measure(noop, backend=Short(1e-3))


def test_kernel_exception_propagates_unchanged() -> None:
    error = ValueError("boom")

    def kernel() -> None:
        raise error

    with pytest.raises(ValueError, match="boom") as info:
        measure(kernel, backend=FakeBackend(1e-3))
    assert info.value is error


def test_default_backend_is_one_cpu_backend_per_process() -> None:
    assert isinstance(engine._default_backend(), CpuBackend)
    assert engine._default_backend() is engine._default_backend()
    # a budget no busy machine exhausts before the third sample of a no-op
    policy = Policy(warmup_s=0.0, min_samples=2, max_samples=3, max_time_s=1.0)
    m = measure(noop, policy=policy, cache=WARM)
    assert m.backend == "cpu"
    assert m.device
    assert 2 <= m.stats.n <= 3


# -- policy --------------------------------------------------------------------------------------


def test_policy_defaults() -> None:
    p = Policy()
    assert (p.warmup_s, p.warmup_calls, p.min_samples, p.max_samples) == (0.025, 2, 10, 10_000)
    assert (p.max_time_s, p.target_rel_ci, p.batch_factor, p.stat) == (1.0, 0.01, 100.0, "median")
    # how the cache is kept is the cache plan's, not a policy's: without one, a flush before every call
    assert inspect.signature(measure).parameters["cache"].default is FLUSHED
    assert not hasattr(p, "flush")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warmup_s": -1}, "warmup_s must be a non-negative number; got -1"),
        ({"warmup_calls": 0}, "warmup_calls must be an integer >= 1; got 0"),
        ({"min_samples": 1.5}, "min_samples must be an integer >= 1; got 1.5"),
        ({"max_samples": True}, "max_samples must be an integer >= 1; got True"),
        ({"min_samples": 20, "max_samples": 10}, "max_samples (10) must be >= min_samples (20)"),
        ({"max_time_s": 0}, "max_time_s must be a positive number; got 0"),
        ({"target_rel_ci": float("nan")}, "target_rel_ci must be a positive number; got nan"),
        ({"batch_factor": "100"}, "batch_factor must be a positive number; got '100'"),
        ({"stat": "max"}, "stat must be one of median, min, mean; got 'max'"),
    ],
)
def test_policy_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Policy(**kwargs)


class ThreadReadingBackend(FakeBackend):
    """A FakeBackend that says, round by round, what the OS saw of the kernel's threads."""

    def __init__(self, readings: list[ThreadWait], **kwargs: Any) -> None:
        super().__init__(lambda i: (1e-3, 3e-3)[i % 2], **kwargs)  # noisy: several rounds to a target
        self._readings = iter(readings)
        self.last_thread_wait: ThreadWait | None = None

    def run(
        self, fn: Callable[..., object], args: Any, *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        self.last_thread_wait = next(self._readings, None)
        return super().run(fn, args, calls=calls, samples=samples, flush=flush)


def test_the_measurement_keeps_the_middle_thread_count_and_wait_of_its_rounds() -> None:
    # beside a busy neighbour one round may see a BLAS thread starved below the count's cut
    readings = [ThreadWait(2, 0.5), ThreadWait(1, 0.9), ThreadWait(2, 0.4), ThreadWait(2, 0.6)] * 10
    backend = ThreadReadingBackend(readings, resolution_s=1e-6)
    policy = Policy(warmup_s=0.0, min_samples=3, max_samples=40, target_rel_ci=1e-6, max_time_s=1e3)
    m = measure(noop, policy=policy, backend=backend)
    assert len(backend.runs) > 4  # warm-up runs read threads too; the engine keeps the sampling rounds'
    assert m.threads == 2
    assert m.wait_share is not None
    assert 0.4 <= m.wait_share <= 0.6


def test_a_round_that_ran_the_kernel_on_one_thread_alone_makes_it_single_threaded() -> None:
    # a single-threaded kernel after a BLAS probe: the probe's threads spin on beside most rounds,
    # counted; in one round the others slept
    alone = ThreadWait(1, 0.0, alone=True)
    readings = [ThreadWait(2, 0.5), alone, ThreadWait(2, 0.4), ThreadWait(2, 0.6)] * 10
    backend = ThreadReadingBackend(readings, resolution_s=1e-6)
    policy = Policy(warmup_s=0.0, min_samples=3, max_samples=40, target_rel_ci=1e-6, max_time_s=1e3)
    assert measure(noop, policy=policy, backend=backend).threads == 1


def test_a_backend_that_cannot_count_threads_leaves_them_unknown() -> None:
    m = measure(
        noop, policy=Policy(warmup_s=0.0, min_samples=3), backend=FakeBackend(1e-3, resolution_s=1e-6)
    )
    assert (m.threads, m.wait_share) == (None, None)


# -- two threads at once ---------------------------------------------------------------------------


def test_two_threads_measuring_at_once_take_turns() -> None:
    from pytest_roofline import measure
    from pytest_roofline.model.policy import Policy

    overlap = Overlap()

    class Watched(FakeBackend):
        def run(self, *args: Any, **kwargs: Any) -> list[float]:
            with overlap:
                return super().run(*args, **kwargs)

    policy = Policy(max_time_s=0.05)
    in_threads(*(lambda: measure(lambda: None, policy=policy, backend=Watched(1e-3)) for _ in range(2)))
    assert overlap.most == 1  # one thread's windows never open while the other's are
