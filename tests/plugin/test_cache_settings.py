"""Cold by default, warm on request, end to end: what each measurement's record, message and row
say about where its bytes came from. The scripted backend times nothing; rotation's copies are real."""

from __future__ import annotations

import json

import pytest
from conftest import NO_MEASUREMENT_WARNS, fake_conftest

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
@pytest.mark.speed_of_light("copy", n=2**17, dtype="fp32", cache="warm")
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
    # 8000 bytes a set (x and y), for 6x the 1 MiB cache: 787 copies
    assert records["test_rotated"]["rotation_copies"] == 787
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
    result.stdout.fnmatch_lines(["*memory-bound at 500 GB/s*", "*warm in L1, judged at 500 GB/s*"])


SLOW_COPIES = """
import pytest
from conftest import BACKEND

class SlowToCopy:
    '''An array whose copies take COPY_S s each on the backend's clock.'''

    __array_interface__ = {"shape": (2**19,), "typestr": "<f4", "version": 3}  # a host array
    nbytes = 2**21  # 2 MiB: three sets cycle 6x the fake device's 1 MiB cache

    def copy(self, order="K"):
        BACKEND.fake_clock.advance(COPY_S)
        return SlowToCopy()

@pytest.mark.fake_time(1e-3)
def test_slow_copies(roofline):
    r = roofline.measure(lambda a: None, SlowToCopy(), op="copy", n=2**17, dtype="fp32")
    m = r.measurement
"""
#: two copies made, paid from the measurement's budget
PAID = """
    assert (m.cold_method, m.rotation_copies) == ("rotation", 3)
    assert m.policy.max_time_s == pytest.approx(1.0 - 0.2)
"""
#: more than a quarter of the budget: not made, flushed, and the note says why
TOO_SLOW = """
    assert m.cold_method == "flush"
    assert m.cache_reason == (
        "not rotated: making 2 copies of the arguments would take about 600.0 ms, more than 25% of the"
        " 1000 ms time budget"
    )
"""


@pytest.mark.usefixtures("small_cycles")
@pytest.mark.parametrize(("copy_s", "check"), [(0.1, PAID), (0.3, TOO_SLOW)], ids=["paid", "too-slow"])
def test_the_copies_are_paid_from_the_measurements_budget(
    rl: pytest.Pytester, copy_s: float, check: str
) -> None:
    rl.makepyfile(SLOW_COPIES.replace("COPY_S", str(copy_s)) + check)
    rl.makeconftest(fake_conftest(extra=LEVELS))
    rl.runpytest("--roofline-max-time=1").assert_outcomes(passed=1)


@pytest.mark.usefixtures("small_cycles")
def test_a_setup_that_resets_an_input_in_place_keeps_rotation(rl: pytest.Pytester) -> None:
    # docs/usage.md's setup=lambda: np.copyto(a, a0): every call starts from a0, on every set
    rl.makepyfile(
        """
        import numpy as np
        import pytest

        a0 = np.arange(4096.0)
        a = a0.copy()
        fresh = []

        def sort_descending(x):
            fresh.append(bool((x == a0).all()))
            x[:] = x[::-1]

        @pytest.mark.fake_time(1e-6)
        def test_in_place(roofline):
            r = roofline.measure(
                sort_descending, a, setup=lambda: np.copyto(a, a0), op="copy", n=4096, dtype="fp64"
            )
            m = r.measurement
            assert m.cold_method == "rotation"
            assert m.rotation_copies > 2
            assert m.calls_per_sample == 1
            assert "setup= resets your arrays after each call on them" in m.cache_note
            assert len(fresh) > m.rotation_copies
            assert all(fresh)
        """
    )
    rl.makeconftest(fake_conftest(extra=LEVELS))
    rl.runpytest().assert_outcomes(passed=1)


# -- cache=: the closer level winning -----------------------------------------------------------------

