"""The cut of a measurement's slow start (timing.transient), alone and inside the engine, on a fake clock."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest
from fakes import FakeBackend

from pytest_roofline.model.measurement import Measurement, StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing import sampling
from pytest_roofline.timing.base import Probe
from pytest_roofline.timing.cache import FLUSHED, WARM, CachePlan
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.sampling import _Round, _time_of
from pytest_roofline.timing.transient import MIN_HALF, MIN_SHIFT, SETTLE_WITHIN_S, slower_start


def noop() -> None:
    pass


def wobble(center: float, i: int) -> float:
    """``center`` ±2%, cycling: a spread for the interval without any trend."""
    return center * (0.98, 1.0, 1.02)[i % 3]


# -- slower_start, alone -----------------------------------------------------------------------


def test_a_steady_series_has_no_slow_start() -> None:
    assert not slower_start([wobble(1.0, i) for i in range(300)], min_shift=0.01)


def test_a_first_half_slower_beyond_doubt_is_a_slow_start() -> None:
    series = [wobble(1.2, i) for i in range(150)] + [wobble(1.0, i) for i in range(150)]
    assert slower_start(series, min_shift=0.01)


def test_a_series_that_slows_down_later_is_load_not_warm_up() -> None:
    series = [wobble(1.0, i) for i in range(150)] + [wobble(1.2, i) for i in range(150)]
    assert not slower_start(series, min_shift=0.01)


def test_a_gap_below_the_precision_asked_for_is_left_alone() -> None:
    # 0.5% apart, with no spread at all: beyond doubt, but not worth half the samples at a 1% target
    series = [1.005] * 100 + [1.0] * 100
    assert not slower_start(series, min_shift=0.01)
    assert slower_start(series, min_shift=0.001)


def test_medians_apart_by_more_than_their_half_widths_but_with_overlapping_intervals_are_left_alone() -> None:
    # the interval of a median is not centred on it: [0.9, 1.5] and [1.0, 1.0] overlap
    assert not slower_start([0.9] + [1.5] * 5 + [1.0] * 6, min_shift=0.01)


def test_a_gap_inside_the_intervals_is_left_alone() -> None:
    # halves 1% apart by median, but each spread ±30%: the intervals overlap
    spread = (0.7, 1.0, 1.3)
    series = [1.01 * spread[i % 3] for i in range(30)] + [spread[i % 3] for i in range(30)]
    assert not slower_start(series, min_shift=0.001)


@pytest.mark.parametrize("n", [0, 1, 2 * MIN_HALF - 1])
def test_too_few_samples_never_make_a_slow_start(n: int) -> None:
    assert not slower_start([2.0] * (n // 2) + [1.0] * (n - n // 2), min_shift=0.01)


def test_twelve_samples_are_enough_when_the_halves_differ_plainly() -> None:
    assert slower_start([2.0] * MIN_HALF + [1.0] * MIN_HALF, min_shift=0.01)


# -- inside the engine ---------------------------------------------------------------------------


def settling(backend: FakeBackend, *, slow: float, fast: float, until_s: float) -> Callable[[int], float]:
    """A call takes ``slow`` seconds until the clock reaches ``until_s``, then ``fast``."""
    return lambda i: wobble(slow if backend.clock() < until_s else fast, i)


def measure_settling(
    *, slow: float, fast: float, until_s: float, policy: Policy | None = None, cache: CachePlan = FLUSHED
) -> Measurement:
    backend = FakeBackend(0.0, resolution_s=1e-9)
    backend._durations = settling(backend, slow=slow, fast=fast, until_s=until_s)
    return measure(noop, backend=backend, policy=policy or Policy(), cache=cache)


def test_the_samples_before_the_kernel_settled_are_cut() -> None:
    # 25 µs a call, 30 µs until 70 ms: the 25 ms warm-up and a 60 ms span alone would leave more
    # slow samples than fast ones, and the median 20% high
    m = measure_settling(slow=30e-6, fast=25e-6, until_s=0.07)
    assert m.transient > 0
    assert m.time_s == pytest.approx(25e-6)
    assert m.stop_reason is StopReason.PRECISION
    # the statistics count only what follows the cut, and the span counts from the cut too
    assert m.stats.n == len(m.samples_s) - m.transient
    assert m.excluded == 0
    assert sum(m.samples_s[m.transient :]) >= Policy().min_time_s


def test_without_the_cut_that_kernel_would_read_20_percent_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "slower_start", lambda samples, *, min_shift: False)
    m = measure_settling(slow=30e-6, fast=25e-6, until_s=0.07)
    assert m.transient == 0
    assert m.time_s == pytest.approx(30e-6, rel=0.03)  # the slow samples outnumber the fast


def test_a_steady_kernel_is_not_cut() -> None:
    m = measure_settling(slow=25e-6, fast=25e-6, until_s=0.07)
    assert m.transient == 0
    assert m.stats.n == len(m.samples_s)
    assert m.time_s == pytest.approx(25e-6)


def test_a_kernel_that_slows_down_later_is_not_cut() -> None:
    m = measure_settling(slow=25e-6, fast=30e-6, until_s=0.05)
    assert m.transient == 0


def test_a_cut_is_paid_from_the_time_budget() -> None:
    # slow for longer than the budget: the cut leaves the measurement short of the span, never over
    policy = Policy(max_time_s=0.2)
    m = measure_settling(slow=30e-6, fast=25e-6, until_s=10.0, policy=policy)
    assert m.wall_s <= 0.2 + 1e-3
    assert m.transient == 0  # a slowness that never ends is no slow start
    assert m.time_s == pytest.approx(30e-6)


def test_a_slow_start_within_a_machines_drift_is_not_cut() -> None:
    # 3% slow for 70 ms: beyond doubt on a fake clock, but a shared machine drifts that much
    assert MIN_SHIFT == 0.05
    m = measure_settling(slow=25.75e-6, fast=25e-6, until_s=0.07)
    assert m.transient == 0


def test_the_span_counts_from_the_cut() -> None:
    # evenly timed calls are precise at once, so only the span decides when sampling ends: 60 ms of
    # samples after the cut, not 60 ms since sampling began
    backend = FakeBackend(0.0, resolution_s=1e-9)
    backend._durations = lambda i: 50e-6 if backend.clock() < 0.07 else 25e-6
    m = measure(noop, backend=backend)
    assert m.transient > 0
    assert (m.stop_reason, m.time_s) == (StopReason.PRECISION, 25e-6)
    assert sum(m.samples_s[m.transient :]) >= Policy().min_time_s - 1e-9


def test_time_of_places_a_sample_by_the_windows_before_it() -> None:
    # two rounds; in the first, 0.5 ms a sample went to flushes and bookkeeping
    samples = [1e-3, 1e-3, 2e-3, 2e-3, 5e-3, 5e-3]
    rounds = [_Round(first=0, size=4, start=1.0, end=1.008), _Round(first=4, size=2, start=2.0, end=2.01)]
    assert _time_of(0, rounds, samples, 1) == pytest.approx(1.0)
    assert _time_of(2, rounds, samples, 1) == pytest.approx(1.0 + 2e-3 + 2 * 0.5e-3)
    assert _time_of(5, rounds, samples, 1) == pytest.approx(2.005)
    assert _time_of(6, rounds, samples, 1) == pytest.approx(2.01)  # past the last: its end
    # k calls a sample: the windows are k times the per-call samples
    one_round = [_Round(first=0, size=2, start=0.0, end=0.004)]
    assert _time_of(1, one_round, [1e-3, 1e-3], 2) == pytest.approx(0.002)


class EarlyPreemption(FakeBackend):
    """Steady 1 ms calls; before 50 ms, three windows in five are preempted and last 3 ms."""

    def __init__(self) -> None:
        super().__init__(self._duration, resolution_s=1e-9)
        self.last_preempted: list[bool] = []
        self._hit = False

    def _duration(self, i: int) -> float:
        self._hit = self.clock() < 0.05 and i % 5 < 3
        return 3e-3 if self._hit else 1e-3

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        windows, flags = [], []
        for _ in range(samples):
            windows += super().run(fn, args, calls=calls, samples=1, flush=flush)
            flags.append(self._hit)
        self.last_preempted = flags
        return windows


def test_preempted_windows_are_load_not_a_slow_start() -> None:
    m = measure(noop, backend=EarlyPreemption(), policy=Policy(warmup_s=0.0), cache=WARM)
    assert m.transient == 0
    assert m.excluded > 0
    assert m.time_s == pytest.approx(1e-3)


def test_no_cut_without_room_to_sample_after_it() -> None:
    # the last round reaches max_samples: a cut would leave 12 samples where the policy asked for 24
    policy = Policy(min_samples=24, max_samples=24, warmup_s=0.0)
    m = measure_settling(slow=50e-6, fast=25e-6, until_s=0.00068, policy=policy, cache=WARM)
    assert m.transient == 0
    assert (m.stats.n, m.stop_reason) == (24, StopReason.MAX_SAMPLES)


class SettlingWithProbe(FakeBackend):
    """Calls 30 µs until 70 ms, then 25 µs; the probe takes 2 ms, then 1 ms; the backend reads a
    parallelism of 1, then 2."""

    def __init__(self) -> None:
        super().__init__(lambda i: wobble(30e-6 if self.clock() < 0.07 else 25e-6, i), resolution_s=1e-9)
        self.last_parallelism = 1.0
        self.probes = 0

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        if fn is probe_fn:
            self.probes += 1
            d = 2e-3 if self.clock() < 0.07 else 1e-3
            self.fake_clock.advance(d)
            return [d]
        windows = super().run(fn, args, calls=calls, samples=samples, flush=flush)
        self.last_parallelism = 1.0 if self.clock() < 0.07 else 2.0
        return windows


def probe_fn() -> None:
    pass


def test_probes_and_readings_before_the_cut_are_left_out_with_the_samples() -> None:
    backend = SettlingWithProbe()
    policy = Policy(probe_interval_s=0.01)
    probe = Probe("copy", "bandwidth", 1e6, probe_fn)
    m = measure(noop, backend=backend, policy=policy, probe=probe, cache=WARM)
    assert m.transient > 0
    assert m.probe is not None
    assert len(m.probe.rates) < backend.probes  # the probes before the cut are gone...
    assert sum(rate == pytest.approx(0.5e9) for rate in m.probe.rates) <= 1  # ...but the last one before it
    assert m.probe.stats.median == pytest.approx(1e9)
    assert m.parallelism == 2.0  # the rounds before the cut read 1


def spread(center: float, i: int, amplitude: float) -> float:
    """``center`` ± ``amplitude``, never twice the same (a wide one keeps the interval of the
    median wider than ±1%)."""
    return center * (1 + amplitude * math.sin(i * 2.399963))  # the golden angle: no cycle


def test_a_slower_stretch_late_in_a_long_measurement_is_drift_not_a_slow_start() -> None:
    # 20% slower until 0.7 s of a 1 s measurement: halves that differ, but a cut 0.5 s in
    assert SETTLE_WITHIN_S == 0.25
    backend = FakeBackend(0.0, resolution_s=1e-9)
    backend._durations = lambda i: spread(1.2e-3 if backend.clock() < 0.7 else 1e-3, i, 0.3)
    m = measure(noop, backend=backend, policy=Policy(), cache=WARM)
    assert m.stop_reason is StopReason.TIME
    assert m.transient == 0
    assert m.time_s > 1.1e-3  # the slower stretch is most of the samples, and stays in


def test_a_slow_start_is_cut_in_a_long_measurement_too() -> None:
    backend = FakeBackend(0.0, resolution_s=1e-9)
    backend._durations = lambda i: spread(1.2e-3 if backend.clock() < 0.1 else 1e-3, i, 0.05)
    m = measure(noop, backend=backend, policy=Policy(), cache=WARM)
    assert m.transient > 0
    assert m.time_s == pytest.approx(1e-3, rel=0.02)
