"""The report's legend: a line for each term this run's output used, and only those."""

from __future__ import annotations

from typing import Any

from pytest_roofline.output.legend import GLOSSARY, legend_lines
from pytest_roofline.output.records import Record, record_from_json

CEILING = {"resource": "bandwidth", "value": 18e9, "calibrated": 20e9, "speed": 0.9, "share_of_best": 0.75,
           "ci_rel": 0.01, "probe": "copy", "probe_rates": [18e9], "probe_wall_s": 0.01}  # fmt: skip


def record(**fields: Any) -> Record:
    return record_from_json({"nodeid": "t.py::test_a", "name": "", "label": "copy n=1", "attained": 0.5,
            "min_fraction": 0.3, "verdict": "pass", "time_s": 1e-3, "device": "cpu",
            "device_name": "AMD EPYC", "bandwidth_source": "datasheet", "cache_state": "cold",
            **fields})  # fmt: skip


def terms(records: list[Record]) -> list[str]:
    return [line.split(":")[0].strip() for line in legend_lines(records)[1:]]


def test_no_term_used_no_legend() -> None:
    assert legend_lines([record(cold_method="flush")]) == []


def test_only_the_terms_used_are_told() -> None:
    assert terms([record(cold_method="rotation", rotation_copies=8)]) == [
        "cold by rotation over N argument sets"
    ]
    assert terms([record(cache_state="warm")]) == ["warm"]


def test_a_ceiling_measured_beside_the_kernel_tells_its_terms_once() -> None:
    lines = legend_lines([record(ceiling=CEILING), record(ceiling=CEILING, cold_method="rotation")])
    assert lines[0] == f"Legend ({GLOSSARY}):"
    assert terms([record(ceiling=CEILING)]) == [
        "measured beside the kernel", "probe", "machine at X% of its best (of best)", "calibrated"
    ]  # fmt: skip
    assert len(lines) == 1 + 5


def test_every_term_has_a_glossary_entry() -> None:
    from pathlib import Path

    from pytest_roofline.output.legend import TERMS

    glossary = (Path(__file__).parents[2] / GLOSSARY).read_text().lower()
    for term, _, _ in TERMS:
        heading = term.split(" (")[0].lower()
        assert f"### {heading}" in glossary, term
