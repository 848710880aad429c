"""Reports read for ``roofline llm --from``: which measurements a step on a device may use, and each
one's fraction on the step's roofs: the floor the step gives its op and shape over the time measured
(a record whose op cannot be estimated again: its attained, a warm test's scaled to DRAM's roof)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.model.devices import lookup
from pytest_roofline.model.llm import LlmError
from pytest_roofline.output.baseline import BaselineError
from pytest_roofline.output.step_evidence import read_reports

H100 = lookup("h100-sxm")


def record(nodeid: str, **fields: Any) -> dict[str, Any]:
    base = {
        "nodeid": nodeid, "name": "", "op": "copy", "params": {"n": 1000}, "dtype": "fp32", "flops": 0.0,
        "bytes": 8000.0, "attained": 0.5, "attained_ci_rel": 0.04, "time_s": 1e-6, "verdict": "pass",
        "device": "h100-sxm", "device_name": H100.name, "memory_level": "dram",
    }  # fmt: skip
    return {**base, **fields}


def write(tmp_path: Path, *records: dict[str, Any], devices: list[dict[str, Any]] | None = None) -> str:
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"schema": 2, "devices": devices or [], "measurements": list(records)}))
    return str(path)


def test_each_measured_record_is_evidence(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        record("t.py::test_copy", name="big", attained=0.7, attained_ci_rel=0.1),
        record("t.py::test_gone", verdict="skipped", attained=None, time_s=None),
    )
    reports = read_reports([path], H100, across_devices=False)
    assert reports.measured == 1
    (e,) = reports.evidence
    assert (e.test, e.op, e.dtype, dict(e.params), e.bytes) == (
        "t.py::test_copy[big]",
        "copy",
        "fp32",
        {"n": 1000},
        8000,
    )
    # the step's floor of a copy of 1000 fp32 (8000 B at the H100's 3.35 TB/s) over the 1 µs measured,
    # not the 0.7 attained against whatever the test was judged by (a ceiling measured beside it)
    assert e.fraction == pytest.approx(8000 / 3.35e12 / 1e-6)
    assert (e.ci_rel, e.own_device) == (0.1, True)


def test_a_measurement_faster_than_light_is_no_evidence(tmp_path: Path) -> None:
    """GPU run 2026-11-28: a GEMM test filled the op's ``batch`` from its own parameter and counted 16
    GEMMs; read 12x faster than its floor, it made the step's LM head 13x faster than light."""
    path = write(
        tmp_path,
        record("t.py::test_copy"),
        record("t.py::test_counted_wrong", verdict="faster-than-light", attained=12.9, time_s=1e-7),
    )
    reports = read_reports([path], H100, across_devices=False)
    assert [e.test for e in reports.evidence] == ["t.py::test_copy"]


def test_a_warm_or_latency_bound_measurement_carries_its_time(tmp_path: Path) -> None:
    warm = record("t.py::test_warm", memory_level="l2", attained=0.4, time_s=2e-9, latency_floor_s=1e-9)
    (e,) = read_reports([write(tmp_path, warm)], H100, across_devices=False).evidence
    assert 8000 / 3.35e12 / e.fraction == pytest.approx(2e-9)  # the step's floor over it: the time


def test_a_warm_measurement_of_an_op_not_estimated_again_is_scaled_to_drams_roof(tmp_path: Path) -> None:
    """Judged at an L2 of 10 TB/s, attained 0.4; the report's DRAM is 2 TB/s: on DRAM's roof its floor
    is five times as long, so the same time attains 2.0 of it."""
    warm = record(
        "t.py::test_warm", op="users_own_op", memory_level="l2", memory_s=8000 / 10e12, compute_s=None,
        bandwidth=10e12, attained=0.4, device_figures="abcd1234",
    )  # fmt: skip
    device = {"key": "h100-sxm", "figures": "abcd1234", "name": H100.name, "kind": "cuda", "bandwidth": 2e12}
    (e,) = read_reports([write(tmp_path, warm, devices=[device])], H100, across_devices=False).evidence
    assert e.fraction == pytest.approx(0.4 * 5)
    # without the report's figures, the device's own DRAM figure (3.35 TB/s)
    (e,) = read_reports([write(tmp_path, warm)], H100, across_devices=False).evidence
    assert e.fraction == pytest.approx(0.4 * 10e12 / 3.35e12)


