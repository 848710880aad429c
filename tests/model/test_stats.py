"""Sample statistics by hand: the median and its distribution-free 95% interval (the textbook ranks),
one sample, identical samples, a zero median, and no samples at all."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pytest_roofline.model.stats import Stats, median_ci_ranks


def test_odd_count_by_hand() -> None:
    s = Stats.from_samples([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.min, s.max, s.median, s.mean) == (5, 1.0, 5.0, 3.0, 3.0)
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    assert (s.q1, s.q3) == (2.0, 4.0)
    assert s.iqr_rel == pytest.approx(2 / 3)
    # ranks (1, 5): the interval is [min, max]
    assert s.ci_half == 2.0
    assert s.ci_rel == pytest.approx(2 / 3)


def test_even_count_by_hand() -> None:
    s = Stats.from_samples([4.0, 1.0, 3.0, 2.0])
    assert s.median == 2.5
    assert s.mean == 2.5
    assert s.stdev == pytest.approx(math.sqrt(5 / 3))
    # linear interpolation: positions 0.75 and 2.25
    assert (s.q1, s.q3) == (1.75, 3.25)
    assert s.iqr_rel == pytest.approx(0.6)
    assert s.ci_half == 1.5


def test_single_sample() -> None:
    s = Stats.from_samples([7.0])
    assert (s.n, s.min, s.max, s.median, s.mean, s.q1, s.q3) == (1, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0)
    assert (s.stdev, s.iqr_rel, s.ci_half, s.ci_rel) == (0.0, 0.0, 0.0, 0.0)


def test_hundred_samples_use_the_textbook_ranks() -> None:
    s = Stats.from_samples(float(x) for x in range(100, 0, -1))
    assert s.median == 50.5
    assert (s.q1, s.q3) == (25.75, 75.25)
    # the 40th and 61st order statistics
    assert s.ci_half == (61 - 40) / 2
    assert s.ci_rel == pytest.approx(10.5 / 50.5)


@pytest.mark.parametrize(
    ("n", "ranks"),
    [(1, (1, 1)), (2, (1, 2)), (5, (1, 5)), (10, (1, 10)), (11, (2, 10)), (20, (5, 16)), (100, (40, 61))],
)
def test_median_ci_ranks(n: int, ranks: tuple[int, int]) -> None:
    assert median_ci_ranks(n) == ranks


def test_median_ci_covers_95_percent_from_six_samples() -> None:
    for n in range(6, 301):
        lo, hi = median_ci_ranks(n)
        assert lo + hi == n + 1
        # [x(lo), x(hi)] holds the median when at least lo and fewer than hi samples fall below it
        coverage = sum(math.comb(n, below) for below in range(lo, hi)) / 2**n
        assert coverage >= 0.95, n


def test_median_ci_ranks_rejects_zero() -> None:
    with pytest.raises(ValueError, match="n must be >= 1"):
        median_ci_ranks(0)


def test_identical_samples_have_no_spread() -> None:
    s = Stats.from_samples([2e-3] * 50)
    assert (s.stdev, s.iqr_rel, s.ci_half, s.ci_rel) == (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(("samples", "ci_rel"), [([0.0, 0.0], 0.0), ([0.0, 0.0, 1.0], math.inf)])
def test_zero_median(samples: list[float], ci_rel: float) -> None:
    assert Stats.from_samples(samples).ci_rel == ci_rel


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        Stats.from_samples([])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_samples_are_an_error(bad: float) -> None:
    with pytest.raises(ValueError, match="must be finite"):
        Stats.from_samples([1.0, bad, 2.0])


@pytest.mark.parametrize(("stat", "expected"), [("median", 2.0), ("min", 1.0), ("mean", 4.0)])
def test_value_selects_a_statistic(stat: str, expected: float) -> None:
    s = Stats.from_samples([1.0, 2.0, 9.0])
    assert s.value(stat) == expected  # type: ignore[arg-type]


def test_value_rejects_an_unknown_statistic() -> None:
    with pytest.raises(ValueError, match="stat must be one of median, min, mean; got 'max'"):
        Stats.from_samples([1.0]).value("max")  # type: ignore[arg-type]


def test_stats_are_frozen() -> None:
    s = Stats.from_samples([1.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.median = 2.0  # type: ignore[misc]
