"""``roofline llm CONFIG``: the speed of light of one decode or prefill step of a whole model.

A row per kernel of a layer, the step's floor their sum; ``--from REPORT.json`` predicts the step
from a suite's measurements (:mod:`.model.step_prediction`), ``--budget-ms`` gates the prediction.
docs/llm.md ("A whole model: `roofline llm`", "Predicting the step from the suite").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .model import units
from .model.core import Device, Estimate
from .model.devices import INTERCONNECTS
from .model.llm import PHASES, LlmError, ModelConfig, StepOp, config_key, load_config, step_ops, step_weights
from .model.step_prediction import ASSUMED_FRACTION, Evidence, Match, StepPrediction, match_op, predict

if TYPE_CHECKING:
    from .output.records import MeasurementRecord
    from .output.step_evidence import Reports

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
    llm.add_argument(
        "--wide", action="store_true",
        help=f"every column, each kernel on one line (default: {', '.join(NARROW_LEAVES_OUT)} left out to fit"
        " 100 columns)",
    )  # fmt: skip
    llm.add_argument("--plot", metavar="OUT", help="draw each op on the roofline, .svg or .png")
    llm.add_argument(
        "--from", dest="reports", action="append", metavar="REPORT.json",
        help="a --roofline-json report (repeatable): predict the step from its tests of the step's ops",
    )  # fmt: skip
    llm.add_argument(
        "--assume-fraction", type=_positive("a number", "above 0 and at most 1", 1.0), metavar="F",
        help="with --from: the fraction of its floor an op with no measurement of its kind attains "
        f"(default: {ASSUMED_FRACTION}, the plugin's default budget)",
    )  # fmt: skip
    llm.add_argument(
        "--across-devices", action="store_true", help="with --from: use measurements of other devices too"
    )
    llm.add_argument(
        "--budget-ms", metavar="MS",
        type=_positive("a number of milliseconds", "a positive number of milliseconds", math.inf),
        help="with --from: exit 1 when the predicted step takes longer than MS milliseconds",
    )  # fmt: skip
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


def _positive(expected: str, must: str, most: float) -> Any:
    """A parser of a finite number in (0, ``most``]; ``expected`` and ``must`` name it in its errors."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}; got {text!r}") from None
        if not (0 < value <= most and math.isfinite(value)):  # also refuses a NaN
            raise argparse.ArgumentTypeError(f"must be {must}; got {text}")
        return value

    return parse


def run(args: argparse.Namespace) -> str | tuple[str, int]:
    from .machine.public_estimate import resolve_device

    for option, given in (
        ("--budget-ms", args.budget_ms is not None),
        ("--assume-fraction", args.assume_fraction is not None),
        ("--across-devices", args.across_devices),
    ):
        if given and not args.reports:
            raise LlmError(f"{option} is for a step predicted from measurements: add --from REPORT.json")
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
            raise LlmError(
                f"--tp {args.tp}: no interconnect figure for {key}; known: {', '.join(INTERCONNECTS)}"
            )
    if args.plot:
        from .output.plot import check_path, require_matplotlib

        check_path(args.plot)
        require_matplotlib()
    device = resolve_device(args.device, measure=True)  # the user named it: measure the CPU if need be
    rows = floors(ops, device)
    summary = step_summary(config, options, rows, device)
    prediction = None
    if args.reports:
        from .output.comparison import disturbed
        from .output.step_evidence import read_reports

        reports = read_reports(args.reports, device, across_devices=args.across_devices)
        prediction = predicted_step(rows, reports, args)
        measured = [step for step in reports.steps if same_step(step, args.config, summary, options)]
        warn_disturbed([step.test for step in measured if disturbed(step)], "of the step itself")
        summary = {**summary, **prediction_summary(prediction, summary, args, measured)}
    verdict, status = budget_verdict(prediction, rows, args.budget_ms)
    data = step_json(rows, summary, device, prediction)
    wrote = [f"roofline: wrote {draw_step(data, args.plot)}"] if args.plot else []
    if args.json:
        for line in (*wrote, *verdict):  # stdout is the JSON's alone
            print(line, file=sys.stderr)
        return json.dumps(data, indent=2), status
    return "\n".join([format_step(rows, summary, prediction, wide=args.wide), *verdict, *wrote]), status


