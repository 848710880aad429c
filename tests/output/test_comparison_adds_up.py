"""A comparison's figures add up (issue 43, item 4): the baseline shown is the figure the change is
computed against, labelled a median where it is one; an inconclusive test is flagged and named in
the Markdown summary (the terminal's naming: tests/plugin/test_gating.py)."""

from __future__ import annotations

from pytest_roofline.output.comparison import Change, RegressionRule, format_table
from pytest_roofline.output.markdown import section
from pytest_roofline.output.records import MeasurementRecord, record_from_json


def baseline_record(attained: float, history: tuple[float, ...] = ()) -> MeasurementRecord:
    return MeasurementRecord.from_json({
        "nodeid": "t.py::test_k", "name": "", "attained": attained, "attained_ci_rel": 0.01, "time_s": 1e-3,
        "device": "cpu", "device_name": "AMD EPYC", "verdict": "pass", "label": "copy n=1",
        "history": list(history),
    })  # fmt: skip


def test_the_baseline_column_is_the_median_the_change_is_against() -> None:
    """A newcomer's `roofline compare` printed `baseline 37.5%  now 30.8%  change -15%`: 37.5% was the
    latest run, the change against the median of the runs, 36.2%."""
    old = baseline_record(0.375, history=(0.362, 0.350))
    c = RegressionRule().compare(old, baseline_record(0.308))

    assert c.baseline_figure() == "36.2% (median of 3)"
    assert c.summary() == "-15% (36.2% (median of 3) -> 30.8%)"
    (row,) = [line for line in format_table([c]) if line.startswith("t.py::test_k")]
    assert "copy n=1  36.2% (median of 3)  30.8%" in " ".join(row.split("   "))
    single = RegressionRule().compare(baseline_record(0.375), baseline_record(0.308))
    assert single.baseline_figure() == "37.5%"


def test_an_inconclusive_test_is_flagged_and_named_in_the_markdown() -> None:
    c = RegressionRule().compare(
        baseline_record(0.375), baseline_record(0.320)
    )  # -15%: within one run's noise
    assert c.change is Change.INCONCLUSIVE

    text = section(
        [record_from_json({"nodeid": "t.py::test_k", "name": "", "label": "copy n=1", "attained": 0.32,
                           "min_fraction": 0.3, "verdict": "pass", "time_s": 1e-3, "device": "cpu",
                           "device_name": "AMD EPYC"})],
        [], comparisons=[c], baseline="base.json",
    )  # fmt: skip

    assert (
        "| `t.py::test_k` | copy n=1 | 32.0% | 30.0% | pass | **-15% (37.5% -> 32.0%): inconclusive** |"
        in text
    )
    assert "<br>Inconclusive (a change the noise between runs could explain): `t.py::test_k`;" in text
