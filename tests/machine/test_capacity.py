"""The cache capacities this process sees: the knee finder, the sweep, and what they size.

The machine is fake: a sysfs tree in a temporary folder (what the OS says) and a timer that says how
long ``np.add`` over a footprint takes on a hierarchy of a given real size (what the process gets).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_roofline.machine import calibrate
from pytest_roofline.machine.cachelevels import AddSweep, level_details, levels_of, rates_from_details
from pytest_roofline.machine.calibration_cache import Ceilings
from pytest_roofline.machine.capacity import (
    MAX_SWEEPS,
    PAST_KNEE,
    Sweep,
    capacities_from_details,
    capacity_details,
    find_knees,
    larger_capacities,
    repeated,
    samples_from_details,
    sweep,
)
from pytest_roofline.machine.cpu_ceilings import ARRAY_MEMORY_SHARE, array_bytes_for, measure_cpu
from pytest_roofline.model.core import CacheSize, Figure, Precision, Source, Unit
from pytest_roofline.timing.flushing import choose_flush
from pytest_roofline.timing.host_caches import CacheInfo, cpu_caches
from pytest_roofline.timing.rotation import CYCLE_MULTIPLE, cycle_target

KiB, MiB, GiB = 2**10, 2**20, 2**30
DRAM = 13.5e9


def fake_sysfs(root: Path, levels: Sequence[tuple[int, str, str]]) -> tuple[CacheInfo, ...]:
    """A sysfs cache tree with ``(level, size, shared_cpu_list)`` entries, read back as the plugin does."""
    for i, (level, size, shared) in enumerate(levels):
        index = root / f"index{i}"
        index.mkdir(parents=True)
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text("Data\n" if level == 1 else "Unified\n")
        (index / "size").write_text(f"{size}\n")
        (index / "shared_cpu_list").write_text(f"{shared}\n")
    return cpu_caches(root)


SYSFS_480 = ((1, "48K", "0"), (2, "2048K", "0"), (3, "491520K", "0-1"))  # the VM
SYSFS_32 = ((1, "32K", "0"), (2, "1024K", "0"), (3, "32768K", "0-1"))  # this AMD EPYC's


class FakeTimer:
    """How long one ``np.add`` over a footprint takes on a hierarchy of ``(capacity, bytes/s)``
    levels: 1 µs of call overhead, then each byte at the rate of the level that holds it. A level
    holds all of a footprint up to half its capacity and none from its capacity on (a share between,
    as real replacement policies do), so the rate falls over a doubling, and the capacity is where
    the level stops serving the footprint. ``noise`` scatters each time."""

    def __init__(self, levels: Sequence[tuple[int, float]], *, noise: float = 0.0, seed: int = 0) -> None:
        self.levels, self.noise, self.rng = levels, noise, random.Random(seed)
        self.footprints: list[int] = []

    def call_s(self, footprint: int) -> float:
        seconds, held = 1e-6, 0.0
        for capacity, rate in self.levels:
            share = max(min((capacity - footprint) / (capacity / 2), 1.0), held)
            seconds += footprint * (share - held) / rate
            held = share
        seconds += footprint * (1 - held) / DRAM
        return seconds * (1 + self.noise * (2 * self.rng.random() - 1))

    def rate_at(self, footprint: int) -> float:
        self.footprints.append(footprint)
        return footprint / self.call_s(footprint)


class Clock:
    """A clock that advances ``step`` seconds a read (10 ms: a sweep's time budget counts its reads)."""

    def __init__(self, step: float = 0.01) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def swept(
    caches: Sequence[CacheInfo], timer: FakeTimer, *, max_bytes: int = 4 * GiB, budget_s: float = 100.0
) -> Sweep:
    return sweep(
        caches, timer.rate_at, max_bytes=max_bytes, budget_s=budget_s, clock=Clock(), kernel="np.add"
    )


def found(result: Sweep) -> dict[str, CacheSize]:
    return {cache.name: cache for cache in result.caches}


# -- the knee finder ---------------------------------------------------------------------------


def staircase(
    levels: Sequence[tuple[int, float]], noise: float = 0.0, seed: int = 0
) -> list[tuple[int, float]]:
    """(footprint, rate) from 16 KiB up by sqrt(2), 36 points, on a fake hierarchy."""
    timer = FakeTimer(levels, noise=noise, seed=seed)
    footprints = [round(16 * KiB * math.sqrt(2) ** i) for i in range(36)]
    return [(footprint, timer.rate_at(footprint)) for footprint in footprints]


def test_a_staircase_has_a_knee_at_each_step_where_the_level_stops_holding_it() -> None:
    knees = find_knees(staircase([(1 * MiB, 55e9), (40 * MiB, 27e9)]))
    assert len(knees) == 2
    l2, l3 = knees
    assert 0.75 * MiB <= l2.footprint <= 1 * MiB  # the level serves none of it from 1 MiB on
    assert 30 * MiB <= l3.footprint <= 40 * MiB
    assert l3.upper == pytest.approx(27e9, rel=0.1)
    assert l3.lower == pytest.approx(DRAM, rel=0.1)


def test_a_flat_curve_or_too_few_points_have_no_knee() -> None:
    assert find_knees([(2**i, 20e9) for i in range(14, 30)]) == []
    assert find_knees([(1 * MiB, 50e9), (64 * MiB, 10e9)]) == []
    assert find_knees([]) == []


def test_the_overhead_ramp_and_one_outlier_are_no_knee() -> None:
    samples = staircase([(40 * MiB, 27e9)])
    # one slow point at 1 MiB
    spike = [(f, r * (0.5 if i == 12 else 1.0)) for i, (f, r) in enumerate(samples)]
    (knee,) = find_knees(spike)
    assert 30 * MiB <= knee.footprint <= 40 * MiB


@pytest.mark.parametrize("seed", range(5))
def test_noisy_samples_find_the_same_knees(seed: int) -> None:
    (l2, l3) = find_knees(staircase([(1 * MiB, 55e9), (40 * MiB, 27e9)], noise=0.1, seed=seed))
    assert 0.7 * MiB <= l2.footprint <= 1.1 * MiB
    assert 28 * MiB <= l3.footprint <= 44 * MiB


# -- sysfs as the first guess ------------------------------------------------------------------


def test_sysfs_larger_than_effective_the_process_gets_a_tenth(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_480)
    result = swept(caches, FakeTimer([(48 * KiB, 200e9), (2 * MiB, 55e9), (40 * MiB, 27e9)]))
    l1, l2, l3 = (found(result)[name] for name in ("l1", "l2", "l3"))
    assert l3.reported_bytes == 480 * MiB
    assert l3.found == "knee"
    assert l3.effective_bytes is not None
    assert 30 * MiB <= l3.effective_bytes <= 40 * MiB
    assert l2.effective_bytes == 2 * MiB  # a knee within a step of sysfs's figure is sysfs's figure
    assert (l1.effective_bytes, l1.found) == (None, "unseen")  # numpy's call overhead hides it
    assert result.stopped == "past the l3's knee"
    # it stopped a few doublings past the knee, never near the 3.75 GiB that sysfs's figure would need
    assert max(f for f, _ in result.samples) <= PAST_KNEE * math.sqrt(2) * l3.effective_bytes


def test_sysfs_smaller_than_effective(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_32)
    l3 = found(swept(caches, FakeTimer([(1 * MiB, 55e9), (64 * MiB, 27e9)])))["l3"]
    assert l3.effective_bytes is not None
    assert 48 * MiB <= l3.effective_bytes <= 64 * MiB


def test_sysfs_equal_to_effective_keeps_sysfs_figures(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_32)
    result = swept(caches, FakeTimer([(1 * MiB, 55e9), (32 * MiB, 27e9)]))
    assert [cache.effective_bytes for cache in result.caches] == [None, 1 * MiB, 32 * MiB]


def test_a_level_sysfs_lists_but_the_sweep_cannot_see_is_not_used(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_32)
    result = swept(caches, FakeTimer([(32 * MiB, 27e9)]))  # the L2 is as fast as the L3 here
    l2, l3 = found(result)["l2"], found(result)["l3"]
    assert (l2.effective_bytes, l2.found) == (None, "unseen")
    assert "saw no step" in l2.note
    assert l3.effective_bytes == 32 * MiB


def test_a_level_sysfs_does_not_list_is_left_out(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, ((1, "32K", "0"), (3, "491520K", "0-1")))  # no L2 in sysfs
    result = swept(caches, FakeTimer([(1 * MiB, 55e9), (40 * MiB, 27e9)]))
    assert [cache.name for cache in result.caches] == ["l1", "l3"]
    l3 = found(result)["l3"]
    assert l3.effective_bytes is not None
    assert 30 * MiB <= l3.effective_bytes <= 40 * MiB  # the L2's knee is nobody's


@pytest.mark.parametrize("seed", range(4))
def test_noisy_sweeps_still_find_the_vms_share(tmp_path: Path, seed: int) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_480)
    timer = FakeTimer([(48 * KiB, 200e9), (2 * MiB, 55e9), (40 * MiB, 27e9)], noise=0.1, seed=seed)
    l3 = found(swept(caches, timer))["l3"]
    assert l3.effective_bytes is not None
    assert 28 * MiB <= l3.effective_bytes <= 44 * MiB


