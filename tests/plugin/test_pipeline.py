"""The measurement pipeline without pytest: ``measure_call`` driven from plain objects, on a fake clock."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend, ScriptedBackend

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


def second_looks(
    monkeypatch: pytest.MonkeyPatch,
    attained: tuple[float, ...],
    *,
    remeasure: bool = True,
    suspect: Any = None,
) -> tuple[Result, list[float]]:
    """``measure_call`` of a kernel attaining ``attained[i]`` in its i-th measurement (on the scripted
    fake clock), and the budget each measurement was given."""
    from pytest_roofline.timing import engine

    budgets: list[float] = []
    real = engine.measure

    def spy(*args: Any, policy: Policy, **kwargs: Any) -> Any:
        budgets.append(policy.max_time_s)
        return real(*args, policy=policy, **kwargs)

    monkeypatch.setattr(engine, "measure", spy)
    devices = TableDevices(ScriptedBackend(tuple(FLOOR_S / a for a in attained), resolution_s=1e-9))
    result = measure_call(
        request(), KernelCall(lambda: None), devices=devices, state=state(), nodeid="t", remeasure=remeasure,
        suspect=suspect,
    )  # fmt: skip
    return result, budgets


def test_a_miss_is_measured_again_with_a_budget_of_its_own_and_the_better_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, budgets = second_looks(monkeypatch, (0.3, 0.8))
    assert budgets == [1.0, 1.0]  # no copies were made: the first had the whole budget too
    assert (result.measurements, result.verdict, result.remeasured) == (2, Verdict.PASS, True)
    assert result.attained == pytest.approx(0.8)


def test_no_second_look_in_report_mode_or_for_a_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    missed, budgets = second_looks(monkeypatch, (0.3, 0.8), remeasure=False)  # report mode
    assert (missed.measurements, missed.verdict, len(budgets)) == (1, Verdict.MISS, 1)
    passed, budgets = second_looks(monkeypatch, (0.9,))
    assert (passed.measurements, len(budgets)) == (1, 1)


def test_a_passing_result_the_gate_suspects_is_measured_again_and_the_better_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drop against the baseline that the machine caused for a moment does not last: before a
    regression is called, a second measurement is taken, and the better of the two stands."""
    suspected: list[float] = []

    def suspect(r: Result) -> bool:
        suspected.append(r.attained)
        return r.attained < 0.8

    r, _ = second_looks(monkeypatch, (0.75, 0.95), suspect=suspect)
    assert suspected == [pytest.approx(0.75)]
    assert (r.measurements, r.attained) == (2, pytest.approx(0.95))
    unsuspected, _ = second_looks(monkeypatch, (0.9,), suspect=lambda r: False)
    assert unsuspected.measurements == 1


def test_with_no_second_measurement_the_result_suspect_judged_is_the_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """So the record made of it for the gate's judgement is the test's one record (plugin/measurer.py)."""
    judged: list[Result] = []

    def suspect(r: Result) -> bool:
        judged.append(r)
        return False

    r, _ = second_looks(monkeypatch, (0.9,), suspect=suspect)
    assert judged == [r]
    assert judged[0] is r


def test_the_first_measurement_pays_for_the_copies_and_a_second_look_has_a_budget_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_roofline.timing.cache import CachePlan

    # the copies took 0.3 s of the 1 s budget: the first measurement gets the rest, the second (a
    # miss is doubted) the whole budget again
    monkeypatch.setattr(CachePlan, "made_s", property(lambda plan: 0.3))
    result, budgets = second_looks(monkeypatch, (0.3, 0.8))
    assert budgets == [pytest.approx(0.7), 1.0]
    assert result.measurements == 2
    assert result.wall_s >= 0.3  # what came before the first timing counts in the result's cost
