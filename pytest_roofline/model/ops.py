"""The op catalogue, loaded: every built-in op (:mod:`.builtin_ops`), the LLM kernels
(:mod:`.llm_ops`) and the whole-model ``llm`` op (:mod:`.llm_op`), behind the registry's functions
(:mod:`.op_registry`: :class:`OpSpec`, :class:`Param`, :func:`register_op`, :func:`get_op`, ...).

Import from here to look an op up: importing this module registers the catalogues, which import
only the registry, never this module, so imports go one way.

Byte counts are the *ideal* DRAM traffic: every input read once, every output written once, as a
perfectly fused kernel would. That is what makes the result a floor: a kernel that re-reads memory
pays for it in measured time, and the gap shows up as a lower attained fraction.
"""

from __future__ import annotations

from . import builtin_ops, llm_op, llm_ops  # registered on import
from .op_registry import (
    MAX_SIZE,
    REQUIRED,
    RESERVED_NAMES,
    CostFunction,
    CrossCheck,
    OpError,
    OpSpec,
    Param,
    ParamKind,
    Params,
    all_ops,
    check_params,
    get_op,
    op_names,
    register_op,
    restore_op,
    unregister_op,
)
from .operands import SCALE_SIZES, scale_bytes, storage

__all__ = [
    "MAX_SIZE",
    "REQUIRED",
    "RESERVED_NAMES",
    "SCALE_SIZES",
    "CostFunction",
    "CrossCheck",
    "OpError",
    "OpSpec",
    "Param",
    "ParamKind",
    "Params",
    "all_ops",
    "builtin_ops",
    "check_params",
    "get_op",
    "llm_op",
    "llm_ops",
    "op_names",
    "register_op",
    "restore_op",
    "scale_bytes",
    "storage",
    "unregister_op",
]
