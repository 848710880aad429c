"""``benchmarks/gpu_run.sh`` without a GPU: every step skips or fails clearly, the summary has a line per
step, and the run is bounded (a hung step times out alone, a spent budget skips the rest). Also the
GPU suite's helpers that run on no GPU: ncu's CSV read, the JSON check."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO_ROOT

ROOT = REPO_ROOT
SCRIPT = ROOT / "benchmarks" / "gpu_run.sh"
SUITE = ROOT / "benchmarks" / "gpu_suite"
GPU_STEPS = (
    "nvidia_smi", "calibrate", "selfcheck", "llm", "decoder", "between_runs", "ab", "ncu_llm", "real_torch",
    "clocks_after", "example", "audit", "suite", "ncu", "launch_blocking", "sanitizer", "gpu_tests",
)  # fmt: skip
#: the script's own run here takes a second or two; this bounds a hang of the test itself
RUN_TIMEOUT_S = 60

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout"
)


def run(out: Path | None, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "ROOFLINE_RUN_GPU": "0",
        "ROOFLINE_RUN_NO_INSTALL": "1",
        "PYTHON": sys.executable,
    }
    environment.pop("OUT", None)
    environment.update(env)
    argv = ["bash", str(SCRIPT), *([str(out)] if out is not None else [])]
    return subprocess.run(
        argv, capture_output=True, text=True, env=environment, timeout=RUN_TIMEOUT_S, check=False
    )


def summary(out: Path) -> dict[str, str]:
    """Step name -> outcome, from summary.txt (``01-install   skipped: ...``)."""
    found = {}
    for line in (out / "summary.txt").read_text().splitlines():
        tag, outcome = line.split(maxsplit=1)
        found[tag.split("-", 1)[1]] = outcome
    return found


def test_without_a_gpu_every_gpu_step_is_skipped_saying_so_and_the_run_passes(tmp_path: Path) -> None:
    done = run(tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    steps = summary(tmp_path)
    assert list(steps) == ["install", "env", "nvidia_smi", "devices", *GPU_STEPS[1:], "digest"]
    assert steps["install"] == "skipped: ROOFLINE_RUN_NO_INSTALL=1: the checkout on PYTHONPATH instead"
    assert steps["env"].startswith("ok (")
    assert steps["devices"].startswith("ok (")
    for name in GPU_STEPS:
        assert steps[name] == "skipped: no GPU (ROOFLINE_RUN_GPU=0)"
    env_log = (tmp_path / "02-env.log").read_text()
    assert "python -m pytest_roofline: runs" in env_log
    assert f"pytest_roofline from {ROOT / 'pytest_roofline'}" in env_log
    assert (
        "pytest plugin: -p pytest_roofline.plugin" in env_log
        or "pytest plugin: the roofline entry point" in env_log
    )
    assert "roofline ops" not in (tmp_path / "04-devices.log").read_text()  # the table, not an error
    assert done.stdout.rstrip().endswith("gpu_run: no step failed")


def test_a_failing_and_a_hanging_step_cost_one_step_each_and_fail_the_run(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    # a python that hangs on --version (the env step) and fails the rest at once
    fake.write_text('#!/usr/bin/env bash\ncase "$*" in --version) sleep 30 ;; *) exit 3 ;; esac\n')
    fake.chmod(0o755)
    out = tmp_path / "out"

    done = run(out, PYTHON=str(fake), ROOFLINE_RUN_BUDGET_S="18")

    assert done.returncode == 1
    steps = summary(out)
    assert steps["env"] == "timed out (10 s)"  # python --version hangs: the step's own limit
    assert steps["devices"].startswith("skipped: out of time (")  # 18 s budget less the 10 spent
    assert steps["calibrate"] == "skipped: no GPU (ROOFLINE_RUN_GPU=0)"
    assert "gpu_run: 1 step(s) failed or timed out" in done.stdout


def test_a_failing_step_says_its_exit_status(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/usr/bin/env bash\nexit 3\n")
    fake.chmod(0o755)
    out = tmp_path / "out"

    done = run(out, PYTHON=str(fake))

    assert done.returncode == 1
    steps = summary(out)
    assert steps["env"].startswith("failed (rc 1, ")
    assert steps["devices"].startswith("failed (rc 3, ")


@pytest.mark.parametrize(
    ("out", "env", "message"),
    [
        (None, {}, "usage: bash benchmarks/gpu_run.sh OUT_DIR (or set OUT)"),
        ("out", {"ROOFLINE_RUN_BUDGET_S": "7min"}, "ROOFLINE_RUN_BUDGET_S must be a whole number of seconds"),
    ],
)
def test_bad_usage_is_exit_2(tmp_path: Path, out: str | None, env: dict[str, str], message: str) -> None:
    done = run(tmp_path / out if out else None, **env)

    assert done.returncode == 2
    assert message in done.stderr


def test_the_script_has_no_syntax_error() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """A gpu_suite helper script as a module (its sys.path edits undone after the test)."""
    monkeypatch.setattr(sys, "path", [*sys.path])

    def loader(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"gpu_suite_{name}", SUITE / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, spec.name, module)  # a dataclass looks its module up
        spec.loader.exec_module(module)
        return module

    return loader


NCU_HEADER = (
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
    "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
)  # fmt: skip


def ncu_row(launch: int, kernel: str, metric: str, unit: str, value: str) -> tuple[str, ...]:
    where = ("4242", "python3.12", "127.0.0.1")
    launch_config = ("1", "7", "(256, 1, 1)", "(2112, 1, 1)", "0", "9.0", "Command line profiler metrics")
    return (str(launch), *where, kernel, *launch_config, f"dram__bytes_{metric}.sum", unit, value)


def ncu_log() -> str:
    """What ``ncu --csv --log-file`` writes: its progress lines, then every metric of every launch quoted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerows([
        NCU_HEADER,
        ncu_row(0, "saxpy_vec4", "read", "byte", "67,108,864"),
        ncu_row(0, "saxpy_vec4", "write", "byte", "1,024"),
        ncu_row(1, "saxpy_vec4", "read", "Mbyte", "67.2"),  # the last launch counts, in any unit
        ncu_row(1, "layernorm_fused(const float *, float *)", "read", "byte", "33,587,200"),
    ])  # fmt: skip
    progress = '==PROF== Connected to process 4242 (/usr/bin/python3.12)\n==PROF== Profiling "saxpy_vec4"\n'
    return progress + buffer.getvalue()


