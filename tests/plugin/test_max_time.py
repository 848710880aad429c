"""--roofline-max-time bounds the whole measurement, on a fake clock (issue 28 item 3): rotation's
copies, the untimed cycle, flushes and a re-measure all count, and the latency floor, measured once
a process, is bounded apart; a kernel too long for its budget gets fewer calls and its record says
why; and the budget is used, the sample count growing with it, without a cliff."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fakes import FakeBackend
from test_pipeline import TableDevices

from pytest_roofline.model.core import Figure, Source
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.measurement import StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.verdict import Result, Verdict, failure_message
from pytest_roofline.output.records import MeasurementRecord
from pytest_roofline.plugin.gate import Gate
from pytest_roofline.plugin.options import SessionSettings
from pytest_roofline.plugin.pipeline import measure_call
from pytest_roofline.plugin.request import Request
from pytest_roofline.plugin.run_state import RunState
from pytest_roofline.timing import budget as budget_module
from pytest_roofline.timing import cpu_latency as latency_module
from pytest_roofline.timing.budget import OVERRUN_SHARE, samples_within, saw_flush, seen_flush_s
from pytest_roofline.timing.cache import FLUSHED, CachePlan
from pytest_roofline.timing.calls import KernelCall
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.rotation import Rotation, _Rotating

#: the issue's closure: ``roofline(lambda: time.sleep(0.4), op="copy", n=1 << 20, dtype="float64")``
CLOSURE_S = 0.4
FLUSH_S = 0.01
#: what the latency floor costs the measurement that makes it: flushed, one flush per sample; else
#: a few batched samples of an empty call
FLOOR_COST_S = {True: 0.1, False: 0.005}


class Devices(TableDevices):
    """The run's devices as the pipeline asks for them: the H100's figures (``bandwidth``: another
    DRAM bandwidth), one fake backend."""

    def __init__(self, backend: FakeBackend, bandwidth: float | None = None) -> None:
        super().__init__(backend)
        self._bandwidth = bandwidth

    def device(self, spec: str) -> Any:
        device = lookup(spec)
        if self._bandwidth is None:
            return device
        return dataclasses.replace(device, bandwidth=Figure(self._bandwidth, Source.DATASHEET))


class FlooredBackend(FakeBackend):
    """A fake backend whose latency floor is measured, as the CPU's is, once a mode, at a cost paid
    inside the first measurement that asks for it; and whose first flush makes its buffer too."""

    def __init__(self, durations: Any, *, first_flush_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__(durations, **kwargs)
        self.floors: dict[bool, float] = {}
        self.first_flush_s = first_flush_s

    def latency_floor_s(self, *, flushed: bool = False) -> float:
        if flushed not in self.floors:
            self.fake_clock.advance(FLOOR_COST_S[flushed])
            self.floors[flushed] = 30e-6
        return self.floors[flushed]

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        if flush and self.first_flush_s:
            self.fake_clock.advance(self.first_flush_s)
            self.first_flush_s = 0.0
        return super().run(fn, args, calls=calls, samples=samples, flush=flush)


def state(**overrides: Any) -> RunState:
    fields: dict[str, Any] = {
        "report": False, "json": None, "device": "h100-sxm", "min_fraction": 0.5, "mode": "enforce",
        "stat": "median", "max_time": 1.0, "cache": "cold", "peaks": "table", "latency_floor": "on",
    }  # fmt: skip
    settings = SessionSettings(**(fields | overrides))
    return RunState(settings, Gate(settings, reporting=False))


def request(max_time_s: float, **overrides: Any) -> Request:
    fields: dict[str, Any] = {
        "op": "copy", "params": {"n": 1 << 20}, "dtype": "fp64", "math": None, "min_fraction": 0.5,
        "device_spec": "h100-sxm", "policy": Policy(max_time_s=max_time_s), "name": "",
    }  # fmt: skip
    return Request(**(fields | overrides))


def measured(
    backend: FakeBackend, max_time_s: float, *, enforce: bool, bandwidth: float | None = None, **how: Any
) -> Result:
    """``measure_call`` of a kernel whose calls the fake backend times, as the plugin makes it."""
    kernel = how.pop("kernel", KernelCall(lambda: None))  # a closure: nothing to rotate, so flushed
    return measure_call(
        request(max_time_s, **how), kernel, devices=Devices(backend, bandwidth), state=state(), nodeid="t",
        remeasure=enforce,
    )  # fmt: skip


# - the 0.4 s closure under a 1 s budget -


@pytest.mark.parametrize(("enforce", "most_s", "most_calls"), [(True, 2.4, 6), (False, 1.2, 3)])
def test_a_04s_closure_under_a_1s_budget_costs_what_the_budget_promised(
    enforce: bool, most_s: float, most_calls: int
) -> None:
    backend = FlooredBackend(CLOSURE_S, flush_s=FLUSH_S)
    r = measured(backend, 1.0, enforce=enforce)
    assert r.verdict is Verdict.MISS  # 16 MiB copied in 0.4 s: far from an H100's roof
    assert r.measurement.cold_method == "flush"
    assert r.measurements == (2 if enforce else 1)  # a miss is measured again in enforce mode only
    # every second of the test is in wall_s but the latency floor's, measured once a process
    assert r.wall_s == pytest.approx(backend.clock() - FLOOR_COST_S[True])
    assert r.wall_s <= most_s
    assert backend.calls <= most_calls
    # one warm-up call and one sample each: two warm-up calls and three samples would take 2 s
    assert (r.measurement.warmup_calls, r.measurement.stats.n) == (1, 1)
    assert backend.calls == 2 * r.measurements


def test_the_closures_record_says_why_it_got_so_few_calls() -> None:
    r = measured(FlooredBackend(CLOSURE_S, flush_s=FLUSH_S), 1.0, enforce=False)
    m = r.measurement
    assert m.stop_reason is StopReason.TIME
    assert m.low_confidence
    note = "the 1000 ms time budget held 1 warm-up call and 1 sample of 410.0 ms (10 wanted)"
    assert m.budget_note.startswith(note)
    assert f"low confidence: {note}" in failure_message(r)
    record = MeasurementRecord.from_result(r, nodeid="t", mode="report")
    assert record.budget_note == m.budget_note
    assert record.low_confidence


def test_a_closure_the_budget_affords_gets_its_floor_of_samples() -> None:
    # the same closure under 3 s: two warm-up calls and three samples fit, with room for more
    r = measured(FlooredBackend(CLOSURE_S, flush_s=FLUSH_S), 3.0, enforce=False)
    assert (r.measurement.warmup_calls, r.measurement.stats.n) == (2, 5)
    assert r.measurement.budget_note.startswith("the 3000 ms time budget held 2 warm-up calls and 5 samples")
    assert r.wall_s <= 3.0


# - everything counts: copies, the untimed cycle, flushes, a re-measure -


def rotated(
    monkeypatch: pytest.MonkeyPatch, backend: FakeBackend, *, copies: int, made_s: float
) -> KernelCall:
    """A kernel whose arguments rotation copies into ``copies`` sets, the copies taking ``made_s``
    of the backend's clock."""

    def plan_rotation(*args: object, **kwargs: object) -> Rotation:
        backend.fake_clock.advance(made_s)
        calls = [lambda: None] * copies
        return Rotation(kernel=_Rotating(calls, []), copies=copies, set_bytes=384 * 2**10, made_s=made_s)

    monkeypatch.setattr("pytest_roofline.timing.cache.plan_rotation", plan_rotation)
    return KernelCall(lambda x: None, (object(),))


