"""The engine's round-two rules, on a fake clock: the time limit holds, batches are never flushed,
probes are spread through the window, preempted samples are not trusted as they are."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from fakes import FakeBackend, FakeClock

from pytest_roofline.model.measurement import StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.base import MIN_SAMPLES_FLOOR, Probe
from pytest_roofline.timing.cache import FLUSHED, WARM, CachePlan
from pytest_roofline.timing.contention import Snapshot
from pytest_roofline.timing.engine import measure


def noop() -> None:
    pass


# -- the time limit ---------------------------------------------------------------------------------


def test_a_5s_kernel_with_a_1s_limit_costs_two_calls() -> None:
    # the floor (two warm-up calls, three samples: 25 s) would overrun the budget 25 times: the least
    # a kernel is judged on, one warm-up call and one sample, is taken, and the record says why
    backend = FakeBackend(5.0)
    m = measure(noop, policy=Policy(max_time_s=1.0), backend=backend)
    assert m.warmup_calls == 1
    assert m.stats.n == 1 < MIN_SAMPLES_FLOOR
    assert backend.calls == 2
    assert m.wall_s == pytest.approx(10.0)
    assert m.stop_reason is StopReason.TIME
    assert m.low_confidence
    assert m.budget_note.startswith("the 1000 ms time budget held 1 warm-up call and 1 sample of 5000 ms")


def test_a_first_call_that_paid_a_one_off_is_not_taken_for_a_slow_kernel() -> None:
    # a 1.5 s first call (a compilation) under a 1 s budget: the next call, 1 ms, shows it was a
    # one-off: the warm-up goes on, and the kernel gets the samples a 1 ms kernel gets
    backend = FakeBackend(lambda i: 1.5 if i == 0 else 1e-3)
    m = measure(noop, policy=Policy(max_time_s=1.0), backend=backend, cache=WARM)
    assert m.warmup_calls == 2
    assert m.stats.n >= MIN_SAMPLES_FLOOR
    assert 1.5 not in m.samples_s
    assert m.time_s == pytest.approx(1e-3)


def test_min_samples_give_way_to_the_budget() -> None:
    # 0.2 s calls, a 1 s budget: two warm-up calls leave nothing, so the floor of 3 is taken
    m = measure(noop, policy=Policy(max_time_s=1.0, warmup_s=0.0, warmup_calls=1), backend=FakeBackend(0.2))
    assert m.warmup_calls == 2
    assert m.stats.n == 3
    assert m.low_confidence


def test_a_first_round_is_sized_by_what_the_budget_affords() -> None:
    # 10 ms calls, 70 ms left after warm-up: 7 samples fit where 10 are the default minimum
    policy = Policy(max_time_s=0.09, warmup_s=0.02, warmup_calls=1)
    m = measure(noop, policy=policy, backend=FakeBackend(0.01), cache=WARM)
    assert m.warmup_s == pytest.approx(0.02)
    assert m.stats.n == 7
    assert m.wall_s == pytest.approx(policy.max_time_s)


def test_enough_budget_is_not_low_confidence() -> None:
    m = measure(noop, policy=Policy(max_time_s=10.0), backend=FakeBackend(1e-3))
    assert not m.low_confidence


# -- cold or warm, never both ------------------------------------------------------------------------


def test_a_flush_is_never_traded_for_a_batch() -> None:
    # a 100 ns kernel on a 100 ns timer would be batched warm; asked cold, it is flushed call by call
    backend = FakeBackend(1e-7, resolution_s=1e-7)
    m = measure(noop, policy=Policy(), cache=FLUSHED, backend=backend)
    assert m.calls_per_sample == 1
    sampling = backend.events[backend.events.index("flush") :]
    assert sampling == ["flush", "window"] * m.stats.n
    assert m.flushed
    assert m.cache_note.startswith("cold: cache flushed before every call (one call per sample")
    warm = measure(noop, policy=Policy(), cache=WARM, backend=FakeBackend(1e-7, resolution_s=1e-7))
    assert warm.calls_per_sample > 1
    assert warm.cache_note == f"warm; {warm.calls_per_sample} calls per sample"


def test_an_unbatched_sample_is_flushed_before_every_window() -> None:
    backend = FakeBackend(1e-3)
    m = measure(noop, policy=Policy(), cache=FLUSHED, backend=backend)
    sampling = backend.events[backend.events.index("flush") :]
    assert sampling == ["flush", "window"] * m.stats.n
    assert m.flushed
    assert m.cache_note.startswith("cold")


def test_why_a_flush_was_skipped_is_kept() -> None:
    past = CachePlan("past-cache", "no flush needed: the op moves 4.0x the LLC")
    m = measure(noop, cache=past, backend=FakeBackend(1e-3))
    assert m.cache_note == "cold: no flush needed: the op moves 4.0x the LLC"
    assert (m.cold_method, m.cache_reason) == ("past-cache", past.note)


# -- probes ---------------------------------------------------------------------------------------


class ProbedBackend(FakeBackend):
    """A fake backend that also times probe calls: ``probe_s`` each, logged as "probe" events."""

    def __init__(self, durations: float, probe_s: float | Callable[[int], float], **kwargs: object) -> None:
        super().__init__(durations, **kwargs)  # type: ignore[arg-type]
        self.probe_s = probe_s
        self.probes = 0

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        if getattr(fn, "is_probe", False):
            d = self.probe_s(self.probes) if callable(self.probe_s) else self.probe_s
            self.probes += 1
            self.events.append("probe")
            self.fake_clock.advance(d)
            return [d]
        return super().run(fn, args, calls=calls, samples=samples, flush=flush)


def probe(work: float = 1e6) -> Probe:
    def fn() -> None:
        pass

    fn.is_probe = True  # type: ignore[attr-defined]
    return Probe("copy", "bandwidth", work, fn)


def test_probes_run_before_between_and_after_the_rounds() -> None:
    backend = ProbedBackend(0, 0.001)
    backend._durations = alternating = lambda i: (0.02, 0.03)[i % 2]  # never precise: samples all 1 s
    policy = Policy(probe_interval_s=0.1, max_time_s=1.0)
    m = measure(noop, policy=policy, backend=backend, probe=probe(), cache=WARM)
    assert alternating(0) == 0.02
    sampling = backend.events[backend.events.index("probe") :]
    assert sampling[0] == "probe"
    assert sampling[-1] == "probe"
    # rounds are cut to one probe interval (~4 samples of 25 ms); a probe follows at most two rounds
    between = "".join("w" if e == "window" else "|" for e in sampling).split("|")
    assert max(len(run) for run in between) <= 8
    assert backend.probes >= 1 + (m.wall_s - m.warmup_s) / 0.2
    assert m.probe is not None
    assert len(m.probe.rates) == backend.probes >= 3
    assert m.probe.rates[0] == pytest.approx(1e6 / 0.001)
    # unflushed: an untimed call re-warms the cache after every probe but the last
    after = [sampling[i + 1] for i, e in enumerate(sampling[:-1]) if e == "probe"]
    assert after == ["window"] * (backend.probes - 1)
    assert m.probe.wall_s > 0.001 * backend.probes  # the probes and their re-warming calls


def test_with_setup_the_call_that_rewarms_after_a_probe_has_its_setup_too() -> None:
    backend = ProbedBackend(0.02, 0.001)
    m = measure(
        noop, setup=lambda: backend.events.append("setup"), policy=Policy(max_time_s=0.5), cache=WARM,
        backend=backend, probe=probe(),
    )  # fmt: skip
    assert m.probe is not None
    assert backend.probes >= 3
    sampling = backend.events[backend.events.index("probe") :]
    # every kernel window, the untimed one after each probe included, right after its setup
    assert all(sampling[i - 1] == "setup" for i, e in enumerate(sampling) if e == "window")
    assert sampling.count("setup") == sampling.count("window")
    assert [sampling[i + 1] for i, e in enumerate(sampling[:-1]) if e == "probe"] == ["setup"] * (
        backend.probes - 1
    )


def test_no_call_rewarms_the_cache_after_a_probe_no_round_follows() -> None:
    # a warm 0.4 s kernel under 1 s: its warm-up call and its one sample; the probes beside it are
    # followed by no rewarming call, which would cost a sample's time for nothing
    backend = ProbedBackend(0.4, 0.001)
    m = measure(noop, policy=Policy(max_time_s=1.0), cache=WARM, backend=backend, probe=probe())
    assert (m.warmup_calls, m.stats.n) == (1, 1)
    assert backend.calls == 2
    assert backend.probes == 2  # beside the sample, and the last
    assert m.wall_s == pytest.approx(0.802)


def test_probe_time_is_paid_from_the_budget() -> None:
    backend = ProbedBackend(0.02, 0.01)
    m = measure(noop, policy=Policy(max_time_s=0.5), cache=WARM, backend=backend, probe=probe())
    # the last probe and one round may overrun; nothing else does
    assert m.wall_s <= 0.5 + 0.1 + 0.01 + 1e-9


def test_the_probe_statistic_follows_the_kernels() -> None:
    rates = [0.001, 0.002, 0.004]
    backend = ProbedBackend(1e-3, lambda i: rates[i % 3])
    m = measure(noop, policy=Policy(stat="min"), cache=WARM, backend=backend, probe=probe(1.0))
    assert m.probe is not None
    assert m.probe.value("min") == pytest.approx(1000.0)  # the best rate goes with the best time
    assert m.probe.value("median") == m.probe.stats.median


def test_no_probe_no_probe_run() -> None:
    assert measure(noop, backend=FakeBackend(1e-3)).probe is None


def test_a_probe_must_be_a_probe() -> None:
    with pytest.raises(TypeError, match="probe must be a Probe"):
        measure(noop, backend=FakeBackend(1e-3), probe="copy")  # type: ignore[arg-type]


# -- preemption and contention -------------------------------------------------------------------


class PreemptingBackend(FakeBackend):
    """Marks every ``every``-th window preempted, and makes it 10x slower."""

    def __init__(self, durations: float, every: int) -> None:
        super().__init__(durations)
        self.every = every
        self.windows = 0
        self.last_preempted: list[bool] = []

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        windows = super().run(fn, args, calls=calls, samples=samples, flush=flush)
        flags = []
        for i in range(len(windows)):
            self.windows += 1
            hit = self.windows % self.every == 0
            flags.append(hit)
            if hit:
                windows[i] *= 10
        self.last_preempted = flags
        return windows


def test_preempted_samples_are_left_out_while_enough_remain() -> None:
    backend = PreemptingBackend(1e-3, every=4)
    m = measure(noop, policy=Policy(warmup_s=0.0), cache=WARM, backend=backend)
    assert m.excluded > 0
    assert m.stats.n == len(m.samples_s) - m.excluded
    assert m.stats.max == pytest.approx(1e-3)  # the 10x windows are not in the statistics
    assert max(m.samples_s) == pytest.approx(1e-2)  # but they are kept as taken


def test_when_most_samples_are_preempted_all_are_kept() -> None:
    backend = PreemptingBackend(1e-3, every=1)
    m = measure(noop, policy=Policy(warmup_s=0.0, max_time_s=0.1), cache=WARM, backend=backend)
    assert m.excluded == 0
    assert m.stats.n == len(m.samples_s)


def snapshots(*values: Snapshot) -> Callable[[], Snapshot]:
    it = iter(values)
    return lambda: next(it)


def test_contention_is_read_around_the_sampling_phase() -> None:
    clock = FakeClock()
    backend = PreemptingBackend(1e-3, every=2)
    backend.fake_clock = clock
    before = Snapshot(wall_s=0.0, cpu_s=0.0, steal_jiffies=100, total_jiffies=1000, load_avg=0.5)
    after = Snapshot(wall_s=1.0, cpu_s=1.0, steal_jiffies=301, total_jiffies=2000, load_avg=5.0)
    m = measure(noop, policy=Policy(), cache=WARM, backend=backend, snapshot=snapshots(before, after))
    c = m.contention
    assert c is not None
    assert c.samples == len(m.samples_s)
    assert 0 < c.preempted < c.samples
    assert c.steal_fraction == pytest.approx(0.2)
    assert c.load_avg == 5.0
    assert c.level == "heavy"


def test_no_reader_no_contention() -> None:
    assert measure(noop, backend=FakeBackend(1e-3)).contention is None


def test_an_op_past_the_cache_is_not_rewarmed_after_a_probe() -> None:
    calls = {}
    for rewarm, cache in ((True, WARM), (False, CachePlan("past-cache"))):
        backend = ProbedBackend(0, 0.001)
        backend._durations = lambda i: (0.02, 0.03)[i % 2]  # never precise: stops at max_samples
        policy = Policy(min_samples=10, max_samples=20, max_time_s=100.0)
        m = measure(noop, policy=policy, backend=backend, probe=probe(), cache=cache)
        calls[rewarm] = (backend.calls, backend.probes, m.warmup_calls)
    plain, _, warmup = calls[False]
    assert plain == warmup + 20  # warm-up and the samples, nothing else
    assert calls[True][0] == plain + calls[True][1] - 1  # one untimed call after every probe but the last


def test_a_probe_warms_up_before_its_first_timed_call() -> None:
    backend = ProbedBackend(1e-3, lambda i: 0.01 if i == 0 else 0.001)  # a cold first call
    warm = Probe("matmul", "fp32", 1e6, probe().fn, warmup_calls=1)
    m = measure(noop, policy=Policy(), cache=WARM, backend=backend, probe=warm)
    assert m.probe is not None
    assert backend.probes == len(m.probe.rates) + 1
    assert min(m.probe.rates) == pytest.approx(1e6 / 0.001)  # the cold call was not timed
