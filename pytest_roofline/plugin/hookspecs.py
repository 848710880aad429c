"""Hooks pytest-roofline calls, for conftest.py files and plugins.

Implement any of these in a ``conftest.py`` (or a plugin) by name; pytest finds them. Each comes
with an example that can be pasted into a ``conftest.py`` as it stands (the test suite does exactly
that). Built-in behaviour is an ordinary ``trylast`` implementation, so yours runs first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..model.core import Device
    from ..model.op_registry import OpSpec
    from ..model.verdict import Result
    from ..timing.base import Backend


@pytest.hookspec(historic=True)
def pytest_roofline_register_ops(config: pytest.Config, register: Callable[..., OpSpec]) -> None:
    """Add ops to the catalogue for this session; ``register`` takes ``register_op``'s arguments.

    Called once, at configure time (and for a ``conftest.py`` found later, when it is loaded). Ops
    registered here are removed again when the session ends; an op that replaced one of the same
    name (``replace=True``) gives the old one back. A mistake is a usage error. Example::

        from pytest_roofline import Cost, Param

        def pytest_roofline_register_ops(config, register):
            def xpos(p, size):
                '''xPos (a scaled rotary embedding): 3 FLOPs per element; x read, x written, cos/sin read.'''
                n = p["tokens"] * p["dim"]
                return Cost(flops=3 * n, bytes=(2 * n + p["dim"]) * size)

            register("xpos", [Param("tokens"), Param("dim")], xpos, flops="3·tokens·dim",
                     bytes="2·tokens·dim + dim")

    after which ``@pytest.mark.speed_of_light("xpos", tokens=4096, dim=128, dtype="bf16")`` works.
    """


@pytest.hookspec(historic=True)
def pytest_roofline_register_devices(config: pytest.Config, register: Callable[[Device], Device]) -> None:
    """Add devices to the table for this session; ``register`` takes a :class:`Device`.

    A GPU whose reported name is in a registered device's ``names`` is judged against its
    figures, and its key works as ``--roofline-device KEY`` and a marker's ``device=KEY`` (with a
    GPU of that name on this machine, or a ``pytest_roofline_device`` hook that serves the key).
    Registered devices are removed when the session ends. Example::

        from pytest_roofline import Device, Figure, Precision, Source, Unit

        def pytest_roofline_register_devices(config, register):
            register(Device(
                key="my-accel", name="My Accelerator 9000", kind="cuda",
                peaks={
                    (Precision.BF16, Unit.TENSOR): Figure(500e12, Source.USER),
                    (Precision.FP32, Unit.VECTOR): Figure(30e12, Source.USER),
                },
                bandwidth=Figure(2.0e12, Source.USER), names=("My Accelerator 9000",),
            ))
    """


@pytest.hookspec(firstresult=True)
def pytest_roofline_device(config: pytest.Config, spec: str) -> Device | None:
    """Pick the device whose ceilings judge measurements made with ``spec``; the first result wins.

    ``spec`` is ``--roofline-device`` (``auto`` by default) or a marker's ``device=``. Return
    None to let the next implementation (finally the built-in detection) decide. A
    ``--roofline-peaks`` file still overrides the figures of the device you return. Example::

        import os

        from pytest_roofline import get_device

        def pytest_roofline_device(config, spec):
            if spec == "auto" and os.environ.get("CI_GPU") == "a100":
                return get_device("a100-sxm-80gb")
            return None
    """


@pytest.hookspec(firstresult=True)
def pytest_roofline_backend(config: pytest.Config, device: Device, spec: str) -> Backend | None:
    """Provide the timer that measures on ``device``; the first result wins.

    Called once per device spec and session. The built-in implementation returns the host timer
    for ``cpu`` devices and CUDA events through CuPy otherwise. Return a subclass of
    :class:`pytest_roofline.timing.base.Backend` to time kernels another way (a PyTorch stream, a
    simulator, a fixed-resolution timer).

    It implements ``clock()`` (host seconds, for the time budget) and ``run(fn, args, *, calls,
    samples, flush)``, returning ``samples`` window times in seconds, each the total of ``calls``
    back-to-back calls, the cache flushed before each window when ``flush`` is true; and sets
    ``name``, ``device_name`` and ``resolution_s`` (the shortest window it times faithfully). The
    base class's other members are capabilities that do nothing until overridden: ``times_host``
    and the ``last_*`` readings (contention probes and the OS's counters beside the kernel),
    ``watch_clocks()``, ``on_stream(stream)`` (without it ``stream=`` fails the test),
    ``blocking(setting)``, ``latency_floor_s()``, ``flush_cache()``, ``prepare_flush()``,
    ``release_memory()``, ``flush_bytes`` and ``graph`` (docs/development.md).

    Example::

        from pytest_roofline.timing.cpu import CpuBackend

        def pytest_roofline_backend(config, device, spec):
            if device.kind == "cpu":
                # a known timer resolution: no probing of the clock at start-up
                return CpuBackend(resolution_s=1e-6)
            return None
    """


@pytest.hookspec
def pytest_roofline_result(item: pytest.Item, result: Result) -> None:
    """Called for every measurement (``roofline(...)``, ``roofline.measure(...)`` and marked tests).

    ``result`` is the frozen :class:`pytest_roofline.model.verdict.Result`; the call comes before the
    test passes or fails on it, in the process that runs the test (under pytest-xdist, a worker:
    the controller sees the results as records, in ``--roofline-report`` and ``--roofline-json``).
    Example: keep a log of attained fractions::

        def pytest_roofline_result(item, result):
            print(f"{item.nodeid}: {result.attained:.1%} of speed of light ({result.verdict})")
    """
