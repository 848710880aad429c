"""Options and their ini twins, the device and peaks settings, ``--help`` and ``--markers``."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import COPY, NO_MEASUREMENT_WARNS, fake_conftest

from pytest_roofline.model.verdict import Result
from pytest_roofline.plugin.options import parse_json_path

MISS = f"""
import pytest

@pytest.mark.fake_time(10e-3)
def test_copy(roofline):
    roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
"""

PEAKS = {"bandwidth_gbs": 50, "notes": ["a slower memory"]}


def the_result(reprec: pytest.HookRecorder) -> Result:
    (call,) = reprec.getcalls("pytest_roofline_result")
    result: Result = call.result
    return result


Check = Callable[[pytest.HookRecorder, Path], None]


def check_report(reprec: pytest.HookRecorder, path: Path) -> None:
    reprec.assertoutcome(failed=1)


def check_json(reprec: pytest.HookRecorder, path: Path) -> None:
    data = json.loads((path / "out.json").read_text())
    assert [m["nodeid"] for m in data["measurements"]] == ["test_setting.py::test_copy"]


def check_device(reprec: pytest.HookRecorder, path: Path) -> None:
    assert the_result(reprec).estimate.device.key == "fake"


def check_min_fraction(reprec: pytest.HookRecorder, path: Path) -> None:
    reprec.assertoutcome(passed=1)
    assert the_result(reprec).min_fraction == 0.1


def check_mode(reprec: pytest.HookRecorder, path: Path) -> None:
    reprec.assertoutcome(passed=1)
    assert the_result(reprec).verdict == "MISS"


def check_mode_off(reprec: pytest.HookRecorder, path: Path) -> None:
    reprec.assertoutcome(passed=1)
    assert reprec.getcalls("pytest_roofline_result") == []


def check_stat(reprec: pytest.HookRecorder, path: Path) -> None:
    assert the_result(reprec).measurement.stat == "mean"


def check_max_time(reprec: pytest.HookRecorder, path: Path) -> None:
    assert the_result(reprec).measurement.policy.max_time_s == 0.3


def check_warm(reprec: pytest.HookRecorder, path: Path) -> None:
    m = the_result(reprec).measurement
    assert (m.cache, m.cold_method, m.flushed) == ("warm", None, False)


def check_peaks(reprec: pytest.HookRecorder, path: Path) -> None:
    est = the_result(reprec).estimate
    assert est.bandwidth == 50e9
    assert str(est.bandwidth_source) == "user"
    assert est.floor_s == pytest.approx(4e-3)


SETTINGS: list[tuple[str, str | None, str, Check]] = [
    ("--roofline-report", None, "roofline_report = true", check_report),
    ("--roofline-json", "out.json", "roofline_json = out.json", check_json),
    ("--roofline-device", "cpu", "roofline_device = cpu", check_device),
    ("--roofline-min-fraction", "0.1", "roofline_min_fraction = 0.1", check_min_fraction),
    ("--roofline-mode", "report", "roofline_mode = report", check_mode),
    ("--roofline-mode", "off", "roofline_mode = off", check_mode_off),
    ("--roofline-stat", "mean", "roofline_stat = mean", check_stat),
    ("--roofline-max-time", "0.3", "roofline_max_time = 0.3", check_max_time),
    ("--roofline-cache", "warm", "roofline_cache = warm", check_warm),
    ("--roofline-peaks", "peaks.json", "roofline_peaks = peaks.json", check_peaks),
]


@pytest.mark.parametrize("source", ["option", "ini"])
@pytest.mark.parametrize(
    ("flag", "value", "ini", "check"), SETTINGS, ids=[f"{s[0]}={s[1]}" for s in SETTINGS]
)
def test_each_option_and_its_ini_twin(
    rl: pytest.Pytester, source: str, flag: str, value: str | None, ini: str, check: Check
) -> None:
    rl.makepyfile(test_setting=MISS)
    (rl.path / "peaks.json").write_text(json.dumps(PEAKS))
    if source == "option":
        args = [flag] if value is None else [f"{flag}={value}"]
    else:
        args = []
        rl.makeini(f"[pytest]\n{ini}\n")
    result_path = rl.path
    reprec = rl.inline_run(*args)
    check(reprec, result_path)


def test_an_ini_path_is_relative_to_the_ini_file(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    rl.makepyfile(test_setting=MISS)
    (rl.path / "peaks.json").write_text(json.dumps(PEAKS))
    rl.makeini("[pytest]\nroofline_peaks = peaks.json\nroofline_json = out.json\nroofline_mode = report\n")
    elsewhere = rl.mkdir("elsewhere")
    monkeypatch.chdir(elsewhere)
    reprec = rl.inline_run(str(rl.path))
    reprec.assertoutcome(passed=1)
    assert the_result(reprec).estimate.bandwidth == 50e9
    assert (rl.path / "out.json").is_file()


@pytest.mark.parametrize("source", ["option", "ini"])
def test_a_tilde_in_a_path_setting_is_expanded_where_it_is_parsed(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """The up-front check and the write at the end read one path: ``~`` is the home folder for both."""
    home = rl.mkdir("home")
    monkeypatch.setenv("HOME", str(home))
    (home / "peaks.json").write_text(json.dumps(PEAKS))
    rl.makepyfile(test_setting=MISS)
    if source == "option":
        args = ["--roofline-json=~/r.json", "--roofline-peaks=~/peaks.json"]
    else:
        args = []
        rl.makeini("[pytest]\nroofline_json = ~/r.json\nroofline_peaks = ~/peaks.json\n")
    result = rl.runpytest("--roofline-mode=report", *args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"roofline: wrote 1 measurement(s) to {home / 'r.json'}"])
    (m,) = json.loads((home / "r.json").read_text())["measurements"]
    assert m["bandwidth"] == 50e9  # the peaks file's
    assert not (rl.path / "~").exists()


def test_the_command_line_wins_over_the_ini_file(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_setting=MISS)
    rl.makeini("[pytest]\nroofline_mode = enforce\nroofline_stat = min\n")
    reprec = rl.inline_run("--roofline-mode=report", "--roofline-stat=mean")
    reprec.assertoutcome(passed=1)
    assert the_result(reprec).measurement.stat == "mean"


BAD_VALUES = [
    ("--roofline-mode", "fast", "expected one of enforce, report, off, got 'fast'"),
    ("--roofline-stat", "p99", "expected one of median, min, mean, got 'p99'"),
    ("--roofline-latency-floor", "of", "expected one of on, off, got 'of' (did you mean 'off'?)"),
    ("--roofline-cache", "hot", "expected one of cold, warm, got 'hot'"),
    ("--roofline-cache", "wram", "expected one of cold, warm, got 'wram' (did you mean 'warm'?)"),
    ("--roofline-cuda-block", "maybe", "expected one of auto, on, off, got 'maybe'"),
    ("--roofline-min-fraction", "0", "expected a number in (0, 1], got '0'"),
    ("--roofline-min-fraction", "1.5", "expected a number in (0, 1], got '1.5'"),
    ("--roofline-min-fraction", "half", "expected a number in (0, 1], got 'half'"),
    ("--roofline-max-time", "-1", "expected a positive number of seconds, at most 86400, got '-1'"),
    ("--roofline-max-time", "inf", "expected a positive number of seconds, at most 86400, got 'inf'"),
    ("--roofline-peaks", "missing.json", "peaks file '*missing.json': cannot be read (*No such file*"),
    (
        "--roofline-json",
        "no/such/dir/out.json",
        "cannot write '*no/such/dir/out.json': directory * does not exist",
    ),
    ("--roofline-device", "cuda:x", "expected cuda or cuda:N (N a GPU index), got 'cuda:x'"),
    *(
        [  # issue 40: a folder that exists and takes no new file was said not to exist
            (
                "--roofline-json",
                "/proc/out.json",
                "cannot write '/proc/out.json': no file can be created in '/proc': No such file or directory",
            ),
        ]
        if Path("/proc/self").is_dir()
        else []
    ),
]


@pytest.mark.parametrize(("flag", "value", "message"), BAD_VALUES)
def test_a_bad_option_value_is_a_usage_error(
    rl: pytest.Pytester, flag: str, value: str, message: str
) -> None:
    result = rl.runpytest(f"{flag}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*argument {flag}: {message}*"])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [(flag.removeprefix("--").replace("-", "_"), value, message) for flag, value, message in BAD_VALUES]
    + [
        ("roofline_report", "maybe", "expected true or false, got 'maybe'"),
        ("roofline_report_clocks", "sometimes", "expected true or false, got 'sometimes'"),
        ("roofline_require_measurement", "maybe", "expected true or false, got 'maybe'"),
    ],
)
def test_a_bad_ini_value_is_a_usage_error(rl: pytest.Pytester, key: str, value: str, message: str) -> None:
    rl.makepyfile(test_setting=MISS)
    rl.makeini(f"[pytest]\n{key} = {value}\n")
    result = rl.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: ini option {key} = '{value}': {message}*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


def test_the_json_path_may_not_be_a_directory(rl: pytest.Pytester) -> None:
    rl.mkdir("out")
    result = rl.runpytest("--roofline-json=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --roofline-json: cannot write 'out': it is a directory*"])


def test_the_json_path_may_be_a_pipe_we_hold_or_a_character_device_but_not_a_socket(tmp_path: Path) -> None:
    """What ``write_json_atomic`` writes in place passes the up-front check; a socket does not."""
    read, write = os.pipe()  # what /dev/stdout is under `pytest ... | jq`, or a shell's >(...)
    try:
        assert parse_json_path(f"/dev/fd/{write}") == f"/dev/fd/{write}"
    finally:
        os.close(read)
        os.close(write)
    assert parse_json_path(os.devnull) == os.devnull  # /dev is read-only to most users: no matter
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        with pytest.raises(argparse.ArgumentTypeError, match="it is a block device or a socket, not a file"):
            parse_json_path(str(tmp_path / "sock"))


def test_a_fifo_the_run_did_not_start_with_is_refused(tmp_path: Path) -> None:
    """Nobody may be reading it at the end (the write would fail), and if a reader is there now, it may
    be gone by then: only a pipe this process holds has its reader set up by whoever started it."""
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(argparse.ArgumentTypeError, match=r"'.*fifo': it is a FIFO, not a regular file \("):
        parse_json_path(str(tmp_path / "fifo"))


def test_dev_stdout_piped_on_is_a_json_path(tmp_path: Path) -> None:
    code = (
        "from pytest_roofline.plugin.options import parse_json_path\n"
        "parse_json_path('/dev/stdout'); print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, check=True)
    assert done.stdout == "ok\n"


# -- devices -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--roofline-device=h100-sxm"], "",
         "--roofline-device h100-sxm: device 'h100-sxm' is a table entry with no local hardware*"),
        (["--roofline-device=cuda"], "", "--roofline-device cuda: cuda: no such CUDA device (0 visible*"),
        (["--roofline-device", "cuda:1"], "", "--roofline-device cuda:1: cuda:1: no such CUDA device*"),
        ([], "roofline_device = cuda", "ini roofline_device cuda: cuda: no such CUDA device*"),
        (["--roofline-device=h100-sx"], "",
         "--roofline-device h100-sx: unknown device 'h100-sx' (did you mean*"),
    ],
)  # fmt: skip
def test_asking_for_a_device_that_is_not_here_is_a_usage_error(
    rl: pytest.Pytester, args: list[str], ini: str, message: str
) -> None:
    rl.makepyfile(test_setting=MISS)
    if ini:
        rl.makeini(f"[pytest]\n{ini}\n")
    result = rl.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    result.stderr.fnmatch_lines(["*use auto or cpu, or --roofline-mode off*"])


@pytest.mark.usefixtures("no_gpu")
def test_mode_off_needs_no_device(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_setting=MISS)
    rl.runpytest("--roofline-device=h100-sxm", "--roofline-mode=off").assert_outcomes(passed=1)


def test_a_device_hook_can_serve_any_table_device(rl: pytest.Pytester) -> None:
    rl.makeconftest(
        rl.path.joinpath("conftest.py").read_text()
        + """

