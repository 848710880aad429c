"""Backend capabilities (timing/base.py): the plugin's own backends have the ones they should, a
third-party backend gets each one it implements, and the plugin asks for a capability, never a class."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from fake_cupy import FakeCupy
from fakes import FakeBackend

from pytest_roofline.timing.backend_latency import latency_floor_s
from pytest_roofline.timing.base import (
    Backend,
    HoldsLaunches,
    HostReadings,
    MeasuresLatencyFloor,
    TakesStreams,
    WatchesClocks,
)
from pytest_roofline.timing.cpu import CpuBackend
from pytest_roofline.timing.cuda.backend import CudaBackend

CAPABILITIES = (HostReadings, WatchesClocks, TakesStreams, HoldsLaunches, MeasuresLatencyFloor)


def has(backend: Backend) -> set[str]:
    return {capability.__name__ for capability in CAPABILITIES if isinstance(backend, capability)}


def test_the_cpu_backend_reads_the_host_and_nothing_else() -> None:
    assert has(CpuBackend(resolution_s=1e-6)) == {"HostReadings"}


def test_the_cuda_backend_watches_clocks_takes_streams_and_holds_launches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeCupy().install(monkeypatch)
    assert has(CudaBackend(block="off")) == {"WatchesClocks", "TakesStreams", "HoldsLaunches"}


def test_the_cuda_backend_also_releases_memory_flushes_alone_and_replays_graphs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_roofline.timing.base import FlushesCache, ReleasesMemory, ReplaysGraphs

    FakeCupy().install(monkeypatch)
    backend = CudaBackend(block="off")
    assert isinstance(backend, ReleasesMemory)
    assert isinstance(backend, FlushesCache)
    assert isinstance(backend, ReplaysGraphs)
    assert not isinstance(CpuBackend(resolution_s=1e-6), (ReleasesMemory, FlushesCache, ReplaysGraphs))


def test_a_backend_with_only_the_protocol_has_no_capability() -> None:
    assert has(FakeBackend(1e-3)) == set()


class ThirdParty(FakeBackend):
    """A backend a plugin serves: it names its own latency floor and takes streams."""

    def __init__(self) -> None:
        super().__init__(1e-3)
        self.streams: list[object] = []

    def latency_floor_s(self, *, flushed: bool = False) -> float:
        return 5e-6 if flushed else 2e-6

    @contextlib.contextmanager
    def on_stream(self, stream: object | None) -> Iterator[ThirdParty]:
        self.streams.append(stream)
        yield self


def test_a_third_party_backend_gets_the_capabilities_it_implements() -> None:
    backend = ThirdParty()
    assert has(backend) == {"TakesStreams", "MeasuresLatencyFloor"}
    assert latency_floor_s(backend) == 2e-6
    assert latency_floor_s(backend, flushed=True) == 5e-6


def test_a_backend_without_a_latency_floor_has_none() -> None:
    assert latency_floor_s(FakeBackend(1e-3)) == 0.0


@pytest.mark.parametrize("module", ["session", "pipeline", "measurer", "outcome"])
def test_the_session_asks_for_capabilities_not_classes(module: str) -> None:
    from importlib import import_module
    from pathlib import Path

    path = import_module(f"pytest_roofline.plugin.{module}").__file__
    assert path is not None
    text = Path(path).read_text(encoding="utf-8")
    for asked in ("CpuBackend", "CudaBackend", 'backend.name == "', "getattr(backend"):
        assert asked not in text, f"plugin/{module}.py asks for {asked}"
