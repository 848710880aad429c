"""What the OS says about contention during a measurement: preemption, steal, load and CPU per wall
second, each where the OS has it, read by :func:`take_snapshot` before and after a measurement and
turned into a :class:`Contention` by :func:`between`. Nothing here imports numpy or pytest; every
source is injectable for tests. What each reading means: docs/measurement.md ("The CPU timer").
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_roofline.model.conditions import Contention

__all__ = [
    "Snapshot",
    "between",
    "involuntary_switches",
    "parse_proc_stat",
    "take_snapshot",
]

_PROC_STAT = Path("/proc/stat")


def _switch_reader() -> Callable[[], int]:
    """A reader of this thread's involuntary context switches; ``lambda: 0`` without :mod:`resource`."""
    try:
        import resource
    except ImportError:  # Windows
        return lambda: 0
    getrusage = resource.getrusage
    # Linux counts per thread; elsewhere only the whole process, other threads' switches included
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    return lambda: getrusage(who).ru_nivcsw


#: this thread's involuntary context switches so far (the process's where threads are not counted),
#: read around every timed window; always 0 where :mod:`resource` is missing (Windows)
involuntary_switches = _switch_reader()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The OS's counters at one moment; two of them make a :class:`Contention` (see :func:`between`)."""

    #: monotonic wall clock, in seconds
    wall_s: float
    #: this process's CPU time (all threads, user + system), in seconds
    cpu_s: float
    #: steal jiffies of all CPUs, from ``/proc/stat``; None where there is none or no steal column
    steal_jiffies: int | None
    #: all jiffies of all CPUs (user to steal), from ``/proc/stat``; None with steal_jiffies
    total_jiffies: int | None
    #: the 1-minute load average; None where the OS has none
    load_avg: float | None


def parse_proc_stat(text: str) -> tuple[int, int] | None:
    """(steal, total) jiffies from ``/proc/stat``'s aggregate ``cpu`` line, the total of its first eight
    columns, user to steal (docs/measurement.md, "The CPU timer"); None when there is no such line,
    or it has fewer columns or columns that are not numbers."""
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] != "cpu":
            continue
        try:
            values = [int(field) for field in fields[1:9]]
        except ValueError:
            return None
        if len(values) < 8 or min(values) < 0:
            return None
        return values[7], sum(values)
    return None


def _read_proc_stat() -> str | None:
    try:
        with _PROC_STAT.open(encoding="ascii", errors="replace") as stat:
            return stat.readline()  # the aggregate line comes first; per-CPU lines are not needed
    except OSError:  # not Linux
        return None


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):  # unobtainable, or Windows
        return None


def take_snapshot(
    *,
    read_proc_stat: Callable[[], str | None] = _read_proc_stat,
    clock: Callable[[], float] = time.monotonic,
    cpu_clock: Callable[[], float] = time.process_time,
    loadavg: Callable[[], float | None] = _loadavg,
) -> Snapshot:
    """The counters now. ``read_proc_stat`` returns ``/proc/stat``'s text (None without one)."""
    text = read_proc_stat()
    stat = parse_proc_stat(text) if text is not None else None
    steal, total = stat if stat is not None else (None, None)
    return Snapshot(clock(), cpu_clock(), steal, total, loadavg())


def between(before: Snapshot, after: Snapshot, *, samples: int, preempted: int, cores: int) -> Contention:
    """The contention of the measurement from ``before`` to ``after``: ``samples`` timed windows,
    ``preempted`` of them switched out, on ``cores`` logical CPUs. Steal is counted one jiffy (10 ms)
    short (docs/measurement.md, "The CPU timer"); None when a snapshot lacks it or no jiffy passed.
    CPU per wall is None when no wall time passed; the load is the higher of the two snapshots'
    (None only when both lack it)."""
    wall = after.wall_s - before.wall_s
    cpu = after.cpu_s - before.cpu_s
    cpu_per_wall = cpu / wall if wall > 0 and cpu >= 0 else None
    loads = [load for load in (before.load_avg, after.load_avg) if load is not None]
    return Contention(
        samples=samples,
        preempted=preempted,
        steal_fraction=_steal_fraction(before, after),
        load_avg=max(loads) if loads else None,
        cores=cores,
        cpu_per_wall=cpu_per_wall,
    )


def _steal_fraction(before: Snapshot, after: Snapshot) -> float | None:
    steal0, total0, steal1, total1 = (
        before.steal_jiffies,
        before.total_jiffies,
        after.steal_jiffies,
        after.total_jiffies,
    )
    if steal0 is None or total0 is None or steal1 is None or total1 is None:
        return None
    steal, total = steal1 - steal0, total1 - total0
    if total <= 0 or not 0 <= steal <= total:  # no time passed, or counters reset (a CPU went offline)
        return None
    return max(0, steal - 1) / total


# -- the kernel's own threads: how long they waited for a core --------------------------------------

#: a thread that ran at least this share of what the round's busiest thread ran is one of the
#: kernel's threads (docs/measurement.md, "The CPU timer")
KERNEL_THREAD_SHARE = 0.5
#: a round ran the kernel alone where the process's other threads together ran or waited for a core
#: less than this share of what its one thread ran
ALONE_SHARE = 0.1

_TASKS = Path("/proc/self/task")


def thread_schedstats(tasks: Path = _TASKS) -> dict[str, tuple[int, int]] | None:
    """Each thread of this process: (ns it ran on a CPU, ns it waited on a run queue) so far.

    Linux's ``/proc/self/task/<tid>/schedstat``, read through ``os`` calls (docs/methodology.md); None
    where the OS does not say (macOS, Windows, a kernel without scheduler statistics). A thread that
    ends between the listing and its read is left out.
    """
    base = os.fspath(tasks)
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    times: dict[str, tuple[int, int]] = {}
    for tid in tids:
        try:
            fd = os.open(f"{base}/{tid}/schedstat", os.O_RDONLY)
            try:
                data = os.read(fd, 256)
            finally:
                os.close(fd)
            run, wait, *_ = data.split()
            times[tid] = (int(run), int(wait))
        except (OSError, ValueError):
            continue
    return times or None


@dataclass(frozen=True, slots=True)
class ThreadWait:
    """A round of samples as the kernel's threads lived it."""

    #: threads of this process that ran at least :data:`KERNEL_THREAD_SHARE` of what the busiest ran
    threads: int
    #: of those threads' runnable time (running or waiting for a core), the share spent waiting
    wait_share: float
    #: one thread ran the kernel and the others slept (:data:`ALONE_SHARE`)
    alone: bool = False


def thread_wait(
    before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]], wall_ns: int
) -> ThreadWait | None:
    """The kernel's threads over a round that took ``wall_ns``, from two :func:`thread_schedstats`;
    what the verdict makes of their waits: docs/verdicts.md, docs/methodology.md."""
    if wall_ns <= 0:
        return None
    ran = {tid: after[tid][0] - before[tid][0] for tid in after.keys() & before.keys()}
    busiest = max(ran.values(), default=0)
    if busiest <= 0:
        return None
    busy = [tid for tid, ns in ran.items() if ns >= KERNEL_THREAD_SHARE * busiest]
    waited = sum(after[tid][1] - before[tid][1] for tid in busy)
    runnable = waited + sum(ran[tid] for tid in busy)
    others = sum(ns + after[tid][1] - before[tid][1] for tid, ns in ran.items() if tid not in busy)
    return ThreadWait(
        threads=len(busy),
        wait_share=max(0.0, waited / runnable) if runnable > 0 else 0.0,
        alone=len(busy) == 1 and others < ALONE_SHARE * busiest,
    )
