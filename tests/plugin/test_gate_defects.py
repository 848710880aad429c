"""Defects a red team found in the CI gate (issue 22), each with the test that failed before its fix.

The fake device and scripted backend of ``conftest.py``: 2.5 ms a call attains 80% of a 2 ms floor.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import COPY, fake_conftest
from fakes import FakeBackend, Overlap, in_threads

SUITE = f"""
import pytest

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
def test_first(roofline):
    roofline(lambda: None)

@pytest.mark.speed_of_light("copy", {COPY}, dtype="fp32", min_fraction=0.3)
def test_second(roofline):
    roofline(lambda: None)
"""


@pytest.fixture
def baseline(rl: pytest.Pytester) -> Path:
    rl.makepyfile(test_kernels=SUITE)
    rl.runpytest("--roofline-save=base.json").assert_outcomes(passed=2)
    return rl.path / "base.json"


def test_a_save_that_measured_nothing_keeps_the_old_baseline(rl: pytest.Pytester, baseline: Path) -> None:
    before = baseline.read_text()
    result = rl.runpytest("--roofline-save=base.json", "--roofline-mode=off")
    result.assert_outcomes(passed=2)
    assert baseline.read_text() == before  # not replaced by an empty one: the gate stays on
    result.stdout.fnmatch_lines(["*--roofline-save: nothing was measured*base.json*kept*"])
    result = rl.runpytest("--roofline-save=base.json", "-k", "no_such_test")
    assert baseline.read_text() == before


def test_a_run_cut_short_is_marked_in_its_baseline(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        test_kernels=SUITE
        + """
def test_broken():
    assert False

def test_last():
    pass
