"""A budget with nothing to describe, through pytest: ``@pytest.mark.speed_of_light(min_fraction=...)``
or ``roofline(kernel, *args)`` with no op infers it; the report, the JSON and ``--roofline-suggest``
show what was inferred; a miss with the FLOPs unknown never fails (issue 30).

The fake device (conftest.py): 100 GB/s, 1 TFLOP/s fp32; each call takes its test's ``fake_time``.
"""

from __future__ import annotations

import re

import pytest
from conftest import assert_same_floors, records_by_test

N = 100_000  # fp32: 400 kB an array; with two inputs and an output, a floor of 12 µs
#: kernels are called for real, as often as their scripted times fit in this budget
FAST = "--roofline-max-time=0.002"

KERNELS = f"""
import numpy as np
import pytest

N = {N}


@pytest.mark.speed_of_light(min_fraction=0.5)
@pytest.mark.fake_time(15e-6)
def test_library_call(roofline):
    x, y, z = np.ones(N, np.float32), np.ones(N, np.float32), np.empty(N, np.float32)
    roofline(np.add, x, y, kwargs={{"out": z}})


@pytest.mark.fake_time(0.65e-6)
def test_matmul(roofline):
    a, b = np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)
    roofline(np.matmul, a, b, min_fraction=0.5)


@pytest.mark.fake_time(10e-6)
def test_closure(roofline):
    x, y = np.ones(N, np.float32), np.empty(N, np.float32)

    def double():
        np.multiply(x, 2.0, out=y)

    roofline(double, min_fraction=0.5)


@pytest.mark.speed_of_light(flops=4e5)
@pytest.mark.fake_time(10e-6)
def test_flops_given(roofline):
    x = np.ones(N, np.float32)
    roofline(lambda a: a * 2.0, x)
"""


def test_no_op_infers_it_and_the_record_says_which_tier_answered(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=KERNELS)
    result = rl.runpytest("--roofline-report", "--roofline-cache=warm", FAST, "--roofline-json=out.json")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*test_library_call * auto: elementwise n=100000 inputs=2 fp32 *12.0 µs*80.0%*pass",
            "*test_matmul * auto: gemm M=64 N=64 K=64 fp32 *compute*524.3 ns*80.7%*pass",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*test_closure * auto: bytes from 2 arrays, FLOPs unknown *memory (FLOPs unknown)*"]
    )
    found = records_by_test(rl.path / "out.json")
    library = found["test_library_call"]
    assert (library["op"], library["params"]["n"], library["inferred"]["tier"]) == (
        "elementwise",
        N,
        "catalogue",
    )
    assert library["label"] == "auto: elementwise n=100000 inputs=2 fp32"
    closure = found["test_closure"]["inferred"]
    assert (closure["tier"], closure["flops_from"], closure["bytes_from"]) == (
        "arguments",
        "unknown",
        "arguments",
    )
    assert closure["arrays"] == [
        {"where": "captured 'x'", "bytes": 4 * N, "written": False, "returned": False},
        {"where": "captured 'y'", "bytes": 4 * N, "written": True, "returned": False},
    ]
    given = found["test_flops_given"]
    assert (given["flops"], given["bytes"], given["inferred"]["flops_from"]) == (4e5, 8 * N, "given")


MISS = f"""
import numpy as np
import pytest

N = {N}


def double():
    x, y = np.ones(N, np.float32), np.empty(N, np.float32)
    return lambda: np.multiply(x, 2.0, out=y)


@pytest.mark.fake_time(100e-6)
def test_unknown_flops(roofline):
    roofline(double(), min_fraction=0.5)


@pytest.mark.fake_time(100e-6)
def test_the_same_floor_as_an_op(roofline):
    roofline(double(), op="custom", bytes=8 * N, dtype="fp32", min_fraction=0.5)
"""


@pytest.mark.parametrize("inconclusive", ["warn", "fail"])
def test_a_miss_with_the_flops_unknown_is_inconclusive_and_never_fails(
    rl: pytest.Pytester, inconclusive: str
) -> None:
    rl.makepyfile(test_miss=MISS)
    result = rl.runpytest(
        "--roofline-cache=warm", FAST, f"--roofline-inconclusive={inconclusive}", "-W", "default::UserWarning"
    )
    # the floor given as an op misses; inferred, with the FLOPs unknown, it is a lower bound only
    result.assert_outcomes(passed=1, failed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*auto: bytes from 2 arrays, FLOPs unknown is inconclusive: attained 8.0%*",
            "*FLOPs unknown: give flops= or an op;*",
            "*Attained is a lower bound*This never fails the test*",
            "FAILED test_miss.py::test_the_same_floor_as_an_op - Failed: attained 8.0%*custom*",
        ]
    )