def test_a_compute_bound_warm_measurement_keeps_its_fraction(tmp_path: Path) -> None:
    warm = record(
        "t.py::test_gemm", op="users_own_op", memory_level="l2", memory_s=1e-9, compute_s=4e-9, attained=0.6
    )
    (e,) = read_reports([write(tmp_path, warm)], H100, across_devices=False).evidence
    assert e.fraction == pytest.approx(0.6 * max(4e-9, 8000 / 3.35e12) / 4e-9)
    assert e.fraction == pytest.approx(0.6)


def test_another_devices_report_is_refused_unless_asked(tmp_path: Path) -> None:
    path = write(tmp_path, record("t.py::a", device="a100-sxm-80gb", device_name="NVIDIA A100-SXM4-80GB"))
    with pytest.raises(LlmError, match=r"measured on NVIDIA A100-SXM4-80GB, not on NVIDIA H100 80GB HBM3"):
        read_reports([path], H100, across_devices=False)
    (e,) = read_reports([path], H100, across_devices=True).evidence
    assert (e.test, e.own_device) == ("t.py::a", False)


def test_a_report_of_several_devices_gives_the_devices_own(tmp_path: Path) -> None:
    path = write(tmp_path, record("t.py::here"), record("t.py::there", device="l4", device_name="NVIDIA L4"))
    with pytest.warns(UserWarning, match=r"1 measurement\(s\) on other devices left out"):
        reports = read_reports([path], H100, across_devices=False)
    assert [e.test for e in reports.evidence] == ["t.py::here"]
    both = read_reports([path], H100, across_devices=True).evidence
    assert [(e.test, e.own_device) for e in both] == [("t.py::here", True), ("t.py::there", False)]


def test_a_cpu_is_told_apart_by_its_model(tmp_path: Path) -> None:
    from dataclasses import replace

    cpu = replace(H100, key="cpu", name="AMD EPYC 9654")
    path = write(tmp_path, record("t.py::a", device="cpu", device_name="Intel Xeon"))
    with pytest.raises(LlmError, match="measured on Intel Xeon, not on AMD EPYC 9654"):
        read_reports([path], cpu, across_devices=False)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ('{"schema": 2, "measurements": [', "not JSON"),
        ("[1, 2]", "not a pytest-roofline JSON report"),
        ('{"schema": "roofline-llm/1", "ops": []}', "schema 'roofline-llm/1' is not the one this version"),
        ('{"schema": 2, "measurements": [{"nodeid": "t.py::a"}]}', "no 'name' field"),
    ],
)
def test_a_report_that_cannot_be_read_names_itself(tmp_path: Path, text: str, fault: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(BaselineError, match=rf"^--from {path}: .*{fault}"):
        read_reports([str(path)], H100, across_devices=False)


def test_a_time_is_taken_at_the_calibrated_speed_unless_latency_bound_or_unprobed(tmp_path: Path) -> None:
    """The probe beside it saw half the calibrated rate: its time counts half, as if the machine had
    run at full speed; a latency-bound call (its time mostly overhead) and an unprobed one count as
    timed."""
    from pytest_roofline.model.estimate import estimate

    floor_s = estimate("copy", dtype="fp32", device=H100, n=1000).floor_s
    half = {"resource": "bandwidth", "value": 1.0, "calibrated": 2.0, "speed": 0.5}
    probed = record("t.py::test_probed", time_s=4 * floor_s, ceiling=half)
    latency = record("t.py::test_latency", time_s=4 * floor_s, ceiling=half, latency_bound=True)
    unprobed = record("t.py::test_unprobed", time_s=4 * floor_s)
    evidence = read_reports([write(tmp_path, probed, latency, unprobed)], H100, across_devices=False).evidence
    fractions = {e.test: e.fraction for e in evidence}
    assert fractions == {
        "t.py::test_probed": pytest.approx(0.5),
        "t.py::test_latency": pytest.approx(0.25),
        "t.py::test_unprobed": pytest.approx(0.25),
    }