def test_ncus_csv_is_read_last_launch_per_kernel_in_bytes(load: Callable[[str], ModuleType]) -> None:
    counts = load("ncu_bytes").parse(ncu_log())

    assert counts == {
        ("saxpy_vec4", "dram__bytes_read.sum"): pytest.approx(67.2e6),
        ("saxpy_vec4", "dram__bytes_write.sum"): 1024.0,
        ("layernorm_fused", "dram__bytes_read.sum"): 33_587_200.0,
    }


def test_the_json_check_flags_faster_than_light_and_a_missing_gpu_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], load: Callable[[str], ModuleType]
) -> None:
    def record(name: str, attained: float, backend: str) -> dict[str, object]:
        return {
            "nodeid": f"t.py::{name}", "backend": backend, "cache_state": "warm", "memory_level": "dram",
            "time_s": 1e-3, "attained": attained, "calibrated_floor_s": attained * 1e-3, "verdict": "pass",
            "op": "copy", "params": {"n": 1000}, "dtype": "fp32", "peak_precision": "fp32",
            "device": "h100-sxm",
        }  # fmt: skip

    check = load("check_json")
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"measurements": [record("ok", 0.8, "cuda")]}))
    fast = tmp_path / "fast.json"
    fast.write_text(json.dumps({"measurements": [record("fast", 1.7, "cpu")]}))

    assert check.main([str(good), "--require-backend", "cuda"]) == 0
    assert check.main([str(fast), "--require-backend", "cuda"]) == 1
    out = capsys.readouterr().out
    assert "faster than light: fast attained 1.700 (judged)" in out
    assert "no measurement was timed by the cuda backend: ['cpu']" in out
    assert check.main([str(tmp_path / "missing.json")]) == 2


