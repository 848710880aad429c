"""``roofline llm CONFIG``: the speed of light of one decode or prefill step of a whole model.

One row per kernel of a layer (and the once-per-step embedding, final norm and LM head): its FLOPs,
bytes, intensity, bound and floor, times its count; the step's floor is the sum of the rows'. The
all-reduce of ``--tp`` is timed at the device's interconnect (the table's NVLink and xGMI figures, sourced).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from .model import units
from .model.core import Device, Estimate
from .model.devices import INTERCONNECTS
from .model.llm import PHASES, LlmError, ModelConfig, StepOp, load_config, step_ops, step_weights

#: the table's interconnect figures, by device key (each table device carries its own as ``interconnect``)
LINKS = INTERCONNECTS
#: what ``--json`` writes, by the name ``roofline plot`` knows it by
SCHEMA = "roofline-llm/1"


@dataclass(frozen=True, slots=True)
class Row:
    op: StepOp
    estimate: Estimate | None  # None for an all-reduce (timed at the link, not DRAM)
    floor_s: float  # one call

    @property
    def total_s(self) -> float:
        return self.floor_s * self.op.count

    @property
    def bound(self) -> str:
        return "link" if self.estimate is None else self.estimate.bound


def add_parser(commands: Any) -> None:
    llm = commands.add_parser(
        "llm",
        help="the floor of one decode or prefill step of a whole model (a Hugging Face config.json)",
        description="Print one row per kernel of a layer with its floor, the step's floor as their sum, "
        "tokens/s (decode) or time to first token (prefill), and the op that bounds the step.",
    )
    llm.add_argument("config", help="a config.json, or a shipped example: llama-3-8b, mixtral-8x7b, qwen2-7b")
    llm.add_argument("--device", default="auto", help="a table key, cpu, cuda[:N] or auto (default: auto)")
    llm.add_argument("--phase", choices=PHASES, default="decode", help="decode (default) or prefill")
    llm.add_argument("--batch", type=_count(1), default=1, metavar="N", help="sequences (default: 1)")
    llm.add_argument(
        "--context",
        type=_count(0),
        default=0,
        metavar="N",
        help="tokens already cached per sequence (default: 0)",
    )
    llm.add_argument("--prompt", type=_count(1), metavar="N", help="new tokens per sequence (prefill)")
    llm.add_argument("--dtype", help="activations and the math (default: the config's torch_dtype)")
    llm.add_argument("--weight-dtype", help="weights' storage: int4 (group 128, fp16 scales), fp8, ...")
    llm.add_argument("--kv-dtype", help="the KV cache's storage (default: --dtype)")
    llm.add_argument("--tp", type=_count(1), default=1, metavar="N", help="tensor-parallel GPUs (default: 1)")
    llm.add_argument("--json", action="store_true", help="print JSON instead of the table")
    llm.add_argument("--plot", metavar="OUT", help="draw each op on the roofline, .svg or .png")
    llm.set_defaults(run=run)


def _count(low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer; got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}; got {value}")
        return value

    return parse


def run(args: argparse.Namespace) -> str:
    from .machine.public_estimate import resolve_device

    config = load_config(args.config)
    options = {
        "phase": args.phase, "batch": args.batch, "context": args.context, "prompt": args.prompt,
        "dtype": args.dtype, "weight_dtype": args.weight_dtype, "kv_dtype": args.kv_dtype, "tp": args.tp,
    }  # fmt: skip
    ops = step_ops(config, options)
    if args.tp > 1:  # before the device: a missing link figure is the likelier mistake than a device
        from .model.devices import table

        key = args.device.strip().lower()
        if key in table() and table()[key].interconnect is None:
            raise LlmError(f"--tp {args.tp}: no interconnect figure for {key}; known: {', '.join(LINKS)}")
    if args.plot:
        from .output.plot import check_path, require_matplotlib

        check_path(args.plot)
        require_matplotlib()
    device = resolve_device(args.device, measure=True)  # the user named it: measure the CPU if need be
    rows = floors(ops, device)
    summary = step_summary(config, options, rows, device)
    if not (args.plot or args.json):
        return format_step(rows, summary)
    data = step_json(rows, summary, device)
    wrote = f"roofline: wrote {draw_step(data, args.plot)}" if args.plot else ""
    if args.json:
        if wrote:  # stdout is the JSON's alone
            print(wrote, file=sys.stderr)
        return json.dumps(data, indent=2)
    return f"{format_step(rows, summary)}\n{wrote}"


def floors(ops: list[StepOp], device: Device) -> list[Row]:
    """Each op's floor on ``device``; an all-reduce's over the device's interconnect."""
    from .model.estimate import estimate

    rows = []
    for op in ops:
        if op.op == "all_reduce":
            if device.interconnect is None:
                raise LlmError(f"tp={op.params['tp']}: no interconnect figure for {device.key}; known: "
                               f"{', '.join(LINKS)}")  # fmt: skip
            rows.append(Row(op, None, op.link_bytes / device.interconnect.value))
            continue
        est = estimate(op.op, dtype=op.dtype, device=device, **op.params)
        rows.append(Row(op, est, est.floor_s))
    return rows


