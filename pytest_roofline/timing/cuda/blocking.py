"""The blocking kernel (:class:`Blocker`, nvbench's ``blocking_kernel``): holding a timing stream
while a window's calls are queued, so that the window times the GPU's work, not the host's launch
rate; and the rules of when a window may be held (:data:`BLOCK_SETTINGS`, :class:`KernelProbes`),
for how many calls, and what releases a hold. The rules and why: docs/gpu.md ("The blocking kernel").
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_roofline.model.keywords import BLOCK_SETTINGS
from pytest_roofline.timing.base import Kernel
from pytest_roofline.timing.cuda.kernels import BLOCK_SOURCE

from ...errors import InvalidValueError, RooflineError

#: the blocking kernel gives up holding a stream after this long, on the GPU: the last resort, for a
#: host that cannot run the watchdog (a thread holding the GIL waits for the GPU)
BLOCK_TIMEOUT_S = 10.0
#: a hold the host has not released this long after it began is released by a watchdog thread, and
#: the window is taken as not held (docs/measurement.md, "The CUDA timer")
HOLD_WATCHDOG_S = 0.1
#: the longest a hold is left while the host is still queueing calls behind it
HOLD_LIMIT_S = 2.0
#: calls queued behind one hold at most: the rest of a longer window is queued after the release,
#: while the GPU works through these
MAX_HELD_CALLS = 32
#: calls held for a kernel no probe has yet shown the launch queue takes more of
UNPROVEN_HELD_CALLS = 2
#: environment variables that profilers and sanitizers set in the process they run; under them the
#: blocker stays off (docs/measurement.md, "The CUDA timer")
PROFILER_ENVIRONMENT = (
    "CUDA_INJECTION64_PATH",
    "NSYS_PROFILING_SESSION_ID",
    "NV_COMPUTE_PROFILER_PERFWORKS_DIR",
    "NV_SANITIZER_INJECTION_PORT_RANGE_BEGIN",
    "NV_NSIGHT_INJECTION_TRANSPORT_TYPE",
)
#: how long the delay kernel of ``auto``'s probe spins before an unheld window
PROBE_DELAY_S = 2e-3
#: unheld windows probed per kernel before ``auto`` stops trying
PROBE_TRIES = 3
#: the longest a probe's delay grows to, for calls slower on the host than the last delay
PROBE_MAX_DELAY_S = 0.1
#: kernels whose probe results a backend remembers
_MAX_KERNELS = 4096


@dataclass(slots=True)
class _Watch:
    """One hold watched: released once it has gone :attr:`after_s` with no call queued behind it, or
    :data:`HOLD_LIMIT_S` in all."""

    release: Callable[[], None]
    after_s: float
    #: how many calls the host has queued behind the hold so far (read from the watchdog's thread)
    progress: Callable[[], int]
    started: float
    deadline: float
    seen: int = 0

    def due(self, now: float) -> bool:
        """Whether the hold is to be released at ``now``; otherwise its next deadline is set."""
        if now < self.deadline:
            return False
        queued = self.progress()
        if queued == self.seen or now - self.started >= HOLD_LIMIT_S:
            return True
        self.seen, self.deadline = queued, now + self.after_s
        return False


class HoldWatchdog:
    """One thread that releases every hold the host has not released in time (a host waiting for the
    GPU inside a held window cannot release it itself). Idle, it keeps no reference to any hold."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watches: dict[int, _Watch] = {}
        self._fired: set[int] = set()
        self._tokens = itertools.count(1)
        self._thread: threading.Thread | None = None

    def arm(
        self, release: Callable[[], None], after_s: float, progress: Callable[[], int] = lambda: 0
    ) -> int:
        """Call ``release()`` from the watchdog's thread once ``after_s`` pass in which ``progress()``
        (the calls queued behind the hold) does not grow, unless :meth:`disarm` comes first; a token
        for :meth:`disarm`."""
        with self._cond:
            token = next(self._tokens)
            now = time.monotonic()
            self._watches[token] = _Watch(release, after_s, progress, now, now + after_s, progress())
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="roofline-hold-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
            return token

    def disarm(self, token: int) -> bool:
        """Stop watching; whether the watchdog released the hold first."""
        with self._cond:
            self._watches.pop(token, None)
            fired = token in self._fired
            self._fired.discard(token)
            return fired

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for token, watch in list(self._watches.items()):
                    if watch.due(now):
                        del self._watches[token]
                        self._fired.add(token)
                        watch.release()
                deadlines = [watch.deadline for watch in self._watches.values()]
                self._cond.wait(min(deadlines) - now if deadlines else None)


