"""The CUDA toolkit as a fact source: nvcc's PTX, ptxas's resource usage, cuobjdump's SASS.

Each output is cached on disk; without nvcc, :func:`compile_source` raises :class:`ToolchainUnavailable`.
The steps and the cache's key: docs/architecture.md ("The layers").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import RooflineUsageError, UnavailableError
from ..machine import files

#: seconds one nvcc call may take before it is given up on
COMPILE_TIMEOUT_S = 300


class ToolchainUnavailable(UnavailableError):
    """nvcc is not installed (or not found); the message says where it was looked for."""


class CompileError(RooflineUsageError, ValueError):
    """nvcc rejected the source; the message carries its first error lines."""


@dataclass(frozen=True, slots=True)
class Compiled:
    """What the toolkit said about one source for one architecture."""

    arch: str
    ptx: str
    resource_usage: str  # ptxas's "-v" lines
    sass: str | None  # None where cuobjdump is not available
    cached: bool = False


def find_tool(name: str) -> str | None:
    """``name`` on PATH, in ``$CUDA_HOME/bin`` or ``$CUDA_PATH/bin``, or beside this Python (a wheel)."""
    found = shutil.which(name)
    if found:
        return found
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), sys.prefix]
    for root in filter(None, roots):
        candidate = Path(root) / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def compile_source(
    source: str,
    arch: str,
    *,
    options: Sequence[str] = (),
    cache_dir: Path | str | None = None,
) -> Compiled:
    """PTX, resource usage and (where possible) SASS of CUDA C++ ``source`` for ``arch`` (``sm_90``),
    cached under ``cache_dir`` (default: the plugin's cache directory, ``kernels/``)."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise ToolchainUnavailable(
            "nvcc is not available (not on PATH, nor in $CUDA_HOME/bin): static kernel facts need the "
            "CUDA toolkit (not a GPU)"
        )
    directory = Path(cache_dir) if cache_dir is not None else files.cache_dir() / "kernels"
    stat = os.stat(nvcc)  # a reinstalled nvcc compiles afresh
    ident = json.dumps([source, arch, list(options), nvcc, stat.st_size, stat.st_mtime_ns])
    entry = directory / hashlib.sha256(ident.encode()).hexdigest()[:32]
    cached = _read_cache(entry, arch)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="roofline-nvcc-") as tmp:
        work = Path(tmp)
        (work / "kernel.cu").write_text(source, encoding="utf-8")
        target = [f"-arch={arch}", *options]
        _run([nvcc, "--ptx", *target, "-o", "kernel.ptx", "kernel.cu"], work)
        usage = _run([nvcc, "-cubin", *target, "--resource-usage", "-o", "kernel.cubin", "kernel.ptx"], work)
        ptx = (work / "kernel.ptx").read_text(encoding="utf-8")
        cuobjdump = find_tool("cuobjdump")
        sass = None if cuobjdump is None else _stdout([cuobjdump, "-sass", str(work / "kernel.cubin")])
    compiled = Compiled(arch, ptx, usage, sass)
    _write_cache(entry, compiled)
    return compiled


def _run(cmd: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise CompileError(f"{' '.join(cmd[:3])} ...: timed out after {COMPILE_TIMEOUT_S} s") from None
    if done.returncode != 0:
        errors = [line for line in (done.stderr + done.stdout).splitlines() if "error" in line.lower()]
        detail = "; ".join(line.replace("kernel.cu", "source").strip() for line in errors[:3])
        raise CompileError(f"nvcc could not compile the kernel source: {detail or done.stderr.strip()}")
    return done.stdout + done.stderr


def _stdout(cmd: list[str]) -> str | None:
    """What a helper tool printed, or None where it could not run or failed."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def demangle(symbols: Sequence[str]) -> dict[str, str]:
    """Each C++ symbol's source form (``_Z5scalePfi`` -> ``scale(float*, int)``), by binutils' ``c++filt``
    or else the toolkit's ``cu++filt`` (:func:`source_form`); best effort: a symbol not read is left out."""
    binutils = find_tool("c++filt")
    tool = binutils or find_tool("cu++filt")
    if tool is None or not symbols:
        return {}
    lines = (_stdout([tool, *symbols]) or "").splitlines()
    if len(lines) != len(symbols):
        return {}
    # binutils' lines are its form already: a type of the user's named T1 stays T1
    read = (lambda line: line) if binutils else source_form
    return {symbol: read(line.strip()) for symbol, line in zip(symbols, lines, strict=True)}


def source_form(text: str) -> str:
    """A ``cu++filt`` line nearer binutils' form: the spaces before ``*`` and ``&`` go, and each EDG
    ``Tn`` in the parameter list becomes the template's n-th argument (``ns::scale<float>(T1 *)`` ->
    ``ns::scale<float>(float*)``). Const placement and non-type casts (``(int)4``) stay as EDG wrote them."""
    text = re.sub(r"\s+(?=[*&])", "", text)
    opening = _parameters_start(text)
    if opening is None:
        return text
    head, parameters = text[:opening], text[opening:]
    arguments = _template_arguments(head)
    if not arguments:
        return text

    def argument(match: re.Match[str]) -> str:
        n = int(match.group(1))
        return arguments[n - 1] if 1 <= n <= len(arguments) else match.group(0)

    return head + re.sub(r"\bT(\d+)\b", argument, parameters)


def _parameters_start(text: str) -> int | None:
    """Where the parameter list's ``(`` is: the first outside template brackets, past any
    ``(anonymous namespace)``."""
    depth = 0
    for i, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0 and not text.startswith("(anonymous namespace)", i):
            return i
    return None


def _template_arguments(name: str) -> list[str]:
    """The arguments of the template ``name`` ends in (``scale<float, 4>`` -> float, 4), or none."""
    if not name.endswith(">"):
        return []
    depth, start = 0, None
    for i in range(len(name) - 1, -1, -1):
        depth += {">": 1, "<": -1}.get(name[i], 0)
        if depth == 0:
            start = i
            break
    if start is None:
        return []
    inner, arguments, depth, begun = name[start + 1 : -1], [], 0, 0
    for i, char in enumerate(inner):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            arguments.append(inner[begun:i].strip())
            begun = i + 1
    arguments.append(inner[begun:].strip())
    return arguments


def _read_cache(entry: Path, arch: str) -> Compiled | None:
    try:
        ptx = (entry / "kernel.ptx").read_text(encoding="utf-8")
        usage = (entry / "resource-usage.txt").read_text(encoding="utf-8")
    except OSError:
        return None
    sass_file = entry / "kernel.sass"
    sass = sass_file.read_text(encoding="utf-8") if sass_file.is_file() else None
    return Compiled(arch, ptx, usage, sass, cached=True)


def _write_cache(entry: Path, compiled: Compiled) -> None:
    """Best effort: a read-only cache directory only costs the next compile."""
    try:
        entry.mkdir(parents=True, exist_ok=True)
        if compiled.sass is not None:
            _write(entry / "kernel.sass", compiled.sass)
        _write(entry / "kernel.ptx", compiled.ptx)
        # written last: its presence says the entry is complete
        _write(entry / "resource-usage.txt", compiled.resource_usage)
    except OSError:
        pass


def _write(path: Path, text: str) -> None:
    """Whole or not at all: another worker (pytest-xdist) may be reading the same entry."""
    with files.writing_atomically(path) as out:
        out.write(text)
