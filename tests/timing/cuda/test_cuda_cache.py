"""The GPU window rule: no kernel is timed warm unless asked. A cold measurement's window never
launches twice on one copy of the arguments without a flush between the launches.

A decode GEMV over 32 MiB of weights on an H100 (50 MiB of L2) runs in about 10 µs, so the
backend would batch it (100 x 0.5 µs of event resolution); batched on one buffer, every launch
after the first would read its weights from the L2."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fake_cupy import FakeCupy

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cache import plan_cache
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.engine import measure

MiB = 2**20
L2 = 50 * MiB
POLICY = Policy(warmup_s=0.0, min_samples=5, max_time_s=0.5)


class DeviceBuffer:
    """A GPU array as the plugin sees one: ``__cuda_array_interface__``, ``nbytes``, ``copy()``."""

    _ids = itertools.count()

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.id = next(self._ids)
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "version": 3,
            "data": (0, False),
        }

    def copy(self, order: str = "K") -> DeviceBuffer:
        return DeviceBuffer(self.nbytes)


def windows(log: list[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    """The entries between each start event and its end event, flushes before them included."""
    out: list[list[tuple[Any, ...]]] = []
    current: list[tuple[Any, ...]] = []
    inside = False
    for entry in log:
        if entry[0] == "flush":
            current.append(entry)
        elif entry[0] == "record":
            if inside:
                out.append(current)
                current = []
            inside = not inside
        elif inside and entry[0] == "touch":
            current.append(entry)
    return out


def reused_without_a_flush(window: list[tuple[Any, ...]]) -> bool:
    seen: set[int] = set()
    for entry in window:
        if entry[0] == "flush":
            seen.clear()
        elif entry[1] in seen:
            return True
        else:
            seen.add(entry[1])
    return False


@pytest.mark.parametrize("rotatable", [True, False], ids=["rotated", "captured-by-a-closure"])
def test_a_cold_window_never_launches_twice_on_one_copy_without_a_flush(
    monkeypatch: pytest.MonkeyPatch, rotatable: bool
) -> None:
    fake = FakeCupy(kernel_ms=0.010).install(monkeypatch)
    weights = DeviceBuffer(32 * MiB)

    def gemv(w: DeviceBuffer) -> None:
        fake.log.append(("touch", w.id))
        fake.kernel()

    fn, args = (gemv, (weights,)) if rotatable else ((lambda: gemv(weights)), ())
    plan = plan_cache(
        "cold", op_bytes=weights.nbytes, llc_bytes=L2, fn=fn, args=args, kwargs=None, setup=None,
        free_bytes=lambda on_device: 80 * 2**30,
    )  # fmt: skip
    m = measure(fn, *args, policy=POLICY, backend=CudaBackend(), cache=plan)
    sampled = windows(fake.entries("record", "flush", "touch"))[-m.stats.n :]
    assert sampled
    assert not any(reused_without_a_flush(w) for w in sampled)
    if rotatable:  # k calls on k copies: batched, and cold
        assert (m.cold_method, m.rotation_copies) == ("rotation", 10)  # 6 x 50 MiB over 32 MiB a copy
        assert 1 < m.calls_per_sample <= 10
    else:  # one flush and one call per window
        assert (m.cold_method, m.calls_per_sample) == ("flush", 1)
        assert all(w[0][0] == "flush" for w in sampled)


def test_a_warm_request_is_batched_on_one_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(kernel_ms=0.010).install(monkeypatch)
    weights = DeviceBuffer(32 * MiB)

    def gemv(w: DeviceBuffer) -> None:
        fake.log.append(("touch", w.id))
        fake.kernel()

    plan = plan_cache(
        "warm", op_bytes=weights.nbytes, llc_bytes=L2, fn=gemv, args=(weights,), kwargs=None, setup=None
    )
    m = measure(gemv, weights, policy=POLICY, backend=CudaBackend(), cache=plan)
    assert (m.cache, m.calls_per_sample) == ("warm", 5)  # 100 x 0.5 µs over 10 µs
    assert fake.count("flush") == 0


def test_the_l2_roof_is_one_launch_of_ld_cg_reads_over_04_of_the_l2(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.timing.l2 import L2_FILL, L2_PASSES, measure_l2_roof

    fake = FakeCupy(kernel_ms=0.1).install(monkeypatch)  # each launch 100 µs on the fake GPU
    figure = measure_l2_roof(0)
    n4 = int(L2 * L2_FILL) // 16
    assert figure.value == pytest.approx(n4 * 16 * L2_PASSES / 1e-4)
    assert str(figure.source) == "measured"
    assert figure.note.startswith("ld.global.cg of 20 MiB (0.4 of the L2) x 64 passes in one launch")
    codes = [code for code, name in fake.raw_kernels if name == "roofline_l2_read"]
    assert codes
    assert "__ldcg" in codes[0]
    reads = [e for e in fake.log if e[0] == "kernel"]
    assert reads  # timed as kernels, never as the flush (one pass)
    assert fake.flush_reads == []


def l2_read_ms(steps: list[tuple[float, float]], dram: float) -> Any:
    """A launch of the L2 roof's kernel over ``nbytes``: every pass at the rate of the first step
    whose capacity holds the buffer (DRAM past the last)."""
    from pytest_roofline.timing.l2 import L2_PASSES

    def ms(nbytes: int) -> float:
        rate = next((rate for capacity, rate in steps if nbytes <= capacity), dram)
        return nbytes * L2_PASSES / rate * 1e3

    return ms


@pytest.mark.parametrize(
    ("steps", "lo", "hi"),
    [
        ([(20 * MiB, 5e12)], 17 * MiB, 25 * MiB),  # a MIG slice: 20 of the 50 MiB the driver says
        # an L2 in two partitions: the far one is slower, but a hit all the same (the last step counts)
        ([(25 * MiB, 7e12), (50 * MiB, 4e12)], L2, L2),
    ],
    ids=["mig-slice", "two-partitions"],
)
def test_the_l2_capacity_is_swept_with_the_l2_roofs_kernel(
    monkeypatch: pytest.MonkeyPatch, steps: list[tuple[float, float]], lo: int, hi: int
) -> None:
    from pytest_roofline.machine.capacity import capacities_from_details, samples_from_details, sweep_details
    from pytest_roofline.timing.host_caches import CacheInfo
    from pytest_roofline.timing.l2 import l2_rate_at

    fake = FakeCupy(l2_read_ms=l2_read_ms(steps, dram=2e12)).install(monkeypatch)
    details = sweep_details(CacheInfo(2, L2, per_core=False), l2_rate_at(0), kernel="ld.global.cg")
    (l2,) = capacities_from_details(details)
    assert (l2.name, l2.reported_bytes, l2.found) == ("l2", L2, "knee")
    assert l2.effective_bytes is not None
    assert lo <= l2.effective_bytes <= hi
    footprints = [footprint for footprint, _ in samples_from_details(details)]
    assert footprints[0] == round(L2 / 16)
    assert any(name == "roofline_l2_read" for _, name in fake.raw_kernels)  # the roof's own kernel
    assert fake.count("kernel") >= len(footprints)  # timed as kernels, never as the one-pass flush
    assert fake.flush_reads == []


# -- persisting L2 lines (issue 28 item 5) ------------------------------------------------------------

COLD = Policy(warmup_s=0.0, warmup_calls=1, min_samples=5, max_time_s=0.5)


def test_lines_a_kernel_keeps_persisting_are_reset_before_every_cold_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an access-policy window keeps its data in the L2 set-aside across a plain flush
    fake = FakeCupy(persisting_set_aside=30 * MiB).install(monkeypatch)
    weights = fake.cupy.empty(8 * MiB, dtype=fake.cupy.uint8)

    m = measure(fake.persisting_kernel, weights, policy=COLD, backend=CudaBackend())

    after_flush = [warm for warm, flushed in fake.persisting_reads if flushed]
    assert len(after_flush) >= m.stats.n
    assert not any(after_flush)  # every timed call found its weights out of the L2
    assert fake.persisting_resets >= len(after_flush)


def test_a_plain_flush_leaves_persisting_lines_in_the_fakes_l2(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(persisting_set_aside=30 * MiB).install(monkeypatch)
    weights = fake.cupy.empty(8 * MiB, dtype=fake.cupy.uint8)
    flush = fake.cupy.RawKernel("", "roofline_l2_flush")

    fake.persisting_kernel(weights)
    flush((1,), (1,), (weights, 0, weights))
    fake.persisting_kernel(weights)  # warm: the flush could not evict it
    fake.null_stream.synchronize()
    fake.reset_persisting()
    flush((1,), (1,), (weights, 0, weights))
    fake.persisting_kernel(weights)  # cold: reset, then flushed

    assert fake.persisting_reads == [(False, False), (True, True), (False, True)]


def test_without_a_set_aside_nothing_is_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(persisting_set_aside=0).install(monkeypatch)

    measure(fake.kernel, policy=COLD, backend=CudaBackend())

    assert fake.persisting_resets == 0
    assert ("synchronize", "stream:null") not in fake.log  # no window waits for the one before


def test_a_set_aside_the_driver_will_not_tell_is_reset_once_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(persisting_set_aside=None).install(monkeypatch)
    backend = CudaBackend()

    backend.run(fake.kernel, (), calls=1, samples=4, flush=True)

    assert fake.persisting_resets == 1