def test_a_sweep_out_of_time_keeps_sysfs_figure_for_what_it_did_not_reach(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_480)
    timer = FakeTimer([(48 * KiB, 200e9), (2 * MiB, 55e9), (40 * MiB, 27e9)])
    result = swept(caches, timer, budget_s=0.1)  # ten clock reads: a few footprints
    l3 = found(result)["l3"]
    assert (l3.found, l3.effective_bytes, l3.sizing_bytes) == ("unreached", 480 * MiB, 480 * MiB)
    assert result.stopped == "at its time budget"
    assert "before it" in l3.note


def test_a_sweep_never_goes_past_its_reach(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_480)
    timer = FakeTimer([(48 * KiB, 200e9), (2 * MiB, 55e9), (400 * MiB, 27e9)])
    result = swept(caches, timer, max_bytes=256 * MiB)
    assert max(timer.footprints) <= 256 * MiB
    assert result.stopped == "at its reach"
    assert found(result)["l3"].found == "unreached"


def test_the_sweep_survives_the_calibration_file(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_480)
    result = swept(caches, FakeTimer([(2 * MiB, 55e9), (40 * MiB, 27e9)]))
    details = capacity_details(result)
    assert capacities_from_details(details) == result.caches
    assert [f for f, _ in samples_from_details(details)] == [f for f, _ in result.samples]
    assert details["capacity_sweep"].startswith("np.add over 16 KiB..")  # type: ignore[union-attr]
    # hand-edited entries of another shape are left out
    assert capacities_from_details({**details, "capacity_l3_found": "maybe"}) == result.caches[:2]
    assert capacities_from_details({"capacity_lx_reported": 5, "capacity_l2_reported": "big"}) == ()


