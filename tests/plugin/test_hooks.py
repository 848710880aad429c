"""The plugin's own hooks, each through the example in its docstring pasted into a conftest.py;
registrations undone at the end of a session; the plugin costs nothing when unused."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import COPY, GEMM, fake_conftest

from pytest_roofline.model.devices import table
from pytest_roofline.model.ops import get_op, op_names
from pytest_roofline.plugin import hookspecs


def example(hook: str) -> str:
    """The ready-to-paste example of a hookspec's docstring: the indented block after its ``::``."""
    doc = getattr(hookspecs, hook).__doc__
    assert doc is not None
    lines = doc.splitlines()
    start = max(i for i, line in enumerate(lines) if line.rstrip().endswith("::")) + 1
    block: list[str] = []
    for line in lines[start:]:
        if line.strip() and not line.startswith(" " * 8):
            break
        block.append(line)
    code = textwrap.dedent("\n".join(block)).strip() + "\n"
    compile(code, hook, "exec")
    return "\n\n" + code


def test_every_hook_has_a_pasteable_example() -> None:
    hooks = [name for name in dir(hookspecs) if name.startswith("pytest_roofline_")]
    assert sorted(hooks) == [
        "pytest_roofline_backend", "pytest_roofline_device", "pytest_roofline_register_devices",
        "pytest_roofline_register_ops", "pytest_roofline_result",
    ]  # fmt: skip
    for hook in hooks:
        assert f"def {hook}(" in example(hook)


# -- register ops ----------------------------------------------------------------------------------


def test_register_ops_example(rl: pytest.Pytester) -> None:
    rl.makeconftest(fake_conftest(extra=example("pytest_roofline_register_ops")))
    rl.makepyfile(
        """
        import pytest
        from pytest_roofline import op_names

        @pytest.mark.speed_of_light("xpos", tokens=4096, dim=128, dtype="fp32")
        def test_xpos(roofline):
            r = roofline.measure(lambda: None)
            assert r.flops == 3 * 4096 * 128
            assert r.bytes == (2 * 4096 * 128 + 128) * 4
            assert "xpos" in op_names()

        @pytest.mark.speed_of_light("xpos", tokens=4096, dtype="fp32")
        def test_xpos_checked():
            pass
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["roofline: xpos needs dim (it takes xpos(tokens, dim))"])
    assert "xpos" not in op_names()


def test_a_registered_op_that_replaced_one_gives_it_back(rl: pytest.Pytester) -> None:
    builtin = get_op("copy")
    rl.makeconftest(
        fake_conftest(
            extra="""
from pytest_roofline import Cost

def pytest_roofline_register_ops(config, register):
    register("copy", ["n"], lambda p, size: Cost(0, 3 * p["n"] * size), replace=True)
"""
        )
    )
    rl.makepyfile(
        f"""
        def test_copy(roofline):
            assert roofline.estimate("copy", {COPY}, dtype="fp32").bytes == 3e8
        """
    )
    rl.runpytest().assert_outcomes(passed=1)
    assert get_op("copy") == builtin


def test_an_op_registered_by_a_conftest_found_during_collection_works(rl: pytest.Pytester) -> None:
    sub = rl.mkpydir("sub")
    (sub / "conftest.py").write_text(example("pytest_roofline_register_ops"))
    (sub / "test_xpos.py").write_text(
        "def test_xpos(roofline):\n"
        "    assert roofline.estimate('xpos', tokens=10, dim=10, dtype='fp32').flops == 300\n"
    )
    rl.runpytest().assert_outcomes(passed=1)
    assert "xpos" not in op_names()


def test_a_bad_registration_is_a_usage_error(rl: pytest.Pytester) -> None:
    rl.makeconftest(
        fake_conftest(
            extra="""
def pytest_roofline_register_ops(config, register):
    register("1st-op", ["n"], lambda p, size: None)
"""
        )
    )
    result = rl.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest_roofline_register_ops in {rl.path / 'conftest.py'}: "
            "op name must be an identifier; got '1st-op'"
        ]
    )


def test_registering_something_that_is_not_a_device_is_a_usage_error_naming_the_plugin(
    rl: pytest.Pytester,
) -> None:
    rl.makeconftest(
        fake_conftest(
            extra="""
def pytest_roofline_register_devices(config, register):
    register("my-accel")
"""
        )
    )
    result = rl.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: pytest_roofline_register_devices in {rl.path / 'conftest.py'}: "
            "register_device takes a Device; got 'my-accel'"
        ]
    )


# -- register devices --------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
def test_register_devices_example(rl: pytest.Pytester) -> None:
    rl.makeconftest(fake_conftest(extra=example("pytest_roofline_register_devices")))
    rl.makepyfile(
        """
        from pytest_roofline import get_device

        def test_device():
            device = get_device("My Accelerator 9000")
            assert device.key == "my-accel"
            assert device.bandwidth.value == 2.0e12
        """
    )
    rl.runpytest().assert_outcomes(passed=1)
    assert "my-accel" not in table()
    # a registered key is a known device: asking for it without the hardware is a usage error
    result = rl.runpytest("--roofline-device=my-accel")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --roofline-device my-accel: device 'my-accel' is a table entry with no*"]
    )
    assert "my-accel" not in table()


def test_a_registered_device_served_by_a_device_hook_is_the_session_device(rl: pytest.Pytester) -> None:
    rl.makeconftest(
        fake_conftest(device=False)
        + example("pytest_roofline_register_devices")
        + """
from pytest_roofline import get_device

def pytest_roofline_device(config, spec):
    return get_device(spec) if spec == "my-accel" else None
"""
    )
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.fake_time(4e-3)
        def test_gemm(roofline):
            r = roofline(lambda: None, op="gemm", {GEMM}, dtype="bf16")
            assert r.estimate.device.name == "My Accelerator 9000"
            assert r.estimate.peak_flops == 500e12
        """
    )
    rl.runpytest("--roofline-device=my-accel", "--roofline-mode=report").assert_outcomes(passed=1)


