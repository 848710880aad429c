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

``torch.cuda.synchronize(device=None)`` is logged ``("synchronize", "torch:<device>")`` and
``torch.cuda.empty_cache()`` ``("empty_cache",)``. ``torch.Tensor`` is :class:`FakeTensor` and
``torch.nn.Parameter`` :class:`FakeParameter`, usable without installing the module too.

Tensors (``torch/_tensor.py``, ``torch/cuda/__init__.py``): ``torch.randn``, ``torch.empty``,
``torch.zeros`` and ``torch.ones`` take ``*size, dtype=None, device=None, requires_grad=False``;
``device`` is ``None`` (the CPU), ``"cpu"``, ``"cuda"`` (the current device), ``"cuda:N"`` or a
``torch.device``. A tensor has ``device`` (``type``, ``index``), ``is_cuda``, ``is_meta``,
``requires_grad``, ``shape``, ``dtype``, ``nbytes``, ``clone()``, ``to(device)``, ``cuda()``,
``detach()``, ``__dlpack__`` and ``__dlpack_device__()``, and ``__cuda_array_interface__``, which
raises AttributeError on a CPU tensor and RuntimeError on one that requires grad, as PyTorch's does.
The current device is the fake CuPy's (one CUDA runtime): ``torch.cuda.current_device()``,
``torch.cuda.set_device(device)``, ``torch.cuda.device_count()`` and ``torch.cuda.is_available()``
initialize CUDA as PyTorch does (the fake CuPy's ``init``: ``CUDA_VISIBLE_DEVICES`` is read then),
and a CUDA tensor is made on the current device unless its ``device`` names one; a device that is
not visible is PyTorch's RuntimeError ("invalid device ordinal").
"""

from __future__ import annotations

import itertools
import math
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
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


class FakeTorchDevice:
    """``torch.device``: a type and an index (None: the current device, for ``"cuda"``)."""

    def __init__(self, kind: str, index: int | None = None) -> None:
        self.type = kind
        self.index = index

    @classmethod
    def parse(cls, spec: object) -> FakeTorchDevice:
        if isinstance(spec, FakeTorchDevice):
            return spec
        if spec is None:
            return cls("cpu")
        kind, _, index = str(spec).partition(":")
        return cls(kind, int(index) if index else None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeTorchDevice) and (other.type, other.index) == (self.type, self.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{index})"


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

    def resolve(self, device: object) -> FakeTorchDevice:
        """Where a tensor made with ``device=device`` lives: ``"cuda"`` is the current device, and a
        CUDA device initializes CUDA and must be visible."""
        parsed = FakeTorchDevice.parse(device)
        if parsed.type != "cuda":
            return parsed
        self.world.init()
        self.initialized = True
        index = self.world.current_device if parsed.index is None else parsed.index
        if not 0 <= index < self.world.device_count:
            raise RuntimeError("CUDA error: invalid device ordinal")
        return FakeTorchDevice("cuda", index)

    def tensor(
        self, *size: Any, dtype: Any = None, device: object = None, requires_grad: bool = False
    ) -> FakeTensor:
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
        where = self.resolve(device)
        return FakeTensor(
            shape, device=where.type, index=where.index or 0, dtype=dtype, requires_grad=requires_grad,
            fake=self,
        )  # fmt: skip

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

        def synchronize(device: Any = None) -> None:
            index = fake.world.current_device if device is None else int(device)
            fake.world.device_sync(("synchronize", f"torch:{index}"))

        def device_count() -> int:
            fake.world.init()
            return fake.world.device_count

        def current_device() -> int:
            fake.world.init()
            fake.initialized = True
            return fake.world.current_device

        def set_device(device: Any) -> None:
            index = device if isinstance(device, int) else FakeTorchDevice.parse(device).index or 0
            fake.world.check_device(index)
            fake.initialized = True
            fake.world.current_device = index

        torch.device = FakeTorchDevice.parse
        torch.randn = torch.empty = torch.zeros = torch.ones = fake.tensor
        torch.float32, torch.float16 = np.float32, np.float16
        cuda.is_available = lambda: device_count() > 0
        cuda.device_count = device_count
        cuda.current_device = current_device
        cuda.set_device = set_device
        cuda.is_initialized = is_initialized
        cuda.current_stream = current_stream
        cuda.stream = stream
        cuda.Stream = new_stream
        cuda.ExternalStream = external_stream
        cuda.synchronize = synchronize
        cuda.empty_cache = lambda: fake.world.log.append(("empty_cache",))
        torch.Tensor = FakeTensor
        torch.nn = types.ModuleType("torch.nn")
        torch.nn.Parameter = FakeParameter
        return torch


class FakeTensor:
    """A ``torch.Tensor`` as the plugin sees one, with PyTorch's rules where they bite
    (``torch/_tensor.py``, ``torch/nn/parameter.py``):

    - ``__cuda_array_interface__`` raises AttributeError on a CPU tensor and **RuntimeError** on a
      CUDA tensor that requires grad (``hasattr`` swallows only the first);
    - ``clone()`` keeps the strides of a dense tensor (``torch.preserve_format``: ``channels_last``
      too) and makes a non-dense one contiguous; a clone of a tensor that requires grad is not a
      leaf (``grad_fn``), and only a leaf's ``requires_grad_`` may be set;
    - ``detach()`` shares the data and requires no grad; ``copy_`` into a leaf that requires grad
      raises; ``view`` shares the data.

    ``values`` stands for what it holds: a clone or ``copy_`` carries it over.
    """

    _ptrs = itertools.count(0x10_0000_0000, 0x100_0000)

    def __init__(
        self,
        shape: Sequence[int],
        *,
        device: str = "cuda",
        index: int = 0,
        itemsize: int = 4,
        dtype: Any = None,
        requires_grad: bool = False,
        strides: Sequence[int] | None = None,
        data_ptr: int | None = None,
        values: object = None,
        fake: FakeTorch | None = None,
    ) -> None:
        self.shape = tuple(shape)
        self.device = FakeTorchDevice(device, index if device != "cpu" else None)
        #: its dtype (a NumPy one stands in for torch's); ``itemsize`` alone makes a float of that size
        self.dtype = np.dtype(dtype) if dtype is not None else np.dtype(f"<f{itemsize}")
        self.itemsize = self.dtype.itemsize
        #: the fake torch that made it (``torch.randn`` and the rest), which knows the machine's GPUs
        self._fake = fake
        self.strides = tuple(strides) if strides is not None else _c_strides(self.shape)
        self.ptr = next(self._ptrs) if data_ptr is None else data_ptr
        self.requires_grad = requires_grad
        self.grad_fn: str | None = None
        self.is_meta = False
        self.values = values

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def physical_device(self) -> int:
        """Which of the machine's GPUs a CUDA tensor lives on (``CUDA_VISIBLE_DEVICES`` renumbers them)."""
        assert self._fake is not None
        assert self.is_cuda
        assert self.device.index is not None
        return self._fake.world.visible[self.device.index]

    def to(self, device: object) -> FakeTensor:
        assert self._fake is not None
        where = self._fake.resolve(device)
        moved = self._like(ptr=None, strides=_c_strides(self.shape))
        moved.device, moved.requires_grad = where, self.requires_grad
        return moved

    def cuda(self, device: object = None) -> FakeTensor:
        return self.to("cuda" if device is None else f"cuda:{int(str(device).rpartition(':')[2])}")

    def __dlpack_device__(self) -> tuple[int, int]:
        if self.is_cuda:
            return (2, self.device.index or 0)  # kDLCUDA
        return (1, 0)  # kDLCPU

    def __repr__(self) -> str:
        return f"<FakeTensor {self.shape} on {self.device}>"

    @property
    def nbytes(self) -> int:
        return self.numel() * self.itemsize

    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    def element_size(self) -> int:
        return self.itemsize

    def stride(self) -> tuple[int, ...]:
        return self.strides

    def data_ptr(self) -> int:
        return self.ptr

    def dim(self) -> int:
        return len(self.shape)

    def is_contiguous(self, memory_format: object = None) -> bool:
        return self.strides == _c_strides(self.shape)

    def __dlpack__(self, **kwargs: object) -> object:
        return object()

    def __setitem__(self, key: object, value: object) -> None:  # a tensor takes item assignment
        self.values = value

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.device.type != "cuda":
            raise AttributeError(
                "Can't get __cuda_array_interface__ on non-CUDA tensor type: torch.FloatTensor If CUDA data"
                " is required use tensor.cuda() to copy tensor to device memory."
            )
        if self.requires_grad:
            raise RuntimeError(
                "Can't get __cuda_array_interface__ on Variable that requires grad. If gradients aren't"
                " required, use var.detach() to get Variable that doesn't require grad."
            )
        strides = None if self.is_contiguous() else tuple(s * self.itemsize for s in self.strides)
        return {"typestr": self.dtype.str, "shape": self.shape, "strides": strides,
                "data": (self.ptr, False), "version": 2}  # fmt: skip

    def _like(self, *, ptr: int | None, strides: Sequence[int]) -> FakeTensor:
        return FakeTensor(
            self.shape, device=self.device.type, index=self.device.index or 0, dtype=self.dtype,
            strides=strides, data_ptr=ptr, values=self.values, fake=self._fake,
        )  # fmt: skip

    def detach(self) -> FakeTensor:
        return self._like(ptr=self.ptr, strides=self.strides)

    def clone(self, memory_format: object = None) -> FakeTensor:
        dense = sorted((s, n) for s, n in zip(self.strides, self.shape, strict=True) if n != 1)
        expected, keeps = 1, True
        for stride, size in dense:
            keeps, expected = keeps and stride == expected, expected * size
        copy = self._like(ptr=None, strides=self.strides if keeps else _c_strides(self.shape))
        if self.requires_grad:
            copy.requires_grad, copy.grad_fn = True, "CloneBackward0"
        return copy

    def requires_grad_(self, requires_grad: bool = True) -> FakeTensor:
        if not self.is_leaf:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed"
                " variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        self.requires_grad = requires_grad
        return self

    def copy_(self, src: FakeTensor) -> FakeTensor:
        if self.requires_grad and self.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        self.values = src.values
        return self

    def view(self, *shape: int) -> FakeTensor:
        known = -self.numel() // math.prod(shape) if -1 in shape else None  # one -1: what the rest leaves
        view = self._like(ptr=self.ptr, strides=self.strides)
        view.shape = tuple(known if size == -1 else size for size in shape)
        view.strides = _c_strides(view.shape)
        return view


class FakeParameter(FakeTensor):
    """``torch.nn.Parameter(data, requires_grad=True)``: a leaf sharing ``data``'s memory; its
    ``clone()`` and ``detach()`` are plain tensors, as PyTorch's are."""

    def __init__(self, data: FakeTensor, requires_grad: bool = True) -> None:
        super().__init__(
            data.shape, device=data.device.type, index=data.device.index or 0, dtype=data.dtype,
            strides=data.strides, data_ptr=data.ptr, requires_grad=requires_grad, values=data.values,
            fake=data._fake,
        )  # fmt: skip


def _c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    steps: list[int] = []
    step = 1
    for size in reversed(shape):
        steps.insert(0, step)
        step *= size
    return tuple(steps)
