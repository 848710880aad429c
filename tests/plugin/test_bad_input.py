"""Bad input in markers and calls: a clear message on that test, naming the parameter and the value.

Never an INTERNALERROR, and the other tests of the run still run. Marker mistakes are caught at
setup (an error on the test), call mistakes when the fixture is called (a failure).
"""

from __future__ import annotations

import json

import pytest
from conftest import COPY, GEMM

MARKER_MISTAKES = [
    pytest.param('"gem", M=1000, N=1000, K=1000, dtype="fp32"',
                 "unknown op 'gem' (did you mean 'gemm'*?); known ops: *", id="unknown-op"),
    pytest.param('"gemm", M=1000, N=1000, dtype="fp32"',
                 "gemm needs K (it takes gemm(M, N, K, batch=1, a_dtype=None, *))", id="missing-parameter"),
    pytest.param('"gemm", M=1000, N=1000, k=1000, dtype="fp32"',
                 "gemm has no parameter 'k' (did you mean 'K'?); it takes gemm(M, N, K, batch=1, *) "
                 "and the keywords min_fraction, dtype, device, math, stat, max_time, cache, flush, stream, "
                 "block",
                 id="unknown-parameter"),
    pytest.param('"gemm", M=0, N=1000, K=1000, dtype="fp32"',
                 "gemm: M must be a positive integer; got 0", id="non-positive-size"),
    pytest.param('"gemm", M=10**200, N=10**200, K=10**200, dtype="fp32"',
                 "gemm: M must be at most 2**63 - 1 (9.22e+18); got 1.00e+200", id="overflowing-size"),
    pytest.param('"gemm", M=1000, N=1.5, K=1000, dtype="fp32"',
                 "gemm: N must be a positive integer; got 1.5", id="non-integer-size"),
    pytest.param('"gemm", M=1000, N=1000, K="1000", dtype="fp32"',
                 "gemm: K must be a positive integer; got '1000'", id="string-size"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="float33"',
                 "unknown dtype 'float33'*; accepted: fp64, fp32, *", id="unknown-dtype"),
    pytest.param('"gemm", M=1000, N=1000, K=1000',
                 "gemm needs dtype: pass dtype=... to the marker or parametrize dtype", id="no-dtype"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", min_fraction=1.5',
                 "min_fraction must be a number in (0, 1]; got 1.5", id="min-fraction-above-1"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", min_fraction=0',
                 "min_fraction must be a number in (0, 1]; got 0", id="min-fraction-0"),
    pytest.param('"custom", dtype="fp32"',
                 "custom needs flops or bytes greater than 0: with neither there is nothing to bound",
                 id="custom-op-without-work"),
    pytest.param('"gemm", "fp32"',
                 "@pytest.mark.speed_of_light takes the op as its only positional argument; "
                 "got 'gemm', 'fp32' (write the others as keywords, e.g. dtype=...)", id="extra-positional"),
    pytest.param('min_fraction=0.5',
                 "@pytest.mark.speed_of_light needs an op when the test does not use the roofline fixture (an"
                 " op is inferred only from a roofline(kernel, *args) call)",
                 id="no-op"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", max_tme=0.1',
                 "gemm has no parameter 'max_tme' (did you mean 'max_time'?)*", id="misspelled-keyword"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", stat="p99"',
                 "stat must be one of median, min, mean; got 'p99'", id="unknown-stat"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", max_time=-1',
                 "max_time must be a positive number; got -1", id="negative-max-time"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", cache="hot"',
                 "cache must be 'cold' or 'warm'; got 'hot'", id="unknown-cache"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", flush=True',
                 "gemm has no parameter 'flush'*", id="flush-is-no-keyword"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", math="fast"',
                 "math must be one of 'ieee', 'tf32'; got 'fast'", id="unknown-math"),
    pytest.param('"gemm", M=1000, N=1000, K=1000, dtype="fp32", device="h100-sx"',
                 "unknown device 'h100-sx' (did you mean 'h100-sxm'?)*", id="unknown-device"),
    pytest.param('M=1000', "@pytest.mark.speed_of_light: parameters ['M'] given without an op; with no op,"
                 " the op is inferred from the roofline(kernel, *args) call and only flops= and bytes= may be"
                 " given (pass op=... for the others)",
                 id="parameters-without-op"),
]  # fmt: skip


