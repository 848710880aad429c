"""How an op's operands are stored: each operand's own dtype where the caller gives one (``a_dtype``,
...), and the block scales of quantized formats (``group_size``, ``scale_dtype``). Shared by the
catalogues (:mod:`.builtin_ops`, :mod:`.llm_ops`)."""

from __future__ import annotations

from collections.abc import Iterable

from .core import parse_dtype
from .op_registry import Param, Params


def storage(p: Params, operand: str, size: float) -> float:
    """Bytes per element of an operand: its own ``<operand>_dtype`` where given, else ``size`` (the
    dtype's)."""
    given = p.get(f"{operand}_dtype")
    return size if given is None else parse_dtype(given).itemsize


#: bytes per block scale, by the ``scale_dtype`` spellings the quantized formats use
SCALE_SIZES: dict[str, float] = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8_e4m3": 1, "e8m0": 1}


def scale_bytes(p: Params, elements: float) -> float:
    """Bytes of the block scales of ``elements`` quantized values: one ``scale_dtype`` (fp16 unless
    given) per ``group_size`` elements along K; 0 without a group_size."""
    group = p.get("group_size")
    return 0.0 if not group else elements / group * SCALE_SIZES[p.get("scale_dtype") or "fp16"]


def operand_dtypes(names: Iterable[str]) -> list[Param]:
    """``a_dtype``, ... : each operand's storage, ``dtype``'s where not given."""
    return [Param(f"{name}_dtype", None, "dtype") for name in names]


def block_scales() -> list[Param]:
    """Block scales: ``group_size`` elements along K per scale, stored as ``scale_dtype``."""
    return [Param("group_size", None), Param("scale_dtype", None, "choice", tuple(SCALE_SIZES))]
