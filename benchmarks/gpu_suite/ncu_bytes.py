"""DRAM bytes as Nsight Compute counts them, beside the plugin's, for three of the example project's
CuPy kernels (saxpy, the fused layernorm, the tiled transpose) at the example suite's sizes.

    python3 benchmarks/gpu_suite/ncu_bytes.py [--out DIR]

It runs itself under ``ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum`` (``--launch``: each
kernel launched twice, the last launch counted; ncu flushes the caches before each profiled kernel by
default, so the counts are cold, as the plugin's bytes are) and prints, per kernel, the plugin's bytes
(the op's, from the catalogue) and the part of them read, ncu's DRAM reads and writes, and the two
ratios. Reads are the trustworthy half: a kernel's dirty lines may be written back after it ends, so
its DRAM writes can read low.

Exit status 0 when the table was printed (the ratios are evidence, not a verdict), 1 when ncu failed
or counted none of the three kernels, 77 when ncu is not on the PATH (``gpu_run.sh``: skipped).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "example_project"))

METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
#: what ncu may take, all launches profiled (seconds)
NCU_TIMEOUT_S = 120


@dataclass(frozen=True)
class Probe:
    """One example kernel: how to launch it, the name ncu reports, and the plugin's op for it."""

    name: str
    kernel: str  # the CUDA kernel's name, as ncu prints it
    op: str
    params: dict[str, int]
    #: the bytes of the op's roofline count that are read (the rest are written), fp32
    read_bytes: int
    launch: Callable[[Any, Any], None]


def _probes() -> list[Probe]:
    from budgets import CUPY_TRANSPOSE_SHAPE, LAYERNORM_SHAPE, SAXPY_N

    rows, cols = LAYERNORM_SHAPE
    t_rows, t_cols = CUPY_TRANSPOSE_SHAPE

    def saxpy(cupy: Any, backend: Any) -> None:
        x, y = cupy.ones(SAXPY_N, cupy.float32), cupy.ones(SAXPY_N, cupy.float32)
        for _ in range(2):
            backend.saxpy(0.5, x, y)

    def layernorm(cupy: Any, backend: Any) -> None:
        x, out = cupy.ones((rows, cols), cupy.float32), cupy.empty((rows, cols), cupy.float32)
        gamma, beta = cupy.ones(cols, cupy.float32), cupy.zeros(cols, cupy.float32)
        for _ in range(2):
            backend.layernorm(x, gamma, beta, out)

    def transpose(cupy: Any, backend: Any) -> None:
        a, out = cupy.ones((t_rows, t_cols), cupy.float32), cupy.empty((t_cols, t_rows), cupy.float32)
        for _ in range(2):
            backend.transpose(a, out)

    return [
        Probe("saxpy", "saxpy_vec4", "elementwise", {"n": SAXPY_N, "inputs": 2, "outputs": 1},
              8 * SAXPY_N, saxpy),
        Probe("layernorm fused", "layernorm_fused", "layernorm", {"rows": rows, "cols": cols},
              4 * (rows * cols + 2 * cols), layernorm),
        Probe("transpose tiled", "transpose_tiled", "transpose", {"rows": t_rows, "cols": t_cols},
              4 * t_rows * t_cols, transpose),
    ]  # fmt: skip


def launch() -> None:
    """Under ncu: launch each kernel twice, then wait for the GPU."""
    import cupy
    from kernels import cupy_backend

    for probe in _probes():
        probe.launch(cupy, cupy_backend)
    cupy.cuda.Device().synchronize()


def parse(log: str) -> dict[tuple[str, str], float]:
    """(kernel, metric) -> bytes of the last launch of each kernel in ncu's ``--csv`` output."""
    from pytest_roofline.machine.selfcheck.ncu_clock import parse_launches

    return {
        (kernel, metric): value
        for _, kernel, metrics in parse_launches(log)
        for metric, value in metrics.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("."), help="where ncu's raw CSV and the JSON go")
    parser.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.launch:
        launch()
        return 0
    ncu = shutil.which("ncu")
    if ncu is None:
        print("no ncu on the PATH")
        return 77
    from pytest_roofline import estimate

    probes = _probes()
    raw = options.out / "ncu-bytes.csv"
    pattern = "regex:^(" + "|".join(p.kernel for p in probes) + ")$"
    command = [
        ncu, "--metrics", ",".join(METRICS), "--csv", "--print-units", "base", "--kernel-name", pattern,
        "--log-file", str(raw), sys.executable, __file__, "--launch",
    ]  # fmt: skip
    print(" ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=NCU_TIMEOUT_S, check=False)
    print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    counts = parse(raw.read_text(errors="replace") if raw.exists() else done.stdout)
    rows, data = [], []
    for probe in probes:
        plugin = estimate(probe.op, dtype="fp32", device="h100-sxm", **probe.params).bytes
        read = counts.get((probe.kernel, METRICS[0]))
        write = counts.get((probe.kernel, METRICS[1]))
        rows.append([
            probe.name, f"{plugin / 1e6:.1f}", f"{probe.read_bytes / 1e6:.1f}",
            "-" if read is None else f"{read / 1e6:.1f}", "-" if write is None else f"{write / 1e6:.1f}",
            "-" if read is None else f"{read / probe.read_bytes:.3f}",
            "-" if read is None or write is None else f"{(read + write) / plugin:.3f}",
        ])  # fmt: skip
        data.append({"kernel": probe.kernel, "plugin_bytes": plugin, "plugin_read_bytes": probe.read_bytes,
                     "ncu_read_bytes": read, "ncu_write_bytes": write})  # fmt: skip
    from tabulate import tabulate

    headers = [
        "kernel",
        "plugin MB",
        "plugin read MB",
        "ncu read MB",
        "ncu write MB",
        "read ratio",
        "total ratio",
    ]
    print(tabulate(rows, headers=headers, disable_numparse=True))
    (options.out / "ncu-bytes.json").write_text(json.dumps(data, indent=2))
    if done.returncode != 0 or all(entry["ncu_read_bytes"] is None for entry in data):
        counted = sum(entry["ncu_read_bytes"] is not None for entry in data)
        print(f"ncu exited {done.returncode} and counted {counted} of the {len(data)} kernels")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