@pytest.mark.parametrize("enforce", [True, False])
def test_copies_and_a_re_measure_are_inside_the_budget_the_latency_floor_apart(
    monkeypatch: pytest.MonkeyPatch, enforce: bool
) -> None:
    backend = FlooredBackend(lambda i: (1e-3, 1.3e-3)[i % 2], flush_s=FLUSH_S)  # never precise
    kernel = rotated(monkeypatch, backend, copies=64, made_s=0.2)
    r = measured(backend, 1.0, enforce=enforce, kernel=kernel, params={"n": 1 << 16}, min_fraction=1.0)
    assert r.measurement.cold_method == "rotation"
    assert r.measurements == (2 if enforce else 1)
    # the copies included, the latency floor (measured once a process, bounded apart) not
    assert r.wall_s == pytest.approx(backend.clock() - FLOOR_COST_S[False])
    # the first measurement paid the copies (0.2 s) from its budget; a re-measure has one of its
    # own, the same: at most the budget, twice in enforce mode
    budgets = (1.0, 1.0) if enforce else (1.0,)
    assert r.wall_s <= sum(budgets) + 2e-3
    assert r.wall_s >= 0.9 * sum(budgets)  # and used: each stopped for time


class BufferedBackend(FlooredBackend):
    """A fake backend that makes its flush buffer on first use, as the CPU's does (0.3 s, once)."""

    def __init__(self, durations: Any, **kwargs: Any) -> None:
        super().__init__(durations, **kwargs)
        self.made = 0

    def prepare_flush(self) -> None:
        if not self.made:
            self.events.append("made")
            self.fake_clock.advance(0.3)
        self.made += 1


