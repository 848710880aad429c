"""``roofline ops``: every op of the catalogue, its parameters and formulas, read from the registry;
in 100 columns, or as docs/floor.md's Markdown table (``--markdown``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .model.core import Precision
from .model.op_registry import OpSpec
from .model.operands import SCALE_SIZES
from .model.ops import all_ops

#: the columns of ``roofline ops`` and of the op table in docs/floor.md (``roofline ops --markdown``)
_OP_HEADERS = ("op", "parameters (and dtype)", "FLOPs", "complex", "bytes (× size of dtype)", "unit")


def _op_rows() -> list[list[str]]:
    """Every registered op as a row of :data:`_OP_HEADERS`, read from the registry."""
    return [
        [
            spec.name,
            ", ".join(map(str, spec.params)),
            spec.flops_formula,
            _complex_cell(spec),
            spec.bytes_formula,
            str(spec.unit_for({})),
        ]
        for spec in all_ops()
    ]


def _markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def ops_text(args: argparse.Namespace) -> str:
    """Every op, a few lines each, then the notes, wrapped to :data:`~.output.wrapping.TEXT_WIDTH`
    columns (the table itself, a row per op, is ``--markdown``'s: docs/floor.md)."""
    if args.markdown:  # the op table as docs/floor.md holds it, a pipe in a formula escaped
        lines = [_markdown_row(_OP_HEADERS), "|" + "---|" * len(_OP_HEADERS)]
        lines += [_markdown_row([cell.replace("|", "\\|") for cell in row]) for row in _op_rows()]
        return "\n".join(lines)
    from .output.wrapping import TEXT_WIDTH, wrap

    blocks = [
        f"{name}({params})  [{unit}; complex: {complex_cell}]\n"
        f"  FLOPs: {flops}\n  bytes (× size of dtype): {nbytes}"
        for name, params, flops, complex_cell, nbytes, unit in _op_rows()
    ]
    note = (
        "\nMatrix-shaped ops use tensor units where the device has them for the dtype; fp32 only with "
        "--math tf32.\nFLOPs are real FLOPs: on complex data the count is multiplied as `complex` says "
        "(a complex multiply-add is 8 real FLOPs, a real one 2; a complex add 2); `no`: no complex form, "
        "`only`: complex data only.\nIntegers and bool count operations, judged against the device's "
        "integer peak where it has one (int8 tensor cores), else by their bytes alone (compute side "
        "unknown).\n"
        f"dtypes: {', '.join(p.label for p in Precision)}.\n"
        "`roofline floor OP key=value ... dtype=D` computes a floor."
    )
    # each line on its own, its continuations 4 further in than it
    return wrap("\n".join(blocks) + note + _sources(), TEXT_WIDTH, hang=4)


def _sources() -> str:
    """Each op's other names and where its counting convention comes from."""
    lines = [
        f"  - {spec.name}{' (also ' + ', '.join(spec.aliases) + ')' if spec.aliases else ''}: {spec.source}"
        for spec in all_ops()
        if spec.source or spec.aliases
    ]
    operands = (
        "\nPer-operand storage: gemm and gemv a_dtype, b_dtype, c_dtype (gemv: a the matrix); attention "
        "q_dtype, kv_dtype, o_dtype; moe w_dtype; dtype stays the math (it picks the peak) and the storage "
        "of every operand not given. group_size: elements along K per block scale of scale_dtype "
        f"({', '.join(SCALE_SIZES)}; fp16 unless given); attention's pass is fwd unless given. "
        "int4 is packed two to a byte; dtype=int4 only on "
        f"{', '.join(s.name for s in all_ops() if s.packed)}; it is never read from a uint8 array.\n"
        "attention's pass is a Python keyword: write pass_='bwd' in Python, pass=bwd here.\n"
    )
    return operands + "Sources and aliases:\n" + "\n".join(lines)


def _complex_cell(spec: OpSpec) -> str:
    """``×4`` (real FLOPs per counted FLOP on complex data), ``no`` or ``only``."""
    if spec.complex_flops is None:
        return "no"
    return f"×{spec.complex_flops:g}" + ("" if spec.real else " (only)")
