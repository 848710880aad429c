"""``benchmarks/gpu_selfcheck.py --fake``: the GPU self-check runs end to end on the fakes, so its first
real run cannot die of a Python error (CI runs the whole of it; here a few cases, for speed)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_selfcheck.py"


@pytest.fixture
def selfcheck(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for name in ("CUDA_LAUNCH_BLOCKING", "CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("pytest_roofline.timing.cuda.launch_latency._latency_floors", {})
    monkeypatch.setattr(sys, "path", [*sys.path])  # the script prepends the checkout: undone after
    spec = importlib.util.spec_from_file_location("gpu_selfcheck", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_selfcheck", module)
    spec.loader.exec_module(module)
    return module


def test_the_self_check_runs_on_the_fakes(
    selfcheck: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "check.json"
    cases = [
        case for case in selfcheck.CASES if case.name in ("short 4 KiB scale", "example saxpy stride 16")
    ]

    assert selfcheck.main(["--fake", "--json", str(out)], cases=cases) == 0

    data = json.loads(out.read_text())
    assert [row["case"] for row in data["rows"]] == [case.name for case in cases]
    assert all(not row["failed"] for row in data["rows"])
    assert {"engine warm", "engine block=on", "engine graph", "cupyx", "torch.cuda.Event"} <= set(
        data["rows"][0]["median_s"]
    )
    assert "latency floor, graph mode" in capsys.readouterr().out


def test_a_timer_that_fails_on_the_fakes_fails_the_run(selfcheck: ModuleType) -> None:
    def broken(cupy: object) -> tuple[object, tuple[object, ...]]:
        raise AttributeError("the fake has no such call")

    assert selfcheck.main(["--fake"], cases=[selfcheck.Case("broken", broken)]) == 1
