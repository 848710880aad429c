"""The ``speed_of_light`` marker through pytest: alone (the body run once, then timed), beside the
fixture, on a class or module, from a param's marks or a hook, and fed by parametrize.

Every run goes through pytester with the fake device and the scripted timer of ``conftest.py``:
floors of 2 ms for the standard shapes, 2.5 ms a call (80%) unless a test says otherwise.
"""

from __future__ import annotations

import pytest
from conftest import COPY, GEMM, one_result, results


def test_marker_alone_runs_the_body_once_normally_then_times_it(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest
        from conftest import BACKEND

        calls = []

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_body():
            calls.append(BACKEND.calls)

        def test_after():
            assert calls[0] == 0  # the first run is the normal one, before any timing
            assert len(calls) > 10  # then the body was the timed kernel
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=2)
    result = one_result(reprec)
    assert result.attained == pytest.approx(0.8)
    assert result.estimate.label == "gemm[M=1000 N=1000 K=1000 fp32]"


def test_marker_alone_a_failing_assertion_fails_the_test_untimed(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_wrong():
            assert 1 + 1 == 3
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(failed=1)
    assert results(reprec) == []


def test_marker_alone_fails_below_budget(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(10e-3)
        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", min_fraction=0.5)
        def test_slow():
            pass
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*attained 20.0% of speed of light (budget 50%): gemm[[]M=1000 N=1000 K=1000 fp32[]]*"]
    )
    # the message alone, as with the fixture
    result.stdout.no_fnmatch_line("*All traceback entries are hidden*")


def test_op_may_be_positional_or_a_keyword(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
        def test_positional():
            pass

        @pytest.mark.speed_of_light(op="copy", {COPY}, dtype="fp32")
        def test_keyword():
            pass
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=2)
    assert [r.estimate.op for r in results(reprec)] == ["copy", "copy"]


def test_marker_and_fixture_together_the_call_overrides(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(5e-3)
        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", min_fraction=0.9)
        def test_both(roofline):
            r = roofline(lambda: None, K=2000, min_fraction=0.3)  # marker gives op, M, N, dtype
            assert r.estimate.params["K"] == 2000 and r.estimate.params["M"] == 1000
            assert r.min_fraction == 0.3
            assert r.floor_s == pytest.approx(4e-3)
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_marker_on_a_class_and_a_module_the_closest_wins(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        pytestmark = pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.1)

        def test_module(roofline):
            assert roofline(lambda: None).min_fraction == 0.1

        @pytest.mark.speed_of_light(min_fraction=0.2)
        class TestClass:
            def test_class(self, roofline):
                r = roofline(lambda: None)
                assert (r.estimate.op, r.min_fraction) == ("copy", 0.2)

            @pytest.mark.speed_of_light("gemm", {GEMM}, min_fraction=0.3)
            def test_function(self, roofline):
                r = roofline(lambda: None)
                assert (r.estimate.op, r.min_fraction, str(r.estimate.precision)) == ("gemm", 0.3, "fp32")

            def test_body_is_the_kernel(self):
                pass
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=4)
    assert len(results(reprec)) == 4


def test_a_marker_from_param_marks_or_added_by_a_hook_is_read(rl: pytest.Pytester) -> None:
    # Unmarked tests take a fast path; these markers are on the item only, or only from the hook on.
    rl.makeconftest(
        rl.path.joinpath("conftest.py").read_text()
        + f"""

def pytest_collection_modifyitems(items):
    for item in items:
        if item.name == "test_added_at_collection":
            item.add_marker(pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.name == "test_added_at_setup":
        item.add_marker(pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32"))
"""
    )
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.parametrize(
            "x", [1, pytest.param(2, marks=pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32"))]
        )
        def test_param(x):
            pass

        def test_added_at_collection():
            pass

        def test_added_at_setup():
            pass

        def test_unmarked():
            pass
        """
    )
    reprec = rl.inline_run()
    reprec.assertoutcome(passed=5)
    names = [r.nodeid.split("::")[-1] for r in results(reprec)]
    assert names == ["test_param[2]", "test_added_at_collection", "test_added_at_setup"]


def test_parametrize_feeds_the_marker_and_dtype(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("dtype", ["fp32", "fp64"])
        @pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (2000, 1000, 1000)])
        @pytest.mark.speed_of_light("gemm")
        def test_gemm(M, N, K, dtype):
            pass
        """
    )
    reprec = rl.inline_run("--roofline-mode=report")
    reprec.assertoutcome(passed=4)
    seen = {(r.estimate.params["M"], str(r.estimate.precision)) for r in results(reprec)}
    assert seen == {(1000, "fp32"), (2000, "fp32"), (1000, "fp64"), (2000, "fp64")}


def test_parametrize_feeds_the_fixture_below_marker_and_call(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.fake_time(7.5e-3)
        @pytest.mark.parametrize("M,N,K", [(3000, 3000, 3000)])
        @pytest.mark.speed_of_light("gemm", N=1000, dtype="fp32")
        def test_gemm(roofline, M, N, K):
            r = roofline(lambda: None, K=1000)
            params = r.estimate.params
            assert (params["M"], params["N"], params["K"]) == (3000, 1000, 1000)
        """
    )
    rl.runpytest().assert_outcomes(passed=1)
