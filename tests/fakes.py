"""A fake clock and a scripted timer backend, for deterministic tests of timing logic.

``FakeClock`` keeps integer nanoseconds, so scripted durations add up exactly. ``FakeBackend``
is a :class:`pytest_roofline.timing.base.Backend`: every call of the kernel
advances the clock by a scripted duration, a flush advances it by ``flush_s``, and every request
is recorded in ``runs`` (one :class:`Run` per ``run()``) and ``events`` (``"flush"``/``"window"``).
``Overlap`` and ``in_threads`` check that measurements on two threads take turns.
``locked_elsewhere`` says whether another process holds a file's lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from pytest_roofline.timing.base import Backend

Durations = float | Sequence[float] | Callable[[int], float]


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._ns = round(start_s * 1e9)

    def now(self) -> float:
        return self._ns / 1e9

    def now_ns(self) -> int:
        return self._ns

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock does not go backwards; got {seconds}")
        self._ns += round(seconds * 1e9)


class Run(NamedTuple):
    calls: int
    samples: int
    flush: bool


class FakeBackend(Backend):
    """A Backend whose kernel durations come from a script.

    ``durations`` gives the seconds of the i-th kernel call (0-based, over the backend's life):
    a constant, a sequence (its last value repeats once it runs out) or a function of i. The
    kernel itself is called too, so its exceptions propagate as from a real backend.
    """

    name = "fake"

    def __init__(
        self,
        durations: Durations,
        *,
        clock: FakeClock | None = None,
        resolution_s: float = 1e-6,
        flush_s: float = 0.0,
        device_name: str = "fake device",
        flush_bytes: int | None = None,
    ) -> None:
        self._durations = durations
        self._flush_bytes = flush_bytes
        self.fake_clock = FakeClock() if clock is None else clock
        self.resolution_s = resolution_s
        self.flush_s = flush_s
        self.device_name = device_name
        self.runs: list[Run] = []
        self.events: list[str] = []
        self.calls = 0

    @property
    def flush_bytes(self) -> int | None:
        return self._flush_bytes

    def clock(self) -> float:
        return self.fake_clock.now()

    def duration(self, i: int) -> float:
        d = self._durations
        if callable(d):
            return d(i)
        if isinstance(d, Sequence):
            return d[min(i, len(d) - 1)]
        return d

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        self.runs.append(Run(calls, samples, flush))
        windows = []
        for _ in range(samples):
            if flush:
                self.events.append("flush")
                self.fake_clock.advance(self.flush_s)
            self.events.append("window")
            window = 0.0
            for _ in range(calls):
                fn(*args)
                d = self.duration(self.calls)
                self.calls += 1
                self.fake_clock.advance(d)
                window += d
            windows.append(window)
        return windows

    def split_runs(self, warmup_calls: int) -> tuple[list[Run], list[Run]]:
        """The runs made by the first ``warmup_calls`` calls, and those after."""
        done = 0
        for i, r in enumerate(self.runs):
            if done >= warmup_calls:
                return self.runs[:i], self.runs[i:]
            done += r.calls * r.samples
        return self.runs, []


class ScriptedBackend(FakeBackend):
    """A FakeBackend scripted per *measurement*: the i-th measurement's calls each take ``script[i]``.

    The last entry repeats. A measurement starts with the engine's first warm-up round (one
    window of one call, unflushed) after a sampling round of several windows, or after
    :meth:`reset`. With a constant duration per measurement the engine's first sampling round
    already meets its precision target, so that rule never splits a measurement in two.
    """

    def __init__(
        self,
        script: Sequence[float] = (1e-3,),
        *,
        resolution_s: float = 1e-6,
        device_name: str = "fake device",
    ) -> None:
        super().__init__(self._scripted, resolution_s=resolution_s, device_name=device_name)
        self.script: tuple[float, ...] = tuple(script)
        self.measurements = 0
        self._sampled = True

    def reset(self, script: Sequence[float]) -> None:
        """A new script, counted from the next measurement on (one per test, say)."""
        if not script or any(s <= 0 for s in script):
            raise ValueError(f"a script is one or more positive durations; got {tuple(script)!r}")
        self.script = tuple(script)
        self.measurements = 0
        self._sampled = True

    def _scripted(self, i: int) -> float:
        return self.script[min(max(self.measurements, 1), len(self.script)) - 1]

    def run(
        self, fn: Callable[..., object], args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        if self._sampled and calls == 1 and samples == 1 and not flush:
            self.measurements += 1
            self._sampled = False
        if samples > 1:
            self._sampled = True
        return super().run(fn, args, calls=calls, samples=samples, flush=flush)


class Overlap:
    """Counts the backend windows open at once, across threads. A window lingers until another
    thread's opens too (at most ``linger_s`` of real time), so two measurements that may overlap do."""

    def __init__(self, linger_s: float = 0.01) -> None:
        self.linger_s = linger_s
        self.open = self.most = 0
        self._changed = threading.Condition()

    def __enter__(self) -> None:
        with self._changed:
            self.open += 1
            self.most = max(self.most, self.open)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self.open > 1, timeout=self.linger_s)

    def __exit__(self, *_: object) -> None:
        with self._changed:
            self.open -= 1


def in_threads(*work: Callable[[], object]) -> list[object]:
    """Run each of ``work`` on a thread of its own, all at once; their results, or their errors raised."""
    start = threading.Barrier(len(work))
    results: list[object] = [None] * len(work)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            results[i] = work[i]()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results


def seeded_capacities() -> dict[str, float | int | str]:
    """The capacity sweep's entries of a seeded CPU calibration (a 32 MiB L3, all of it this
    process's), so that a run reading the seed does not sweep the real machine first."""
    from pytest_roofline.machine.capacity import Sweep, capacity_details
    from pytest_roofline.model.core import CacheSize

    return capacity_details(Sweep((), (CacheSize(3, 32 * 2**20, 32 * 2**20),), 0.0, "seeded"))


def locked_elsewhere(path: Path) -> bool:
    """Whether another holder has ``path`` locked (tried from a fresh open file description)."""
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases the lock this probe may have taken
    return False
