"""The step summary's Markdown: what went wrong first, every cell escaped, appended to the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.output.comparison import RegressionRule
from pytest_roofline.output.markdown import append_section, section
from pytest_roofline.output.records import DeviceRecord, MeasurementRecord, Record, record_from_json

DEVICE = DeviceRecord.from_json({
    "key": "cpu", "name": "AMD EPYC", "kind": "cpu", "bandwidth": 20e9,
    "peaks": [{"precision": "fp64", "unit": "vector", "flops": 1e11, "note": ""},
              {"precision": "int8", "unit": "tensor", "flops": 0.0, "note": "no int8 tensor unit"}],
})  # fmt: skip


def record(nodeid: str, verdict: str, attained: float = 0.5, **fields: Any) -> Record:
    return record_from_json({"nodeid": nodeid, "name": "", "label": "copy n=1", "attained": attained,
            "min_fraction": 0.3, "verdict": verdict, "time_s": 1e-3, "device": "cpu",
            "device_name": "AMD EPYC", **fields})  # fmt: skip


def test_misses_lead_the_table_and_the_devices_come_first() -> None:
    text = section([record("t.py::test_ok", "pass"), record("t.py::test_slow", "MISS", 0.1)], [DEVICE])
    lines = text.splitlines()
    assert lines[0] == "## pytest-roofline"
    assert "**AMD EPYC** (cpu): DRAM 20.0 GB/s" in lines
    assert "<br>peaks: fp64 vector 100 GFLOP/s" in lines  # a unit the device lacks is left out
    table = [line for line in lines if line.startswith("| ")]
    assert table[0] == "| test | op | attained | budget | verdict |"
    assert table[1] == "| `t.py::test_slow` | copy n=1 | 10.0% | 30.0% | **MISS** |"
    assert table[2] == "| `t.py::test_ok` | copy n=1 | 50.0% | 30.0% | pass |"
    assert "2 measurement(s): 1 MISS, 1 pass" in lines


def test_a_cell_cannot_break_the_table() -> None:
    text = section([record("t.py::test_x[a|b\nc`d]", "pass", label="<b>op</b>")], [])
    row = next(line for line in text.splitlines() if line.startswith("| ``t.py"))
    assert row == "| ``t.py::test_x[a\\|b c`d]`` | &lt;b>op&lt;/b> | 50.0% | 30.0% | pass |"


@pytest.mark.parametrize(
    ("test", "cell"),
    [
        # in a code span everything is literal but the table's own pipe, which GitHub unescapes first
        ("t.py::test_x[a<b]", "`t.py::test_x[a<b]`"),
        ("t.py::test_x[a&amp;b>c]", "`t.py::test_x[a&amp;b>c]`"),
        ("t.py::test_x[C:\\path\\]", "`t.py::test_x[C:\\path\\]`"),
        ("t.py::test_x[a|b]", "`t.py::test_x[a\\|b]`"),
        ("t.py::test_x[a\\|b]", "`t.py::test_x[a\\\\|b]`"),  # GitHub drops the backslash before a pipe
        ("t.py::test_x[`]", "``t.py::test_x[`]``"),  # a fence longer than any run of backticks inside
        ("t.py::test_x[``a`]", "```t.py::test_x[``a`]```"),
        ("`t.py::test_x`", "`` `t.py::test_x` ``"),  # padded, or the fence would swallow the backtick
    ],
)
def test_a_test_id_shows_on_github_as_it_is(test: str, cell: str) -> None:
    rows = [line for line in section([record(test, "pass")], []).splitlines() if line.startswith("| ")]
    assert rows[1] == f"| {cell} | copy n=1 | 50.0% | 30.0% | pass |"


def test_text_outside_code_spans_is_escaped_for_github() -> None:
    label = "<b>a&amp;b</b> *x* _y_ \\ `z` [l](u) ~s~ $m$ a|b"
    lines = section([record("t.py::t", "pass", label=label)], []).splitlines()
    row = next(line for line in lines if line.startswith("| `t.py::t`"))
    assert row.split(" | ")[1] == (
        "&lt;b>a&amp;amp;b&lt;/b> \\*x\\* \\_y\\_ \\\\ \\`z\\` [l]\\(u) \\~s\\~ \\$m\\$ a\\|b"
    )


def test_code_outside_the_table_needs_no_escaped_pipe() -> None:
    gone = MeasurementRecord.from_json(record("t.py::test_x[a|b]", "pass").to_json())
    lines = section(
        [], [], comparisons=[RegressionRule().compare(gone, None)], plot="C:\\out\\roofline.svg"
    ).splitlines()
    assert "<br>In the baseline, not measured now: `t.py::test_x[a|b]`." in lines
    assert lines[-1] == "Roofline plot: `C:\\out\\roofline.svg` (upload it as an artifact to see it here)."


def test_with_a_baseline_the_change_is_a_column_and_regressions_come_first() -> None:
    new = [record("t.py::test_ok", "pass", 0.5), record("t.py::test_reg", "pass", 0.25)]
    old = MeasurementRecord.from_json(record("t.py::test_reg", "pass", 0.5, attained_ci_rel=0.01).to_json())
    gone = MeasurementRecord.from_json(record("t.py::test_gone", "pass").to_json())
    comparisons = [
        RegressionRule().compare(None, MeasurementRecord.from_json(new[0].to_json())),
        RegressionRule().compare(old, MeasurementRecord.from_json(new[1].to_json())),
        RegressionRule().compare(gone, None),
    ]
    lines = section(new, [], comparisons=comparisons, baseline="base.json").splitlines()
    table = [line for line in lines if line.startswith("| ")]
    assert table[0].endswith("| verdict | vs baseline |")
    assert table[1] == "| `t.py::test_reg` | copy n=1 | 25.0% | 30.0% | pass | **-50% (50.0% -> 25.0%)** |"
    assert table[2].endswith("| pass | new: no baseline record |")
    assert "<br>Against the baseline base.json: 1 regression(s)." in lines
    assert "<br>In the baseline, not measured now: `t.py::test_gone`." in lines


def test_the_plot_is_named_and_nothing_measured_is_said() -> None:
    lines = section([], [], plot="roofline.svg").splitlines()
    assert "No measurements." in lines
    assert lines[-1] == "Roofline plot: `roofline.svg` (upload it as an artifact to see it here)."


def test_a_section_is_appended_after_what_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    append_section(path, "first\n")
    append_section(path, "second\n")
    assert path.read_text() == "first\n\nsecond\n"
