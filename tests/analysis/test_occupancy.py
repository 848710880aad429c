"""Theoretical occupancy against hand-computed values (CUDA's occupancy calculator's arithmetic).

256-thread blocks are 8 warps. Registers are allocated per warp in units of 256, per
sub-partition (16384 registers each): 32 regs -> 1024 per warp -> 16 warps per sub-partition,
64 in all -> 8 blocks; 64 regs -> 8 blocks' worth halved -> 4; 128 regs -> 2. The warp limit is
64/8 = 8 blocks on sm_80 and sm_90, 48/8 = 6 on sm_86 and sm_89.
"""

from __future__ import annotations

import pytest

from pytest_roofline.analysis.occupancy import (
    ARCHES,
    DEVICE_ARCH,
    KIB,
    ArchError,
    limits_for,
    normalize_arch,
    occupancy,
)


@pytest.mark.parametrize(
    ("arch", "registers", "blocks", "warps", "limiter"),
    [
        ("sm_80", 32, 8, 64, "registers"),  # registers and warps both allow 8: registers named first
        ("sm_80", 64, 4, 32, "registers"),
        ("sm_80", 128, 2, 16, "registers"),
        ("sm_86", 32, 6, 48, "warps"),
        ("sm_86", 64, 4, 32, "registers"),
        ("sm_86", 128, 2, 16, "registers"),
        ("sm_89", 32, 6, 48, "warps"),
        ("sm_89", 64, 4, 32, "registers"),
        ("sm_89", 128, 2, 16, "registers"),
        ("sm_90", 32, 8, 64, "registers"),
        ("sm_90", 64, 4, 32, "registers"),
        ("sm_90", 128, 2, 16, "registers"),
    ],
)
def test_256_thread_blocks_by_registers(
    arch: str, registers: int, blocks: int, warps: int, limiter: str
) -> None:
    occ = occupancy(arch, 256, registers)
    assert (occ.blocks_per_sm, occ.active_warps, occ.limiter) == (blocks, warps, limiter)
    assert occ.fraction == warps / ARCHES[arch].max_warps_per_sm


def test_each_limit_is_reported() -> None:
    occ = occupancy("sm_86", 256, 64, 48 * KIB)
    # 48 KiB + the reserved 1 KiB = 49 KiB: two fit in 100 KiB
    assert dict(occ.limits) == {"registers": 4, "shared memory": 2, "warps": 6, "blocks": 16}
    assert occ.limiter == "shared memory"
    assert occ.to_record()["limits"] == dict(occ.limits)


def test_the_sm86_shared_memory_cliff_of_the_procedure() -> None:
    """48 KB/block -> 2 blocks/SM, 56 KB/block -> 1 (kernel-bottleneck-procedure.md step 6)."""
    assert occupancy("sm_86", 128, 32, 48 * KIB).blocks_per_sm == 2
    assert occupancy("sm_86", 128, 32, 56 * KIB).blocks_per_sm == 1
    cliff = limits_for("sm_86").smem_cliff
    assert cliff == 49 * KIB  # half of 100 KiB, less the driver's reserved 1 KiB per block
    assert occupancy("sm_86", 128, 32, cliff).blocks_per_sm == 2
    assert occupancy("sm_86", 128, 32, cliff + 1).blocks_per_sm == 1


def test_cliffs_of_other_architectures() -> None:
    assert limits_for("sm_80").smem_cliff == 81 * KIB  # 164 KiB / 2 - 1
    assert limits_for("sm_90").smem_cliff == 113 * KIB  # 228 KiB / 2 - 1
    assert limits_for("sm_75").smem_cliff == 32 * KIB  # no reserve before sm_80


def test_register_allocation_rounds_up_per_warp() -> None:
    # 40 regs x 32 = 1280 per warp: 12 warps per 16384-register sub-partition, 48 per SM
    assert occupancy("sm_80", 256, 40).limits[0] == ("registers", 6)
    # 33 regs -> 1056, rounded to 1280 as well
    assert occupancy("sm_80", 256, 33).limits[0] == ("registers", 6)


def test_the_largest_block_the_registers_allow_runs() -> None:
    occ = occupancy("sm_90", 768, 80)  # 24 warps: exactly what 80 registers per thread allow
    assert (occ.blocks_per_sm, occ.limiter) == (1, "registers")


def test_small_blocks_hit_the_block_limit() -> None:
    occ = occupancy("sm_86", 32, 16)
    assert (occ.blocks_per_sm, occ.limiter, occ.active_warps) == (16, "blocks", 16)


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [("sm_90", "sm_90"), ("sm90", "sm_90"), ("90", "sm_90"), ("9.0", "sm_90"), ("sm_90a", "sm_90a"),
     ("compute_86", "sm_86"), ("SM_89", "sm_89")],
)  # fmt: skip
def test_architecture_spellings(spelling: str, expected: str) -> None:
    assert normalize_arch(spelling) == expected


def test_sm_90a_has_sm_90s_limits() -> None:
    assert limits_for("sm_90a") is ARCHES["sm_90"]


def test_unknown_architecture_is_named_with_a_suggestion() -> None:
    with pytest.raises(ArchError, match=r"unknown architecture 'sm_9' \(did you mean 'sm_90'\?\)"):
        normalize_arch("sm_9")
    with pytest.raises(ArchError, match="unknown architecture 'kepler'"):
        occupancy("kepler", 256, 32)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block": 2048}, "block=2048 is over sm_90's 1024 threads per block"),
        ({"block": 0}, "block must be a positive integer; got 0"),
        ({"registers": 300}, "registers=300 is over sm_90's 255 per thread"),
        ({"smem": 300 * KIB}, "smem=307200 bytes is over sm_90's 232448 bytes per block"),
        ({"registers": 1.5}, "registers must be a non-negative integer; got 1.5"),
        # 72 regs -> 2304 per warp: 7 warps per sub-partition, 28 per SM, and the block is 32
        ({"block": 1024, "registers": 72},
         "block=1024 cannot run on sm_90 with registers=72 per thread: its 32 warps are more than the "
         "28 an SM's registers hold at 72 per thread"),
        # 80 regs: 6 warps per sub-partition, 24 per SM, though 25 warps' 64000 registers are < 65536
        ({"block": 800, "registers": 80}, "block=800 cannot run on sm_90 with registers=80 per thread"),
    ],
)  # fmt: skip
def test_impossible_launches_are_named(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"block": 256, "registers": 32, "smem": 0, **kwargs}
    with pytest.raises(ArchError, match=message.replace("(", r"\(")):
        occupancy("sm_90", **args)  # type: ignore[arg-type]


def test_a_table_device_to_its_arch() -> None:
    assert DEVICE_ARCH.get("h100-sxm") == "sm_90"
    assert DEVICE_ARCH.get("a10") == "sm_86"
    assert DEVICE_ARCH.get("cpu") is None


def test_every_table_gpu_has_an_architecture_with_limits() -> None:
    from pytest_roofline.model.devices import table

    for key, device in table().items():
        if device.kind == "cuda":
            assert DEVICE_ARCH.get(key) is not None, key
            limits_for(DEVICE_ARCH.get(key) or "")
