"""A step predicted from its ops' measurements: the matching rule (exact, interpolated, nearest,
none), the interval and the totals, each against numbers worked out here by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_roofline.model.step_prediction import (
    Evidence,
    Match,
    distance,
    match_op,
    predict,
)

#: a gemm-like row: 1 MB moved, 1 FLOP per byte
ROW = {"op": "gemm", "dtype": "bf16", "params": {"M": 1, "N": 512, "K": 512}, "flops": 1e6, "nbytes": 1e6}


def ev(test: str, nbytes: float, fraction: float, *, flops: float | None = None, **fields: Any) -> Evidence:
    """A gemm measurement of ``nbytes`` at 1 FLOP per byte unless ``flops`` says otherwise."""
    values: dict[str, Any] = {
        "test": test, "op": "gemm", "dtype": "bf16", "params": {"M": 1, "N": int(nbytes), "K": 1},
        "flops": nbytes if flops is None else flops, "bytes": nbytes, "fraction": fraction, "ci_rel": 0.1,
    }  # fmt: skip
    return Evidence(**{**values, **fields})


def match(*evidence: Evidence, **row: Any) -> Match | None:
    return match_op(**{**ROW, **row}, evidence=evidence)  # type: ignore[arg-type]


# -- exact ------------------------------------------------------------------------------------------


def test_the_same_params_are_an_exact_match() -> None:
    same = ev("t::same", 4e6, 0.7, params=dict(ROW["params"]))  # its bytes differ: the params decide
    near = ev("t::near", 1.01e6, 0.2)  # nearly the row's bytes, and its intensity
    found = match(same, near)
    assert found == Match("exact", ("t::same",), 0.7, 0.7 / 1.1, 0.7 * 1.1)


def test_the_same_bytes_and_flops_are_an_exact_match() -> None:
    found = match(ev("t::a", 1e6 * (1 + 1e-12), 0.6), ev("t::b", 2e6, 0.9))
    assert found is not None
    assert (found.how, found.tests, found.fraction) == ("exact", ("t::a",), 0.6)


def test_of_several_exact_matches_the_tightest_interval_wins() -> None:
    loose = ev("t::loose", 1e6, 0.9, ci_rel=0.3)
    tight = ev("t::tight", 1e6, 0.4, ci_rel=0.02)
    found = match(loose, tight)
    assert found is not None
    assert (found.tests, found.fraction_lo, found.fraction_hi) == (("t::tight",), 0.4 / 1.02, 0.4 * 1.02)


def test_another_op_or_dtype_is_no_match() -> None:
    assert match(ev("t::a", 1e6, 0.6, op="copy")) is None
    assert match(ev("t::a", 1e6, 0.6, dtype="fp32")) is None
    assert match() is None


# -- interpolated -----------------------------------------------------------------------------------


def test_two_measurements_either_side_interpolate_in_log_bytes() -> None:
    low, high = ev("t::small", 0.25e6, 0.3, ci_rel=0.1), ev("t::big", 16e6, 0.9, ci_rel=0.2)
    found = match(low, high)
    assert found is not None
    # ln(1/0.25) / ln(16/0.25) = ln 4 / ln 64 = 1/3 of the way from small to big
    assert (found.how, found.tests) == ("interpolated", ("t::small", "t::big"))
    assert found.fraction == pytest.approx(0.3 + (0.9 - 0.3) / 3)
    assert found.fraction_lo == pytest.approx(0.3 / 1.1 + (0.9 / 1.2 - 0.3 / 1.1) / 3)
    assert found.fraction_hi == pytest.approx(0.3 * 1.1 + (0.9 * 1.2 - 0.3 * 1.1) / 3)


def test_each_side_brings_its_nearest() -> None:
    """Of the measurements below the row's bytes, the nearest by distance: here the one at the row's
    intensity, though further in bytes than one at four times it."""
    far_but_alike = ev("t::alike", 0.25e6, 0.3)
    close_but_dense = ev("t::dense", 0.5e6, 0.8, flops=4 * 0.5e6)
    above = ev("t::above", 4e6, 0.5)
    found = match(far_but_alike, close_but_dense, above)
    assert found is not None
    assert found.tests == ("t::alike", "t::above")
    assert found.fraction == pytest.approx(0.3 + (0.5 - 0.3) * math.log(4) / math.log(16))


def test_a_measurement_at_the_rows_bytes_is_nearer_than_an_interpolation() -> None:
    at = ev("t::at", 1e6, 0.45, flops=1.5e6)  # its bytes at 1.5x the intensity: not exact, ln 1.5 away
    found = match(ev("t::below", 0.5e6, 0.3), at, ev("t::above", 2e6, 0.9))  # ln 2 away each
    assert found is not None
    assert (found.how, found.tests, found.fraction) == ("nearest", ("t::at",), 0.45)


# -- nearest ------------------------------------------------------------------------------------------


def test_the_nearest_by_bytes_and_intensity() -> None:
    # distances: 2x the bytes at the row's intensity: ln 2 = 0.69; 1.5x the bytes at 3x the
    # intensity: ln 1.5 + ln 3 = 1.50
    found = match(ev("t::double", 2e6, 0.6), ev("t::dense", 1.5e6, 0.9, flops=3 * 1.5e6))
    assert found is not None
    assert (found.how, found.tests, found.fraction) == ("nearest", ("t::double",), 0.6)
    assert (found.fraction_lo, found.fraction_hi) == (0.6 / 1.1, 0.6 * 1.1)


def test_without_flops_only_the_bytes_count() -> None:
    assert distance(3e6, 0.0, 1e6, 5e6) == pytest.approx(math.log(3))
    assert distance(3e6, 9e6, 1e6, 0.0) == pytest.approx(math.log(3))
    assert distance(0.5e6, 2e6, 1e6, 1e6) == pytest.approx(math.log(2) + math.log(4))
    # a copy (no FLOPs): the smaller byte distance wins, whatever a FLOP count would say
    found = match(ev("t::x3", 3e6, 0.6, flops=0.0), ev("t::x4", 4e6, 0.9, flops=0.0), flops=0.0)
    assert found is not None
    assert (found.how, found.tests) == ("nearest", ("t::x3",))


def test_the_devices_own_measurements_come_first() -> None:
    """Another device's measurement, even an exact one, is used only where the device has none."""
    other = ev("t::other", 1e6, 0.9, own_device=False)
    own = ev("t::own", 8e6, 0.4)
    found = match(other, own)
    assert found is not None
    assert (found.how, found.tests) == ("nearest", ("t::own",))
    found = match(other)
    assert found is not None
    assert (found.how, found.tests) == ("exact", ("t::other",))