"""
    )
    rl.runpytest("--roofline-save=cut.json", "-x")
    data = json.loads((rl.path / "cut.json").read_text())
    assert data["interrupted"] is True  # as the JSON of the same run says
    assert data["interruption"]


def test_a_relative_baseline_path_is_resolved_once_at_start(rl: pytest.Pytester, baseline: Path) -> None:
    rl.makepyfile(
        test_kernels=SUITE.replace(
            "def test_first(roofline):",
            "def test_first(roofline, monkeypatch, tmp_path):\n    monkeypatch.chdir(tmp_path)",
        )
    )
    result = rl.runpytest("--roofline-compare=base.json", "--roofline-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*BaselineError*")
    assert (rl.path / "out.json").is_file()  # written where the path pointed at start-up


def test_a_baseline_deleted_mid_run_is_no_traceback(rl: pytest.Pytester, baseline: Path) -> None:
    # the file goes before any test measures: the baseline was read once, at start-up
    rl.makepyfile(
        test_kernels=f"def test_aaa_delete():\n    import os\n    os.remove({str(baseline)!r})\n" + SUITE
    )
    result = rl.runpytest("--roofline-compare=base.json", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK


def test_compare_into_a_closed_pipe_keeps_its_exit_status(tmp_path: Path, baseline: Path) -> None:
    data = json.loads(baseline.read_text())
    first = data["measurements"][0]
    # 3000 tests, one of which lost half: more output than a pipe holds, so head closes it early
    data["measurements"] = [{**first, "nodeid": f"test_many.py::test_{i}"} for i in range(3000)]
    data["measurements"][-1] = {**first, "nodeid": "test_many.py::test_2999"}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    baseline = old
    data["measurements"][-1]["attained"] /= 2
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    script = (
        f"{sys.executable} -m pytest_roofline compare {baseline} {new} | head -1; exit ${{PIPESTATUS[0]}}"
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr  # the regression, not the broken pipe's 0
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--roofline-json=out.json", "--roofline-markdown=out.json"],
         "--roofline-markdown and --roofline-json name the same file*out.json*"),
        (["--roofline-json=out.json", "--roofline-save=./out.json"],
         "--roofline-save and --roofline-json name the same file*"),
    ],
)  # fmt: skip
def test_two_outputs_to_one_file_is_a_usage_error(rl: pytest.Pytester, args: list[str], message: str) -> None:
    result = rl.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}"])


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


def test_a_threshold_reads_the_same_with_spaces_either_side() -> None:
    from pytest_roofline.output.comparison import parse_threshold

    assert parse_threshold("10% ") == parse_threshold(" 10%") == parse_threshold("10%") == pytest.approx(0.1)


def test_torchs_packed_fp4_is_fp4() -> None:
    from pytest_roofline.model.core import Precision, parse_dtype

    assert parse_dtype("torch.float4_e2m1fn_x2") is Precision.FP4


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


def test_a_drop_measured_under_contention_is_inconclusive_never_a_regression() -> None:
    from pytest_roofline.output.baseline import BaselineRecord
    from pytest_roofline.output.comparison import Change, compare

    old = BaselineRecord("t.py::test_mm", "", 0.8, 0.01, 1e-3, "cpu", "CPU", "pass")
    busy = BaselineRecord("t.py::test_mm", "", 0.02, 0.01, 4e-2, "cpu", "CPU", "pass", disturbed=True)
    quiet = BaselineRecord("t.py::test_mm", "", 0.02, 0.01, 4e-2, "cpu", "CPU", "MISS")
    assert compare(old, busy).change is Change.INCONCLUSIVE  # beside a busy neighbour: -98%, not confirmed
    assert compare(old, quiet).change is Change.REGRESSION
    disturbed_old = BaselineRecord("t.py::test_mm", "", 0.8, 0.01, 1e-3, "cpu", "CPU", "pass", disturbed=True)
    assert compare(disturbed_old, quiet).change is Change.INCONCLUSIVE  # the baseline's figure is the load's


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


def test_a_baseline_from_another_cpu_model_is_another_device() -> None:
    from pytest_roofline.output.baseline import BaselineRecord
    from pytest_roofline.output.comparison import Change, compare

    old = BaselineRecord("t.py::test_add", "", 0.8, 0.01, 1e-3, "cpu", "AMD EPYC 7J13", "pass")
    other = BaselineRecord("t.py::test_add", "", 0.4, 0.01, 2e-3, "cpu", "Intel(R) Xeon(R) Processor", "pass")
    same = BaselineRecord("t.py::test_add", "", 0.4, 0.01, 2e-3, "cpu", "AMD EPYC 7J13", "pass")
    assert compare(old, other).change is Change.OTHER_DEVICE
    assert compare(old, other, across_devices=True).change is Change.REGRESSION
    assert compare(old, same).change is Change.REGRESSION


@pytest.mark.parametrize(
    "disturbance",
    [{"contention": {"level": "heavy"}}, {"thread_wait_share": 0.5}, {"verdict": "inconclusive"}],
)
def test_a_record_the_load_could_have_slowed_is_disturbed(disturbance: dict[str, object]) -> None:
    from pytest_roofline.output.baseline import BaselineRecord

    record = {"nodeid": "t.py::t", "name": "", "attained": 0.5, "time_s": 1e-3, "device": "cpu",
              "verdict": "pass", "contention": {"level": "quiet"}, "thread_wait_share": 0.01}  # fmt: skip
    assert not BaselineRecord.from_record(record).disturbed
    assert BaselineRecord.from_record({**record, **disturbance}).disturbed


def test_the_roofline_section_fits_an_80_column_terminal(
    rl: pytest.Pytester, baseline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(baseline.read_text())
    for record in data["measurements"]:
        record["attained"] *= 2  # the baseline stood twice as high: every test regressed
    baseline.write_text(json.dumps(data))
    monkeypatch.setenv("COLUMNS", "80")
    result = rl.runpytest("--roofline-report", "--roofline-mode=report", "--roofline-compare=base.json")
    lines = result.stdout.lines
    section = lines[next(i for i, line in enumerate(lines) if "roofline report" in line) :]
    section = section[: next(i for i, line in enumerate(section) if line.startswith("=====") and i > 0)]
    assert any("regression" in line for line in section)  # the regression lines are in it, wrapped
    assert max(len(line) for line in section) <= 80, max(section, key=len)


def test_an_unwritable_step_summary_warns_and_leaves_the_run_green(
    rl: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rl.makepyfile(test_kernels=SUITE)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "such" / "dir" / "summary.md"))
    result = rl.runpytest()
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.OK  # the step summary is GitHub's, not a file the user asked for
    result.stdout.fnmatch_lines(["*could not write the Markdown summary*summary.md*"])


def test_a_read_only_output_is_refused_not_replaced(rl: pytest.Pytester) -> None:
    out = rl.path / "out.json"
    out.write_text("{}")
    out.chmod(0o444)
    result = rl.runpytest("--roofline-json=out.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--roofline-json: cannot write 'out.json': it is read-only*"])
    assert out.read_text() == "{}"


#: faults in a baseline file that escaped as tracebacks: a number no float holds, JSON nested past the
#: recursion limit, an integer past Python's 4300-digit limit
UNREADABLE = {
    "attained": ("attained", 10**400, "*(*::test_first): 'attained' is an integer of 401 digits*"),
    "time_s": ("time_s", 10**400, "*(*::test_first): 'time_s' is an integer of 401 digits*"),
    "ci": ("attained_ci_rel", -(10**400), "*(*::test_first): 'attained_ci_rel' is an integer of 401 digits*"),
    "digits": ("attained", None, "*: an integer of more than 4300 digits, too long to read"),
    "deep": (None, None, "*: JSON nested too deeply to read"),
}


def _spoil(baseline: Path, fault: str) -> str:
    """Spoil ``baseline`` with ``fault``; the message that names it, as a pattern."""
    field, value, message = UNREADABLE[fault]
    if field is None:
        baseline.write_text("[" * 100_000 + "]" * 100_000)
        return message
    data = json.loads(baseline.read_text())
    first = min(data["measurements"], key=lambda record: record["nodeid"])  # test_first, whatever the order
    data["measurements"] = [first]
    first[field] = value if value is not None else 0
    text = json.dumps(data)
    if value is None:  # json.dumps would not write it either
        text = text.replace(f'"{field}": 0', f'"{field}": {"1" * 5000}')
    baseline.write_text(text)
    return message


@pytest.mark.parametrize("fault", UNREADABLE)
@pytest.mark.parametrize("where", ["option", "pytest.ini", "pyproject.toml"])
def test_a_baseline_no_float_or_json_reader_holds_is_a_usage_error(
    rl: pytest.Pytester, baseline: Path, fault: str, where: str
) -> None:
    message = _spoil(baseline, fault)
    if where == "pytest.ini":
        rl.makeini("[pytest]\nroofline_compare = base.json\n")
    elif where == "pyproject.toml":
        rl.makepyprojecttoml('[tool.pytest.ini_options]\nroofline_compare = "base.json"\n')
    result = rl.runpytest("--roofline-compare=base.json") if where == "option" else rl.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    origin = "--roofline-compare" if where == "option" else "ini option roofline_compare = 'base.json'"
    result.stderr.fnmatch_lines([f"*{origin}*baseline *base.json{message}"])
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output


@pytest.mark.parametrize("fault", UNREADABLE)
@pytest.mark.parametrize("side", ["old", "new"])
def test_roofline_compare_of_an_unreadable_baseline_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, baseline: Path, fault: str, side: str
) -> None:
    from pytest_roofline import cli

    good = tmp_path / "good.json"
    good.write_text(baseline.read_text())
    message = _spoil(baseline, fault)
    old, new = (baseline, good) if side == "old" else (good, baseline)
    capsys.readouterr()  # the run that wrote the baseline
    assert cli.main(["compare", str(old), str(new)]) == 2  # 1 would be a regression to CI
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err
    named = "baseline" if side == "old" else "compared"  # the new file is no baseline
    pytest.LineMatcher(err.splitlines()).fnmatch_lines([f"roofline: error: {named} *{message}"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json", "{good}"], "baseline missing.json: no such file"),
        (["{good}", "missing.json"], "compared missing.json: no such file"),
        (["{good}", "{good}", "--threshold", "-5%"],
         "argument --threshold: expected a drop such as 10%*; got '-5%'"),
        (["{bad}", "{good}"], "baseline *bad.json: not JSON (Expecting value, line 1)"),
        (["{good}", "{good}", "--threshold", "5"], "argument --threshold: expected a drop such as 10%*"),
        (["{good}"], "the following arguments are required: new"),
    ],
)
def test_roofline_compare_of_any_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    from pytest_roofline import cli

    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"schema": 1, "measurements": []}))
    bad.write_text("")
    assert cli.main(["compare", *(a.format(good=good, bad=bad) for a in args)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    pytest.LineMatcher(err.splitlines()).fnmatch_lines([f"roofline: error: {message}"])


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


def test_two_threads_measuring_at_once_take_turns() -> None:
    from pytest_roofline import measure
    from pytest_roofline.model.policy import Policy

    overlap = Overlap()

    class Watched(FakeBackend):
        def run(self, *args: Any, **kwargs: Any) -> list[float]:
            with overlap:
                return super().run(*args, **kwargs)

    policy = Policy(max_time_s=0.05)
    in_threads(*(lambda: measure(lambda: None, policy=policy, backend=Watched(1e-3)) for _ in range(2)))
    assert overlap.most == 1  # one thread's windows never open while the other's are


def test_two_threads_measuring_through_the_fixture_take_turns(rl: pytest.Pytester) -> None:
    rl.makeconftest(
        fake_conftest(
            extra="""
