"""The verdict through pytest: the budget's precedence, a miss measured again and judged by the
better, the messages of a miss, and faster than light.

Every run goes through pytester with the fake device and the scripted timer of ``conftest.py``:
floors of 2 ms for the standard shapes, 2.5 ms a call (80%) unless a test says otherwise.
"""

from __future__ import annotations

import pytest
from conftest import COPY, FLOOR_S, GEMM, one_result

from pytest_roofline.model.verdict import Verdict

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
    result.stdout.fnmatch_lines(
        ["attained 80.0% of speed of light (budget 85%)*", "*needs 1.1× faster.", "Next: *"]
    )


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
            "attained 25.0% of speed of light (budget 50%): gemm[[]M=1000 N=1000 K=1000 fp32[]] on Fake "
            "Accelerator:",
            "floor 2000 µs, compute-bound at 1.00 TFLOP/s fp32 vector;",
            "measured 8000 µs (median of 10, ±0.0%, best of 2 measurements, cold: cache flushed before every"
            " call), 250.0 GFLOP/s achieved; needs 2.0× faster.",
            "Next: check that the math runs on the unit the floor assumes (tensor cores, vector lanes)"
            " (docs/verdicts.md#a-cpu-kernel-that-misses).",
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
            "*memory-bound at 100 GB/s;",
            "measured 10.0 ms (*), 20.00 GB/s achieved of 100 GB/s peak bandwidth (20.0%);"
            " needs 2.5× faster.",
            "Next: count the"
            " passes over memory (each unfused temporary is one more), then the access pattern (strided,"
            " gathered) (docs/verdicts.md#a-cpu-kernel-that-misses).",
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
                f"*ran faster than light: attained {attained * 100:.1f}% of speed of light"
                f" (limit {limit}, ±*",
                "*the op's byte or FLOP count*the device peaks, or data served from a cache*",
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
