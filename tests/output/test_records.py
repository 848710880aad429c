"""The typed records: built once from a result, JSON at the edges (no pytest run)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fakes import FakeBackend

from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.verdict import Result, Verdict, result_of
from pytest_roofline.output.baseline import SCHEMA_VERSION
from pytest_roofline.output.records import (
    DeviceRecord,
    MeasurementRecord,
    SkippedRecord,
    record_from_json,
)
from pytest_roofline.timing.engine import measure

DEVICE = Device(
    key="toy",
    name="Toy Accelerator",
    kind="cuda",
    peaks={
        (Precision.FP32, Unit.VECTOR): Figure(1e12, Source.DATASHEET),
        (Precision.TF32, Unit.TENSOR): Figure(8e12, Source.MEASURED, "tf32 probe"),
    },
    bandwidth=Figure(1e11, Source.USER, "peaks.json"),
)


def a_result(op: str, seconds: float, **params: object) -> Result:
    est = estimate(op, dtype="fp32", device=DEVICE, **params)
    m = measure(lambda: None, policy=Policy(), backend=FakeBackend(seconds))
    return result_of(est, [m], 0.5)


def test_a_record_survives_its_trip_through_json_unchanged() -> None:
    for result in (
        a_result("gemm", 2e-3, M=1000, N=1000, K=1000, math="tf32"),
        a_result("copy", 1e-3, n=1000),
    ):
        record = MeasurementRecord.from_result(result, nodeid="t.py::test", mode="enforce")
        text = json.dumps(record.to_json(), allow_nan=False)
        assert record_from_json(json.loads(text)) == record
    skipped = SkippedRecord(nodeid="t.py::test_gpu", label="gemm", reason="needs CUDA device 0")
    assert record_from_json(json.loads(json.dumps(skipped.to_json()))) == skipped
    device = DeviceRecord.of(DEVICE)
    assert DeviceRecord.from_json(json.loads(json.dumps(device.to_json()))) == device


def test_schema_2_names_the_datas_precision_dtype_and_the_maths_peak_precision() -> None:
    result = a_result("gemm", 2e-3, M=1000, N=1000, K=1000, math="tf32")
    data = MeasurementRecord.from_result(result, nodeid="t", mode="enforce").to_json()
    assert (data["dtype"], data["peak_precision"]) == (str(result.estimate.precision), "tf32")
    assert "precision" not in data
    assert data["verdict"] == str(result.verdict)
    assert SCHEMA_VERSION == 2


def test_facts_are_worked_out_on_the_types_that_own_them() -> None:
    gemm = a_result("gemm", 2e-3, M=1000, N=1000, K=1000)
    copy = a_result("copy", 1e-3, n=1000)
    assert gemm.estimate.bounding_figure == Figure(1e12, Source.DATASHEET)
    assert copy.estimate.bounding_figure == Figure(1e11, Source.USER)
    g = MeasurementRecord.from_result(gemm, nodeid="t", mode="enforce")
    c = MeasurementRecord.from_result(copy, nodeid="t", mode="enforce")
    assert g.achieved_rate == pytest.approx(gemm.achieved_flop_rate)
    assert c.achieved_rate == pytest.approx(copy.achieved_bandwidth)
    assert isinstance(g.verdict, Verdict)
    device = DeviceRecord.of(DEVICE)
    assert device.version == f"toy@{device.figures}" == g.device_version


def test_records_are_frozen() -> None:
    record = SkippedRecord(nodeid="t", label="gemm", reason="absent")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.reason = "other"  # type: ignore[misc]
