"""The verdict and its messages, on hand-built measurements (no timing, no pytest run)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_roofline.model.core import Device, Estimate, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.measurement import Measurement, StopReason
from pytest_roofline.model.paired_ceilings import ProbeReference
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.stats import Stats
from pytest_roofline.model.verdict import (
    FEW_SAMPLES_CI,
    FTL_LIMIT_DATASHEET,
    FTL_LIMIT_MEASURED,
    MIN_FIRST_BUDGET_S,
    Judgement,
    Result,
    Verdict,
    budget_percent,
    check_fraction,
    failure_message,
    first_budget_s,
    ftl_limit,
    judge,
    result_of,
    second_look,
)


def measurement(time_s: float, *, n: int = 57, ci_rel: float = 0.004, flushed: bool = True) -> Measurement:
    stats = Stats(
        n=n, min=time_s, max=time_s, median=time_s, mean=time_s, stdev=0.0, q1=time_s, q3=time_s,
        iqr_rel=0.0, ci_half=ci_rel * time_s, ci_rel=ci_rel,
    )  # fmt: skip
    return Measurement(
        samples_s=(time_s,) * n, calls_per_sample=1, stats=stats, stat="median", time_s=time_s, wall_s=0.1,
        warmup_calls=3, warmup_s=0.03, backend="cuda", device="NVIDIA H100 80GB HBM3",
        cold_method="flush" if flushed else None, stop_reason=StopReason.PRECISION, policy=Policy(),
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
    return result_of(est, [m], min_fraction, name=name)


# -- messages ------------------------------------------------------------------------------------


def test_the_miss_message_is_the_issues_example() -> None:
    r = result(gemm(), measurement(1130e-6))
    assert r.verdict is Verdict.MISS
    assert failure_message(r) == (
        "attained 12.3% of speed of light (budget 70%): gemm[M=4096 N=4096 K=4096 bf16] on NVIDIA H100 80GB "
        "HBM3:\nfloor 139.0 µs, compute-bound at 989 TFLOP/s bf16 tensor;\nmeasured 1130 µs (median of 57, "
        "±0.4%, cold: cache flushed before every call), 121.6 TFLOP/s achieved; needs 5.7× faster.\nNext:"
        " check that the math runs on the unit the floor assumes (tensor cores, vector lanes)"
        " (docs/verdicts.md#why-did-it-miss)."
    )
    assert r.message() == failure_message(r)


def test_a_memory_bound_miss_gives_achieved_against_peak_bandwidth() -> None:
    est = copy()
    r = result(est, measurement(est.floor_s * 4), 0.5)
    assert failure_message(r) == (
        "attained 25.0% of speed of light (budget 50%): copy[n=268435456 bf16] on NVIDIA H100 80GB HBM3:\n"
        "floor 320.5 µs, memory-bound at 3.35 TB/s;\nmeasured 1282 µs (median of 57, ±0.4%, cold: cache "
        "flushed before every call), 837.5 GB/s achieved of 3.35 TB/s peak bandwidth (25.0%); needs 2.0× "
        "faster.\nNext: count the passes over memory (each unfused temporary is one more), then the access"
        " pattern (strided, gathered) (docs/verdicts.md#why-did-it-miss)."
    )


def test_a_named_remeasured_warm_miss_says_all_three() -> None:
    est = gemm()
    m = measurement(1130e-6, flushed=False)
    r = result_of(est, [m, measurement(2e-3)], 0.7, name="bf16 path")
    text = failure_message(r)
    assert text.startswith(
        "attained 12.3% of speed of light (budget 70%): gemm[M=4096 N=4096 K=4096 bf16] (bf16 path)"
    )
    warm = "warm in DRAM, judged at 3.35 TB/s"
    assert f"measured 1130 µs (median of 57, ±0.4%, best of 2 measurements, {warm})" in text


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
        f"(limit {limit}, ±0.4% noise) on NVIDIA H100 80GB HBM3:\nfloor 139.0 µs, compute-bound at "
        "989 TFLOP/s bf16 "
        "tensor;\nmeasured 100.0 µs"
    )
    assert "the op's byte or FLOP count" in text
    assert "the device peaks" in text
    assert "or data served from a cache (cold: cache flushed before every call)" in text


def test_faster_than_light_with_a_warm_cache_points_at_it() -> None:
    r = result(gemm(), measurement(100e-6, flushed=False))
    assert "or data served from a cache (warm in DRAM, judged at 3.35 TB/s)" in failure_message(r)


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
        (0.7, Verdict.INCONCLUSIVE),  # ±0.4% of noise straddles the budget
        (0.71, Verdict.PASS),
        (1.0, Verdict.PASS),
        (FTL_LIMIT_DATASHEET * 0.99, Verdict.PASS),
        (FTL_LIMIT_DATASHEET * 1.0001, Verdict.INCONCLUSIVE),  # above the limit, but within the noise
        (FTL_LIMIT_DATASHEET * 1.01, Verdict.FASTER_THAN_LIGHT),
    ],
)
def test_judge_against_the_budget_and_the_speed_of_light(attained: float, verdict: Verdict) -> None:
    est = gemm()
    j = judge(est, at(est, attained), 0.7)
    assert j.attained == pytest.approx(attained)
    assert j.verdict is verdict


def test_each_judgement_names_the_rule_that_gave_it() -> None:
    est, inside, beyond = gemm(), FTL_LIMIT_DATASHEET * 1.0001, FTL_LIMIT_DATASHEET * 1.01
    said = {a: judge(est, at(est, a), 0.7).rule for a in (0.5, 0.7, 0.71, inside, beyond)}
    assert said == {0.5: "miss", 0.7: "straddles", 0.71: "pass", inside: "above-limit-in-noise",
                    beyond: "faster-than-light"}  # fmt: skip


@pytest.mark.parametrize(
    ("n", "attained", "verdict"),
    [
        (1, 0.65, Verdict.INCONCLUSIVE),  # one sample 7% short: within what a run's noise explains
        (2, 0.65, Verdict.INCONCLUSIVE),
        (1, 0.5, Verdict.MISS),  # far beyond it: a miss, however few the samples
        (1, 0.9, Verdict.PASS),
        (6, 0.65, Verdict.MISS),  # six samples have an interval of their own (±0.4% here)
    ],
)
def test_too_few_samples_for_an_interval_are_given_a_runs_noise(
    n: int, attained: float, verdict: Verdict
) -> None:
    # a slow kernel under a short budget: its one or two samples' spread says nothing of its noise
    est = gemm()
    m = dataclasses.replace(at(est, attained), samples_s=(est.floor_s / attained,) * n)
    m = dataclasses.replace(m, stats=dataclasses.replace(m.stats, n=n, ci_rel=0.0, ci_half=0.0))
    j = judge(est, m, 0.7)
    assert j.verdict is verdict
    assert j.ci_rel == (pytest.approx(FEW_SAMPLES_CI) if n < 6 else 0.0)


def test_measured_ceilings_allow_more_noise() -> None:
    est = gemm(h100(peak_source=Source.MEASURED))
    assert ftl_limit(est) == FTL_LIMIT_MEASURED
    assert judge(est, at(est, 1.08), 0.5).verdict is Verdict.PASS
    assert judge(est, at(est, 1.12), 0.5).verdict is Verdict.FASTER_THAN_LIGHT


def test_the_limit_follows_the_figure_that_bounds_the_kernel() -> None:
    device = h100(peak_source=Source.MEASURED, bandwidth_source=Source.DATASHEET)
    assert ftl_limit(gemm(device)) == FTL_LIMIT_MEASURED  # compute-bound: the peak's source
    assert ftl_limit(copy(device)) == FTL_LIMIT_DATASHEET  # memory-bound: the bandwidth's


def h200_gemm() -> Estimate:
    """An H200 bf16 GEMM as the plugin builds it on a GPU reporting its 1980 MHz maximum clock."""
    from pytest_roofline.model.devices import DeviceProperties, from_properties

    device = from_properties(DeviceProperties("NVIDIA H200", multiprocessors=132, clock_khz=1_980_000))
    return estimate("gemm", M=8192, N=8192, K=8192, dtype="bf16", device=device)


def test_a_figure_quoted_below_the_max_clock_raises_its_limit_by_the_clocks_ratio() -> None:
    est = h200_gemm()
    assert est.peak_flops == 989.5e12  # judged at the datasheet's figure
    assert ftl_limit(est) == pytest.approx(FTL_LIMIT_DATASHEET * 1980 / 1830)
    assert ftl_limit(estimate("gemm", M=4096, N=4096, K=4096, dtype="fp64", device=est.device)) == (
        FTL_LIMIT_DATASHEET  # FP64 tensor: quoted at the maximum clock
    )
    assert ftl_limit(estimate("copy", n=2**28, dtype="bf16", device=est.device)) == FTL_LIMIT_DATASHEET


@pytest.mark.parametrize(("attained", "verdict"), [(1.07, Verdict.PASS), (1.2, Verdict.FASTER_THAN_LIGHT)])
def test_an_h200_kernel_at_its_max_clock_can_beat_the_datasheets_bf16_figure(
    attained: float, verdict: Verdict
) -> None:
    # 1.07 of 989.5 TFLOP/s is 1.06 PFLOP/s: reachable at 1980 MHz (1.07 PFLOP/s), not at 1830
    est = h200_gemm()
    j = judge(est, at(est, attained), 0.5)
    assert j.attained == pytest.approx(attained)
    assert j.verdict is verdict


def test_faster_than_light_names_the_peak_at_the_max_clock() -> None:
    est = h200_gemm()
    text = failure_message(result(est, at(est, 1.2)))
    assert (
        "(limit 113.6% against datasheet peaks: 105.0% of 1.07 PFLOP/s, the peak at the maximum SM clock,"
        in text
    )
    assert "compute-bound at 990 TFLOP/s bf16 tensor" in text


def test_a_zero_time_is_infinitely_fast() -> None:
    j = judge(gemm(), dataclasses.replace(measurement(1e-3), time_s=0.0), 0.5)
    assert math.isinf(j.attained)
    assert j.verdict is Verdict.FASTER_THAN_LIGHT


# -- a second look: re-measure a miss, judge by the better ------------------------------------------


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
def test_a_miss_gets_a_second_look_and_the_better_of_the_two_is_judged(
    attained: tuple[float, ...], calls: int, verdict: Verdict, remeasured: bool, kept: int
) -> None:
    """A miss gets a second look (plugin/pipeline.py measures again), and the better of the two is judged."""
    est = gemm()
    times = [est.floor_s / a for a in attained]
    first = result_of(est, [measurement(times[0])], 0.7, name="n", nodeid="t.py::t")
    assert second_look(first) is (calls == 2)
    r = result_of(est, [measurement(t) for t in times], 0.7, name="n", nodeid="t.py::t")
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


# -- round two: paired ceilings, inconclusive verdicts, the theoretical peak, the budget ----------


def cpu(bandwidth: float = 20e9, fp64: float = 100e9) -> Device:
    peaks = {
        (Precision.FP64, Unit.VECTOR): Figure(fp64, Source.MEASURED),
        (Precision.FP32, Unit.VECTOR): Figure(2 * fp64, Source.MEASURED),
    }
    return Device(
        "cpu", "Test CPU", "cpu", peaks, Figure(bandwidth, Source.MEASURED), llc_bytes=2**25, cores=2
    )


def probed(m: Measurement, resource: str, rates: tuple[float, ...], ci_rel: float = 0.0) -> Measurement:
    from pytest_roofline.model.measurement import ProbeRun

    stats = dataclasses.replace(Stats.from_samples(rates), ci_rel=ci_rel)
    return dataclasses.replace(m, probe=ProbeRun("copy", resource, rates, stats, 0.01))


def reference(resource: str = "bandwidth", figure: float = 20e9, rate: float = 10e9) -> ProbeReference:
    return ProbeReference(resource, "copy", 2**26, figure, rate, best_rate=12e9)


def test_a_paired_ceiling_scales_the_calibrated_figure_by_the_probe() -> None:
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    # the probe ran at half its calibration rate: the ceiling of the window is half the figure
    m = probed(measurement(est.floor_s * 2 / 0.8), "bandwidth", (5e9, 5e9, 5e9))
    j = judge(est, m, 0.5, reference=reference())
    assert j.ceiling is not None
    assert j.ceiling.speed == pytest.approx(0.5)
    assert j.ceiling.value == pytest.approx(10e9)
    assert j.ceiling.share_of_best == pytest.approx(5 / 12)
    assert j.judged_floor_s == pytest.approx(est.floor_s * 2)
    assert j.attained == pytest.approx(0.8)
    assert j.verdict is Verdict.PASS
    r = result_of(est, [m], 0.9, reference=reference())
    text = failure_message(r)
    assert "memory-bound at 10.0 GB/s measured beside the kernel (machine at 41.7% of its best;" in text
    assert "calibrated 20.0 GB/s" in text


def test_a_paired_ceiling_above_the_calibration_says_so_in_the_same_line() -> None:
    """A newcomer read "18.4 GB/s measured beside the kernel (machine at 100.0% of its best;
    calibrated 15.3 GB/s)" as a contradiction, explained only by a later warning."""
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    m = probed(measurement(est.floor_s * 4), "bandwidth", (12e9, 12e9, 12e9))  # 1.2x the calibration
    text = failure_message(result_of(est, [m], 0.9, reference=reference()))
    assert "calibrated 20.0 GB/s, 1.2x that: recalibrate with `roofline calibrate --force`)" in text
    quiet = probed(measurement(est.floor_s * 4), "bandwidth", (10e9, 10e9, 10e9))
    assert "recalibrate" not in failure_message(result_of(est, [quiet], 0.9, reference=reference()))


