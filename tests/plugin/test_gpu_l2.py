"""A warm GPU measurement in a pytest run is judged against the L2's roof (issue 27): the plugin
measures it, with measured peaks and with datasheet ones, and caches it where ``roofline calibrate``
finds it too."""

from __future__ import annotations

import json

import pytest
from fake_cupy import FakeCupy

WARM_TEST = """
import pytest

@pytest.mark.speed_of_light("copy", n=1 << 20, dtype="fp32", cache="warm")
def test_warm_copy(roofline):
    import cupy
    a, b = cupy.empty(1 << 20, dtype=cupy.float32), cupy.empty(1 << 20, dtype=cupy.float32)
    roofline(cupy.copyto, b, a)
"""

pytestmark = pytest.mark.usefixtures("no_profiler")


@pytest.mark.parametrize("peaks", ["measured", "datasheet"])
def test_a_warm_gpu_kernel_within_the_l2_is_judged_against_its_roof(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, peaks: str
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(pytester.path / "cache"))
    fake = FakeCupy(kernel_ms=0.01).install(monkeypatch)
    pytester.makepyfile(WARM_TEST)

    result = pytester.runpytest_inprocess(
        "--roofline-device=cuda", "--roofline-mode=report", "--roofline-latency-floor=off",
        f"--roofline-peaks={peaks}", "--roofline-json=out.json", "-p", "no:randomly",
    )  # fmt: skip

    result.assert_outcomes(passed=1)
    (record,) = json.loads((pytester.path / "out.json").read_text())["measurements"]
    assert (record["cache_state"], record["memory_level"]) == ("warm", "l2")
    # the L2 roof's read, once; with measured peaks the DRAM ceiling's read-only stream is the same
    # kernel over a buffer past the L2
    reads = 2 if peaks == "measured" else 1
    assert [name for _, name in fake.raw_kernels].count("roofline_l2_read") == reads
    assert list((pytester.path / "cache").rglob("cuda-l2-*.json"))  # where roofline calibrate finds it
