"""Contention readings: fake /proc/stat texts, fake clocks, every threshold on both sides."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_roofline.model.conditions import (
    BUSY_LOAD_PER_CORE,
    BUSY_PREEMPTED,
    BUSY_STEAL,
    HEAVY_LOAD_PER_CORE,
    HEAVY_PREEMPTED,
    HEAVY_STEAL,
    Contention,
)
from pytest_roofline.timing import contention
from pytest_roofline.timing.contention import (
    Snapshot,
    between,
    involuntary_switches,
    parse_proc_stat,
    take_snapshot,
)

# A KVM guest's /proc/stat: user nice system idle iowait irq softirq steal guest guest_nice
PROC_STAT = """\
cpu  26288 0 5579 60939 321 0 55 658 0 0
cpu0 10617 0 2298 33570 77 0 11 346 0 0
cpu1 15671 0 3281 27369 244 0 44 312 0 0
intr 2236418 0 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 4114286
btime 1763841600
processes 35001
procs_running 3
procs_blocked 0
"""
PROC_STAT_TOTAL = 26288 + 5579 + 60939 + 321 + 55 + 658


# -- parse_proc_stat ---------------------------------------------------------------------------


def test_parse_proc_stat_reads_the_aggregate_line() -> None:
    assert parse_proc_stat(PROC_STAT) == (658, PROC_STAT_TOTAL)


def test_parse_proc_stat_leaves_guest_time_out_of_the_total() -> None:
    # guest time is counted in user (and guest_nice in nice) already
    assert parse_proc_stat("cpu  100 10 50 800 5 1 2 30 70 7\n") == (30, 998)


def test_parse_proc_stat_takes_the_first_line_alone() -> None:
    assert parse_proc_stat(PROC_STAT.splitlines()[0]) == (658, PROC_STAT_TOTAL)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("cpu0 1 2 3 4 5 6 7 8 9 10\n", id="no-aggregate-line"),
        pytest.param("cpu  2255 34 2290 22625563 6290 127 456\n", id="no-steal-column"),
        pytest.param("cpu  1 2 3 4 five 6 7 8\n", id="not-a-number"),
        pytest.param("cpu  1 2 3 4 5 6 7 -8\n", id="negative"),
        pytest.param("cpu\n", id="no-columns"),
        pytest.param("\x00\xff garbage\n\n", id="garbage"),
    ],
)
def test_parse_proc_stat_without_a_steal_reading_is_none(text: str) -> None:
    assert parse_proc_stat(text) is None


# -- take_snapshot -----------------------------------------------------------------------------


def test_take_snapshot_reads_every_injected_source() -> None:
    snap = take_snapshot(
        read_proc_stat=lambda: PROC_STAT, clock=lambda: 10.0, cpu_clock=lambda: 2.5, loadavg=lambda: 1.25
    )
    assert snap == Snapshot(10.0, 2.5, 658, PROC_STAT_TOTAL, 1.25)


@pytest.mark.parametrize("text", [None, "cpu  1 2 3\n"], ids=["missing-file", "no-steal-column"])
def test_take_snapshot_without_steal(text: str | None) -> None:
    snap = take_snapshot(
        read_proc_stat=lambda: text, clock=lambda: 1.0, cpu_clock=lambda: 0.5, loadavg=lambda: None
    )
    assert snap == Snapshot(1.0, 0.5, None, None, None)


def test_read_proc_stat_reads_the_first_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    stat.write_text(PROC_STAT)
    monkeypatch.setattr(contention, "_PROC_STAT", stat)
    assert contention._read_proc_stat() == PROC_STAT.splitlines(keepends=True)[0]
    monkeypatch.setattr(contention, "_PROC_STAT", tmp_path / "missing")
    assert contention._read_proc_stat() is None


def test_loadavg_is_none_where_the_os_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.25, 0.125))
    assert contention._loadavg() == 0.5

    def unobtainable() -> tuple[float, float, float]:
        raise OSError("load average was unobtainable")

    monkeypatch.setattr(os, "getloadavg", unobtainable)
    assert contention._loadavg() is None
    monkeypatch.delattr(os, "getloadavg")  # Windows
    assert contention._loadavg() is None


def test_the_default_snapshot_is_well_formed() -> None:
    snap = take_snapshot()  # the real sources: only the types are checked, never the values
    assert isinstance(snap.wall_s, float)
    assert isinstance(snap.cpu_s, float)
    assert (snap.steal_jiffies is None) == (snap.total_jiffies is None)


# -- involuntary_switches ----------------------------------------------------------------------


def test_involuntary_switches_is_a_count() -> None:
    first = involuntary_switches()
    assert isinstance(first, int)
    assert involuntary_switches() >= first >= 0


@pytest.fixture
def fake_resource(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """A ``resource`` module that records whom getrusage was asked about."""
    asked: list[object] = []

    def getrusage(who: object) -> SimpleNamespace:
        asked.append(who)
        return SimpleNamespace(ru_nivcsw=7)

    module = SimpleNamespace(RUSAGE_SELF="self", RUSAGE_THREAD="thread", getrusage=getrusage)
    monkeypatch.setitem(sys.modules, "resource", module)
    return asked


def test_switches_are_counted_per_thread_where_the_os_can(fake_resource: list[object]) -> None:
    assert contention._switch_reader()() == 7
    assert fake_resource == ["thread"]


def test_switches_are_counted_per_process_elsewhere(
    fake_resource: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(sys.modules["resource"], "RUSAGE_THREAD")
    assert contention._switch_reader()() == 7
    assert fake_resource == ["self"]


def test_switches_are_zero_without_the_resource_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "resource", None)  # import resource raises ImportError
    assert contention._switch_reader()() == 0


# -- between -----------------------------------------------------------------------------------


def snap(
    wall: float = 0.0,
    cpu: float = 0.0,
    steal: int | None = 0,
    total: int | None = 0,
    load: float | None = None,
) -> Snapshot:
    return Snapshot(wall, cpu, steal, total, load)


def test_between_computes_every_reading() -> None:
    before = snap(wall=100.0, cpu=1.0, steal=500, total=10_000, load=1.5)
    after = snap(wall=102.0, cpu=3.0, steal=521, total=10_400, load=2.5)
    result = between(before, after, samples=40, preempted=6, cores=2)
    # one jiffy of steal is the counter's rounding: 20 of 400 jiffies count
    assert result == Contention(40, 6, 0.05, 2.5, 2, 1.0)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(snap(steal=None, total=None), snap(steal=5, total=100), id="before-missing"),
        pytest.param(snap(steal=5, total=100), snap(steal=None, total=None), id="after-missing"),
        pytest.param(snap(steal=5, total=100), snap(steal=5, total=100), id="no-jiffy-passed"),
        pytest.param(snap(steal=50, total=100), snap(steal=10, total=200), id="steal-went-back"),
        pytest.param(snap(steal=5, total=100), snap(steal=200, total=150), id="steal-above-total"),
        pytest.param(snap(steal=5, total=200), snap(steal=6, total=100), id="total-went-back"),
    ],
)
def test_between_without_a_steal_reading(before: Snapshot, after: Snapshot) -> None:
    assert between(before, after, samples=1, preempted=0, cores=1).steal_fraction is None


def test_between_rounding_alone_is_no_steal() -> None:
    result = between(snap(steal=0, total=0), snap(steal=1, total=20), samples=1, preempted=0, cores=1)
    assert result.steal_fraction == 0.0


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param(snap(wall=5.0, cpu=1.0), snap(wall=5.0, cpu=2.0), id="no-wall-time"),
        pytest.param(snap(wall=5.0, cpu=1.0), snap(wall=4.0, cpu=2.0), id="wall-went-back"),
        pytest.param(snap(wall=5.0, cpu=2.0), snap(wall=6.0, cpu=1.0), id="cpu-went-back"),
    ],
)
def test_between_without_a_cpu_per_wall_reading(before: Snapshot, after: Snapshot) -> None:
    assert between(before, after, samples=1, preempted=0, cores=1).cpu_per_wall is None


@pytest.mark.parametrize(
    ("before", "after", "load"),
    [
        (None, None, None),
        (1.5, None, 1.5),
        (None, 0.5, 0.5),
        (3.0, 2.0, 3.0),
    ],
)
def test_between_takes_the_higher_load(before: float | None, after: float | None, load: float | None) -> None:
    result = between(snap(load=before), snap(wall=1.0, load=after), samples=1, preempted=0, cores=1)
    assert result.load_avg == load


@pytest.mark.parametrize(
    ("samples", "preempted", "cores", "message"),
    [
        (-1, 0, 1, "need 0 <= preempted <= samples; got 0 of -1"),
        (3, 4, 1, "need 0 <= preempted <= samples; got 4 of 3"),
        (3, -1, 1, "need 0 <= preempted <= samples; got -1 of 3"),
        (3, 1, 0, "cores must be a positive integer; got 0"),
    ],
)
def test_between_checks_its_counts(samples: int, preempted: int, cores: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        between(snap(), snap(wall=1.0), samples=samples, preempted=preempted, cores=cores)


@pytest.mark.parametrize("field", ["steal_fraction", "load_avg", "cpu_per_wall"])
@pytest.mark.parametrize("value", [-0.1, float("nan"), float("inf")])
def test_contention_refuses_readings_that_are_not_numbers(field: str, value: float) -> None:
    readings = {"steal_fraction": None, "load_avg": None, "cpu_per_wall": None, field: value}
    with pytest.raises(ValueError, match=f"{field} must be a non-negative number or None"):
        Contention(samples=1, preempted=0, cores=1, **readings)


# -- the level ---------------------------------------------------------------------------------


def contended(
    *,
    samples: int = 100,
    preempted: int = 0,
    steal: float | None = None,
    load: float | None = None,
    cores: int = 2,
    cpu_per_wall: float | None = None,
) -> Contention:
    return Contention(samples, preempted, steal, load, cores, cpu_per_wall)


def test_no_readings_is_quiet() -> None:
    assert contended(samples=0).level == "quiet"
    assert contended().level == "quiet"


@pytest.mark.parametrize(
    ("steal", "level"),
    [(0.0, "quiet"), (0.0199, "quiet"), (BUSY_STEAL, "busy"), (0.0999, "busy"), (HEAVY_STEAL, "heavy")],
)
def test_steal_thresholds(steal: float, level: str) -> None:
    assert contended(steal=steal).level == level


@pytest.mark.parametrize(
    ("preempted", "level"),
    [(0, "quiet"), (9, "quiet"), (10, "busy"), (49, "busy"), (50, "heavy"), (100, "heavy")],
)
def test_preempted_thresholds(preempted: int, level: str) -> None:
    assert (BUSY_PREEMPTED, HEAVY_PREEMPTED) == (0.10, 0.50)
    assert contended(samples=100, preempted=preempted).level == level


@pytest.mark.parametrize(
    ("load", "level"),
    [(0.0, "quiet"), (1.99, "quiet"), (2.0, "busy"), (3.99, "busy"), (4.0, "heavy"), (9.0, "heavy")],
)
def test_load_thresholds_are_per_core(load: float, level: str) -> None:
    assert (BUSY_LOAD_PER_CORE, HEAVY_LOAD_PER_CORE) == (1.0, 2.0)
    assert contended(load=load, cores=2).level == level
    assert contended(load=2 * load, cores=4).level == level


def test_this_process_own_load_is_not_contention() -> None:
    # a 2-thread BLAS alone on 2 cores: load 2, all of it this process's
    alone = contended(load=2.1, cpu_per_wall=1.95)
    assert alone.load_beside == pytest.approx(0.15)
    assert alone.level == "quiet"
    # the same load with this process mostly waiting: the others hold the cores
    waiting = contended(load=4.25, cpu_per_wall=0.25)
    assert waiting.load_beside == 4.0
    assert waiting.level == "heavy"
    # more CPU per wall than load (the load average lags): nothing beside, not less than nothing
    assert contended(load=0.5, cpu_per_wall=2.0).load_beside == 0.0


def test_the_highest_reading_sets_the_level() -> None:
    assert contended(steal=0.03, preempted=60, load=0.1).level == "heavy"
    assert contended(steal=0.0, preempted=1, load=5.0).level == "heavy"
    assert contended(steal=0.05, preempted=1, load=0.1).level == "busy"


# -- describe and to_record --------------------------------------------------------------------


def test_describe_heavy() -> None:
    c = Contention(samples=50, preempted=31, steal_fraction=0.12, load_avg=4.1, cores=2, cpu_per_wall=0.95)
    assert c.describe() == (
        "heavy contention: 62% of 50 samples preempted, steal 12%, load 4.10 on 2 cores "
        "(3.15 beside this process), CPU/wall 0.95"
    )


def test_describe_busy_and_quiet() -> None:
    busy = Contention(
        samples=40, preempted=2, steal_fraction=0.025, load_avg=None, cores=1, cpu_per_wall=None
    )
    assert busy.describe() == "busy machine: 5.0% of 40 samples preempted, steal 2.5%"
    quiet = Contention(samples=20, preempted=0, steal_fraction=0.0, load_avg=0.52, cores=1, cpu_per_wall=None)
    assert quiet.describe() == "quiet: 0% of 20 samples preempted, steal 0%, load 0.52 on 1 core"
    empty = Contention(samples=0, preempted=0, steal_fraction=None, load_avg=None, cores=1, cpu_per_wall=1.0)
    assert empty.describe() == "quiet: no samples, CPU/wall 1.00"


def test_to_record_is_json_ready() -> None:
    c = Contention(samples=50, preempted=31, steal_fraction=0.12, load_avg=4.1, cores=2, cpu_per_wall=0.95)
    record = c.to_record()
    assert record == {
        "level": "heavy",
        "samples": 50,
        "preempted": 31,
        "preempted_fraction": 0.62,
        "steal_fraction": 0.12,
        "load_avg": 4.1,
        "load_beside": pytest.approx(3.15),
        "cores": 2,
        "cpu_per_wall": 0.95,
    }
    assert json.loads(json.dumps(record, allow_nan=False)) == record


def test_to_record_without_readings_has_nulls() -> None:
    record = Contention(0, 0, None, None, 1, None).to_record()
    assert json.loads(json.dumps(record, allow_nan=False)) == {
        "level": "quiet",
        "samples": 0,
        "preempted": 0,
        "preempted_fraction": None,
        "steal_fraction": None,
        "load_avg": None,
        "load_beside": None,
        "cores": 1,
        "cpu_per_wall": None,
    }


# -- the kernel's threads: /proc/self/task/*/schedstat -------------------------------------------------


def test_thread_schedstats_reads_each_threads_run_and_wait(tmp_path: Path) -> None:
    for tid, text in {"101": "4000 300 12\n", "102": "900 0 3\n", "103": "garbage\n"}.items():
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(text)
    (tmp_path / "104").mkdir()  # a thread that ended before its file was read
    assert contention.thread_schedstats(tmp_path) == {"101": (4000, 300), "102": (900, 0)}


def test_thread_schedstats_is_none_where_the_os_does_not_say(tmp_path: Path) -> None:
    assert contention.thread_schedstats(tmp_path / "missing") is None
    assert contention.thread_schedstats(tmp_path) is None  # no thread readable


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        # one thread ran the whole round and never waited: a single-threaded kernel
        ({"1": (1_000, 0), "2": (0, 0)}, contention.ThreadWait(threads=1, wait_share=0.0, alone=True)),
        # two BLAS threads beside a core hog: each ran half the round and waited the other half
        ({"1": (500, 500), "2": (500, 500)}, contention.ThreadWait(threads=2, wait_share=0.5)),
        # a thread that ran much less than the busiest (a BLAS thread spinning on after an
        # earlier call) is not one of the kernel's
        ({"1": (1_000, 0), "2": (300, 600)}, contention.ThreadWait(threads=1, wait_share=0.0)),
        # nothing ran (a kernel sleeping on I/O): no reading
        ({"1": (0, 0), "2": (0, 0)}, None),
    ],
    ids=["one-thread", "two-waiting", "spinning-helper", "none-ran"],
)
def test_thread_wait_counts_the_kernels_threads_and_their_wait(
    after: dict[str, tuple[int, int]], expected: contention.ThreadWait | None
) -> None:
    before = {"1": (0, 0), "2": (0, 0), "gone": (5, 5)}
    after = {**after, "new": (10_000, 10_000)}  # a thread born during the round: no before, left out
    assert contention.thread_wait(before, after, wall_ns=1_000) == expected


@pytest.mark.parametrize(
    ("after", "alone"),
    [
        ({"1": (1_000, 0), "2": (0, 0)}, True),  # the other thread slept
        ({"1": (1_000, 0), "2": (300, 600)}, False),  # it spun on: it ran, if less
        ({"1": (1_000, 0), "2": (20, 700)}, False),  # starved: it waited for a core, a kernel thread
        ({"1": (500, 500), "2": (500, 500)}, False),  # two threads
    ],
    ids=["slept", "spun", "starved", "two"],
)
def test_a_round_ran_the_kernel_alone_where_the_other_threads_slept(
    after: dict[str, tuple[int, int]], alone: bool
) -> None:
    wait = contention.thread_wait({"1": (0, 0), "2": (0, 0)}, after, wall_ns=1_000)
    assert wait is not None
    assert wait.alone is alone


def test_thread_wait_needs_a_round_that_took_time() -> None:
    assert contention.thread_wait({"1": (0, 0)}, {"1": (10, 0)}, wall_ns=0) is None