def test_a_probe_of_another_resource_is_not_paired() -> None:
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    m = probed(measurement(est.floor_s), "fp64", (1e9,))
    assert judge(est, m, 0.5, reference=reference()).ceiling is None


def test_the_probe_noise_widens_the_interval_of_attained() -> None:
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    m = probed(measurement(est.floor_s / 0.52, ci_rel=0.03), "bandwidth", (10e9,) * 3, ci_rel=0.04)
    j = judge(est, m, 0.5, reference=reference())
    assert j.ci_rel == pytest.approx(0.05)
    assert j.verdict is Verdict.INCONCLUSIVE
    assert "straddles the budget" in j.reason


def test_faster_than_light_needs_more_than_the_ceilings_noise() -> None:
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    noisy = probed(measurement(est.floor_s / 1.15), "bandwidth", (10e9,) * 3, ci_rel=0.10)
    assert judge(est, noisy, 0.5, reference=reference()).verdict is Verdict.INCONCLUSIVE
    quiet = probed(measurement(est.floor_s / 1.15), "bandwidth", (10e9,) * 3, ci_rel=0.01)
    assert judge(est, quiet, 0.5, reference=reference()).verdict is Verdict.FASTER_THAN_LIGHT


def test_faster_than_light_only_against_a_probe_the_load_slowed_is_inconclusive() -> None:
    # the probe beside the kernel ran at half its calibration rate, the kernel (two BLAS threads, say)
    # kept more of its speed: 1.6x the paired ceiling is 0.8x the calibrated one, no counting bug
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    slowed = probed(measurement(est.floor_s / 0.8, ci_rel=0.01), "bandwidth", (5e9,) * 3, ci_rel=0.01)
    j = judge(est, slowed, 0.5, reference=reference())
    assert j.attained == pytest.approx(1.6)
    assert j.verdict is Verdict.INCONCLUSIVE
    assert "within it against the calibrated one" in j.reason
    # beyond the calibrated ceiling too: faster than light, whatever the probe did
    beyond = probed(measurement(est.floor_s / 1.3, ci_rel=0.01), "bandwidth", (5e9,) * 3, ci_rel=0.01)
    assert judge(est, beyond, 0.5, reference=reference()).verdict is Verdict.FASTER_THAN_LIGHT


