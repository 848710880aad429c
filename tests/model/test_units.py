"""Human-readable quantities: seconds, SI prefixes, intensity, percent."""

from __future__ import annotations

import math

import pytest

from pytest_roofline.model import units


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (138.91e-6, "138.9 µs"),  # the docstring's examples
        (139e-6, "139.0 µs"),
        (1.13e-3, "1130 µs"),
        (1e-6, "1.0 µs"),  # from 1 µs up: microseconds
        (999e-9, "999.0 ns"),  # below: nanoseconds
        (5e-9, "5.0 ns"),
        (0.5e-9, "0.5 ns"),
        (6e-12, "6.0 ps"),  # below 0.1 ns: picoseconds, not "0.0 ns"
        (9.5e-3, "9500 µs"),  # microseconds up to 10 ms
        (0.0123, "12.3 ms"),  # then milliseconds
        (2.5, "2500 ms"),  # up to 10 s
        (12.0, "12.0 s"),  # then seconds
        (1234.4, "1234 s"),
        (-1e-3, "-1000 µs"),
        (0.0, "0 s"),
        (math.inf, "inf s"),
        (math.nan, "nan s"),
    ],
)
def test_seconds(value: float, text: str) -> None:
    assert units.seconds(value) == text


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (989.4e12, "FLOP/s", "989 TFLOP/s"),  # the docstring's example
        (3.35e12, "B/s", "3.35 TB/s"),
        (1.37e11, "FLOP", "137 GFLOP"),
        (100_663_296, "B", "101 MB"),
        (67_108_864, "B", "67.1 MB"),
        (1500, "B", "1.50 kB"),
        (999.4e9, "B", "999 GB"),
        (1, "B", "1.00 B"),
        (0.5, "B", "0.500 B"),  # below 1: no prefix
        (2e18, "FLOP", "2000 PFLOP"),  # P is the largest prefix
        (-1.5e6, "B", "-1.50 MB"),
        (0, "B", "0 B"),
        (math.inf, "B", "inf B"),
        (math.nan, "B", "nan B"),
    ],
)
def test_si(value: float, unit: str, text: str) -> None:
    assert units.si(value, unit) == text


def test_si_digits() -> None:
    assert units.si(989.4e12, "FLOP/s", digits=4) == "989.4 TFLOP/s"
    assert units.si(3.35e12, "B/s", digits=2) == "3.4 TB/s"


def test_named_quantities() -> None:
    assert units.flops(1.37e11) == "137 GFLOP"
    assert units.flop_rate(989.4e12) == "989 TFLOP/s"
    assert units.nbytes(67_108_864) == "67.1 MB"
    assert units.byte_rate(3.35e12) == "3.35 TB/s"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (4096 / 3, "1365"),  # whole numbers from 100 up
        (295.34, "295"),
        (409.6, "410"),
        (100.0, "100"),
        (12.5, "12.5"),  # three significant digits below
        (1.25, "1.25"),
        (0.5, "0.500"),
        (0.0, "0"),
        (math.inf, "inf"),
    ],
)
def test_intensity(value: float, text: str) -> None:
    assert units.intensity(value) == text


@pytest.mark.parametrize(("fraction", "text"), [(0.5, "50.0%"), (1, "100.0%"), (0.1234, "12.3%"), (0, "0.0%"),
                                                (1.5, "150.0%")])  # fmt: skip
def test_percent(fraction: float, text: str) -> None:
    assert units.percent(fraction) == text


@pytest.mark.parametrize(
    ("formatted", "text"),
    [
        # rounding carries into the next prefix: three digits, not "1000 GB"
        (lambda: units.si(999.96e9, "B"), "1.00 TB"),
        (lambda: units.si(999_999, "FLOP"), "1.00 MFLOP"),
        # four significant digits, not "1000.0 µs"
        (lambda: units.seconds(999.96e-6), "1000 µs"),
        # whole numbers from 100 up, not "100.0"
        (lambda: units.intensity(99.96), "100"),
    ],
    ids=["si-GB-to-TB", "si-kFLOP-to-MFLOP", "seconds", "intensity"],
)
def test_rounding_up_to_the_next_decade(formatted: object, text: str) -> None:
    assert formatted() == text  # type: ignore[operator]


def test_intensity_of_nan_is_printed_not_raised() -> None:
    # si() and seconds() print nan; intensity() must not crash a report on it
    assert units.intensity(math.nan) == "nan"
