"""A long cycle of small host sets, made as the samples need it: each set called at most once between
flushes until the cycle is whole, a probe that streams more than a flush standing in for one, and
the samples' span counted without the time making sets took. A fake backend and clock; nothing here
is timed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fakes import FakeBackend

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing import rotation as rot
from pytest_roofline.timing.base import Probe
from pytest_roofline.timing.cache import CachePlan
from pytest_roofline.timing.engine import measure
from pytest_roofline.timing.rotation import Rotation, plan_rotation

MiB = 2**20
LLC = MiB  # a cycle of 6 MiB: 2,048 sets of three 128-element float64 arrays
FLUSH = "flush"


@pytest.fixture(autouse=True)
def small_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cycles of 1 MiB at least, grown from 256 sets: the rules are the same, the copies cheap."""
    monkeypatch.setattr(rot, "MIN_CYCLE_BYTES", MiB)
    monkeypatch.setattr(rot, "GROWN_FROM", 256)


class Log:
    """A kernel that logs the identity of its arguments at every call; the backend logs its flushes."""

    def __init__(self) -> None:
        self.seen: list[object] = []

    def __call__(self, *args: object) -> None:
        self.seen.append(tuple(id(a) for a in args))


class Flushing(FakeBackend):
    def __init__(self, log: Log, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log = log

    def flush_cache(self) -> None:
        self.log.seen.append(FLUSH)
        super().flush_cache()


def grown(log: Log) -> Rotation:
    arrays = [np.ones(128) for _ in range(3)]
    r = plan_rotation(log, arrays, None, op_bytes=3 * 1024, llc_bytes=LLC, free_bytes=lambda _: 10**12)
    assert isinstance(r, Rotation)
    assert r.copies == 2048
    assert r.kernel.grows
    assert r.kernel.made == 129  # the caller's set and the first sixteenth of the copies
    return r


def between_flushes(seen: list[object]) -> list[list[object]]:
    runs: list[list[object]] = [[]]
    for entry in seen:
        if entry == FLUSH:
            runs.append([])
        else:
            runs[-1].append(entry)
    return runs


def test_a_long_cycle_is_made_as_the_samples_need_it_each_set_called_once_between_flushes() -> None:
    log = Log()
    r = grown(log)
    # 5-6.5 µs calls (no span): noisy enough that the interval wants hundreds of samples, more than
    # the 129 sets made first, fewer than half the cycle
    backend = Flushing(log, lambda i: 5e-6 * (1 + 0.3 * ((i * 7919) % 13) / 13), resolution_s=1e-7)
    m = measure(log, policy=Policy(max_time_s=1.0), backend=backend, cache=CachePlan("rotation", rotation=r))

    runs = between_flushes(log.seen)
    assert len(runs) >= 3  # the warm-up, then at least two growths, each ending in a flush
    for run in runs[1:]:  # after the warm-up's calls, which may come round again on the first sets
        assert len(set(run)) == len(run), "a set was called twice between flushes"
    assert 129 < m.rotation_copies < r.copies
    assert 129 < len({call for call in log.seen if call != FLUSH}) <= m.rotation_copies
    assert m.stats.n > m.rotation_copies  # more samples than sets: each flush let them be used again
    assert "made as the calls needed them" in m.cache_note
    assert m.time_s == pytest.approx(np.median(m.samples_s[m.transient :]), rel=1e-9)


def test_a_cycle_needed_in_more_than_half_is_made_whole_and_then_turns_freely() -> None:
    log = Log()
    r = grown(log)
    backend = Flushing(log, 20e-6, resolution_s=1e-7)  # 60 ms of 20 µs calls: 3,000 samples
    m = measure(log, policy=Policy(max_time_s=1.0), backend=backend, cache=CachePlan("rotation", rotation=r))
    assert m.rotation_copies == r.copies == 2048
    assert not r.kernel.grows
    assert m.stats.n >= 3000
    assert m.cache_note.startswith("cold by rotation over 2048 argument sets (6 MiB a cycle,")


@pytest.mark.parametrize(("work", "flushes"), [(2 * MiB, 0), (MiB // 2, 1)])
def test_a_probe_that_streams_more_than_a_flush_stands_in_for_it(work: int, flushes: int) -> None:
    log = Log()
    r = grown(log)
    # 5 µs calls, alike: the first round of 10 meets the interval, on the sets already made
    backend = Flushing(log, 5e-6, resolution_s=1e-7, flush_bytes=MiB)
    probe = Probe("copy", "bandwidth", work, lambda: None)
    m = measure(
        log, policy=Policy(max_time_s=1.0), backend=backend, probe=probe,
        cache=CachePlan("rotation", rotation=r),
    )  # fmt: skip
    assert m.stats.n == 10
    assert log.seen.count(FLUSH) == flushes


def test_the_samples_span_leaves_out_the_time_making_their_sets_took() -> None:
    # 20 µs calls need 60 ms of samples; a flush costs 30 ms, and two growths come inside the span
    log = Log()
    r = grown(log)
    backend = Flushing(log, 20e-6, resolution_s=1e-7, flush_s=0.03)
    m = measure(log, policy=Policy(max_time_s=1.0), backend=backend, cache=CachePlan("rotation", rotation=r))
    assert log.seen.count(FLUSH) >= 2
    assert m.stats.n * 20e-6 >= Policy().min_time_s


def test_an_ab_comparison_s_long_cycle_is_made_whole() -> None:
    # its rounds measure with one rotation again and again: a whole cycle turns on without a flush
    arrays = [np.ones(128) for _ in range(3)]
    r = plan_rotation(
        Log(), arrays, None, op_bytes=3 * 1024, llc_bytes=LLC, free_bytes=lambda _: 10**12, own_set=False
    )
    assert isinstance(r, Rotation)
    assert not r.kernel.grows
    assert r.kernel.made == r.copies == 2048
