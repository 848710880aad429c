"""The op catalogue, loaded: import an op lookup from here, never from :mod:`.op_registry`.

Importing this module registers every catalogue: the built-in ops (:mod:`.builtin_ops`), the LLM
kernels (:mod:`.llm_ops`) and the whole-model ``llm`` op (:mod:`.llm_op`). The lookups and
registrations below are the registry's own (:mod:`.op_registry`, which defines them and the types,
:class:`~.op_registry.OpSpec`, :class:`~.op_registry.Param`, :class:`~.op_registry.OpError`: import
those from there); taken from here, they see the whole catalogue. The registry cannot load the
catalogues itself: they register into it, and the ``llm`` op looks the others up, so they sit above it.

Byte counts are the *ideal* DRAM traffic: every input read once, every output written once, as a
perfectly fused kernel would. That is what makes the result a floor: a kernel that re-reads memory
pays for it in measured time, and the gap shows up as a lower attained fraction.
"""

from __future__ import annotations

from . import builtin_ops, llm_op, llm_ops  # noqa: F401  (registered on import)
from .op_registry import all_ops, get_op, op_names, register_op, restore_op, unregister_op

__all__ = ["all_ops", "get_op", "op_names", "register_op", "restore_op", "unregister_op"]
