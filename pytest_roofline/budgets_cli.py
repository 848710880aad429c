"""``roofline budgets RUN.json [RUN.json ...]``: a ``min_fraction`` per test, suggested from reports.

``--fraction`` (default 0.6) of each measurement's lowest attained fraction over the report runs,
rounded down to two figures, as markers to paste or ``--table``; bad input is one line and exit 2.
Why that budget, with an example: docs/cli.md (``roofline budgets``).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidValueError

#: the share of the lowest fraction seen that a budget is, unless ``--fraction`` says otherwise (why:
#: docs/cli.md, ``roofline budgets``)
DEFAULT_FRACTION = 0.6


def add_parser(commands: Any) -> None:
    budgets = commands.add_parser(
        "budgets",
        help="suggest each test's min_fraction from report runs",
        description="Suggest a min_fraction per test from --roofline-json reports of a few runs (report "
        "mode, on the machine that will judge): a share of the lowest attained fraction seen.",
    )
    budgets.add_argument("runs", nargs="+", metavar="RUN.json", help="--roofline-json reports")
    budgets.add_argument(
        "--fraction", type=fraction_option, default=DEFAULT_FRACTION, metavar="F",
        help="the budget's share of the lowest attained seen, in (0, 1) (default: 0.6: a kernel 2x "
        "slower than its slowest run misses it)",
    )  # fmt: skip
    budgets.add_argument("--table", action="store_true", help="a table instead of markers to paste")
    budgets.set_defaults(run=run)


def fraction_option(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a share of the lowest fraction in (0, 1), such as 0.5; got {text!r}"
        )
    return value


@dataclass(frozen=True)
class Suggestion:
    """One measurement's budget: what the runs showed, and what to set."""

    test: str
    name: str
    marker: str
    lowest: float
    highest: float
    runs: int
    between_runs: float
    budget: float
    current: float

    @property
    def spread(self) -> float:
        return self.highest / self.lowest - 1

    @property
    def noise_note(self) -> str:
        """Where the runs' spread, or the kind's noise between runs, comes near the budget's margin."""
        margin = self.lowest / self.budget - 1
        if self.runs < 3:
            return f"{self.runs} run(s): run it a few more times before trusting the lowest"
        if self.between_runs >= margin:
            return f"such a measurement moves ±{self.between_runs:.0%} between runs: the margin is tight"
        return ""


def suggest(paths: Sequence[str], fraction: float) -> list[Suggestion]:
    """Every measurement of the reports at ``paths`` with its suggested budget, in the reports' order."""
    from .model.inference import marker_text
    from .output.records import MeasurementRecord
    from .output.store import read_run

    seen: dict[tuple[str, str], list[MeasurementRecord]] = {}
    for path in paths:
        for record in read_run(path, "report").records:
            if isinstance(record, MeasurementRecord) and record.attained and math.isfinite(record.attained):
                seen.setdefault(record.key, []).append(record)
    if not seen:
        raise InvalidValueError(
            f"no measurement in {', '.join(paths)}: run the suite with --roofline-json first"
        )
    found = []
    for (test, name), records in seen.items():
        fractions = [float(r.attained or 0.0) for r in records]
        last = records[-1]
        budget = round_down(fraction * min(fractions))
        extra = {"math": last.peak_precision} if last.peak_precision != last.dtype else {}
        if last.inferred and isinstance(last.inferred.get("marker"), str):
            # the inferred op's marker (less the budget the run had), and any note after it
            text, note, rest = str(last.inferred["marker"]).partition("  #")
            text = re.sub(r", min_fraction=[^,)]*", "", text.rstrip())
            marker = f"{text[:-1]}, min_fraction={budget!r}){note}{rest}"
        else:
            marker = marker_text(last.op, last.params, last.dtype, min_fraction=budget, **extra)
        found.append(Suggestion(
            test=test, name=name, marker=marker, lowest=min(fractions), highest=max(fractions),
            runs=len(records), between_runs=float(last.between_runs["rel"]), budget=budget,
            current=last.min_fraction,
        ))  # fmt: skip
    return found


def round_down(value: float, figures: int = 2) -> float:
    """``value`` rounded down to ``figures`` significant figures (0.3815 -> 0.38, 0.00456 -> 0.0045)."""
    scale = 10.0 ** (figures - 1 - math.floor(math.log10(value)))
    # a hair over the product: 0.29 * 100 is 28.999999999999996 in binary, and is 29
    return float(math.floor(value * scale * (1 + 1e-12)) / scale)


def run(args: argparse.Namespace) -> str:
    found = suggest(args.runs, args.fraction)
    rule = (
        f"min_fraction = {args.fraction:g} of the lowest attained over the runs, rounded down: a kernel"
        f" more than {1 / args.fraction:.3g}x slower than its slowest run misses it"
    )
    if args.table:
        from tabulate import tabulate

        rows = [
            [s.test + (f" [{s.name}]" if s.name else ""), f"{s.lowest:.3f}", f"{s.spread:.1%}", str(s.runs),
             f"{s.current:g}", f"{s.budget:g}", s.noise_note]
            for s in found
        ]  # fmt: skip
        headers = ["test", "lowest", "spread", "runs", "now", "suggested", ""]
        return f"{tabulate(rows, headers=headers, disable_numparse=True)}\n{rule}"
    from .output.wrapping import TEXT_WIDTH, wrap

    # the rule wraps; a marker stays whole, to paste as it is
    lines = [wrap(f"roofline: {rule}; paste each marker over its test:", TEXT_WIDTH)]
    for s in found:
        seen = f"lowest {s.lowest:.3f} of {s.runs} run(s), spread {s.spread:.1%}; now {s.current:g}"
        lines.append(f"{s.test}{f' [{s.name}]' if s.name else ''}: {seen}")
        if s.name:  # one of several roofline(...) calls: its keywords, not the test's marker
            lines.append(f"    (the call named {s.name!r}: give it min_fraction={s.budget!r})")
        else:
            lines.append(f"    {s.marker}")
        if s.noise_note:
            lines.append(f"    # {s.noise_note}")
    return "\n".join(lines)