@pytest.hookimpl(tryfirst=True)
def pytest_roofline_device(config, spec):
    from pytest_roofline import get_device

    return get_device(spec) if spec == "h100-sxm" else None
"""
    )
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.speed_of_light("gemm", M=4096, N=4096, K=4096, dtype="bf16")
        def test_gemm(roofline):
            assert roofline.estimate().floor_s == pytest.approx(139e-6, rel=1e-3)
            assert roofline.device.name == "NVIDIA H100 80GB HBM3"
        """
    )
    result = rl.runpytest("--roofline-device=h100-sxm", *NO_MEASUREMENT_WARNS)
    result.assert_outcomes(passed=1, warnings=1)  # an estimate alone is no measurement


# -- peaks -----------------------------------------------------------------------------------------


def test_a_peaks_file_overrides_the_device_figures_and_the_report_says_so(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_setting=MISS)
    (rl.path / "peaks.json").write_text(json.dumps(PEAKS))
    result = rl.runpytest("--roofline-peaks=peaks.json", "--roofline-report", "--roofline-mode=report")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "device: Fake Accelerator [[]fake, cpu[]]  DRAM bandwidth 50.0 GB/s (user)",
            "*vector peaks: fp64/fp32 1.00 TFLOP/s (datasheet, ridge 20.0 FLOP/B)*",
            "  note: ceilings from peaks.json",
            "  note: a slower memory",
        ]
    )


