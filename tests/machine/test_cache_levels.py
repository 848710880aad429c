"""The cache levels: read from a fake /sys, their roofs never below a larger level's or DRAM's, the
level a warm op is judged at (boundaries included), and the cache-aware estimate."""

from pathlib import Path

import pytest

from pytest_roofline.machine import cachelevels
from pytest_roofline.machine.cachelevels import level_details, levels_of, rates_from_details
from pytest_roofline.model.core import LEVEL_FILL, Figure, MemoryLevel, Source, at_level
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.estimate import estimate
from pytest_roofline.timing.host_caches import CacheInfo, cpu_caches

MiB = 2**20
LLC = 32 * MiB


# -- cache levels -------------------------------------------------------------------------------


def fake_sysfs(root: Path, entries: list[tuple[int, str, str, str]]) -> Path:
    for i, (level, kind, size, shared) in enumerate(entries):
        index = root / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")
        (index / "shared_cpu_list").write_text(f"{shared}\n")
    return root


def test_levels_come_from_sysfs_data_and_unified_caches(tmp_path: Path) -> None:
    root = fake_sysfs(
        tmp_path,
        [(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"), (2, "Unified", "2048K", "0"),
         (3, "Unified", "516096K", "0-1,4-5")],
    )  # fmt: skip
    assert cpu_caches(root) == (
        CacheInfo(1, 48 * 2**10, per_core=True),
        CacheInfo(2, 2 * MiB, per_core=True),
        CacheInfo(3, 504 * MiB, per_core=False),
    )
    assert cpu_caches(tmp_path / "absent") == ()


def test_a_roof_is_never_below_a_larger_levels_or_drams() -> None:
    caches = (CacheInfo(1, 48 * 2**10, True), CacheInfo(2, 2 * MiB, True), CacheInfo(3, 32 * MiB, False))
    rates = {"l1": (70e9, "copy 24 KiB"), "l2": (160e9, "dot 1 MiB"), "l3": (10e9, "dot 16 MiB")}
    l1, l2, l3 = levels_of(caches, rates, dram=20e9)
    assert [level.name for level in (l1, l2, l3)] == ["l1", "l2", "l3"]
    assert l3.bandwidth.value == 20e9  # measured below DRAM: raised to it
    assert l2.bandwidth.value == 160e9
    assert l1.bandwidth.value == 160e9  # numpy's L1 call overhead: raised to the L2's roof
    assert "raised to the larger level's roof" in l1.bandwidth.note
    assert l1.per_core
    assert not l3.per_core
    assert rates_from_details(level_details(rates)) == rates


def test_measured_rates_name_the_kernel_and_are_positive() -> None:
    # a real, tiny measurement (no assertion on its speed): each level gets a rate and a kernel's name
    rates = cachelevels.measure_level_rates((CacheInfo(1, 64 * 2**10, True),))
    ((rate, how),) = rates.values()
    assert rate > 0
    assert how.split()[0] in ("copy", "add", "dot")


LEVELS = (
    MemoryLevel("l1", 48 * 2**10, Figure(200e9, Source.MEASURED), per_core=True),
    MemoryLevel("l2", 2 * MiB, Figure(150e9, Source.MEASURED), per_core=True),
    MemoryLevel("l3", 32 * MiB, Figure(60e9, Source.MEASURED)),
)


@pytest.mark.parametrize(
    ("nbytes", "level"),
    [
        (1, "l1"),
        (LEVEL_FILL * 48 * 2**10, "l1"),  # at 3/4 of the L1: still the L1
        (LEVEL_FILL * 48 * 2**10 + 1, "l2"),
        (LEVEL_FILL * 2 * MiB, "l2"),
        (LEVEL_FILL * 2 * MiB + 1, "l3"),
        (LEVEL_FILL * 32 * MiB, "l3"),
        (LEVEL_FILL * 32 * MiB + 1, None),  # DRAM
    ],
)
def test_a_warm_op_is_served_by_the_smallest_level_that_holds_it(nbytes: float, level: str | None) -> None:
    device = lookup("h100-sxm")
    from dataclasses import replace

    found = replace(device, levels=LEVELS).level_for(nbytes)
    assert (found.name if found is not None else None) == level


def test_the_cache_aware_estimate_takes_the_levels_bandwidth() -> None:
    est = estimate("copy", n=2**16, dtype="fp32", device="h100-sxm")
    warm = at_level(est, LEVELS[1])
    assert warm.memory_level == "l2"
    assert est.memory_level == "dram"
    assert warm.bandwidth == 150e9
    assert warm.memory_s == pytest.approx(est.bytes / 150e9)
    assert warm.floor_s == pytest.approx(max(warm.compute_s or 0.0, warm.memory_s))
    assert warm.bandwidth_source is Source.MEASURED
    assert warm.ridge == pytest.approx(warm.peak_flops / 150e9)  # type: ignore[operator]


def test_a_bad_capacity_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity must be a positive integer; got 0"):
        MemoryLevel("l1", 0, Figure(1.0, Source.MEASURED))
