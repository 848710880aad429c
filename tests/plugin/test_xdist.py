"""pytest-xdist: workers that do not time a device at once, records that stream to the controller,
reruns that replace their earlier attempt, and GPU i mod n for worker i.

Every run here is a real ``-n 2`` run in a subprocess (workers are processes). Nothing asserts on
how long anything took: the lock test compares the workers' timing windows with each other only.
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from pathlib import Path

import pytest
from conftest import COPY, GEMM, fake_conftest
from fakes import seeded_capacities

XDIST = ("-p", "xdist", "-n", "2")


def seed_cpu_calibration(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration cache for the subprocess, so the real CPU device needs no seconds of calibrating."""
    from pytest_roofline.machine.calibrate import calibrate_cpu
    from pytest_roofline.machine.calibration_cache import Ceilings
    from pytest_roofline.model.core import Figure, Precision, Source, Unit

    cache = pytester.path / "cache"
    fake = Ceilings(
        bandwidth=Figure(1e12, Source.MEASURED),
        peaks={(p, Unit.VECTOR): Figure(1e15, Source.MEASURED) for p in (Precision.FP64, Precision.FP32)},
        details=seeded_capacities(),
    )
    calibrate_cpu(cache_dir=cache / "pytest-roofline", measure=lambda: fake, peak=None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))


# -- the lock ----------------------------------------------------------------------------------------


_TIMED = """
import os
import tempfile
import time

import pytest

LOG = {log!r}


def kernel(measurement):
    start = time.monotonic_ns()  # one clock for every process of this machine
    time.sleep(0.002)
    end = time.monotonic_ns()
    with open(LOG, "a") as log:  # one short append per call: never interleaved with another's
        log.write(f"{{os.environ['PYTEST_XDIST_WORKER']}} {{measurement}} {{start}} {{end}}\\n")


@pytest.mark.parametrize("i", range(3))
def test_timed(roofline, i):
    roofline.measure(kernel, f"{{__name__}}-{{i}}", op="copy", n=1 << 16, dtype="fp64", cache="warm")
    assert os.path.exists(os.path.join(tempfile.gettempdir(), "pytest-roofline-{run}-cpu.lock"))
"""


def test_workers_never_time_the_same_device_at_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real CPU device and host timer in two workers, a file of tests each: each measurement's
    window (its first warm-up call to its last sample) lies outside every window of the other
    worker. The lock file is the run's, and gone when the run ends."""
    seed_cpu_calibration(pytester, monkeypatch)
    log, run = pytester.path / "calls.log", f"test{uuid.uuid4().hex}"
    test = _TIMED.format(log=str(log), run=run)
    pytester.makepyfile(test_a=test, test_b=test)
    result = pytester.runpytest_subprocess(
        *XDIST, "--dist=loadfile", f"--testrunuid={run}", "--roofline-device=cpu", "--roofline-max-time=0.03"
    )
    result.assert_outcomes(passed=6)
    assert list(Path(tempfile.gettempdir()).glob(f"pytest-roofline-{run}-*")) == []
    windows: dict[tuple[str, str], tuple[int, int]] = {}  # (worker, measurement) -> (first start, last end)
    for line in log.read_text().splitlines():
        worker, measurement, start, end = line.split()
        first, last = windows.get((worker, measurement), (int(start), int(end)))
        windows[worker, measurement] = (min(first, int(start)), max(last, int(end)))
    measured: dict[str, set[str]] = {}
    for worker, measurement in windows:
        measured.setdefault(worker, set()).add(measurement)
    assert sorted(measured) == ["gw0", "gw1"]  # both workers measured: a file, three tests each
    assert [len(m) for m in measured.values()] == [3, 3]
    for (worker, measurement), (start, end) in windows.items():
        for (other, other_measurement), (other_start, other_end) in windows.items():
            if other != worker:
                assert end <= other_start or other_end <= start, (
                    f"{worker} timed {measurement} while {other} timed {other_measurement}"
                )


# -- records stream to the controller ----------------------------------------------------------------


