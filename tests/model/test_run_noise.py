"""The noise between runs a record states (``between_runs``) and a baseline comparison starts from: the
CPU reference VM's, or a GPU's by bound (an H200's six processes: memory-bound kernels within 4.8%,
compute-bound GEMMs 11-15% apart at the power cap)."""

from __future__ import annotations

import math

import pytest

from pytest_roofline.model import run_noise
from pytest_roofline.output.comparison import Change, RegressionRule
from pytest_roofline.output.records import MeasurementRecord


@pytest.mark.parametrize(
    ("backend", "bound", "sd", "band"),
    [
        ("cpu", "memory", 0.08, 0.17),
        ("cpu", "compute", 0.08, 0.17),
        ("cuda", "memory", 0.025, 0.05),
        ("cuda", "latency", 0.025, 0.05),
        ("cuda", "compute", 0.08, 0.17),
    ],
)
def test_each_kind_of_measurement_has_its_prior_and_its_95_percent_band(
    backend: str, bound: str, sd: float, band: float
) -> None:
    assert run_noise.prior(backend, bound) == sd
    assert run_noise.between_runs_rel(sd) == pytest.approx(band, abs=0.005)
    assert run_noise.why(backend, bound)


def test_the_h200s_between_run_medians_lie_within_the_band_of_their_kind() -> None:
    """benchmarks/gpu_runs/2026-11-28-h200: the three processes of each lease, per kernel (µs)."""
    memory = {
        "sdpa_gqa_decode": [(40.42, 40.29, 39.84), (39.23, 40.04, 39.25)],
        "decode_gemv_4096[warm]": [(10.79, 11.22, 11.25), (11.35, 10.83, 11.25)],
        "device_to_device_copy": [(504.91, 504.59, 504.32), (507.65, 508.00, 507.65)],
        "triton_softmax": [(69.28, 68.67, 68.80), (69.33, 69.92, 69.34)],
    }
    compute = {
        "mm_bf16_8192": [(1370.48, 1368.74, 1534.96), (1362.21, 1445.31, 1568.34)],
        "fp8_gemm_scaled_mm": [(849.73, 858.53, 849.42), (735.97, 850.21, 807.71)],
    }
    for kernels, bound in ((memory, "memory"), (compute, "compute")):
        band = run_noise.between_runs_rel(run_noise.prior("cuda", bound))
        for leases in kernels.values():
            for medians in leases:
                assert max(medians) / min(medians) - 1 <= band


def record(attained: float, backend: str, bound: str, runs: tuple[float, ...] = ()) -> MeasurementRecord:
    return MeasurementRecord.from_json({
        "nodeid": "t.py::test_k", "name": "", "attained": attained, "attained_ci_rel": 0.005, "time_s": 1e-3,
        "device": "h200", "device_name": "NVIDIA H200", "verdict": "pass", "history": list(runs),
        "backend": backend, "bound": bound,
    })  # fmt: skip


def test_a_gpu_copy_12_percent_slower_than_one_saved_run_is_a_regression_where_a_cpu_one_is_not() -> None:
    gpu = RegressionRule().compare(record(0.80, "cuda", "memory"), record(0.80 / 1.12, "cuda", "memory"))
    cpu = RegressionRule().compare(record(0.80, "cpu", "memory"), record(0.80 / 1.12, "cpu", "memory"))
    compute = RegressionRule().compare(
        record(0.80, "cuda", "compute"), record(0.80 / 1.12, "cuda", "compute")
    )
    assert (gpu.change, cpu.change, compute.change) == (
        Change.REGRESSION, Change.INCONCLUSIVE, Change.INCONCLUSIVE,
    )  # fmt: skip
    assert gpu.run_noise == pytest.approx(0.025)
    assert math.isclose(compute.run_noise, 0.08)
