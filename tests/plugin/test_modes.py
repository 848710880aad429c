"""``--roofline-mode`` enforce, report and off, and a marker's device that is or is not here.

Every run goes through pytester with the fake device and the scripted timer of ``conftest.py``:
floors of 2 ms for the standard shapes, 2.5 ms a call (80%) unless a test says otherwise.
"""

from __future__ import annotations

import pytest
from conftest import COPY, GEMM, results

# -- modes -------------------------------------------------------------------------------------


VERDICTS = f"""
import pytest

@pytest.mark.fake_time(20e-3)
def test_miss(roofline):
    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")

@pytest.mark.fake_time(1e-3)
def test_ftl(roofline):
    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")

@pytest.mark.fake_time(20e-3)
@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
def test_marked_miss():
    pass
"""


def test_enforce_mode_fails_misses_and_faster_than_light(rl: pytest.Pytester) -> None:
    rl.makepyfile(VERDICTS)
    rl.runpytest("--roofline-mode=enforce").assert_outcomes(failed=3)


def test_report_mode_measures_and_reports_but_never_fails(rl: pytest.Pytester) -> None:
    rl.makepyfile(VERDICTS)
    result = rl.runpytest("--roofline-mode=report", "--roofline-report")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_marked_miss*copy n=25000000*MISS (report)",
            "*test_miss*gemm*MISS (report)",
            "*test_ftl*gemm*faster-than-light (report)",
            "3 measurement(s): 1 faster-than-light, 2 MISS; mode report",
        ]
    )


def test_off_mode_calls_each_kernel_once_untimed(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest
        from conftest import BACKEND

        calls = []

        def test_fixture(roofline):
            assert roofline(lambda: calls.append("fixture"), op="copy", {COPY}, dtype="fp32") is None
            assert roofline.measure(lambda: calls.append("measure"), op="copy", {COPY}, dtype="fp32") is None

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
        def test_marker():
            calls.append("marker")

        def test_after():
            assert calls == ["fixture", "measure", "marker"]
            assert BACKEND.calls == 0
        """
    )
    reprec = rl.inline_run("--roofline-mode=off")
    reprec.assertoutcome(passed=3)
    assert results(reprec) == []


def test_off_mode_still_checks_the_call(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        def test_typo(roofline):
            roofline(lambda: None, op="gemm", M=1, N=1, k=1, dtype="fp32")
        """
    )
    result = rl.runpytest("--roofline-mode=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*gemm needs K; 'k' went to the kernel as a keyword: did you mean K?*"])


# -- skip ------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize("mode", ["enforce", "off"])
def test_a_marker_device_that_is_not_here_skips_with_the_reason(rl: pytest.Pytester, mode: str) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", device="cuda")
        def test_gpu():
            raise AssertionError("a skipped test must not run")

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", device="h100-sxm")
        def test_table_gpu(roofline):
            raise AssertionError("a skipped test must not run")
        """
    )
    result = rl.runpytest("-rs", f"--roofline-mode={mode}", "--roofline-report")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        [
            # the test's own location, not the plugin's
            "SKIPPED [[]1[]] test_a_marker_device_that_is_not_here_skips_with_the_reason.py:3: "
            "needs CUDA device 0 (device='cuda'); 0 visible here*",
            "SKIPPED [[]1[]] test_a_marker_device_that_is_not_here_skips_with_the_reason.py:7: "
            "needs 'h100-sxm' (device='h100-sxm'): a table device that is not on this machine*",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(["*test_gpu*gemm*skipped", "  *test_gpu skipped: needs CUDA device 0*"])


def test_a_marker_device_that_is_here_runs(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", device="cpu")
        def test_cpu(roofline):
            assert roofline(lambda: None).estimate.device.key == "fake"
        """
    )
    rl.runpytest().assert_outcomes(passed=1)