def step_summary(
    config: ModelConfig, options: dict[str, Any], rows: list[Row], device: Device
) -> dict[str, Any]:
    total = sum(r.total_s for r in rows)
    bounding = max(rows, key=lambda r: r.total_s)
    phase, batch = options["phase"], options["batch"]
    weights, quantization = step_weights(config, options)
    summary: dict[str, Any] = {
        "model": config.name, "model_type": config.model_type, "layers": config.layers,
        "device": device.key, "device_name": device.name, "phase": phase, "batch": batch,
        "context": options["context"], "prompt": options["prompt"], "tp": options["tp"],
        "dtype": rows[0].op.dtype, "weight_dtype": weights,
        "quantization": quantization.describe() if quantization is not None else None,
        "kv_dtype": options["kv_dtype"] or rows[0].op.dtype,
        "total": {
            "flops": sum(r.op.flops * r.op.count for r in rows),
            "bytes": sum((r.op.bytes + r.op.link_bytes) * r.op.count for r in rows),
            "floor_s": total,
        },
        "bounding_op": {"name": bounding.op.name, "bound": bounding.bound, "share": bounding.total_s / total},
    }  # fmt: skip
    if phase == "decode":
        summary["tokens_per_s"] = batch / total
    else:
        summary["ttft_s"] = total
    # the link the all-reduces of tp > 1 cross; None for one GPU (or a device the table has no link for)
    link = device.interconnect
    summary["link"] = {"bandwidth": link.value, "source": link.note} if link is not None else None
    return summary


def step_json(rows: list[Row], summary: dict[str, Any], device: Device) -> dict[str, Any]:
    """What ``--json`` prints, and ``roofline plot`` draws: the step's ops (each with the roof it
    was floored against), the summary, and the device's figures as a JSON report holds them."""
    from .output.records import DeviceRecord

    ops = [
        {
            "name": r.op.name, "op": r.op.op, "count": r.op.count, "flops": r.op.flops,
            "bytes": r.op.bytes + r.op.link_bytes, "floor_s": r.floor_s, "bound": r.bound,
            "step_floor_s": r.total_s, "params": r.op.params, "dtype": r.op.dtype,
            "label": r.estimate.label if r.estimate is not None else f"all_reduce[tp={r.op.params['tp']}]",
            "peak_precision": str(r.estimate.peak_precision) if r.estimate is not None else None,
            "unit": str(r.estimate.unit) if r.estimate is not None else None,
        }
        for r in rows
    ]  # fmt: skip
    return {"schema": SCHEMA, "ops": ops, **summary, "devices": [DeviceRecord.of(device).to_json()]}