def test_a_peaks_file_of_another_kind_of_device_is_refused(rl: pytest.Pytester) -> None:
    # a GPU's sheet applied to this CPU would judge host-timed kernels against GPU peaks
    rl.makepyfile(test_setting=MISS)
    (rl.path / "peaks.json").write_text(json.dumps({**PEAKS, "kind": "cuda"}))
    result = rl.runpytest("--roofline-peaks=peaks.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["roofline: --roofline-peaks *peaks.json: its kind 'cuda' does not match the device it refines, "
         "'Fake Accelerator' (cpu)*"]
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--roofline-device=cpu"], ""),
        ([], " (auto, without CuPy)"),
        (["--roofline-device=auto"], " (auto, without CuPy)"),
    ],
)
def test_a_peaks_file_of_another_kind_than_this_cpu_is_a_usage_error_before_any_test(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str], why: str
) -> None:
    """Without a device hook, ``cpu`` (and ``auto`` where CuPy is missing) is this CPU: a GPU's sheet
    is a mistake in the file, said before anything runs, whether or not a test measures."""
    monkeypatch.setattr("pytest_roofline.plugin.options._cupy_installed", lambda: False)
    rl.makeconftest(fake_conftest(device=False))  # the built-in device; nothing is calibrated
    rl.makepyfile(test_setting=MISS)
    (rl.path / "peaks.json").write_text(json.dumps({**PEAKS, "kind": "cuda"}))
    result = rl.runpytest("--roofline-peaks=peaks.json", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --roofline-peaks peaks.json: its kind 'cuda' does not match the device it refines, "
            f"this CPU{why}; give kind 'cpu' or leave it out"
        ]
    )
    rl.makeini("[pytest]\nroofline_peaks = peaks.json\n")
    result = rl.runpytest(*args, "-k", "nothing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini roofline_peaks *peaks.json: its kind 'cuda' does not match*"])
    assert rl.runpytest("--roofline-peaks=peaks.json", "--roofline-mode=off", *args).ret == pytest.ExitCode.OK