def predicted_step(rows: list[Row], reports: Reports, args: argparse.Namespace) -> StepPrediction:
    """Each row matched to the reports' measurements (``--from``), its floor over its fraction."""
    assume = assumed_fraction(args)
    prediction = predict([(r.floor_s, r.op.count, match_row(r, reports.evidence)) for r in rows], assume)
    if not any(p.match.measured for p in prediction.rows):
        warnings.warn(
            f"--from: no measurement of this step's ops ({reports.measured} measurement(s) read); "
            f"every op is assumed at {assume:g} of its floor",
            stacklevel=1,
        )
    used = {test for row in prediction.rows for test in row.match.tests}
    warn_disturbed(
        sorted({e.test for e in reports.evidence if e.disturbed and e.test in used}), "the prediction uses"
    )
    return prediction


#: the measurements a warning names, at most
NAMED = 5


def warn_disturbed(tests: list[str], which: str) -> None:
    """One warning naming the measurements (at most :data:`NAMED`) the machine's load could have slowed."""
    if tests:
        more = f" and {len(tests) - NAMED} more" if len(tests) > NAMED else ""
        warnings.warn(
            f"--from: {len(tests)} measurement(s) {which} could have been slowed by the machine's load (an"
            f" inconclusive verdict, busy or heavy contention, or threads that waited for a core):"
            f" {', '.join(tests[:NAMED])}{more}",
            stacklevel=1,
        )


def same_step(step: MeasurementRecord, config: str, summary: dict[str, Any], options: dict[str, Any]) -> bool:
    """Whether a report's measured step is the step predicted: the same config (however spelled:
    :func:`~.model.llm.config_key`) and dtype, the same phase, batch, context, prompt and tp where
    the test gave them, and the same weight and KV-cache dtypes given (or neither given)."""
    given = step.params
    if config_key(str(given.get("config", ""))) != config_key(config) or step.dtype != summary["dtype"]:
        return False
    shape = ("phase", "batch", "context", "prompt", "tp")
    storage = ("weight_dtype", "kv_dtype")
    same_shape = all(given[key] == summary[key] for key in shape if given.get(key) is not None)
    return same_shape and all(given.get(key) == options.get(key) for key in storage)


def assumed_fraction(args: argparse.Namespace) -> float:
    """``--assume-fraction``, or its default (None when not given: it needs ``--from``)."""
    return float(args.assume_fraction or ASSUMED_FRACTION)


def match_row(row: Row, evidence: tuple[Evidence, ...]) -> Match | None:
    """The row's match: its params and dtype as a test's record holds them (the estimate's: checked,
    defaults filled in), its bytes those it is floored on."""
    op = row.op
    params = dict(row.estimate.params) if row.estimate is not None else op.params
    dtype = str(row.estimate.precision) if row.estimate is not None else op.dtype
    return match_op(op.op, dtype, params, op.flops, op.bytes + op.link_bytes, evidence)


def prediction_summary(
    prediction: StepPrediction,
    summary: dict[str, Any],
    args: argparse.Namespace,
    measured: list[MeasurementRecord],
) -> dict[str, Any]:
    """The summary's additions for a predicted step: the total's prediction and its interval, for
    decode the tokens/s they imply, and where the reports measured the step itself, its time at the
    calibrated speed (the median of theirs) and the prediction over it."""
    from .output.step_evidence import calibrated_time_s

    total = {
        **summary["total"], "predicted_s": prediction.total_s, "predicted_lo_s": prediction.lo_s,
        "predicted_hi_s": prediction.hi_s, "measured_share": prediction.measured_share,
    }  # fmt: skip
    if measured:
        step_s = statistics.median(calibrated_time_s(step) for step in measured)
        total["measured_step_s"], total["measured_step_by"] = step_s, [step.test for step in measured]
        total["predicted_over_measured"] = prediction.total_s / step_s
    added: dict[str, Any] = {
        "total": total,
        "from": list(args.reports),
        "assume_fraction": assumed_fraction(args),
    }
    if summary["phase"] == "decode":
        batch = summary["batch"]
        added["predicted_tokens_per_s"] = batch / prediction.total_s
        added["predicted_tokens_per_s_lo"] = batch / prediction.hi_s
        added["predicted_tokens_per_s_hi"] = batch / prediction.lo_s
    if args.budget_ms is not None:
        added["budget_s"] = args.budget_ms / 1e3
        added["over_budget"] = prediction.total_s > args.budget_ms / 1e3
    return added


