"""The built-in CPU device and host timer, end to end through pytest: no fake hooks, a seeded
calibration cache, and a calibration taken under load scaled by the probe beside the kernel.
"""

from __future__ import annotations

import json

import pytest
from fakes import seeded_capacities


def test_the_builtin_cpu_device_and_host_timer_end_to_end(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No fake hooks: the measured CPU (from a seeded cache, so nothing calibrates for seconds) and
    the real host timer. Generous budgets: nothing here asserts on how fast this machine is."""
    from pytest_roofline.machine.calibrate import calibrate_cpu
    from pytest_roofline.machine.calibration_cache import Ceilings
    from pytest_roofline.model.core import Figure, Precision, Source, Unit

    cache = pytester.path / "cache"
    fake = Ceilings(
        bandwidth=Figure(1e12, Source.MEASURED),  # 1 TB/s: every floor is tiny, every budget met
        peaks={(p, Unit.VECTOR): Figure(1e15, Source.MEASURED) for p in (Precision.FP64, Precision.FP32)},
        details=seeded_capacities(),
    )
    calibrate_cpu(cache_dir=cache / "pytest-roofline", measure=lambda: fake, peak=None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    pytester.makepyfile(
        """
        import numpy as np
        import pytest

        N = 1 << 16

        @pytest.mark.speed_of_light("copy", n=N, dtype="fp64", min_fraction=1e-6, max_time=0.05)
        def test_marker_times_the_body():
            a, b = np.ones(N), np.empty(N)
            np.copyto(b, a)
            assert b[0] == 1

        def test_fixture(roofline):
            a, b = np.ones(N), np.empty(N)
            r = roofline(np.copyto, b, a, op="copy", n=N, min_fraction=1e-6, max_time=0.05, cache="warm")
            assert r.measurement.backend == "cpu" and r.estimate.device.key == "cpu"
            assert r.time_s > 0 and r.stats.n >= 3 and not r.measurement.flushed
        """
    )
    result = pytester.runpytest_subprocess("--roofline-report", "--roofline-device=cpu")
    # (a subprocess, so the seeded cache directory is the one calibration reads)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["device: * [[]cpu*]  DRAM bandwidth 1.00 TB/s (measured)", "*2 pass; mode enforce"]
    )


@pytest.mark.parametrize(("ceilings", "outcome"), [("paired", "passed"), ("cached", "failed")])
def test_a_calibration_taken_under_load_is_scaled_by_the_probe_beside_the_kernel(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ceilings: str, outcome: str
) -> None:
    """A calibration taken at a busy moment is absurdly low (1 kB/s here), and so was its probe:
    their ratio still holds. With paired ceilings the probe timed beside the kernel scales the
    figure back to what the machine does now; the cached figure alone calls the copy faster
    than light."""
    from pytest_roofline.machine.calibrate import calibrate_cpu
    from pytest_roofline.machine.calibration_cache import Ceilings
    from pytest_roofline.model.core import Figure, Precision, Source, Unit
    from pytest_roofline.model.paired_ceilings import ProbeReference

    low = Figure(1e3, Source.MEASURED)
    probes = {
        "bandwidth": ProbeReference("bandwidth", "copy", 2**20, 1e3, 1e3, 1e3, "2026-01-01"),
        **{p: ProbeReference(p, "matmul", 64, 1e3, 1e3, 1e3, "2026-01-01") for p in ("fp64", "fp32")},
    }
    loaded = Ceilings(
        bandwidth=low,
        peaks={(p, Unit.VECTOR): low for p in (Precision.FP64, Precision.FP32)},
        probes=probes,
        details=seeded_capacities(),
    )
    cache = pytester.path / "cache"
    calibrate_cpu(cache_dir=cache / "pytest-roofline", measure=lambda: loaded, peak=None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    pytester.makepyfile(
        f"""
        import time

        import numpy as np

        def test_copy(roofline):
            a, b = np.ones(1024), np.empty(1024)

            def slow_copy():  # far below any ceiling the probe can find: nothing here is near a limit
                np.copyto(b, a)
                time.sleep(2e-4)

            r = roofline(slow_copy, op="copy", n=1024, dtype="fp64", min_fraction=1e-9, max_time=0.05)
            assert (r.ceiling is not None) == {ceilings == "paired"}
            assert r.ceiling is None or r.ceiling.speed > 1e3
        """
    )
    # a machine this busy may make the verdict inconclusive: that fails too, with its reason
    result = pytester.runpytest_subprocess(
        "--roofline-device=cpu", f"--roofline-ceilings={ceilings}", "--roofline-inconclusive=fail"
    )
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        out = result.stdout.str()
        assert "ran faster than light" in out or ("is inconclusive" in out and "contention" in out)
    else:  # the summary says the calibration was taken under load; the session end raised the
        # probe's best rate in the cache, and nothing else
        result.stdout.fnmatch_lines(["roofline: this CPU ran *x faster than when it was calibrated*"])
        (path,) = (cache / "pytest-roofline").glob("cpu-*.json")
        cached = json.loads(path.read_text())["probes"]["bandwidth"]
        assert cached["best_rate"] > 1e6
        assert (cached["rate"], cached["figure"]) == (1e3, 1e3)
