"""Samples taken while the GPU had slowed its clocks: left out, and the GPU let rest (nvbench's rule).

The fake is what the H200 showed (``benchmarks/gpu_runs/2026-11-26-h200/run4``): an 8192³ bf16
matmul ran 1.39 ms a call for its first ~35 ms, then its SM clock fell to 74% of the maximum at the
power limit and a call took 1.63 ms; the median was the slowed one.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from fake_nvml import FakeNvml, Reading
from fakes import FakeBackend, FakeClock

from pytest_roofline.model.conditions import ClockLog
from pytest_roofline.model.measurement import Measurement
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.base import Probe
from pytest_roofline.timing.cache import WARM
from pytest_roofline.timing.clocks import ClockWatcher
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.throttle import MAX_RECOVERY_STEP_S, RECOVERY_S, SlowedSamples

MAX_SM = 1980
FULL_S = 1.39e-3
#: the SM clock's share at the power limit, and what it does to a call (the matmul is compute-bound)
CAPPED = 0.74
#: NVML's clock-event reason bit for an idle GPU
IDLE = 0x1


class PowerCappedGpu:
    """A GPU at its power limit: ``sustain_s`` of back-to-back calls and its SM clock falls to
    ``CAPPED`` of the maximum, each call slowing by as much, until it has been idle ``recover_s``.
    NVML is read every ``interval_s`` of the fake clock, as the watcher's thread reads it."""

    def __init__(
        self,
        clock: FakeClock,
        *,
        sustain_s: float = 0.035,
        recover_s: float = 0.03,
        interval_s: float = 0.02,
    ) -> None:
        self.clock, self.sustain_s, self.recover_s, self.interval_s = clock, sustain_s, recover_s, interval_s
        self.busy_from = 0.0
        self.last_end = -1.0
        self.watcher: ClockWatcher | None = None
        self._next_reading = 0.0

    def capped(self, now: float) -> bool:
        return now - self.last_end < self.recover_s and now - self.busy_from >= self.sustain_s

    def call_s(self, i: int) -> float:
        now = self.clock.now()
        self._read_nvml(now)
        if now - self.last_end >= self.recover_s:  # rested: the clock is back
            self.busy_from = now
        d = FULL_S / CAPPED if self.capped(now) else FULL_S
        self.last_end = now + d
        return d

    def reading(self) -> Reading:
        now = self.clock.now()
        idle = IDLE if now - self.last_end > 1e-4 else 0
        sm = round(MAX_SM * CAPPED) if self.capped(now) else MAX_SM
        return (sm, 2619, 60, idle)

    def _read_nvml(self, now: float) -> None:
        if self.watcher is not None and now >= self._next_reading:
            self.watcher.sample()
            self._next_reading = now + self.interval_s


def capped_setup(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeBackend, PowerCappedGpu, ClockWatcher]:
    clock = FakeClock()
    gpu = PowerCappedGpu(clock)
    FakeNvml(gpu.reading, max_sm=MAX_SM).install(monkeypatch)
    watcher = ClockWatcher(interval_s=3600, clock=clock.now, sleep=clock.advance)
    gpu.watcher = watcher
    return FakeBackend(gpu.call_s, clock=clock, resolution_s=1e-7), gpu, watcher


def measured(backend: FakeBackend, watcher: ClockWatcher, *, throttle: bool) -> Measurement:
    with watcher:
        m = measure(lambda: None, backend=backend, cache=WARM, throttle=watcher if throttle else None)
    return dataclasses.replace(m, clocks=watcher.log)


def test_samples_at_the_power_limit_are_left_out_and_the_median_is_the_full_clocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend, _, watcher = capped_setup(monkeypatch)

    m = measured(backend, watcher, throttle=True)

    assert m.time_s == pytest.approx(FULL_S)
    assert (m.slowed > 0, m.slowed_kept) == (True, 0)
    assert m.clocks is not None
    assert m.clocks.throttled  # the GPU did slow down meanwhile...
    assert not m.ran_slowed  # ...but no sample the median uses ran slowed
    assert m.wall_s <= Policy().max_time_s * 1.05


