"""The flush before a cold window: one read pass over a device buffer larger than the L2."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from pytest_roofline.timing.cuda.kernels import BLOCKS_PER_SM, FLUSH_KERNEL, L2_READ_SOURCE, L2_READ_THREADS
from pytest_roofline.timing.cuda.loading import compiling
from pytest_roofline.timing.cuda.persisting import PersistingLines

from ...errors import UnavailableError


class L2Flush:
    """Evicts the L2 by reading ``nbytes`` on a stream (read, not written: docs/cache.md, "When
    rotation cannot apply"), from a buffer allocated on the first flush and reused until
    :meth:`release`. :meth:`begin`, before a run's cold windows, resets persisting lines
    (:mod:`.persisting`), which a read does not evict; while the L2 has a set-aside for them, each
    flush waits for the stream's last window to end and resets them again first.
    """

    def __init__(self, cupy: Any, nbytes: int, multiprocessors: int, *, rocm: bool = False) -> None:
        self._cupy, self.nbytes, self._sms = cupy, nbytes, max(multiprocessors, 1)
        self._buffer: Any = None
        self._kernel: Any = None
        self._persisting = PersistingLines(cupy, rocm=rocm)
        self._reset_each = False

    def begin(self) -> None:
        """Before a run's cold windows: read the set-aside (a kernel may have asked for one since),
        and where it is unknown reset once, now, as far as the driver lets it (best effort)."""
        size = self._persisting.set_aside()
        self._reset_each = bool(size)
        if size is None:
            with suppress(UnavailableError):
                self._persisting.reset()

    def __call__(self, stream: Any) -> None:
        cupy = self._cupy
        if self._reset_each:
            stream.synchronize()  # the last window's kernel marks lines persisting until it ends
            self._persisting.reset()
        if self._buffer is None:
            self._buffer = cupy.empty(self.nbytes, dtype=cupy.uint8)
        if self._kernel is None:
            kernel = cupy.RawKernel(L2_READ_SOURCE, FLUSH_KERNEL)
            with compiling():  # the first launch compiles it (NVRTC, CUPY_CACHE_DIR)
                self._launch(kernel, stream)
            self._kernel = kernel
            return
        self._launch(self._kernel, stream)

    def release(self) -> None:
        """Drop the buffer (the next flush allocates it again); the compiled kernel is kept."""
        self._buffer = None

    def _launch(self, kernel: Any, stream: Any) -> None:
        buf, cupy = self._buffer, self._cupy
        # one pass over the buffer; it is its own sink (written only if its sum is exactly 1.0)
        kernel(
            (self._sms * BLOCKS_PER_SM,),
            (L2_READ_THREADS,),
            (buf, cupy.uint64(buf.nbytes // 16), buf),
            stream=stream,
        )
