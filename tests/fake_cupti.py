"""A fake ``cupti.cupti`` (cupti-python) over a :class:`fake_cupy.FakeCupy` device.

It mirrors what ``pytest_roofline.timing.cupti`` calls (docs.nvidia.com/cupti-python, "Python
Bindings for CUPTI C APIs"): ``activity_register_callbacks(func_buffer_requested,
func_buffer_completed)``, ``activity_enable(kind)``, ``activity_disable(kind)``,
``activity_flush_all(flag)``, ``ActivityKind.CONCURRENT_KERNEL`` (10, as
``CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL``) and ``cuptiError``.

On a flush it hands ``func_buffer_completed`` one record per kernel the fake device ran since
``activity_enable``: the kernel's own (``("kernel", stream)`` entries of its log, a graph launch's
kernels each, named ``fake_kernel``) and the backend's too, as CUPTI reports every kernel of the
context: the L2 flush (``roofline_l2_flush``), the blocking and delay kernels (``roofline_block``,
``roofline_delay``). Each record has ``kind``, ``name``, ``start``, ``end`` (ns), ``device_id``,
``stream_id`` and ``correlation_id`` (cupti-python's attribute names): each kernel lasts
``kernel_ms`` and ``gap_ns`` of idle GPU (a launch gap) separates it from the next, which is what
CUPTI sees and an event pair around them does not.
"""

from __future__ import annotations

import enum
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
from fake_cupy import FakeCupy

#: the fake device's log entries that are kernels CUPTI records, with the record's name and count (a
#: graph launch counts its kernels)
_RECORDED = {
    "kernel": ("fake_kernel", 1),
    "launch": ("fake_kernel", 0),
    "flush": ("roofline_l2_flush", 1),
    "block": ("roofline_block", 1),
    "delay": ("roofline_delay", 1),
}


class ActivityKind(enum.IntEnum):
    MEMSET = 2
    KERNEL = 3
    CONCURRENT_KERNEL = 10


class FakeCupti:
    def __init__(self, world: FakeCupy, *, gap_ns: int = 5_000, refuse: bool = False) -> None:
        self.world = world
        self.gap_ns = gap_ns
        self.refuse = refuse
        self.calls: list[tuple[Any, ...]] = []
        #: every record handed to ``func_buffer_completed``
        self.handed: list[Any] = []
        self._requested: Callable[[], tuple[int, int]] | None = None
        self._completed: Callable[[list[Any]], None] | None = None
        self._since: int | None = None
        self._clock_ns = 1_000_000
        self._correlation = 0
        module = types.ModuleType("cupti.cupti")
        module.ActivityKind = ActivityKind

        class cuptiError(Exception):
            pass

        module.cuptiError = cuptiError
        module.activity_register_callbacks = self.activity_register_callbacks
        module.activity_enable = self.activity_enable
        module.activity_disable = self.activity_disable
        module.activity_flush_all = self.activity_flush_all
        self.module = module
        self.package = types.ModuleType("cupti")
        self.package.cupti = module

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeCupti:
        monkeypatch.setitem(sys.modules, "cupti", self.package)
        monkeypatch.setitem(sys.modules, "cupti.cupti", self.module)
        monkeypatch.setattr("pytest_roofline.timing.cupti._registered", None)
        return self

    def activity_register_callbacks(
        self,
        func_buffer_requested: Callable[[], tuple[int, int]],
        func_buffer_completed: Callable[[list[Any]], None],
    ) -> None:
        if self.refuse:
            raise self.module.cuptiError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        self.calls.append(("register",))
        self._requested, self._completed = func_buffer_requested, func_buffer_completed

    def activity_enable(self, kind: int) -> None:
        self.calls.append(("enable", int(kind)))
        if int(kind) == ActivityKind.CONCURRENT_KERNEL:
            self._since = len(self.world.log)

    def activity_disable(self, kind: int) -> None:
        self.calls.append(("disable", int(kind)))
        if int(kind) == ActivityKind.CONCURRENT_KERNEL:
            self._since = None

    def activity_flush_all(self, flag: int) -> None:
        self.calls.append(("flush", flag))
        if self._since is None or self._completed is None or self._requested is None:
            return
        size, _ = self._requested()
        assert size > 0
        records = []
        streams = {name: i for i, name in enumerate(self.world.streams_by_ptr)}
        for position, entry in enumerate(self.world.log[self._since :], start=self._since):
            name, count = _RECORDED.get(entry[0], ("fake_kernel", 0))
            if entry[0] == "launch":
                count = entry[2]
            # a kernel the fake times otherwise (the L2 roof's read, with ``l2_read_ms``) lasts as long here
            kernel_ms = self.world.kernel_times.get(position, self.world.kernel_ms)
            for _ in range(count):
                start = self._clock_ns + self.gap_ns
                end = start + int(kernel_ms * 1e6)
                self._clock_ns = end
                self._correlation += 1
                records.append(
                    types.SimpleNamespace(
                        kind=int(ActivityKind.CONCURRENT_KERNEL), name=name, start=start, end=end,
                        device_id=0, stream_id=streams.get(entry[1], -1), correlation_id=self._correlation,
                    )
                )  # fmt: skip
        self._since = len(self.world.log)
        self.handed.extend(records)
        self._completed(records)