def test_a_worker_that_crashes_loses_none_of_its_earlier_measurements(rl: pytest.Pytester) -> None:
    """Each test's records ride on its report, so what a worker measured before it died is in the
    controller's report and JSON (with --dist loadfile the crash comes after its file's other tests)."""
    rl.makepyfile(
        test_a=f"""
        import os

        def test_one(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32")

        def test_two(roofline):
            roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")

        def test_crash():
            os._exit(1)
        """,
        test_b=f"""
        def test_three(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32")
        """,
    )
    result = rl.runpytest_subprocess(
        *XDIST, "--dist=loadfile", "--max-worker-restart=0", "--roofline-report", "--roofline-json=out.json"
    )
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'test_a.py::test_crash'*"])
    result.stdout.fnmatch_lines(
        [
            "3 measurement(s): 3 pass; mode enforce",
            "roofline: the run was cut short (worker gw? went down (*)): the measurements of the tests "
            "that did not finish are missing",
        ]
    )
    data = json.loads((rl.path / "out.json").read_text())
    assert data["interrupted"] is True
    assert re.fullmatch(r"worker gw[01] went down \(.+\)", data["interruption"])
    assert sorted(m["nodeid"] for m in data["measurements"]) == [
        "test_a.py::test_one", "test_a.py::test_two", "test_b.py::test_three",
    ]  # fmt: skip
    assert [d["key"] for d in data["devices"]] == ["fake"]


def test_a_device_another_worker_found_other_figures_for_keeps_both_sets(pytester: pytest.Pytester) -> None:
    """Worker gw1 finds other ceilings for the same device (a calibration forced after gw0 read the
    cache): the controller keeps both, and each row the figures that judged it."""
    pytester.makeconftest(
        fake_conftest(
            extra="""

import dataclasses


def pytest_roofline_device(config, spec):  # replaces the one above
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
        return dataclasses.replace(fake_device(), bandwidth=Figure(5e10, Source.MEASURED))
    return fake_device()
"""
        )
    )
    test = f"""
def test_copy(roofline):
    roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32")
"""
    pytester.makepyfile(test_a=test, test_b=test)
    result = pytester.runpytest_subprocess(
        *XDIST, "--dist=loadfile", "--roofline-report", "--roofline-json=out.json"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["  figures #? of 2 this run (the device was measured again): judged 1 row(s)"] * 2
    )
    data = json.loads((pytester.path / "out.json").read_text())
    devices = {d["figures"]: d for d in data["devices"]}
    assert sorted(
        (d["key"], d["bandwidth"], d["remeasured"], d["measurements"]) for d in devices.values()
    ) == [
        ("fake", 5e10, True, 1),
        ("fake", 1e11, True, 1),
    ]
    assert sorted(devices[m["device_figures"]]["bandwidth"] for m in data["measurements"]) == [5e10, 1e11]


@pytest.mark.parametrize("args", [(), XDIST], ids=["serial", "xdist"])
def test_each_report_carries_the_records_of_its_phase(rl: pytest.Pytester, args: tuple[str, ...]) -> None:
    """``report.roofline_records``: on the controller too, as each test finishes."""
    rl.makeconftest(
        fake_conftest(
            extra="""

def pytest_sessionstart(session):
    global WORKER
    WORKER = hasattr(session.config, "workerinput")


def pytest_runtest_logreport(report):  # on the controller (or a serial run): reports as they arrive
    if getattr(report, "roofline_records", None) and not WORKER:
        with open("arrived.txt", "a") as out:
            names = ",".join(r["name"] for r in report.roofline_records)
            devices = len(getattr(report, "roofline_devices", []))
            out.write(f"{report.nodeid} {report.when} {names} {devices}\\n")
"""
        )
    )
    rl.makepyfile(
        f"""
        import pytest

        @pytest.fixture
        def measured_in_teardown(roofline):
            yield
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", name="teardown")

        def test_one(roofline, measured_in_teardown):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", name="a")
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", name="b")
        """
    )
    result = rl.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    assert sorted((rl.path / "arrived.txt").read_text().splitlines()) == [
        "test_each_report_carries_the_records_of_its_phase.py::test_one call a,b 1",
        "test_each_report_carries_the_records_of_its_phase.py::test_one teardown teardown 0",
    ]


def test_a_serial_run_keeps_the_records_it_made_as_they_are() -> None:
    """No JSON round trip in one process: the record a measurement made is the one the run keeps,
    and the report carries its JSON all the same, for other plugins (docs/json.md)."""
    from pytest_roofline.output.records import SkippedRecord
    from pytest_roofline.plugin.gate import Gate
    from pytest_roofline.plugin.options import SessionSettings
    from pytest_roofline.plugin.run_state import RunState
    from pytest_roofline.plugin.transport import RECORDS_ATTR, RecordTransport

    settings = SessionSettings(
        report=False, json=None, device="cpu", min_fraction=0.5, mode="enforce", stat="median",
        max_time=1.0, cache="cold", peaks="table",
    )  # fmt: skip
    state = RunState(settings, Gate(settings, reporting=True))
    transport = RecordTransport(state, worker=False)
    record = SkippedRecord(nodeid="t.py::test_x", label="copy", reason="no such device here")
    transport.send(record)
    report = pytest.TestReport("t.py::test_x", ("t.py", 0, "test_x"), {}, "passed", None, "call")
    transport.carry(report)
    (kept,) = state.records
    assert kept is record
    assert getattr(report, RECORDS_ATTR) == [record.to_json()]


