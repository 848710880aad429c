"""``roofline selfcheck``'s second clock (``--ncu``): Nsight Compute's kernel durations beside the
engine's, read from ncu's CSV, one call's kernels between two markers; on the fakes, with a fake ncu
that writes the CSV a real one would."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline import cli
from pytest_roofline.machine.selfcheck import gpu_check, ncu_clock
from pytest_roofline.machine.selfcheck.fake import FAKE_KERNEL_MS, faked
from pytest_roofline.machine.selfcheck.ncu_clock import MARKER, SecondClock, parse_launches, per_call

HEADER = '"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
FEW = ["copy 256 MiB d2d", "scale 8 MiB"]


def row(ident: int, kernel: str, value: str, unit: str = "ns", metric: str = ncu_clock.METRIC) -> str:
    """One line of ncu's CSV, in the units ncu 2025.3 wrote on the H200 (``ns``)."""
    return f'"{ident}","7","{kernel}({ident})","{metric}","{unit}","{value}"'


def csv_text(calls: list[tuple[str, list[float]]]) -> str:
    """ncu's CSV for these calls: a marker, then each kernel's duration (seconds)."""
    lines, ident = ["==PROF== Connected to process 7", HEADER], 0
    for _, durations in calls:
        lines.append(row(ident, MARKER, "1,024"))
        ident += 1
        for duration in durations:
            lines.append(row(ident, "kernel", f"{duration * 1e9:,.0f}"))
            ident += 1
    return "\n".join(lines) + "\n"


def test_ncus_csv_is_read_in_launch_order_in_seconds_whatever_the_unit() -> None:
    text = "\n".join([
        "==PROF== noise before the table", HEADER, row(2, "b", "3", "usecond"), row(1, "a", "1,500", "ns"),
        row(1, "a", "4096", "byte", "dram__bytes_read.sum"), '"x","7","bad","m","","not a number"',
    ])  # fmt: skip

    assert parse_launches(text) == [
        (1, "a", {ncu_clock.METRIC: pytest.approx(1.5e-6), "dram__bytes_read.sum": 4096.0}),
        (2, "b", {ncu_clock.METRIC: pytest.approx(3e-6)}),
    ]
    assert parse_launches("ncu printed no table") == []


def test_a_calls_kernels_are_those_between_two_markers_summed_and_named() -> None:
    launches = parse_launches(csv_text([("one", [1e-6, 2e-6]), ("one", [1e-6, 2.5e-6]), ("two", [4e-6])]))

    calls = per_call(launches, ["one", "two"], calls=2)

    assert [c[ncu_clock.METRIC] for c in calls["one"]] == [pytest.approx(3e-6), pytest.approx(3.5e-6)]
    assert calls["one"][0]["kernels"] == ["kernel", "kernel"]
    assert [c[ncu_clock.METRIC] for c in calls["two"]] == [pytest.approx(4e-6)]


@pytest.mark.parametrize(
    ("engine_us", "ncu_us", "judged", "agrees"),
    [
        (1.9, 1.0, False, False),  # under 2 µs: shown, not judged
        (2.5, 2.0, True, True),  # 25% over, but within 0.5 µs
        (104.0, 100.0, True, True),  # within 5%
        (106.0, 100.0, True, False),
        (94.0, 100.0, True, False),  # too fast is as wrong as too slow
    ],
)
def test_a_kernel_agrees_within_five_percent_or_half_a_microsecond_from_two(
    engine_us: float, ncu_us: float, judged: bool, agrees: bool
) -> None:
    clock = SecondClock("k", "warm", engine_us * 1e-6, ncu_us * 1e-6, kernels=1)

    assert (clock.judged, clock.agrees) == (judged, agrees)


def test_a_cold_window_is_compared_less_the_event_pair_it_holds() -> None:
    """GPU run 2026-11-28: a cold 4 KiB scale read 3.7 µs between its events, ncu 2.37 µs, an empty
    event pair 1.28 µs."""
    raw = SecondClock("scale 4 KiB", "cold", 3.7e-6, 2.37e-6, kernels=1)
    less = SecondClock("scale 4 KiB", "cold", 3.7e-6, 2.37e-6, kernels=1, window_s=1.28e-6)

    assert (raw.agrees, less.agrees) == (False, True)
    assert less.kernel_s == pytest.approx(2.42e-6)
    assert "(2.4 µs less the event pair's 1.3 µs), ncu 2.4 µs (1.021×" in less.describe()