def test_each_marker_mistake_is_an_error_on_its_own_test(rl: pytest.Pytester) -> None:
    source = ["import pytest"]
    for case in MARKER_MISTAKES:
        marker, _ = case.values
        source.append(
            f"@pytest.mark.speed_of_light({marker})\ndef test_{case.id.replace('-', '_')}():\n    pass\n"
        )
    source.append("def test_unmarked():\n    pass\n")
    rl.makepyfile("\n\n".join(source))
    result = rl.runpytest()
    result.assert_outcomes(errors=len(MARKER_MISTAKES), passed=1)
    for case in MARKER_MISTAKES:
        _, message = case.values
        result.stdout.fnmatch_lines(
            [f"*ERROR at setup of test_{case.id.replace('-', '_')} *", f"roofline: {message}"]
        )
    result.stdout.no_fnmatch_line("*During handling of the above exception*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_a_bad_parametrize_value_is_an_error_naming_it(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("M", [1000, -5])
        @pytest.mark.speed_of_light("gemm", N=1000, K=1000, dtype="fp32")
        def test_marked(M):
            pass
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(["roofline: gemm: M must be a positive integer; got -5"])


CONV = "N=1, C=3, W=8, K=4, S=3"
CROSS_MISTAKES = [
    pytest.param(f'"conv2d", {CONV}, H=3, R=5, dtype="fp32"',
                 "conv2d: the filter (R=5) does not fit in H=3 with padding=0; the output would be empty",
                 id="filter-larger-than-input"),
    pytest.param('"custom", flops=0, bytes=0, unit="vector", dtype="fp32"',
                 "custom needs flops or bytes greater than 0: with neither there is nothing to bound",
                 id="custom-op-without-work"),
    pytest.param(f'"gemm", {GEMM}, dtype="fp16", math="tf32"',
                 "math='tf32' applies to fp32 (or complex64) data only; dtype is fp16", id="tf32-with-fp16"),
    pytest.param('"elementwise", n=8, inputs=0, outputs=0, dtype="fp32"',
                 "elementwise: inputs and outputs cannot both be 0", id="elementwise-without-operands"),
]  # fmt: skip


@pytest.mark.parametrize("fixture", [True, False], ids=["fixture", "body-is-the-kernel"])
def test_cross_parameter_mistakes_of_a_marker_are_errors_at_setup(rl: pytest.Pytester, fixture: bool) -> None:
    """Before the body runs (the body would record that it ran), for a test that calls the fixture
    too: the marker gives every parameter the op requires, so it describes a whole kernel."""
    source = ["import pathlib\nimport pytest"]
    for case in CROSS_MISTAKES:
        marker, _ = case.values
        name = case.id.replace("-", "_")
        args, call = ("roofline", "    roofline(lambda: None)\n") if fixture else ("", "")
        source.append(
            f"@pytest.mark.speed_of_light({marker})\ndef test_{name}({args}):\n"
            f"    pathlib.Path('ran').write_text('the body ran')\n{call}"
        )
    rl.makepyfile("\n\n".join(source))
    result = rl.runpytest()
    result.assert_outcomes(errors=len(CROSS_MISTAKES))
    for case in CROSS_MISTAKES:
        _, message = case.values
        result.stdout.fnmatch_lines(
            [f"*ERROR at setup of test_{case.id.replace('-', '_')} *", f"roofline: {message}"]
        )
    assert not (rl.path / "ran").exists()


def test_cross_parameter_mistakes_with_parametrize_values_are_errors_at_setup(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.parametrize("H", [8, 3])
        @pytest.mark.speed_of_light("conv2d", {CONV}, R=5, dtype="fp32")
        def test_conv(roofline, H):
            roofline(lambda: None)

        @pytest.mark.parametrize("dtype", ["fp32", "fp16"])
        @pytest.mark.speed_of_light("gemm", {GEMM}, math="tf32")
        def test_gemm(roofline, dtype):
            roofline(lambda: None)
        """
    )
    result = rl.runpytest("--roofline-mode=report")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_conv[[]3[]]*",
            "roofline: conv2d: the filter (R=5) does not fit in H=3 with padding=0; the output would be*",
            "*ERROR at setup of test_gemm[[]fp16[]]*",
            "roofline: math='tf32' applies to fp32 (or complex64) data only; dtype is fp16",
        ]
    )


def test_a_marker_that_leaves_parameters_to_the_call_is_checked_at_the_call(rl: pytest.Pytester) -> None:
    """What the marker does not give, the call may: no rule is judged on a half-told kernel."""
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("custom", unit="tensor", dtype="fp32")
        def test_custom(roofline):
            roofline(lambda: None, flops=2e9)

        @pytest.mark.speed_of_light("conv2d", {CONV}, H=3, dtype="fp32")
        def test_conv(roofline):
            roofline(lambda: None, R=3)

        @pytest.mark.speed_of_light("gemm", {GEMM}, math="tf32")
        def test_gemm(roofline):
            roofline(lambda: None, dtype="fp32")
        """
    )
    rl.runpytest("--roofline-mode=report").assert_outcomes(passed=3)


CALL_MISTAKES = [
    pytest.param(f'42, op="copy", {COPY}, dtype="fp32"', "the kernel must be callable; got 42 (int)",
                 id="non-callable-kernel"),
    pytest.param('(lambda: None), dtype="fp32"',  # (not an estimate's case: it has no kernel to infer from)
                 "no op was given, and nothing to infer one from: the kernel is no call the catalogue knows"
                 " and holds no array (none among its arguments, kwargs, functools.partial arguments or"
                 " closure; an array read from a module's globals is not seen); pass op=... (`roofline ops`"
                 " lists them), or bytes= and flops=",
                 id="no-op"),
    pytest.param('lambda: None, op="cpy", n=10, dtype="fp32"', "unknown op 'cpy' (did you mean 'copy'?)*",
                 id="unknown-op"),
    pytest.param('lambda: None, op="gemm", M=1000, N=1000, dtype="fp32"', "gemm needs K (it takes *)",
                 id="missing-parameter"),
    pytest.param(f'lambda: None, op="copy", {COPY}, size=3, dtype="fp32"',
                 "copy has no parameter 'size'; it takes copy(n) and the keywords *", id="unknown-parameter"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", min_fracton=0.5',
                 "copy has no parameter 'min_fracton' (did you mean 'min_fraction'?)*",
                 id="misspelled-keyword"),
    pytest.param('lambda: None, op="copy", n=-1, dtype="fp32"', "copy: n must be a positive integer; got -1",
                 id="non-positive-size"),
    pytest.param('lambda: None, op="copy", n=2.5, dtype="fp32"',
                 "copy: n must be a positive integer; got 2.5",
                 id="non-integer-size"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="float33"', "unknown dtype 'float33'*",
                 id="unknown-dtype"),
    pytest.param(f'lambda: None, op="copy", {COPY}',
                 "copy needs dtype: pass dtype=... to the marker or the call",
                 id="no-dtype"),
    pytest.param(f'lambda a: None, __import__("numpy").zeros(3, "<U1"), op="copy", {COPY}',
                 "copy: no dtype was given, and argument 0 has dtype <U1, which is not one: dtype '<U1' is "
                 "not numeric (strings)*; pass dtype=... to the marker or the call", id="inferred-dtype"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", min_fraction=2',
                 "min_fraction must be a number in (0, 1]; got 2", id="min-fraction-above-1"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", min_fraction=-0.5',
                 "min_fraction must be a number in (0, 1]; got -0.5", id="negative-min-fraction"),
    pytest.param('lambda: None, op="custom", dtype="fp32", flops=0, bytes=0',
                 "custom needs flops or bytes greater than 0*", id="custom-op-without-work"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", device="h100-sx"',
                 "unknown device 'h100-sx' (did you mean 'h100-sxm'?)*", id="unknown-device"),
]  # fmt: skip


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize("how", ["roofline", "roofline.measure"])
def test_a_calls_device_that_is_not_here_skips_as_the_markers_does(rl: pytest.Pytester, how: str) -> None:
    rl.makepyfile(
        f"""
        def test_elsewhere(roofline):
            {how}(lambda: None, op="copy", {COPY}, dtype="fp32", device="h100-sxm")
        """
    )
    result = rl.runpytest("-rs", "--roofline-report")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*1 skipped; mode enforce",
            "SKIPPED [[]1[]] test_a_calls_device_*.py:2: needs 'h100-sxm'*not on this machine*",
        ]
    )  # the test's own line, not the plugin's


