"""Attained at the clock the GPU held, and the miss message at the power cap that gives it (no timing)."""

from __future__ import annotations

import dataclasses

import pytest
from test_verdict import measurement

from pytest_roofline.model.conditions import ClockLog, ClockSample
from pytest_roofline.model.core import Device, Estimate, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import at_reported_clock, lookup, quoted_clock_mhz
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.measurement import Measurement
from pytest_roofline.model.verdict import Verdict, failure_message, result_of

POWER_CAP = 0x4


def log(sm_mhz: int, *, mem_mhz: int = 2619, reasons: int = 0, power_mw: int | None = None) -> ClockLog:
    """A measurement's clocks: an idle reading at the start (left out of what the clocks held), then
    the GPU busy at ``sm_mhz``."""
    idle = ClockSample(0.0, 345, 405, 40, 0x1)
    busy = tuple(ClockSample(0.02 * i, sm_mhz, mem_mhz, 70, reasons, power_mw) for i in range(1, 4))
    return ClockLog(True, samples=(idle, *busy), max_sm_mhz=1980, max_mem_mhz=2619, power_limit_mw=700_000)


def gemm(device: Device | None = None) -> Estimate:
    return estimate("gemm", M=8192, N=8192, K=8192, dtype="bf16", device=device or lookup("h200"))


def copy() -> Estimate:
    return estimate("copy", n=2**28, dtype="bf16", device=lookup("h200"))


def at(est: Estimate, attained: float, clocks: ClockLog | None) -> Measurement:
    return dataclasses.replace(measurement(est.floor_s / attained), clocks=clocks)


def test_the_quoted_clock_is_the_table_rows_for_the_figures_unit() -> None:
    assert quoted_clock_mhz(gemm()) == 1830  # an H200's tensor figures are quoted below its top boost
    assert (
        quoted_clock_mhz(estimate("gemm", M=8192, N=8192, K=8192, dtype="fp32", device=lookup("h200")))
        == 1980
    )
    # a driver that reports the top boost leaves each figure as quoted (its rate at that clock only
    # raises the faster-than-light limit), so the clock it assumes is the quoted one still
    assert quoted_clock_mhz(gemm(at_reported_clock(lookup("h200"), 1980))) == 1830
    # fp64 tensor is quoted at the top boost: 132 SMs x 256 FLOP/clk x 1.98 GHz = 67 TFLOP/s
    fp64 = estimate("gemm", M=8192, N=8192, K=8192, dtype="fp64", device=lookup("h200"))
    assert quoted_clock_mhz(fp64) == 1980


def test_a_figure_whose_clock_is_not_known_has_none() -> None:
    h200 = lookup("h200")
    measured = h200.with_figures(
        peaks={**h200.peaks, (Precision.BF16, Unit.TENSOR): Figure(900e12, Source.MEASURED)}
    )
    assert quoted_clock_mhz(gemm(measured)) is None
    assert quoted_clock_mhz(gemm(lookup("b200"))) is None  # its row quotes no clock


def test_a_compute_bound_kernel_at_a_lower_sm_clock_attained_more_of_what_that_clock_allows() -> None:
    est = gemm()
    r = result_of(est, [at(est, 0.60, log(1500))], 0.7)
    assert r.attained == pytest.approx(0.60)
    assert r.attained_at_held_clock == pytest.approx(0.732)  # 0.60 x 1830 / 1500


def test_a_memory_bound_kernel_is_scaled_by_the_memory_clock_only() -> None:
    est = copy()
    # the power cap lowers the SM clock; the HBM clock held its maximum: the bandwidth figure's
    held = result_of(est, [at(est, 0.5, log(1500))], 0.7)
    assert held.attained_at_held_clock == pytest.approx(0.5)
    slower = result_of(est, [at(est, 0.5, log(1500, mem_mhz=1800))], 0.7)
    assert slower.attained_at_held_clock == pytest.approx(0.5 * 2619 / 1800)


def test_without_clocks_or_a_busy_reading_or_on_the_latency_floor_it_is_not_known() -> None:
    est = gemm()
    assert result_of(est, [at(est, 0.6, None)], 0.7).attained_at_held_clock is None
    assert result_of(est, [at(est, 0.6, ClockLog(False, "no NVML"))], 0.7).attained_at_held_clock is None
    idle_only = ClockLog(True, samples=(ClockSample(0.0, 345, 405, 40, 0x1),), max_sm_mhz=1980)
    assert result_of(est, [at(est, 0.6, idle_only)], 0.7).attained_at_held_clock is None
    latency = result_of(est, [at(est, 0.6, log(1500))], 0.7, latency_floor_s=est.floor_s * 2)
    assert latency.latency_bound
    assert latency.attained_at_held_clock is None


def test_a_miss_at_the_power_cap_says_it_would_pass_at_the_clock_held() -> None:
    est = gemm()
    clocks = log(1500, reasons=POWER_CAP, power_mw=698_000)
    r = result_of(est, [at(est, 0.60, clocks)], 0.7)
    assert r.verdict is Verdict.MISS  # the kernel drew the power limit: its miss stands
    assert failure_message(r).endswith(
        " The GPU ran at the software power cap, drawing 698 W of its 700 W limit, the SM clock down to"
        " 76% of its maximum (throttled below 75%). At the clock it held (1500 MHz SM clock, where the"
        " peak assumes 1830) it attained 73.2%, within the budget: the miss is the power cap's, not the"
        " kernel's."
    )
    short = result_of(est, [at(est, 0.30, clocks)], 0.7)
    assert " it attained 36.6%, short of the budget at that clock too.\nNext: " in failure_message(short)


def test_without_the_power_cap_the_miss_message_says_nothing_of_the_clock_held() -> None:
    est = gemm()
    r = result_of(est, [at(est, 0.60, log(1500))], 0.7)
    assert r.verdict is Verdict.MISS
    assert "clock it held" not in failure_message(r)