PRECEDENCE = """
import pytest

pytestmark = pytest.mark.speed_of_light("copy", n=1000, dtype="fp32", cache="cold")


def state(r):
    return r.measurement.cache, r.measurement.cache_note


@pytest.mark.speed_of_light(cache="warm")
def test_the_call_over_the_marker(roofline):
    assert state(roofline.measure(lambda: None, cache="cold"))[0] == "cold"


@pytest.mark.speed_of_light(cache="warm")
def test_the_method_marker_over_the_module_marker(roofline):
    note = "warm: warm on request (the marker's cache='warm')"
    assert state(roofline.measure(lambda: None)) == ("warm", note)


@pytest.mark.speed_of_light(cache="cold")
class TestClass:
    @pytest.mark.speed_of_light(cache="warm")
    def test_the_method_marker_over_the_class_marker(self, roofline):
        assert state(roofline.measure(lambda: None))[0] == "warm"

    def test_the_class_marker_over_the_module_marker_and_the_call_over_both(self, roofline):
        assert state(roofline.measure(lambda: None))[0] == "cold"
        assert state(roofline.measure(lambda: None, cache="warm")) == (
            "warm", "warm: warm on request (cache='warm')"
        )
"""


def test_the_closer_level_s_cache_wins(rl: pytest.Pytester) -> None:
    rl.makeconftest(fake_conftest(extra=LEVELS))
    rl.makepyfile(PRECEDENCE)
    rl.runpytest("--roofline-mode=report").assert_outcomes(passed=4)


def test_flush_is_no_keyword_of_the_marker(rl: pytest.Pytester) -> None:
    # cache= is the one spelling: flush= (a spelling before any release) is an op parameter the op lacks
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.speed_of_light("copy", n=1000, dtype="fp32", flush=False)
        def test_flush(roofline):
            roofline(lambda: None)
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*flush*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


@pytest.mark.parametrize(
    ("ini", "args", "note"),
    [
        ("roofline_cache = warm", ["--roofline-cache=cold"], None),
        ("roofline_cache = cold", ["--roofline-cache=warm"], "warm: warm on request (--roofline-cache=warm)"),
        ("roofline_cache = warm", [], "warm: warm on request (ini roofline_cache = warm)"),
    ],
)
def test_the_command_line_over_the_ini(
    rl: pytest.Pytester, ini: str, args: list[str], note: str | None
) -> None:
    rl.makeconftest(fake_conftest(extra=LEVELS))
    rl.makeini(f"[pytest]\n{ini}\n")
    rl.makepyfile(
        f"""
        def test_session(roofline):
            r = roofline.measure(lambda: None, op="copy", n=1000, dtype="fp32")
            assert r.measurement.cache_note {"== " + repr(note) if note else ".startswith('cold')"}
        """
    )
    rl.runpytest(*args).assert_outcomes(passed=1)


def test_a_warm_estimate_is_the_floor_a_warm_measurement_is_judged_against(rl: pytest.Pytester) -> None:
    rl.makeconftest(fake_conftest(extra=LEVELS))
    rl.makepyfile(
        """
        import pytest

        def test_estimates(roofline):
            cold = roofline.estimate("copy", n=1000, dtype="fp32")
            warm = roofline.estimate("copy", n=1000, dtype="fp32", cache="warm")
            assert (cold.memory_level, cold.bandwidth) == ("dram", 1e11)
            assert (warm.memory_level, warm.bandwidth) == ("l1", 5e11)
            assert warm.floor_s == pytest.approx(cold.floor_s / 5)
            assert roofline.estimate("copy", n=2**17, dtype="fp32", cache="warm").memory_level == "l2"
            measured = roofline.measure(lambda: None, op="copy", n=1000, dtype="fp32", cache="warm")
            assert measured.estimate.floor_s == warm.floor_s
        """
    )
    rl.runpytest(*NO_MEASUREMENT_WARNS).assert_outcomes(passed=1)