def test_the_flush_buffer_is_made_before_the_measurement_and_is_no_measurements_cost() -> None:
    backend = BufferedBackend(CLOSURE_S, flush_s=FLUSH_S)
    r = measured(backend, 1.0, enforce=False)
    assert backend.events[0] == "made"  # before the first call
    assert r.wall_s == pytest.approx(backend.clock() - 0.3 - FLOOR_COST_S[True])
    assert r.wall_s <= 1.2
    measured(backend, 1.0, enforce=False)
    assert backend.events.count("made") == 1  # once a process


def test_a_re_measure_of_a_slow_kernel_is_as_careful_as_the_first_measurement() -> None:
    backend = FlooredBackend(CLOSURE_S, flush_s=FLUSH_S)
    r = measured(backend, 3.0, enforce=True)
    assert r.measurements == 2
    # the second has 3 s of its own: seven calls each (two warm-up calls, five samples)
    assert backend.calls == 7 + 7
    assert r.wall_s <= 2 * 3.0 * (1 + OVERRUN_SHARE)


# - the budget is used, and grows the sample count smoothly -


BUDGETS = (0.15, 0.2, 0.21, 0.25, 0.3)


#: the red team's VM: sysfs said 480 MiB of L3, so a flush read twice that, at 13 GB/s
VM_BANDWIDTH = 13e9
VM_FLUSH_BYTES = 2 * 480 * 2**20


def cold_30us(monkeypatch: pytest.MonkeyPatch, max_time_s: float) -> Result:
    """The red team's 30 µs cold kernel: rotated over 1365 sets (an untimed cycle of 41 to 61 ms, past
    the 25 ms warm-up), its copies taking 20 ms; a flush of twice the cache sysfs claimed costs 75 ms,
    and the first 140 ms (it makes its buffer)."""
    backend = FlooredBackend(
        lambda i: (30e-6, 45e-6)[i % 2],
        flush_s=0.075,
        first_flush_s=0.065,
        resolution_s=1e-7,
        flush_bytes=VM_FLUSH_BYTES,
    )
    kernel = rotated(monkeypatch, backend, copies=1365, made_s=0.02)
    return measured(
        backend, max_time_s, enforce=False, kernel=kernel, params={"n": 1 << 15}, bandwidth=VM_BANDWIDTH
    )


def test_the_sample_count_grows_with_the_budget_without_a_cliff(monkeypatch: pytest.MonkeyPatch) -> None:
    results = [cold_30us(monkeypatch, b) for b in BUDGETS]
    counts = [r.measurement.stats.n for r in results]
    assert all(r.measurement.stop_reason is StopReason.TIME for r in results), counts
    # never fewer samples for more budget, and never a jump beyond what the extra budget buys
    for i in range(len(BUDGETS) - 1):
        (b0, n0), (b1, n1) = (BUDGETS[i], counts[i]), (BUDGETS[i + 1], counts[i + 1])
        assert n0 <= n1, counts
        assert n1 / n0 <= 1.3 * b1 / b0, (b0, b1, counts)
    assert not any(r.measurement.low_confidence for r in results), counts


def test_a_measurement_that_stops_for_time_has_used_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    for b in BUDGETS:
        r = cold_30us(monkeypatch, b)
        assert r.measurement.stop_reason is StopReason.TIME
        assert 0.7 * b <= r.wall_s <= (1 + OVERRUN_SHARE) * b, (b, r.wall_s)


# - the rules behind it -


def test_the_untimed_cycle_is_run_when_the_warm_up_holds_it() -> None:
    # 500 sets of 40 µs: 20 ms, inside the 25 ms warm-up: no flush, whatever the budget
    for max_time_s in (0.1, 10.0):
        rotation = Rotation(kernel=_Rotating([lambda: None] * 500, []), copies=500, set_bytes=1)
        backend = FakeBackend(40e-6, flush_s=0.075, resolution_s=1e-7)
        m = measure(
            lambda: None, policy=Policy(max_time_s=max_time_s), backend=backend,
            cache=CachePlan("rotation", rotation=rotation),
        )  # fmt: skip
        assert "flush" not in backend.events
        assert m.warmup_calls >= 500
        assert "a flush instead" not in m.cache_note


