"""``benchmarks/gpu_selfcheck.py --fake``: the self-check with the example project's CuPy kernels runs
end to end on the fakes, so its first real run cannot die of a Python error (here a few cases, for
speed; CI runs ``roofline selfcheck --fake``)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_selfcheck.py"


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for name in ("CUDA_LAUNCH_BLOCKING", "CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("pytest_roofline.machine.selfcheck.gpu_run._stderr", lambda line: None)
    monkeypatch.setattr(sys, "path", [*sys.path])  # the script prepends the checkout: undone after
    spec = importlib.util.spec_from_file_location("gpu_selfcheck", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_selfcheck", module)
    spec.loader.exec_module(module)
    return module


def test_the_example_kernels_run_through_the_self_check_on_the_fakes(
    script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "check.json"
    cases = [
        case for case in script.EXAMPLE_CASES if case.name in ("example saxpy stride 16", "example bias_relu")
    ]

    assert script.main(["--fake", "--json", str(out)], cases=cases) == 0

    data = json.loads(out.read_text())
    assert [kernel["kernel"] for kernel in data["kernels"]] == [case.name for case in cases]
    assert all("error" not in t for kernel in data["kernels"] for t in kernel["timers"].values())
    assert "verdict: agrees within 0.0%" in capsys.readouterr().out


def test_a_kernel_that_fails_on_the_fakes_fails_the_run(script: ModuleType) -> None:
    def broken(cupy: object) -> tuple[object, tuple[object, ...]]:
        raise AttributeError("the fake has no such call")

    assert script.main(["--fake"], cases=[script.GpuCase("broken", broken)]) == 1


def test_a_bad_device_is_exit_2(script: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert script.main(["--fake", "--device", "cpu"]) == 2
    assert "gpu_selfcheck: error: --fake runs the GPU self-check" in capsys.readouterr().err
