"""Nsight Compute beside the plugin, for the LLM kernel set (``llm_cases.py``): each case's DRAM reads
and writes and its tensor-core operations against the catalogue's bytes and FLOPs, and each kernel's
duration (``gpu__time_duration.sum``) beside the plugin's cold time from a ``--roofline-json`` report
of ``test_gpu_llm.py`` (the second clock for short kernels).

    python3 benchmarks/gpu_suite/ncu_llm.py --out DIR [--json suite.json] [--only NAME ...]

It runs itself under ``ncu`` (``--clock-control none``: the clocks the plugin saw, not ncu's locked
base clock; ``--cache-control all``, ncu's default: caches flushed before each profiled kernel, so its
bytes and times are cold, as the plugin's are; ``--profile-from-start off``: only the launches after
``torch.cuda.profiler.start()``, not the arrays' making). Each case's profiled calls are preceded by
one launch of a marker kernel, so the kernels between two markers are one call's (the self-check's
``ncu_clock.per_call``); every case is called once before the profile starts (compilation, cuBLAS's
heuristics). Tensor metrics are :data:`TENSOR`'s where this ncu offers them for the GPU (``ncu
--query-metrics``), summed over a call's kernels.

Prints one table per question and writes DIR/ncu-llm.json. Exit status 0 when the tables were printed
(the ratios are evidence, not a verdict), 1 when ncu failed or counted no case, 77 without ncu.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

BASE_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
#: calls of each case profiled (each a marker, then the case's kernels)
CALLS = 2
#: the tensor-pipe counters asked for, where this ncu offers them (all of them, 31 on an H200, made
#: the first run's profile outlast its 150 s)
TENSOR = ("bf16_dst_fp32", "fp16", "fp8", "tf32_dst_fp32")
NCU_TIMEOUT_S = 240
#: a kernel ncu times this close to the plugin's time (5%, or 0.5 µs) agrees with it (issue 39, item 3)
AGREE_REL, AGREE_ABS_S = 0.05, 0.5e-6
SHORT_S = (2e-6, 100e-6)


def _selected(only: list[str]) -> list[Any]:
    from llm_cases import cases

    return [c for c in cases() if not only or any(o in c.name for o in only)]


def launch(only: list[str]) -> None:
    """Under ncu: every case called once, then CALLS times each, each call after a marker."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _roofline_case_marker(x_ptr):  # type: ignore[no-untyped-def]
        tl.store(x_ptr, 1)

    flag = torch.zeros(1, device="cuda", dtype=torch.int32)
    built = []
    for case in _selected(only):
        try:
            fn, args, kwargs = case.build(torch)
            fn(*args, **kwargs)
        except RuntimeError as exc:
            print(f"{case.name}: not built ({exc})", flush=True)
            continue
        built.append((case.name, fn, args, kwargs))
    _roofline_case_marker[(1,)](flag)  # compiled before the profile starts
    torch.cuda.synchronize()
    torch.cuda.profiler.start()  # ncu --profile-from-start off: only what follows is profiled
    for _name, fn, args, kwargs in built:
        for _ in range(CALLS):
            _roofline_case_marker[(1,)](flag)
            fn(*args, **kwargs)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print("cases:", json.dumps([name for name, *_ in built]), flush=True)


def tensor_metrics(ncu: str) -> list[str]:
    """This GPU's tensor-pipe operation counters, as ncu names them."""
    done = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=60, check=False)
    offered = {m.group(0) for m in re.finditer(r"^sm__ops_path_tensor_src_\w+", done.stdout, re.M)}
    wanted = [f"sm__ops_path_tensor_src_{kind}" for kind in TENSOR]
    return [f"{name}.sum" for name in wanted if name in offered]


