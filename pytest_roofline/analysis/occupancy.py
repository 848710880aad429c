"""Theoretical occupancy: how many blocks of a kernel fit on one SM, and which resource says so.

Pure arithmetic, as CUDA's occupancy calculator does it (docs/architecture.md, "The layers"), on limits
from the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability" and, for the
granularities and sm_100/sm_120's block limits, ``cuda_occupancy.h`` (CUDA 13.0)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import RooflineUsageError
from ..model.core import did_you_mean

KIB = 1024
#: below this many resident warps per SM latency hiding is structurally short (the procedure's
#: threshold, from GA104: kernel-bottleneck-procedure.md step 3)
LATENCY_HIDING_WARPS = 8


class ArchError(RooflineUsageError, ValueError):
    """An architecture the table does not know, or a launch no SM can hold; the message says which."""


@dataclass(frozen=True, slots=True)
class ArchLimits:
    """One compute capability's per-SM limits."""

    arch: str  # "sm_86"
    max_warps_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int  # bytes: the largest shared-memory carveout
    smem_per_block_optin: int  # bytes: the most one block may use (dynamic, after opting in)
    reserved_smem_per_block: int  # bytes the driver keeps per block
    smem_granularity: int = 128  # bytes
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    max_threads_per_block: int = 1024
    reg_alloc_unit: int = 256  # registers, per warp
    sub_partitions: int = 4
    warp_size: int = 32

    @property
    def smem_cliff(self) -> int:
        """The most shared memory per block (bytes) at which two blocks still fit on one SM: one byte
        more and only one fits (the "shared memory cliff"; docs/architecture.md, "The layers")."""
        half = self.smem_per_sm // 2
        return half - half % self.smem_granularity - self.reserved_smem_per_block


#: Per-SM limits by architecture (sources: the module docstring).
ARCHES: dict[str, ArchLimits] = {
    limits.arch: limits
    for limits in (
        ArchLimits("sm_70", 64, 32, 96 * KIB, 96 * KIB, 0, smem_granularity=256),
        ArchLimits("sm_75", 32, 16, 64 * KIB, 64 * KIB, 0, smem_granularity=256),
        ArchLimits("sm_80", 64, 32, 164 * KIB, 163 * KIB, KIB),
        ArchLimits("sm_86", 48, 16, 100 * KIB, 99 * KIB, KIB),
        ArchLimits("sm_87", 48, 16, 164 * KIB, 163 * KIB, KIB),
        ArchLimits("sm_89", 48, 24, 100 * KIB, 99 * KIB, KIB),
        ArchLimits("sm_90", 64, 32, 228 * KIB, 227 * KIB, KIB),
        ArchLimits("sm_100", 64, 32, 228 * KIB, 227 * KIB, KIB),
        # compute capability 10.3 (Blackwell Ultra): sm_100's limits, unconfirmed for 10.3
        ArchLimits("sm_103", 64, 32, 228 * KIB, 227 * KIB, KIB),
        ArchLimits("sm_120", 48, 24, 128 * KIB, 99 * KIB, KIB),
    )
}

#: the architecture of each GPU in the device table (hardware.md section 1: compute capability)
DEVICE_ARCH: dict[str, str] = {
    "v100-sxm2": "sm_70",
    "t4": "sm_75",
    "a100-sxm-40gb": "sm_80",
    "a100-sxm-80gb": "sm_80",
    "a100-pcie-80gb": "sm_80",
    "a10": "sm_86",
    "rtx-3070-ti": "sm_86",
    "rtx-3090": "sm_86",
    "l4": "sm_89",
    "l40s": "sm_89",
    "rtx-4090": "sm_89",
    "h100-sxm": "sm_90",
    "h100-pcie": "sm_90",
    "h100-nvl": "sm_90",
    "h200": "sm_90",
    "b200": "sm_100",
    "gb200": "sm_100",
    # compute capability 10.3, as public logs of B300 nodes report it; GB300's taken to be the same
    "b300": "sm_103",
    "gb300": "sm_103",
    "rtx-5090": "sm_120",
}


_ARCH = re.compile(r"^(?:sm_?|compute_)?(\d{2,3})([af]?)$")


