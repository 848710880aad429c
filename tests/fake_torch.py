"""A fake ``torch.cuda`` for the CUDA backend's PyTorch paths, on machines without a GPU or PyTorch.

``FakeTorch(fake_cupy).install(monkeypatch)`` puts a ``torch`` module with a ``torch.cuda``
submodule into ``sys.modules``. It shares the fake CuPy's device, log and streams (one CUDA for
both libraries, as on a real machine) and has only what the backend calls, with PyTorch's
signatures (``torch/cuda/__init__.py``, ``torch/cuda/streams.py``):

- ``torch.cuda.is_initialized()``: ``initialized`` (False: PyTorch loaded, CUDA never touched).
- ``torch.cuda.current_stream(device=None) -> Stream``: PyTorch's current stream, per thread as
  c10's; at first the legacy default stream (``cuda_stream == 0``, the fake CuPy's ``"null"``).
- ``torch.cuda.stream(stream)``: a context manager making ``stream`` current (logged as
  ``("torch_enter", name)`` / ``("torch_exit", name)``).
- ``torch.cuda.Stream(device=None, priority=0)`` (``.cuda_stream``, ``.device``) and
  ``torch.cuda.ExternalStream(stream_ptr, device=None)``.

``kernel()`` stands in for a PyTorch op: it launches on PyTorch's current stream, through the fake
CuPy's ``launch`` (so it is captured only when that stream captures, and is refused on the legacy
stream while another one captures, as CUDA does).
"""

from __future__ import annotations

import itertools
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fake_cupy import FakeCupy, FakeStream


class FakeTorchStream:
    """``torch.cuda.Stream``: a handle (``cuda_stream``) on a device; the fake CuPy knows it by its ptr."""

    def __init__(self, world: FakeCupy, ptr: int, device: int, name: str) -> None:
        self.cuda_stream = ptr
        self.device = types.SimpleNamespace(type="cuda", index=device)
        self.device_index = device
        # the fake CuPy's record of this handle: its name in the log, its capture state
        self.cupy_stream = world.streams_by_ptr.get(ptr) or FakeStream(world, ptr, device, name)

    def synchronize(self) -> None:
        self.cupy_stream.synchronize()

    def __repr__(self) -> str:
        return f"<FakeTorchStream {self.cupy_stream.name}>"


class FakeTorch:
    def __init__(self, world: FakeCupy, *, initialized: bool = True) -> None:
        self.world = world
        self.initialized = initialized
        self._names = itertools.count(1)
        self._ptrs = itertools.count(0x9000, 0x10)
        default = FakeTorchStream(world, 0, 0, "null")
        self._threads = threading.local()
        self._default = default
        #: (device, ptr) of every ExternalStream made
        self.external: list[tuple[int | None, int]] = []
        self.torch = self._build()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeTorch:
        monkeypatch.setitem(sys.modules, "torch", self.torch)
        monkeypatch.setitem(sys.modules, "torch.cuda", self.torch.cuda)
        return self

    @property
    def current(self) -> dict[int, FakeTorchStream]:
        """PyTorch's current stream per device, for the calling thread (c10's current streams are
        thread-local): a new thread starts on the default stream."""
        current: dict[int, FakeTorchStream] = self._threads.__dict__.setdefault("current", {})
        return current

    def current_stream(self, device: int | None = None) -> FakeTorchStream:
        index = self.world.current_device if device is None else device
        return self.current.get(index, self._default)

    def kernel(self, *args: object) -> None:
        """A PyTorch op: launches on PyTorch's current stream for the current device."""
        self.world.launch(self.current_stream().cupy_stream, "torch")

    def new_stream(self, device: int | None = None) -> FakeTorchStream:
        index = self.world.current_device if device is None else device
        return FakeTorchStream(self.world, next(self._ptrs), index, f"torch{next(self._names)}")

    def _build(self) -> types.ModuleType:
        fake = self
        torch = types.ModuleType("torch")
        cuda = types.ModuleType("torch.cuda")
        torch.cuda = cuda

        def is_initialized() -> bool:
            return fake.initialized

        def current_stream(device: Any = None) -> FakeTorchStream:
            if not fake.initialized:
                raise AssertionError("the backend asked torch for a stream before torch initialized CUDA")
            return fake.current_stream(device)

        @contextmanager
        def stream(stream: FakeTorchStream | None) -> Iterator[None]:
            if stream is None:
                yield
                return
            index = stream.device_index
            previous = fake.current.get(index)
            fake.current[index] = stream
            fake.world.log.append(("torch_enter", stream.cupy_stream.name))
            try:
                yield
            finally:
                fake.world.log.append(("torch_exit", stream.cupy_stream.name))
                if previous is None:
                    del fake.current[index]
                else:
                    fake.current[index] = previous

        def new_stream(device: Any = None, priority: int = 0) -> FakeTorchStream:
            return fake.new_stream(device)

        def external_stream(stream_ptr: int, device: Any = None) -> FakeTorchStream:
            fake.external.append((device, stream_ptr))
            index = fake.world.current_device if device is None else int(device)
            return FakeTorchStream(fake.world, stream_ptr, index, f"external:{stream_ptr}")

        cuda.is_initialized = is_initialized
        cuda.current_stream = current_stream
        cuda.stream = stream
        cuda.Stream = new_stream
        cuda.ExternalStream = external_stream
        return torch
