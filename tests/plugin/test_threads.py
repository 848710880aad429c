"""Measurements on several threads at once take turns, through ``measure`` and through the fixture,
and a rotation planned on one thread leaves another's copies alone.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from conftest import COPY, fake_conftest
from fakes import FakeBackend, Overlap, in_threads


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


def test_two_threads_measuring_through_the_fixture_take_turns(rl: pytest.Pytester) -> None:
    rl.makeconftest(
        fake_conftest(
            extra="""
from fakes import Overlap

OVERLAP = Overlap()

class Watched(ScriptedBackend):
    def run(self, *args, **kwargs):
        with OVERLAP:
            return super().run(*args, **kwargs)

BACKEND = Watched((DEFAULT_TIME_S,), resolution_s=1e-9, device_name="fake accelerator")
"""
        )
    )
    rl.makepyfile(
        f"""
from conftest import OVERLAP
from fakes import in_threads

def test_two_at_once(roofline):
    copy = lambda i: lambda: roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", name=str(i))
    first, second = in_threads(copy(1), copy(2))
    assert first.time_s == second.time_s == 2.5e-3
    assert OVERLAP.most == 1
"""
    )
    result = rl.runpytest("--roofline-report")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*measurements on two threads at once waited for each other*"])


def test_a_rotation_planned_on_another_thread_leaves_this_ones_copies_alone() -> None:
    import numpy as np

    from pytest_roofline.timing.rotation import Rotation, plan_rotation, release_host_pool

    def plan(array: np.ndarray[Any, Any], seen: list[float]) -> Rotation:
        kernel = functools.partial(lambda a: seen.append(float(a.sum())))
        rotation = plan_rotation(kernel, (array,), None, op_bytes=array.nbytes, llc_bytes=2**20)
        assert isinstance(rotation, Rotation)
        return rotation

    ones, zeros = np.ones(2**15), np.zeros(2**15)
    seen: list[float] = []
    mine = plan(ones, seen)
    in_threads(lambda: plan(zeros, []))  # while mine is still in use
    for _ in range(mine.copies):
        mine.kernel()
    assert seen == [ones.sum()] * mine.copies  # no copy of mine became one of the other thread's
    release_host_pool()