def test_a_gpu_peaks_file_is_not_refused_where_auto_may_be_a_gpu(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CuPy installed, auto's kind is known only by importing CuPy: the check waits for the
    first measurement (which fails naming the file, as the test above this one shows)."""
    monkeypatch.setattr("pytest_roofline.plugin.options._cupy_installed", lambda: True)
    rl.makeconftest(fake_conftest(device=False))
    rl.makepyfile("def test_plain():\n    pass\n")
    (rl.path / "peaks.json").write_text(json.dumps({**PEAKS, "kind": "cuda"}))
    rl.runpytest("--roofline-peaks=peaks.json").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "peaks file *peaks.json*: is not valid JSON*"),
        ('{"bandwidth": 50}', "peaks file *peaks.json*: unknown key 'bandwidth'*"),
        (
            '{"bandwidth_gbs": -1}',
            "peaks file *peaks.json*: 'bandwidth_gbs' must be a positive number; got -1",
        ),
        (
            '{"peaks_tflops": {"fp33:vector": 1}}',
            "peaks file *peaks.json*: peaks_tflops[[]'fp33:vector'[]] = 1: *",
        ),
        (
            '{"peaks_tflops": {"int8:tensor": 1e300}}',
            "peaks file *peaks.json*: peaks_tflops[[]'int8:tensor'[]] must be below 1.8e+296; got 1e+300",
        ),
    ],
)
def test_a_bad_peaks_file_is_a_usage_error_naming_it(rl: pytest.Pytester, content: str, message: str) -> None:
    (rl.path / "peaks.json").write_text(content)
    result = rl.runpytest("--roofline-peaks=peaks.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*argument --roofline-peaks: {message} (expected datasheet, measured or a JSON *"]
    )


# -- help ------------------------------------------------------------------------------------------


def test_help_lists_every_option_with_its_default_and_its_ini_twin(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "speed-of-light performance budgets:",
            "  --roofline-report     print a table of every measurement after the tests",
            "  --roofline-json=PATH  write every measurement*",
            "  --roofline-device=DEVICE",
            "  --roofline-min-fraction=FRACTION",
            "*fraction of speed of light (default: 0.5)",
            "  --roofline-mode=MODE  enforce: fail tests below budget; report: measure and",
            "  --roofline-stat=STAT  statistic the verdict uses: median, min or mean",
            "  --roofline-max-time=SECONDS",
            "  --roofline-cache=STATE",
            "*cold: every call finds its data out of the cache*",
            "  --roofline-inconclusive=ACTION",
            "*fail or skip (default: warn)",
            "  --roofline-ceilings=CEILINGS",
            "*probe timed beside each kernel, so a busy machine slows",
            "  --roofline-peaks=SOURCE",
            "  --roofline-require-measurement",
            "*fail a marked test that takes the roofline fixture but*",
        ]
    )
    text = " ".join(result.stdout.str().split())  # unwrapped
    for s in SETTINGS:
        flag, key = s[0], s[0].removeprefix("--").replace("-", "_")
        assert f"{key} (string):" in text
        assert f"[{flag}" in text
    assert "(default: off)" in text
    assert "(default: enforce)" in text
    assert "[--roofline-report; true or false]" in text
    assert "roofline_require_measurement (string):" in text
    assert "[--roofline-require-measurement; true or false]" in text


def test_markers_shows_the_marker_signature(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.speed_of_light(op, [*], min_fraction=None, dtype=None, device=None, *, **params): "
            "this test's kernel must reach min_fraction of the speed-of-light floor*"
        ]
    )


def test_the_marker_is_registered_for_strict_markers(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32")
        def test_copy():
            pass
        """
    )
    rl.runpytest("--strict-markers").assert_outcomes(passed=1)


