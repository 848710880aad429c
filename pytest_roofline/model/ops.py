"""The op catalogue, loaded: import an op lookup from here, never from :mod:`.op_registry`.

Importing this module registers every catalogue (:mod:`.builtin_ops`, :mod:`.llm_ops`, :mod:`.llm_op`).
The registry, which defines the lookups and the types (import those from there), cannot load them
itself: they register into it, and the ``llm`` op looks the others up. What an op counts:
docs/floor.md ("Ops").
"""

from __future__ import annotations

from . import builtin_ops, llm_op, llm_ops  # noqa: F401  (registered on import)
from .op_registry import all_ops, get_op, op_names, register_op, restore_op, unregister_op

__all__ = ["all_ops", "get_op", "op_names", "register_op", "restore_op", "unregister_op"]