#: the process's hold watchdog
WATCHDOG = HoldWatchdog()


class PinnedSlots:
    """Two counters' worth (16 bytes) of mapped pinned host memory per :class:`Blocker`, cut from
    arenas that are never freed (why: docs/gpu.md, "The blocking kernel")."""

    ARENA_BYTES = 4096
    SLOT_BYTES = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: per device: the arena's address and the bytes of it handed out
        self._arenas: dict[int, tuple[int, int]] = {}
        self._kept: list[Any] = []  # every arena, so that none is ever freed

    def take(self, cupy: Any) -> int:
        """A fresh slot's address, on the current device (where mapped memory is allocated)."""
        device = int(cupy.cuda.runtime.getDevice())
        with self._lock:
            base, used = self._arenas.get(device, (0, self.ARENA_BYTES))
            if used + self.SLOT_BYTES > self.ARENA_BYTES:
                memory = cupy.cuda.PinnedMemory(self.ARENA_BYTES, cupy.cuda.runtime.hostAllocMapped)
                self._kept.append(memory)
                base, used = int(memory.ptr), 0
            self._arenas[device] = (base, used + self.SLOT_BYTES)
            return base + used


#: the process's blocker counters
PINNED_SLOTS = PinnedSlots()


class Blocker:
    """The blocking and delay kernels, and two counters in mapped pinned host memory
    (:data:`PINNED_SLOTS`)."""

    def __init__(self, cupy: Any, timeout_s: float) -> None:
        import numpy

        self._numpy = numpy
        ptr = PINNED_SLOTS.take(cupy)
        self._ptr = ptr
        self._released = ctypes.c_int64.from_address(ptr)
        self._timed_out = ctypes.c_int64.from_address(ptr + 8)
        self._released.value = self._timed_out.value = 0
        self._kernel = cupy.RawKernel(BLOCK_SOURCE, "roofline_block")
        self._delay = cupy.RawKernel(BLOCK_SOURCE, "roofline_delay")
        self._timeout_s = timeout_s
        self._ticket = 0
        self._watch: int | None = None
        #: calls queued behind this blocker's holds, counted by the backend (the watchdog reads it)
        self.queued = 0
        #: whether the watchdog released a hold of this run
        self._released_late = False

    def warm(self, stream: Any) -> None:
        """Launch both kernels once, released before they start, so that their modules load now,
        unheld."""
        np = self._numpy
        self._kernel((1,), (1,), (np.uint64(self._ptr), np.int64(0), np.uint64(0)), stream=stream)
        self._delay((1,), (1,), (np.uint64(0),), stream=stream)

    def arm(self) -> None:
        """Before a run's windows: forget an earlier run's timeout."""
        self._timed_out.value = 0
        self._released_late = False

    def hold(self, stream: Any) -> None:
        """Queue the blocking kernel for the next ticket; the watchdog releases it if :meth:`release`
        does not come within its time."""
        np = self._numpy
        self._ticket += 1
        args = (np.uint64(self._ptr), np.int64(self._ticket), np.uint64(int(self._timeout_s * 1e9)))
        self._kernel((1,), (1,), args, stream=stream)
        self._watch = WATCHDOG.arm(self._release_ticket(self._ticket), HOLD_WATCHDOG_S, lambda: self.queued)

    def _release_ticket(self, ticket: int) -> Callable[[], None]:
        released = self._released  # its memory is never freed (PinnedSlots): safe to write later

        def release() -> None:
            if released.value < ticket:
                released.value = ticket

        return release

    def delay(self, stream: Any, seconds: float) -> None:
        self._delay((1,), (1,), (self._numpy.uint64(int(seconds * 1e9)),), stream=stream)

    def release(self) -> None:
        if self._watch is not None:  # disarmed first: a watchdog that fires later releases nothing
            self._released_late |= WATCHDOG.disarm(self._watch)
            self._watch = None
        self._released.value = self._ticket

    def timed_out(self) -> bool:
        """Whether a hold of this run was released by the watchdog or gave up on the GPU (the windows'
        times are not the kernel's): read after each window's release, and after the run's host sync."""
        return self._released_late or bool(self._timed_out.value)