class FakePeak:
    def flops(self, precision: Precision) -> float:
        return 150e9 if precision is Precision.FP64 else 300e9

    def describe(self) -> str:
        return "2 cores x 3 GHz x 16 (AVX2+FMA)"


def test_a_rate_above_the_theoretical_peak_is_a_counting_bug_whatever_the_noise() -> None:
    est = estimate("gemm", M=512, N=512, K=512, dtype="fp64", device=cpu(fp64=100e9))
    m = measurement(est.flops / 200e9, ci_rel=0.5)  # 200 GFLOP/s against a 150 GFLOP/s hard limit
    j = judge(est, m, 0.5, peak=FakePeak())  # type: ignore[arg-type]
    assert j.verdict is Verdict.FASTER_THAN_LIGHT
    assert "200 GFLOP/s is above this CPU's theoretical peak of 150 GFLOP/s fp64" in j.reason
    assert "a counting bug" in j.reason


def heavy(m: Measurement) -> Measurement:
    from pytest_roofline.model.conditions import Contention

    return dataclasses.replace(
        m,
        contention=Contention(
            samples=10, preempted=9, steal_fraction=0.2, load_avg=6.0, cores=2, cpu_per_wall=0.4
        ),
    )


def test_heavy_contention_makes_a_near_miss_inconclusive_but_not_a_pass_or_a_far_miss() -> None:
    est = gemm()
    near = judge(est, heavy(at(est, 0.4)), 0.7)  # a quiet machine might have made 0.8
    assert near.verdict is Verdict.INCONCLUSIVE
    assert near.reason.startswith("a miss under heavy contention")
    assert judge(est, heavy(at(est, 0.3)), 0.7).verdict is Verdict.MISS  # 2x short of 0.7 even so
    assert judge(est, heavy(at(est, 0.9)), 0.7).verdict is Verdict.PASS
    r = result_of(est, [heavy(at(est, 0.4))], 0.7)
    assert "The OS reported heavy contention" in failure_message(r)
    assert "--roofline-inconclusive" in failure_message(r)