@pytest.mark.parametrize(("args", "mode"), [((), "enforce"), (("--roofline-mode=report",), "report")])
def test_a_conftest_can_read_the_sessions_mode(rl: pytest.Pytester, args: tuple[str, ...], mode: str) -> None:
    rl.makepyfile(
        f"""
        from pytest_roofline.plugin import roofline_mode

        def test_mode(request):
            assert roofline_mode(request.config) == {mode!r}
        """
    )
    rl.runpytest(*args).assert_outcomes(passed=1)


# -- --roofline-inconclusive -------------------------------------------------------------------------

_NOISY_BACKEND = """

from fakes import FakeBackend

# 2.4 and 2.6 ms in turn: the median's interval never narrows below ±4%, around 80% attained
BACKEND = FakeBackend(lambda i: 2.4e-3 if i % 2 else 2.6e-3, resolution_s=1e-9)


def pytest_roofline_backend(config, device, spec):
    return BACKEND
"""


@pytest.mark.parametrize(
    ("args", "outcome", "line"),
    [
        ((), {"passed": 1}, "*RooflineWarning: copy[[]n=25000000 fp32[]] is inconclusive: attained 80.0%*"),
        (("--roofline-inconclusive=fail",), {"failed": 1}, "*copy[[]n=25000000 fp32[]] is inconclusive*"),
        (("--roofline-inconclusive=skip",), {"skipped": 1},
         "SKIPPED*copy[[]n=25000000 fp32[]] is inconclusive*"),
        (("--roofline-mode=report",), {"passed": 1}, "*1 measurement(s): 1 inconclusive; mode report"),
    ],
    ids=["warn", "fail", "skip", "report"],
)  # fmt: skip
def test_an_inconclusive_verdict_warns_fails_or_skips(
    pytester: pytest.Pytester, args: tuple[str, ...], outcome: dict[str, int], line: str
) -> None:
    pytester.makeconftest(fake_conftest(backend=False, extra=_NOISY_BACKEND))
    pytester.makepyfile(
        f"""
        def test_noisy(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32", min_fraction=0.8)
        """
    )
    result = pytester.runpytest("-rs", "--roofline-report", "-W", "default", *args)
    result.assert_outcomes(**outcome)
    result.stdout.fnmatch_lines([line])
    if args != ("--roofline-mode=report",):
        result.stdout.fnmatch_lines(["*the 95% interval 76.*–83.*straddles the budget*"])