@pytest.mark.usefixtures("no_gpu")
def test_an_estimate_on_a_table_device_needs_no_local_hardware(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        def test_napkin(roofline):
            e = roofline.estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
            assert (round(e.floor_s * 1e6), e.bound) == (139, "compute")
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_an_estimate_with_no_op_says_where_to_give_one(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        def test_napkin(roofline):
            roofline.estimate(dtype="fp32")
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: no op: pass op=... to roofline(...) or mark the test with "
            "@pytest.mark.speed_of_light(op, ...) (`roofline ops` lists them)"
        ]
    )


#: a fixture call sends keywords that are neither the op's nor its own to the kernel (which takes none)
SENT_TO_THE_KERNEL = {
    "unknown-parameter": "'size' went to the kernel as a keyword, being neither a parameter of copy nor a"
    " keyword of the roofline fixture, but the kernel takes no keyword 'size'",
    "misspelled-keyword": "'min_fracton' went to the kernel as a keyword, * but the kernel takes no keyword"
    " 'min_fracton' (did you mean 'min_fraction'?)",
}


@pytest.mark.parametrize("how", ["call", "measure", "estimate"])
def test_each_call_mistake_fails_its_own_test(rl: pytest.Pytester, how: str) -> None:
    cases = []
    for case in CALL_MISTAKES:
        call, message = case.values
        if how != "estimate":
            message = SENT_TO_THE_KERNEL.get(str(case.id), message)
        if how == "estimate":
            if not call.startswith("lambda: None, "):
                continue  # estimate takes no kernel and no arguments
            call = call.removeprefix("lambda: None, ").replace('op="', '"', 1)
        cases.append((case.id.replace("-", "_"), call, message))
    method = {"call": "roofline", "measure": "roofline.measure", "estimate": "roofline.estimate"}[how]
    source = [f"def test_{name}(roofline):\n    {method}({call})\n" for name, call, _ in cases]
    source.append(f'def test_fine(roofline):\n    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")\n')
    rl.makepyfile("\n\n".join(source))
    result = rl.runpytest()
    result.assert_outcomes(failed=len(cases), passed=1)
    for name, _, message in cases:
        result.stdout.fnmatch_lines([f"*_ test_{name} _*", f"roofline: {message}"])
    result.stdout.no_fnmatch_line("*During handling of the above exception*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


KERNEL_MISTAKES = [
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", kwargs=[1, 2]',
                 "kwargs must be a mapping of the kernel's keyword arguments, such as kwargs={'out': out}; "
                 "got [[]1, 2[]] (list)", id="kwargs-not-a-mapping"),
    pytest.param(f'lambda **kw: None, op="copy", {COPY}, dtype="fp32", kwargs={{1: 2}}',
                 "kwargs keys are the kernel's keyword names, strings; got 1 (int)",
                 id="kwargs-key-not-a-string"),
    pytest.param(f'lambda out: None, op="copy", {COPY}, dtype="fp32", out=1, kwargs={{"out": 2}}',
                 "the kernel's keyword 'out' was given twice, as a keyword of the call and in kwargs=; "
                 "give it once", id="kernel-keyword-twice"),
    pytest.param('lambda **kw: None, op="gemm", M=8, N=8, KK=8, dtype="fp32"',
                 "gemm needs K; 'KK' went to the kernel as a keyword: did you mean K? (* goes in kwargs=*",
                 id="missing-parameter-sent-to-the-kernel"),
    pytest.param(f'lambda out: None, op="copy", {COPY}, kwargs={{"out": Float33()}}',
                 "copy: no dtype was given, and kwargs[[]'out'[]] has dtype float33, which is not one: "
                 "unknown dtype 'float33'*; pass dtype=... to the marker or the call", id="kwargs-dtype"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", setup=5',
                 "setup must be callable (it runs before every timed call); got 5 (int)",
                 id="setup-not-callable"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", setup=lambda: 5',
                 "setup must return None, or (args, kwargs) for the kernel's next call (a tuple or list and "
                 "a dict); got 5 (int)", id="setup-returns-something-else"),
    pytest.param(f'lambda a: None, 1, op="copy", {COPY}, dtype="fp32", setup=lambda: ((2,), {{}})',
                 "setup returned the kernel's arguments, and the call gave arguments too: give them in one "
                 "place (*)", id="arguments-from-the-call-and-setup"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", name=3',
                 "name must be a string; got 3 (int)", id="name-not-a-string"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", name="two\\nlines"',
                 "name must be printable text on one line (no newline, tab or control character); "
                 "got 'two\\nlines'", id="name-with-a-newline"),
    pytest.param(f'lambda: None, op="copy", {COPY}, dtype="fp32", name="nul\\x00"',
                 "name must be printable text on one line (*); got 'nul\\x00'", id="name-with-a-nul"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "args"),
    [("roofline", ()), ("roofline.measure", ()), ("roofline", ("--roofline-mode=off",))],
    ids=["call", "measure", "off"],
)
def test_each_kernel_argument_mistake_fails_its_own_test(
    rl: pytest.Pytester, method: str, args: tuple[str, ...]
) -> None:
    cases = [(case.id.replace("-", "_"), *case.values) for case in KERNEL_MISTAKES]
    source = ["class Float33:\n    dtype = 'float33'\n"]
    source += [f"def test_{name}(roofline):\n    {method}({call})\n" for name, call, _ in cases]
    source.append(f'def test_fine(roofline):\n    roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")\n')
    rl.makepyfile("\n\n".join(source))
    result = rl.runpytest("--roofline-report", *args)
    result.assert_outcomes(failed=len(cases), passed=1)
    for name, _, message in cases:
        result.stdout.fnmatch_lines([f"*_ test_{name} _*", f"roofline: {message}"])
    result.stdout.no_fnmatch_line("*During handling of the above exception*")
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