# -- pick the device -----------------------------------------------------------------------------------


def test_device_example_first_result_wins(rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # the fake device comes from a plugin registered before the conftest: the conftest is asked first
    rl.makepyfile(fake_device_plugin=fake_conftest(backend=False))
    rl.makeconftest(fake_conftest(device=False) + example("pytest_roofline_device"))
    rl.makepyfile(
        """
        import os

        def test_device(roofline):
            expected = "a100-sxm-80gb" if os.environ.get("CI_GPU") == "a100" else "fake"
            assert roofline.device.key == expected
            r = roofline.measure(lambda: None, op="gemm", M=1000, N=1000, K=1000, dtype="fp32")
            assert r.estimate.device.key == expected
        """
    )
    monkeypatch.syspath_prepend(rl.path)
    monkeypatch.setenv("CI_GPU", "a100")
    rl.runpytest("-p", "fake_device_plugin").assert_outcomes(passed=1)
    monkeypatch.delenv("CI_GPU")
    rl.runpytest("-p", "fake_device_plugin").assert_outcomes(passed=1)


_DEVICE_AS_A_STRING = """

def pytest_roofline_device(config, spec):
    return "fake"  # a key, where a Device was meant
"""


def test_a_device_hook_that_returns_no_device_fails_each_test_naming_the_hook_and_the_plugin(
    rl: pytest.Pytester,
) -> None:
    rl.makeconftest(fake_conftest(device=False, extra=_DEVICE_AS_A_STRING))
    rl.makepyfile(
        f"""
        def test_copy(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")

        def test_plain():
            pass
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            f"roofline: pytest_roofline_device in {rl.path / 'conftest.py'} returned 'fake' (a str): "
            "expected a pytest_roofline.Device"
        ]
    )
    result.stdout.no_fnmatch_line("*has no attribute*")


@pytest.mark.usefixtures("no_gpu")
def test_a_device_hook_that_returns_no_device_for_the_session_device_is_a_usage_error(
    rl: pytest.Pytester,
) -> None:
    rl.makeconftest(fake_conftest(device=False, extra=_DEVICE_AS_A_STRING))
    result = rl.runpytest("--roofline-device=h100-sxm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: --roofline-device h100-sxm: pytest_roofline_device in {rl.path / 'conftest.py'} "
            "returned 'fake' (a str): expected a pytest_roofline.Device*"
        ]
    )


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ('"cpu"', "returned 'cpu' (a str): expected a timer backend*; missing or wrong: run, clock, name, "
                  "device_name, resolution_s (run and clock are methods, *"),
        ("types.SimpleNamespace(name='x', device_name='y', resolution_s=0, clock=time.time, run=print)",
         "returned namespace(name=* (a SimpleNamespace): *; missing or wrong: resolution_s (*"),
        ("types.SimpleNamespace(name='x', device_name='y', resolution_s=1e-6, clock=time.time, run=print)",
         "returned namespace(name=* (a SimpleNamespace): expected a timer backend (a subclass of"
         " pytest_roofline.timing.base.Backend); a SimpleNamespace is not one"),
    ],
)  # fmt: skip
def test_a_backend_hook_that_returns_no_backend_fails_the_test_naming_the_hook_and_the_plugin(
    rl: pytest.Pytester, returned: str, message: str
) -> None:
    rl.makeconftest(
        fake_conftest(backend=False)
        + f"""
import time
import types


def pytest_roofline_backend(config, device, spec):
    return {returned}
"""
    )
    rl.makepyfile(f"def test_copy(roofline):\n    roofline(lambda: None, op='copy', {COPY}, dtype='fp32')\n")
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"roofline: pytest_roofline_backend in {rl.path / 'conftest.py'} {message}"])
    result.stdout.no_fnmatch_line("*has no attribute*")


# -- the backend ----------------------------------------------------------------------------------------


def test_backend_example(rl: pytest.Pytester) -> None:
    rl.makeconftest(fake_conftest(backend=False) + example("pytest_roofline_backend"))
    rl.makepyfile(
        """
        from pytest_roofline.timing.cpu import CpuBackend

        def test_backend(request, roofline):
            hook = request.config.hook
            backend = hook.pytest_roofline_backend(config=request.config, device=roofline.device, spec="auto")
            assert isinstance(backend, CpuBackend)
            assert backend.resolution_s == 1e-6
        """
    )
    rl.runpytest().assert_outcomes(passed=1)


# -- every result ---------------------------------------------------------------------------------------


def test_result_example(rl: pytest.Pytester) -> None:
    rl.makeconftest(fake_conftest(extra=example("pytest_roofline_result")))
    rl.makepyfile(
        f"""
        import pytest

        def test_copy(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
            roofline.measure(lambda: None, op="gemm", {GEMM}, dtype="fp32")

        @pytest.mark.fake_time(20e-3)
        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32")
        def test_marker():
            pass
        """
    )
    result = rl.runpytest("-s")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_result_example.py::test_copy: 80.0% of speed of light (pass)",
            "*test_result_example.py::test_copy: 80.0% of speed of light (pass)",
            "*test_result_example.py::test_marker: 10.0% of speed of light (MISS)",
        ]
    )


# -- registries are cleaned up at unconfigure ------------------------------------------------------------


def test_registrations_are_undone_even_when_the_session_fails_to_start(rl: pytest.Pytester) -> None:
    rl.makeconftest(
        fake_conftest(
            extra=example("pytest_roofline_register_ops") + example("pytest_roofline_register_devices")
        )
    )
    result = rl.runpytest("--roofline-device=nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "xpos" not in op_names()
    assert "my-accel" not in table()


# -- cheap when unused --------------------------------------------------------------------------------------


HEAVY = ("numpy", "cupy", "tabulate", "pytest_roofline.timing", "pytest_roofline.machine.calibrate")


def test_importing_the_plugin_imports_nothing_heavy() -> None:
    code = (
        "import sys, pytest_roofline.plugin\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_session_that_measures_nothing_imports_nothing_heavy(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        import sys

        def test_plain(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("roofline")
            heavy = [m for m in {HEAVY!r} if m in sys.modules]
            assert not heavy, heavy
        """
    )
    pytester.runpytest_subprocess("-p", "roofline").assert_outcomes(passed=1)


#: what a session that marks no test and uses no fixture must not have imported when it ends
UNUSED_MUST_NOT_IMPORT = (
    "pytest_roofline.model.devices", "pytest_roofline.model.ops", "pytest_roofline.model.core",
    "pytest_roofline.timing",
    "pytest_roofline.machine.calibrate", "numpy", "tabulate", "cupy",
)  # fmt: skip


@pytest.mark.parametrize("xdist", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_an_unused_plugin_has_imported_nothing_heavy_at_unconfigure(
    pytester: pytest.Pytester, xdist: list[str]
) -> None:
    if xdist:
        pytest.importorskip("xdist")
    pytester.makeini("[pytest]\nmarkers = other: a marker that is not the plugin's\n")  # not the repo's
    pytester.makeconftest(
        f"""
        import json, os, sys

        import pytest

        HEAVY = {UNUSED_MUST_NOT_IMPORT!r}

        @pytest.hookimpl(trylast=True)  # after the plugin's own pytest_unconfigure
        def pytest_unconfigure(config):
            loaded = sorted(m for m in sys.modules for h in HEAVY if m == h or m.startswith(h + "."))
            seen = {{"roofline": config.pluginmanager.has_plugin("roofline"), "loaded": loaded,
                     "session": "pytest_roofline.plugin.session" in sys.modules,
                     "worker": hasattr(config, "workerinput")}}
            config.rootpath.joinpath(f"loaded-{{os.getpid()}}.json").write_text(json.dumps(seen))
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_plain():
            pass

        @pytest.mark.parametrize("x", [1, 2])
        def test_parametrized(x, tmp_path):
            pass

        @pytest.mark.other
        class TestClass:
            def test_method(self):
                pass

        @pytest.mark.xfail(strict=True)
        def test_xfail():
            assert False

        @pytest.mark.skip(reason="skipped")
        def test_skipped():
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "roofline", *xdist)
    result.assert_outcomes(passed=4, xfailed=1, skipped=1)
    seen = [json.loads(f.read_text()) for f in pytester.path.glob("loaded-*.json")]
    assert len(seen) == (3 if xdist else 1)  # the controller and each worker
    assert [(s["roofline"], s["loaded"]) for s in seen] == [(True, [])] * len(seen)
    # no session where nothing was collected that measures; a pytest-xdist controller collects
    # nothing, so it makes one up front to receive its workers' records
    assert sorted((s["worker"], s["session"]) for s in seen) == (
        [(False, True), (True, False), (True, False)] if xdist else [(False, False)]
    )


def test_a_fixture_requested_dynamically_makes_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        import pytest

        def test_dynamic(request):
            assert "pytest_roofline.plugin.session" not in sys.modules  # nothing collected measures
            calls = []
            roofline = request.getfixturevalue("roofline")
            assert roofline(calls.append, 1, op="copy", n=1000, dtype="fp32") is None  # mode off: run once
            assert calls == [1]
            with pytest.raises(pytest.fail.Exception, match="copy needs n"):
                roofline(calls.append, 2, op="copy", dtype="fp32")  # a missing parameter still is one
        """
    )
    pytester.runpytest_subprocess("-p", "roofline", "--roofline-mode=off").assert_outcomes(passed=1)


def test_a_warning_while_resolving_the_device_is_printed_not_raised_in_the_test(rl: pytest.Pytester) -> None:
    # Calibration warns when it replaces a corrupt cache; with filterwarnings=error that warning
    # must not become the failure of whichever test first measured.
    rl.makeconftest(
        fake_conftest(device=False)
        + """

import warnings

from pytest_roofline import Device, Figure, Precision, Source, Unit


def pytest_roofline_device(config, spec):
    warnings.warn("cache file corrupt: replaced", UserWarning)
    peak = Figure(1e12, Source.MEASURED)
    return Device(key="fake", name="Fake", kind="cpu", peaks={(Precision.FP32, Unit.VECTOR): peak},
                  bandwidth=Figure(1e11, Source.MEASURED))
"""
    )
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("gemm", {GEMM}, dtype="fp32", min_fraction=0.5)
        def test_gemm(roofline):
            roofline(lambda: None)
        """
    )
    result = rl.runpytest("-W", "error")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["roofline: UserWarning: cache file corrupt: replaced"])


def test_the_body_timer_wraps_pyfunc_call_only_once_a_fixtureless_marked_test_is_set_up(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        def pytest_runtest_teardown(item):
            with open("seen.txt", "a") as out:
                registered = item.config.pluginmanager.has_plugin("roofline-body-timer")
                out.write(f"{item.name} {registered}\\n")
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_plain():
            pass

        @pytest.mark.speed_of_light("copy", n=1000, dtype="fp32")
        def test_marked():
            pass
        """
    )
    pytester.runpytest("-p", "no:randomly", "--roofline-mode=off").assert_outcomes(passed=2)
    seen = (pytester.path / "seen.txt").read_text().splitlines()
    assert seen == ["test_plain False", "test_marked True"]
