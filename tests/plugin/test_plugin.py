"""The marker and the fixture, alone and together; budgets, the re-measure, faster than light, modes.

Every run goes through pytester with the fake device and the scripted timer of ``conftest.py``:
floors of 2 ms for the standard shapes, 2.5 ms a call (80%) unless a test says otherwise.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import COPY, FLOOR_S, GEMM, NO_MEASUREMENT_WARNS
from fakes import seeded_capacities

from pytest_roofline.model.verdict import Result, Verdict


def results(reprec: pytest.HookRecorder) -> list[Result]:
    """Every Result the inner run handed to ``pytest_roofline_result``, in order."""
    return [call.result for call in reprec.getcalls("pytest_roofline_result")]


def one_result(reprec: pytest.HookRecorder) -> Result:
    (result,) = results(reprec)
    return result


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


# -- the marker ---------------------------------------------------------------------------------


def test_marker_alone_runs_the_body_once_normally_then_times_it(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest
        from conftest import BACKEND

        calls = []

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_body():
            calls.append(BACKEND.calls)

        def test_after():
            assert calls[0] == 0  # the first run is the normal one, before any timing
            assert len(calls) > 10  # then the body was the timed kernel
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=2)
    result = one_result(reprec)
    assert result.attained == pytest.approx(0.8)
    assert result.estimate.label == "gemm[M=1000 N=1000 K=1000 fp32]"


def test_marker_alone_a_failing_assertion_fails_the_test_untimed(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_wrong():
            assert 1 + 1 == 3
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(failed=1)
    assert results(reprec) == []


def test_marker_alone_fails_below_budget(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(10e-3)
        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", min_fraction=0.5)
        def test_slow():
            pass
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gemm[[]M=1000 N=1000 K=1000 fp32[]] attained 20.0% of speed of light*"])
    # the message alone, as with the fixture
    result.stdout.no_fnmatch_line("*All traceback entries are hidden*")


def test_op_may_be_positional_or_a_keyword(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
        def test_positional():
            pass

        @pytest.mark.speed_of_light(op="copy", {COPY}, dtype="fp32")
        def test_keyword():
            pass
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=2)
    assert [r.estimate.op for r in results(reprec)] == ["copy", "copy"]


def test_marker_and_fixture_together_the_call_overrides(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(5e-3)
        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", min_fraction=0.9)
        def test_both(roofline):
            r = roofline(lambda: None, K=2000, min_fraction=0.3)  # marker gives op, M, N, dtype
            assert r.estimate.params["K"] == 2000 and r.estimate.params["M"] == 1000
            assert r.min_fraction == 0.3
            assert r.floor_s == pytest.approx(4e-3)
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_marker_on_a_class_and_a_module_the_closest_wins(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        pytestmark = pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.1)

        def test_module(roofline):
            assert roofline(lambda: None).min_fraction == 0.1

        @pytest.mark.speed_of_light(min_fraction=0.2)
        class TestClass:
            def test_class(self, roofline):
                r = roofline(lambda: None)
                assert (r.estimate.op, r.min_fraction) == ("copy", 0.2)

            @pytest.mark.speed_of_light("gemm", {GEMM}, min_fraction=0.3)
            def test_function(self, roofline):
                r = roofline(lambda: None)
                assert (r.estimate.op, r.min_fraction, str(r.estimate.precision)) == ("gemm", 0.3, "fp32")

            def test_body_is_the_kernel(self):
                pass
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=4)
    assert len(results(reprec)) == 4


def test_a_marker_from_param_marks_or_added_by_a_hook_is_read(rl: pytest.Pytester) -> None:
    # Unmarked tests take a fast path; these markers are on the item only, or only from the hook on.
    rl.makeconftest(
        rl.path.joinpath("conftest.py").read_text()
        + f"""

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "test_added_at_collection":
            item.add_marker(pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.name == "test_added_at_setup":
        item.add_marker(pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32"))
"""
    )
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.parametrize(
            "x", [1, pytest.param(2, marks=pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32"))]
        )
        def test_param(x):
            pass

        def test_added_at_collection():
            pass

        def test_added_at_setup():
            pass

        def test_unmarked():
            pass
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=5)
    names = [r.nodeid.split("::")[-1] for r in results(reprec)]
    assert names == ["test_param[2]", "test_added_at_collection", "test_added_at_setup"]


def test_parametrize_feeds_the_marker_and_dtype(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("dtype", ["fp32", "fp64"])
        @pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (2000, 1000, 1000)])
        @pytest.mark.speed_of_light("gemm")
        def test_gemm(M, N, K, dtype):
            pass
        """
    )
    reprec = rl.inline_run("--roofline-mode=report")
    reprec.assertoutcome(passed=4)
    seen = {(r.estimate.params["M"], str(r.estimate.precision)) for r in results(reprec)}
    assert seen == {(1000, "fp32"), (2000, "fp32"), (1000, "fp64"), (2000, "fp64")}


def test_parametrize_feeds_the_fixture_below_marker_and_call(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.fake_time(7.5e-3)
        @pytest.mark.parametrize("M,N,K", [(3000, 3000, 3000)])
        @pytest.mark.speed_of_light("gemm", N=1000, dtype="fp32")
        def test_gemm(roofline, M, N, K):
            r = roofline(lambda: None, K=1000)
            params = r.estimate.params
            assert (params["M"], params["N"], params["K"]) == (3000, 1000, 1000)
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


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


# -- budgets: call > marker > --roofline-min-fraction > ini roofline_min_fraction > 0.5 ---------


BUDGET_TEST = f"""
import pytest

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32"{{marker}})
def test_budget(roofline):
    roofline(lambda: None{{call}})
"""


@pytest.mark.parametrize(
    ("marker", "call", "args", "ini", "expected"),
    [
        pytest.param("", "", [], "", 0.5, id="default"),
        pytest.param("", "", [], "0.6", 0.6, id="ini"),
        pytest.param("", "", ["--roofline-min-fraction=0.7"], "0.6", 0.7, id="option-over-ini"),
        pytest.param(", min_fraction=0.8", "", ["--roofline-min-fraction=0.7"], "0.6", 0.8,
                     id="marker-over-option"),
        pytest.param(", min_fraction=0.8", ", min_fraction=0.9", ["--roofline-min-fraction=0.7"], "0.6", 0.9,
                     id="call-over-marker"),
    ],
)  # fmt: skip
def test_budget_precedence(
    rl: pytest.Pytester, marker: str, call: str, args: list[str], ini: str, expected: float
) -> None:
    rl.makepyfile(BUDGET_TEST.format(marker=marker, call=call))
    if ini:
        rl.makeini(f"[pytest]\nroofline_min_fraction = {ini}\n")
    reprec = rl.inline_run("--roofline-mode=report", *args)
    assert one_result(reprec).min_fraction == expected


def test_budget_decides_the_verdict(rl: pytest.Pytester) -> None:
    rl.makepyfile(BUDGET_TEST.format(marker=", min_fraction=0.85", call=""))
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*attained 80.0% of speed of light (budget 85%)*needs 1.1× faster."])


# -- the re-measure ------------------------------------------------------------------------------


def test_a_miss_is_measured_again_and_judged_by_the_better(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(10e-3, 2.5e-3)
        def test_noisy(roofline):
            r = roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")
            assert r.remeasured and r.passed and r.time_s == pytest.approx(2.5e-3)
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_two_misses_fail_and_say_so(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(10e-3, 8e-3, 1e-3)
        def test_slow(roofline):
            roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "gemm[[]M=1000 N=1000 K=1000 fp32[]] attained 25.0% of speed of light (budget 50%) on Fake "
            "Accelerator: floor 2000 µs, compute-bound at 1.00 TFLOP/s fp32 vector; measured 8000 µs "
            "(median of 10, ±0.0%, best of 2 measurements, cold: cache flushed before every call), "
            "250.0 GFLOP/s achieved; needs 2.0× faster."
        ]
    )


def test_a_memory_bound_miss_reports_achieved_against_peak_bandwidth(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(10e-3)
        def test_slow(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*memory-bound at 100 GB/s; measured 10.0 ms (*), "
            "20.00 GB/s achieved of 100 GB/s peak bandwidth (20.0%); needs 2.5× faster."
        ]
    )


# -- faster than light ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "attained", "outcome"),
    [
        ("datasheet", 1.04, "passed"),
        ("datasheet", 1.08, "failed"),
        ("measured", 1.08, "passed"),
        ("measured", 1.12, "failed"),
    ],
)
def test_faster_than_light_limits(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str, attained: float, outcome: str
) -> None:
    monkeypatch.setenv("FAKE_ROOFLINE_SOURCE", source)
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time({FLOOR_S / attained!r})
        def test_fast(roofline):
            roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        limit = (
            "105.0% against datasheet peaks" if source == "datasheet" else "110.0% against measured ceilings"
        )
        result.stdout.fnmatch_lines(
            [
                f"*ran faster than light: attained {attained * 100:.1f}% of speed of light (limit {limit}, ±*"
                "*the op's byte or FLOP count*the device peaks, or data served from a cache*"
            ]
        )


def test_faster_than_light_is_not_remeasured(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(1e-3, 2.5e-3)
        def test_fast(roofline):
            roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(failed=1)
    result = one_result(reprec)
    assert result.verdict is Verdict.FASTER_THAN_LIGHT
    assert not result.remeasured


# -- modes -------------------------------------------------------------------------------------


VERDICTS = f"""
import pytest

@pytest.mark.fake_time(20e-3)
def test_miss(roofline):
    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")

@pytest.mark.fake_time(1e-3)
def test_ftl(roofline):
    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")

@pytest.mark.fake_time(20e-3)
@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
def test_marked_miss():
    pass
"""


def test_enforce_mode_fails_misses_and_faster_than_light(rl: pytest.Pytester) -> None:
    rl.makepyfile(VERDICTS)
    rl.runpytest("--roofline-mode=enforce").assert_outcomes(failed=3)


def test_report_mode_measures_and_reports_but_never_fails(rl: pytest.Pytester) -> None:
    rl.makepyfile(VERDICTS)
    result = rl.runpytest("--roofline-mode=report", "--roofline-report")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_marked_miss*copy n=25000000*MISS (report)",
            "*test_miss*gemm*MISS (report)",
            "*test_ftl*gemm*faster-than-light (report)",
            "3 measurement(s): 1 faster-than-light, 2 MISS; mode report",
        ]
    )


