"""The verdict and its messages, on hand-built measurements (no timing, no pytest run)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_roofline.devices import lookup
from pytest_roofline.floor import estimate
from pytest_roofline.model import Device, Estimate, Figure, Precision, Source, Unit
from pytest_roofline.stats import Stats
from pytest_roofline.timing.base import Policy
from pytest_roofline.timing.engine import Measurement, StopReason
from pytest_roofline.verdict import (
    FTL_LIMIT_DATASHEET,
    FTL_LIMIT_MEASURED,
    Result,
    Verdict,
    budget_percent,
    check_fraction,
    decide,
    failure_message,
    ftl_limit,
    judge,
)


def measurement(time_s: float, *, n: int = 57, ci_rel: float = 0.004, flushed: bool = True) -> Measurement:
    stats = Stats(
        n=n, min=time_s, max=time_s, median=time_s, mean=time_s, stdev=0.0, q1=time_s, q3=time_s,
        iqr_rel=0.0, ci_half=ci_rel * time_s, ci_rel=ci_rel,
    )  # fmt: skip
    return Measurement(
        samples_s=(time_s,) * n, calls_per_sample=1, stats=stats, stat="median", time_s=time_s, wall_s=0.1,
        warmup_calls=3, warmup_s=0.03, backend="cuda", device="NVIDIA H100 80GB HBM3", flushed=flushed,
        stop_reason=StopReason.PRECISION, policy=Policy(flush=flushed),
    )  # fmt: skip


def h100(peak_source: Source = Source.DATASHEET, bandwidth_source: Source = Source.DATASHEET) -> Device:
    """The H100 SXM with the round figures of the issue's example (989 TFLOP/s bf16, 3.35 TB/s)."""
    base = lookup("h100-sxm")
    return base.with_figures(
        peaks={**base.peaks, (Precision.BF16, Unit.TENSOR): Figure(989e12, peak_source)},
        bandwidth=Figure(3.35e12, bandwidth_source),
    )


def gemm(device: Device | None = None) -> Estimate:
    return estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device=device or h100())


def copy(device: Device | None = None) -> Estimate:
    return estimate("copy", n=2**28, dtype="bf16", device=device or h100())


def result(est: Estimate, m: Measurement, min_fraction: float = 0.7, *, name: str = "") -> Result:
    attained, verdict = judge(est, m, min_fraction)
    return Result(name, est, m, min_fraction, attained, verdict)


# -- messages ------------------------------------------------------------------------------------


def test_the_miss_message_is_the_issues_example() -> None:
    r = result(gemm(), measurement(1130e-6))
    assert r.verdict is Verdict.MISS
    assert failure_message(r) == (
        "gemm[M=4096 N=4096 K=4096 bf16] attained 12.3% of speed of light (budget 70%) on NVIDIA H100 80GB "
        "HBM3: floor 139.0 µs, compute-bound at 989 TFLOP/s bf16 tensor; measured 1130 µs (median of 57, "
        "±0.4%), 121.6 TFLOP/s achieved; needs 5.7× faster."
    )
    assert r.message() == failure_message(r)


def test_a_memory_bound_miss_gives_achieved_against_peak_bandwidth() -> None:
    est = copy()
    r = result(est, measurement(est.floor_s * 4), 0.5)
    assert failure_message(r) == (
        "copy[n=268435456 bf16] attained 25.0% of speed of light (budget 50%) on NVIDIA H100 80GB HBM3: "
        "floor 320.5 µs, memory-bound at 3.35 TB/s; measured 1282 µs (median of 57, ±0.4%), "
        "837.5 GB/s achieved of 3.35 TB/s peak bandwidth (25.0%); needs 2.0× faster."
    )


def test_a_named_remeasured_warm_miss_says_all_three() -> None:
    est = gemm()
    m = measurement(1130e-6, flushed=False)
    attained, verdict = judge(est, m, 0.7)
    r = Result("bf16 path", est, m, 0.7, attained, verdict, remeasured=True)
    text = failure_message(r)
    assert text.startswith("gemm[M=4096 N=4096 K=4096 bf16] (bf16 path) attained 12.3%")
    assert "measured 1130 µs (median of 57, ±0.4%, best of 2 measurements, warm cache)" in text


@pytest.mark.parametrize(
    ("peaks", "limit"),
    [
        (Source.DATASHEET, "105.0% against datasheet peaks"),
        (Source.MEASURED, "110.0% against measured ceilings"),
    ],
)
def test_faster_than_light_says_what_must_be_wrong(peaks: Source, limit: str) -> None:
    r = result(gemm(h100(peak_source=peaks)), measurement(100e-6))
    assert r.verdict is Verdict.FASTER_THAN_LIGHT
    text = failure_message(r)
    assert text.startswith(
        "gemm[M=4096 N=4096 K=4096 bf16] ran faster than light: attained 139.0% of speed of light "
        f"(limit {limit}) on NVIDIA H100 80GB HBM3: floor 139.0 µs, compute-bound at 989 TFLOP/s bf16 "
        "tensor; measured 100.0 µs"
    )
    assert "the op's byte or FLOP count" in text
    assert "the device peaks" in text
    assert "or a warm cache (caches were flushed)" in text


