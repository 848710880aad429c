"""A newcomer's NumPy kernels under markers with no op, through pytest: their FLOPs are counted from
the NumPy calls of their first call, so their floors are the explicit markers', a kernel three times
slower fails, and ``--roofline-suggest`` pasted back gives the same floors (issue 43, item 1).

The fake device (conftest.py): 100 GB/s, 1 TFLOP/s fp32; each call takes its test's ``fake_time``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import assert_same_floors

N = 100_000
FAST = "--roofline-max-time=0.002"

KERNELS = f"""
import numpy as np
import pytest

N = {N}


def matmul(a, b):
    return a @ b


def fused(x, y):
    return np.maximum(2 * x + y, 0)


def rowsum(x):
    return x.sum(axis=1)


@pytest.mark.speed_of_light(min_fraction=0.5)
@pytest.mark.fake_time(0.65e-6)
def test_matmul(roofline):
    roofline(matmul, np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))


@pytest.mark.speed_of_light(min_fraction=0.5)
@pytest.mark.fake_time(15e-6)
def test_fused(roofline):
    roofline(fused, np.ones(N, np.float32), np.ones(N, np.float32))


@pytest.mark.speed_of_light(min_fraction=0.5)
@pytest.mark.fake_time(5e-6)
def test_rowsum(roofline):
    roofline(rowsum, np.ones((1000, 100), np.float32))
"""

#: the same kernels with the markers a newcomer would have had to write
EXPLICIT = {
    "test_matmul": '"gemm", M=64, N=64, K=64',
    "test_fused": f'"elementwise", n={N}, inputs=2, flops_per_element=3',
    "test_rowsum": '"reduction", n=100_000, outputs=1000',
}


def with_markers(text: str, markers: dict[str, str]) -> str:
    """``text`` with each test's marker replaced by the one ``markers`` gives it."""
    for test, marker in markers.items():
        text = re.sub(
            rf"@pytest\.mark\.speed_of_light\(.*\)\n(@pytest\.mark\.fake_time\(.*\)\ndef {test}\()",
            lambda m, marker=marker: f"{marker}\n{m[1]}",
            text,
        )
    return text


def test_counted_flops_give_the_explicit_markers_floors(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=KERNELS)
    explicit = {test: f"@pytest.mark.speed_of_light({op}, min_fraction=0.5)" for test, op in EXPLICIT.items()}
    rl.makepyfile(test_explicit=with_markers(KERNELS, explicit))
    result = rl.runpytest("--roofline-report", "--roofline-cache=warm", FAST, "--roofline-json=out.json")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines_random(
        [
            "*test_matmul * auto: FLOPs counted from 1 NumPy call: gemm M=64 N=64 K=64 fp32 *pass",
            "*test_fused * auto: FLOPs counted from 3 NumPy calls, bytes from 3 arrays *pass",
            "*test_rowsum * auto: FLOPs counted from 1 NumPy call: reduction n=100000 outputs=1000 fp32 *",
        ]
    )
    data = json.loads((rl.path / "out.json").read_text())["measurements"]
    by_file: dict[str, dict[str, dict[str, Any]]] = {}
    for m in data:
        module, test = m["nodeid"].split("::")
        by_file.setdefault(module, {})[test] = m
    counted, written = by_file["test_kernels.py"], by_file["test_explicit.py"]
    for test in EXPLICIT:
        assert counted[test]["inferred"]["tier"] == "flop_counter"
        assert counted[test]["inferred"]["counter"] == "NumPy"
        assert written[test]["inferred"] is None
        for field in ("floor_s", "flops", "bytes"):
            assert counted[test][field] == pytest.approx(written[test][field], rel=0.01), (test, field)


def test_a_counted_kernel_three_times_slower_fails(rl: pytest.Pytester) -> None:
    """Its FLOPs known, a miss fails the test as an explicit marker's does (not inconclusive)."""
    rl.makepyfile(test_kernels=KERNELS.replace("fake_time(0.65e-6)", "fake_time(1.95e-6)"))
    result = rl.runpytest("--roofline-cache=warm", FAST)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        ["FAILED test_kernels.py::test_matmul - Failed: attained 26.9%*auto: FLOPs counted from 1*"]
    )


def test_the_suggested_markers_pasted_back_give_the_same_floors(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=KERNELS)
    first = rl.runpytest("--roofline-cache=warm", FAST, "--roofline-suggest", "--roofline-json=inferred.json")
    first.assert_outcomes(passed=3)
    lines = first.stdout.lines
    markers = {
        re.match(r"test_kernels.py::(\w+):", line)[1]: lines[i + 1].strip()  # type: ignore[index]
        for i, line in enumerate(lines)
        if line.startswith("test_kernels.py::")
    }
    tail = 'dtype="fp32", min_fraction=0.5)'
    assert markers == {
        "test_matmul": f'@pytest.mark.speed_of_light("gemm", M=64, N=64, K=64, {tail}',
        "test_fused": f'@pytest.mark.speed_of_light("custom", flops={3.0 * N}, bytes={12 * N}, {tail}',
        "test_rowsum": f'@pytest.mark.speed_of_light("reduction", n=100000, outputs=1000, {tail}',
    }
    pasted = with_markers(KERNELS, markers)
    (rl.path / "test_kernels.py").write_text(pasted)
    second = rl.runpytest("--roofline-cache=warm", FAST, "--roofline-json=pinned.json")
    second.assert_outcomes(passed=3)
    assert_same_floors(rl.path / "inferred.json", rl.path / "pinned.json", markers)
