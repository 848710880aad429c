"""The CUDA timer backend (:class:`CudaBackend`): windows of back-to-back calls timed with CUDA event
pairs on one stream (:mod:`.streams`), a run's windows queued back to back and synchronized once,
with the flush (:mod:`.flush`), the blocking kernel (:mod:`.blocking`), graph mode (:mod:`.graphs`)
and CUPTI (:mod:`pytest_roofline.timing.cupti`) around them: docs/measurement.md ("The CUDA timer").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from pytest_roofline.model.devices import DeviceProperties
from pytest_roofline.model.policy import check_positive
from pytest_roofline.timing.base import Backend, Kernel, check_window_counts, gc_paused
from pytest_roofline.timing.clocks import ClockWatcher
from pytest_roofline.timing.cuda.blocking import (
    BLOCK_TIMEOUT_S,
    Blocker,
    HoldTimedOut,
    KernelProbes,
    blocking_environment,
    check_block,
    hold_refusal,
    kernel_key,
    timeout_message,
)
from pytest_roofline.timing.cuda.device import device_properties
from pytest_roofline.timing.cuda.flush import L2Flush
from pytest_roofline.timing.cuda.graphs import capture_graph, check_graph_support
from pytest_roofline.timing.cuda.kernels import HOUSEKEEPING_KERNELS
from pytest_roofline.timing.cuda.loading import compiling, require_device, using_device
from pytest_roofline.timing.cuda.memory import free_cached_blocks
from pytest_roofline.timing.cuda.streams import TimingStreams

from ...errors import InvalidValueError, MeasurementError, UnavailableError

#: cudaEventElapsedTime: "milliseconds with a resolution of around 0.5 microseconds" (CUDA Runtime API)
EVENT_RESOLUTION_S = 0.5e-6
#: the flush buffer is max(2 × last-level cache, this): a floor in case the driver under-reports L2
MIN_FLUSH_BYTES = 256 * 2**20
#: what times a window: ``events`` (CUDA event pairs), ``cupti`` (kernel activity records,
#: ``timing/cupti.py``), ``auto`` (CUPTI where cupti-python is installed, else events)
TIMERS = ("auto", "events", "cupti")


class CudaBackend(Backend):
    """Times windows of back-to-back calls on GPU ``device`` with CUDA event pairs, or CUPTI's kernel
    records (``timer``: one of :data:`TIMERS`); what each option does: docs/measurement.md ("The CUDA
    timer"). ``stream``: where the events are recorded and the calls must launch, a CuPy stream, an
    int handle, or an object with ``cuda_stream`` (``torch.cuda.Stream``) or ``__cuda_stream__``;
    None: the framework's current stream at each :meth:`run` (:mod:`.streams`). ``flush_bytes``: the
    buffer each flush reads, default max(2 × cache, 256 MiB), the cache the larger of the L2 the
    driver reports and ``llc_bytes``. ``graph=True``: each :meth:`run` times replays of one CUDA
    graph of its calls (:mod:`.graphs`). ``block`` (``"auto"``, ``"on"``, ``"off"``; True is
    ``"on"``, False ``"off"``, None ``"auto"``): whether the blocking kernel holds a sampling window's
    stream (:mod:`.blocking`); ``block_timeout_s``: a hold lasting that long gives up on the GPU:
    ``auto`` then times that kernel unheld, ``on`` raises.
    """

    name = "cuda"

    def __init__(
        self,
        device: int = 0,
        *,
        stream: object | None = None,
        flush_bytes: int | None = None,
        llc_bytes: int | None = None,
        graph: bool = False,
        block: bool | str | None = None,
        block_timeout_s: float = BLOCK_TIMEOUT_S,
        timer: str = "auto",
    ) -> None:
        self._cupy = require_device(device)
        if timer not in TIMERS:
            raise InvalidValueError(f"timer must be one of {', '.join(map(repr, TIMERS))}; got {timer!r}")
        if flush_bytes is not None and (
            not isinstance(flush_bytes, int) or isinstance(flush_bytes, bool) or flush_bytes < 1
        ):
            raise InvalidValueError(f"flush_bytes must be a positive integer; got {flush_bytes!r}")
        if not isinstance(graph, bool):
            raise InvalidValueError(f"graph must be True or False; got {graph!r}")
        block_mode = check_block(block)
        check_positive("block_timeout_s", block_timeout_s)
        props = device_properties(device)
        self.device = device
        self.properties = props
        self.device_name = props.name
        self.resolution_s = EVENT_RESOLUTION_S
        self._flush_bytes = flush_bytes or max(2 * max(props.l2_bytes, llc_bytes or 0), MIN_FLUSH_BYTES)
        self.graph = graph
        self.block_mode = block_mode
        self.block_timeout_s = float(block_timeout_s)
        if graph:
            check_graph_support(self._cupy, props)
        self._streams = TimingStreams(self._cupy, device, graph=graph, given=stream)
        # the buffer is allocated on the first flush: a warm backend never holds it
        self._flush = L2Flush(self._cupy, self._flush_bytes, props.multiprocessors, rocm=props.kind == "rocm")
        self._blocker: Blocker | None = None
        self._probes = KernelProbes()
        #: kernel nodes (and all nodes) of the last graph captured; None when unreadable
        self.last_graph_kernels: int | None = None
        self.last_graph_nodes: int | None = None
        #: CUPTI's kernel records, when they time the windows (timer "cupti", or "auto" with
        #: cupti-python installed and no profiler attached): events otherwise
        self._activity, self.timer_note = _kernel_activity(timer, props)
        self.timer = "cupti" if self._activity is not None else "events"
        if self.block:
            self.holder()  # built and launched once, unheld: its module loads outside any window

    @property
    def block(self) -> bool:
        """Whether this backend holds windows at all, under its setting and the environment now."""
        return not self.block_note

    @property
    def block_note(self) -> str:
        """Why no window is held ("" when they may be)."""
        rocm = self.properties.kind == "rocm"
        return hold_refusal(self.block_mode, rocm=rocm, cupti=self._activity is not None)

    @property
    def flush_bytes(self) -> int:
        return self._flush_bytes

    @contextmanager
    def blocking(self, setting: bool | str | None) -> Iterator[CudaBackend]:
        """Use ``block=setting`` inside the block (``None`` changes nothing), as :meth:`on_stream` does."""
        if setting is None:
            yield self
            return
        saved, self.block_mode = self.block_mode, check_block(setting)
        try:
            if self.block:
                self.holder()
            yield self
        finally:
            self.block_mode = saved

    @contextmanager
    def on_stream(self, stream: object | None) -> Iterator[CudaBackend]:
        """Time on ``stream`` (what the constructor's ``stream=`` takes) inside the block, then on
        what the backend was built with again. ``None`` changes nothing."""
        with self._streams.using(stream):
            yield self

    def clock(self) -> float:
        return time.perf_counter()

    def watch_clocks(self, interval_s: float = 0.02) -> ClockWatcher:
        """An NVML watcher of this GPU's clocks (:mod:`.clocks`), found by PCI bus id: wrap a measurement
        in ``with backend.watch_clocks() as watcher:`` and read ``watcher.log``."""
        return ClockWatcher(index=self.device, pci_bus_id=self.pci_bus_id, interval_s=interval_s)

    @property
    def pci_bus_id(self) -> str | None:
        """This GPU's PCI bus id, by which NVML finds it; None where CuPy has none (ROCm builds)."""
        with suppress(Exception), using_device(self.device) as device:
            return str(device.pci_bus_id)
        return None

    def run(
        self, fn: Kernel, args: Sequence[object], *, calls: int, samples: int, flush: bool
    ) -> list[float]:
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        check_window_counts(calls, samples)
        with using_device(self.device):
            stream, torch_stream = self._streams.current()
            with stream, torch_stream:
                graph = self._capture(fn, args, calls, stream) if self.graph else None
                key = kernel_key(fn, args)
                may_hold = self._probes.may_hold(key, samples, block=self.block, mode=self.block_mode)
                blocker = self.holder() if may_hold else None
                try:
                    return self._windows(fn, args, calls, samples, flush, stream, graph, blocker, key)
                except HoldTimedOut:
                    if self.block_mode != "auto":
                        raise MeasurementError(timeout_message(self.block_timeout_s)) from None
                    # auto: this kernel waited for the GPU while held; time it unheld from now on
                    self._probes.found_synchronizing(key)
                    return self._windows(fn, args, calls, samples, flush, stream, graph, None, key)

    def flush_cache(self) -> None:
        """One flush of the L2 on the timing stream, outside any window:
        in graph mode too, where a window of nothing would have to be captured."""
        with using_device(self.device):
            stream, _ = self._streams.current()
            self._flush.begin()
            self._flush(stream)

    def release_memory(self) -> None:
        """Give back the device memory held between measurements:
        the flush buffer (allocated again by the next flush) and the free blocks of CuPy's pool on
        this device, which PyTorch's allocator cannot otherwise use."""
        self._flush.release()
        free_cached_blocks(self._cupy, self.device)

    def synchronizes(self, fn: Kernel, args: Sequence[object] = ()) -> bool | None:
        """What the probes found of ``fn(*args)``: True (it waited for the GPU every time it was
        probed), False (it did not), None (not known yet)."""
        return self._probes.synchronizes(kernel_key(fn, args))

    def holder(self) -> Blocker:
        """The blocking and delay kernels of this backend, built and launched once on first use."""
        if self._blocker is None:
            # the plugin's first kernels: CuPy compiles them with NVRTC, into CUPY_CACHE_DIR
            with using_device(self.device), compiling():
                blocker = Blocker(self._cupy, self.block_timeout_s)
                blocker.warm(self._cupy.cuda.get_current_stream())
            self._blocker = blocker
        return self._blocker

    def _windows(
        self,
        fn: Kernel,
        args: Sequence[object],
        calls: int,
        samples: int,
        flush: bool,
        stream: Any,
        graph: Any,
        blocker: Blocker | None,
        key: tuple[int, ...],
    ) -> list[float]:
        """``samples`` windows queued back to back, held by ``blocker`` (or one probed, unheld), and
        one host sync."""
        __tracebackhide__ = True
        cuda = self._cupy.cuda
        probe = None
        if blocker is None and self._probes.wanted(key, calls, block=self.block, mode=self.block_mode):
            probe = functools.partial(self._probe_first_window, stream, key, calls)
        if blocker is not None:
            blocker.arm()
        if flush:  # persisting L2 lines back to normal before sampling (timing/cuda/persisting.py)
            self._flush.begin()
        activity = self._activity
        if activity is not None:
            activity.start()
        try:
            # a graph replay is one launch; eager, the hold takes what a probe showed the queue takes
            held = calls if graph is not None else self._probes.held_calls(key, calls)
            with gc_paused():  # no finalizer that synchronizes runs behind a hold
                pairs = _queue_windows(
                    cuda, fn, args, calls, samples, stream, graph, blocker,
                    held=held, flush=self._flush if flush else None, probe=probe,
                )  # fmt: skip
            # one host sync for every window: they were queued in order on this one stream
            pairs[-1][1].synchronize()
        except BaseException:
            if activity is not None:
                with suppress(Exception):  # stop collecting; the kernel's error is the one to see
                    activity.stop()
            raise
        if blocker is not None and blocker.timed_out():
            raise HoldTimedOut
        events = [cuda.get_elapsed_time(start, end) / 1e3 for start, end in pairs]
        if activity is None:
            return events
        windows, note = _kernel_windows(activity.stop(), samples, events)
        if note is not None:
            self.timer_note = note
        return windows

    def _probe_first_window(self, stream: Any, key: tuple[int, ...], calls: int) -> Callable[[], None]:
        """Queue the probe's delay kernel before the first window; what to call once it is queued."""
        marker = self._probes.start(self.holder(), stream, key, calls)
        return functools.partial(self._probes.end, key, marker)

    def _capture(self, fn: Kernel, args: Sequence[object], calls: int, stream: Any) -> Any:
        graph, self.last_graph_kernels, self.last_graph_nodes = capture_graph(
            self._cupy, fn, args, calls, stream, self._activity
        )
        return graph


def _queue_windows(
    cuda: Any,
    fn: Kernel,
    args: Sequence[object],
    calls: int,
    samples: int,
    stream: Any,
    graph: Any,
    blocker: Blocker | None,
    *,
    held: int,
    flush: Callable[[Any], None] | None,
    probe: Callable[[], Callable[[], None]] | None,
) -> list[tuple[Any, Any]]:
    """Queue the windows (flush, probe or hold, start event, calls, end event); their event pairs.

    ``held``: the calls of a window queued behind its hold, the rest after the release. ``probe``:
    queues the probe before the first window's calls, and gives what ends it after them. A hold
    released late (the host waited for the GPU inside it) is :class:`HoldTimedOut` at once.
    """
    __tracebackhide__ = True
    pairs = []
    for index in range(samples):
        if flush is not None:
            flush(stream)
        start, end = cuda.Event(), cuda.Event()
        end_probe = probe() if probe is not None and index == 0 else None
        if blocker is not None:
            blocker.hold(stream)
        try:
            start.record(stream)
            if graph is None:
                for _ in range(held):
                    fn(*args)
                    if blocker is not None:
                        blocker.queued += 1
                if blocker is not None and calls > held:
                    blocker.release()  # the GPU works through the held calls while the rest queue
                for _ in range(calls - held):
                    fn(*args)
            else:
                graph.launch(stream)
            end.record(stream)
        finally:
            if blocker is not None:
                blocker.release()
        if blocker is not None and blocker.timed_out():
            raise HoldTimedOut
        if end_probe is not None:
            end_probe()
        pairs.append((start, end))
    return pairs


def _kernel_windows(
    records: Sequence[Any], samples: int, events: list[float]
) -> tuple[list[float], str | None]:
    """Each window's busy time from CUPTI's kernel records, split in order (the windows ran back
    to back on one stream, each the same calls); the events' times where they do not split, and
    the timer's note that says so. The backend's own kernels (:data:`HOUSEKEEPING_KERNELS`) are left out."""
    from pytest_roofline.timing.cupti import busy_s

    records = [r for r in records if r.name not in HOUSEKEEPING_KERNELS]
    if not records or len(records) % samples:
        seen = f"CUPTI saw {len(records)} kernel(s) for {samples} window(s)"
        return events, f"{seen}: those windows were timed by events"
    per = len(records) // samples
    return [busy_s(records[i * per : (i + 1) * per]) for i in range(samples)], None


def _kernel_activity(timer: str, props: DeviceProperties) -> tuple[Any, str]:
    """CUPTI's kernel records for ``timer`` (``cupti``, or ``auto`` where cupti-python is installed,
    not on ROCm, and no profiler holds CUPTI), and what was chosen."""
    if timer == "events":
        return None, "events (timer='events')"
    if props.kind == "rocm":
        if timer == "cupti":
            raise UnavailableError("timer='cupti' needs CUDA: CUPTI does not trace ROCm")
        return None, "events (ROCm)"
    attached = blocking_environment()
    if timer == "auto" and attached is not None and "CUDA_LAUNCH_BLOCKING" not in attached:
        return None, f"events ({attached}, and it uses CUPTI itself)"
    from pytest_roofline.timing.cupti import collector

    activity = collector()
    if activity is None:
        if timer == "cupti":
            raise UnavailableError(
                "timer='cupti' needs cupti-python: pip install 'pytest-roofline[cupti]' (or CUPTI refused"
                " its callbacks: another tool holds them)"
            )
        return None, "events (cupti-python not installed)"
    return activity, "CUPTI kernel activity (each kernel's GPU interval; launch gaps excluded)"
