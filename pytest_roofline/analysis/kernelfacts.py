"""Static facts about a GPU kernel from the compiler: resources, occupancy, instruction mix. No CuPy here.

:func:`static_facts` reads CUDA C++ source; :func:`facts_for` a CuPy ``RawKernel``/``RawModule``, a
:class:`CudaKernel`, a Triton kernel (no compile) or a callable listing such in ``roofline_kernels``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RooflineUsageError
from ..model.core import did_you_mean
from . import ptx as ptxlib
from . import sass as sasslib
from .compiler import CompileError, ToolchainUnavailable, compile_source, demangle
from .occupancy import ArchError, Occupancy, limits_for, normalize_arch, occupancy


class KernelFactsError(RooflineUsageError, ValueError):
    """A kernel name the source does not define, or a bad argument; the message names it."""


@dataclass(frozen=True, slots=True)
class ResourceUsage:
    """ptxas's ``--resource-usage`` line for one kernel."""

    registers: int
    spill_stores: int = 0  # bytes
    spill_loads: int = 0  # bytes
    stack_frame: int = 0  # bytes of local memory per thread
    static_smem: int = 0  # bytes per block
    barriers: int = 0


@dataclass(frozen=True, slots=True)
class StaticFacts:
    """What the compiler says about one kernel for one architecture."""

    kernel: str
    arch: str
    origin: str  # "nvcc" or "triton"
    registers: int | None
    spill_stores: int
    spill_loads: int
    stack_frame: int
    static_smem: int
    mix: ptxlib.InstructionMix
    strided: tuple[ptxlib.StridedAccess, ...] = ()
    block: int | None = None
    dynamic_smem: int = 0
    occupancy: Occupancy | None = None
    sass: Mapping[str, int] | None = None
    #: every kernel the compiled source defines (a module may hold several)
    module_kernels: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def smem(self) -> int:
        return self.static_smem + self.dynamic_smem

    @property
    def spilled(self) -> int:
        return self.spill_stores + self.spill_loads

    def to_record(self) -> dict[str, Any]:
        """JSON-ready values (the report's ``facts``)."""
        return {
            "kernel": self.kernel,
            "arch": self.arch,
            "origin": self.origin,
            "registers": self.registers,
            "spill_stores_bytes": self.spill_stores,
            "spill_loads_bytes": self.spill_loads,
            "stack_frame_bytes": self.stack_frame,
            "static_smem_bytes": self.static_smem,
            "dynamic_smem_bytes": self.dynamic_smem,
            "block": self.block,
            "occupancy": None if self.occupancy is None else self.occupancy.to_record(),
            "mix": self.mix.to_record(),
            "strided": [
                {"kind": a.kind, "width": a.width, "stride": a.stride, "ptx": a.line} for a in self.strided
            ],
            "sass": None if self.sass is None else dict(self.sass),
            "module_kernels": list(self.module_kernels),
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Why no static facts could be had (no nvcc, a compile error); said once, in one line."""

    reason: str

    def to_record(self) -> dict[str, Any]:
        return {"unavailable": self.reason}


@dataclass(frozen=True, slots=True)
class CudaKernel:
    """A CUDA C++ kernel by source text (or a ``.cu`` path) and name, for :func:`facts_for`."""

    name: str
    code: str | None = None
    path: str | Path | None = None
    block: int | None = None  # threads per block of the launch, for occupancy
    options: tuple[str, ...] = ()

    def source(self) -> str:
        if (self.code is None) == (self.path is None):
            raise KernelFactsError(f"CudaKernel({self.name!r}) needs exactly one of code= and path=")
        if self.code is not None:
            return self.code
        return read_source(self.path)  # type: ignore[arg-type]


def read_source(path: str | Path) -> str:
    """A ``.cu`` file's text, or a KernelFactsError naming the path."""
    file = Path(path).expanduser()
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KernelFactsError(f"no such file: {str(path)!r}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelFactsError(f"cannot read {str(path)!r}: {exc}") from None


_ENTRY_USAGE = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_USED = re.compile(r"Used (\d+) registers")
_BYTES = re.compile(r"(\d+) bytes (stack frame|spill stores|spill loads|smem)")
_BARRIERS = re.compile(r"used (\d+) barriers")


def resource_usage(log: str) -> dict[str, ResourceUsage]:
    """ptxas's ``-v`` output, per kernel (by its name in the PTX)."""
    usage = {}
    parts = _ENTRY_USAGE.split(log)  # [before, name, arch, text, name, arch, text, ...]
    for name, text in zip(parts[1::3], parts[3::3], strict=True):
        used = _USED.search(text)
        figures = {kind: int(n) for n, kind in _BYTES.findall(text)}
        barriers = _BARRIERS.search(text)
        usage[name] = ResourceUsage(
            registers=int(used.group(1)) if used else 0,
            spill_stores=figures.get("spill stores", 0),
            spill_loads=figures.get("spill loads", 0),
            stack_frame=figures.get("stack frame", 0),
            static_smem=figures.get("smem", 0),
            barriers=int(barriers.group(1)) if barriers else 0,
        )
    return usage


@dataclass(frozen=True, slots=True)
class KernelEntry:
    """One kernel of a compiled module: its PTX ``.entry`` name and the source's names for it."""

    symbol: str  # as the PTX names it: C++-mangled (_Z5scalePfi), or the name itself (extern "C")
    name: str  # the source's identifier, qualified: scale, ns::scale
    signature: str  # scale(float*, int); the symbol where no demangler is installed


def _plain(symbol: str) -> str:
    """A PTX entry's source name, read from its C++ mangling: ``_Z5scalePfi`` -> ``scale``,
    ``_ZN2ns5scaleIfEEvPT_`` -> ``ns::scale``; ``extern "C"`` names unchanged."""
    if not symbol.startswith("_Z"):
        return symbol
    nested = symbol.startswith("_ZN")
    rest = symbol[3 if nested else 2 :]
    parts = []
    while match := re.match(r"\d+", rest):
        end = match.end() + int(match.group())
        part = rest[match.end() : end]
        parts.append("(anonymous namespace)" if part.startswith("_GLOBAL__N") else part)
        rest = rest[end:]
        if not nested or rest.startswith("I"):  # one name, or template arguments: the name is whole
            break
    return "::".join(parts) or symbol


def kernel_entries(ptx: str) -> tuple[KernelEntry, ...]:
    """The kernels a compiled module's PTX defines (one per overload), with source names and signatures."""
    symbols = ptxlib.entries(ptx)
    demangled = demangle([s for s in symbols if s.startswith("_Z")])
    # a template's mangling carries its return type (void)
    return tuple(KernelEntry(s, _plain(s), demangled.get(s, s).removeprefix("void ")) for s in symbols)


def _label(entry: KernelEntry, entries: Sequence[KernelEntry]) -> str:
    """The entry's name, or its signature where an overload shares the name."""
    overloaded = sum(e.name == entry.name for e in entries) > 1
    return entry.signature if overloaded else entry.name


def _listing(entries: Sequence[KernelEntry]) -> str:
    return ", ".join(e.name if _label(e, entries) == e.name else repr(e.signature) for e in entries)


def find_kernel(entries: Sequence[KernelEntry], kernel: str | None, where: str = "the source") -> KernelEntry:
    """The entry ``kernel`` names: its PTX name, its signature (spaces aside), or its name, plain
    (``scale``) or qualified (``ns::scale``) when no overload shares it; None: the only kernel.
    Raises KernelFactsError naming ``where`` and listing the kernels."""
    if not entries:
        raise KernelFactsError(f"{where} defines no kernel (no __global__ function)")
    if kernel is None:
        if len(entries) == 1:
            return entries[0]
        raise KernelFactsError(f"--kernel is required: {where} defines {_listing(entries)}")
    for entry in entries:
        if kernel == entry.symbol or re.sub(r"\s+", "", kernel) == re.sub(r"\s+", "", entry.signature):
            return entry
    # the name as written first: `scale` is the global one even where an `ns::scale` exists too
    named = [e for e in entries if kernel == e.name] or [
        e for e in entries if kernel == e.name.rpartition("::")[2]
    ]
    if len(named) == 1:
        return named[0]
    if named:
        listed = ", ".join(repr(e.signature) for e in named)
        how = "overloaded" if len({e.name for e in named}) == 1 else "ambiguous"
        raise KernelFactsError(f"kernel {kernel!r} is {how} in {where}: {listed}; name one of them")
    names = list(dict.fromkeys(e.name for e in entries))
    raise KernelFactsError(
        f"kernel {kernel!r} is not defined in {where}{did_you_mean(kernel, names)}; it defines: "
        + _listing(entries)
    )


def static_facts(
    source: str,
    kernel: str | None,
    arch: str,
    block: int | None = None,
    *,
    dynamic_smem: int = 0,
    options: Sequence[str] = (),
    cache_dir: Path | str | None = None,
    where: str = "the source",
) -> StaticFacts:
    """Compile CUDA C++ ``source`` for ``arch`` (cached) and read ``kernel``'s facts.

    ``kernel``: as :func:`find_kernel` takes it (None: the only kernel ``source`` defines); ``block``:
    threads per block of the launch (no occupancy without it); ``where``: the source's name in errors.
    Raises :class:`~.occupancy.ArchError` or :class:`KernelFactsError` (ValueErrors) for a bad argument,
    :class:`~.compiler.ToolchainUnavailable` without nvcc, :class:`~.compiler.CompileError` if nvcc fails."""
    target = normalize_arch(arch)
    if block is not None and (
        isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= 1024
    ):
        raise KernelFactsError(f"block must be a thread count from 1 to 1024; got {block!r}")
    compiled = compile_source(source, target, options=tuple(options), cache_dir=cache_dir)
    if kernel is not None and kernel in ptxlib.entries(compiled.ptx):
        name, label = kernel, kernel  # a PTX name (a RawModule's entry, extern "C"): nothing to demangle
    else:
        entries = kernel_entries(compiled.ptx)
        found = find_kernel(entries, kernel, where)
        name, label = found.symbol, _label(found, entries)
    return _facts(
        kernel=label,
        arch=target,
        origin="nvcc",
        ptx=compiled.ptx,
        entry=name,
        usage=resource_usage(compiled.resource_usage).get(name, ResourceUsage(registers=0)),
        block=block,
        dynamic_smem=dynamic_smem,
        sass=None if compiled.sass is None else sasslib.counts(compiled.sass, name),
        notes=[] if compiled.sass is not None else ["no SASS counts: cuobjdump is not available"],
    )


def _facts(
    *,
    kernel: str,
    arch: str,
    origin: str,
    ptx: str,
    entry: str,
    usage: ResourceUsage,
    block: int | None,
    dynamic_smem: int,
    sass: Mapping[str, int] | None,
    notes: list[str],
) -> StaticFacts:
    body = ptxlib.entry_body(ptx, entry)
    _check_launch(kernel, arch, body, block, usage.static_smem, dynamic_smem)
    occ = None if block is None else occupancy(arch, block, usage.registers, usage.static_smem + dynamic_smem)
    return StaticFacts(
        kernel=kernel,
        arch=arch,
        origin=origin,
        registers=usage.registers,
        spill_stores=usage.spill_stores,
        spill_loads=usage.spill_loads,
        stack_frame=usage.stack_frame,
        static_smem=usage.static_smem,
        mix=ptxlib.instruction_mix(body),
        strided=ptxlib.strided_accesses(body),
        block=block,
        dynamic_smem=dynamic_smem,
        occupancy=occ,
        sass=sass,
        module_kernels=ptxlib.entries(ptx),
        notes=tuple(notes),
    )


def _check_launch(
    kernel: str, arch: str, body: str, block: int | None, static_smem: int, dynamic_smem: int
) -> None:
    """KernelFactsError naming the parameter for a launch that cannot run (see also :func:`occupancy`)."""
    if isinstance(dynamic_smem, bool) or not isinstance(dynamic_smem, int) or dynamic_smem < 0:
        raise KernelFactsError(f"dynamic_smem must be a byte count (0 or more); got {dynamic_smem!r}")
    most = limits_for(arch).smem_per_block_optin
    if dynamic_smem and static_smem + dynamic_smem > most:
        raise KernelFactsError(
            f"dynamic_smem={dynamic_smem} bytes cannot run {kernel} on {arch}: with its {static_smem} B of "
            f"static shared memory, over the {most} bytes a block may have"
        )
    bound = ptxlib.max_threads(body)
    if block is not None and bound is not None and block > bound:
        raise KernelFactsError(
            f"block={block} cannot run {kernel}: its __launch_bounds__ allow {bound} threads per block"
        )


def triton_facts(compiled: Any, arch: str | None = None) -> StaticFacts:
    """Facts of a Triton compiled kernel (duck-typed, never imported): ``.asm["ptx"]``, ``.n_regs`` and
    ``.n_spills`` (4-byte words; set once loaded), ``.metadata``'s ``shared``, ``num_warps`` and, unless
    ``arch`` is given, ``target.arch``."""
    ptx_text = compiled.asm["ptx"]
    metadata = getattr(compiled, "metadata", None)
    if arch is None:
        target = getattr(getattr(metadata, "target", None), "arch", None)
        if target is None:
            match = re.search(r"^\s*\.target\s+(sm_\w+)", ptx_text, re.MULTILINE)
            target = match.group(1) if match else None
        if target is None:
            raise KernelFactsError("a Triton kernel without metadata.target.arch needs arch=...")
        arch = f"sm_{target}" if isinstance(target, int) else str(target)
    entries = ptxlib.entries(ptx_text)
    if not entries:
        raise KernelFactsError("the Triton kernel's asm['ptx'] defines no .entry")
    regs = getattr(compiled, "n_regs", None)
    warps = getattr(metadata, "num_warps", None)
    notes = [] if regs is not None else ["registers unknown: the Triton kernel is not loaded yet"]
    usage = ResourceUsage(
        registers=int(regs or 0),
        spill_stores=4 * int(getattr(compiled, "n_spills", None) or 0),
        static_smem=int(getattr(metadata, "shared", 0) or 0),
    )
    return _facts(
        kernel=str(getattr(metadata, "name", None) or entries[0]),
        arch=normalize_arch(arch),
        origin="triton",
        ptx=ptx_text,
        entry=entries[0],
        usage=usage,
        block=32 * int(warps) if isinstance(warps, int) else None,
        dynamic_smem=0,
        sass=None,
        notes=notes,
    )


#: NVRTC options CuPy passes that mean the same to nvcc; the rest are left out
_PORTABLE_OPTION = re.compile(r"^(?:-D|-I|-U|-std=|--std=|--use_fast_math|-use_fast_math|-lineinfo)")


def _is_triton(obj: Any) -> bool:
    asm = getattr(obj, "asm", None)
    return isinstance(asm, Mapping) and "ptx" in asm


def _kernels_of(obj: Any) -> list[Any] | None:
    """The kernel objects ``obj`` stands for, or None when it is no CUDA kernel at all."""
    if isinstance(obj, (list, tuple)):
        found = [_kernels_of(item) for item in obj]
        return None if any(f is None for f in found) else [k for f in found if f for k in f]
    if isinstance(obj, CudaKernel) or _is_triton(obj) or isinstance(getattr(obj, "code", None), str):
        return [obj]
    declared = getattr(obj, "roofline_kernels", None)
    return None if declared is None else _kernels_of(declared)


def facts_for(
    kernel: Any,
    *,
    arch: str,
    block: int | None = None,
    cache_dir: Path | str | None = None,
) -> tuple[StaticFacts, ...] | Unavailable | None:
    """The static facts of the kernel(s) a test passes (see the module docstring), one entry per kernel
    (a RawModule's every kernel), or None; ``block`` for kernels that carry none of their own (a
    :class:`CudaKernel`'s ``block``, a Triton kernel's warps). ArchError for an unknown ``arch``."""
    kernels = _kernels_of(kernel)
    if not kernels:
        return None
    normalize_arch(arch)
    facts: list[StaticFacts] = []
    try:
        for k in kernels:
            facts.extend(_one(k, arch, block, cache_dir))
    except (ToolchainUnavailable, CompileError, KernelFactsError, ArchError) as exc:
        return Unavailable(str(exc))
    return tuple(facts)


def _one(k: Any, arch: str, block: int | None, cache_dir: Path | str | None) -> list[StaticFacts]:
    if _is_triton(k):
        return [triton_facts(k, arch)]
    if isinstance(k, CudaKernel):
        return [
            static_facts(k.source(), k.name, arch, k.block or block, options=k.options, cache_dir=cache_dir)
        ]
    options = tuple(o for o in getattr(k, "options", ()) or () if _PORTABLE_OPTION.match(str(o)))
    name = getattr(k, "name", None)
    if isinstance(name, str) and name:  # a RawKernel
        return [static_facts(k.code, name, arch, block, options=options, cache_dir=cache_dir)]
    # a RawModule: every kernel it defines (one compile, cached)
    compiled = compile_source(k.code, normalize_arch(arch), options=options, cache_dir=cache_dir)
    return [
        static_facts(k.code, entry, arch, block, options=options, cache_dir=cache_dir)
        for entry in ptxlib.entries(compiled.ptx)
    ]


def load_source(spec: str) -> str:
    """The CUDA source of a ``.cu`` path or ``FILE.py:NAME`` (``roofline analyze``): ``NAME`` a source
    string or an object with a ``.code`` string (a RawKernel, a RawModule), dots and mapping keys reaching
    into objects (``CUDA_SOURCES.transpose_naive``). Raises KernelFactsError naming what is missing."""
    path, sep, attr = spec.rpartition(":")
    if sep and attr and path.endswith(".py"):
        return _python_source(path, attr)
    return read_source(spec)


def _python_source(path: str, attr: str) -> str:
    import importlib.util
    import sys

    file = Path(path).expanduser()
    if not file.is_file():
        raise KernelFactsError(f"no such file: {path!r}")
    name = f"_roofline_source_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise KernelFactsError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while a class is built
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        # its sys.exit must not end the command; repr keeps the message on one line
        raise KernelFactsError(f"{path}: importing it raised {exc!r}") from None
    finally:
        sys.modules.pop(name, None)
    value: Any = module
    for step in attr.split("."):
        if isinstance(value, Mapping) and step in value:
            value = value[step]
        elif hasattr(value, step):
            value = getattr(value, step)
        else:
            choices = (
                list(value)
                if isinstance(value, Mapping)
                else [n for n in dir(value) if not n.startswith("_")]
            )
            raise KernelFactsError(f"{path} has no {attr!r}{did_you_mean(step, choices)}")
    code = value if isinstance(value, str) else getattr(value, "code", None)
    if not isinstance(code, str):
        raise KernelFactsError(f"{path}:{attr} is neither a CUDA source string nor an object with .code")
    return code
