"""Persisting L2 lines, which a plain flush cannot evict: the L2's set-aside for them, read, and the
driver's ``cuCtxResetPersistingL2Cache`` that turns them back to normal, called through ctypes (CuPy
binds neither). Why and when: docs/cache.md ("On a GPU").
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from ...errors import UnavailableError

#: ``cudaLimitPersistingL2CacheSize`` (CUDA's ``cudaLimit``; the driver's
#: ``CU_LIMIT_PERSISTING_L2_CACHE_SIZE``): the L2 set-aside for persisting accesses, in bytes
LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
#: the CUDA driver library, where ``cuCtxResetPersistingL2Cache`` lives
DRIVER_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


class PersistingLines:
    """The set-aside of one device's L2, read at the start of each cold run, and the reset."""

    def __init__(self, cupy: Any, *, rocm: bool) -> None:
        self._cupy, self._rocm = cupy, rocm
        #: bytes set aside for persisting lines at the last :meth:`set_aside`; None: unknown
        self.bytes: int | None = 0

    def set_aside(self) -> int | None:
        """The set-aside's size now (a kernel may have asked for one since the last run); None when
        the driver does not say."""
        if self._rocm:
            self.bytes = 0  # HIP has no persisting set-aside to read
            return 0
        try:
            self.bytes = int(self._cupy.cuda.runtime.deviceGetLimit(LIMIT_PERSISTING_L2_CACHE_SIZE))
        except Exception:  # CUDARuntimeError: a driver without the limit
            self.bytes = None
        return self.bytes

    def reset(self) -> None:
        """Every persisting line of the current context back to normal, so that a flush evicts it.
        Takes effect at once, on the GPU's work so far: not ordered with work still queued. An
        error when a set-aside exists and the driver refuses: a cold window could not be cold."""
        if self._rocm:
            return
        try:
            status = int(_driver().cuCtxResetPersistingL2Cache())
        except (OSError, AttributeError) as exc:  # no driver library, or one before CUDA 11.0
            status, reason = -1, f"{type(exc).__name__}: {exc}"
        else:
            reason = f"CUresult {status}"
        if status != 0 and self.bytes:
            raise UnavailableError(
                f"cuCtxResetPersistingL2Cache failed ({reason}) while {self.bytes} bytes of the L2 are set"
                " aside for persisting lines, so a flush may leave a kernel's data in the L2; measure"
                " it warm (cache='warm') or without the set-aside"
            )


_loaded: Any = None


def _driver() -> Any:
    """The CUDA driver library (loaded once; the process has it loaded already through CuPy)."""
    global _loaded
    if _loaded is None:
        _loaded = ctypes.CDLL(DRIVER_LIBRARY)
    return _loaded
