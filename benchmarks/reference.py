"""The reference the benchmarks compare with: pytest-benchmark's median, driven in-process."""

from __future__ import annotations

import time
import types
from collections.abc import Callable


class _Quiet:
    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def pytest_benchmark_median(fn: Callable[[], object], name: str = "kernel") -> float:
    """pytest-benchmark's median of ``fn()`` with its default settings, without a pytest session."""
    from pytest_benchmark.fixture import BenchmarkFixture
    from pytest_benchmark.utils import NameWrapper

    fixture = BenchmarkFixture(
        types.SimpleNamespace(name=name, nodeid=f"benchmarks::{name}"),
        disable_gc=False, timer=NameWrapper(time.perf_counter), min_rounds=5, min_time=0.000005,
        max_time=1.0, precision=None, confidence=None, warmup=False, warmup_iterations=100000,
        calibration_precision=10, add_stats=lambda stats: None, logger=_Quiet(),
        warner=lambda *a, **k: None, disabled=False, cprofile=False, cprofile_loops=None, cprofile_dump=None,
    )  # fmt: skip
    fixture(fn)
    return float(fixture.stats.stats.median)
