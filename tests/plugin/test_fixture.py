"""The ``roofline`` fixture through pytest: the frozen result and its fields, the kernel's arguments,
the dtype read from them, several calls told apart, ``measure`` and ``estimate``, a kernel that raises,
two threads measuring through it at once.

Every run goes through pytester with the fake device and the scripted timer of ``conftest.py``:
floors of 2 ms for the standard shapes, 2.5 ms a call (80%) unless a test says otherwise.
"""

from __future__ import annotations

import pytest
from conftest import COPY, FLOOR_S, GEMM, NO_MEASUREMENT_WARNS, fake_conftest, results

# -- the fixture --------------------------------------------------------------------------------


def test_fixture_returns_a_frozen_result_with_every_documented_field(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import dataclasses
        import pytest

        def test_copy(roofline):
            r = roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
            assert r.attained == pytest.approx(0.8)
            assert r.floor_s == pytest.approx({FLOOR_S})
            assert r.time_s == pytest.approx(2.5e-3)
            assert r.bound == "memory"
            assert r.intensity == 0
            assert (r.flops, r.bytes) == (0, 2e8)
            assert r.min_fraction == 0.5
            assert r.passed is True
            assert r.stats.n >= 10 and r.stats.median == pytest.approx(2.5e-3)
            assert r.estimate.op == "copy" and r.estimate.device.key == "fake"
            assert len(r.measurement.samples_s) == r.stats.n
            with pytest.raises(dataclasses.FrozenInstanceError):
                r.attained = 1.0
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_fixture_calls_the_kernel_with_its_arguments(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        seen = []

        def kernel(a, b):
            seen.append((a, b))

        def test_args(roofline):
            roofline(kernel, 1, 2, op="gemm", {GEMM}, dtype="fp32")
            assert len(seen) > 10 and set(seen) == {{(1, 2)}}
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_dtype_is_read_from_an_array_argument(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        class Array:
            dtype = "float64"

        def test_dtype(roofline):
            r = roofline.measure(lambda x: None, Array(), op="copy", {COPY})
            assert str(r.estimate.precision) == "fp64"
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_several_calls_in_one_test_are_told_apart_by_name(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        def test_two(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", name="copy")
            roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32", name="gemm")
        """
    )
    reprec = rl.inline_run("--roofline-report")
    reprec.assertoutcome(passed=1)
    assert [r.name for r in results(reprec)] == ["copy", "gemm"]
    (report,) = [r for r in reprec.getreports("pytest_runtest_logreport") if r.when == "call"]
    names = [name for name, _ in report.user_properties]
    assert "roofline[copy]_attained" in names
    assert "roofline[gemm]_attained" in names


def test_measure_never_fails_the_test(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(20e-3)
        def test_slow(roofline):
            r = roofline.measure(lambda: None, op="gemm", {GEMM}, dtype="fp32")
            assert r.verdict == "MISS" and not r.passed

        @pytest.mark.fake_time(1e-3)
        def test_too_fast(roofline):
            r = roofline.measure(lambda: None, op="gemm", {GEMM}, dtype="fp32")
            assert r.verdict == "faster-than-light"
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=2)
    assert [r.remeasured for r in results(reprec)] == [False, False]  # measure measures once


def test_estimate_computes_a_floor_without_running_anything(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest
        from conftest import BACKEND

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_estimate(roofline):
            e = roofline.estimate()
            assert e.floor_s == pytest.approx({FLOOR_S}) and e.bound == "compute"
            assert roofline.estimate("copy", {COPY}, dtype="fp64").floor_s == pytest.approx(4e-3)
            assert roofline.estimate(K=2000).floor_s == pytest.approx(4e-3)  # marker values are defaults
            assert BACKEND.calls == 0

        def test_device(roofline):
            assert roofline.device.key == "fake"
            assert roofline.device.name == "Fake Accelerator"
        """
    )
    # a marked test that only estimates measures nothing, and is told so (test_kernel_calls.py)
    rl.runpytest(*NO_MEASUREMENT_WARNS).assert_outcomes(passed=2, warnings=1)


# -- two threads at once ---------------------------------------------------------------------------


def test_a_kernel_that_raises_fails_its_own_test_with_its_own_traceback(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        def broken_kernel():
            raise ZeroDivisionError("the kernel's own error")

        def test_broken(roofline):
            roofline(broken_kernel, op="copy", {COPY}, dtype="fp32")

        def test_fine(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
        """
    )
    result = rl.runpytest("--roofline-report")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*def broken_kernel():*",
            '*raise ZeroDivisionError("the kernel\'s own error")*',
            "E*ZeroDivisionError: the kernel's own error",
            "*roofline report*",
            "*test_fine*copy n=25000000*pass*",
            "1 measurement(s): 1 pass; mode enforce",
        ]
    )
    # the plugin's own frames stay out of the way (pytest shows them with --full-trace)
    for internal in ("verdict.py", "engine.py", "plugin.py", "session.py", "marker.py"):
        result.stdout.no_fnmatch_line(f"*pytest_roofline*{internal}*")


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


# -- the path from the fixture to the timer --------------------------------------------------------

COUNTED = """

import inspect

from pytest_roofline.timing.base import empty_call

DEPTHS = []


def depth(what):
    # frames from Roofline.__call__ down to this backend call, both counted
    stack = inspect.stack()[1:]
    for i, frame in enumerate(stack):
        if frame.function == "__call__" and frame.filename.endswith("plugin/fixture.py"):
            DEPTHS.append((what, i + 1, [f.function for f in stack[: i + 1]]))
            return


class Counted(type(BACKEND)):
    def run(self, fn, args, *, calls, samples, flush):
        if fn is not empty_call:
            depth("run")
        return super().run(fn, args, calls=calls, samples=samples, flush=flush)

    def flush_cache(self):
        depth("flush_cache")
        super().flush_cache()


BACKEND.__class__ = Counted


def pytest_sessionfinish(session):
    import json

    with open("depths.json", "w") as out:
        json.dump(DEPTHS, out)
"""


def test_the_fixture_reaches_the_timer_through_at_most_eight_frames(pytester: pytest.Pytester) -> None:
    """Fixture, measurer, pipeline, the measurement's call, engine, sampler or warm-up, the kernel's
    call, the backend: a kernel's failure or a profile reads a short stack (issue 44, item 5). Warm,
    cold by a flush before every call, cold by rotation (where a flush stands in for the untimed
    cycle), and a miss measured twice."""
    import json

    pytester.makeconftest(fake_conftest(extra=COUNTED))
    pytester.makepyfile(
        f"""
        import numpy as np
        import pytest

        def test_warm(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", cache="warm")

        def test_flushed(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", cache="cold")

        @pytest.mark.fake_time(50e-6)  # the untimed cycle would take 0.15 s: a flush instead
        def test_rotated(roofline):
            x, y = np.ones(4096), np.empty(4096)
            roofline(np.copyto, y, x, op="copy", n=4096, dtype="fp64", cache="cold", min_fraction=0.01)

        @pytest.mark.fake_time(9e-3, 9e-3)
        def test_missed_twice(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
        """
    )
    pytester.runpytest("--roofline-mode=enforce", "--roofline-json=r.json").assert_outcomes(
        passed=3, failed=1
    )
    measured = {
        r["nodeid"].split("::")[-1]: r
        for r in json.loads((pytester.path / "r.json").read_text())["measurements"]
    }
    assert measured["test_missed_twice"]["measurements"] == 2
    depths = json.loads((pytester.path / "depths.json").read_text())
    assert {what for what, _, _ in depths} == {"run", "flush_cache"}  # every path was taken
    deepest = max(depths, key=lambda d: d[1])
    assert deepest[1] <= 8, " <- ".join(deepest[2])
