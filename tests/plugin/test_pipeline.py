"""The measurement pipeline without pytest: ``measure_call`` driven from plain objects, on a fake clock."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from pytest_roofline.errors import RooflineError
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.verdict import Result, Verdict
from pytest_roofline.plugin import pipeline
from pytest_roofline.plugin.gate import Gate
from pytest_roofline.plugin.options import SessionSettings
from pytest_roofline.plugin.pipeline import measure_call
from pytest_roofline.plugin.request import Request
from pytest_roofline.plugin.run_state import RunState
from pytest_roofline.timing.calls import KernelCall

#: fp32 copy of 2**24 elements: 128 MB moved, past an H100's 50 MB L2, so measured without flushes
N = 1 << 24
FLOOR_S = 2 * 4 * N / 3.35e12


class TableDevices:
    """What the pipeline asks of the run's devices, answered from the device table and one backend."""

    measured_cpu = False

    def __init__(self, backend: FakeBackend) -> None:
        self._backend = backend
        self.locked: list[str] = []

    def device(self, spec: str) -> Any:
        return lookup(spec)

    def with_cache_levels(self, spec: str) -> Any:
        return lookup(spec)

    def backend(self, spec: str, device: object) -> FakeBackend:
        return self._backend

    @contextlib.contextmanager
    def measuring(self, spec: str) -> Iterator[None]:
        self.locked.append(spec)
        yield


def state() -> RunState:
    settings = SessionSettings(
        report=False, json=None, device="h100-sxm", min_fraction=0.5, mode="enforce", stat="median",
        max_time=1.0, cache="cold", peaks="table", latency_floor="off",
    )  # fmt: skip
    return RunState(settings, Gate(settings, reporting=False))


def request(**overrides: Any) -> Request:
    fields: dict[str, Any] = {
        "op": "copy", "params": {"n": N}, "dtype": "fp32", "math": None, "min_fraction": 0.5,
        "device_spec": "h100-sxm", "policy": Policy(max_time_s=1.0), "name": "",
    }  # fmt: skip
    return Request(**(fields | overrides))


def measured(call: Request, devices: Any, **how: Any) -> Result:
    """``measure_call`` of an empty kernel, as a plain program would make it."""
    kernel = KernelCall(lambda: None)
    return measure_call(call, kernel, devices=devices, state=state(), nodeid="t", remeasure=False, **how)


def test_the_pipeline_module_imports_no_pytest() -> None:
    tree = ast.parse(Path(pipeline.__file__).read_text(encoding="utf-8"))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in [*names, *modules] if m and m.split(".")[0] in ("pytest", "_pytest", "pluggy")]


@pytest.mark.parametrize(("slower", "verdict"), [(1.05, Verdict.PASS), (4, Verdict.MISS)])
def test_measure_call_times_and_judges_a_call_outside_a_test_run(slower: float, verdict: Verdict) -> None:
    duration_s = FLOOR_S * slower
    devices = TableDevices(FakeBackend(duration_s, resolution_s=1e-9))
    result = measured(request(), devices)
    assert result.verdict is verdict
    assert result.time_s == pytest.approx(duration_s)
    assert result.estimate.floor_s == pytest.approx(FLOOR_S)
    assert devices.locked == ["h100-sxm"]  # the window held the device


def test_a_steps_error_propagates_as_raised_unless_the_caller_says_how_it_fails() -> None:
    devices = TableDevices(FakeBackend(FLOOR_S))
    call = request(stream=object())  # a stream, for a backend that times none
    with pytest.raises(ValueError, match="times no CUDA stream"):
        measured(call, devices)
    caught: list[tuple[type[Exception], ...]] = []

    class Recording:
        def __init__(self, *errors: type[Exception]) -> None:
            self.errors = errors

        def __enter__(self) -> None:
            return None

        def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> bool:
            if isinstance(exc, self.errors):
                caught.append(self.errors)
                raise RuntimeError(f"failed: {exc}") from None
            return False

    with pytest.raises(RuntimeError, match="failed: stream="):
        measured(call, devices, failing_the_test=Recording)
    assert caught == [(RooflineError,)]  # only the plugin's own errors are the test's failure


def test_rotations_copies_are_made_inside_the_devices_window_and_dropped_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np

    from pytest_roofline.timing import rotation

    monkeypatch.setattr(rotation, "CYCLE_MULTIPLE", 0)  # a cycle of 1 MiB: the rules, few copies
    monkeypatch.setattr(rotation, "MIN_CYCLE_MULTIPLE", 0)
    monkeypatch.setattr(rotation, "MIN_CYCLE_BYTES", 2**20)
    events: list[str] = []

    class Watched(TableDevices):
        @contextlib.contextmanager
        def measuring(self, spec: str) -> Iterator[None]:
            events.append("lock")
            yield
            events.append("unlock")

    def release(self: rotation.Rotation) -> None:  # the copies' memory goes back here
        events.append("released")

    real_plan = rotation.plan_rotation

    def plan_rotation(*args: Any, **kwargs: Any) -> Any:
        events.append("copies")
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(rotation.Rotation, "release", release)
    monkeypatch.setattr("pytest_roofline.timing.cache.plan_rotation", plan_rotation)
    x, y = np.ones(2**16, dtype=np.float32), np.empty(2**16, dtype=np.float32)
    call = request(params={"n": 2**16})
    kernel = KernelCall(np.copyto, (y, x))
    result = measure_call(
        call, kernel, devices=Watched(FakeBackend(1e-6)), state=state(), nodeid="t", remeasure=False
    )
    assert result.measurement.cold_method == "rotation"
    assert events == ["lock", "copies", "released", "unlock"]
