"""What a kernel's PTX shows: its entry points, the instruction mix that matters
(kernel-bottleneck-procedure.md step 5) and, by a dataflow pass over ``%tid.x``, the global accesses
whose neighbouring threads land far apart. Text in, frozen facts out; no compiler here.

The mix and the pass: docs/architecture.md ("The layers")."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\(", re.MULTILINE)
_GUARD = r"^\s*(?:@!?%\w+\s+)?"


@dataclass(frozen=True, slots=True)
class InstructionMix:
    """Counts of the instructions the diagnosis reads, in one kernel's PTX (static, not executed)."""

    global_loads: int = 0
    global_loads_128: int = 0
    global_stores: int = 0
    global_stores_128: int = 0
    shared_loads: int = 0
    shared_stores: int = 0
    local_accesses: int = 0
    cp_async: int = 0
    tensor_core: int = 0  # mma.sync, wmma.mma, wgmma.mma_async
    warp_shuffles: int = 0
    barriers: int = 0
    fp32_math: int = 0  # fma/add/mul/... on .f32
    fp64_math: int = 0  # arithmetic and conversions on .f64

    def to_record(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class StridedAccess:
    """One global load or store whose address moves by more than its width from thread to thread."""

    kind: str  # "load" or "store"
    width: int  # bytes per thread per instruction
    stride: int | None  # bytes between neighbouring threads; None: a run-time value (a parameter)
    line: str  # the PTX instruction

    def describe(self) -> str:
        moved = "a run-time stride (a kernel parameter)" if self.stride is None else f"{self.stride} B"
        return f"{self.kind} of {self.width} B moving {moved} per thread"


def entries(ptx: str) -> tuple[str, ...]:
    """The kernel names a PTX module defines, in order."""
    return tuple(_ENTRY.findall(ptx))


def entry_body(ptx: str, name: str) -> str:
    """The text of entry ``name`` (its parameters and body), or a KeyError."""
    for match in _ENTRY.finditer(ptx):
        if match.group(1) == name:
            end = ptx.find("\n}", match.end())
            return ptx[match.start() : len(ptx) if end < 0 else end + 2]
    raise KeyError(name)


_MAXNTID = re.compile(r"^\s*\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE)


def max_threads(body: str) -> int | None:
    """The most threads per block an entry may be launched with (``.maxntid``, which
    ``__launch_bounds__`` sets), or None where it sets no bound."""
    match = _MAXNTID.search(body)
    if match is None:
        return None
    return math.prod(int(n) for n in match.groups() if n is not None)


_VECTOR = re.compile(r"\.v(2|4|8)\b")
_TYPE = re.compile(r"\.[bfsu](8|16|32|64|128)\b")


def _width(opcode: str) -> int:
    """Bytes moved per thread by a load/store opcode (``ld.global.nc.v4.f32`` -> 16)."""
    vector = _VECTOR.search(opcode)
    bits = _TYPE.findall(opcode)
    size = int(bits[-1]) // 8 if bits else 4
    return size * (int(vector.group(1)) if vector else 1)


_MATH = ("add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt", "min", "max", "abs", "neg")


def instruction_mix(body: str) -> InstructionMix:
    """The mix of one entry's PTX (see :func:`entry_body`)."""
    counts = dict.fromkeys((f.name for f in fields(InstructionMix)), 0)
    for opcode, _ in _instructions(body):
        parts = opcode.split(".")
        head = parts[0]
        if head in ("ld", "st") and "global" in parts:
            key = "global_loads" if head == "ld" else "global_stores"
            counts[key] += 1
            if _width(opcode) >= 16:
                counts[key + "_128"] += 1
        elif head in ("ld", "st") and "shared" in parts:
            counts["shared_loads" if head == "ld" else "shared_stores"] += 1
        elif head in ("ld", "st") and "local" in parts:
            counts["local_accesses"] += 1
        elif parts[:2] == ["cp", "async"] and "wait" not in opcode and "commit_group" not in opcode:
            counts["cp_async"] += 1
        elif head in ("mma", "wgmma") or (head == "wmma" and "mma" in parts):
            counts["tensor_core"] += 1 if "fence" not in parts and "commit_group" not in parts else 0
        elif head == "shfl":
            counts["warp_shuffles"] += 1
        elif head in ("bar", "barrier") and ("sync" in parts or "arrive" not in parts):
            counts["barriers"] += 1
        if head in _MATH and "f32" in parts:
            counts["fp32_math"] += 1
        if "f64" in parts and head in (*_MATH, "cvt", "setp", "ex2", "lg2", "sin", "cos"):
            counts["fp64_math"] += 1
    return InstructionMix(**counts)


_INSTRUCTION = re.compile(_GUARD + r"([a-z][\w.:]*)\s*(.*?);", re.MULTILINE)


def _instructions(body: str) -> list[tuple[str, str]]:
    """(opcode, operands) of each instruction; declarations and labels are skipped."""
    return [(m.group(1), m.group(2)) for m in _INSTRUCTION.finditer(body, max(body.find("{"), 0))]


# --- the tid.x coefficient of each register ------------------------------------------------------


class _Unknown:
    """A coefficient that is no constant: RUNTIME (tid.x times a parameter) or NOT_AFFINE."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


RUNTIME = _Unknown("RUNTIME")
NOT_AFFINE = _Unknown("NOT_AFFINE")
Coef = int | _Unknown
#: special registers: how far each moves from one thread of a warp to the next
_SPECIAL: Mapping[str, int] = {"%tid.x": 1, "%laneid": 1}
_REG = re.compile(r"^%[\w.]+$")
_IMMEDIATE = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)U?$")


def _join(a: Coef, b: Coef) -> Coef:
    if a == b:
        return b
    if a is NOT_AFFINE or b is NOT_AFFINE:
        return NOT_AFFINE
    return RUNTIME if RUNTIME in (a, b) else NOT_AFFINE


def _scale(coef: Coef, factor: int | None) -> Coef:
    """coef x a uniform value: a constant scales it, anything else makes it a run-time amount."""
    if coef == 0:
        return 0
    if isinstance(coef, int) and factor is not None:
        return coef * factor
    return NOT_AFFINE if coef is NOT_AFFINE else RUNTIME


class _Flow:
    """Flow-insensitive facts per register: tid.x coefficient and, for constants, the value."""

    def __init__(self) -> None:
        self.coef: dict[str, Coef] = {}
        self.value: dict[str, int | None] = {}

    def coef_of(self, operand: str) -> Coef:
        operand = operand.strip()
        if operand in _SPECIAL:
            return _SPECIAL[operand]
        if _IMMEDIATE.match(operand) or not operand.startswith("%"):
            return 0
        if operand.startswith(("%tid", "%ntid", "%ctaid", "%nctaid", "%warpid", "%smid")):
            return 0  # uniform across a warp (for blocks at least 32 threads wide)
        return self.coef.get(operand, 0)

    def value_of(self, operand: str) -> int | None:
        operand = operand.strip()
        if _IMMEDIATE.match(operand):
            try:
                return int(operand.rstrip("U"), 0)
            except ValueError:  # "010": PTX octal, never an address stride worth reading
                return None
        return self.value.get(operand)

    def assign(self, reg: str, coef: Coef, value: int | None) -> bool:
        """Join one more assignment into ``reg``; True when that changed what is known."""
        if reg not in self.coef:
            self.coef[reg], self.value[reg] = coef, value
            return True
        new_coef = _join(self.coef[reg], coef)
        new_value = self.value[reg] if self.value[reg] == value else None
        changed = new_coef != self.coef[reg] or new_value != self.value[reg]
        self.coef[reg], self.value[reg] = new_coef, new_value
        return changed


def _add(a: Coef, b: Coef) -> Coef:
    if a == 0 or b == 0:
        return b if a == 0 else a
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return NOT_AFFINE if NOT_AFFINE in (a, b) else RUNTIME


def _transfer(flow: _Flow, opcode: str, operands: list[str]) -> tuple[Coef, int | None]:
    """The coefficient and constant value of an instruction's result."""
    head = opcode.split(".")[0]
    src = operands[1:]
    coefs = [flow.coef_of(s) for s in src]
    values = [flow.value_of(s) for s in src]
    if head in ("mov", "cvt", "cvta") and len(src) == 1:
        return coefs[0], values[0]
    if head in ("add", "sub") and len(src) == 2:
        sign = 1 if head == "add" else -1
        value = None if values[0] is None or values[1] is None else values[0] + sign * values[1]
        return _add(coefs[0], _scale(coefs[1], sign)), value
    if head == "mul" and len(src) == 2:
        return _product(coefs, values), _times(values[0], values[1])
    if head == "mad" and len(src) == 3:
        return _add(_product(coefs[:2], values[:2]), coefs[2]), None
    if head == "shl" and len(src) == 2 and values[1] is not None:
        return _scale(coefs[0], 1 << values[1]), _times(values[0], 1 << values[1])
    if head == "neg" and len(src) == 1:
        return _scale(coefs[0], -1), None if values[0] is None else -values[0]
    if head == "ld" and src:
        return (0 if flow.coef_of(_address(src[0])) == 0 else NOT_AFFINE), None
    return (0 if all(c == 0 for c in coefs) else NOT_AFFINE), None


def _times(a: int | None, b: int | None) -> int | None:
    return a * b if a is not None and b is not None else None


def _product(coefs: list[Coef], values: list[int | None]) -> Coef:
    a, b = coefs
    if a != 0 and b != 0:
        return NOT_AFFINE  # tid.x squared
    return _scale(a, values[1]) if a != 0 else _scale(b, values[0])


def strided_accesses(body: str) -> tuple[StridedAccess, ...]:
    """The global loads and stores of one entry whose neighbouring threads are further apart than
    the bytes each moves (from the dataflow pass in the module docstring)."""
    instructions = _instructions(body)
    flow = _Flow()
    for _ in range(12):  # to a fixed point: loop-carried registers join their updates
        changed = False
        for opcode, text in instructions:
            operands = _split_operands(text)
            if not operands or opcode.split(".")[0] in ("st", "bra", "ret", "bar", "setp", "red", "atom"):
                continue
            dest = operands[0]
            if "|" in dest or not _REG.match(dest) or dest.startswith("%p"):
                continue
            coef, value = _transfer(flow, opcode, operands)
            changed |= flow.assign(dest, coef, value)
        if not changed:
            break
    found = []
    for opcode, text in instructions:
        parts = opcode.split(".")
        if parts[0] not in ("ld", "st") or "global" not in parts:
            continue
        coef = flow.coef_of(_address(_split_operands(text)[1 if parts[0] == "ld" else 0]))
        width = _width(opcode)
        if coef is RUNTIME or (isinstance(coef, int) and abs(coef) > width):
            kind = "load" if parts[0] == "ld" else "store"
            stride = abs(coef) if isinstance(coef, int) else None
            found.append(StridedAccess(kind, width, stride, f"{opcode} {text.strip()}"))
    return tuple(found)


def _split_operands(text: str) -> list[str]:
    """Operands split at top-level commas and stripped (vector operands ``{%f1, %f2}`` stay whole)."""
    out = []
    depth = begun = 0
    for i, char in enumerate(text):
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            out.append(text[begun:i].strip())
            begun = i + 1
    if text[begun:]:
        out.append(text[begun:].strip())
    return out


def _address(operand: str) -> str:
    """The register of an address operand: ``[%rd4+16]`` -> ``%rd4``."""
    return operand.strip().strip("[]").split("+")[0].strip()