def test_without_the_rule_the_median_is_the_power_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the GPU run measured before the rule: the fake reproduces it."""
    backend, _, watcher = capped_setup(monkeypatch)

    m = measured(backend, watcher, throttle=False)

    assert m.time_s == pytest.approx(FULL_S / CAPPED)
    assert (m.slowed, m.slowed_kept, m.clocks_per_sample) == (0, 0, False)
    assert m.ran_slowed  # judged by the clock log: a miss would be inconclusive


def test_with_too_few_samples_at_full_clocks_the_slowed_are_kept_and_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend, gpu, watcher = capped_setup(monkeypatch)
    gpu.sustain_s = 0.0  # slowed from the first call on, rest or not

    m = measured(backend, watcher, throttle=True)

    assert m.time_s == pytest.approx(FULL_S / CAPPED)
    assert (m.slowed, m.slowed_kept) == (0, m.stats.n)
    assert m.ran_slowed


def test_a_steady_gpu_loses_no_sample_and_never_rests(monkeypatch: pytest.MonkeyPatch) -> None:
    backend, gpu, watcher = capped_setup(monkeypatch)
    gpu.sustain_s = 1e9
    rests: list[float] = []
    watcher.sleep = rests.append

    m = measured(backend, watcher, throttle=True)

    assert m.time_s == pytest.approx(FULL_S)
    assert (m.slowed, m.slowed_kept, rests) == (0, 0, [])


def test_the_rests_fit_in_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slowed from the first call, with samples noisy enough never to reach the precision asked: the
    rests grow (nvbench's schedule) until the budget caps them, and the measurement stays in it."""
    backend, gpu, watcher = capped_setup(monkeypatch)
    gpu.sustain_s = 0.0
    jitter = gpu.call_s
    backend._durations = lambda i: jitter(i) * (1 + 0.02 * (i * 7919 % 101) / 100)
    rests: list[float] = []
    advance = watcher.sleep
    watcher.sleep = lambda seconds: (rests.append(seconds), advance(seconds))[1]

    with watcher:
        policy = Policy(max_time_s=0.5, target_rel_ci=1e-6)
        m = measure(lambda: None, backend=backend, cache=WARM, throttle=watcher, policy=policy)

    assert len(rests) >= 4
    assert rests[3] > RECOVERY_S  # grown from the fourth slowed round in a row
    assert m.wall_s <= 0.5 * 1.05


def test_spans_are_judged_by_the_readings_in_and_around_them(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    now: list[Reading] = [(MAX_SM, 2619, 60, 0)]
    FakeNvml(lambda: now[0]).install(monkeypatch)
    watcher = ClockWatcher(interval_s=3600, clock=clock.now)
    with watcher:  # a reading at 0: full clocks
        clock.advance(0.010)
        now[0] = (1400, 2619, 80, 0)  # 71%: slowed
        watcher.sample()  # at 10 ms
        clock.advance(0.010)
        now[0] = (MAX_SM, 2619, 80, 0x20 & 0)
        watcher.sample()  # at 20 ms
        clock.advance(0.010)
        now[0] = (300, 2619, 50, IDLE)  # idle: a low clock that is no slowdown
        assert watcher.slowed([(0.001, 0.002), (0.012, 0.013), (0.021, 0.022), (0.0305, 0.031)]) == [
            True,  # between the full reading at 0 and the slowed one at 10 ms
            True,
            False,  # between 20 ms (full) and the reading slowed() takes now, at 30 ms (idle)
            False,
        ]
        now[0] = (MAX_SM, 2619, 90, 0x40)  # hardware thermal slowdown at full clocks
        assert watcher.slowed([(0.0301, 0.0302)]) == [True]


def test_without_nvml_no_span_is_slowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pytest_roofline.timing.clocks._nvml_state", (None, "no NVML here"))
    with ClockWatcher() as watcher:
        assert watcher.slowed([(0.0, 1.0), (1.0, 2.0)]) == [False, False]
    assert watcher.log == ClockLog(False, "no NVML here")


def test_the_rest_grows_as_nvbench_s_from_the_fourth_slowed_round_in_a_row() -> None:
    answers: list[bool] = []

    class Told(ClockWatcher):
        def slowed(self, spans: list[tuple[float, float]]) -> list[bool]:
            return [answers[-1]] * len(spans)

    samples = SlowedSamples(Told())

    def rest_after(ended_slowed: bool) -> float:
        answers.append(ended_slowed)
        samples.judge([(0.0, 1.0)], left_s=math.inf)
        return samples.rest_s

    rests = [rest_after(True) for _ in range(7)]
    assert rests[:3] == [RECOVERY_S] * 3
    assert rests[3:5] == pytest.approx([0.125, 0.3125])  # += 1.5x itself
    assert rests[6] - rests[5] == pytest.approx(MAX_RECOVERY_STEP_S)  # by at most 0.5 s a step
    assert rest_after(False) == 0.0
    assert rest_after(True) == rests[-1]  # nvbench keeps the grown rest; only the count restarts


class Journal(ClockWatcher):
    """A clock watch that calls every span slowed and writes down its rests, beside the probe's calls."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def slowed(self, spans: list[tuple[float, float]]) -> list[bool]:
        return [True] * len(spans)

    def rest(self, seconds: float) -> None:
        self.events.append("rest")


def test_a_probe_after_a_slowed_round_waits_for_the_rest() -> None:
    """A probe timed on the slowed machine would read its ceiling low: the rest comes first."""
    events: list[str] = []
    backend = FakeBackend(1e-3, resolution_s=1e-7)
    probe = Probe("copy", "bandwidth", 1e6, lambda: events.append("probe"))

    measure(lambda: events.append("call"), backend=backend, cache=WARM, probe=probe, throttle=Journal(events),
            policy=Policy(max_time_s=0.3, probe_interval_s=0.02))  # fmt: skip

    first_rest = events.index("rest")
    assert "probe" in events[first_rest:]
    assert all(events[i - 1] == "rest" for i, e in enumerate(events) if e == "probe" and i > first_rest)


def test_a_throttle_must_answer_every_span() -> None:
    class Short(Journal):
        def slowed(self, spans: list[tuple[float, float]]) -> list[bool]:
            return [True]

    with pytest.raises(ValueError, match=r"answered 1 of 10 spans"):
        measure(lambda: None, backend=FakeBackend(1e-3), cache=WARM, throttle=Short([]))
