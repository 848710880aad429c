"""The ``roofline`` command, through ``main(argv)`` and once as ``python -m pytest_roofline``."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from pytest_roofline import cli
from pytest_roofline.errors import InvalidValueError
from pytest_roofline.machine import cpupeak
from pytest_roofline.machine.cpupeak import CpuPeak
from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import table
from pytest_roofline.model.ops import all_ops, op_names

ROOT = REPO_ROOT
PEAK = CpuPeak(2, 4e9, "cpufreq max", "AVX2+FMA", 16, 32)
GEMM = ["floor", "gemm", "M=4096", "N=4096", "K=4096", "dtype=bf16", "--device", "h100-sxm"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code, out, err = run(capsys, *argv, "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


@pytest.fixture
def fake_cpu(monkeypatch: pytest.MonkeyPatch) -> Device:
    """``cpu`` and ``auto`` resolve to a made-up CPU, so nothing is calibrated and no GPU is looked for."""
    device = Device(
        key="cpu",
        name="Fake CPU",
        kind="cpu",
        peaks={(Precision.FP32, Unit.VECTOR): Figure(1e12, Source.MEASURED)},
        bandwidth=Figure(1e11, Source.MEASURED),
    )
    from pytest_roofline.machine import calibrate, detect

    monkeypatch.setattr(calibrate, "cpu_device", lambda **_: device)
    monkeypatch.setattr(detect, "auto_spec", lambda: "cpu")
    return device


# -- floor -------------------------------------------------------------------------------------


def test_floor_gemm_prints_the_napkin(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *GEMM)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "gemm[M=4096 N=4096 K=4096 bf16] on NVIDIA H100 80GB HBM3 (h100-sxm)"
    assert re.search(r"^  FLOPs\s+137 GFLOP$", out, re.M)
    assert re.search(r"^  bytes\s+101 MB$", out, re.M)
    assert re.search(r"^  intensity\s+1365 FLOP/byte$", out, re.M)
    assert re.search(
        r"^  ridge\s+295 FLOP/byte  = 989 TFLOP/s bf16 tensor \(datasheet\) / 3.35 TB/s \(datasheet\)$",
        out,
        re.M,
    )
    assert re.search(r"^  compute\s+138\.9 µs$", out, re.M)
    assert re.search(r"^  memory\s+30\.0\d* µs$", out, re.M)
    assert re.search(r"^  floor\s+138\.9 µs  compute-bound$", out, re.M)
    assert len(lines) == 8


def test_floor_elementwise_is_memory_bound(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "floor", "elementwise", f"n={4096 * 4096}", "dtype=bf16", "--device", "h100-sxm"
    )
    assert code == 0
    assert re.search(r"^  floor\s+20\.0\d* µs  memory-bound$", out, re.M)


def test_floor_shows_a_derived_peak_and_its_note(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "floor", "gemm", "M=64", "N=64", "K=64", "dtype=bf16", "--device", "v100-sxm2")
    assert code == 0
    assert "31.3 TFLOP/s bf16 vector (derived) [no bf16 vector figure; fp16 vector peak used]" in out


def test_floor_json(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, *GEMM)
    assert data["floor_s"] == pytest.approx(139e-6, rel=0.005)
    assert data["compute_s"] == data["floor_s"]
    assert data["memory_s"] == pytest.approx(30e-6, rel=0.005)
    assert {k: data[k] for k in ("op", "dtype", "math", "unit", "device", "bound", "peak_source")} == {
        "op": "gemm", "dtype": "bf16", "math": "bf16", "unit": "tensor", "device": "h100-sxm",
        "bound": "compute", "peak_source": "datasheet",
    }  # fmt: skip
    assert data["params"] == {"M": 4096, "N": 4096, "K": 4096, "batch": 1}
    assert (data["flops"], data["bytes"]) == (2 * 4096**3, 3 * 4096**2 * 2)
    assert data["intensity"] == pytest.approx(4096 / 3)
    assert data["ridge"] == pytest.approx(295.3, abs=0.1)
    assert (data["peak_flops"], data["bandwidth"]) == (pytest.approx(989.4e12), pytest.approx(3.35e12))
    assert (data["label"], data["device_name"], data["bandwidth_source"]) == (
        "gemm[M=4096 N=4096 K=4096 bf16]", "NVIDIA H100 80GB HBM3", "datasheet",
    )  # fmt: skip


def test_floor_json_infinite_intensity_is_null(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(
        capsys, "floor", "custom", "flops=1e12", "unit=tensor", "dtype=bf16", "--device", "h100-sxm"
    )
    assert data["intensity"] is None
    assert (data["bytes"], data["bound"], data["unit"]) == (0, "compute", "tensor")
    assert data["floor_s"] == pytest.approx(1e12 / 989.4e12)


def test_floor_math_tf32(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("floor", "gemm", "M=64", "N=64", "K=64", "dtype=fp32", "--device", "h100-sxm")
    ieee = run_json(capsys, *argv)
    tf32 = run_json(capsys, *argv, "--math", "tf32")
    assert (ieee["math"], ieee["unit"], ieee["peak_flops"]) == ("fp32", "vector", pytest.approx(66.9e12))
    assert (tf32["math"], tf32["unit"], tf32["peak_flops"]) == ("tf32", "tensor", pytest.approx(494.7e12))
    assert tf32["dtype"] == "fp32"
    assert tf32["bytes"] == ieee["bytes"] == 3 * 64 * 64 * 4


def test_floor_values_are_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(
        capsys, "floor", "attention", "batch=1", "heads=1", "seq_q=4", "seq_k=4", "head_dim=8", "causal=true",
        "dtype=fp16", "--device", "h100-sxm",
    )  # fmt: skip
    assert data["params"]["causal"] is True  # type: ignore[index]
    assert data["flops"] == 4 * 8 * 8  # avg_k = (0 + 4)/2 per query
    data = run_json(
        capsys, "floor", "elementwise", "n=10", "flops_per_element=2.5", "dtype=fp32", "--device", "t4"
    )
    assert data["flops"] == 25


def test_floor_reads_a_whole_number_written_with_an_exponent(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "floor", "gemm", "M=1e3", "N=1.024e3", "K=4E3", "dtype=fp32", "--device", "t4")
    assert data["params"] == {"M": 1000, "N": 1024, "K": 4000, "batch": 1}
    code, out, err = run(capsys, "floor", "gemm", "M=1.5e0", "N=4", "K=4", "dtype=fp32", "--device", "t4")
    assert (code, out, err) == (2, "", "roofline: error: gemm: M must be a positive integer; got 1.5\n")


def test_floor_by_the_name_the_driver_reports(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "floor", "copy", "n=1000", "dtype=fp32", "--device", "NVIDIA A100 80GB PCIe")
    assert data["device"] == "a100-pcie-80gb"
    assert data["floor_s"] == pytest.approx(8000 / 1935e9)


def test_floor_on_this_cpu(capsys: pytest.CaptureFixture[str], fake_cpu: Device) -> None:
    data = run_json(capsys, "floor", "copy", "n=1000", "dtype=fp32", "--device", "cpu")
    assert (data["device"], data["device_name"], data["bandwidth_source"]) == ("cpu", "Fake CPU", "measured")
    assert data["floor_s"] == pytest.approx(8000 / 1e11)


def test_floor_device_defaults_to_auto(capsys: pytest.CaptureFixture[str], fake_cpu: Device) -> None:
    # --device defaults to "auto" ("a table key, cpu, cuda[:N] or auto (default: auto)")
    code, out, err = run(capsys, "floor", "copy", "n=1000", "dtype=fp32", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["device_name"] == "Fake CPU"


def test_floor_device_cuda_without_a_gpu_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # --device accepts "cuda[:N]": with no GPU visible the error must say that, not "unknown device"
    from pytest_roofline.timing.cuda import loading

    monkeypatch.setattr(loading, "device_count", lambda: 0)
    code, out, err = run(capsys, "floor", "copy", "n=1000", "dtype=fp32", "--device", "cuda:0")
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "no such CUDA device" in err


# -- devices and ops ---------------------------------------------------------------------------


def test_ops_lists_every_op_with_its_parameters_and_formulas(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "ops")
    assert (code, err) == (0, "")
    # each op a block: its signature at the margin, then indented lines (wrapped at 100 columns)
    blocks: dict[str, str] = {}
    for line in out.splitlines():
        if line and not line.startswith(" ") and "(" in line and line.split("(")[0] in op_names():
            name = line.split("(")[0]
            blocks[name] = line
        elif line.startswith(" ") and blocks and not line.lstrip().startswith("- "):
            blocks[name] += " " + line.strip()
    assert sorted(blocks) == op_names()
    for spec in all_ops():
        block = " ".join(blocks[spec.name].split())
        assert f"{spec.name}({', '.join(map(str, spec.params))})" in block
        assert f"FLOPs: {' '.join(spec.flops_formula.split())}" in block
        assert f"bytes (× size of dtype): {' '.join(spec.bytes_formula.split())}" in block
        assert f"[{'tensor' if spec.matrix else 'vector'}; complex: " in block
    assert "gemm(M, N, K, batch=1" in blocks["gemm"]
    assert "--math tf32" in " ".join(out.split())
    assert max(map(len, out.splitlines())) <= 100
    # each source an item at one indent, wrapped or not (a wrapped one had moved right by two)
    items = [line for line in out.splitlines() if line.lstrip().startswith("- ")]
    assert items
    assert all(line.startswith("  - ") for line in items), [i for i in items if not i.startswith("  - ")]


@pytest.mark.parametrize(
    ("auto", "gpu", "starred", "footer"),
    [
        ("cpu", None, "cpu", "* = what --device auto resolves to here (cpu)."),
        ("cuda:0", "h100-sxm", "h100-sxm", "* = what --device auto resolves to here (cuda:0)."),
        (
            "cuda:0",
            None,
            None,
            "* = what --device auto resolves to here; cuda:0, a device the table does not know",
        ),
    ],
)
def test_devices_lists_the_table_and_stars_what_auto_is(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    auto: str,
    gpu: str | None,
    starred: str | None,
    footer: str,
) -> None:
    from pytest_roofline.machine import detect
    from pytest_roofline.model.devices import DeviceError, lookup
    from pytest_roofline.timing.cuda import device as cuda_dev

    def cuda_device(index: int) -> Device:
        if gpu is None:
            raise DeviceError("not in the table")
        return lookup(gpu)

    monkeypatch.setattr(detect, "auto_spec", lambda: auto)
    monkeypatch.setattr(detect, "parse_target", lambda spec: detect.Target(spec, "cuda", 0, True))
    monkeypatch.setattr(cuda_dev, "cuda_device", cuda_device)
    monkeypatch.setattr(cpupeak, "system_peak", lambda: PEAK)
    code, out, err = run(capsys, "devices")
    assert (code, err) == (0, "")
    rows = {line.split()[1 if line.startswith("*") else 0]: line for line in out.splitlines() if line.strip()}
    for key in table():
        assert key in rows
    assert "cpu" in rows
    assert [key for key, row in rows.items() if row.startswith("*") and key in (*table(), "cpu")] == (
        [starred] if starred else []
    )
    # the datasheet's figures as quoted, each tensor one with its rate at the 1980 MHz maximum clock
    h100 = r"NVIDIA H100 80GB HBM3\s+cuda\s+132\s+3.35 TB/s\s+50 MiB\s+33.5\s+66.9\s+494.7 \(535.2\)"
    h100 += r"\s+989.4 \(1070.5\)\s+1978.9 \(2141.1\)\s+-$"  # no fp4
    assert re.search(h100, rows["h100-sxm"])
    assert "0.49ᵈ" in rows["a10"]  # a derived cell keeps its mark
    assert re.search(r"\s-\s+-\s+-$", rows["v100-sxm2"])  # no bf16, no fp8, no fp4 tensor peak
    assert re.search(r"7.70 TB/s\s+126 MiB\s+40\s+80\s+1100\s+2250\s+4500\s+9000$", rows["b200"])
    assert re.search(r"\s256 MiB\s", rows["mi300x"])  # the Infinity Cache
    assert footer in out
    legend = out.rstrip().splitlines()[-1]  # the legend of the columns
    assert "LLC = the last-level cache cold measurements exceed (MI300-series: the Infinity Cache)" in legend
    assert legend.endswith(
        "ᵈ = derived; ? = unconfirmed; - = none; (n) = the rate at the maximum SM clock where the figure is"
        " quoted at a lower one, for the faster-than-light limit only."
    )
    assert re.search(r"\s45\?\s+90\?\s", rows["gb200"])  # unconfirmed figures say so
    assert (
        "\ncpu: measured by `roofline calibrate`; theoretical peak 2 cores × 4.00 GHz (cpufreq max) × "
        "16 fp64 FLOP/cycle (AVX2+FMA) = 128 GFLOP/s fp64, 256 GFLOP/s fp32.\n"
    ) in out


def test_devices_says_when_the_cpus_theoretical_peak_is_unknown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_roofline.machine import detect

    monkeypatch.setattr(detect, "auto_spec", lambda: "cpu")
    monkeypatch.setattr(cpupeak, "system_peak", lambda: "not derived on darwin (Linux only)")
    code, out, err = run(capsys, "devices")
    assert (code, err) == (0, "")
    assert (
        "\ncpu: measured by `roofline calibrate`; theoretical peak unknown (not derived on darwin "
        "(Linux only)).\n"
    ) in out


def test_calibrate_shows_the_cpus_theoretical_peak(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fake_cpu: Device
) -> None:
    from pytest_roofline.machine import calibrate

    cal = calibrate.Calibration(fake_cpu, None, True, 0.01)
    monkeypatch.setattr(calibrate, "calibrate_cpu", lambda force, reset: cal)
    monkeypatch.setattr(cpupeak, "system_peak", lambda: PEAK)
    code, out, err = run(capsys, "calibrate")
    assert (code, err) == (0, "")
    assert (
        "\ntheoretical  128 GFLOP/s fp64, 256 GFLOP/s fp32  (2 cores × 4.00 GHz (cpufreq max) × "
        "16 fp64 FLOP/cycle (AVX2+FMA))\n"
    ) in out


# -- bad input: one line on stderr, exit 2, no traceback ---------------------------------------


BAD: list[tuple[list[str], str]] = [
    (["floor", "gemn", "M=1", "N=1", "K=1", "dtype=bf16", "--device", "h100-sxm"], "unknown op 'gemn'"),
    (["floor", "gemm", "M=1", "N=1", "K=1", "--device", "h100-sxm"], "gemm needs dtype=..."),
    (["floor", "gemm", "M=1", "N=1", "dtype=bf16", "--device", "h100-sxm"], "gemm needs K"),
    (["floor", "gemm", "M4096", "N=1", "K=1", "dtype=bf16"], "expected key=value, got 'M4096'"),
    (["floor", "gemm", "M=", "N=1", "K=1", "dtype=bf16"], "expected key=value, got 'M='"),
    (["floor", "gemm", "=1", "N=1", "K=1", "dtype=bf16"], "expected key=value, got '=1'"),
    (["floor", "gemm", "M=1", "M=2", "N=1", "K=1", "dtype=bf16"], "M is given twice"),
    (["floor", "gemm", "M=1", "N=1", "K=1", "dtype=bf16", "--device", "h100-smx"],
     "unknown device 'h100-smx' (did you mean 'h100-sxm'?)"),
    (["floor", "gemm", "M=1", "N=1", "K=1", "dtype=fp32", "--device", "h100-sxm", "--math", "fast"],
     "argument --math: invalid choice: 'fast'"),
    (["floor", "gemm", "M=1", "N=1", "K=1", "dtype=bf16", "--device", "h100-sxm", "--math", "tf32"],
     "math='tf32' applies to fp32 (or complex64) data only; dtype is bf16"),
    (["floor", "gemm", "M=1", "N=1", "K=1", "dtype=bf17", "--device", "h100-sxm"], "unknown dtype 'bf17'"),
    (["floor", "gemm", "M=1", "N=1", "K=1", "dtype=8", "--device", "h100-sxm"], "unknown dtype '8'"),
    (["floor", "gemm", "M=2.5", "N=1", "K=1", "dtype=bf16", "--device", "h100-sxm"],
     "gemm: M must be a positive integer; got 2.5"),
    (["floor", "gemm", "M=0", "N=1", "K=1", "dtype=bf16", "--device", "h100-sxm"],
     "gemm: M must be a positive integer; got 0"),
    (["floor", "gemm", "M=1", "N=1", "K=1", "k=1", "dtype=bf16", "--device", "h100-sxm"],
     "gemm has no parameter 'k' (did you mean 'K'?)"),
    (["floor", "conv2d", "N=1", "C=1", "H=2", "W=2", "K=1", "R=3", "S=3", "dtype=fp16", "--device", "t4"],
     "conv2d: the filter (R=3) does not fit in H=2"),
    (["floor", "custom", "dtype=fp16", "--device", "h100-sxm"], "custom needs flops or bytes"),
    (["floor"], "the following arguments are required: op"),
    (["floor", "gemm", "M=1", "--bogus"], "unrecognized arguments: --bogus"),
    (["flor"], "invalid choice: 'flor'"),
    (["calibrate", "--device", "h100-sxm"], "a table device has datasheet peaks"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(argv) for argv, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("roofline: error: ")
    assert message in err
    assert "Traceback" not in err


#: every command that writes a file, each output named in a folder that exists and takes no new file
WRITERS = [
    ["plot", "run.json", "-o", "/proc/out.svg"],
    ["llm", "llama-3-8b", "--plot", "/proc/out.svg"],
    ["merge", "shard.json", "-o", "/proc/out.json"],
    ["merge", "shard.json", "-o", "{tmp}/run.json", "--save", "/proc/out.json"],
    ["merge", "shard.json", "-o", "{tmp}/run.json", "--markdown", "/proc/out.md"],
    ["selfcheck", "--device", "cpu", "--json", "/proc/out.json"],
]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="a Linux /proc")
@pytest.mark.parametrize("argv", WRITERS, ids=[" ".join(argv[:2]) + " " + argv[-2] for argv in WRITERS])
def test_an_output_that_cannot_be_written_is_named_with_its_cause_before_anything_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str]
) -> None:
    """Issue 40: /proc was said not to exist, after the self-check had run (and exited 1)."""
    from pytest_roofline.machine.selfcheck import cpu_check

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("ran despite an output it cannot write")

    monkeypatch.setattr(cpu_check, "run_cpu", never)
    code, out, err = run(capsys, *(arg.format(tmp=tmp_path) for arg in argv))
    assert (code, out) == (2, "")
    assert err.startswith("roofline: error: ")
    assert err.rstrip().endswith("no file can be created in '/proc': No such file or directory")
    assert err.count("\n") == 1
    assert not list(tmp_path.iterdir())


def test_no_command_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("roofline: error: ")


@pytest.mark.parametrize("assignment", ["device=h100-sxm", "math=tf32", "op=gemm"])
def test_names_estimate_takes_given_as_key_value(capsys: pytest.CaptureFixture[str], assignment: str) -> None:
    # `floor gemm ... device=h100-sxm` collides with estimate()'s own keywords: it must be a clear
    # one-line error (or mean --device), never a TypeError traceback
    code, out, err = run(
        capsys, "floor", "gemm", "M=1", "N=1", "K=1", "dtype=fp32", assignment, "--device", "h100-sxm"
    )
    assert code in (0, 2)
    if code == 2:
        assert (out, err.count("\n")) == ("", 1)
        assert assignment.split("=")[0] in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["floor", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--device" in out
    assert "--math" in out


# -- helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("4096", 4096), ("-3", -3), ("1.5e9", 1_500_000_000), ("1e30", 10**30), ("2.5e-1", 0.25),
     ("0.25", 0.25), ("1000.0", 1000.0), ("1e400", float("inf")), ("true", True), ("False", False),
     ("TRUE", True), ("bf16", "bf16"), ("tensor", "tensor"), ("1e", "1e")],
)  # fmt: skip
def test_parse_value(text: str, value: object) -> None:
    parsed = cli.parse_value(text)
    assert parsed == value
    assert type(parsed) is type(value)


def test_parse_assignments() -> None:
    assert cli.parse_assignments(["M=4096", "dtype=bf16", "causal=false", "expr=a=b"]) == {
        "M": 4096, "dtype": "bf16", "causal": False, "expr": "a=b",
    }  # fmt: skip
    assert cli.parse_assignments([]) == {}
    with pytest.raises(InvalidValueError, match="M is given twice"):
        cli.parse_assignments(["M=1", "M=1"])


# -- python -m pytest_roofline -----------------------------------------------------------------


def _module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_roofline", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_python_dash_m_runs_the_command() -> None:
    result = _module(*GEMM)
    assert (result.returncode, result.stderr) == (0, "")
    assert re.search(r"floor\s+138\.9 µs  compute-bound", result.stdout)


def test_python_dash_m_bad_input_is_one_line() -> None:
    result = _module("floor", "gemn", "M=1", "dtype=bf16", "--device", "h100-sxm")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("roofline: error: unknown op 'gemn'")
    assert result.stderr.count("\n") == 1


def test_a_warning_is_one_line_on_stderr(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    def ops(args: object) -> str:
        warnings.warn("cache file corrupt: replaced", UserWarning, stacklevel=1)
        return "the ops"

    monkeypatch.setattr(cli, "ops_text", ops)
    code, out, err = run(capsys, "ops")
    assert (code, out, err) == (0, "the ops\n", "roofline: warning: cache file corrupt: replaced\n")


def test_devices_names_the_cpus_cache_levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.machine import calibrate
    from pytest_roofline.timing import host_caches
    from pytest_roofline.timing.host_caches import CacheInfo

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # not calibrated yet: what sysfs says
    monkeypatch.setattr(calibrate, "_cpu_memo", {})
    caches = (CacheInfo(1, 48 * 2**10, True), CacheInfo(3, 32 * 2**20, False))
    monkeypatch.setattr(host_caches, "cpu_caches", lambda root=None: caches)
    out = cli._devices(argparse.Namespace())
    levels = "l1 48 KiB per core, l3 32 MiB"
    assert (
        f"\nthis CPU's cache levels (sysfs): {levels}; `roofline calibrate` measures the capacity this"
        " process sees and their roofs.\n"
    ) in out


def test_devices_says_what_the_capacity_sweep_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.machine import calibrate
    from pytest_roofline.machine.cachelevels import level_details
    from pytest_roofline.machine.capacity import Sweep, capacity_details
    from pytest_roofline.model.core import CacheSize, Figure, Precision, Source, Unit

    found = (
        CacheSize(1, 48 * 2**10, None, per_core=True, found="unseen"),
        CacheSize(3, 480 * 2**20, 48 * 2**20),
    )
    details = {
        **capacity_details(Sweep((), found, 0.5, "past the l3's knee")),
        **level_details({"l3": (27e9, "")}),
    }
    ceilings = calibrate.Ceilings(
        bandwidth=Figure(13e9, Source.MEASURED),
        peaks={(p, Unit.VECTOR): Figure(1e11, Source.MEASURED) for p in (Precision.FP64, Precision.FP32)},
        details=details,
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(calibrate, "_cpu_memo", {})
    calibrate.calibrate_cpu(measure=lambda: ceilings, peak=None)  # an earlier `roofline calibrate`
    calibrate._cpu_memo.clear()
    out = cli._devices(argparse.Namespace())
    assert (
        "\nthis CPU's cache levels: l1: 48 KiB per core (sysfs), not seen by the capacity sweep: not used;"
        " l3: 480 MiB (sysfs), 48 MiB effective, 27.0 GB/s.\n"
    ) in out


# -- roofline compare's bad input ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json", "{good}"], "baseline missing.json: no such file"),
        (["{good}", "missing.json"], "compared missing.json: no such file"),
        (
            ["{good}", "{good}", "--threshold", "-5%"],
            "argument --threshold: expected a drop such as 10%*; got '-5%'",
        ),
        (["{bad}", "{good}"], "baseline *bad.json: not JSON (Expecting value, line 1)"),
        (["{good}", "{good}", "--threshold", "5"], "argument --threshold: expected a drop such as 10%*"),
        (["{good}"], "the following arguments are required: new"),
    ],
)
def test_roofline_compare_of_any_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"schema": 2, "measurements": []}))
    bad.write_text("")
    assert cli.main(["compare", *(a.format(good=good, bad=bad) for a in args)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    pytest.LineMatcher(err.splitlines()).fnmatch_lines([f"roofline: error: {message}"])
