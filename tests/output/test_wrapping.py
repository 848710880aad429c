"""The one wrapper of the plugin's messages: each line on its own, at spaces, a number kept with its
unit, a long word (a path, an option) never cut."""

from __future__ import annotations

import pytest

from pytest_roofline.output.wrapping import wrap


def test_a_line_that_fits_is_left_as_it_is() -> None:
    assert (
        wrap("attained 12.3% of speed of light (budget 70%)", 80)
        == "attained 12.3% of speed of light (budget 70%)"
    )


def test_each_line_wraps_on_its_own_with_its_continuations_indented() -> None:
    text = "first line that is rather long for the width given\nsecond, short"
    assert wrap(text, 30).splitlines() == [
        "first line that is rather long",
        "  for the width given",
        "second, short",
    ]


@pytest.mark.parametrize("width", range(12, 40))
def test_a_number_stays_with_its_unit(width: int) -> None:
    text = "floor 139.0 µs, compute-bound at 989 TFLOP/s bf16 tensor, over 54 argument sets, ±0.4%"
    lines = wrap(text, width).splitlines()
    for figure in ("139.0 µs", "989 TFLOP/s", "54 argument"):
        assert any(figure in line for line in lines), (figure, lines)
    assert " ".join(line.strip() for line in lines) == text


def test_a_word_longer_than_the_width_is_not_cut() -> None:
    lines = wrap("see docs/verdicts.md#a-cpu-kernel-that-misses and --roofline-inconclusive", 20).splitlines()
    assert "  docs/verdicts.md#a-cpu-kernel-that-misses" in lines
    assert "  --roofline-inconclusive" in lines


def test_an_indented_line_keeps_its_indent_and_hangs_below_it() -> None:
    assert wrap("  regression: one two three four", 20, hang=4).splitlines() == [
        "  regression: one",
        "      two three four",
    ]