def test_heavy_contention_makes_a_near_faster_than_light_inconclusive() -> None:
    est = gemm(h100(peak_source=Source.MEASURED))
    assert judge(est, heavy(at(est, 1.6)), 0.7).verdict is Verdict.INCONCLUSIVE
    assert judge(est, heavy(at(est, 3.0)), 0.7).verdict is Verdict.FASTER_THAN_LIGHT  # beyond 2x the limit


def test_a_remeasure_has_a_budget_of_its_own_and_the_first_pays_what_came_before() -> None:
    est = gemm()
    # the copies and the latency floor took 0.3 s of the 1 s budget: the first measurement gets the
    # rest, the second (a miss is doubted) a budget of its own, the same (plugin/pipeline.py)
    assert first_budget_s(1.0, 0.3) == pytest.approx(0.7)
    missed = [dataclasses.replace(at(est, 0.3), wall_s=b) for b in (0.7, 1.0)]
    r = result_of(est, missed, 0.7, spent_s=0.3)
    assert r.measurements == 2
    assert r.wall_s == pytest.approx(2.0)  # what came before counts: twice the budget at most


def test_a_pass_needs_no_second_look() -> None:
    est = gemm()
    assert not second_look(result_of(est, [at(est, 0.9)], 0.7))
    assert second_look(result_of(est, [at(est, 0.3)], 0.7))


