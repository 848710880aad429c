"""--roofline-report-clocks: a GPU's clocks in the report's table, read through a fake NVML.

The fake device of ``conftest.py`` with its kind set to ``cuda`` (``test_diagnose_option.GPU``) and a
scripted backend whose clocks a real :class:`~pytest_roofline.timing.clocks.ClockWatcher` watches,
over a fake ``pynvml``: the SM clock at 1500 of 1980 MHz under the software power cap.
"""

from __future__ import annotations

import json

import pytest
from conftest import COPY, DEFAULT_TIME_S, fake_conftest
from fake_nvml import FakeNvml
from test_diagnose_option import GPU
from test_report_options import table

from pytest_roofline.output.table import TABLE_HEADERS

WATCHED = f"""

from pytest_roofline.timing.clocks import ClockWatcher


class WatchedBackend(ScriptedBackend):
    def watch_clocks(self):
        return ClockWatcher(interval_s=3600)


BACKEND = WatchedBackend(({DEFAULT_TIME_S!r},), resolution_s=1e-9, device_name="fake accelerator")


def pytest_roofline_backend(config, device, spec):
    return BACKEND
"""

SUITE = f"""
def test_copy(roofline):
    roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
"""

CLOCK_HEADERS = ["SM MHz (min)", "mem MHz (min)", "power", "clock events", "at held clock"]
#: a copy at 80% of its floor: the bandwidth figure assumes the memory's maximum clock, which it held
ROW = ["test_suite.py::test_copy", "copy n=25000000", "fp32", "memory", "0", "2000 µs", "2500 µs ± 0.0%",
       "80.0 GB/s", "100 GB/s", "80.0%", "50%"]  # fmt: skip


@pytest.fixture
def gpu(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "400")
    FakeNvml([(1980, 2619, 60, 0x1, 90_000), (1500, 2619, 71, 0x4, 690_000)], power_limit_mw=700_000).install(
        monkeypatch
    )
    pytester.makeconftest(fake_conftest(backend=False, extra=GPU + WATCHED))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


@pytest.mark.parametrize("source", ["option", "ini"])
def test_the_option_adds_the_clock_columns(gpu: pytest.Pytester, source: str) -> None:
    if source == "ini":
        gpu.makeini("[pytest]\nroofline_report_clocks = true\n")
    args = ["--roofline-report-clocks"] if source == "option" else []
    result = gpu.runpytest("--roofline-report", "--roofline-json=out.json", *args)
    result.assert_outcomes(passed=1)
    header, row = table(result)
    assert header == [*TABLE_HEADERS[:-1], *CLOCK_HEADERS, "verdict"]
    assert row == [*ROW, "1500 (1500)", "2619 (2619)", "690 W of 700", "software power cap", "80.0%", "pass"]
    record = json.loads((gpu.path / "out.json").read_text())["measurements"][0]
    assert (record["clocks"]["median_sm_mhz"], record["attained_at_held_clock"]) == (1500, pytest.approx(0.8))


def test_without_it_the_table_has_no_clock_columns_and_the_json_still_has_the_clocks(
    gpu: pytest.Pytester,
) -> None:
    result = gpu.runpytest("--roofline-report", "--roofline-json=out.json")
    header, row = table(result)
    assert (header, row) == (list(TABLE_HEADERS), [*ROW, "pass"])
    record = json.loads((gpu.path / "out.json").read_text())["measurements"][0]
    assert (record["clocks"]["median_power_w"], record["clocks"]["events"]) == (690.0, ["software power cap"])


def test_a_cpu_measurements_clock_cells_are_empty(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-report", "--roofline-report-clocks")
    header, row = table(result)
    assert header == [*TABLE_HEADERS[:-1], *CLOCK_HEADERS, "verdict"]
    assert row == [*ROW, "pass"]  # nothing between the budget and the verdict