def format_step(rows: list[Row], summary: dict[str, Any]) -> str:
    from tabulate import tabulate

    total = summary["total"]["floor_s"]
    table = [
        [
            r.op.name,
            r.estimate.label
            if r.estimate is not None
            else f"ring all-reduce of {r.op.params['elements']} values",
            f"×{r.op.count}",
            units.flops(r.op.flops),
            units.nbytes(r.op.bytes + r.op.link_bytes),
            units.intensity(r.estimate.intensity) if r.estimate is not None else "-",
            r.bound,
            units.seconds(r.floor_s),
            units.seconds(r.total_s),
            units.percent(r.total_s / total),
        ]
        for r in rows
    ]
    headers = ["module", "kernel", "count", "FLOPs", "bytes", "FLOP/B", "bound", "floor", "× count", "share"]
    tp = f", tp={summary['tp']}" if summary["tp"] > 1 else ""
    shape = (
        f"decode, batch {summary['batch']}, context {summary['context']}"
        if summary["phase"] == "decode"
        else f"prefill, batch {summary['batch']}, prompt {summary['prompt']}, context {summary['context']}"
    )
    lines = [
        f"{summary['model']} ({summary['model_type']}, {summary['layers']} layers) on "
        f"{summary['device_name']} ({summary['device']}): {shape}{tp}; dtype {summary['dtype']}, "
        f"weights {summary['weight_dtype']}"
        f"{' (' + summary['quantization'] + ')' if summary['quantization'] else ''}, "
        f"KV cache {summary['kv_dtype']}",
        tabulate(table, headers=headers, disable_numparse=True),
        "",
        f"step floor  {units.seconds(total)}  (the sum of the ops' floors; "
        f"{units.flops(summary['total']['flops'])}, {units.nbytes(summary['total']['bytes'])})",
    ]
    if "tokens_per_s" in summary:
        rate = summary["tokens_per_s"]
        shown = f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"  # a slow step is not "at most 0"
        lines.append(f"decode      at most {shown} tokens/s ({summary['batch']} per step)")
    else:
        lines.append(f"prefill     time to first token at least {units.seconds(summary['ttft_s'])}")
    bounding = summary["bounding_op"]
    lines.append(
        f"bounded by  {bounding['name']} ({bounding['bound']}-bound, "
        f"{units.percent(bounding['share'])} of the step)"
    )
    if summary["tp"] > 1 and summary["link"] is not None:
        lines.append(f"link        {units.byte_rate(summary['link']['bandwidth'])} per direction: "
                     f"{summary['link']['source']}")  # fmt: skip
    return "\n".join(lines)


def draw_step(data: dict[str, Any], path: str) -> str:
    """Each op of a step (``--json``'s ``data``) on the device's roofline at its floor, its marker
    sized by its share of the step; the path written."""
    from .output.plot import Point, draw

    total = data["total"]["floor_s"]
    ops = data["ops"]
    points = [
        Point(
            nodeid=op["name"], name="", device=data["device"], flops=op["flops"], bytes=op["bytes"],
            time_s=op["floor_s"], peak_precision=op["peak_precision"], unit=op["unit"], verdict="floor",
            size=4 + 16 * (op["step_floor_s"] / total) ** 0.5,
        )
        for op in ops
        if op["peak_precision"] is not None and op["flops"]
    ]  # fmt: skip
    title = f"{data['model']}: one {data['phase']} step at its floor"
    flopless = [op["name"] for op in ops if not op["flops"]]
    if flopless:  # a FLOP/s axis has no place for them
        title += f" (not shown, no FLOPs: {', '.join(flopless)})"
    return str(draw(points, data["devices"], path, title=title))


def is_step(data: object) -> bool:
    """Whether ``data`` (a decoded JSON file) is ``roofline llm --json``'s output."""
    return isinstance(data, dict) and data.get("schema") == SCHEMA


def plot_step(data: dict[str, Any], path: str, output: str) -> str:
    """``roofline plot STEP.json -o OUT``: a saved step (``data``, read from ``path``) drawn as
    ``--plot`` draws it; a field it needs that is missing or of the wrong kind is an LlmError naming it."""
    from .output.plot import PlotError, check_devices

    where = f"{path} (roofline llm --json)"
    for key in ("model", "phase", "device"):
        if not isinstance(data.get(key), str):
            raise LlmError(f"{where}: {key!r} must be a string; got {data.get(key)!r}")
    total = data.get("total")
    if not isinstance(total, dict) or not _positive_number(total.get("floor_s")):
        raise LlmError(f"{where}: 'total' must hold a positive 'floor_s'; got {total!r}")
    ops = data.get("ops")
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise LlmError(f"{where}: 'ops' must be a list of objects")
    for index, op in enumerate(ops):
        for key in ("flops", "bytes", "floor_s", "step_floor_s"):
            value = op.get(key)
            if not _positive_number(value) and not (value == 0 and not isinstance(value, bool)):
                raise LlmError(f"{where}: ops[{index}].{key} must be a number, 0 or more; got {value!r}")
        for key in ("name", "peak_precision", "unit"):
            if not isinstance(op.get(key), str) and not (key != "name" and op.get(key) is None):
                raise LlmError(f"{where}: ops[{index}].{key} must be a string; got {op.get(key)!r}")
    try:
        check_devices(data.get("devices"))
    except PlotError as exc:
        raise LlmError(f"{where}: {exc}") from None
    return f"roofline: wrote {draw_step(data, output)}"


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")
