"""``roofline merge SHARD.json ... -o RUN.json``: one report from a sharded run's, for CI's last job.

The merged file reads as one run's; ``--save`` merges it into a baseline as ``--roofline-save`` does
(:mod:`.output.store`). Bad input is one line and exit 2 (``cli.main``). docs/ci.md ("Scaling out").
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .errors import InvalidValueError


def add_parser(commands: Any) -> None:
    merge = commands.add_parser(
        "merge",
        help="join the JSON reports of a sharded run into one",
        description="Join --roofline-json files of one suite's shards (a CI matrix, pytest-split, -k "
        "selections) into one report; a test measured in two shards is an error.",
    )
    merge.add_argument("shards", nargs="+", metavar="SHARD.json", help="the shards' --roofline-json files")
    merge.add_argument("-o", "--output", required=True, metavar="RUN.json", help="the merged report to write")
    merge.add_argument(
        "--save", metavar="BASELINE.json",
        help="merge the run into this baseline too, as --roofline-save does (created when missing)",
    )  # fmt: skip
    merge.add_argument(
        "--accept", action="store_true",
        help="with --save: let a measurement that regressed replace its baseline record (default: refused)",
    )  # fmt: skip
    merge.add_argument(
        "--threshold", type=threshold_option, default=None, metavar="DROP",
        help="with --save: the drop of attained that is a regression, as 10%% or 0.1 (default: 10%%)",
    )  # fmt: skip
    merge.add_argument(
        "--markdown", metavar="PATH", help="append the run's Markdown summary to PATH ($GITHUB_STEP_SUMMARY)"
    )
    merge.set_defaults(run=run)


def threshold_option(text: str) -> float:
    """The ``--threshold`` of ``merge`` and ``compare``: a bad drop is argparse's error, said in one line."""
    from .output.comparison import parse_threshold

    try:
        return parse_threshold(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> str:
    """Merge, write the report whole, then save and summarize as asked; the lines say what was done."""
    from .output.comparison import DEFAULT_THRESHOLD
    from .output.jsonfile import write_json_atomic
    from .output.merge import merge_shards
    from .output.store import merge_run, read_store

    outputs = [("-o", args.output), ("--save", args.save), ("--markdown", args.markdown)]
    _check_outputs([(flag, path) for flag, path in outputs if path], args.shards)
    if args.save is None and (args.accept or args.threshold is not None):
        raise InvalidValueError("--accept and --threshold judge what --save saves: give --save BASELINE.json")
    merged = merge_shards(args.shards)
    store = read_store(args.save) if args.save else None  # before writing anything: refused, untouched
    write_json_atomic(args.output, merged.payload())
    measured = sum(r.verdict != "skipped" for r in merged.records)
    lines = [f"roofline: merged {len(args.shards)} shard(s), {measured} measurement(s), into {args.output}"]
    if merged.interruption is not None:
        lines.append(f"roofline: a shard was cut short ({merged.interruption}): the merged run is marked so")
    if args.save and not measured:
        lines.append(f"roofline: nothing was measured, so {args.save} was not written")
    elif args.save:
        saved = merge_run(
            store, merged.records, merged.devices, path=args.save,
            threshold=args.threshold or DEFAULT_THRESHOLD, interruption=merged.interruption,
            accept=args.accept,
        )  # fmt: skip
        write_json_atomic(args.save, saved.payload())
        lines += [f"roofline: {line}" for line in saved.lines("--accept")]
    if args.markdown:
        from .output.markdown import append_section, section

        append_section(os.path.expanduser(args.markdown), section(merged.records, merged.devices))
    return "\n".join(lines)


def _check_outputs(outputs: list[tuple[str, str]], shards: list[str]) -> None:
    """Each output a file we can write, none of them a shard or another output: one line, before any
    file is read or written."""
    from .machine.files import problem

    seen: dict[str, str] = {os.path.realpath(shard): f"shard {shard}" for shard in shards}
    for flag, path in outputs:
        reason = problem(path)
        if reason:
            raise InvalidValueError(f"{flag} {path}: cannot write it: {reason}")
        real = os.path.realpath(path)
        if real in seen and (os.path.isfile(real) or not os.path.exists(real)):  # not /dev/stdout
            raise InvalidValueError(f"{flag} {path} is also {seen[real]}: give each file a path of its own")
        seen[real] = flag