def test_a_partial_reader_reads_faster_than_light_and_is_told_to_declare_the_op(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        f"""
        import numpy as np
        import pytest

        @pytest.mark.fake_time(10e-6)
        def test_embedding(roofline):
            table, ids = np.ones(({N}, 16), np.float32), np.arange(8)
            roofline(lambda t, i: t[i].sum(axis=1), table, ids)
        """
    )
    result = rl.runpytest("--roofline-cache=warm", FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            # the sum is counted; the bytes are still the arrays', the table's whole
            "auto: FLOPs counted from 1 NumPy call, bytes from 3 arrays ran faster than light: *",
            # wrapped at the test's 400 columns: the start, then the continuation's end
            "The floor counts more than the kernel did: its bytes were inferred from the arrays it was given"
            " or captured, each counted whole (the largest it only reads: argument 0 (6.10352 MiB, not"
            " written)), and a kernel that reads only part of one (a paged KV pool, an embedding table read*"
            "(`roofline ops` lists them), or give",
            "  bytes= and flops=.",
        ]
    )


def test_the_suggested_markers_pasted_back_give_the_same_floors(rl: pytest.Pytester) -> None:
    rl.makepyfile(test_kernels=KERNELS)
    first = rl.runpytest("--roofline-cache=warm", FAST, "--roofline-suggest", "--roofline-json=inferred.json")
    first.assert_outcomes(passed=4)
    lines = first.stdout.lines
    assert "roofline: the markers that pin what was inferred (paste each over its test):" in lines
    markers = {
        re.match(r"test_kernels.py::(\w+):", line)[1]: lines[i + 1].strip()  # type: ignore[index]
        for i, line in enumerate(lines)
        if line.startswith("test_kernels.py::")
    }
    assert markers["test_library_call"] == (
        '@pytest.mark.speed_of_light("elementwise", n=100000, inputs=2, dtype="fp32", min_fraction=0.5)'
    )
    assert markers["test_closure"].endswith("  # FLOPs unknown: count them and add flops=")
    pasted = KERNELS
    for test, marker in markers.items():
        pasted = re.sub(
            rf"((?:@pytest\.mark\.speed_of_light\(.*\)\n)?)(@pytest\.mark\.fake_time\(.*\)\ndef {test}\()",
            lambda m, marker=marker: f"{marker}\n{m[2]}",
            pasted,
        )
    assert pasted.count("@pytest.mark.speed_of_light(") == 4
    (rl.path / "test_kernels.py").write_text(pasted)
    second = rl.runpytest("--roofline-cache=warm", FAST, "--roofline-json=pinned.json")
    second.assert_outcomes(passed=4)
    assert_same_floors(rl.path / "inferred.json", rl.path / "pinned.json", markers)


def test_mode_off_infers_nothing_and_calls_the_kernel_once(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import numpy as np
        import pytest

        CALLS = []

        @pytest.mark.speed_of_light(min_fraction=0.5)
        def test_kernel(roofline):
            x = np.ones(10)
            assert roofline(lambda a: CALLS.append(a.sum()), x) is None
            assert len(CALLS) == 1
        """
    )
    rl.runpytest("--roofline-mode=off").assert_outcomes(passed=1)


def test_no_op_and_no_array_to_read_is_a_clear_error(rl: pytest.Pytester) -> None:
    rl.makepyfile(
        """
        import pytest

        @pytest.mark.speed_of_light(min_fraction=0.5)
        def test_kernel(roofline):
            roofline(lambda: None)
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["roofline: no op was given, and nothing to infer one from: *"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_an_empty_array_is_said_to_be_of_size_zero(rl: pytest.Pytester) -> None:
    """Issue 40: an empty array with no op was said to be no call the catalogue knows and no array."""
    rl.makepyfile(
        """
        import numpy as np
        import pytest

        @pytest.mark.speed_of_light(min_fraction=0.01)
        def test_known(roofline):
            roofline(np.sqrt, np.ones(0, np.float32))

        @pytest.mark.speed_of_light(min_fraction=0.01)
        def test_unknown(roofline):
            x = np.ones(0, np.float32)
            roofline(lambda: np.sqrt(x))
        """
    )
    result = rl.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "roofline: no op was given, and the kernel's call is elementwise on an empty array:"
            " elementwise: n must be a positive integer; got 0",
            "roofline: no op was given, and every array the kernel holds is empty"
            " (captured 'x', the return value): their size must be a positive integer; got 0",
        ]
    )
    result.stdout.no_fnmatch_line("*holds no array*")


def test_what_workers_inferred_reaches_the_controller(rl: pytest.Pytester) -> None:
    """The inference rides on the record from a pytest-xdist worker: the controller's report, JSON
    and suggestions show it."""
    rl.makepyfile(test_kernels=KERNELS)
    result = rl.runpytest_subprocess(
        "-p",
        "xdist",
        "-n",
        "2",
        "--roofline-cache=warm",
        FAST,
        "--roofline-suggest",
        "--roofline-json=out.json",
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        ['    @pytest.mark.speed_of_light("gemm", M=64, N=64, K=64, dtype="fp32", min_fraction=0.5)']
    )
    tiers = {
        test: record["inferred"]["tier"] for test, record in records_by_test(rl.path / "out.json").items()
    }
    assert tiers == {
        "test_library_call": "catalogue", "test_matmul": "catalogue", "test_closure": "arguments",
        "test_flops_given": "arguments",
    }  # fmt: skip
