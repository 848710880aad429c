"""--roofline-diagnose: a GPU measurement's miss carries the bottleneck procedure's likely causes.

The fake device of ``conftest.py`` with its kind set to ``cuda`` (the procedure is a GPU one) and
its scripted backend: 20 ms a call of a 2 ms floor attains 10%.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import COPY, fake_conftest

GPU = """

_cpu_device = fake_device


def fake_device():
    import dataclasses

    return dataclasses.replace(_cpu_device(), kind="cuda")
"""

SUITE = f"""
import pytest

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.5)
@pytest.mark.fake_time(20e-3)
def test_slow_copy(roofline):
    roofline(lambda: None)

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.5)
def test_fast_copy(roofline):
    roofline(lambda: None)
"""


@pytest.fixture
def gpu(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(fake_conftest(extra=GPU))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def diagnoses(pytester: pytest.Pytester) -> dict[str, object]:
    data = json.loads((pytester.path / "out.json").read_text())
    return {r["nodeid"].split("::")[1]: r["diagnosis"] for r in data["measurements"]}


def test_a_miss_says_its_likely_causes_by_default(gpu: pytest.Pytester) -> None:
    result = gpu.runpytest("--roofline-json=out.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*attained 10.0% of speed of light (budget 50%): copy[[]n=25000000 fp32[]]*",
            "likely causes (generic: nothing specific known):",
            "  1. memory-bound at 10.0% of bandwidth: coalesce global accesses*",
        ]
    )
    seen = diagnoses(gpu)
    assert seen["test_fast_copy"] is None  # a pass is not diagnosed by default
    assert isinstance(seen["test_slow_copy"], dict)
    assert seen["test_slow_copy"]["generic"] is True


def test_all_diagnoses_every_measurement_and_off_none(gpu: pytest.Pytester) -> None:
    gpu.runpytest("--roofline-json=out.json", "--roofline-diagnose=all").assert_outcomes(passed=1, failed=1)
    assert all(isinstance(d, dict) for d in diagnoses(gpu).values())
    result = gpu.runpytest("--roofline-json=out.json", "--roofline-diagnose=off")
    result.stdout.no_fnmatch_line("likely causes*")
    assert all(d is None for d in diagnoses(gpu).values())


def test_a_cpu_measurement_is_not_diagnosed(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_suite=SUITE)
    result = rl.runpytest("--roofline-diagnose=all")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.no_fnmatch_line("likely causes*")  # the procedure is for GPU kernels


def test_a_bad_value_is_a_usage_error(gpu: pytest.Pytester) -> None:
    result = gpu.runpytest("--roofline-diagnose=always")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-diagnose: expected one of off, miss, all, got 'always'*"])


CLOCKED = """

import contextlib
import types

from pytest_roofline.model.conditions import ClockLog, ClockSample
from pytest_roofline.timing.clocks import ClockWatcher


class ClockedBackend(ScriptedBackend):
    @contextlib.contextmanager
    def watch_clocks(self):
        samples = (ClockSample(0.0, 1980, 2619, 60, 0), ClockSample(0.01, 1410, 2619, 84, 0x20))
        yield types.SimpleNamespace(log=ClockLog(True, samples=samples, max_sm_mhz=1980, max_mem_mhz=2619))


CLOCKED_BACKEND = ClockedBackend((20e-3,), resolution_s=1e-9, device_name="fake accelerator")


def pytest_roofline_backend(config, device, spec):
    return CLOCKED_BACKEND
"""


def measured_slow(pytester: pytest.Pytester, backend: str, *args: str, **outcomes: int) -> dict[str, Any]:
    """The JSON record of a 10% copy measured on ``backend`` (a conftest's text) with ``args``."""
    pytester.makeconftest(
        fake_conftest(backend=False, extra=GPU) + "\nfrom fakes import ScriptedBackend\n" + backend
    )
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.5)
        def test_slow(roofline):
            roofline(lambda: None)
        """
    )
    result = pytester.runpytest("--roofline-json=out.json", *args)
    result.assert_outcomes(**outcomes)
    record: dict[str, Any] = json.loads((pytester.path / "out.json").read_text())["measurements"][0]
    return record


def test_a_throttled_gpu_measurement_is_inconclusive_and_its_clocks_are_in_the_json(
    pytester: pytest.Pytester,
) -> None:
    record = measured_slow(pytester, CLOCKED, "-W", "ignore::UserWarning", passed=1)  # inconclusive warns
    assert record["verdict"] == "inconclusive"
    assert record["verdict_reason"].startswith("the GPU slowed its clocks (")
    assert record["clocks"]["throttled"] is True
    assert (record["clocks"]["min_sm_mhz"], record["clocks"]["max_sm_mhz"]) == (1410, 1980)


PER_SAMPLE = CLOCKED.replace(
    "        yield types.SimpleNamespace(log=ClockLog(True, samples=samples, max_sm_mhz=1980,"
    " max_mem_mhz=2619))",
    """        log = ClockLog(True, samples=samples, max_sm_mhz=1980, max_mem_mhz=2619)
        yield SlowedFirst(log)


class SlowedFirst(ClockWatcher):
    \"\"\"A clock watch that can tell sample by sample (timing.clocks.ClockWatcher): each round's
    first sample ran slowed.\"\"\"

    def __init__(self, log):
        super().__init__()
        self.log = log
        self.rests = 0

    def slowed(self, spans):
        return [i == 0 for i in range(len(spans))]

    def rest(self, seconds):
        self.rests += 1""",
)


def test_a_miss_whose_slowed_samples_were_left_out_is_the_kernels(pytester: pytest.Pytester) -> None:
    """Judged sample by sample, the slowdown the clock log shows touched no sample the median uses:
    the miss stands, and the JSON says how many samples were left out."""
    assert PER_SAMPLE != CLOCKED
    record = measured_slow(pytester, PER_SAMPLE, failed=1)
    assert record["verdict"] == "MISS"
    clocks = record["clocks"]
    assert clocks["throttled"] is True
    assert clocks["slowed_samples_left_out"] > 0
    assert clocks["slowed_samples_kept"] == 0
    left_out = clocks["slowed_samples_left_out"]
    assert clocks["summary"].endswith(f"; {left_out} sample(s) at slowed clocks left out")