# -- the step -------------------------------------------------------------------------------------------


def test_the_step_sums_its_rows_and_the_ends_of_their_intervals() -> None:
    exact = Match("exact", ("t::a",), 0.8, 0.8 / 1.25, 0.8 * 1.25)
    nearest = Match("nearest", ("t::b",), 0.5, 0.4, 0.6)
    step = predict([(1e-3, 2, exact), (4e-3, 1, nearest), (3e-3, 1, None)], assume=0.25)
    # 1 ms x 2 / 0.8 + 4 ms / 0.5 + 3 ms / 0.25 (assumed) = 2.5 + 8 + 12 ms
    assert step.total_s == pytest.approx(22.5e-3)
    # low ends: 2 ms / 1.0 + 4 ms / 0.6 + 12 ms; high ends: 2 ms / 0.64 + 4 ms / 0.4 + 12 ms
    assert step.lo_s == pytest.approx(2e-3 + 4e-3 / 0.6 + 12e-3)
    assert step.hi_s == pytest.approx(2e-3 / 0.64 + 10e-3 + 12e-3)
    assert step.measured_share == pytest.approx(10.5 / 22.5)
    assert step.rows[2].match == Match("assumed", (), 0.25, 0.25, 0.25)
    assert step.largest == 2


def test_a_step_of_assumed_ops_has_no_measured_share() -> None:
    step = predict([(1e-3, 4, None)], assume=0.5)
    assert (step.total_s, step.lo_s, step.hi_s, step.measured_share) == (8e-3, 8e-3, 8e-3, 0.0)


def test_the_assumed_fraction_is_the_plugins_default_budget() -> None:
    from pytest_roofline.model.step_prediction import ASSUMED_FRACTION
    from pytest_roofline.plugin.options import DEFAULT_MIN_FRACTION

    assert ASSUMED_FRACTION == DEFAULT_MIN_FRACTION