@pytest.mark.parametrize(("flush_s", "flushed"), [(0.075, False), (0.01, True)])
def test_a_flush_whose_cost_is_known_stands_in_for_the_cycle_only_when_cheaper(
    flush_s: float, flushed: bool
) -> None:
    # the rest of a cycle of 1500 calls of 40 µs: 60 ms, past the 25 ms warm-up
    for max_time_s in (0.2, 2.0):  # chosen by what each costs, not by the budget
        rotation = Rotation(kernel=_Rotating([lambda: None] * 1500, []), copies=1500, set_bytes=1)
        backend = FakeBackend(40e-6, flush_s=flush_s, resolution_s=1e-7)
        measure(lambda: None, policy=Policy(max_time_s=0.1, warmup_s=0), backend=backend, cache=FLUSHED)
        assert seen_flush_s(backend) == pytest.approx(flush_s)
        m = measure(
            lambda: None, policy=Policy(max_time_s=max_time_s), backend=backend,
            cache=CachePlan("rotation", rotation=rotation),
        )  # fmt: skip
        assert ("a flush instead of the untimed first cycle" in m.cache_note) is flushed


def test_the_untimed_cycle_runs_once_per_rotation() -> None:
    # an A/B comparison's rounds measure with one rotation again and again: each copy the next
    # round takes was last called a cycle ago, so only the first measurement turns the cycle
    rotation = Rotation(kernel=_Rotating([lambda: None] * 500, []), copies=500, set_bytes=1)
    backend = FakeBackend(200e-6, flush_s=1.0, resolution_s=1e-7)  # 0.1 s a cycle: no flush for it
    plan = CachePlan("rotation", rotation=rotation)
    first = measure(lambda: None, policy=Policy(max_time_s=1.0), backend=backend, cache=plan)
    again = measure(lambda: None, policy=Policy(max_time_s=1.0), backend=backend, cache=plan)
    assert first.warmup_calls >= 500
    assert again.warmup_calls <= 200  # the warm-up's own 25 ms, and its settling
    assert "flush" not in backend.events


def test_a_rotated_kernel_whose_first_call_compiled_flushes_the_cycle_and_warms_up_as_usual() -> None:
    # a 1.5 s first call under 1 s: the next call (1 ms), on a copy out of the cache after a flush,
    # shows a one-off; the warm-up then goes on without the rest of the 57-set cycle
    rotation = Rotation(kernel=_Rotating([lambda: None] * 57, []), copies=57, set_bytes=1)
    backend = FakeBackend(lambda i: 1.5 if i == 0 else 1e-3, resolution_s=1e-7)
    m = measure(
        lambda: None, policy=Policy(max_time_s=1.0), backend=backend,
        cache=CachePlan("rotation", rotation=rotation),
    )  # fmt: skip
    assert m.warmup_calls == 2
    assert backend.events[:3] == ["window", "flush", "window"]  # the flush (an empty window) between
    assert m.cache_note.endswith("; a flush instead of the untimed first cycle (too long)")
    assert m.stats.n == 3  # the floor: 3 ms past a budget a one-off already overran
    assert m.time_s == pytest.approx(1e-3)


def test_the_floor_overruns_the_budget_by_a_fifth_at_most() -> None:
    # 0.4 s samples, 0.2 s left of a 1 s budget: none fits, and one more would end 0.2 s past it
    assert samples_within(1, 9, 0.2, 0.41, 1.0) == 0
    assert samples_within(1, 9, 0.2, 0.39, 1.0) == 1  # ends 0.19 s past: within a fifth
    assert samples_within(0, 9, -0.5, 0.4, 1.0) == 1  # whatever the budget, one sample
    assert samples_within(0, 9, -0.5, 1e-3, 1.0) == 3  # cheap: the floor, past a one-off's overrun
    assert samples_within(3, 9, 0.0, 1e-3, 1.0) == 0  # past the floor, nothing past the budget
    assert samples_within(0, 10, 0.05, 1e-3, 1.0) == 10


def test_a_flush_is_remembered_at_its_least() -> None:
    backend = FakeBackend(1e-3)
    assert seen_flush_s(backend) is None
    saw_flush(backend, 0.3)  # the first made its buffer
    saw_flush(backend, 0.01)
    saw_flush(backend, 0.02)
    assert seen_flush_s(backend) == 0.01
    saw_flush(object.__new__(type("Slotted", (), {"__slots__": ()})), 0.01)  # not weakly referenceable
    assert budget_module.seen_flush_s(3) is None


def test_the_cpu_latency_floor_takes_at_most_its_share_of_the_budget_that_pays_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(latency_module, "_CPU_FLOORS", {})
    backend = FakeBackend(1e-6, flush_s=0.01)
    floor = latency_module.cpu_latency_floor(flushed=True, backend=backend, max_time_s=0.05)  # type: ignore[arg-type]
    assert backend.clock() <= 0.05 * (1 + OVERRUN_SHARE)
    assert floor.floor_s == pytest.approx(1e-6)
    # measured once a process: a later test pays nothing for it
    before = backend.clock()
    assert latency_module.cpu_latency_floor(flushed=True, backend=backend) is floor  # type: ignore[arg-type]
    assert backend.clock() == before