def test_of_two_paired_measurements_the_one_that_attained_most_is_judged() -> None:
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    # the second ran slower, but beside a probe that ran at a third of the first's speed
    quick = probed(measurement(est.floor_s / 0.3), "bandwidth", (10e9,))
    slow_but_loaded = probed(measurement(est.floor_s / 0.2), "bandwidth", (10e9 / 3,))
    r = result_of(est, [quick, slow_but_loaded], 0.5, reference=reference())
    assert r.measurement is slow_but_loaded
    assert r.attained == pytest.approx(0.6)
    assert r.measurements == 2


def test_a_conclusive_remeasure_beats_an_inconclusive_first_measurement() -> None:
    est = gemm(h100(peak_source=Source.MEASURED))
    noisy_fast = at(est, 1.12)
    noisy_fast = dataclasses.replace(noisy_fast, stats=dataclasses.replace(noisy_fast.stats, ci_rel=0.05))
    clean = at(est, 1.0)
    r = result_of(est, [noisy_fast, clean], 0.7)
    assert r.verdict is Verdict.PASS
    assert r.measurement is clean


def test_a_paired_compute_ceiling_never_exceeds_the_theoretical_peak() -> None:
    est = estimate("gemm", M=512, N=512, K=512, dtype="fp64", device=cpu(fp64=100e9))
    # a calibration taken under load: the probe now runs 5x its calibration rate
    m = probed(measurement(est.flops / 120e9), "fp64", (5e9,))
    ref = ProbeReference("fp64", "matmul", 256, 100e9, 1e9, 1e9)
    j = judge(est, m, 0.5, reference=ref, peak=FakePeak())  # type: ignore[arg-type]
    assert j.ceiling is not None
    assert j.ceiling.value == pytest.approx(150e9)  # capped at the 150 GFLOP/s hard limit
    assert j.attained == pytest.approx(0.8)


