"""What reaches the kernel, and what the plugin makes of tests that cannot be timed as written.

Keywords for the kernel (``kwargs=``), an untimed ``setup=`` before every call, the dtype read from
keywords and partials; a marker-only test whose body cannot run twice; a marked test that measures
nothing; names that the report, the JSON and ``--junitxml`` can show (and a loop over sizes told to
give them); ``stream=`` reaching the backend; kernels that cannot be timed as written (a coroutine or
generator function, a tensor on the meta device).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from conftest import COPY, GEMM, NO_MEASUREMENT_WARNS

# -- keywords for the kernel -------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["roofline", "roofline.measure"])
def test_kwargs_reach_the_kernel_on_every_call(rl: pytest.Pytester, how: str) -> None:
    rl.makepyfile(
        f"""
        seen = []

        def evaluate(expr, out, scale=1):
            seen.append((expr, out, scale))

        def test_keywords(roofline):
            {how}(evaluate, "2*x", kwargs={{"out": "o", "scale": 3}}, op="copy", {COPY}, dtype="fp32")
            assert len(seen) > 10 and set(seen) == {{("2*x", "o", 3)}}
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


DTYPE_CASES = [
    pytest.param("kernel, F64", "fp64", id="positional"),
    pytest.param('kernel, "2*x", kwargs={"out": F64}', "fp64", id="kwargs"),
    pytest.param('kernel, F32, kwargs={"out": F64}', "fp32", id="positional-before-kwargs"),
    pytest.param("functools.partial(kernel, F64)", "fp64", id="partial-argument"),
    pytest.param("functools.partial(kernel, out=F64)", "fp64", id="partial-keyword"),
    pytest.param('functools.partial(kernel, out=F64), kwargs={"b": F32}', "fp32", id="kwargs-before-partial"),
    pytest.param("nested()", "fp64", id="nested-partial"),
    pytest.param('kernel, ("2*x", [F64]), F32', "fp64", id="inside-a-tuple"),
    pytest.param('kernel, "2*x", {"out": F64}, F32', "fp64", id="inside-a-dict"),
    pytest.param('kernel, "2*x", kwargs={"pair": (None, F64)}', "fp64", id="inside-a-keyword's-tuple"),
]


