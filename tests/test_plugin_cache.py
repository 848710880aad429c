"""Cold by default, warm on request, end to end: what each measurement's record, message and row
say about where its bytes came from. The scripted backend times nothing; rotation's copies are real."""

from __future__ import annotations

import json

import pytest
from conftest import fake_conftest

from pytest_roofline.timing import rotation

LEVELS = """

from dataclasses import replace
from pytest_roofline import MemoryLevel

_plain = fake_device


def fake_device():
    l1 = MemoryLevel("l1", 48 * 2**10, Figure(5e11, Source.MEASURED), per_core=True)
    l2 = MemoryLevel("l2", 2 * 2**20, Figure(3e11, Source.MEASURED), per_core=True)
    return replace(_plain(), levels=(l1, l2), llc_bytes=2**20)
"""

KERNELS = """
import numpy as np
import pytest

x = np.ones(1000, dtype=np.float32)
y = np.empty_like(x)


@pytest.mark.fake_time(1e-6)
def test_rotated(roofline):
    roofline(np.copyto, y, x, op="copy", n=1000, dtype="fp32")


@pytest.mark.fake_time(1e-6)
def test_closure(roofline):
    roofline(lambda: np.copyto(y, x), op="copy", n=1000, dtype="fp32")


@pytest.mark.fake_time(1e-3)
def test_past_the_cache(roofline):
    roofline(lambda: None, op="copy", n=2**20, dtype="fp32")


@pytest.mark.fake_time(1e-6)
def test_warm(roofline):
    roofline(np.copyto, y, x, op="copy", n=1000, dtype="fp32", cache="warm")


@pytest.mark.fake_time(1e-6)
@pytest.mark.speed_of_light("copy", n=2**17, dtype="fp32", flush=False)
def test_warm_past_the_l1(roofline):
    roofline(lambda: None)
"""


@pytest.fixture
def small_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rotation, "MIN_CYCLE_BYTES", 2**20)


@pytest.mark.usefixtures("small_cycles")
def test_each_record_says_what_served_its_bytes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makeconftest(fake_conftest(extra=LEVELS))
    pytester.makepyfile(test_cache=KERNELS)
    result = pytester.runpytest_inprocess(
        "--roofline-mode=report", "--roofline-json=out.json", "--roofline-report"
    )
    result.assert_outcomes(passed=5)
    records = {
        r["nodeid"].split("::")[1]: r
        for r in json.loads((pytester.path / "out.json").read_text())["measurements"]
    }
    got = {name: (r["cache_state"], r["cold_method"], r["memory_level"]) for name, r in records.items()}
    assert got == {
        "test_rotated": ("cold", "rotation", "dram"),
        "test_closure": ("cold", "flush", "dram"),
        "test_past_the_cache": ("cold", "past-cache", "dram"),
        "test_warm": ("warm", None, "l1"),
        "test_warm_past_the_l1": ("warm", None, "l2"),
    }
    # 8000 bytes a set (x and y), for 4x the 1 MiB cache: 525 copies
    assert records["test_rotated"]["rotation_copies"] == 525
    assert records["test_closure"]["rotation_copies"] is None
    assert records["test_closure"]["cache"].startswith(
        "cold: cache flushed before every call; not rotated: no array among the kernel's arguments"
    )
    # warm: judged at the level's roof, not DRAM's
    assert records["test_warm"]["bandwidth"] == 5e11
    assert records["test_warm_past_the_l1"]["bandwidth"] == 3e11
    assert records["test_rotated"]["bandwidth"] == 1e11
    result.stdout.fnmatch_lines(["*test_warm *1.0 µs ± 0.0% warm L1*", "*test_warm_past_the_l1*warm L2*"])


def test_a_warm_miss_says_which_level_judged_it(rl: pytest.Pytester) -> None:
    rl.makeconftest(fake_conftest(extra=LEVELS))
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.fake_time(1e-3)
        def test_warm(roofline):
            roofline(lambda: None, op="copy", n=1000, dtype="fp32", cache="warm")
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*memory-bound at 500 GB/s*warm in L1, judged at 500 GB/s*"])


@pytest.mark.usefixtures("small_cycles")
def test_the_copies_are_paid_from_the_measurements_budget(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest
        from conftest import BACKEND

        class SlowToCopy:
            '''An array whose copies take 0.1 s each on the backend's clock.'''

            __array_interface__ = {"shape": (2**19,), "typestr": "<f4", "version": 3}  # a host array
            nbytes = 2**21  # 2 MiB: two sets cycle 4x the fake device's 1 MiB cache

            def copy(self, order="K"):
                BACKEND.fake_clock.advance(0.1)
                return SlowToCopy()

        @pytest.mark.fake_time(1e-3)
        def test_slow_copies(roofline):
            r = roofline.measure(lambda a: None, SlowToCopy(), op="copy", n=2**17, dtype="fp32")
            assert (r.measurement.cold_method, r.measurement.rotation_copies) == ("rotation", 2)
            assert r.measurement.policy.max_time_s == pytest.approx(1.0 - 0.1)  # one copy made
        """
    )
    rl.makeconftest(fake_conftest(extra=LEVELS))
    rl.runpytest("--roofline-max-time=1").assert_outcomes(passed=1)