def test_copies_that_took_the_whole_budget_leave_the_first_measurement_a_sliver() -> None:
    # a sliver: the measurement takes its least, a warm-up call and a sample
    assert first_budget_s(1.0, 1.2) == MIN_FIRST_BUDGET_S


@pytest.mark.parametrize(("parallelism", "paired"), [(None, True), (1.0, False), (1.9, True)])
def test_a_single_threaded_compute_kernel_is_not_paired_with_the_blas_probe(
    parallelism: float | None, paired: bool
) -> None:
    est = estimate("gemm", M=512, N=512, K=512, dtype="fp64", device=cpu(fp64=100e9))
    m = dataclasses.replace(probed(measurement(est.flops / 50e9), "fp64", (0.5e9,)), parallelism=parallelism)
    ref = ProbeReference("fp64", "matmul", 256, 100e9, 1e9, 1e9)
    j = judge(est, m, 0.1, reference=ref)
    assert (j.ceiling is not None) is paired
    assert j.attained == pytest.approx(1.0 if paired else 0.5)  # paired: the ceiling halved with the probe


def test_a_single_threaded_memory_kernel_keeps_its_copy_probe() -> None:
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    m = dataclasses.replace(probed(measurement(est.floor_s), "bandwidth", (10e9,)), parallelism=1.0)
    assert judge(est, m, 0.5, reference=reference()).ceiling is not None


def test_a_single_threaded_compute_kernels_ceiling_is_its_share_of_the_core() -> None:
    est = estimate("gemm", M=512, N=512, K=512, dtype="fp64", device=cpu(fp64=100e9))
    # a neighbour on its core: the thread ran half of each window, and the kernel took twice as long
    m = dataclasses.replace(measurement(est.flops / 40e9), parallelism=1.0, cpu_share=0.5)
    j = judge(est, m, 0.5)
    assert j.ceiling is not None
    assert j.ceiling.value == pytest.approx(50e9)
    assert j.attained == pytest.approx(0.8)
    assert j.ceiling.probe == "this thread's share of its core"


# -- threads that waited for a core ------------------------------------------------------------------


def blas_gemm(
    attained: float, *, threads: int | None, wait_share: float | None, probe_rate: float
) -> Judgement:
    """A 512³ dgemm on a 100 GFLOP/s CPU at ``attained`` of the calibrated ceiling, its probe at
    ``probe_rate`` (calibrated at 1 GFLOP/s), judged against a 50% budget."""
    est = estimate("gemm", M=512, N=512, K=512, dtype="fp64", device=cpu(fp64=100e9))
    m = probed(measurement(est.floor_s / attained), "fp64", (probe_rate,))
    m = dataclasses.replace(m, parallelism=1.9, cpu_share=1.0, threads=threads, wait_share=wait_share)
    return judge(est, m, 0.5, reference=ProbeReference("fp64", "matmul", 256, 100e9, 1e9, 1e9))


