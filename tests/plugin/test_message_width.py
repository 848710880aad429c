"""A miss's message and a warning fit pytest's width (``COLUMNS``, as pytest reads it), the first line
holding the verdict: attained and the budget, which pytest's short summary shows."""

from __future__ import annotations

import pytest
from conftest import GEMM

from pytest_roofline.plugin.failing import WARNING_INDENT

MISSES = f"""
import pytest

@pytest.mark.fake_time(10e-3)
def test_slow_gemm(roofline):
    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")
"""


def _failure_lines(lines: list[str]) -> list[str]:
    """The failure section's message: the lines between its header and the short summary."""
    start = next(at for at, line in enumerate(lines) if line.strip("_ ") == "test_slow_gemm") + 1
    end = next(at for at, line in enumerate(lines) if "short test summary info" in line)
    return lines[start:end]


@pytest.mark.parametrize("width", [60, 100])
def test_a_miss_wraps_at_the_terminal_width_its_verdict_first(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    rl.makepyfile(test_wrapped_miss=MISSES)
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    message = _failure_lines(result.stdout.lines)
    assert message[0].startswith("attained 20.0% of speed of light (budget 50%)")
    assert all(len(line) <= width for line in message), message
    assert [line for line in message if line.startswith("Next: ")]
    result.stdout.fnmatch_lines(["FAILED test_wrapped_miss.py::test_slow_gemm - Failed: att*"])


def test_without_a_terminal_it_wraps_at_pytests_80_columns(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS")  # no terminal under pytester: pytest falls back to 80, and so do we
    rl.makepyfile(test_wrapped_default=MISSES)
    result = rl.runpytest()
    message = _failure_lines(result.stdout.lines)
    assert max(map(len, message)) <= 80 < len(" ".join(message))


def test_a_warning_wraps_inside_pytests_indent(rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "70")
    rl.makepyfile(
        test_wrapped_warning="""
        import numpy as np
        import pytest

        @pytest.mark.fake_time(100e-6)
        def test_unknown_flops(roofline):  # inferred without its FLOPs: inconclusive, a warning
            x, y = np.ones(100_000, np.float32), np.empty(100_000, np.float32)
            roofline(lambda: np.multiply(x, 2.0, out=y), min_fraction=0.5)
        """
    )
    result = rl.runpytest("--roofline-cache=warm", "--roofline-max-time=0.002", "-W", "default::UserWarning")
    result.assert_outcomes(passed=1, warnings=1)
    lines = result.stdout.lines
    start = next(at for at, line in enumerate(lines) if "RooflineWarning: auto:" in line)
    end = next(at for at, line in enumerate(lines) if line.startswith("-- Docs:"))
    body = [line for line in lines[start + 1 : end] if line.strip()]
    assert len(body) > 3, body
    assert all(line.startswith(" " * WARNING_INDENT) for line in body), body
    assert all(len(line) <= 70 for line in body[:-1]), body  # the last: the source line pytest shows