def test_a_forced_re_measure_never_shrinks_a_capacity_found() -> None:
    def details(effective: int | None, how: str = "knee") -> dict[str, float | int | str]:
        cache = CacheSize(3, 480 * MiB, effective, found=how)  # type: ignore[arg-type]
        return capacity_details(Sweep((), (cache,), 1.0, "past the l3's knee"))

    def l3(merged: dict[str, float | int | str]) -> int | None:
        return capacities_from_details(merged)[0].effective_bytes

    assert l3(larger_capacities(details(48 * MiB), details(20 * MiB))) == 48 * MiB  # under load: kept
    assert l3(larger_capacities(details(20 * MiB), details(48 * MiB))) == 48 * MiB
    assert l3(larger_capacities(details(48 * MiB), details(480 * MiB, "unreached"))) == 48 * MiB
    assert l3(larger_capacities(details(None, "unseen"), details(48 * MiB))) == 48 * MiB


# -- what the capacities size ------------------------------------------------------------------


def cpu_device_of(result: Sweep, rates: dict[str, tuple[float, str]]) -> calibrate.Device:
    ceilings = Ceilings(
        bandwidth=Figure(DRAM, Source.MEASURED),
        peaks={(p, Unit.VECTOR): Figure(1e11, Source.MEASURED) for p in (Precision.FP64, Precision.FP32)},
        details={**capacity_details(result), **level_details(rates)},
    )
    return calibrate._cpu_device(ceilings)