@pytest.mark.parametrize(("call", "precision"), DTYPE_CASES)
def test_the_dtype_is_read_from_arguments_then_kwargs_then_a_partial(
    rl: pytest.Pytester, call: str, precision: str
) -> None:
    rl.makepyfile(
        f"""
        import functools

        class Array:
            def __init__(self, dtype):
                self.dtype = dtype

        F64, F32 = Array("float64"), Array("float32")

        def kernel(*args, **kwargs):
            pass

        def nested():
            inner = functools.partial(kernel, F64)
            inner.note = "kept apart"  # a partial with attributes is not merged into the outer one
            outer = functools.partial(inner)
            assert isinstance(outer.func, functools.partial)
            return outer

        def test_dtype(roofline):
            r = roofline.measure({call}, op="copy", {COPY})
            assert str(r.estimate.precision) == {precision!r}
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_the_dtype_of_a_bound_methods_object_is_its_kernels() -> None:
    """``roofline(x.sum, op=...)``: ``x`` is the data, as placement reads it too (timing/arrays.py)."""
    import numpy as np

    from pytest_roofline.plugin.request import dtype_of_arguments
    from pytest_roofline.timing.calls import KernelCall

    assert str(dtype_of_arguments("copy", KernelCall(np.ones(8, np.float16).sum))) == "fp16"
    # a class is no data (NumPy's scalar types have a dtype attribute, a descriptor)
    assert str(dtype_of_arguments("copy", KernelCall(print, (np.float32, np.ones(2))))) == "fp64"


@pytest.mark.parametrize("how", ["roofline", "roofline.measure"])
def test_a_keyword_that_is_neither_the_ops_nor_the_fixtures_goes_to_the_kernel(
    rl: pytest.Pytester, how: str
) -> None:
    # pytest-benchmark's benchmark(f, *args, **kwargs): roofline(np.add, x, y, out=z) is np.add(x, y, out=z),
    # so z is rotated and its dtype read like any argument's (it was "copy has no parameter 'out'")
    rl.makepyfile(
        f"""
        import numpy as np

        seen = []

        def add(x, y, out=None, where=True):
            seen.append((out, where))
            return np.add(x, y, out=out)

        def test_keywords(roofline):
            x = np.ones(1000, dtype=np.float32)
            z = np.empty(1000, dtype=np.float64)
            r = {how}(add, x, x.copy(), out=z, where=False, op="copy", n=1000, min_fraction=1e-6)
            assert {{out.dtype for out, _ in seen}} == {{np.dtype("float64")}} and len(seen) > 10
            assert {{where for _, where in seen}} == {{False}}
            assert len({{id(out) for out, _ in seen}}) > 1  # out was rotated with the inputs
            assert str(r.estimate.precision) == "fp32"  # the first argument's dtype
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_a_kernel_keyword_named_like_an_op_parameter_or_a_fixture_keyword_goes_in_kwargs(
    rl: pytest.Pytester,
) -> None:
    rl.makepyfile(
        f"""
        seen = []

        def kernel(n, dtype, name):
            seen.append((n, dtype, name))

        def test_collisions(roofline):
            r = roofline(kernel, kwargs={{"n": 3, "dtype": "int8", "name": "k"}}, op="copy", {COPY},
                         dtype="fp32", name="mine")
            assert set(seen) == {{(3, "int8", "k")}}
            assert r.estimate.params["n"] == 25_000_000 and r.name == "mine"
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


@pytest.mark.parametrize("where", ["call", "marker"])
def test_a_missing_parameter_names_the_close_keyword_that_went_to_the_kernel(
    rl: pytest.Pytester, where: str
) -> None:
    op = 'op="gemm", ' if where == "call" else ""
    rl.makepyfile(
        f"""
        import pytest

        {'@pytest.mark.speed_of_light("gemm", dtype="fp32")' if where == "marker" else ""}
        def test_typo(roofline):
            roofline(lambda **kw: None, {op}M=1000, N=1000, KK=1000, dtype="fp32")
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: gemm needs K; 'KK' went to the kernel as a keyword: did you mean K? (a keyword that"
            " is neither the op's nor one of the roofline fixture's goes to the kernel; one for the kernel"
            " named like them goes in kwargs={...}); it takes gemm(M, N, K, *)"
        ]
    )


# -- setup ---------------------------------------------------------------------------------------------


def test_setup_runs_before_every_call_untimed_one_call_per_sample(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        from conftest import BACKEND

        log = []

        def test_in_place(roofline):
            data = [3, 1, 2]
            def reset():
                data[:] = [3, 1, 2]

            r = roofline(lambda: (log.append(list(data)), data.sort()), setup=reset, op="copy", {COPY},
                         dtype="fp32")
            assert BACKEND.calls == len(log) > 10
            assert all(seen == [3, 1, 2] for seen in log)  # every call started from fresh inputs
            assert r.measurement.calls_per_sample == 1
            assert r.measurement.setup
        """
    )
    reprec = rl.inline_run("--roofline-json=out.json")
    reprec.assertoutcome(passed=1)
    (record,) = json.loads((rl.path / "out.json").read_text())["measurements"]
    assert record["calls_per_sample"] == 1
    assert "setup before every call (one call per sample)" in record["cache"]


def test_setup_may_return_each_calls_arguments(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        made, seen = [], []

        def setup():
            made.append(len(made))
            return (made[-1],), {{"fresh": True}}

        def test_fresh(roofline):
            kernel = lambda i, fresh: seen.append((i, fresh))
            roofline(kernel, setup=setup, op="copy", {COPY}, dtype="fp32")
            assert seen == [(i, True) for i in made]
            assert len(seen) > 10
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


def test_in_mode_off_setup_runs_once_before_the_one_call(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        log = []

        def test_off(roofline):
            roofline(log.append, "call", setup=lambda: log.append("setup"), op="copy", {COPY},
                     dtype="fp32")
            roofline.measure(log.append, setup=lambda: (("made",), {{}}), op="copy", {COPY}, dtype="fp32")
            assert log == ["setup", "call", "made"]
        """
    )
    rl.runpytest("--roofline-mode=off").assert_outcomes(passed=1)


@pytest.mark.parametrize("mode", ["enforce", "off"])
def test_a_setup_that_raises_fails_the_test_with_its_own_error(rl: pytest.Pytester, mode: str) -> None:
    rl.makepyfile(
        f"""
        def reset():
            raise KeyError("stale input")

        def test_setup_fails(roofline):
            roofline(lambda: None, setup=reset, op="copy", {COPY}, dtype="fp32")

        def test_other():
            pass
        """
    )
    result = rl.runpytest(f"--roofline-mode={mode}")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(['*raise KeyError("stale input")', "E       KeyError: 'stale input'"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.no_fnmatch_line("*timing/engine.py*")  # the setup's frames, not the engine's


def test_with_setup_returning_arguments_a_dtype_must_be_given(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        def test_no_dtype(roofline):
            roofline(lambda a: None, setup=lambda: ((1,), {{}}), op="copy", {COPY})
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: copy needs dtype: pass dtype=... to the marker or the call (it cannot be read from"
            " the arguments setup returns: they are made while measuring)"
        ]
    )


# -- a marker-only test whose body cannot run twice -------------------------------------------------


def test_a_marker_only_test_with_a_once_only_fixture_names_it(rl: pytest.Pytester) -> None:
    pytest.importorskip("pytest_benchmark")
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_both(benchmark):
            benchmark(lambda: None)

        def test_other():
            pass
        """
    )
    result = rl.runpytest("--benchmark-disable")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: test_both passed, then raised FixtureAlreadyUsed when run again to be timed: its "
            "fixture 'benchmark' can be used only once per test (Fixture can only be used once.*). "
            "Without the roofline fixture, @pytest.mark.speed_of_light times the whole test body by "
            "running it many times; take the roofline fixture and time the kernel alone: "
            "roofline(kernel, *args)"
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_a_once_only_fixture_of_any_plugin_is_named(rl: pytest.Pytester) -> None:
    rl.makeconftest(
        rl.path.joinpath("conftest.py").read_text()
        + """

class Spent(Exception):
    pass


class Token:
    used = False

    def use(self):
        if self.used:
            raise Spent("this token was used")
        self.used = True


@pytest.fixture
def token():
    return Token()


@pytest.fixture
def wallet(token):  # the once-only fixture, one fixture removed from the test
    return [token]
"""
    )
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_token(token):
            token.use()

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_wallet(wallet):
            wallet[0].use()
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "roofline: test_token passed, then raised Spent *: its fixture 'token' *",
            "roofline: test_wallet passed, then raised Spent *: its fixture 'token' *",
        ]
    )


def test_a_body_error_unrelated_to_a_fixture_keeps_its_own_traceback(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        runs = []

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_second_run_fails(tmp_path):
            runs.append(1)
            assert len(runs) < 3, "ran too often"
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: ran too often*"])
    result.stdout.no_fnmatch_line("*can be used only once*")


# -- a marked test that measures nothing ----------------------------------------------------------


NEVER_MEASURES = f"""
import pytest

pytestmark = pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")

def test_forgot(roofline):
    assert roofline.estimate().floor_s > 0  # an estimate measures nothing

def test_measures(roofline):
    roofline(lambda: None)

def test_skipped_before_measuring(roofline):
    pytest.skip("not here")

def test_failed_before_measuring(roofline):
    assert False, "broken"

def test_without_the_fixture():
    pass
"""


def test_a_marked_test_that_never_measures_warns(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_gate=NEVER_MEASURES)
    result = rl.runpytest(*NO_MEASUREMENT_WARNS)
    result.assert_outcomes(passed=3, skipped=1, failed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "test_gate.py::test_forgot",
            "*RooflineWarning: test_gate.py::test_forgot is marked @pytest.mark.speed_of_light and takes"
            " the roofline fixture, but measured nothing, so no budget was checked: call"
            " roofline(kernel, *args) or roofline.measure(...) in the test (roofline.estimate measures"
            " nothing), or drop the marker",
        ]
    )


@pytest.mark.parametrize("source", ["option", "ini"])
def test_a_marked_test_that_never_measures_fails_when_a_measurement_is_required(
    rl: pytest.Pytester, source: str
) -> None:
    rl.makepyfile(test_gate=NEVER_MEASURES)
    if source == "ini":
        rl.makeini("[pytest]\nroofline_require_measurement = true\n")
    result = rl.runpytest(*(["--roofline-require-measurement"] if source == "option" else []))
    result.assert_outcomes(passed=2, skipped=1, failed=2)
    origin = "--roofline-require-measurement" if source == "option" else "ini roofline_require_measurement"
    result.stdout.fnmatch_lines(
        [
            "*_ test_forgot _*",
            f"roofline: test_gate.py::test_forgot is marked * or drop the marker ({origin} requires a"
            " measurement)",
        ]
    )
    result.stdout.no_fnmatch_line("*RooflineWarning*")


def test_in_mode_off_a_call_counts_as_a_measurement(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_gate=NEVER_MEASURES)
    result = rl.runpytest("--roofline-mode=off", "--roofline-require-measurement")
    result.assert_outcomes(passed=2, skipped=1, failed=2)  # test_forgot still fails; test_measures passes
    result.stdout.fnmatch_lines(["roofline: test_gate.py::test_forgot is marked *"])


# -- names ------------------------------------------------------------------------------------------


def test_a_bad_name_fails_its_test_and_spoils_neither_the_report_nor_junitxml(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        def test_newline(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", name="two\\nlines")

        def test_nul(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", name="nul\\x00byte")

        def test_fine(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", name="fine µs")
        """
    )
    result = rl.runpytest("--roofline-report", "--junitxml=junit.xml")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: name must be printable text on one line (no newline, tab or control character);"
            " got 'two\\nlines'",
            "*1 measurement(s): 1 pass; mode enforce",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    properties = ET.parse(rl.path / "junit.xml").getroot().iter("property")
    assert "roofline[fine µs]_attained" in {p.get("name") for p in properties}


def test_a_loop_over_sizes_without_names_is_told_to_name_them(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
import pytest

@pytest.mark.parametrize("named", [False, True])
def test_sizes(roofline, named):
    for n in (1000, 2000):
        roofline(lambda: None, op="copy", n=n, dtype="fp32", name=f"n={n}" if named else None)
"""
    )
    result = rl.runpytest("--roofline-save=base.json", "--roofline-mode=report")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*measured a second kernel under no name=*name=f'n={n}'*"])
    # without a baseline to save or compare, the report takes both
    rl.runpytest("--roofline-mode=report").assert_outcomes(passed=2)


# -- stream= reaches the backend --------------------------------------------------------------------


STREAM_BACKEND = """

import contextlib

STREAMS = []


class StreamBackend(ScriptedBackend):
    @contextlib.contextmanager
    def on_stream(self, stream):
        STREAMS.append(stream)
        yield self


STREAM_BACKEND = StreamBackend((2.5e-3,), resolution_s=1e-9, device_name="fake accelerator")


def pytest_roofline_backend(config, device, spec):
    return STREAM_BACKEND
"""


def test_a_stream_reaches_the_backend_from_the_marker_and_the_call(pytester: pytest.Pytester) -> None:
    from conftest import fake_conftest

    pytester.makeconftest(
        fake_conftest(backend=False) + "\nfrom fakes import ScriptedBackend\n" + STREAM_BACKEND
    )
    pytester.makepyfile(
        f"""
        import pytest
        from conftest import STREAMS

        class TorchLikeStream:
            cuda_stream = 1234

        SIDE = TorchLikeStream()

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", stream=7)
        def test_marker(roofline):
            roofline(lambda: None)
            assert STREAMS[-1] == 7

        def test_call(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", stream=SIDE)
            assert STREAMS[-1] is SIDE
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


def test_a_stream_for_a_backend_that_times_none_fails_the_test(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        def test_cpu(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", stream=7)
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*roofline: stream=7 was given, but this measurement runs on the 'fake' backend, which times no"
            " CUDA stream"
        ]
    )


def test_a_stream_that_is_not_one_is_a_clear_mistake(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", stream="side")
        def test_marker(roofline):
            roofline(lambda: None)
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*stream must be a CUDA stream: a CuPy or PyTorch stream, an object with cuda_stream or"
            " __cuda_stream__, or an int handle; got 'side' (str)"
        ]
    )


# -- kernels that cannot be timed as written -------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "what"),
    [
        ("async def kernel():\n    pass", "a coroutine function (async def)"),
        ("def kernel():\n    yield", "a generator function"),
    ],
)
def test_a_kernel_that_does_no_work_when_called_is_an_error(
    rl: pytest.Pytester, kernel: str, what: str
) -> None:
    rl.makepyfile(
        f"""
import pytest

{kernel}

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
def test_kernel(roofline):
    roofline(kernel)
"""
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*the kernel is {what}*calling it runs nothing*"])


META = f"""
import functools
import pytest

class Tensor:  # a tensor on torch's meta device, as the plugin sees it: a shape, no storage
    is_meta = True
    shape = (25_000_000,)
    nbytes = 100_000_000
    def __dlpack__(self):
        raise RuntimeError("Cannot export a meta tensor")
    def clone(self):
        return Tensor()

class Lookalike(Tensor):  # is_meta that is not True: a mock's attribute, say
    is_meta = "yes"

def kernel(*args, **kwargs):
    pass

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
def test_kernel(roofline):
    roofline(CALL)
"""


@pytest.mark.parametrize(
    ("call", "where"),
    [
        ("kernel, Tensor()", "argument 0"),
        ("kernel, 1, [2, {'out': Tensor()}]", "argument 1[1]['out']"),
        ("kernel, kwargs={'x': Tensor()}", "kwargs['x']"),
        ("functools.partial(kernel, Tensor())", "argument 0 of the functools.partial"),
        ("functools.partial(kernel, out=Tensor())", "keyword 'out' of the functools.partial"),
        ("kernel, setup=lambda: ((Tensor(),), {})", "setup's argument 0"),
        ("kernel, setup=lambda: ((), {'out': Tensor()})", "setup's kwargs['out']"),
    ],
)
@pytest.mark.parametrize("mode", ["enforce", "report"])
def test_a_tensor_with_no_data_is_an_error_not_faster_than_light(
    rl: pytest.Pytester, call: str, where: str, mode: str
) -> None:
    rl.makepyfile(META.replace("CALL", call))
    result = rl.runpytest(f"--roofline-mode={mode}", "--roofline-json=out.json")
    result.assert_outcomes(failed=1)
    where = where.replace("[", "[[]")  # fnmatch's [ opens a set
    result.stdout.fnmatch_lines([f"*roofline: {where} is a tensor on the meta device: it has a shape but*"])
    assert json.loads((rl.path / "out.json").read_text())["measurements"] == []  # no time recorded


def test_an_is_meta_that_is_not_true_is_no_meta_tensor(rl: pytest.Pytester) -> None:
    rl.makepyfile(META.replace("CALL", "kernel, Lookalike(), kwargs={'x': object()}"))
    rl.runpytest().assert_outcomes(passed=1)
