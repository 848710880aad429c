"""A cold measurement in graph mode, on the fake (``fake_cupy.py``): every window replays the graph it
captured, so the rotation is captured whole (one call per copy) or flushed instead, and a flush alone
is never a captured window of nothing (issues 27 and 28)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from fake_cupy import FakeCupy

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cache import CachePlan
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.engine import MAX_GRAPH_COPIES, measure
from pytest_roofline.timing.rotation import Rotation, _Rotating

FAST = Policy(warmup_s=0, warmup_calls=1, min_samples=5, max_time_s=0.5)


pytestmark = pytest.mark.usefixtures("no_profiler")


def rotation_of(fake: FakeCupy, copies: int) -> tuple[Rotation, list[int]]:
    """A rotation of ``copies`` fake arrays for ``fake.kernel``, and the arrays' pointers."""
    arrays = [fake.cupy.empty(1 << 20, dtype=np.uint8) for _ in range(copies)]
    calls = [functools.partial(fake.kernel, a) for a in arrays]
    rotation = Rotation(kernel=_Rotating(calls, []), copies=copies, set_bytes=1 << 20)
    return rotation, [a.data.ptr for a in arrays]


def test_every_timed_replay_reads_every_rotated_copy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # FlashInfer #4468: a graph of fewer calls than the rotation's copies replays the same few, warm
    fake = FakeCupy().install(monkeypatch)
    rotation, ptrs = rotation_of(fake, 64)

    backend = CudaBackend(graph=True, block="off")
    m = measure(fake.kernel, policy=FAST, backend=backend, cache=CachePlan("rotation", rotation=rotation))

    timed = fake.replays[-len(m.samples_s) :]
    assert all(sorted(replay) == sorted(ptrs) for replay in timed)
    assert m.calls_per_sample == 64
    assert m.cold_method == "rotation"
    assert "each graph replay calls every copy once" in m.cache_note


def test_a_cycle_too_long_to_capture_is_flushed_before_every_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy().install(monkeypatch)
    rotation, _ = rotation_of(fake, MAX_GRAPH_COPIES + 1)
    data = fake.cupy.empty(1 << 20, dtype=np.uint8)

    m = measure(
        fake.kernel,
        data,
        policy=FAST,
        backend=CudaBackend(graph=True, block="off"),
        cache=CachePlan("rotation", rotation=rotation),
    )

    assert m.cold_method == "flush"
    assert m.rotation_copies == 0
    assert f"{MAX_GRAPH_COPIES + 1} copies are too many to capture into one graph" in m.cache_note
    assert fake.count("flush") >= len(m.samples_s)


def test_a_flush_alone_in_graph_mode_captures_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # a long rotated kernel: the rest of the untimed cycle would cost too much, so one flush stands in
    fake = FakeCupy(kernel_ms=20.0).install(monkeypatch)
    rotation, _ = rotation_of(fake, 64)
    backend = CudaBackend(graph=True, block="off")

    m = measure(fake.kernel, policy=FAST, backend=backend, cache=CachePlan("rotation", rotation=rotation))

    assert "a flush instead of the untimed first cycle" in m.cache_note
    assert fake.count("flush") == 1
    assert all(kernels > 0 for _, _, kernels in fake.entries("launch"))  # no graph of nothing
