"""The other settings reach the engine: the statistic, the time budget and the cold method, a warm
measurement said so, TF32 math picking the tensor peak.

Every run goes through pytester with the fake device and the scripted timer of ``conftest.py``:
floors of 2 ms for the standard shapes, 2.5 ms a call (80%) unless a test says otherwise.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import COPY, GEMM, one_result


@pytest.mark.parametrize(
    ("args", "marker", "expected"),
    [
        ([], "", {"stat": "median", "max_time_s": 1.0, "flush": True}),
        (["--roofline-stat=min", "--roofline-max-time=0.25", "--roofline-cache=warm"], "",
         {"stat": "min", "max_time_s": 0.25, "flush": False}),
        (["--roofline-stat=min", "--roofline-max-time=0.25", "--roofline-cache=warm"],
         ", stat='mean', max_time=2, cache='cold'", {"stat": "mean", "max_time_s": 2.0, "flush": True}),
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
        ("warm: warm on request (--roofline-cache=warm)", "cold: no flush needed: the op moves 6.0x")
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
    result = rl.runpytest("--roofline-cache=warm", "--roofline-report")
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