def budget_verdict(
    prediction: StepPrediction | None, rows: list[Row], budget_ms: float | None
) -> tuple[list[str], int]:
    """``--budget-ms``: a line saying whether the predicted step fits, and the exit status (1: over)."""
    if prediction is None or budget_ms is None:
        return [], 0
    total, budget = prediction.total_s, budget_ms / 1e3
    if total <= budget:
        return [f"within budget: predicted step {units.seconds(total)} <= {units.seconds(budget)}"], 0
    largest = prediction.rows[prediction.largest]
    name = rows[prediction.largest].op.name
    return [
        f"over budget: predicted step {units.seconds(total)} > budget {units.seconds(budget)}; the largest "
        f"part is {name}, {units.seconds(largest.predicted_s)} ({units.percent(largest.predicted_s / total)}"
        f" of the step, {_how(largest.match)})"
    ], 1


def floors(ops: list[StepOp], device: Device) -> list[Row]:
    """Each op's floor on ``device``; an all-reduce's over the device's interconnect."""
    from .model.estimate import estimate

    rows = []
    for op in ops:
        if op.op == "all_reduce":
            if device.interconnect is None:
                raise LlmError(f"tp={op.params['tp']}: no interconnect figure for {device.key}; known: "
                               f"{', '.join(INTERCONNECTS)}")  # fmt: skip
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


def step_json(
    rows: list[Row], summary: dict[str, Any], device: Device, prediction: StepPrediction | None = None
) -> dict[str, Any]:
    """What ``--json`` prints, and ``roofline plot`` draws: the step's ops (each with the roof it
    was floored against, and with ``--from`` its match), the summary, and the device's figures as a
    JSON report holds them."""
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
    if prediction is not None:
        for op, p in zip(ops, prediction.rows, strict=True):
            m = p.match
            op["match"] = {
                "nodeids": list(m.tests), "how": m.how, "fraction": m.fraction,
                "fraction_lo": m.fraction_lo, "fraction_hi": m.fraction_hi, "predicted_s": p.predicted_s,
                "predicted_lo_s": p.predicted_lo_s, "predicted_hi_s": p.predicted_hi_s,
            }  # fmt: skip
    return {"schema": SCHEMA, "ops": ops, **summary, "devices": [DeviceRecord.of(device).to_json()]}


#: the longest a test's id is shown in the table (the JSON has it whole)
TEST_ID_WIDTH = 28


def short_test(test: str) -> str:
    """A test's id as the table shows it: its function and parameters without the file (and class),
    cut to :data:`TEST_ID_WIDTH`."""
    head, sep, params = test.partition("[")
    name = head.rpartition("::")[2] + sep + params
    return name if len(name) <= TEST_ID_WIDTH else name[: TEST_ID_WIDTH - 1] + "…"


def _how(match: Match) -> str:
    """Which measurement a row's fraction came from, as its ``measured by`` cell says it: an
    interpolation's two tests as ``test_gemm[small..large]`` where one function ran both."""
    if not match.measured:
        return "assumed"
    if match.how != "interpolated":
        return f"{match.how} {short_test(match.tests[0])}"
    (low, high) = (short_test(t) for t in match.tests)
    low_name, _, low_params = low.partition("[")
    high_name, _, high_params = high.partition("[")
    if low_name == high_name and low_params and high_params:
        return f"interp. {low_name}[{low_params[:-1]}..{high_params}"
    return f"interp. {low}..{high}"


#: the columns the table leaves out unless ``--wide``: one call's figures, which the step's share does
#: not need (``--json`` keeps every figure), so that the table fits :data:`.output.wrapping.TEXT_WIDTH`
NARROW_LEAVES_OUT = ("FLOPs", "bytes", "FLOP/B", "floor", "floor × count")