def test_the_json_check_allows_for_a_peak_quoted_below_the_max_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], load: Callable[[str], ModuleType]
) -> None:
    """An H200 bf16 GEMM at 1980 MHz can attain 1.08 of the datasheet's 989.5 TFLOP/s, quoted at 1830:
    the judged column is faster than light above that ratio, as the plugin judges it; the at-datasheet
    column uses the plugin's figure (one datasheet figure in a run)."""
    from pytest_roofline.model.devices import lookup
    from pytest_roofline.output.records import DeviceRecord

    check = load("check_json")
    floor_s = 2 * 8192**3 / 989.5e12

    def record(name: str, attained: float) -> dict[str, object]:
        return {
            "nodeid": f"t.py::{name}", "backend": "cuda", "cache_state": "cold", "memory_level": "dram",
            "time_s": floor_s / attained, "attained": attained, "verdict": "pass", "op": "gemm",
            "params": {"M": 8192, "N": 8192, "K": 8192}, "dtype": "bf16", "peak_precision": "bf16",
            "unit": "tensor", "bound": "compute", "peak_flops": 989.5e12, "device": "h200",
        }  # fmt: skip

    devices = [DeviceRecord.of(lookup("h200")).to_json()]
    results = tmp_path / "suite.json"
    results.write_text(json.dumps({"measurements": [record("fast_clock", 1.07)], "devices": devices}))
    assert check.main([str(results)]) == 0
    assert check.figures(record("fast_clock", 1.07))["datasheet"] == pytest.approx(1.07)
    results.write_text(json.dumps({"measurements": [record("too_fast", 1.1)], "devices": devices}))
    assert check.main([str(results)]) == 1
    assert "faster than light: too_fast attained 1.100 (judged)" in capsys.readouterr().out


def test_the_json_check_holds_a_run_to_its_acceptance_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], load: Callable[[str], ModuleType]
) -> None:
    check = load("check_json")
    results = tmp_path / "suite.json"
    record = {
        "nodeid": "t.py::test_gemv[warm]", "backend": "cuda", "cache_state": "warm", "memory_level": "dram",
        "time_s": 2e-3, "attained": 0.9, "calibrated_floor_s": 1.8e-3, "verdict": "pass", "op": "copy",
        "params": {"n": 1000}, "dtype": "fp32", "peak_precision": "fp32", "device": "h100-sxm",
    }  # fmt: skip
    results.write_text(json.dumps({"measurements": [record]}))

    assert check.main([str(results), "--expect", "test_gemv[warm]@calibrated=0.85..1.05"]) == 0
    assert check.main([str(results), "--expect", "test_gemv[warm]@judged=0.95..1.0"]) == 1
    assert check.main([str(results), "--expect", "test_gemv[warm]@level=l2"]) == 1
    out = capsys.readouterr().out
    assert "expected test_gemv[warm]@judged=0.95..1.0: judged attained 0.900" in out
    assert "expected test_gemv[warm]@level=l2: judged against dram" in out
    with pytest.raises(SystemExit) as exit_:
        check.main([str(results), "--expect", "test_gemv within 5%"])
    assert exit_.value.code == 2


