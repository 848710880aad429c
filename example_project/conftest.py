"""Shared fixtures of the example suite: the back-ends and a seeded random generator.

This directory goes on ``sys.path`` so the tests import ``kernels`` (the library under test) and
``budgets`` (sizes and budgets) without installing anything.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import kernels  # noqa: E402

from pytest_roofline import Result, Verdict  # noqa: E402
from pytest_roofline.plugin import roofline_mode  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--decoder-variants", choices=("main", "all"), default="main",
        help="the decoders tests/test_decoder*.py measure whole and kernel by kernel: main, the tiny "
        "decoder at batch 1, or all of budgets.DECODER_VARIANTS (default: main)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "misses_roofline(reason): a bad variant, expected to miss its budget")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Bad variants are strict xfails only where a miss fails a test: in enforce mode."""
    if roofline_mode(config) != "enforce":
        return
    for item in items:
        mark = item.get_closest_marker("misses_roofline")
        if mark is not None:
            reason = mark.kwargs["reason"]
            item.add_marker(pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason=reason))


def pytest_roofline_result(item: pytest.Item, result: Result) -> None:
    """A bad variant whose verdict is inconclusive (a busy machine) skips, saying why.

    Enforce mode only warns of an inconclusive verdict, so its test would pass, and the strict
    xfail would fail that pass as unexpected, although the measurement showed neither the miss the
    test is there for nor a pass. A conclusive pass still fails it: the budget no longer separates
    the bad variant from the good.
    """
    if result.verdict is not Verdict.INCONCLUSIVE or item.get_closest_marker("misses_roofline") is None:
        return
    if roofline_mode(item.config) == "enforce":
        pytest.skip(f"a bad variant whose verdict is inconclusive shows no miss: {result.message()}")


def _load(name: str) -> ModuleType:
    reason = kernels.unavailable_reason(name)
    if reason is not None:
        pytest.skip(reason)
    return kernels.get_backend(name)


@pytest.fixture(params=kernels.BACKENDS)
def backend(request: pytest.FixtureRequest) -> ModuleType:
    """The back-end module under test: each test runs once with NumPy and once with CuPy.

    The CuPy run skips, saying why, where CuPy is not importable or sees no GPU.
    """
    return _load(request.param)


@pytest.fixture
def cupy_backend() -> ModuleType:
    """The CuPy back-end, for tests that only make sense on a GPU."""
    return _load("cupy")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20_240_611)
