"""Stand-ins for the other GPU timers ``roofline selfcheck`` compares with, over a
:class:`fake_cupy.FakeCupy` device: ``torch.cuda.Event`` pairs and Triton's ``testing.do_bench``.

They follow the real signatures, so that the self-check's first run on a GPU cannot die of a
Python error in its own calls:

- ``torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False)``,
  ``Event.record(stream=None)``, ``Event.synchronize()``, ``Event.elapsed_time(end_event)`` in
  milliseconds; ``torch.cuda.synchronize(device=None)``, ``torch.cuda.current_device()``,
  ``torch.cuda.device(device)`` as a context manager (``torch/cuda/streams.py``,
  ``torch/cuda/__init__.py``).
- ``triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None,
  return_mode="mean")`` in milliseconds; ``return_mode="all"`` gives every call's time, a list
  (``python/triton/testing.py``, ``_summarize_statistics``). Before every call it zeroes a 256 MiB
  buffer to clear the L2 (Triton's CUDA driver: ``get_empty_cache_for_benchmark``, ``clear_cache``
  is ``cache.zero_()``): here a memset, on PyTorch's current device, with PyTorch's events.

PyTorch keeps a current device of its own, which need not be CuPy's: c10's ``MaybeSetDevice``
parks a device without a primary context in a thread-local ``targetDeviceIndex`` instead of
calling ``cudaSetDevice``. So here an event records on *PyTorch's* current device (0 until
``torch.cuda.device(i)``), and one recorded while CuPy runs its kernels on another GPU sees none of
them between it and its pair: a timer that ignores ``--device`` reads nothing.

They are not installed into ``sys.modules``: the self-check is handed them, so the CUDA backend
does not take them for an initialized PyTorch.
"""

from __future__ import annotations

import statistics
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fake_cupy import FakeCupy, FakeEvent, FakeStream

#: the buffer do_bench zeroes before each call: Triton's 256 MiB of int32
DO_BENCH_CACHE_BYTES = 256 * 2**20


def fake_torch(world: FakeCupy) -> Any:
    """A ``torch`` with just the ``torch.cuda`` calls the self-check and ``fake_do_bench`` make."""
    state = {"device": 0}
    others: dict[int, FakeStream] = {}

    def stream() -> FakeStream:
        """PyTorch's current stream: CuPy's where both are on one device, else that device's own."""
        device = state["device"]
        if device == world.current_device:
            return world.current_stream
        if device not in others:
            others[device] = FakeStream(world, 0xD000 + device, device, f"torch:{device}")
        return others[device]

    class Event:
        def __init__(
            self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
        ) -> None:
            self.enable_timing = enable_timing
            self._event: FakeEvent = world.cupy.cuda.Event()

        def record(self, stream_: Any = None) -> None:
            self._event.record(stream_ if stream_ is not None else stream())

        def synchronize(self) -> None:
            self._event.synchronize()

        def elapsed_time(self, end_event: Event) -> float:
            if not (self.enable_timing and end_event.enable_timing):
                raise RuntimeError("Both events must be created with argument 'enable_timing=True'")
            return float(world.cupy.cuda.get_elapsed_time(self._event, end_event._event))

    def synchronize(device: Any = None) -> None:
        world.device_sync(("synchronize", "torch"))

    @contextmanager
    def device(index: int) -> Iterator[None]:
        if not 0 <= index < world.device_count:
            raise RuntimeError("CUDA error: invalid device ordinal")
        saved, state["device"] = state["device"], index
        try:
            yield
        finally:
            state["device"] = saved

    torch = types.ModuleType("torch")
    torch.cuda = types.ModuleType("torch.cuda")
    torch.cuda.Event = Event
    torch.cuda.synchronize = synchronize
    torch.cuda.is_available = lambda: True
    torch.cuda.device = device
    torch.cuda.current_device = lambda: state["device"]
    torch.cuda.current_stream_ = stream  # for fake_do_bench: where PyTorch's work goes
    return torch


def fake_do_bench(world: FakeCupy, torch: Any) -> Callable[..., Any]:
    """``triton.testing.do_bench`` over the fake device and ``torch`` (a :func:`fake_torch`)."""

    def do_bench(
        fn: Callable[[], object],
        warmup: int = 25,
        rep: int = 100,
        grad_to_none: Any = None,
        quantiles: Any = None,
        return_mode: str = "mean",
    ) -> Any:
        if return_mode not in ("min", "max", "mean", "median", "all"):
            raise ValueError(f"return_mode must be one of min, max, mean, median, all; got {return_mode!r}")
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(5):
            where = torch.cuda.current_stream_()
            world.memsets.append((0, DO_BENCH_CACHE_BYTES, where.name))  # cache.zero_(): a write
            world.enqueue(("flush", where.name))
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        pick: dict[str, Callable[[list[float]], float]] = {
            "min": min, "max": max, "mean": statistics.fmean, "median": statistics.median,
        }  # fmt: skip
        return list(times) if return_mode == "all" else float(pick[return_mode](times))

    return do_bench