def normalize_arch(arch: str) -> str:
    """``sm_90``, ``sm90``, ``90``, ``9.0``, ``sm_90a`` -> the compiler's spelling (``sm_90``, ``sm_90a``);
    an :class:`ArchError` naming the value (and the closest known one) for one the table lacks."""
    text = str(arch).strip().lower()
    text = re.sub(r"^(\d+)\.(\d)$", r"\1\2", text)  # "9.0" -> "90"
    match = _ARCH.match(text)
    if match is None or f"sm_{match.group(1)}" not in ARCHES:
        raise ArchError(
            f"unknown architecture {arch!r}{did_you_mean(str(arch), ARCHES)}; known: {', '.join(ARCHES)}"
        )
    return f"sm_{match.group(1)}{match.group(2)}"


def limits_for(arch: str) -> ArchLimits:
    """The limits of ``arch`` (any spelling :func:`normalize_arch` takes; ``sm_90a`` is sm_90's)."""
    return ARCHES[re.sub(r"[af]$", "", normalize_arch(arch))]


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Blocks per SM for one launch, each resource's limit, and the one that binds."""

    arch: str
    block: int  # threads per block
    registers: int  # per thread
    smem: int  # bytes per block, static and dynamic (without the driver's reserve)
    #: blocks per SM each resource allows, in the order registers, shared memory, warps, blocks
    limits: tuple[tuple[str, int], ...]
    blocks_per_sm: int
    warps_per_block: int
    max_warps_per_sm: int

    @property
    def limiter(self) -> str:
        """The resource that allows fewest blocks (the first of equals, registers first)."""
        return min(self.limits, key=lambda pair: pair[1])[0]

    @property
    def active_warps(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def fraction(self) -> float:
        """Active warps over the SM's maximum: the theoretical occupancy."""
        return self.active_warps / self.max_warps_per_sm

    def to_record(self) -> dict[str, object]:
        return {
            "arch": self.arch,
            "block": self.block,
            "registers": self.registers,
            "smem_bytes": self.smem,
            "limits": dict(self.limits),
            "blocks_per_sm": self.blocks_per_sm,
            "active_warps": self.active_warps,
            "max_warps": self.max_warps_per_sm,
            "fraction": self.fraction,
            "limiter": self.limiter,
        }


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(arch: str, block: int, registers: int, smem: int = 0) -> Occupancy:
    """Theoretical occupancy of ``block``-thread blocks using ``registers`` per thread and ``smem``
    bytes of shared memory per block on ``arch``; an :class:`ArchError` naming the parameter and
    its value for an unknown architecture or a block no SM can hold."""
    lim = limits_for(arch)
    for name, value in (("block", block), ("registers", registers), ("smem", smem)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "block" else 0):
            least = "a positive" if name == "block" else "a non-negative"
            raise ArchError(f"{name} must be {least} integer; got {value!r}")
    if block > lim.max_threads_per_block:
        raise ArchError(f"block={block} is over {lim.arch}'s {lim.max_threads_per_block} threads per block")
    if registers > lim.max_regs_per_thread:
        raise ArchError(f"registers={registers} is over {lim.arch}'s {lim.max_regs_per_thread} per thread")
    if smem > lim.smem_per_block_optin:
        raise ArchError(f"smem={smem} bytes is over {lim.arch}'s {lim.smem_per_block_optin} bytes per block")

    warps = -(-block // lim.warp_size)
    if registers:
        per_warp = _round_up(registers * lim.warp_size, lim.reg_alloc_unit)
        # registers live in each of the SM's sub-partitions: a warp's must fit in one of them
        fit = lim.regs_per_sm // lim.sub_partitions // per_warp * lim.sub_partitions
        if warps > fit:  # no SM can hold the block: the launch fails, it is not slow
            raise ArchError(
                f"block={block} cannot run on {lim.arch} with registers={registers} per thread: its {warps} "
                f"warps are more than the {fit} an SM's registers hold at {registers} per thread"
            )
        by_registers = fit // warps
    else:
        by_registers = lim.max_blocks_per_sm
    allocated = _round_up(smem + lim.reserved_smem_per_block, lim.smem_granularity)
    by_smem = lim.smem_per_sm // allocated if allocated else lim.max_blocks_per_sm
    limits = (
        ("registers", by_registers),
        ("shared memory", by_smem),
        ("warps", lim.max_warps_per_sm // warps),
        ("blocks", lim.max_blocks_per_sm),
    )
    return Occupancy(
        arch=lim.arch,
        block=block,
        registers=registers,
        smem=smem,
        limits=limits,
        blocks_per_sm=min(n for _, n in limits),
        warps_per_block=warps,
        max_warps_per_sm=lim.max_warps_per_sm,
    )
