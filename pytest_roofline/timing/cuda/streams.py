"""Which CUDA stream a window is timed on: the caller's, PyTorch's current one, CuPy's, or graph
mode's own; and the wrapping of a foreign stream for CuPy and PyTorch. PyTorch is never imported
here, only used once loaded and with CUDA initialized, so that its kernels launch where the events
are (docs/measurement.md, "The CUDA timer").
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from pytest_roofline.timing.cuda.loading import using_device

from ...errors import InvalidTypeError, InvalidValueError

LEGACY_STREAM_PTRS = (0, 1)  # cudaStreamLegacy: cannot be captured into a graph


class TimingStreams:
    """The stream a backend times on, and the one it was given (``stream=``, :meth:`using`).

    ``given``: what the caller passed (None: the framework's current stream at each run);
    ``graph``: graph mode, which captures only on a non-default stream of its own.
    """

    def __init__(self, cupy: Any, device: int, *, graph: bool, given: object | None = None) -> None:
        self._cupy, self.device, self.graph = cupy, device, graph
        self._given: object | None = None
        self._stream: Any = None
        if given is not None:
            self._given, self._stream = given, self._wrap(given)
        self._capture_stream: Any = None
        self._torch_views: dict[int, Any] = {}

    @contextmanager
    def using(self, stream: object | None) -> Iterator[None]:
        """Time on ``stream`` inside the block, then on what was given before; ``None`` changes nothing."""
        if stream is None:
            yield
            return
        saved = self._given, self._stream
        self._given, self._stream = stream, self._wrap(stream)
        try:
            yield
        finally:
            self._given, self._stream = saved

    def _wrap(self, stream: object) -> Any:
        with using_device(self.device):
            wrapped = as_cupy_stream(self._cupy, stream, self.device)
        if self.graph and wrapped.ptr in LEGACY_STREAM_PTRS:
            raise InvalidValueError(
                "graph mode cannot capture on the legacy default stream; pass a non-default stream "
                "(cupy.cuda.Stream(non_blocking=True)) or stream=None"
            )
        return wrapped

    def current(self) -> tuple[Any, AbstractContextManager[object]]:
        """The CuPy stream to time on, and the block that makes it PyTorch's current stream."""
        torch_cuda = initialized_torch_cuda()
        if self._stream is not None:
            stream = self._stream
        elif torch_cuda is not None:
            current = as_cupy_stream(
                self._cupy, torch_cuda.current_stream(self.device).cuda_stream, self.device
            )
            if not self.graph:
                return current, nullcontext()  # already PyTorch's current stream
            stream = self._private_stream(current)
        elif not self.graph:
            return self._cupy.cuda.get_current_stream(), nullcontext()
        else:
            stream = self._private_stream(self._cupy.cuda.get_current_stream())
        if torch_cuda is None:
            return stream, nullcontext()
        return stream, torch_cuda.stream(self._torch_view(torch_cuda, stream))

    def _private_stream(self, current: Any) -> Any:
        """Graph mode's own *blocking* stream, ordered after ``current``'s queued work (why blocking:
        docs/measurement.md, "The CUDA timer")."""
        if self._capture_stream is None:
            self._capture_stream = self._cupy.cuda.Stream(non_blocking=False)
        # order it after the current stream's queued work (PyTorch's may be a side stream), no host sync
        self._capture_stream.wait_event(current.record())
        return self._capture_stream

    def _torch_view(self, torch_cuda: Any, stream: Any) -> Any:
        given = self._given
        if stream is self._stream and given is not None and hasattr(given, "cuda_stream"):
            return given  # a torch.cuda.Stream already
        view = self._torch_views.get(stream.ptr)
        if view is None:
            view = torch_cuda.ExternalStream(stream.ptr, device=self.device)
            self._torch_views[stream.ptr] = view
        return view


def initialized_torch_cuda() -> Any | None:
    """``torch.cuda`` when PyTorch is already imported and has initialized CUDA; never imports torch."""
    torch = sys.modules.get("torch")
    torch_cuda = getattr(torch, "cuda", None) if torch is not None else None
    if torch_cuda is None:
        return None
    try:
        return torch_cuda if torch_cuda.is_initialized() else None
    except Exception:  # a half-imported or CPU-only torch
        return None


class _StreamHandle:
    """An int stream handle dressed in the CUDA stream protocol, for ``Stream.from_external``."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)


def as_cupy_stream(cupy: Any, stream: object, device: int) -> Any:
    """A CuPy stream object for what the caller passed; call with ``device`` current."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if isinstance(stream, int) and not isinstance(stream, bool):
        if from_external is not None:  # CuPy >= 14 deprecates ExternalStream in favour of this
            return from_external(_StreamHandle(stream))
        return cupy.cuda.ExternalStream(stream, device)
    if hasattr(stream, "ptr") and hasattr(stream, "synchronize"):  # already a CuPy stream
        return stream
    if hasattr(stream, "__cuda_stream__"):
        if from_external is not None:
            return from_external(stream)
        _version, ptr = stream.__cuda_stream__()
        return cupy.cuda.ExternalStream(int(ptr), device)
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if isinstance(handle, int) and not isinstance(handle, bool):
        return as_cupy_stream(cupy, handle, device)
    raise InvalidTypeError(
        f"stream must be a CuPy stream, an int handle (torch.cuda.current_stream().cuda_stream), an "
        f"object with cuda_stream or __cuda_stream__; got {stream!r} ({type(stream).__name__})"
    )