# -- in a pytest run ------------------------------------------------------------------------------

MARKER_MISTAKES = [
    pytest.param('"copy", n=8, dtype="int46"', "unknown dtype 'int46' (did you mean 'int64'?); accepted: *",
                 id="misspelled-integer"),
    pytest.param('"copy", n=8, dtype="complx128"', "unknown dtype 'complx128' (did you mean 'complex128'?)*",
                 id="misspelled-complex"),
    pytest.param('"copy", n=8, dtype="u8"', "dtype 'u8' is ambiguous: *", id="ambiguous"),
    pytest.param('"copy", n=8, dtype="<U5"', "dtype '<U5' is not numeric (strings)*", id="string"),
    pytest.param('"fft", n=1024, dtype="fp32"', "fft takes complex data only*; dtype is fp32*",
                 id="real-fft"),
    pytest.param('"layernorm", rows=8, cols=8, dtype="complex64"', "layernorm takes no complex data*",
                 id="complex-layernorm"),
]  # fmt: skip


@pytest.mark.parametrize("fixture", [True, False], ids=["with-fixture", "marker-only"])
def test_each_dtype_mistake_in_a_marker_is_an_error_at_setup(rl: pytest.Pytester, fixture: bool) -> None:
    source = ["import pytest"]
    for case in MARKER_MISTAKES:
        marker, _ = case.values
        body = "roofline(lambda: None)" if fixture else "pass"
        args = "roofline" if fixture else ""
        source.append(
            f"@pytest.mark.speed_of_light({marker})\n"
            f"def test_{case.id.replace('-', '_')}({args}):\n    {body}\n"
        )
    rl.makepyfile("\n\n".join(source))
    result = rl.runpytest()
    result.assert_outcomes(errors=len(MARKER_MISTAKES))
    for case in MARKER_MISTAKES:
        _, message = case.values
        result.stdout.fnmatch_lines(
            [f"*ERROR at setup of test_{case.id.replace('-', '_')} *", f"roofline: {message}"]
        )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_call_dtype_mistakes_fail_their_tests(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import numpy as np

        def test_objects(roofline):
            roofline(lambda a: None, np.array([None, 1]), op="copy", {COPY})

        def test_strings(roofline):
            roofline(lambda a: None, np.array(["ab"]), op="copy", {COPY})

        def test_integer_fft(roofline):
            roofline(lambda: None, op="fft", n=1024, dtype="int32")

        def test_typo(roofline):
            roofline.estimate("copy", {COPY}, dtype="unit8", device="h100-sxm")
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines([
        "roofline: copy: no dtype was given, and argument 0 has dtype object, which is not one: dtype "
        "'object' is not numeric (Python objects)*; pass dtype=... to the marker or the call",
        "roofline: copy: no dtype was given, and argument 0 has dtype <U2, which is not one: dtype '<U2' "
        "is not numeric (strings)*",
        "roofline: fft takes complex data only (complex32, complex64 or complex128); dtype is int32*",
        "roofline: unknown dtype 'unit8' (did you mean 'uint8'?)*",
    ])  # fmt: skip
    result.stdout.no_fnmatch_line("*did you mean 'tf32'*")
    result.stdout.no_fnmatch_line("*Traceback*")


def test_integer_and_complex_kernels_are_measured_and_reported(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import numpy as np
        import pytest

        @pytest.mark.speed_of_light("elementwise", {COPY}, dtype="int32")
        def test_int32(roofline):
            roofline(lambda: None)

        def test_inferred_int64(roofline):
            roofline(lambda a: None, np.zeros(2, dtype=np.int64), op="copy", {COPY})

        @pytest.mark.speed_of_light("fft", n=2**20, batch=4, dtype="complex64")
        def test_fft(roofline):
            roofline(lambda: None)
        """
    )
    result = rl.runpytest("--roofline-mode", "report", "--roofline-report", "--roofline-json", "out.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_int32 *elementwise n=25000000 * int32 * memory (compute unknown) *",
            "*test_inferred_int64 *copy n=25000000 * int64 * memory  *",
            "*test_fft *fft n=1048576 batch=4 * complex64→fp32 * memory  *",
        ]
    )
    data = json.loads((rl.path / "out.json").read_text())
    by_test = {m["nodeid"].rpartition("::")[2]: m for m in data["measurements"]}
    assert by_test["test_int32"]["compute_s"] is None
    assert by_test["test_int32"]["peak_flops"] is None
    assert by_test["test_int32"]["bytes"] == 25_000_000 * 4 * 2
    assert (by_test["test_inferred_int64"]["dtype"], by_test["test_inferred_int64"]["bytes"]) == (
        "int64",
        4e8,
    )
    assert by_test["test_fft"]["peak_precision"] == "fp32"
    assert by_test["test_fft"]["flops"] == 5 * 4 * 2**20 * 20


DTYPE_TESTS = """
import numpy as np
import pytest

F32 = np.ones(1024, np.float32)


@pytest.mark.speed_of_light("elementwise", n=1024, inputs=2, dtype="fp16")
def test_fp16_declared_over_fp32(roofline):
    roofline(np.add, F32, F32, np.empty_like(F32))


@pytest.mark.speed_of_light("gemm", M=32, N=32, K=32, dtype="fp32", math="tf32")
def test_tf32_math_over_fp32(roofline):
    a = np.ones((32, 32), np.float32)
    roofline(np.matmul, a, a)


@pytest.mark.speed_of_light("quantize", rows=4, cols=256, dtype="fp32")
def test_one_operand_of_the_format_is_enough(roofline):
    roofline(lambda x, out: None, np.ones((4, 256), np.float32), np.empty((4, 256), np.uint8))


@pytest.mark.speed_of_light("elementwise", n=1024, dtype="fp32")
def test_no_float_array_nothing_checked(roofline):
    roofline(lambda i: None, np.arange(1024))
"""


def test_a_dtype_no_float_array_has_is_an_error_naming_both(rl: pytest.Pytester) -> None:
    """A newcomer's dtype="float16" over float32 arrays was judged as fp16, at half the bytes."""
    rl.makepyfile(test_declared_dtypes=DTYPE_TESTS)
    result = rl.runpytest("--roofline-mode=report")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*elementwise: dtype='fp16', but no floating-point array the kernel is given is fp16 (argument 0"
            " fp32, argument 1 fp32, argument 2 fp32): the floor would count every byte at fp16's width; pass"
            " dtype='fp32' (and math=... for math in another format, such as math='tf32')*"
        ]
    )