def test_a_multithreaded_compute_kernel_whose_threads_waited_is_judged_against_the_calibration() -> None:
    # beside a core hog: the kernel slowed 5x, its probe only 2x; the pairing would call it a miss
    j = blas_gemm(0.18, threads=2, wait_share=0.5, probe_rate=0.5e9)
    assert j.ceiling is None  # the calibrated ceiling: load cannot raise it
    assert j.attained == pytest.approx(0.18)
    assert j.verdict is Verdict.INCONCLUSIVE
    assert j.reason.startswith("its 2 threads waited for a core 50.0% of the time")


def test_a_pass_with_threads_that_waited_is_a_pass() -> None:
    # load only slows a kernel: a pass against the best-known ceiling holds on a quiet machine too
    j = blas_gemm(0.8, threads=2, wait_share=0.5, probe_rate=0.5e9)
    assert (j.ceiling, j.verdict) == (None, Verdict.PASS)


def test_a_far_beyond_light_kernel_with_threads_that_waited_is_still_faster_than_light() -> None:
    assert blas_gemm(2.0, threads=2, wait_share=0.5, probe_rate=0.5e9).verdict is Verdict.FASTER_THAN_LIGHT


@pytest.mark.parametrize(
    ("threads", "wait_share"),
    [(2, 0.10), (2, None), (None, 0.5)],
    ids=["little-wait", "wait-unknown", "threads-unknown"],
)
def test_waiting_matters_only_for_several_threads_that_waited_long(
    threads: int | None, wait_share: float | None
) -> None:
    j = blas_gemm(0.18, threads=threads, wait_share=wait_share, probe_rate=0.5e9)
    assert j.ceiling is not None
    assert j.ceiling.speed == pytest.approx(0.5)
    assert (j.verdict, j.attained) == (Verdict.MISS, pytest.approx(0.36))  # 36% of the halved ceiling


def test_the_os_thread_count_overrides_the_cpu_time_parallelism() -> None:
    # the process used ~2 CPU seconds a second (a BLAS thread spinning on after a call), but the
    # OS saw one thread running the kernel: the single-threaded rule (the core's share) applies
    j = blas_gemm(0.5, threads=1, wait_share=0.0, probe_rate=0.5e9)
    assert j.ceiling is not None
    assert j.ceiling.probe == "this thread's share of its core"


def test_a_memory_bound_kernel_whose_threads_waited_keeps_its_probe() -> None:
    est = estimate("copy", n=2**24, dtype="fp64", device=cpu())
    m = dataclasses.replace(probed(measurement(est.floor_s), "bandwidth", (10e9,)), threads=2, wait_share=0.5)
    assert judge(est, m, 0.5, reference=reference()).ceiling is not None


# -- the latency floor -------------------------------------------------------------------------------


def test_a_kernel_below_the_latency_floor_is_judged_against_it_and_said_latency_bound() -> None:
    est = estimate("copy", n=64, dtype="fp32", device=cpu())  # 512 B: a 25.6 ns roofline floor
    m = measurement(1e-6)
    plain = result_of(est, [m], 0.5)
    assert (plain.latency_bound, plain.attained) == (False, pytest.approx(est.floor_s / 1e-6))
    r = result_of(est, [m], 0.5, latency_floor_s=0.8e-6)  # an empty call takes 800 ns
    assert r.latency_bound
    assert r.floor_s == pytest.approx(0.8e-6)
    assert r.attained == pytest.approx(0.8)
    assert r.verdict is Verdict.PASS
    assert "latency-bound: no call on this timer is shorter (an empty one takes 800.0 ns)" in failure_message(
        r
    )
    assert "so the roofline cannot judge this kernel" in failure_message(r)


def test_a_latency_floor_above_the_measured_time_caps_attained_at_one_never_faster_than_light() -> None:
    # an empty launch timed eagerly (or while the clocks ramped) beside a graph replay that is faster
    est = estimate("copy", n=64, dtype="fp32", device=cpu())
    r = result_of(est, [measurement(1e-6)], 0.5, latency_floor_s=3e-6)

    assert r.latency_bound
    assert r.attained == pytest.approx(1.0)
    assert r.verdict is Verdict.PASS