def test_off_mode_calls_each_kernel_once_untimed(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest
        from conftest import BACKEND

        calls = []

        def test_fixture(roofline):
            assert roofline(lambda: calls.append("fixture"), op="copy", {COPY}, dtype="fp32") is None
            assert roofline.measure(lambda: calls.append("measure"), op="copy", {COPY}, dtype="fp32") is None

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
        def test_marker():
            calls.append("marker")

        def test_after():
            assert calls == ["fixture", "measure", "marker"]
            assert BACKEND.calls == 0
        """
    )
    reprec = rl.inline_run("--roofline-mode=off")
    reprec.assertoutcome(passed=3)
    assert results(reprec) == []


def test_off_mode_still_checks_the_call(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        def test_typo(roofline):
            roofline(lambda: None, op="gemm", M=1, N=1, k=1, dtype="fp32")
        """
    )
    result = rl.runpytest("--roofline-mode=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gemm needs K; 'k' went to the kernel as a keyword: did you mean K?*"])


# -- skip ------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize("mode", ["enforce", "off"])
def test_a_marker_device_that_is_not_here_skips_with_the_reason(rl: pytest.Pytester, mode: str) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", device="cuda")
        def test_gpu():
            raise AssertionError("a skipped test must not run")

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", device="h100-sxm")
        def test_table_gpu(roofline):
            raise AssertionError("a skipped test must not run")
        """
    )
    result = rl.runpytest("-rs", f"--roofline-mode={mode}", "--roofline-report")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        [
            # the test's own location, not the plugin's
            "SKIPPED [[]1[]] test_a_marker_device_that_is_not_here_skips_with_the_reason.py:3: "
            "needs CUDA device 0 (device='cuda'); 0 visible here*",
            "SKIPPED [[]1[]] test_a_marker_device_that_is_not_here_skips_with_the_reason.py:7: "
            "needs 'h100-sxm' (device='h100-sxm'): a table device that is not on this machine*",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(["*test_gpu*gemm*skipped", "  *test_gpu skipped: needs CUDA device 0*"])


def test_a_marker_device_that_is_here_runs(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", device="cpu")
        def test_cpu(roofline):
            assert roofline(lambda: None).estimate.device.key == "fake"
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


# -- the other settings reach the engine ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "marker", "expected"),
    [
        ([], "", {"stat": "median", "max_time_s": 1.0, "flush": True}),
        (["--roofline-stat=min", "--roofline-max-time=0.25", "--roofline-no-flush"], "",
         {"stat": "min", "max_time_s": 0.25, "flush": False}),
        (["--roofline-stat=min", "--roofline-max-time=0.25", "--roofline-no-flush"],
         ", stat='mean', max_time=2, flush=True", {"stat": "mean", "max_time_s": 2.0, "flush": True}),
        # an op whose bytes are past 2x the last-level cache is not flushed, and says why
        (["--roofline-max-time=0.25"], ", n=25_000_000",
         {"stat": "median", "max_time_s": 0.25, "flush": False}),
    ],
)  # fmt: skip
def test_stat_max_time_and_flush_reach_the_engine(
    rl: pytest.Pytester, args: list[str], marker: str, expected: dict[str, Any]
) -> None:
    shape = "" if "n=" in marker else "n=1000, "  # a small op is flushed when asked to
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("copy", {shape}dtype="fp32"{marker})
        def test_policy(roofline):
            roofline(lambda: None)
        """
    )
    reprec = rl.inline_run(*args, "--roofline-mode=report")
    reprec.assertoutcome(passed=1)
    m = one_result(reprec).measurement
    assert m.flushed or m.cache_note.startswith(
        ("warm: warm on request (--roofline-no-flush)", "cold: no flush needed: the op moves 6.0x")
    )
    # the cache plan's method, carried as such
    assert m.cold_method == ("flush" if expected["flush"] else "past-cache" if "n=" in marker else None)
    assert m.cache == ("cold" if expected["flush"] or "n=" in marker else "warm")
    assert (m.stat, m.policy.max_time_s, m.flushed) == (
        expected["stat"],
        expected["max_time_s"],
        expected["flush"],
    )