def plugin_times(report: Path | None) -> dict[str, float]:
    """The plugin's time per case name, from a --roofline-json report of test_gpu_llm.py."""
    if report is None or not report.exists():
        return {}
    records = json.loads(report.read_text()).get("measurements", [])
    return {r["name"]: r["time_s"] for r in records if r.get("name") and r.get("time_s")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--json", type=Path, help="a --roofline-json report of test_gpu_llm.py")
    parser.add_argument("--only", nargs="*", default=[], help="cases whose names contain any of these")
    parser.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.launch:
        launch(options.only)
        return 0
    ncu = shutil.which("ncu")
    if ncu is None:
        print("no ncu on the PATH")
        return 77
    extra = tensor_metrics(ncu)
    print("tensor metrics:", ", ".join(extra) or "none offered", flush=True)
    raw = options.out / "ncu-llm.csv"
    command = [
        ncu,
        "--metrics",
        ",".join((*BASE_METRICS, *extra)),
        "--csv",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--log-file",
        str(raw),
        sys.executable,
        __file__,
        "--launch",
        "--only",
        *options.only,
    ]
    print(" ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=NCU_TIMEOUT_S, check=False)
    print(done.stdout[-4000:], done.stderr[-3000:], sep="\n")
    names_line = next((ln for ln in done.stdout.splitlines() if ln.startswith("cases: ")), "cases: []")
    names = json.loads(names_line.removeprefix("cases: "))
    from pytest_roofline.machine.selfcheck.ncu_clock import parse_launches, per_call

    calls = per_call(parse_launches(raw.read_text(errors="replace") if raw.exists() else ""), names, CALLS)
    times = plugin_times(options.json)
    return report(calls, times, extra, options.out, done.returncode)


def report(
    calls: dict[str, list[dict[str, Any]]],
    times: dict[str, float],
    extra: list[str],
    out: Path,
    returncode: int,
) -> int:
    from tabulate import tabulate

    from pytest_roofline import estimate

    rows, clock_rows, data = [], [], []
    for case in _selected([]):
        got = calls.get(case.name)
        if not got:
            continue
        est = estimate(case.op, dtype=case.dtype, device="h200", **case.params)
        read = statistics.median(c.get(BASE_METRICS[0], 0.0) for c in got)
        write = statistics.median(c.get(BASE_METRICS[1], 0.0) for c in got)
        duration = statistics.median(c.get(BASE_METRICS[2], 0.0) for c in got)
        tensor = statistics.median(sum(c.get(m, 0.0) for m in extra) for c in got)
        kernels = len(got[0]["kernels"])
        rows.append(
            [
                case.name,
                kernels,
                f"{est.bytes / 1e6:.2f}",
                f"{(read + write) / 1e6:.2f}",
                f"{(read + write) / est.bytes:.3f}",
                f"{read / 1e6:.2f}",
                f"{write / 1e6:.2f}",
                f"{est.flops / 1e9:.3f}" if est.unit.value == "tensor" else "-",
                f"{tensor / est.flops:.3f}" if est.unit.value == "tensor" and est.flops and tensor else "-",
            ]
        )
        plugin = times.get(case.name)
        if plugin is not None and SHORT_S[0] <= plugin <= SHORT_S[1]:
            gap = plugin - duration
            agree = abs(gap) <= max(AGREE_REL * duration, AGREE_ABS_S)
            clock_rows.append(
                [
                    case.name,
                    kernels,
                    f"{plugin * 1e6:.2f}",
                    f"{duration * 1e6:.2f}",
                    f"{plugin / duration:.3f}" if duration else "-",
                    "yes" if agree else "NO",
                ]
            )
        data.append(
            {
                "case": case.name,
                "op": case.op,
                "kernels": got[0]["kernels"],
                "catalogue_bytes": est.bytes,
                "catalogue_flops": est.flops,
                "ncu_read_bytes": read,
                "ncu_write_bytes": write,
                "ncu_tensor_ops": tensor,
                "ncu_duration_s": duration,
                "plugin_time_s": plugin,
                "note": case.note,
            }
        )
    print("\nDRAM bytes and tensor operations, ncu (cold, one call, median of 3) against the catalogue")
    print(
        tabulate(
            rows,
            headers=[
                "case",
                "kernels",
                "catalogue MB",
                "ncu MB",
                "ratio",
                "read MB",
                "write MB",
                "catalogue GFLOP",
                "ncu tensor / FLOPs",
            ],
            disable_numparse=True,
        )
    )
    print(
        "\nShort kernels (2-100 µs): the plugin's cold median beside ncu's gpu__time_duration (median of 3)"
    )
    print(
        tabulate(
            clock_rows,
            headers=["case", "kernels", "plugin µs", "ncu µs", "ratio", "within 5% or 0.5 µs"],
            disable_numparse=True,
        )
    )
    (out / "ncu-llm.json").write_text(json.dumps({"tensor_metrics": extra, "cases": data}, indent=2))
    if returncode != 0 or not data:
        print(f"ncu exited {returncode} and counted {len(data)} cases")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