def test_a_latency_floor_below_the_roofline_floor_changes_nothing() -> None:
    est = gemm()
    m = measurement(est.floor_s / 0.8)
    r = result_of(est, [m], 0.5, latency_floor_s=1e-6)
    assert (r.latency_bound, r.attained, r.latency_floor_s) == (False, pytest.approx(0.8), 1e-6)


# -- a GPU that slowed its clocks ---------------------------------------------------------------------


def clocked(m: Measurement, reasons: int) -> Measurement:
    from pytest_roofline.model.conditions import ClockLog, ClockSample

    # the SM clock held within 75% of its maximum: the reasons alone decide
    samples = (ClockSample(0.0, 1980, 2619, 60, 0), ClockSample(0.01, 1755, 2619, 84, reasons))
    return dataclasses.replace(m, clocks=ClockLog(True, samples=samples, max_sm_mhz=1980, max_mem_mhz=2619))


def test_a_miss_while_the_gpu_slowed_its_clocks_is_inconclusive() -> None:
    est = gemm()
    slow = clocked(measurement(est.floor_s / 0.3), reasons=0x20)  # hardware thermal slowdown
    j = judge(est, slow, 0.7)
    assert j.verdict is Verdict.INCONCLUSIVE
    assert j.reason.startswith("the GPU slowed its clocks (")
    assert judge(est, clocked(measurement(est.floor_s / 0.3), reasons=0), 0.7).verdict is Verdict.MISS
    assert judge(est, clocked(measurement(est.floor_s / 0.8), reasons=0x20), 0.7).verdict is Verdict.PASS


def test_a_miss_at_the_software_power_cap_alone_is_a_miss() -> None:
    # an H100 under a dense GEMM sits at its power limit with the cap bit set: not throttling (nvbench
    # judges the SM clock, not the bits), so a real regression still fails
    est = gemm()
    assert judge(est, clocked(measurement(est.floor_s / 0.3), reasons=0x4), 0.7).verdict is Verdict.MISS


def test_a_miss_at_the_software_power_cap_says_how_far_the_sm_clock_fell() -> None:
    # what an H200 showed (benchmarks/gpu_runs): a bf16 matmul at its power limit held 77%, not
    # throttled by nvbench's rule, and attained 0.69 of the datasheet; the message says why
    est = gemm()
    r = result_of(est, [clocked(measurement(est.floor_s / 0.3), reasons=0x4)], 0.7)
    assert r.verdict is Verdict.MISS
    assert failure_message(r).endswith(
        " The GPU ran at the software power cap, the SM clock down to 89% of its maximum"
        " (throttled below 75%). At the clock it held (1868 MHz SM clock, where the peak assumes 1830)"
        " it attained 29.4%, short of the budget at that clock too.\nNext: check that the math runs on the"
        " unit the floor assumes (tensor cores, vector lanes) (docs/verdicts.md#why-did-it-miss)."
    )
    quiet = result_of(est, [clocked(measurement(est.floor_s / 0.3), reasons=0)], 0.7)
    assert "power cap" not in failure_message(quiet)


def test_a_miss_far_below_the_budget_is_a_miss_even_when_the_threads_waited() -> None:
    # a deliberately bad variant 40x below its budget: no neighbour explains that much
    j = blas_gemm(0.5 / 40, threads=2, wait_share=0.5, probe_rate=0.5e9)
    assert j.verdict is Verdict.MISS


def test_a_passing_result_the_gate_suspects_gets_a_second_look() -> None:
    """A drop against the baseline that the machine caused for a moment does not last: before a
    regression is called, a second measurement is taken (tests/plugin/test_pipeline.py), and the
    better of the two stands."""
    est = gemm()
    suspected: list[float] = []

    def suspect(r: Result) -> bool:
        suspected.append(r.attained)
        return r.attained < 0.8

    assert second_look(result_of(est, [at(est, 0.75)], 0.7), suspect)
    assert not second_look(result_of(est, [at(est, 0.9)], 0.7), suspect)
    assert suspected == [pytest.approx(0.75), pytest.approx(0.9)]
    assert not second_look(result_of(est, [at(est, 0.75)], 0.7), lambda r: False)
