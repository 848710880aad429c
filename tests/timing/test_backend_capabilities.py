"""Backend capabilities (timing/base.py): one base class whose optional members do nothing until a
backend overrides them; the plugin's own backends override the ones they should, a third-party
backend gets each one it overrides, and the plugin calls them, never asking for a class."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from fake_cupy import FakeCupy
from fakes import FakeBackend

from pytest_roofline.errors import InvalidValueError
from pytest_roofline.timing.backend_latency import latency_floor_s
from pytest_roofline.timing.base import Backend
from pytest_roofline.timing.cpu import CpuBackend
from pytest_roofline.timing.cuda.backend import CudaBackend

#: the members a backend overrides where it has the capability
CAPABILITIES = (
    "watch_clocks", "on_stream", "blocking", "latency_floor_s", "flush_cache", "prepare_flush",
    "release_memory",
)  # fmt: skip


def has(backend: Backend) -> set[str]:
    overridden = {name for name in CAPABILITIES if getattr(type(backend), name) is not getattr(Backend, name)}
    return overridden | ({"times_host"} if backend.times_host else set())


def test_the_cpu_backend_reads_the_host_and_makes_and_reads_its_own_flush_buffer() -> None:
    assert has(CpuBackend(resolution_s=1e-6)) == {"times_host", "prepare_flush", "flush_cache"}


def test_the_cuda_backend_watches_clocks_takes_streams_and_holds_launches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeCupy().install(monkeypatch)
    assert {"watch_clocks", "on_stream", "blocking"} <= has(CudaBackend(block="off"))


def test_the_cuda_backend_also_releases_memory_flushes_alone_and_replays_graphs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeCupy().install(monkeypatch)
    assert has(CudaBackend(block="off")) == {
        "watch_clocks",
        "on_stream",
        "blocking",
        "flush_cache",
        "release_memory",
    }
    assert CudaBackend(block="off", graph=True).graph
    assert not CudaBackend(block="off").graph
    assert not CpuBackend(resolution_s=1e-6).graph


def test_a_backend_with_only_a_clock_and_windows_has_no_capability() -> None:
    backend = FakeBackend(1e-3)
    assert has(backend) == set()
    # each default does nothing, or what any backend can: a flush is a window of an empty call
    with backend.watch_clocks() as watcher, backend.blocking("on"), backend.on_stream(None):
        assert watcher is None
    assert backend.flush_bytes is None
    backend.flush_cache()
    assert backend.events == ["flush", "window"]
    with pytest.raises(InvalidValueError, match="which times no CUDA stream"):
        backend.on_stream(object())


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
    assert has(backend) == {"on_stream", "latency_floor_s"}
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


def test_a_backend_that_times_host_code_is_floored_at_an_empty_python_call() -> None:
    """Asked of what it does, not of its class: any backend that times host code gets the floor an
    empty Python call shows on it (here, flushed, timed through it: its scripted 7 µs)."""

    class Host(FakeBackend):
        times_host = True

    assert latency_floor_s(Host(7e-6, resolution_s=1e-7), flushed=True) == pytest.approx(7e-6)
