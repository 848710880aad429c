"""``-p no:roofline``: the stub (``pytest_roofline.stub.py``) keeps a suite written for the
plugin running.

The stub is its own ``pytest11`` entry point (``roofline_stub``). Where the package was installed
before that entry point existed, these runs load it by name with ``-p pytest_roofline.stub``, as
the entry point does; ``-p no:roofline_stub`` turns it off.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

INSTALLED = any(ep.name == "roofline_stub" for ep in entry_points(group="pytest11"))
STUB = () if INSTALLED else ("-p", "pytest_roofline.stub")
OFF = ("-p", "no:roofline", *STUB)
NO_STUB = ("-p", "no:roofline_stub") if INSTALLED else ()

SUITE = """
import functools

import pytest

calls = []

def record(item):
    calls.append(item)

@pytest.mark.speed_of_light("gemm", M=64, N=64, K=64, dtype="fp32", min_fraction=0.9)
def test_fixture(roofline):
    assert roofline(record, "call", op="gemm", name="n") is None
    assert roofline.measure(record, kwargs={"item": "measure"}) is None
    roofline(record, setup=lambda: (("from setup",), {}))

@pytest.mark.speed_of_light("copy", n=1000, dtype="fp32")
def test_body():
    calls.append("body")

def test_after():
    assert calls == ["call", "measure", "from setup", "body"]  # each once, untimed
"""


def test_with_the_plugin_off_the_marker_and_the_fixture_still_work(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess(*OFF, "--strict-markers", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert "roofline report" not in result.stdout.str()


@pytest.mark.parametrize("mode", [OFF, ("--roofline-mode=off",)], ids=["plugin-off", "mode-off"])
def test_a_kernel_keyword_reaches_the_kernel_with_the_plugin_off_as_in_mode_off(
    pytester: pytest.Pytester, mode: tuple[str, ...]
) -> None:
    pytester.makepyfile(
        """
import numpy as np

def test_out(roofline):
    x, y, z = np.ones(4), np.ones(4), np.zeros(4)
    roofline(np.add, x, y, out=z, op="elementwise", n=4, inputs=2, name="add")
    assert (z == 2).all()
"""
    )
    pytester.runpytest_subprocess(*mode, "-p", "no:randomly").assert_outcomes(passed=1)


def test_without_the_stub_the_plugin_off_breaks_strict_markers(pytester: pytest.Pytester) -> None:
    # what the stub is for: the marker is unknown, and the fixture is missing
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-p", "no:roofline", *NO_STUB, "--strict-markers")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*'speed_of_light' not found in `markers` configuration option*"])


def test_with_the_plugin_off_its_options_and_ini_keys_are_accepted_and_ignored(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(
        "[pytest]\naddopts = --roofline-report --roofline-mode=report\nroofline_max_time = 0.1\n"
        "roofline_require_measurement = true\n"
    )
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess(*OFF, "--strict-markers", "--strict-config", "-p", "no:randomly")
    result.assert_outcomes(passed=3)


def test_with_the_plugin_off_the_markers_list_says_so(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*OFF, "--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.speed_of_light(op, *): * [[]pytest-roofline is disabled (-p no:roofline)*"]
    )


def test_with_the_plugin_off_estimate_works_on_a_table_device_and_device_says_why_not(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speed_of_light("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
        def test_estimate(roofline):
            e = roofline.estimate()
            assert (round(e.floor_s * 1e6), e.bound) == (139, "compute")
            assert roofline.estimate(K=8192, min_fraction=0.5).floor_s == pytest.approx(2 * e.floor_s)

        def test_no_device(roofline):
            roofline.estimate("copy", n=10, dtype="fp32")

        def test_device(roofline):
            roofline.device
        """
    )
    result = pytester.runpytest_subprocess(*OFF)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "roofline: pytest-roofline is disabled (-p no:roofline): roofline.estimate needs op= and device= "
            "a table key (such as 'h100-sxm'), given to the call or the marker: there is no session device",
            "roofline: pytest-roofline is disabled (-p no:roofline): there is no session device*",
        ]
    )


def test_with_the_plugin_off_bad_kwargs_and_setup_are_still_clear(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_kwargs(roofline):
            roofline(lambda: None, kwargs=[1])

        def test_setup(roofline):
            roofline(lambda: None, setup=lambda: 5)
        """
    )
    result = pytester.runpytest_subprocess(*OFF)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "roofline: kwargs must be a mapping of the kernel's keyword arguments*",
            "roofline: setup must return*",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


def test_with_the_plugin_on_the_stub_does_nothing(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_roofline_device(config, spec):
            from pytest_roofline import Device, Figure, Precision, Source, Unit

            peak = Figure(1e12, Source.DATASHEET)
            return Device("fake", "Fake", "cpu", {(Precision.FP32, Unit.VECTOR): peak}, peak)
        """
    )
    pytester.makepyfile(
        """
        import pytest
        from pytest_roofline import Roofline

        def test_the_plugins_fixture(roofline, pytestconfig):
            assert isinstance(roofline, Roofline)
            assert not pytestconfig.pluginmanager.has_plugin("roofline-stub-fixtures")
        """
    )
    result = pytester.runpytest_subprocess(*STUB, "--roofline-mode=off")
    result.assert_outcomes(passed=1)
    markers = pytester.runpytest_subprocess(*STUB, "--markers").stdout.str()
    assert markers.count("@pytest.mark.speed_of_light") == 1
    assert "disabled" not in markers


def test_importing_the_stub_imports_nothing_but_pytest() -> None:
    code = (
        "import sys, pytest\n"
        "before = set(sys.modules)\n"
        "import pytest_roofline.stub\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "['pytest_roofline', 'pytest_roofline.stub']"