def test_the_json_check_holds_one_backend_s_tests_to_their_design(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], load: Callable[[str], ModuleType]
) -> None:
    """What GPU run 6 needed: the example's CUDA tests ended as designed, while a NumPy budget set on
    the 2-core reference VM missed on the GPU host's 16-core Xeon; only the named backend is judged."""
    check = load("check_json")

    def record(name: str, backend: str, verdict: str, xfailed: bool) -> dict[str, object]:
        return {
            "nodeid": f"t.py::{name}", "backend": backend, "cache_state": "cold", "memory_level": "dram",
            "time_s": 1e-3, "attained": 0.5, "verdict": verdict, "xfailed": xfailed, "op": "copy",
            "params": {"n": 1000}, "dtype": "fp32", "peak_precision": "fp32", "device": "h100-sxm",
        }  # fmt: skip

    results = tmp_path / "example.json"
    records = [
        record("good[cupy]", "cuda", "pass", False),
        record("bad[cupy]", "cuda", "MISS", True),
        record("good[numpy]", "cpu", "MISS", False),
    ]
    results.write_text(json.dumps({"measurements": records}))
    assert check.main([str(results), "--as-designed", "cuda"]) == 0
    assert check.main([str(results), "--as-designed", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "not as designed: good[numpy] (a good variant, designed to pass) ended MISS" in out

    records[1] = record("bad[cupy]", "cuda", "inconclusive", True)
    results.write_text(json.dumps({"measurements": records}))
    assert check.main([str(results), "--as-designed", "cuda"]) == 1
    assert "bad[cupy] (a bad variant, designed to miss) ended inconclusive" in capsys.readouterr().out


def test_the_calibrated_figure_is_at_the_faster_of_the_calibration_and_the_paired_ceiling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], load: Callable[[str], ModuleType]
) -> None:
    """GPU run 7: the host's CPU calibration was taken busy (1.31 TFLOP/s fp32), the probe beside a
    BLAS GEMM read 2.12 (speed 1.62), and the GEMM attained 1.053 of the stale calibrated floor: not
    faster than light, and the plugin, pairing, judged it at 0.649."""
    check = load("check_json")
    record = {
        "nodeid": "t.py::test_numpy_blas_gemm", "backend": "cpu", "cache_state": "cold",
        "memory_level": "dram", "time_s": 0.0015623475, "attained": 0.6492812798377842,
        "calibrated_floor_s": 0.0016454828148147905, "compute_s": 0.0016454828148147905,
        "memory_s": 0.00011495050588238887, "verdict": "pass", "xfailed": False, "op": "gemm",
        "params": {"M": 1024, "N": 1024, "K": 1024}, "dtype": "fp32", "peak_precision": "fp32",
        "device": "cpu", "ceiling": {"resource": "fp32", "speed": 1.6221194537070078},
    }  # fmt: skip
    results = tmp_path / "example.json"
    results.write_text(json.dumps({"measurements": [record]}))

    assert check.main([str(results)]) == 0
    assert check.figures(record)["calibrated"] == pytest.approx(0.649, abs=1e-3)
    stale = {**record, "ceiling": {"resource": "fp32", "speed": 0.9}}  # a slower machine: as calibrated
    assert check.figures(stale)["calibrated"] == pytest.approx(1.053, abs=1e-3)
    # only the bounding term is scaled, as the plugin does: memory here, 0.115 ms, stays
    paired_bandwidth = {**record, "ceiling": {"resource": "bandwidth", "speed": 100.0}}
    assert check.figures(paired_bandwidth)["calibrated"] == pytest.approx(1.053, abs=1e-3)
    far = {**record, "ceiling": {"resource": "fp32", "speed": 100.0}}
    assert check.figures(far)["calibrated"] == pytest.approx(0.00011495050588238887 / 0.0015623475)
    results.write_text(json.dumps({"measurements": [{**record, "ceiling": None}]}))
    assert check.main([str(results)]) == 1
    assert "faster than light: test_numpy_blas_gemm attained 1.053 (calibrated)" in capsys.readouterr().out


def test_a_failed_test_is_a_figure_only_when_it_is_another_backend_s_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], load: Callable[[str], ModuleType]
) -> None:
    """The example step tolerates a NumPy budget missed on the GPU host's CPU, never a CUDA test's own
    failure, a test that passed its budget and failed after, or one that left no record."""
    check = load("check_json")

    def record(name: str, backend: str, verdict: str) -> dict[str, object]:
        return {
            "nodeid": f"t.py::{name}", "backend": backend, "cache_state": "cold", "memory_level": "dram",
            "time_s": 1e-3, "attained": 0.5, "verdict": verdict, "xfailed": False, "op": "copy",
            "params": {"n": 1000}, "dtype": "fp32", "peak_precision": "fp32", "device": "h100-sxm",
        }  # fmt: skip

    results, failed = tmp_path / "example.json", tmp_path / "failed.txt"
    records = [record("good[cupy]", "cuda", "pass"), record("fused[numpy]", "cpu", "MISS")]
    records.append(record("checked[numpy]", "cpu", "pass"))
    results.write_text(json.dumps({"measurements": records}))
    args = [str(results), "--as-designed", "cuda", "--failed", str(failed)]

    failed.write_text("t.py::fused[numpy]\n")
    assert check.main(args) == 0
    assert "a figure here: t.py::fused[numpy] (cpu) ended MISS" in capsys.readouterr().out
    for other in ("t.py::good[cupy]", "t.py::checked[numpy]", "t.py::raised_early"):
        failed.write_text(f"t.py::fused[numpy]\n{other}\n")
        assert check.main(args) == 1
        assert f"failed: {other}" in capsys.readouterr().out
    assert check.main([*args[:-1], str(tmp_path / "none.txt")]) == 2