def test_report_mode_measures_a_miss_once_and_enforce_twice(pytester: pytest.Pytester) -> None:
    """Report mode fails nothing, so a miss is not worth a second look; wall_s counts every look."""
    pytester.makeconftest(fake_conftest())
    pytester.makepyfile(
        f"""
        def test_miss(roofline):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")  # 2.5 ms a call: 80% of 2 ms
        """
    )
    walls = {}
    for mode, count, outcome in (("report", 1, "passed"), ("enforce", 2, "failed")):
        result = pytester.runpytest(
            f"--roofline-mode={mode}", "--roofline-min-fraction=0.9", f"--roofline-json=out-{mode}.json"
        )
        result.assert_outcomes(**{outcome: 1})
        (record,) = json.loads((pytester.path / f"out-{mode}.json").read_text())["measurements"]
        assert (record["verdict"], record["measurements"]) == ("MISS", count)
        walls[mode] = record["wall_s"]
    assert walls["enforce"] > walls["report"]  # both measurements are counted


@pytest.mark.parametrize(("args", "ini", "judged"), [
    ((), "", True),
    (("--roofline-latency-floor=off",), "", False),
    ((), "roofline_latency_floor = off", False),
    (("--roofline-latency-floor=on",), "roofline_latency_floor = off", True),
])  # fmt: skip
def test_the_latency_floor_is_judged_unless_switched_off(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], ini: str, judged: bool
) -> None:
    from pytest_roofline.timing import backend_latency

    # an empty call on this timer costs 9 ms, above the fake copy's roofline floor
    monkeypatch.setattr(backend_latency, "latency_floor_s", lambda backend, **how: 9e-3)
    rl.makepyfile(test_setting=MISS)
    if ini:
        rl.makeini(f"[pytest]\n{ini}\n")
    result = the_result(rl.inline_run(*args))
    assert result.latency_bound is judged
    assert result.latency_floor_s == (9e-3 if judged else 0.0)
    assert result.floor_s == (9e-3 if judged else result.estimate.floor_s)


# -- values that broke later -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--roofline-max-time=1e308"], "expected a positive number of seconds, at most 86400, got '1e308'"),
        (["--roofline-columns=test,test"], "column 'test' is named twice*"),
    ],
)
def test_option_values_that_broke_later_are_usage_errors(
    rl: pytest.Pytester, args: list[str], message: str
) -> None:
    result = rl.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