ROOFS = {"l1": (60e9, "add 24 KiB"), "l2": (55e9, "add 1 MiB"), "l3": (27e9, "add 20 MiB")}


def test_on_the_480_mib_vm_a_96_mib_warm_op_is_served_by_dram_and_rotation_sized_from_the_share(
    tmp_path: Path,
) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_480)
    result = swept(caches, FakeTimer([(48 * KiB, 200e9), (2 * MiB, 55e9), (40 * MiB, 27e9)]))
    device = cpu_device_of(result, ROOFS)
    effective = found(result)["l3"].effective_bytes
    assert effective is not None
    assert device.llc_bytes == effective
    assert device.level_for(96 * MiB) is None  # DRAM: np.add of 2^22 fp64
    assert device.level_for(24 * MiB).name == "l3"  # type: ignore[union-attr]
    assert [level.name for level in device.levels] == ["l2", "l3"]  # the unseen L1 is not used
    # the L1's roof still bounds the level that serves its bytes now (no warm op reads faster than light)
    assert device.levels[0].bandwidth.value == 60e9
    # sysfs's figures would have called it an L3 hit, judged at 27 GB/s while it reads from DRAM
    sysfs = levels_of(caches, rates_from_details(level_details(ROOFS)), dram=DRAM)
    assert sysfs[-1].holds(96 * MiB)
    # rotation's cycle and the past-cache threshold: from the share, not from sysfs's 480 MiB
    assert cycle_target(device.llc_bytes) == CYCLE_MULTIPLE * effective < cycle_target(480 * MiB)
    assert choose_flush(150 * MiB, device.llc_bytes).past_cache
    assert not choose_flush(150 * MiB, 480 * MiB).past_cache


def test_on_a_32_mib_machine_that_gets_it_all_nothing_is_less_cold(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_32)
    result = swept(caches, FakeTimer([(32 * KiB, 200e9), (1 * MiB, 55e9), (32 * MiB, 27e9)]))
    device = cpu_device_of(result, ROOFS)
    today = 32 * MiB  # what sysfs says, and so what every size was taken from
    assert device.llc_bytes is not None
    assert device.llc_bytes >= today
    assert cycle_target(device.llc_bytes) >= cycle_target(today)
    for op_bytes in (16 * MiB, 63 * MiB, 64 * MiB, 200 * MiB):  # the past-cache threshold is no lower
        if choose_flush(op_bytes, device.llc_bytes).past_cache:
            assert choose_flush(op_bytes, today).past_cache
    from pytest_roofline.plugin.run_devices import cpu_backend_for

    assert cpu_backend_for(device).flush_bytes >= 2 * today  # type: ignore[attr-defined]


def test_the_flush_buffer_is_twice_the_share_the_process_gets(tmp_path: Path) -> None:
    from pytest_roofline.plugin.run_devices import cpu_backend_for

    caches = fake_sysfs(tmp_path, SYSFS_480)
    result = swept(caches, FakeTimer([(2 * MiB, 55e9), (40 * MiB, 27e9)]))
    device = cpu_device_of(result, ROOFS)
    assert cpu_backend_for(device).flush_bytes == 2 * device.llc_bytes  # type: ignore[attr-defined, operator]


def test_the_flushed_latency_floor_flushes_as_the_kernel_is_flushed() -> None:
    from pytest_roofline.timing.backend_latency import latency_floor_s
    from pytest_roofline.timing.cpu import CpuBackend

    backend = CpuBackend(llc_bytes=lambda: 1 * MiB, resolution_s=1e-6)  # a 1 MiB share: 2 MiB flushes
    assert backend.flush_checksum == 0
    assert latency_floor_s(backend, flushed=True) > 0
    assert backend.flush_checksum != 0  # its own flush, not one of twice sysfs's figure