def format_step(
    rows: list[Row], summary: dict[str, Any], prediction: StepPrediction | None = None, *, wide: bool = False
) -> str:
    """The step as a table and its sums; in :data:`.output.wrapping.TEXT_WIDTH` columns unless ``wide``:
    the columns of :data:`NARROW_LEAVES_OUT` left out (saying so) and long kernel names wrapped."""

    from .output.wrapping import TEXT_WIDTH, wrap

    total = summary["total"]["floor_s"]
    kernels = [
        r.estimate.label if r.estimate is not None else f"ring all-reduce of {r.op.params['elements']} values"
        for r in rows
    ]
    if prediction is None:
        table = [
            [
                r.op.name, kernel, f"×{r.op.count}", units.flops(r.op.flops),
                units.nbytes(r.op.bytes + r.op.link_bytes),
                units.intensity(r.estimate.intensity) if r.estimate is not None else "-", r.bound,
                units.seconds(r.floor_s), units.seconds(r.total_s), units.percent(r.total_s / total),
            ]
            for r, kernel in zip(rows, kernels, strict=True)
        ]  # fmt: skip
        headers = [
            "module",
            "kernel",
            "count",
            "FLOPs",
            "bytes",
            "FLOP/B",
            "bound",
            "floor",
            "× count",
            "share",
        ]
    else:  # FLOPs, bytes, the bound and the floor of one call make way for the match (--json keeps them)
        predicted = prediction.total_s
        table = [
            [
                r.op.name, kernel, f"×{r.op.count}",
                units.intensity(r.estimate.intensity) if r.estimate is not None else "-",
                units.seconds(r.total_s), _how(p.match), f"{p.match.fraction:.2g}",
                units.seconds(p.predicted_s), units.percent(p.predicted_s / predicted),
            ]
            for r, kernel, p in zip(rows, kernels, prediction.rows, strict=True)
        ]  # fmt: skip
        headers = [
            "module", "kernel", "count", "FLOP/B", "floor × count", "measured by", "fraction", "predicted",
            "share",
        ]  # fmt: skip
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
        *_fitted_table(table, headers, wide=wide),
        "",
        f"step floor  {units.seconds(total)}  (the sum of the ops' floors; "
        f"{units.flops(summary['total']['flops'])}, {units.nbytes(summary['total']['bytes'])})",
    ]
    if "tokens_per_s" in summary:
        lines.append(
            f"decode      at most {_rate(summary['tokens_per_s'])} tokens/s ({summary['batch']} per step)"
        )
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
    if prediction is not None:
        lines += _prediction_lines(prediction, summary)
    return "\n".join(lines) if wide else wrap("\n".join(lines), TEXT_WIDTH, hang=4)


def _fitted_table(table: list[list[str]], headers: list[str], *, wide: bool) -> list[str]:
    """The table's lines: every column when ``wide``; else those of :data:`NARROW_LEAVES_OUT` left
    out, the kernel column wrapped to the room the others leave, and a line naming what was left out."""
    from tabulate import tabulate

    from .output.table import left_out_note
    from .output.wrapping import TEXT_WIDTH

    if wide:
        return str(tabulate(table, headers=headers, disable_numparse=True)).splitlines()
    kept = [at for at, header in enumerate(headers) if header not in NARROW_LEAVES_OUT]
    table = [[row[at] for at in kept] for row in table]
    left_out = [header for header in headers if header in NARROW_LEAVES_OUT]
    headers = [headers[at] for at in kept]
    kernel = headers.index("kernel")
    others = tabulate([row[:kernel] + row[kernel + 1 :] for row in table],
                      headers=headers[:kernel] + headers[kernel + 1 :], disable_numparse=True)  # fmt: skip
    room = max(TEXT_WIDTH - max(map(len, str(others).splitlines())) - 2, len("kernel"))
    widths = [room if at == kernel else None for at in range(len(headers))]
    text = tabulate(table, headers=headers, disable_numparse=True, maxcolwidths=widths)
    note = left_out_note(left_out, len(headers) + len(left_out), TEXT_WIDTH, "--wide", "--json")
    return [*str(text).splitlines(), note]


def _share(share: float) -> str:
    """A share that is not all of it never reads as 100.0%."""
    return "over 99.9%" if 0.999 <= share < 1 else units.percent(share)