from fakes import Overlap

OVERLAP = Overlap()

class Watched(ScriptedBackend):
    def run(self, *args, **kwargs):
        with OVERLAP:
            return super().run(*args, **kwargs)

BACKEND = Watched((DEFAULT_TIME_S,), resolution_s=1e-9, device_name="fake accelerator")
"""
        )
    )
    rl.makepyfile(
        f"""
from conftest import OVERLAP
from fakes import in_threads

def test_two_at_once(roofline):
    copy = lambda i: lambda: roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", name=str(i))
    first, second = in_threads(copy(1), copy(2))
    assert first.time_s == second.time_s == 2.5e-3
    assert OVERLAP.most == 1
"""
    )
    result = rl.runpytest("--roofline-report")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*measurements on two threads at once waited for each other*"])


def test_a_rotation_planned_on_another_thread_leaves_this_ones_copies_alone() -> None:
    import numpy as np

    from pytest_roofline.timing.rotation import Rotation, plan_rotation, release_host_pool

    def plan(array: np.ndarray[Any, Any], seen: list[float]) -> Rotation:
        kernel = functools.partial(lambda a: seen.append(float(a.sum())))
        rotation = plan_rotation(kernel, (array,), None, op_bytes=array.nbytes, llc_bytes=2**20)
        assert isinstance(rotation, Rotation)
        return rotation

    ones, zeros = np.ones(2**15), np.zeros(2**15)
    seen: list[float] = []
    mine = plan(ones, seen)
    in_threads(lambda: plan(zeros, []))  # while mine is still in use
    for _ in range(mine.copies):
        mine.kernel()
    assert seen == [ones.sum()] * mine.copies  # no copy of mine became one of the other thread's
    release_host_pool()


@pytest.mark.parametrize("config", ["pytest.ini", "pyproject.toml"])
def test_a_relative_baseline_in_the_ini_file_is_read_beside_it_once_at_start(
    rl: pytest.Pytester, baseline: Path, monkeypatch: pytest.MonkeyPatch, config: str
) -> None:
    if config == "pytest.ini":
        rl.makeini("[pytest]\nroofline_compare = base.json\n")
    else:
        rl.makepyprojecttoml('[tool.pytest.ini_options]\nroofline_compare = "base.json"\n')
    rl.makepyfile(
        test_kernels=SUITE.replace(
            "def test_first(roofline):",
            "def test_first(roofline, monkeypatch, tmp_path):\n    monkeypatch.chdir(tmp_path)",
        )
    )
    data = json.loads(baseline.read_text())
    for record in data["measurements"]:
        record["attained"] *= 2  # found and read: every test regressed
    baseline.write_text(json.dumps(data))
    monkeypatch.chdir(rl.mkdir("elsewhere"))  # pytest started away from the ini file
    result = rl.runpytest(str(rl.path / "test_kernels.py"), "-p", "no:randomly")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*regress*"])
    result.stdout.no_fnmatch_line("*BaselineError*")


@pytest.mark.parametrize("option", ["json", "save", "markdown", "plot"])
def test_a_fifo_as_an_output_is_a_usage_error_not_a_hang(rl: pytest.Pytester, option: str) -> None:
    rl.makepyfile(test_kernels=SUITE)
    name = "out.svg" if option == "plot" else "out.json"
    os.mkfifo(rl.path / name)
    # a subprocess, so that a hang fails this test instead of hanging the suite
    result = rl.runpytest_subprocess(f"--roofline-{option}={name}", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--roofline-{option}: cannot write '{name}': it is a FIFO, not a regular file*"]
    )
    assert stat.S_ISFIFO((rl.path / name).stat().st_mode)


def test_a_markdown_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "summary.md"
    os.mkfifo(fifo)
    code = f"from pytest_roofline.output.markdown import append_section; append_section({str(fifo)!r}, 'x')"
    run = [sys.executable, "-c", code]
    done = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"OSError: [Errno 6] it is a FIFO that no process is reading: {str(fifo)!r}"
    )
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def _write_json(path: Path) -> None:
    from pytest_roofline.output.jsonfile import write_json_atomic

    write_json_atomic(path, {"a": 1})


def _write_plot(path: Path) -> None:
    pytest.importorskip("matplotlib")
    from test_plot import DEVICE, RECORDS

    from pytest_roofline.output.plot import draw

    draw(RECORDS, [DEVICE], path.with_suffix(".svg"))


def _write_markdown(path: Path) -> None:
    from pytest_roofline.output.markdown import append_section

    append_section(path, "x")


@pytest.mark.parametrize("write", [_write_json, _write_plot, _write_markdown])
def test_a_write_that_fails_names_the_file(tmp_path: Path, write: Any) -> None:
    target = tmp_path / "gone" / "out.json"  # a directory removed after the up-front checks
    with pytest.raises((OSError, ValueError)) as caught:
        write(target)
    assert str(target.with_suffix(".svg") if write is _write_plot else target) in str(caught.value)


@pytest.mark.parametrize(("option", "name"), [("save", "base.json"), ("plot", "roofline.svg")])
def test_a_gate_output_that_fails_at_the_end_names_its_file(
    rl: pytest.Pytester, option: str, name: str
) -> None:
    rl.makepyfile(
        test_kernels="def test_aaa_remove():\n    import shutil\n    shutil.rmtree('out')\n" + SUITE
    )
    rl.mkdir("out")
    result = rl.runpytest(f"--roofline-{option}=out/{name}", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"roofline: could not write --roofline-{option}: *out/{name}*"])