def test_calibration_arrays_are_four_times_the_share_and_bounded_by_memory() -> None:
    assert array_bytes_for(40 * MiB, 64 * GiB) == 160 * MiB
    # sysfs's 480 MiB (a sweep that stopped short) on a 3 GiB runner: three arrays take half of it
    bounded = array_bytes_for(480 * MiB, 3 * GiB)
    assert 3 * bounded <= ARRAY_MEMORY_SHARE * 3 * GiB
    assert bounded < 4 * 480 * MiB
    assert array_bytes_for(40 * MiB, None) == 160 * MiB  # memory unknown: the rule alone


def test_measure_cpu_sizes_its_arrays_and_level_roofs_from_the_sweep(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_480)
    share = (
        CacheSize(1, 48 * KiB, None, per_core=True, found="unseen"),
        CacheSize(2, 2 * MiB, 2 * MiB, per_core=True),
        CacheSize(3, 480 * MiB, 4 * MiB),  # a small share, so that the test's arrays stay small
    )
    seen: list[tuple[CacheInfo, ...]] = []

    def fake_sweep(guesses: Sequence[CacheInfo]) -> Sweep:
        seen.append(tuple(guesses))
        return Sweep((), share, 0.1, "past the l3's knee", "np.add")

    ceilings = measure_cpu(
        matmul_n=16, matmul_runs=1, budget_s=0.01, caches=caches, sweep=fake_sweep, available=lambda: 64 * GiB
    )
    assert seen == [caches]
    assert ceilings.details["array_bytes"] == 16 * MiB  # 4 x 4 MiB, not 4 x 480 MiB
    assert capacities_from_details(ceilings.details) == share
    # each roof measured in the level as this process sees it (fills of 1/2 and 7/10): 4 MiB for the L3
    assert str(ceilings.details["level_l3_kernel"]).endswith(("2 MiB", "3 MiB"))


def test_add_sweep_counts_three_arrays_of_traffic() -> None:
    rate = AddSweep(Clock(step=1.0), max_bytes=1 * MiB)(24 * KiB)  # each call 1 s on this clock
    assert rate == 3 * 1024 * 8


def test_capacity_sweep_details_of_the_real_machine_are_consistent() -> None:
    """A real sweep of this machine, tiny: its samples are positive and its levels are sysfs's."""
    from pytest_roofline.machine.cachelevels import measure_capacities

    caches = (CacheInfo(1, 32 * KiB, True),)
    result = measure_capacities(caches, budget_s=0.2, available=lambda: 1 * GiB)
    assert result.samples
    assert all(f > 0 and r > 0 for f, r in result.samples)
    assert [cache.level for cache in result.caches] == [1]
    assert max(f for f, _ in result.samples) <= 2 * 4 * 32 * KiB  # the reach: past the level's window


# -- the memory the process may still take -----------------------------------------------------