class FakeNcu:
    """Runs as ncu would: writes the CSV of each case named after the module (``-m ... INDEX CASE...``)
    to --log-file, each call ``scale`` times the fake kernel's duration, and prints the launched names."""

    def __init__(self, scale: float = 1.0, returncode: int = 0) -> None:
        self.scale, self.returncode = scale, returncode
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        names = command[command.index(ncu_clock.__name__) + 2 :]
        duration = FAKE_KERNEL_MS * 1e-3 * self.scale
        calls = [(name, [duration]) for name in names for _ in range(ncu_clock.CALLS)]
        Path(command[command.index("--log-file") + 1]).write_text(csv_text(calls))
        stdout = "cases: " + json.dumps(names)
        return subprocess.CompletedProcess(command, self.returncode, stdout=stdout, stderr="ncu: done")


def run_on_fakes(fake: FakeNcu) -> Any:
    from pytest_roofline.machine.selfcheck.gpu_run import run_gpu

    cases = [case for case in gpu_check.CASES if case.name in FEW]
    with faked(0) as (extra, scratch):
        return run_gpu(0, cases, extra=extra, calibration_dir=scratch, rounds=2, ncu="ncu", ncu_run=fake)


def test_only_the_cold_figures_are_compared_less_the_event_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    def scripted(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        Path(command[command.index("--log-file") + 1]).write_text(csv_text([("k", [2e-6])] * ncu_clock.CALLS))
        return subprocess.CompletedProcess(command, 0, stdout='cases: ["k"]', stderr="")

    from pytest_roofline.machine.selfcheck.compare import CaseResult, Timing
    from pytest_roofline.model.stats import Stats

    engine = {name: Timing(name, (Stats.from_samples([3e-6]),)) for name in ("engine warm", "engine cold")}
    result = CaseResult("k", tuple(engine.values()))

    clocks, problems = ncu_clock.second_clocks(0, ["k"], [result], ncu="ncu", event_pair_s=1e-6, run=scripted)

    assert problems == []
    assert [(c.mode, c.window_s, c.agrees) for c in clocks] == [("warm", 0.0, False), ("cold", 1e-6, True)]


@pytest.mark.usefixtures("quiet_gpu")
def test_on_the_fakes_ncu_runs_warm_and_cold_at_the_gpus_clocks_and_agrees() -> None:
    fake = FakeNcu()

    report = run_on_fakes(fake)

    assert [c[c.index("--cache-control") + 1] for c in fake.commands] == ["none", "all"]
    assert all(c[c.index("--clock-control") + 1] == "none" for c in fake.commands)
    assert all(c[-2:] == FEW and c[-3] == "0" for c in fake.commands)  # GPU 0, the kernels by name
    clocks = report.details["second_clock"]
    assert [(c["case"], c["mode"]) for c in clocks] == [(n, m) for m in ("warm", "cold") for n in FEW]
    assert all(c["judged"] and c["agrees"] for c in clocks)
    assert report.verdict.status == 0, report.verdict.line
    assert any(line.startswith("second clock: ncu's gpu__time_duration.sum") for line in report.notes)


@pytest.mark.usefixtures("quiet_gpu")
def test_a_kernel_ncu_times_ten_percent_shorter_fails_the_check_naming_it() -> None:
    report = run_on_fakes(FakeNcu(scale=1 / 1.1))

    assert report.verdict.status == 1
    assert "second clock: copy 256 MiB d2d (warm): the engine reads" in report.verdict.line
    assert "ncu 181.8 µs (1.100×; within 5% or 500.0 ns agrees)" in report.verdict.line


@pytest.mark.usefixtures("quiet_gpu")
def test_an_ncu_that_fails_is_said_and_fails_the_check() -> None:
    class Broken(FakeNcu):
        def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(command, 1, stdout="", stderr="==ERROR== profiling failed")

    report = run_on_fakes(Broken())

    assert report.verdict.status == 1
    assert "ncu (warm) exited 1 and timed 0 kernels: ==ERROR== profiling failed" in report.verdict.line


def test_asking_for_ncu_on_the_cpu_is_one_line_and_exit_2_before_anything_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ncu_clock, "find_ncu", lambda: "/usr/bin/ncu")
    never = lambda **kw: pytest.fail("measured despite a bad option")  # noqa: E731
    monkeypatch.setattr("pytest_roofline.machine.selfcheck.cpu_check.run_cpu", never)

    code = cli.main(["selfcheck", "--device", "cpu", "--ncu"])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert "--ncu: Nsight Compute times GPU kernels; --device cpu checks this CPU" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ncu"], "--ncu: ncu (Nsight Compute) is not on the PATH"),
        (["--fake", "--ncu"], "--ncu: the fakes of --fake have no ncu to run"),
    ],
)
def test_asking_for_ncu_where_there_is_none_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ncu_clock, "find_ncu", lambda: None)

    code = cli.main(["selfcheck", *argv])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert message in err
    assert len(err.splitlines()) == 1