def _rate(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"  # a slow step is not "at most 0"


def _prediction_lines(prediction: StepPrediction, summary: dict[str, Any]) -> list[str]:
    """What the table's prediction adds up to: the step with its interval, the share measurements
    back, the tokens/s of a decode step, the ops assumed."""
    total = summary["total"]
    lines = [
        "",
        f"predicted step  {units.seconds(total['predicted_s'])} (95% {units.seconds(total['predicted_lo_s'])}"
        f"..{units.seconds(total['predicted_hi_s'])}); measured ops are "
        f"{_share(total['measured_share'])} of it",
    ]
    if "predicted_tokens_per_s" in summary:
        lines.append(
            f"                {_rate(summary['predicted_tokens_per_s'])} tokens/s (95% "
            f"{_rate(summary['predicted_tokens_per_s_lo'])}..{_rate(summary['predicted_tokens_per_s_hi'])})"
        )
    if "measured_step_s" in total:
        by = total["measured_step_by"]
        lines.append(
            f"measured step   {units.seconds(total['measured_step_s'])} at the calibrated speed ({by[0]}"
            f"{f' and {len(by) - 1} more, the median' if len(by) > 1 else ''}); predicted / measured "
            f"{total['predicted_over_measured']:.3f}"
        )
    assumed = sum(not p.match.measured for p in prediction.rows)
    if assumed:
        lines.append(
            f"assumed         {assumed} of {len(prediction.rows)} ops at "
            f"{summary['assume_fraction']:.2g} of their floor (no measurement of their kind)"
        )
    return lines


def draw_step(data: dict[str, Any], path: str) -> str:
    """Each op of a step (``--json``'s ``data``) on the device's roofline, its marker sized by its share
    of the step: at its floor, or with ``--from`` at its predicted time, measured and assumed ops
    apart; the path written."""
    from .output.plot import draw

    predicted = "predicted_s" in data["total"]
    total = float(data["total"]["predicted_s" if predicted else "floor_s"])
    ops = data["ops"]

    def time_s(op: dict[str, Any]) -> float:
        return float(op["floor_s"]) / op["match"]["fraction"] if predicted else float(op["floor_s"])

    def share(op: dict[str, Any]) -> float:
        return float(op["match"]["predicted_s"] if predicted else op["step_floor_s"]) / total

    points = [
        {
            "nodeid": op["name"], "device": data["device"], "flops": op["flops"], "bytes": op["bytes"],
            "time_s": time_s(op), "peak_precision": op["peak_precision"], "unit": op["unit"],
            "verdict": _drawn_as(op) if predicted else "floor",
            "size": 4 + 16 * share(op) ** 0.5,
        }
        for op in ops
        if op["peak_precision"] is not None and op["flops"]
    ]  # fmt: skip
    how = "as predicted from its tests" if predicted else "at its floor"
    title = f"{data['model']}: one {data['phase']} step {how}"
    flopless = [op["name"] for op in ops if not op["flops"]]
    if flopless:  # a FLOP/s axis has no place for them
        title += f" (not shown, no FLOPs: {', '.join(flopless)})"
    return str(draw(points, data["devices"], path, title=title))


def _drawn_as(op: dict[str, Any]) -> str:
    """A predicted op's colour on the plot: its fraction measured, or assumed."""
    return "assumed" if op["match"].get("how") == "assumed" else "measured"


def is_step(data: object) -> bool:
    """Whether ``data`` (a decoded JSON file) is ``roofline llm --json``'s output."""
    return isinstance(data, dict) and data.get("schema") == SCHEMA


def plot_step(data: dict[str, Any], path: str, output: str) -> str:
    """``roofline plot STEP.json -o OUT``: a saved step (``data``, read from ``path``) drawn as
    ``--plot`` draws it; a field it needs that is missing or of the wrong kind is an LlmError naming it."""
    from .output.baseline import finite_number, positive_number
    from .output.plot import PlotError, check_devices

    where = f"{path} (roofline llm --json)"
    for key in ("model", "phase", "device"):
        if not isinstance(data.get(key), str):
            raise LlmError(f"{where}: {key!r} must be a string; got {data.get(key)!r}")
    total = data.get("total")
    if not isinstance(total, dict) or not positive_number(total.get("floor_s")):
        raise LlmError(f"{where}: 'total' must hold a positive 'floor_s'; got {total!r}")
    ops = data.get("ops")
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise LlmError(f"{where}: 'ops' must be a list of objects")
    for index, op in enumerate(ops):
        for key in ("flops", "bytes", "floor_s", "step_floor_s"):
            value = op.get(key)
            if not finite_number(value) or value < 0:
                raise LlmError(f"{where}: ops[{index}].{key} must be a number, 0 or more; got {value!r}")
        for key in ("name", "peak_precision", "unit"):
            if not isinstance(op.get(key), str) and not (key != "name" and op.get(key) is None):
                raise LlmError(f"{where}: ops[{index}].{key} must be a string; got {op.get(key)!r}")
        if "predicted_s" in total:  # a step predicted with --from: each op's match is drawn
            match = op.get("match")
            if not isinstance(match, dict) or not all(
                positive_number(match.get(key)) for key in ("fraction", "predicted_s")
            ):
                raise LlmError(
                    f"{where}: ops[{index}].match must hold a positive 'fraction' and 'predicted_s'; "
                    f"got {match!r}"
                )
    if "predicted_s" in total and not positive_number(total["predicted_s"]):
        raise LlmError(
            f"{where}: 'total.predicted_s' must be a positive number; got {total['predicted_s']!r}"
        )
    try:
        check_devices(data.get("devices"))
    except PlotError as exc:
        raise LlmError(f"{where}: {exc}") from None
    return f"roofline: wrote {draw_step(data, output)}"
