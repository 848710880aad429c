"""SASS instruction counts (``cuobjdump -sass``), the ones kernel-bottleneck-procedure.md step 5 greps.

Static counts over the whole function, not per executed K-tile: they say which units a kernel
can use at all (HMMA/IMMA tensor cores, FFMA, 128-bit loads, LDGSTS async copies).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

#: name -> opcode pattern (an opcode is the first word of a SASS instruction, predicate stripped)
PATTERNS: Mapping[str, re.Pattern[str]] = MappingProxyType(
    {
        "HMMA": re.compile(r"^HMMA\b"),
        "IMMA": re.compile(r"^IMMA\b"),
        "HGMMA": re.compile(r"^HGMMA\b"),  # Hopper warpgroup MMA (wgmma)
        "FFMA": re.compile(r"^FFMA\b"),
        "DFMA/DADD/DMUL": re.compile(r"^D(?:FMA|ADD|MUL)\b"),
        "LDG": re.compile(r"^LDG\b"),
        "LDG.128": re.compile(r"^LDG\b.*\.128\b"),
        "STG": re.compile(r"^STG\b"),
        "STG.128": re.compile(r"^STG\b.*\.128\b"),
        "LDGSTS": re.compile(r"^LDGSTS\b"),
        "LDS": re.compile(r"^LDS\b"),
        "STS": re.compile(r"^STS\b"),
        "BAR.SYNC": re.compile(r"^BAR\.SYNC\b"),
        "SHFL": re.compile(r"^SHFL\b"),
        "MUFU": re.compile(r"^MUFU\b"),
    }
)

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)", re.MULTILINE)
_INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def counts(sass: str, kernel: str) -> dict[str, int] | None:
    """Each pattern's count in ``kernel``'s SASS, or None when the listing has no such function."""
    parts = _FUNCTION.split(sass)  # [before, name, body, name, body, ...]
    for function, body in zip(parts[1::2], parts[2::2], strict=True):
        if function == kernel:
            opcodes = [m.group(1) for m in _INSTRUCTION.finditer(body)]
            return {name: sum(1 for op in opcodes if pattern.match(op)) for name, pattern in PATTERNS.items()}
    return None
