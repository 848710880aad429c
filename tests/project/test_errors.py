"""One error base: our errors are RooflineErrors that keep their built-in base, only they become one-line
failures, and a bug (any other exception) keeps its traceback."""

from __future__ import annotations

import pytest
from conftest import GEMM

import pytest_roofline as rl
from pytest_roofline.analysis.compiler import CompileError, ToolchainUnavailable
from pytest_roofline.errors import (
    InvalidTypeError,
    InvalidValueError,
    MeasurementError,
    RooflineError,
    RooflineUsageError,
    UnavailableError,
)
from pytest_roofline.model.devices import DeviceError
from pytest_roofline.model.op_registry import OpError
from pytest_roofline.output.baseline import BaselineError
from pytest_roofline.plugin.failing import failing_the_test
from pytest_roofline.timing.calls import SetupError
from pytest_roofline.timing.cuda.loading import CupyInstallError


@pytest.mark.parametrize(
    ("error", "builtin", "usage"),
    [
        (InvalidValueError, ValueError, True),
        (InvalidTypeError, TypeError, True),
        (OpError, ValueError, True),
        (DeviceError, ValueError, True),
        (BaselineError, ValueError, True),
        (CompileError, ValueError, True),
        (SetupError, TypeError, True),
        (UnavailableError, RuntimeError, False),
        (CupyInstallError, RuntimeError, False),
        (ToolchainUnavailable, RuntimeError, False),
        (MeasurementError, RuntimeError, False),
    ],
)
def test_our_errors_keep_their_builtin_base(
    error: type[Exception], builtin: type[Exception], usage: bool
) -> None:
    assert issubclass(error, RooflineError)
    assert issubclass(error, builtin)  # `except ValueError` written against an older release still works
    assert issubclass(error, RooflineUsageError) is usage


def test_a_users_mistake_through_the_public_api_is_a_usage_error() -> None:
    with pytest.raises(rl.RooflineUsageError, match="unknown op 'gem'"):
        rl.estimate("gem", M=1, N=1, K=1, dtype="fp32", device="h100-sxm")
    with pytest.raises(rl.RooflineUsageError, match="max_time_s must be a positive number; got -1"):
        rl.Policy(max_time_s=-1.0)


def test_the_warning_is_one_class_wherever_it_is_imported_from() -> None:
    from pytest_roofline.errors import RooflineWarning

    assert RooflineWarning is rl.RooflineWarning
    assert not issubclass(RooflineWarning, RooflineError)  # a warning is a category, not an error


def test_only_our_errors_become_a_one_line_failure() -> None:
    with (
        pytest.raises(pytest.fail.Exception, match=r"^roofline: no such thing$"),
        failing_the_test(RooflineError),
    ):
        raise InvalidValueError("no such thing")
    with pytest.raises(ValueError, match="a bug"), failing_the_test(RooflineError):
        raise ValueError("a bug")  # not ours: it passes through, traceback and all


def test_a_bug_under_the_fixture_keeps_its_traceback(pytester: pytest.Pytester) -> None:
    """A device hook that raises a plain ValueError is a bug in that hook: its traceback shows, where a
    RooflineError raised there would be one line."""
    pytester.makeconftest(
        """
        from pytest_roofline.errors import UnavailableError

        def pytest_roofline_device(config, spec):
            if spec == "cpu":
                raise ValueError("a bug in the hook")
            raise UnavailableError("no such accelerator here")
        """
    )
    pytester.makepyfile(
        f"""
        def test_bug(roofline):
            roofline.estimate("gemm", {GEMM}, dtype="fp32", device="cpu")

        def test_ours(roofline):
            roofline.estimate("gemm", {GEMM}, dtype="fp32", device="auto")
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ['*raise ValueError("a bug in the hook")*', "E * ValueError: a bug in the hook"]
    )
    result.stdout.fnmatch_lines(["*roofline: no such accelerator here*"])
    result.stdout.no_fnmatch_line("*raise UnavailableError*")