class HoldTimedOut(RooflineError):
    """A held window's host waited for the GPU until the blocking kernel gave up."""


@dataclass(frozen=True, slots=True)
class AsyncProbe:
    """A probe in flight: the event after its delay kernel, when the calls began, the delay, and the
    calls queued behind it."""

    marker: Any  # an event recorded right after the delay kernel
    t0: float
    delay_s: float
    calls: int = 1


#: a kernel's state in KernelProbes besides 0..PROBE_TRIES - 1 (probes that could not tell)
_ASYNC = -1
_SYNCS = -2

#: what ``block=None`` means (a session passes its ``--roofline-cuda-block`` as ``block=``)
_default_block = "auto"


def check_block(setting: object) -> str:
    """``block=`` as one of :data:`BLOCK_SETTINGS` (True is ``on``, False ``off``, None the default,
    ``auto``); ValueError otherwise."""
    if setting is None:
        return _default_block
    if setting is True:
        return "on"
    if setting is False:
        return "off"
    if isinstance(setting, str) and setting in BLOCK_SETTINGS:
        return setting
    raise InvalidValueError(f"block must be 'auto', 'on' or 'off' (or True / False); got {setting!r}")


def hold_refusal(mode: str, *, rocm: bool, cupti: bool) -> str:
    """Why a backend holds no window under ``block=mode`` ("" when it may): ROCm has no
    ``%globaltimer``, CUPTI times each kernel without launch gaps, ``off``, or under ``auto`` the
    environment (:func:`blocking_environment`)."""
    if rocm:
        return "ROCm: the blocking kernel needs %globaltimer"
    if cupti:
        return "CUPTI times each kernel on the GPU: there are no launch gaps to hide"
    if mode == "off":
        return "block off"
    if mode == "auto":
        return blocking_environment() or ""
    return ""


def blocking_environment() -> str | None:
    """Why the blocker must stay off in this process's environment (``CUDA_LAUNCH_BLOCKING``, a
    profiler or sanitizer), or None."""
    value = os.environ.get("CUDA_LAUNCH_BLOCKING", "").strip()
    if value not in ("", "0"):
        return f"CUDA_LAUNCH_BLOCKING={value}: every launch is synchronous"
    for name in PROFILER_ENVIRONMENT:
        if os.environ.get(name):
            return f"{name} is set: a profiler or sanitizer (nsys, ncu, compute-sanitizer) is attached"
    return None


