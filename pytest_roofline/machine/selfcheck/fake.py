"""``roofline selfcheck --fake``: the GPU self-check over the test suite's fakes, for CI.

The fakes (``tests/fake_cupy.py``, ``fake_cupti.py``, ``fake_timers.py``) ship with a source checkout
only, so ``--fake`` runs from a clone. Its figures mean nothing: it shows the self-check and the backend
run without a Python error.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...errors import InvalidValueError

#: every fake kernel call lasts this long: over the 100 µs under which warm ratios are not judged
FAKE_KERNEL_MS = 0.2
#: the fake GPU's L2 (the fake driver's 50 MiB) and DRAM read rates, bytes/s: the L2 capacity sweep
#: finds its knee, and the L2 roof has a level to be judged against, as on a real GPU
FAKE_L2_BYTES, FAKE_L2_RATE, FAKE_DRAM_RATE = 50 * 2**20, 8e12, 3e12
#: where the fakes live, in a source checkout
TESTS = Path(__file__).resolve().parents[3] / "tests"


@contextmanager
def faked(index: int) -> Iterator[tuple[dict[str, Any], Path]]:
    """Inside: a fake CuPy with GPUs 0..``index`` (timed by fake CUPTI records, as where cupti-python
    is installed), and the optional timers over it; yields those timers and a scratch calibration
    folder. Everything is undone on the way out."""
    import pytest

    if not (TESTS / "fake_cupy.py").is_file():
        raise InvalidValueError(
            f"--fake runs on the test suite's fakes, which ship with a source checkout, not with the "
            f"installed package: {TESTS / 'fake_cupy.py'} is missing; run it from a clone"
        )
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as scratch:
        patch.setattr(sys, "path", [str(TESTS), *sys.path])
        fake_cupy = importlib.import_module("fake_cupy")
        fake_cupti = importlib.import_module("fake_cupti")
        fake_timers = importlib.import_module("fake_timers")
        world = fake_cupy.FakeCupy(
            device_count=index + 1, kernel_ms=FAKE_KERNEL_MS, l2_read_ms=_l2_read_ms
        ).install(patch)
        fake_cupti.FakeCupti(world).install(patch)  # the default timer is then CUPTI's
        torch = fake_timers.fake_torch(world)
        yield {"torch": torch, "do_bench": fake_timers.fake_do_bench(world, torch)}, Path(scratch)


def _l2_read_ms(nbytes: int) -> float:
    """One launch of the L2 roof's kernel over ``nbytes`` on the fake GPU, in milliseconds."""
    from ...timing.l2 import L2_PASSES

    rate = FAKE_L2_RATE if nbytes <= FAKE_L2_BYTES else FAKE_DRAM_RATE
    return nbytes * L2_PASSES / rate * 1e3