def test_a_warm_cache_measurement_says_so(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(10e-3)
        def test_warm(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
        """
    )
    result = rl.runpytest("--roofline-no-flush", "--roofline-report")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*measured 10.0 ms (median of 10, ±0.0%, best of 2 measurements, warm in DRAM, judged at *"]
    )
    result.stdout.fnmatch_lines(["*test_warm*10.0 ms ± 0.0% warm*MISS"])


def test_math_tf32_picks_the_tensor_peak(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", math="tf32")
        def test_tf32(roofline):
            r = roofline(lambda: None, min_fraction=0.1)
            assert str(r.estimate.peak_precision) == "tf32"
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


# -- the built-in device and timer, end to end on this CPU -------------------------------------------


def test_the_builtin_cpu_device_and_host_timer_end_to_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No fake hooks: the measured CPU (from a seeded cache, so nothing calibrates for seconds) and
    the real host timer. Generous budgets: nothing here asserts on how fast this machine is."""
    from pytest_roofline.machine.calibrate import calibrate_cpu
    from pytest_roofline.machine.calibration_cache import Ceilings
    from pytest_roofline.model.core import Figure, Precision, Source, Unit

    cache = pytester.path / "cache"
    fake = Ceilings(
        bandwidth=Figure(1e12, Source.MEASURED),  # 1 TB/s: every floor is tiny, every budget met
        peaks={(p, Unit.VECTOR): Figure(1e15, Source.MEASURED) for p in (Precision.FP64, Precision.FP32)},
        details=seeded_capacities(),
    )
    calibrate_cpu(cache_dir=cache / "pytest-roofline", measure=lambda: fake, peak=None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    pytester.makepyfile(
        """
        import numpy as np
        import pytest

        N = 1 << 16

        @pytest.mark.speed_of_light("copy", n=N, dtype="fp64", min_fraction=1e-6, max_time=0.05)
        def test_marker_times_the_body():
            a, b = np.ones(N), np.empty(N)
            np.copyto(b, a)
            assert b[0] == 1

        def test_fixture(roofline):
            a, b = np.ones(N), np.empty(N)
            r = roofline(np.copyto, b, a, op="copy", n=N, min_fraction=1e-6, max_time=0.05, flush=False)
            assert r.measurement.backend == "cpu" and r.estimate.device.key == "cpu"
            assert r.time_s > 0 and r.stats.n >= 3 and not r.measurement.flushed
        """
    )
    result = pytester.runpytest_subprocess("--roofline-report", "--roofline-device=cpu")
    # (a subprocess, so the seeded cache directory is the one calibration reads)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["device: * [[]cpu*]  DRAM bandwidth 1.00 TB/s (measured)", "*2 pass; mode enforce"]
    )


@pytest.mark.parametrize(("ceilings", "outcome"), [("paired", "passed"), ("cached", "failed")])
def test_a_calibration_taken_under_load_is_scaled_by_the_probe_beside_the_kernel(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ceilings: str, outcome: str
) -> None:
    """A calibration taken at a busy moment is absurdly low (1 kB/s here), and so was its probe:
    their ratio still holds. With paired ceilings the probe timed beside the kernel scales the
    figure back to what the machine does now; the cached figure alone calls the copy faster
    than light."""
    from pytest_roofline.machine.calibrate import calibrate_cpu
    from pytest_roofline.machine.calibration_cache import Ceilings
    from pytest_roofline.model.core import Figure, Precision, Source, Unit
    from pytest_roofline.model.paired_ceilings import ProbeReference

    low = Figure(1e3, Source.MEASURED)
    probes = {
        "bandwidth": ProbeReference("bandwidth", "copy", 2**20, 1e3, 1e3, 1e3, "2026-01-01"),
        **{p: ProbeReference(p, "matmul", 64, 1e3, 1e3, 1e3, "2026-01-01") for p in ("fp64", "fp32")},
    }
    loaded = Ceilings(
        bandwidth=low,
        peaks={(p, Unit.VECTOR): low for p in (Precision.FP64, Precision.FP32)},
        probes=probes,
        details=seeded_capacities(),
    )
    cache = pytester.path / "cache"
    calibrate_cpu(cache_dir=cache / "pytest-roofline", measure=lambda: loaded, peak=None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    pytester.makepyfile(
        f"""
        import time

        import numpy as np

        def test_copy(roofline):
            a, b = np.ones(1024), np.empty(1024)

            def slow_copy():  # far below any ceiling the probe can find: nothing here is near a limit
                np.copyto(b, a)
                time.sleep(2e-4)

            r = roofline(slow_copy, op="copy", n=1024, dtype="fp64", min_fraction=1e-9, max_time=0.05)
            assert (r.ceiling is not None) == {ceilings == "paired"}
            assert r.ceiling is None or r.ceiling.speed > 1e3
        """
    )
    # a machine this busy may make the verdict inconclusive: that fails too, with its reason
    result = pytester.runpytest_subprocess(
        "--roofline-device=cpu", f"--roofline-ceilings={ceilings}", "--roofline-inconclusive=fail"
    )
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        out = result.stdout.str()
        assert "ran faster than light" in out or ("is inconclusive" in out and "contention" in out)
    else:  # the summary says the calibration was taken under load; the session end raised the
        # probe's best rate in the cache, and nothing else
        result.stdout.fnmatch_lines(["roofline: this CPU ran *x faster than when it was calibrated*"])
        (path,) = (cache / "pytest-roofline").glob("cpu-*.json")
        cached = json.loads(path.read_text())["probes"]["bandwidth"]
        assert cached["best_rate"] > 1e6
        assert (cached["rate"], cached["figure"]) == (1e3, 1e3)
