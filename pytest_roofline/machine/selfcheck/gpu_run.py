"""The GPU self-check as a whole: the kernels of :mod:`.gpu_check` under one NVML clock watcher, then the
latency floor, what the clocks did, and the measured ceilings against the device table."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...model.core import Device, Source
from ...model.units import byte_rate, flop_rate, seconds
from ...timing.cuda.backend import CudaBackend
from .compare import DISAGREES, Report, Verdict, compare, verdict
from .gpu_check import (
    CASES,
    COLD_FLOOR,
    ENGINE_TIMERS,
    GRAPH_FLOOR,
    MIN_JUDGED_S,
    WARM,
    WARM_FLOOR,
    GpuCase,
    rules,
    time_case,
)
from .interleave import ROUNDS
from .ncu_clock import Run, SecondClock, second_clocks
from .ncu_clock import lines as second_clock_lines

#: an empty kernel launch slower than this says launches are slow here (a VM, a MIG slice, a busy GPU)
LATENCY_EXPECTED_S = 10e-6
#: a measured ceiling over the datasheet's by more than this: the table or the measurement is wrong
ABOVE_DATASHEET = 1.05
#: one under this share of the datasheet's: the GPU ran throttled, or it is another model
BELOW_DATASHEET = 0.5


def run_gpu(
    index: int,
    cases: Sequence[GpuCase] | None = None,
    extra: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    calibration_dir: Path | None = None,
    rounds: int = ROUNDS,
    ncu: str | None = None,
    ncu_run: Run = subprocess.run,
) -> Report:
    """The self-check on GPU ``index``, each kernel's timers in ``rounds`` alternating rounds.
    ``extra``: PyTorch and ``do_bench`` (default: those installed, :func:`.gpu_check.optional_timers`);
    ``calibration_dir``: where the ceilings are cached (default: the user's cache); ``ncu``: Nsight
    Compute's path, for the second clock (:mod:`.ncu_clock`, run by ``ncu_run``), None for none."""
    import cupy
    from cupyx.profiler import benchmark

    from ...timing.cuda.device import cuda_device
    from ...timing.cuda.launch_latency import latency_floor
    from .gpu_check import optional_timers

    say = progress or _stderr
    cases = CASES if cases is None else cases
    extra = optional_timers() if extra is None else extra
    backend = CudaBackend(index)
    table_device = cuda_device(index)
    others = ["cupyx.profiler.benchmark", *(["torch.cuda.Event"] if "torch" in extra else [])]
    others += ["triton do_bench"] if "do_bench" in extra else []
    header = [
        f"self-check on cuda:{index}: {backend.device_name} (CuPy {cupy.__version__})",
        f"engine timer: {backend.timer_note}",
        f"blocking kernel: {'on' if backend.block else 'off (' + backend.block_note + ')'}",
        f"other timers: {', '.join(others)}, in {rounds} alternating rounds; each ratio is the median"
        f" over the rounds of a timer's figure over the engine's in the same round ({WARM}'s for warm"
        " timers)",
        f"noise: the 95% interval of that median, from the paired ratios; floors warm {WARM_FLOOR:.0%},"
        f" cold {COLD_FLOOR:.0%}, graph replay {GRAPH_FLOOR:.0%}; warm and cold kernels under"
        f" {MIN_JUDGED_S * 1e6:.0f} µs shown, not judged",
    ]
    say("measuring the latency floor ...")
    floor = latency_floor(index)
    graph_floor = latency_floor(index, graph=True)
    results = []
    with backend.watch_clocks(interval_s=0.1) as watcher:
        for case in cases:
            say(f"measuring {case.name} ...")
            results.append(time_case(case, index, cupy, benchmark, extra, rounds))
    say("calibrating (or reading the cached ceilings) ...")
    ceiling_lines, ceilings, ceiling_error = _ceilings(index, table_device, calibration_dir)
    judged_by = rules(
        backend.properties.l2_bytes or table_device.llc_bytes or 0, table_device.bandwidth.value
    )
    comparisons = compare(results, judged_by)
    found = verdict(results, comparisons, engine=ENGINE_TIMERS)
    clock_lines: list[str] = []
    clocks: list[SecondClock] = []
    if ncu is not None:
        say("timing the kernels again with ncu (the second clock) ...")
        # CUPTI times the kernels alone; events hold their own pair's time
        pair = (floor.event_pair_s or 0.0) if backend.timer != "cupti" else 0.0
        names = [case.name for case in cases]
        clocks, problems = second_clocks(index, names, results, ncu=ncu, event_pair_s=pair, run=ncu_run)
        clock_lines = second_clock_lines(clocks, problems)
        off = [clock.describe() for clock in clocks if clock.judged and not clock.agrees] + problems
        if off:
            prefix = found.line if found.status == DISAGREES else "disagrees:"
            found = Verdict(f"{prefix} second clock: {'; '.join(off)}", DISAGREES)
    if ceiling_error:
        prefix = found.line if found.status == DISAGREES else "disagrees:"
        found = Verdict(f"{prefix} {ceiling_error}", DISAGREES)
    log = watcher.log
    latency = f"latency floor: {seconds(floor.floor_s)} ({floor.note})"
    if floor.floor_s >= LATENCY_EXPECTED_S:
        latency += (
            f"; over {seconds(LATENCY_EXPECTED_S)}: launches are slow here (a VM, a MIG slice, a busy GPU?)"
        )
    notes = [
        latency,
        f"latency floor, graph mode: {seconds(graph_floor.floor_s)} ({graph_floor.note})",
        f"clocks while measuring: {log.summary()}",
        *ceiling_lines,
        *clock_lines,
    ]
    details: dict[str, object] = {
        "device_name": backend.device_name,
        "cupy": str(cupy.__version__),
        "timer": backend.timer_note,
        "blocking_kernel": backend.block_note or "on",
        "floors": {"warm": WARM_FLOOR, "cold": COLD_FLOOR, "graph": GRAPH_FLOOR},
        "min_judged_s": MIN_JUDGED_S,
        "rounds": rounds,
        "do_bench_allowance_s": judged_by["triton do_bench (cold)"].allowance_s,
        "latency_floor_s": floor.floor_s,
        "latency_floor_graph_s": graph_floor.floor_s,
        "event_pair_s": floor.event_pair_s,
        "clocks": {
            "watched": log.watched,
            "note": log.note,
            "summary": log.summary(),
            "min_sm_mhz": log.min_sm_mhz,
            "max_sm_mhz": log.max_sm_mhz,
            "throttled": list(log.reasons),
            "events": list(log.events),
        },
        "ceilings": ceilings,
        "second_clock": [clock.to_json() for clock in clocks] if ncu is not None else None,
    }
    return Report(
        device=f"cuda:{index}",
        header=tuple(header),
        results=tuple(results),
        comparisons=tuple(comparisons),
        notes=tuple(notes),
        verdict=found,
        details=details,
    )


def _ceilings(
    index: int, table_device: Device, calibration_dir: Path | None
) -> tuple[list[str], list[dict[str, object]], str]:
    """Lines comparing the calibrated ceilings with the datasheet's, the same as JSON, and the error
    when calibration failed ("" when it did not)."""
    from tabulate import tabulate

    from ..calibrate import calibrate_cuda

    try:
        calibration = calibrate_cuda(index, cache_dir=calibration_dir)
    except Exception as exc:  # the plugin would fail here too: a finding, said in the verdict
        reason = f"calibration failed: {type(exc).__name__}: {exc}"
        return [f"ceilings: {reason}"], [], reason
    measured = calibration.device
    rows: list[tuple[str, float, float | None, Callable[[float], str]]] = [
        ("DRAM bandwidth", measured.bandwidth.value, table_device.bandwidth.value, byte_rate)
    ]
    for (precision, kind), figure in measured.peaks.items():
        if figure.source is Source.MEASURED:
            sheet = table_device.peak(precision, kind)
            rows.append((f"{precision} {kind}", figure.value, sheet.value if sheet else None, flop_rate))
    rows += [
        (f"{level.name.upper()} bandwidth", level.bandwidth.value, None, byte_rate)
        for level in measured.levels
    ]
    cells, data = [], []
    for name, value, sheet_value, shown in rows:
        ratio = value / sheet_value if sheet_value else None
        flag = ""
        if ratio is not None and ratio > ABOVE_DATASHEET:
            flag = "above the datasheet: the table or the measurement is wrong"
        elif ratio is not None and ratio < BELOW_DATASHEET:
            flag = "under half the datasheet: throttled, or another model"
        cells.append([
            name, shown(value), shown(sheet_value) if sheet_value else "-",
            f"{ratio:.2f}" if ratio is not None else "-", flag,
        ])  # fmt: skip
        data.append(
            {"ceiling": name, "measured": value, "datasheet": sheet_value, "ratio": ratio, "flag": flag}
        )
    where = "read from the cache" if calibration.from_cache else f"measured now ({calibration.seconds:.0f} s)"
    cached = calibration.cache_path or "not cached"
    title = f"ceilings ({where}: {cached}) against the device table ({table_device.key}):"
    table_text = tabulate(
        cells, headers=["ceiling", "measured", "datasheet", "ratio", ""], disable_numparse=True
    )
    return [title, table_text], data, ""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