def fake_proc(root: Path, cgroup: str, group: str, files: dict[str, str], meminfo_kib: int | None) -> Path:
    """A /proc whose process is in ``cgroup`` (its /proc/self/cgroup line), and that group's folder
    under ``root / "cgroup"`` (``group``) holding ``files``."""
    proc = root / "proc"
    (proc / "self").mkdir(parents=True)
    if meminfo_kib is not None:
        (proc / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable:   {meminfo_kib} kB\n")
    (proc / "self" / "cgroup").write_text(cgroup)
    folder = root / "cgroup" / group
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(f"{text}\n")
    return proc


def test_available_memory_is_the_smaller_of_memavailable_and_the_cgroups_room(tmp_path: Path) -> None:
    from pytest_roofline.timing.host_memory import available_memory

    files = {"memory.max": str(7 * GiB), "memory.current": str(2 * GiB)}  # cgroup v2
    proc = fake_proc(tmp_path, "0::/ci/job\n", "ci/job", files, meminfo_kib=8 * 2**20)
    assert available_memory(proc=proc, cgroup_root=tmp_path / "cgroup") == 5 * GiB
    (tmp_path / "cgroup" / "ci" / "job" / "memory.max").write_text("max\n")  # no limit: the machine's
    assert available_memory(proc=proc, cgroup_root=tmp_path / "cgroup") == 8 * GiB


def test_available_memory_reads_cgroup_v1_and_survives_what_is_missing(tmp_path: Path) -> None:
    from pytest_roofline.timing.host_memory import available_memory

    files = {"memory.limit_in_bytes": str(3 * GiB), "memory.usage_in_bytes": str(1 * GiB)}
    proc = fake_proc(tmp_path, "4:memory:/runner\n1:cpu:/\n", "memory/runner", files, meminfo_kib=None)
    assert available_memory(proc=proc, cgroup_root=tmp_path / "cgroup") == 2 * GiB
    (tmp_path / "cgroup" / "memory" / "runner" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert available_memory(proc=proc, cgroup_root=tmp_path / "cgroup") is None  # v1's "no limit"
    assert available_memory(proc=tmp_path / "absent", cgroup_root=tmp_path / "cgroup") is None


# -- a share that moves between sweeps -----------------------------------------------------------


def test_a_sweep_below_sysfs_is_repeated_and_the_largest_share_is_kept(tmp_path: Path) -> None:
    # this VM's sysfs says 32 MiB; sweeps found 32 MiB quiet, 17 MiB in CI and 19 MiB beside two workers
    caches = fake_sysfs(tmp_path, SYSFS_32)
    shares = iter([17 * MiB, 19 * MiB, 32 * MiB, 32 * MiB])
    result = repeated(lambda: swept(caches, FakeTimer([(1 * MiB, 55e9), (next(shares), 27e9)])))
    l3 = found(result)["l3"]
    assert result.sweeps == 3
    assert l3.effective_bytes == 32 * MiB
    assert len(l3.seen) == 3
    assert min(l3.seen) < 20 * MiB
    assert "3 sweeps saw" in l3.note
    assert result.describe().endswith("the widest of 3 sweeps")
    # the calibration file keeps what each sweep saw
    assert capacities_from_details(capacity_details(result))[-1].seen == l3.seen


def test_a_sweep_that_agrees_with_sysfs_is_not_repeated(tmp_path: Path) -> None:
    caches = fake_sysfs(tmp_path, SYSFS_32)
    taken: list[Sweep] = []

    def take() -> Sweep:
        taken.append(swept(caches, FakeTimer([(1 * MiB, 55e9), (32 * MiB, 27e9)])))
        return taken[-1]

    result = repeated(take)
    assert len(taken) == 1
    assert result is taken[0]
    assert found(result)["l3"].seen == ()


def test_repeats_stop_after_three_sweeps(tmp_path: Path) -> None:
    # the 480 MiB VM: every sweep sees about 40 MiB, below what sysfs says
    caches = fake_sysfs(tmp_path, SYSFS_480)
    taken: list[Sweep] = []

    def take() -> Sweep:
        taken.append(swept(caches, FakeTimer([(48 * KiB, 200e9), (2 * MiB, 55e9), (40 * MiB, 27e9)])))
        return taken[-1]

    result = repeated(take)
    assert len(taken) == MAX_SWEEPS == 3
    assert found(result)["l3"].effective_bytes == found(taken[0])["l3"].effective_bytes
    assert "sweeps saw" not in found(result)["l3"].note  # the same each time: no spread to tell


def test_cold_sizing_follows_the_largest_share_so_a_kernel_within_it_is_not_past_the_cache(
    tmp_path: Path,
) -> None:
    # a 40 MiB op on the 32 MiB machine: past 2x a 17 MiB share (no flush, partly still cached:
    # faster than light), within 2x the 32 MiB one (flushed or rotated)
    caches = fake_sysfs(tmp_path, SYSFS_32)
    shares = iter([17 * MiB, 32 * MiB])
    result = repeated(lambda: swept(caches, FakeTimer([(1 * MiB, 55e9), (next(shares), 27e9)])))
    llc = found(result)["l3"].sizing_bytes
    assert choose_flush(40 * MiB, llc).flush
    assert not choose_flush(40 * MiB, 17 * MiB).flush
