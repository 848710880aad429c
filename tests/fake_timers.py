"""Stand-ins for the other GPU timers ``benchmarks/gpu_selfcheck.py`` compares with, over a
:class:`fake_cupy.FakeCupy` device: ``torch.cuda.Event`` pairs and Triton's ``testing.do_bench``.

They follow the real signatures, so that the self-check's first run on a GPU cannot die of a
Python error in its own calls:

- ``torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False)``,
  ``Event.record(stream=None)``, ``Event.synchronize()``, ``Event.elapsed_time(end_event)`` in
  milliseconds; ``torch.cuda.synchronize(device=None)`` (``torch/cuda/streams.py``,
  ``torch/cuda/__init__.py``).
- ``triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None,
  return_mode="mean")`` in milliseconds (``python/triton/testing.py``; it zeroes a 256 MB buffer
  before every call to clear L2: here a memset on the current stream).

They are not installed into ``sys.modules``: the self-check is handed them, so the CUDA backend
does not take them for an initialized PyTorch.
"""

from __future__ import annotations

import statistics
import types
from collections.abc import Callable
from typing import Any

from fake_cupy import FakeCupy, FakeEvent


def fake_torch(world: FakeCupy) -> Any:
    """A ``torch`` with just the ``torch.cuda`` calls the self-check makes."""

    class Event:
        def __init__(
            self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
        ) -> None:
            self.enable_timing = enable_timing
            self._event: FakeEvent = world.cupy.cuda.Event()

        def record(self, stream: Any = None) -> None:
            self._event.record(stream)

        def synchronize(self) -> None:
            self._event.synchronize()

        def elapsed_time(self, end_event: Event) -> float:
            if not (self.enable_timing and end_event.enable_timing):
                raise RuntimeError("Both events must be created with argument 'enable_timing=True'")
            return float(world.cupy.cuda.get_elapsed_time(self._event, end_event._event))

    def synchronize(device: Any = None) -> None:
        world.device_sync(("synchronize", "torch"))

    torch = types.ModuleType("torch")
    torch.cuda = types.ModuleType("torch.cuda")
    torch.cuda.Event = Event
    torch.cuda.synchronize = synchronize
    torch.cuda.is_available = lambda: True
    return torch


def fake_do_bench(world: FakeCupy) -> Callable[..., float]:
    """``triton.testing.do_bench`` over the fake device (median, mean, min or max in ms)."""

    def do_bench(
        fn: Callable[[], object],
        warmup: int = 25,
        rep: int = 100,
        grad_to_none: Any = None,
        quantiles: Any = None,
        return_mode: str = "mean",
    ) -> float:
        if return_mode not in ("min", "max", "mean", "median", "all"):
            raise ValueError(f"return_mode must be one of min, max, mean, median, all; got {return_mode!r}")
        cache = world.cupy.empty(256 * 2**20, dtype=world.cupy.uint8)
        fn()
        times = []
        for _ in range(5):
            world.cupy.cuda.runtime.memsetAsync(cache.data.ptr, 0, cache.nbytes, world.current_stream.ptr)
            start, end = world.cupy.cuda.Event(), world.cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(world.cupy.cuda.get_elapsed_time(start, end))
        pick: dict[str, Callable[[list[float]], float]] = {
            "min": min, "max": max, "mean": statistics.fmean, "median": statistics.median,
        }  # fmt: skip
        return float(pick[return_mode](times)) if return_mode != "all" else float(statistics.median(times))

    return do_bench
