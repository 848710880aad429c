"""Device memory given back, on the fake (``fake_cupy.py``): CuPy's pool keeps freed arrays' blocks,
which PyTorch's allocator cannot use, so calibration's buffers and the flush buffer go back to the
driver (``free_all_blocks``) once they are no longer needed (issue 27)."""

from __future__ import annotations

import pytest
from fake_cupy import FakeCupy

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cuda import measured_ceilings
from pytest_roofline.timing.cuda.backend import MIN_FLUSH_BYTES, CudaBackend

FAST = Policy(warmup_s=0, warmup_calls=1, min_samples=5, max_time_s=0.5)

COPY_TEST = """
import pytest

@pytest.mark.speed_of_light("copy", n=1 << 20, dtype="fp32")
def test_copy(roofline):
    import cupy
    a, b = cupy.empty(1 << 20, dtype=cupy.float32), cupy.empty(1 << 20, dtype=cupy.float32)
    roofline(lambda: cupy.copyto(b, a))  # a closure: flushed, not rotated
"""


pytestmark = pytest.mark.usefixtures("no_profiler")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    return FakeCupy(kernel_ms=1.0).install(monkeypatch)


def flush_buffers(fake: FakeCupy) -> list[object]:
    return [a for a in fake.live_arrays if a.nbytes == MIN_FLUSH_BYTES]


def test_calibration_gives_its_buffers_back_to_the_driver(fake: FakeCupy) -> None:
    measured_ceilings.measure_ceilings(0, FAST)

    assert fake.pool_free == 0  # the copies and matmul operands, a few GiB, are the driver's again
    assert fake.pool_used == 0


def test_the_l2_roof_gives_its_buffer_back(fake: FakeCupy) -> None:
    from pytest_roofline.timing.l2 import measure_l2_roof

    measure_l2_roof(0)

    assert fake.pool_free == 0
    assert fake.pool_used == 0


def test_a_backend_gives_back_its_flush_buffer_and_allocates_it_again(fake: FakeCupy) -> None:
    backend = CudaBackend()
    backend.run(fake.kernel, (), calls=1, samples=2, flush=True)
    assert len(flush_buffers(fake)) == 1

    backend.release_memory()

    assert flush_buffers(fake) == []
    assert fake.pool_free == 0
    backend.run(fake.kernel, (), calls=1, samples=2, flush=True)  # the next flush allocates it again
    assert len(flush_buffers(fake)) == 1


def test_the_plugin_gives_the_flush_buffer_back_after_a_flushed_measurement(
    pytester: pytest.Pytester, fake: FakeCupy
) -> None:
    pytester.makepyfile(COPY_TEST)

    pytester.inline_run(
        "--roofline-device=cuda", "--roofline-mode=report", "--roofline-latency-floor=off"
    ).assertoutcome(passed=1)

    flushes = [i for i, entry in enumerate(fake.log) if entry[0] == "flush"]
    freed = [i for i, entry in enumerate(fake.log) if entry[0] == "free_all_blocks"]
    assert flushes
    assert freed
    assert freed[-1] > flushes[-1]
    assert flush_buffers(fake) == []