class KernelProbes:
    """What the probes found of each kernel (known by :func:`kernel_key`): not yet told,
    asynchronous or synchronizing; the delays of the next probes; and how many calls the launch queue
    took behind the delay kernel, which is what a hold may take (:meth:`held_calls`).
    """

    def __init__(self) -> None:
        self._kernels: dict[tuple[int, ...], int] = {}
        #: the next probe's delay, by kernel, after probes that could not tell
        self._probe_delays: dict[tuple[int, ...], float] = {}
        #: the most calls a probe queued behind the delay kernel, and the host's time per call then
        self._queued: dict[tuple[int, ...], int] = {}
        self._host_per_call: dict[tuple[int, ...], float] = {}
        #: kernels whose larger probe failed: no more growing
        self._capped: set[tuple[int, ...]] = set()

    def may_hold(self, key: tuple[int, ...], samples: int, *, block: bool, mode: str) -> bool:
        """Only sampling windows (a run of several samples: the engine's warm-up rounds are runs of
        one), and only a kernel called before (its first call may load a module or grow the pool);
        under ``auto`` only one proved asynchronous."""
        if samples < 2 or not block:
            return False
        state = self._kernels.get(key)
        if mode == "on":
            return state is not None
        return state == _ASYNC

    def held_calls(self, key: tuple[int, ...], calls: int) -> int:
        """Calls of a window of ``calls`` the hold takes: as many as a probe showed the launch queue
        takes, :data:`UNPROVEN_HELD_CALLS` before any probe did."""
        return min(calls, MAX_HELD_CALLS, self._queued.get(key, UNPROVEN_HELD_CALLS))

    def wanted(self, key: tuple[int, ...], calls: int = 1, *, block: bool, mode: str) -> bool:
        """Whether this unheld run of ``calls`` calls a window should probe the kernel (and remember
        it was seen): until it is proved asynchronous, then while its windows outgrow the largest
        probe (for :meth:`held_calls`)."""
        state = self._kernels.get(key)
        if state is None:
            if len(self._kernels) >= _MAX_KERNELS:  # forget the oldest
                oldest = next(iter(self._kernels))
                del self._kernels[oldest]
                self._probe_delays.pop(oldest, None)
                self._host_per_call.pop(oldest, None)
                self._queued.pop(oldest, None)
                self._capped.discard(oldest)
            self._kernels[key] = state = 0
        if not block or mode == "off":
            return False
        if state == _ASYNC:
            queued = self._queued.get(key, 0)
            return key not in self._capped and queued < min(calls, MAX_HELD_CALLS)
        return 0 <= state < PROBE_TRIES

    def start(self, blocker: Blocker, stream: Any, key: tuple[int, ...], calls: int = 1) -> AsyncProbe:
        """Queue the delay kernel, then an event, before the window's calls."""
        delay_s = self._probe_delays.get(key, PROBE_DELAY_S)
        per_call = self._host_per_call.get(key)
        if per_call is not None:
            delay_s = min(max(delay_s, 4 * per_call * calls), PROBE_MAX_DELAY_S)
        blocker.delay(stream, delay_s)
        return AsyncProbe(stream.record(), time.perf_counter(), delay_s, calls)

    def end(self, key: tuple[int, ...], probe: AsyncProbe) -> None:
        """Record what ``probe`` showed once the window's calls have returned: the delay kernel still
        spinning proves the calls asynchronous; done, the probe could not tell (the next one spins
        longer, and after :data:`PROBE_TRIES` the kernel is taken as synchronizing); a larger probe of
        a kernel proved asynchronous that waited caps the calls held."""
        host_s = time.perf_counter() - probe.t0
        if not probe.marker.done:
            self._kernels[key] = _ASYNC
            self._probe_delays.pop(key, None)
            if probe.calls > self._queued.get(key, 0):
                self._queued[key] = probe.calls
                self._host_per_call[key] = host_s / probe.calls
            return
        if self._kernels.get(key) == _ASYNC:
            self._capped.add(key)
            return
        self._probe_delays[key] = min(max(2 * probe.delay_s, 4 * host_s), PROBE_MAX_DELAY_S)
        tries = self._kernels.get(key, 0) + 1
        self._kernels[key] = tries if tries < PROBE_TRIES else _SYNCS
        if tries >= PROBE_TRIES:
            self._probe_delays.pop(key, None)

    def found_synchronizing(self, key: tuple[int, ...]) -> None:
        """A held window of this kernel waited out the hold: never hold it again."""
        self._kernels[key] = _SYNCS

    def synchronizes(self, key: tuple[int, ...]) -> bool | None:
        """True (it waited for the GPU every time it was probed), False (it did not), None (not known yet)."""
        state = self._kernels.get(key)
        return True if state == _SYNCS else False if state == _ASYNC else None


def kernel_key(fn: Kernel, args: Sequence[object]) -> tuple[int, ...]:
    """A kernel call by identity: the function and its arguments (new arrays may grow the pool). A
    bound method is a new object at each attribute access: it is known by its object and function."""
    function, owner = getattr(fn, "__func__", None), getattr(fn, "__self__", None)
    head = (id(owner), id(function)) if function is not None else (id(fn),)
    return (*head, *map(id, args))


def timeout_message(timeout_s: float) -> str:
    return (
        f"the blocking kernel's hold of the timing stream was not released by the host (after"
        f" {HOLD_WATCHDOG_S:g} s with no call queued a watchdog released it; the GPU gives up after"
        f" {timeout_s:g} s): while a window was queued the host waited for the GPU (a kernel that"
        " synchronizes, e.g. .get(), .item() or a device-wide sync, or more launches than the launch"
        " queue takes), so this run's times are not the kernel's; time it unheld with"
        ' --roofline-cuda-block=off, or block="off" in its marker or roofline(...) call'
        ' (CudaBackend(block="off")), or let --roofline-cuda-block=auto find out'
    )
