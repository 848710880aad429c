"""The ``roofline`` command: napkin estimates before any code exists, and the tools around a run.

Bad input prints one line and exits 2, with no traceback; a bug keeps its traceback and exits 2 too,
never the 1 of a finding (``compare``'s regression, ``llm --budget-ms``'s step over budget). Each
command and its exit status: docs/cli.md.
"""

from __future__ import annotations

import argparse
import decimal
import json
import math
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from .errors import InvalidValueError
from .model import units
from .model.core import Device, Estimate, Precision, Unit
from .model.devices import table
from .ops_cli import ops_text

if TYPE_CHECKING:
    from .analysis.diagnosis import Diagnosis
    from .analysis.kernelfacts import StaticFacts

USAGE_ERROR = 2


def parse_value(text: str) -> Any:
    """``4096`` -> int, ``1e3`` -> int (a whole number written with an exponent is one, exactly),
    ``1.5`` and ``2.5e-3`` -> float, ``true``/``false`` -> bool, anything else a string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for convert in (int, float):
        try:
            value = convert(text)
        except ValueError:
            continue
        if isinstance(value, float) and "e" in lowered and math.isfinite(value):
            exact = decimal.Decimal(text)
            if exact == exact.to_integral_value():
                return int(exact)
        return value
    return text


def parse_assignments(items: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise InvalidValueError(f"expected key=value, got {item!r} (for example M=4096 or dtype=bf16)")
        if name in params:
            raise InvalidValueError(f"{name} is given twice")
        params[name] = parse_value(value)
    return params


def _floor(args: argparse.Namespace) -> str:
    from .machine.public_estimate import estimate
    from .model.ops import get_op

    get_op(args.op)  # a misspelled op first: it is the likelier mistake
    params = parse_assignments(args.params)
    for option in ("device", "math"):
        if option in params:
            raise InvalidValueError(f"{option} is an option here: write --{option} {params[option]}")
    if "op" in params:
        raise InvalidValueError(f"the op comes first: roofline floor {params['op']} key=value ...")
    dtype = params.pop("dtype", None)
    if dtype is None:
        raise InvalidValueError(f"{args.op} needs dtype=... (for example dtype=bf16, dtype=fp32)")
    # the user named the device: this CPU's ceilings are measured if none are cached
    est = estimate(args.op, dtype=dtype, device=args.device, math=args.math, measure=True, **params)
    if args.json:
        return json.dumps(estimate_dict(est), indent=2)
    return format_estimate(est)


def estimate_dict(est: Estimate) -> dict[str, Any]:
    """An estimate as plain JSON-ready values."""
    return {
        "op": est.op,
        "label": est.label,
        "params": dict(est.params),
        "dtype": str(est.precision),
        "math": str(est.peak_precision),
        "unit": str(est.unit),
        "device": est.device.key,
        "device_name": est.device.name,
        "flops": est.flops,
        "bytes": est.bytes,
        "intensity": est.intensity if est.intensity != float("inf") else None,
        "ridge": est.ridge,
        "compute_s": est.compute_s,
        "memory_s": est.memory_s,
        "floor_s": est.floor_s,
        "bound": est.bound,
        "peak_flops": est.peak_flops,
        "peak_source": None if est.peak_source is None else str(est.peak_source),
        "bandwidth": est.bandwidth,
        "bandwidth_source": str(est.bandwidth_source),
    }


def format_estimate(est: Estimate) -> str:
    """The napkin: work, traffic, intensity against the ridge, both times, the floor and its bound."""
    bandwidth = f"{units.byte_rate(est.bandwidth)} ({est.bandwidth_source})"
    floor = f"{units.seconds(est.floor_s)}  {est.bound}-bound"
    if est.peak_flops is None or est.ridge is None or est.compute_s is None:
        # an integer op on a device without an integer peak: the floor is the memory time alone
        rate_class = est.peak_precision.rate_class
        ridge = f"unknown: {est.device.key} has no {rate_class} peak"
        if est.compute_s is None:
            compute = f"unknown (give the peak as '{rate_class}:vector' in --roofline-peaks FILE)"
            floor += " (compute side unknown)"
        else:
            compute = units.seconds(est.compute_s)  # no work: no time, whatever the peak
    else:
        peak = f"{units.flop_rate(est.peak_flops)} {est.peak_precision} {est.unit} ({est.peak_source})"
        if est.peak_note:
            peak += f" [{est.peak_note}]"
        ridge = f"{units.intensity(est.ridge)} FLOP/byte  = {peak} / {bandwidth}"
        compute = units.seconds(est.compute_s)
    rows = [
        ("FLOPs", units.flops(est.flops)),
        ("bytes", units.nbytes(est.bytes)),
        ("intensity", f"{units.intensity(est.intensity)} FLOP/byte"),
        ("ridge", ridge),
        ("compute", compute),
        ("memory", units.seconds(est.memory_s)),
        ("floor", floor),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{est.label} on {est.device.name} ({est.device.key})"]
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    return "\n".join(lines)


def _devices(args: argparse.Namespace) -> str:
    from tabulate import tabulate

    from .machine.detect import auto_spec

    auto = auto_spec()
    auto_key = "cpu" if auto == "cpu" else _visible_key(auto)
    headers = ["", "key", "name", "kind", "SMs/CUs", "DRAM", "LLC", *(name for name, _, _ in _DEVICE_COLUMNS)]
    # `roofline calibrate` measures the CPU's bandwidth and vector peaks, no tensor peak
    cpu_peaks = ["measured" if unit is Unit.VECTOR else "" for _, _, unit in _DEVICE_COLUMNS]
    rows: list[list[object]] = [["cpu", "this machine's CPU", "cpu", "", "measured", "", *cpu_peaks]]
    rows += [
        [
            device.key,
            device.name,
            device.kind,
            device.cores or "",
            units.byte_rate(device.bandwidth.value),
            units.binary_bytes(device.llc_bytes) if device.llc_bytes else "",
            *(_peak(device, p, u) for _, p, u in _DEVICE_COLUMNS),
        ]
        for device in table().values()
    ]
    rows = [["*" if row[0] == auto_key else "", *row] for row in rows]
    marked = "* = what --device auto resolves to here" + (
        f" ({auto})"
        if auto_key
        else f"; {auto}, a device the table does not know (derived from its properties)"
    )
    legend = (
        "Peaks in TFLOP/s, dense, as the vendor quotes them; LLC = the last-level cache cold measurements"
        " exceed (MI300-series: the Infinity Cache); TC = tensor cores; ᵈ = derived; ? = unconfirmed;"
        " - = none; (n) = the rate at the maximum SM clock where the figure is quoted at a lower one, for"
        " the faster-than-light limit only."
    )
    table_text = tabulate(rows, headers=headers, disable_numparse=True)
    links = ", ".join(
        f"{d.key} {units.byte_rate(d.interconnect.value)}" for d in table().values() if d.interconnect
    )
    link_line = f"GPU-to-GPU links, per GPU and direction (roofline llm --tp): {links}."
    return "\n".join([table_text, marked + ".", _cpu_line(), link_line, legend])


def _cpu_line() -> str:
    """What bounds the measured cpu row: its theoretical peak, or why that is unknown."""
    from .machine import cpupeak
    from .timing.host_caches import cpu_caches

    peak = cpupeak.system_peak()
    limit = f"theoretical peak unknown ({peak})" if isinstance(peak, str) else peak.describe()
    line = f"cpu: measured by `roofline calibrate`; {limit}."
    from .machine.calibrate import cached_cpu_device
    from .machine.calibration_report import cache_rows

    device = cached_cpu_device()  # calibrated already: what the capacity sweep found
    if device is not None and device.caches:
        levels = "; ".join(f"{name}: {text}" for name, text in cache_rows(device, why=False))
        return f"{line}\nthis CPU's cache levels: {levels}."
    levels = ", ".join(
        f"{c.name} {units.binary_bytes(c.size_bytes)}{' per core' if c.per_core else ''}"
        for c in cpu_caches()
    )
    if levels:  # the roofs a warm measurement is judged against
        line += (
            f"\nthis CPU's cache levels (sysfs): {levels}; `roofline calibrate` measures the capacity"
            " this process sees and their roofs."
        )
    return line


def _visible_key(spec: str) -> str | None:
    """The table key of the GPU ``spec`` names, or None when the table does not know it."""
    from .machine.detect import parse_target
    from .model.devices import DeviceError
    from .timing.cuda.device import cuda_device

    try:
        key = cuda_device(parse_target(spec).index or 0).key
    except (DeviceError, RuntimeError):
        return None
    return key if key in table() else None


#: the peak columns of ``roofline devices``: each header, and the peak it shows
_DEVICE_COLUMNS = (
    ("fp64", Precision.FP64, Unit.VECTOR),
    ("fp32", Precision.FP32, Unit.VECTOR),
    ("tf32 TC", Precision.TF32, Unit.TENSOR),
    ("bf16 TC", Precision.BF16, Unit.TENSOR),
    ("fp8 TC", Precision.FP8_E4M3, Unit.TENSOR),
    ("fp4 TC", Precision.FP4, Unit.TENSOR),
)


def _peak(device: Device, precision: Precision, unit: Unit) -> str:
    """``989.5 (1070.6)``: the figure in TFLOP/s, marked, with its rate at the maximum SM clock."""
    from .model.devices import is_unconfirmed

    figure = device.peak(precision, unit)
    if figure is None:
        return "-"
    mark = "ᵈ" if figure.source == "derived" else "?" if is_unconfirmed(figure) else ""
    top = "" if figure.at_max_clock is None else f" ({round(figure.at_max_clock / 1e12, 1):g})"
    return f"{figure.value / 1e12:g}{mark}{top}"


def _compare(args: argparse.Namespace) -> tuple[str, int]:
    """Two JSON reports compared test by test; exit status 1 when one regressed."""
    from .output.baseline import load_baseline, refuse_interrupted
    from .output.comparison import Change, RegressionRule, format_table, other_gpu_lines, summary_line
    from .output.store import read_run

    old = load_baseline(args.old)
    run = read_run(args.new, "compared") if args.markdown else None  # its rows, for the summary
    new = run.baseline if run is not None else load_baseline(args.new, "compared")
    if not args.interrupted:
        refuse_interrupted(old, "--interrupted")
    for note in (*old.notes, *new.notes):
        warnings.warn(note, stacklevel=1)
    # a run cut short did not reach the tests it lacks: they are not run, not vanished
    not_run = {nodeid for nodeid, _ in old.records} if new.interruption is not None else set()
    rule = RegressionRule(args.threshold, args.across_devices)  # the gate's rule
    comparisons = rule.compare_all(old, new.stored.values(), not_run=not_run)
    lines = [f"baseline: {old.describe()}", f"compared: {new.describe()}", ""]
    lines += format_table(comparisons) if comparisons else ["(no measurements in either file)"]
    regressed = [c for c in comparisons if c.change is Change.REGRESSION]
    lines += ["", summary_line(comparisons), *other_gpu_lines(comparisons), *(c.message() for c in regressed)]
    if any(c.change is Change.OTHER_DEVICE for c in comparisons):
        lines.append("measurements on another device are not compared: --across-devices compares them")
    if run is not None:
        from .output.markdown import append_section, section

        text = section(run.records, run.devices, comparisons=comparisons, baseline=old.describe())
        append_section(args.markdown, text)
    return "\n".join(lines), 1 if regressed else 0


def _plot(args: argparse.Namespace) -> str:
    """The roofline plot of a saved JSON report (and arrows from a baseline's)."""
    from .output.baseline import load_baseline, parse_baseline, read_json
    from .output.plot import PlotError, check_devices, check_path, draw, fault, require_matplotlib

    check_path(args.output)
    require_matplotlib()
    from .llm_cli import is_step, plot_step

    data = read_json(args.results, "results")
    if is_step(data):  # `roofline llm --json`'s output: one step's ops at their floors
        if args.baseline:
            raise InvalidValueError(
                f"--baseline: {args.results} is one roofline llm step, which has no baseline"
            )
        return plot_step(cast("dict[str, Any]", data), args.results, args.output)
    where = f"results {args.results}"
    parse_baseline(data, where, args.results)  # every fault in the file, named, before drawing
    data = cast("dict[str, Any]", data)  # parse_baseline refused anything else
    try:
        devices = check_devices(data.get("devices", []))
    except PlotError as exc:
        raise InvalidValueError(f"{where}: {exc}") from None
    for index, record in enumerate(data["measurements"]):
        reason = fault(record) if record.get("verdict") != "skipped" else None
        if reason:  # one bad figure leaves out its point, not the plot
            named = f"{where}: measurement {index} ({record['nodeid']})"
            warnings.warn(f"{named}: {reason}: not drawn", stacklevel=1)
    old = load_baseline(args.baseline).records if args.baseline else None
    written = draw(data["measurements"], devices, args.output, baseline=old)
    return f"roofline: wrote {written}"


def _calibrate(args: argparse.Namespace) -> str:
    from .machine.calibrate import calibrate_cpu, calibrate_cuda
    from .machine.calibration_report import format_calibration
    from .machine.detect import parse_target

    target = parse_target(args.device)
    if target.kind == "cpu":
        return format_calibration(calibrate_cpu(force=args.force, reset=args.reset))
    if target.kind == "cuda":
        return format_calibration(calibrate_cuda(target.index or 0, force=args.force, reset=args.reset))
    raise InvalidValueError(
        f"--device {args.device}: a table device has datasheet peaks; calibrate measures local hardware "
        "(cpu, cuda, cuda:N)"
    )


def _analyze(args: argparse.Namespace) -> str:
    """The bottleneck procedure's static half: resources, occupancy, mix, cliff, floor, first fixes."""
    from .analysis.compiler import ToolchainUnavailable
    from .analysis.diagnosis import diagnose
    from .analysis.kernelfacts import load_source, static_facts
    from .analysis.occupancy import DEVICE_ARCH, limits_for

    if args.block is not None and args.block < 1:
        raise InvalidValueError(f"--block must be a positive thread count; got {args.block}")
    if args.dynamic_smem < 0:
        raise InvalidValueError(f"--dynamic-smem must be a byte count (0 or more); got {args.dynamic_smem}")
    arch = args.arch or (DEVICE_ARCH.get(args.device) if args.device else None)
    if arch is None:
        hint = f" ({args.device} is not a table GPU)" if args.device else ""
        raise InvalidValueError(
            f"--arch is required (for example --arch sm_90), or --device with a table GPU{hint}"
        )
    limits = limits_for(arch)
    if args.block is not None and args.block > limits.max_threads_per_block:
        raise InvalidValueError(
            f"--block {args.block} is over {limits.arch}'s {limits.max_threads_per_block} threads per block"
        )
    est = _analyze_estimate(args) if args.op else None
    source = load_source(args.source)
    try:
        facts = static_facts(
            source, args.kernel, arch, args.block, dynamic_smem=args.dynamic_smem, where=args.source
        )
    except ToolchainUnavailable as exc:
        raise InvalidValueError(str(exc)) from None
    diagnosis = diagnose(est, facts)
    if args.json:
        record: dict[str, Any] = diagnosis.to_record()
        record["estimate"] = None if est is None else estimate_dict(est)
        return json.dumps(record, indent=2)
    return format_analysis(args.source, facts, est, diagnosis)


def _analyze_estimate(args: argparse.Namespace) -> Estimate:
    from .machine.public_estimate import estimate
    from .model.ops import get_op

    op, *assignments = args.op
    get_op(op)
    params = parse_assignments(assignments)
    dtype = params.pop("dtype", None) or args.dtype
    if dtype is None:
        raise InvalidValueError(f"--op {op} needs --dtype (for example --dtype fp32)")
    if args.device is None:
        raise InvalidValueError(
            "--op needs --device: the table GPU whose peaks give the floor (e.g. h100-sxm)"
        )
    return estimate(op, dtype=dtype, device=args.device, measure=True, **params)


def format_analysis(where: str, facts: StaticFacts, est: Estimate | None, diagnosis: Diagnosis) -> str:
    """The procedure's report (kernel-bottleneck-procedure.md step 8) without the measured half."""
    from .analysis.diagnosis import format_diagnosis
    from .analysis.occupancy import limits_for

    launch = f", {facts.block} threads/block" if facts.block else ""
    spills = (
        f"spills {facts.spill_stores} B stored, {facts.spill_loads} B loaded"
        if facts.spilled
        else "no spills"
    )
    dynamic = f" + {units.binary_bytes(facts.dynamic_smem)} dynamic" if facts.dynamic_smem else ""
    cliff = limits_for(facts.arch).smem_cliff
    side = "over it: 1 block/SM at most" if facts.smem > cliff else "under it"
    lines = [
        f"{facts.kernel} ({where}) for {facts.arch}{launch}",
        "resources",
        f"  registers      {facts.registers} per thread, {spills}, {facts.stack_frame} B stack frame",
        f"  shared memory  {units.binary_bytes(facts.static_smem)} static{dynamic} per block",
        f"  smem cliff     {units.binary_bytes(cliff)} per block on {facts.arch} (two blocks/SM up to it, "
        f"one beyond); this kernel is {side}",
        "occupancy",
    ]
    occ = facts.occupancy
    if occ is None:
        lines.append("  (give --block for the launch's threads per block)")
    else:
        lines += [
            "  blocks/SM by   " + ", ".join(f"{name} {n}" for name, n in occ.limits),
            f"  resident       {occ.blocks_per_sm} blocks x {occ.warps_per_block} warps = {occ.active_warps} "
            f"of {occ.max_warps_per_sm} warps ({units.percent(occ.fraction)}), limited by {occ.limiter}",
        ]
    m = facts.mix
    lines += [
        "instruction mix (PTX, static counts)",
        f"  global loads {m.global_loads} (128-bit {m.global_loads_128}), global stores {m.global_stores} "
        f"(128-bit {m.global_stores_128}), shared loads/stores {m.shared_loads}/{m.shared_stores}, "
        f"cp.async {m.cp_async}",
        f"  mma/wgmma {m.tensor_core}, warp shuffles {m.warp_shuffles}, barriers {m.barriers}, "
        f"fp32 math {m.fp32_math}, fp64 {m.fp64_math}",
    ]
    grouped: dict[str, list[str]] = {}
    for access in facts.strided:  # one line per kind of strided access, with its first instruction
        grouped.setdefault(access.describe(), []).append(access.line)
    for described, ptx_lines in grouped.items():
        lines.append(f"  strided: {len(ptx_lines)} x {described}  (e.g. {ptx_lines[0]})")
    if facts.sass is not None:
        lines.append("  SASS: " + ", ".join(f"{k} {v}" for k, v in facts.sass.items()))
    lines += [f"  note: {note}" for note in facts.notes]
    if est is not None:
        lines.append("roofline floor")
        lines += ["  " + line for line in format_estimate(est).splitlines()]
    lines.append(format_diagnosis(diagnosis))
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's default prints usage; one line is enough
        raise InvalidValueError(message)


def build_parser() -> argparse.ArgumentParser:
    from .budgets_cli import add_parser as add_budgets
    from .llm_cli import add_parser as add_llm
    from .merge_cli import add_parser as add_merge
    from .merge_cli import threshold_option

    parser = _Parser(prog="roofline", description="Speed-of-light estimates and device ceilings.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    floor = commands.add_parser(
        "floor",
        help="the fastest an op can run on a device",
        description="Print the napkin estimate: FLOPs, bytes, intensity, ridge, both times, the floor.",
    )
    floor.add_argument("op", help="an op name (see `roofline ops`)")
    floor.add_argument("params", nargs="*", metavar="key=value", help="op parameters and dtype=...")
    floor.add_argument("--device", default="auto", help="a table key, cpu, cuda[:N] or auto (default: auto)")
    floor.add_argument(
        "--math",
        choices=("ieee", "tf32"),
        help="matrix math for fp32 data: tf32 judges it against TF32 tensor peaks (default: the dtype's "
        "own: IEEE for fp32, TF32 for dtype=tf32)",
    )
    floor.add_argument("--json", action="store_true", help="print JSON instead of text")
    floor.set_defaults(run=_floor)
    devices = commands.add_parser("devices", help="list the device table")
    devices.set_defaults(run=_devices)
    ops = commands.add_parser("ops", help="list the ops, their parameters and formulas")
    ops.add_argument(
        "--markdown", action="store_true", help="print the table as Markdown (docs/floor.md holds it)"
    )
    ops.set_defaults(run=ops_text)
    calibrate = commands.add_parser("calibrate", help="measure this machine's ceilings (cached)")
    calibrate.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    again = calibrate.add_mutually_exclusive_group()
    again.add_argument(
        "--force", action="store_true", help="measure again; each cached figure keeps the better of the two"
    )
    again.add_argument("--reset", action="store_true", help="measure again and forget the cached figures")
    calibrate.set_defaults(run=_calibrate)
    compare = commands.add_parser(
        "compare",
        help="compare two JSON reports test by test (exit 1 on a regression)",
        description="Compare the attained fractions of two --roofline-json files, with both intervals.",
    )
    compare.add_argument("old", help="the baseline: a --roofline-json or --roofline-save file")
    compare.add_argument("new", help="the run to judge against it")
    compare.add_argument(
        "--threshold", type=threshold_option, default=0.1, metavar="DROP",
        help="the drop of attained that is a regression, as 10%% or 0.1 (default: 10%%)",
    )  # fmt: skip
    compare.add_argument(
        "--across-devices", action="store_true", help="compare measurements of other devices too"
    )
    compare.add_argument(
        "--interrupted", action="store_true",
        help="accept a baseline saved from a run that was cut short (its missing tests go unchecked)",
    )  # fmt: skip
    compare.add_argument(
        "--markdown", metavar="PATH",
        help="append the new run's Markdown summary, with the comparison, to PATH ($GITHUB_STEP_SUMMARY)",
    )  # fmt: skip
    compare.set_defaults(run=_compare)
    plot = commands.add_parser(
        "plot",
        help="draw the roofline plot of a JSON report",
        description="Draw a --roofline-json file's plot.",
    )
    plot.add_argument("results", help="a --roofline-json file")
    plot.add_argument("-o", "--output", required=True, help="the plot to write: .svg or .png")
    plot.add_argument("--baseline", help="an earlier JSON report: arrows from where each test stood")
    plot.set_defaults(run=_plot)
    analyze = commands.add_parser(
        "analyze",
        help="compile a CUDA kernel and read why it may be slow (nothing runs)",
        description="Compile with nvcc and print resources, occupancy and its limiter, the instruction "
        "mix, the shared-memory cliff, the floor (with --op) and the ranked first fixes.",
    )
    analyze.add_argument(
        "source", help="a .cu file, or FILE.py:NAME (a CUDA source string, or an object with .code, in it)"
    )
    analyze.add_argument(
        "--kernel",
        help="the kernel's name, or its signature where it is overloaded ('scale(float*, int)') "
        "(default: the only one the source defines)",
    )
    analyze.add_argument(
        "--arch", help="the architecture: sm_80, sm_86, sm_89, sm_90, ... (default: --device's)"
    )
    analyze.add_argument("--block", type=int, help="threads per block of the launch, for occupancy")
    analyze.add_argument(
        "--dynamic-smem",
        type=int,
        default=0,
        metavar="BYTES",
        help="dynamic shared memory per block of the launch, in bytes (default: 0)",
    )
    analyze.add_argument("--device", help="a table GPU (see roofline devices): the floor's peaks")
    analyze.add_argument(
        "--op",
        nargs="+",
        metavar="OP key=value",
        help="the op and its parameters: --op gemm M=4096 N=4096 K=4096",
    )
    analyze.add_argument("--dtype", help="the data's dtype, for --op (or dtype=... among its parameters)")
    analyze.add_argument("--json", action="store_true", help="print JSON instead of text")
    analyze.set_defaults(run=_analyze)
    add_llm(commands)
    selfcheck = commands.add_parser(
        "selfcheck",
        help="time a few kernels with the engine and the other timers here (exit 1 when one disagrees)",
        description="Set the engine's times beside cupyx, torch.cuda.Event and triton do_bench (a GPU) "
        "or timeit and pytest-benchmark (the CPU): one table of ratios and a verdict.",
    )
    selfcheck.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    selfcheck.add_argument(
        "--json", metavar="FILE", help="also write the results to FILE, whole or not at all"
    )
    selfcheck.add_argument(
        "--fake", action="store_true", help="the GPU check on the test suite's fakes (a source checkout; CI)"
    )
    selfcheck.add_argument(
        "--ncu", action=argparse.BooleanOptionalAction, default=None,
        help="on a GPU, time its kernels again with Nsight Compute, a second clock (default: where ncu"
        " is on the PATH; --ncu requires it, --no-ncu skips it)",
    )  # fmt: skip
    selfcheck.set_defaults(run=_selfcheck)
    add_merge(commands)
    add_budgets(commands)
    return parser


def _selfcheck(args: argparse.Namespace) -> tuple[str, int]:
    from .machine.selfcheck import selfcheck

    return selfcheck(args.device, json_path=args.json, fake=args.fake, ncu=args.ncu)


def _negative_values(argv: Sequence[str]) -> list[str]:
    """``--threshold -5%`` as ``--threshold=-5%``, so that argparse gives the range error, not "expected
    one argument"."""
    joined: list[str] = []
    for arg in argv:
        number = arg[:1] == "-" and (arg[1:2].isdigit() or arg[1:2] == ".")
        if joined and joined[-1] == "--threshold" and number:
            joined[-1] = f"--threshold={arg}"
        else:
            joined.append(arg)
    return joined


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    status = 0
    command = None
    try:
        args = parser.parse_args(_negative_values(sys.argv[1:] if argv is None else argv))
        command = args.command
        if args.command is None:
            raise InvalidValueError(
                "a command is required: floor, devices, ops, calibrate, compare, merge, plot, analyze, llm"
                " or selfcheck (see roofline -h)"
            )
        with warnings.catch_warnings(record=True) as caught:  # a replaced cache, say: one line each
            warnings.simplefilter("always")
            output = args.run(args)
        for warning in caught:
            print(f"roofline: warning: {warning.message}", file=sys.stderr)
        output, status = output if isinstance(output, tuple) else (output, 0)
        print(output)
        return int(status)
    except BrokenPipeError:  # `roofline compare old new | head`: the reader left, which is no error;
        sys.stdout = None  # the verdict stands (a regression's 1 under pipefail); no flush into the pipe
        return int(status)
    except ValueError as exc:  # InvalidValueError, OpError and DeviceError are ValueErrors
        print(f"roofline: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except RuntimeError as exc:  # an unavailable device or CuPy: said in one line, not a traceback
        print(f"roofline: error: {exc}", file=sys.stderr)
        # compare's 1 says a test regressed, llm's a step predicted over its budget
        return USAGE_ERROR if command in ("compare", "llm") else 1
    except Exception:  # a bug keeps its traceback, but never exits 1, which compare and llm say
        import traceback

        traceback.print_exc()
        return USAGE_ERROR