def test_a_workers_notes_reach_the_controllers_summary(rl: pytest.Pytester) -> None:
    """A lock that cannot be made (here: a temp dir that does not exist) is one note, not a crash."""
    rl.makeconftest(
        fake_conftest(
            extra="""

import tempfile


def pytest_sessionstart(session):
    if hasattr(session.config, "workerinput"):  # the workers' temp dir only
        tempfile.tempdir = os.path.join(os.getcwd(), "missing")
"""
        )
    )
    rl.makepyfile(
        f"""
        import pytest

        @pytest.mark.parametrize("i", range(4))
        def test_copy(roofline, i):
            roofline(lambda: None, op="copy", {COPY}, dtype="fp32")
        """
    )
    result = rl.runpytest_subprocess(*XDIST, "--roofline-report")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["4 measurement(s): 4 pass; mode enforce"])
    notes = [line for line in result.outlines if "without the per-device lock" in line]
    assert len(notes) == 1  # each worker's, shown once
    assert notes[0].startswith("roofline: pytest-xdist workers measure without the per-device lock (cannot ")


# -- reruns (pytest-rerunfailures) -------------------------------------------------------------------


@pytest.mark.parametrize("args", [(), XDIST], ids=["serial", "xdist"])
def test_a_rerun_replaces_its_earlier_attempts_records(rl: pytest.Pytester, args: tuple[str, ...]) -> None:
    rl.makepyfile(
        f"""
        import pathlib

        def test_flaky(roofline):
            count = pathlib.Path("attempts")
            attempt = int(count.read_text()) + 1 if count.exists() else 1
            count.write_text(str(attempt))
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", name=f"attempt {{attempt}}")
            assert attempt == 3

        def test_steady(roofline):
            roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", name="steady")
        """
    )
    result = rl.runpytest_subprocess(*args, "--reruns=2", "--roofline-report", "--roofline-json=out.json")
    assert result.parseoutcomes() == {"passed": 2, "rerun": 2}
    result.stdout.fnmatch_lines(["2 measurement(s): 2 pass; mode enforce"])
    data = json.loads((rl.path / "out.json").read_text())
    assert sorted((m["nodeid"], m["name"]) for m in data["measurements"]) == [
        ("test_a_rerun_replaces_its_earlier_attempts_records.py::test_flaky", "attempt 3"),
        ("test_a_rerun_replaces_its_earlier_attempts_records.py::test_steady", "steady"),
    ]


# -- GPU i mod n ---------------------------------------------------------------------------------------


_TWO_GPUS = """

import dataclasses

import pytest_roofline.timing.cuda.loading

pytest_roofline.timing.cuda.loading.device_count = lambda: 2  # this machine has two GPUs, as far as we know


def pytest_roofline_device(config, spec):  # replaces the one above: a fake device per GPU, named after it
    if spec.startswith("cuda:"):
        return dataclasses.replace(fake_device(), key="fake-" + spec.replace(":", ""))
    return None
"""


def test_worker_i_measures_on_gpu_i_mod_n_unless_the_test_names_one(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(fake_conftest(extra=_TWO_GPUS))
    test = f"""
        import os
        import pytest

        def log(kind, result):
            with open("measured.txt", "a") as out:
                out.write(f"{{os.environ['PYTEST_XDIST_WORKER']}} {{kind}} {{result.estimate.device.key}}\\n")

        @pytest.mark.parametrize("i", range(2))
        def test_session_device(roofline, i):
            log("session", roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32"))

        def test_named_device(roofline):
            log("named", roofline.measure(lambda: None, op="copy", {COPY}, dtype="fp32", device="cuda:0"))
        """
    pytester.makepyfile(test_a=test, test_b=test)
    result = pytester.runpytest_subprocess(*XDIST, "--dist", "loadfile", "--roofline-device=auto")
    result.assert_outcomes(passed=6)
    lines = (pytester.path / "measured.txt").read_text().splitlines()
    measured = sorted({tuple(line.split()) for line in lines})
    assert measured == [
        ("gw0", "named", "fake-cuda0"), ("gw0", "session", "fake-cuda0"),
        ("gw1", "named", "fake-cuda0"), ("gw1", "session", "fake-cuda1"),
    ]  # fmt: skip
