"""``measure_cpu`` for real with tiny sizes, and on a stepping clock: the bytes it counts, the rounds
and runs it takes, its matmul size, its argument checks, each figure paired with its probe."""

from __future__ import annotations

import math
from typing import Any

import pytest

from pytest_roofline.machine.cpu_ceilings import MAX_KERNEL_RUNS, measure_cpu
from pytest_roofline.model.core import Precision, Source, Unit

P, V = Precision, Unit.VECTOR


def test_measure_cpu_for_real_with_tiny_sizes() -> None:
    ceilings = measure_cpu(array_bytes=1 << 16, matmul_n=32, matmul_runs=1, budget_s=0.05)
    assert ceilings.bandwidth.source is Source.MEASURED
    assert ceilings.bandwidth.value > 0
    assert set(ceilings.peaks) == {(P.FP64, V), (P.FP32, V)}
    assert all(f.value > 0 and f.source is Source.MEASURED for f in ceilings.peaks.values())
    for kernel in ("copy", "scale", "add", "triad", "dot"):
        assert kernel in ceilings.bandwidth.note
        assert 1 <= int(ceilings.details[f"runs_{kernel}"]) <= MAX_KERNEL_RUNS
    assert ceilings.details["array_bytes"] == 1 << 16
    assert str(ceilings.details["bandwidth_kernel"]) in ceilings.bandwidth.note


class SteppingClock:
    """Every read is one second after the last: each timed call takes exactly 1 s."""

    def __init__(self) -> None:
        self.now = -1.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_measure_cpu_counts_bytes_read_plus_written() -> None:
    nbytes = 8 * 1024
    ceilings = measure_cpu(array_bytes=nbytes, matmul_n=16, budget_s=1.0, clock=SteppingClock())
    rates = {k: ceilings.details[f"bandwidth_{k}"] for k in ("copy", "scale", "add", "triad", "dot")}
    # triad is numpy's two passes, b -> c then c + a -> c: five arrays of traffic
    assert rates == {
        "copy": 2 * nbytes,
        "scale": 2 * nbytes,
        "add": 3 * nbytes,
        "triad": 5 * nbytes,
        "dot": 2 * nbytes,
    }
    assert ceilings.bandwidth.value == 5 * nbytes
    assert ceilings.details["bandwidth_kernel"] == "triad"
    assert ceilings.peaks[(P.FP64, V)].value == 2 * 16**3
    assert ceilings.peaks[(P.FP32, V)].note == "np.matmul n=16, best of 6 in two rounds"
    # the budget was spent on the matmuls: every kernel ran once, and only once
    assert all(ceilings.details[f"runs_{k}"] == 1 for k in rates)


class ChangingClock(SteppingClock):
    """Each timed call takes ``before`` seconds for the first ``reads`` reads, then ``after``."""

    def __init__(self, reads: int, before: float, after: float) -> None:
        super().__init__()
        self.count, self.switch, self.before, self.after = 0, reads, before, after

    def __call__(self) -> float:
        self.count += 1
        self.now += self.before if self.count <= self.switch else self.after
        return self.now


# the probes' sizing (2 precisions × 2 runs × 2 clock reads), then the first matmul round (2 precisions ×
# 3 runs × a figure and its probe × 2 clock reads); the bandwidth kernels and the second round follow
FIRST_ROUND_READS = 8 + 24


@pytest.mark.parametrize(("before", "after"), [(4.0, 1.0), (1.0, 4.0)], ids=["slow-first", "slow-second"])
def test_measure_cpu_matmul_counts_the_better_of_two_rounds(before: float, after: float) -> None:
    # a host that slowed this VM down for one round must not set the ceiling
    clock = ChangingClock(FIRST_ROUND_READS, before, after)
    ceilings = measure_cpu(array_bytes=8 * 64, matmul_n=16, budget_s=1.0, clock=clock, caches=())
    assert ceilings.peaks[(P.FP64, V)].value == ceilings.peaks[(P.FP32, V)].value == 2 * 16**3  # 1 s a call


def test_measure_cpu_adds_runs_while_the_budget_allows() -> None:
    ceilings = measure_cpu(array_bytes=8 * 64, matmul_n=8, budget_s=1e6, clock=SteppingClock())
    assert all(
        ceilings.details[f"runs_{k}"] == MAX_KERNEL_RUNS for k in ("copy", "scale", "add", "triad", "dot")
    )


def test_measure_cpu_picks_the_matmul_size_from_a_probe() -> None:
    # with every call taking 1 s, the 512 probe runs at 2·512³ FLOP/s: n for a 0.06 s call is
    # 512 × 0.06^(1/3) ≈ 200, clamped to the smallest size, 256
    ceilings = measure_cpu(array_bytes=64, matmul_runs=1, budget_s=1.0, clock=SteppingClock())
    assert ceilings.details["matmul_n_fp64"] == 256
    assert ceilings.details["matmul_n_fp32"] == 256


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"array_bytes": 4}, "array_bytes"),
        ({"budget_s": 0.0}, "budget_s"),
        ({"budget_s": math.inf}, "budget_s"),
        ({"matmul_n": 0}, "matmul_n"),
        ({"matmul_runs": 0}, "matmul_runs"),
    ],
)
def test_measure_cpu_checks_its_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        measure_cpu(**kwargs)


def test_measure_cpu_pairs_each_figure_with_its_probe_run_by_run() -> None:
    ceilings = measure_cpu(array_bytes=8 * 64, matmul_n=16, budget_s=1.0, clock=SteppingClock())
    for resource in ("bandwidth", "fp64", "fp32"):
        probe = ceilings.probes[resource]
        ratio = ceilings.details[f"probe_ratio_{resource}"]
        assert probe.rate == pytest.approx(probe.figure / ratio)
    assert ceilings.probes["fp64"].figure == ceilings.peaks[(P.FP64, V)].value
    assert ceilings.probes["bandwidth"].figure == ceilings.bandwidth.value
