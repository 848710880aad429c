"""Kernel activity records through CUPTI (``cupti-python``, ``pip install 'pytest-roofline[cupti]'``):
each kernel's own GPU interval, so that a window's time can be the union of its kernels' intervals,
launch gaps left out. The module is imported only when asked for; nothing here imports CuPy. Why,
and the cupti-python API it is written against: docs/measurement.md ("The CUDA timer").
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KernelActivity", "KernelInterval", "busy_s"]

#: CUPTI's activity buffer: the size cupti-python's samples ask for; no cap on records
BUFFER_BYTES = 8 * 2**20
#: ``activity_flush_all`` flag: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, so incomplete buffers come too
FLUSH_FORCED = 1

_registered: KernelActivity | None = None
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class KernelInterval:
    """One kernel's execution on the GPU, in CUPTI's nanoseconds."""

    start_ns: int
    end_ns: int
    #: the kernel's name (``extern "C"`` names as written, C++ ones mangled); "" when not reported
    name: str = ""


class KernelActivity:
    """Collects CONCURRENT_KERNEL records between :meth:`start` and :meth:`stop`.

    CUPTI takes one set of buffer callbacks per process: the first collector registers them, and
    every later one shares that registration (:func:`collector`).
    """

    def __init__(self, module: Any) -> None:
        self._cupti = module
        self._records: list[KernelInterval] = []
        self._kind = module.ActivityKind.CONCURRENT_KERNEL
        module.activity_register_callbacks(self._buffer_requested, self._buffer_completed)

    def _buffer_requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities: Sequence[Any]) -> None:
        kind = int(self._kind)
        with _lock:
            for record in activities:
                if int(record.kind) != kind or not (record.start or record.end):
                    continue  # another kind, or no timestamps collected (CUPTI reports 0 and 0)
                self._records.append(
                    KernelInterval(
                        int(record.start),
                        int(record.end),
                        str(getattr(record, "name", "") or ""),
                    )
                )

    def start(self) -> None:
        """Forget earlier records and start collecting (raises CUPTI's error where it cannot)."""
        with _lock:
            self._records.clear()
        self._cupti.activity_enable(self._kind)

    def stop(self) -> list[KernelInterval]:
        """Flush CUPTI's buffers (after the host synchronized past the kernels), stop collecting, and
        return the kernels seen since :meth:`start`, in start order."""
        try:
            self._cupti.activity_flush_all(FLUSH_FORCED)
        finally:
            self._cupti.activity_disable(self._kind)
        with _lock:
            records, self._records = sorted(self._records, key=lambda r: r.start_ns), []
        return records


def collector() -> KernelActivity | None:
    """This process's kernel activity collector, or None without cupti-python (or when CUPTI refused
    the callbacks: another tool holds them)."""
    global _registered
    if _registered is None:
        try:
            _registered = KernelActivity(importlib.import_module("cupti.cupti"))
        except Exception:  # ImportError, an OSError from a missing libcupti, or a cuptiError
            return None
    return _registered


def busy_s(intervals: Sequence[KernelInterval]) -> float:
    """Seconds of the union of ``intervals``: the GPU's busy time, launch gaps and overlaps counted once."""
    total = 0
    end = None
    for interval in sorted(intervals, key=lambda r: r.start_ns):
        if end is None or interval.start_ns > end:
            total += interval.end_ns - interval.start_ns
            end = interval.end_ns
        elif interval.end_ns > end:
            total += interval.end_ns - end
            end = interval.end_ns
    return total / 1e9