def test_faster_than_light_with_a_warm_cache_points_at_it() -> None:
    r = result(gemm(), measurement(100e-6, flushed=False))
    assert "caches were NOT flushed: a warm cache" in failure_message(r)


@pytest.mark.parametrize(("fraction", "text"), [(0.7, "70%"), (0.125, "12.5%"), (0.55, "55%"), (1, "100%")])
def test_budget_percent(fraction: float, text: str) -> None:
    assert budget_percent(fraction) == text


# -- judging -------------------------------------------------------------------------------------


def at(est: Estimate, attained: float) -> Measurement:
    return measurement(est.floor_s / attained)


@pytest.mark.parametrize(
    ("attained", "verdict"),
    [
        (0.69, Verdict.MISS),
        (0.7, Verdict.PASS),
        (1.0, Verdict.PASS),
        (FTL_LIMIT_DATASHEET * 0.9999, Verdict.PASS),
        (FTL_LIMIT_DATASHEET * 1.0001, Verdict.FASTER_THAN_LIGHT),
    ],
)
def test_judge_against_the_budget_and_the_speed_of_light(attained: float, verdict: Verdict) -> None:
    est = gemm()
    got, v = judge(est, at(est, attained), 0.7)
    assert got == pytest.approx(attained)
    assert v is verdict


def test_measured_ceilings_allow_more_noise() -> None:
    est = gemm(h100(peak_source=Source.MEASURED))
    assert ftl_limit(est) == FTL_LIMIT_MEASURED
    assert judge(est, at(est, 1.08), 0.5)[1] is Verdict.PASS
    assert judge(est, at(est, 1.12), 0.5)[1] is Verdict.FASTER_THAN_LIGHT


def test_the_limit_follows_the_figure_that_bounds_the_kernel() -> None:
    device = h100(peak_source=Source.MEASURED, bandwidth_source=Source.DATASHEET)
    assert ftl_limit(gemm(device)) == FTL_LIMIT_MEASURED  # compute-bound: the peak's source
    assert ftl_limit(copy(device)) == FTL_LIMIT_DATASHEET  # memory-bound: the bandwidth's


def test_a_zero_time_is_infinitely_fast() -> None:
    attained, verdict = judge(gemm(), dataclasses.replace(measurement(1e-3), time_s=0.0), 0.5)
    assert math.isinf(attained)
    assert verdict is Verdict.FASTER_THAN_LIGHT


# -- decide: re-measure a miss, judge by the better ------------------------------------------------


def script(*times: float) -> tuple[list[float], object]:
    calls: list[float] = []
    pending = list(times)

    def measure_once() -> Measurement:
        calls.append(pending[0])
        return measurement(pending.pop(0))

    return calls, measure_once


@pytest.mark.parametrize(
    ("attained", "calls", "verdict", "remeasured", "kept"),
    [
        ((0.9,), 1, Verdict.PASS, False, 0),
        ((2.0,), 1, Verdict.FASTER_THAN_LIGHT, False, 0),
        ((0.3, 0.8), 2, Verdict.PASS, True, 1),
        ((0.3, 0.4), 2, Verdict.MISS, True, 1),
        ((0.4, 0.3), 2, Verdict.MISS, True, 0),
        ((0.3, 2.0), 2, Verdict.FASTER_THAN_LIGHT, True, 1),
    ],
)
def test_decide(
    attained: tuple[float, ...], calls: int, verdict: Verdict, remeasured: bool, kept: int
) -> None:
    est = gemm()
    times = [est.floor_s / a for a in attained]
    made, measure_once = script(*times)
    r = decide(est, measure_once, 0.7, name="n", nodeid="t.py::t")  # type: ignore[arg-type]
    assert len(made) == calls
    assert r.verdict is verdict
    assert r.remeasured is remeasured
    assert r.time_s == times[kept]
    assert (r.name, r.nodeid) == ("n", "t.py::t")


# -- the result ----------------------------------------------------------------------------------


def test_the_result_is_frozen_and_names_what_users_reach_for() -> None:
    est = gemm()
    r = result(est, measurement(1130e-6))
    assert (r.floor_s, r.time_s, r.bound, r.intensity) == (est.floor_s, 1130e-6, "compute", est.intensity)
    assert (r.flops, r.bytes) == (est.flops, est.bytes)
    assert r.stats.n == 57
    assert r.passed is False
    assert r.achieved_flop_rate == pytest.approx(121.6e12, rel=1e-3)
    assert r.achieved_bandwidth == est.bytes / 1130e-6
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.attained = 1.0  # type: ignore[misc]


@pytest.mark.parametrize("value", [0.5, 1, 1.0, 1e-9])
def test_check_fraction_accepts(value: float) -> None:
    assert check_fraction(value) == value


@pytest.mark.parametrize("value", [0, -0.1, 1.01, float("nan"), float("inf"), True, "0.5", None])
def test_check_fraction_rejects_naming_the_value(value: object) -> None:
    with pytest.raises(ValueError, match=r"^min_fraction must be a number in \(0, 1\]; got "):
        check_fraction(value)
