"""Expected attained fractions of the NumPy kernels, measured with plain timeit (no plugin).

    python example_project/measure_fractions.py [--repeat N] [--no-flush]

Measures this machine's ceilings the napkin way (np.copyto on 1 GiB float64 arrays for bandwidth,
np.matmul 2048^3 for FLOP/s), times each NumPy kernel of the example at the suite's sizes, and
prints the attained fraction floor / time, where floor = max(FLOPs / peak, bytes / bandwidth) with
the op catalogue's FLOP and byte counts. A budget should sit at about half the good variant's
fraction, and the bad variant should land well under the budget.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import budgets as B
from kernels import numpy_backend as K

F32 = 4  # bytes per float32


@dataclass(frozen=True, slots=True)
class Peaks:
    bandwidth: float  # bytes/s
    fp32_flops: float
    fp64_flops: float


@dataclass(frozen=True, slots=True)
class Case:
    kernel: str
    variant: str
    shape: str
    fn: Callable[[], object]
    flops: float
    bytes: float


def _best_of(fn: Callable[[], object], repeat: int) -> float:
    fn()
    return min(timeit.repeat(fn, number=1, repeat=repeat))


def measure_peaks(repeat: int) -> Peaks:
    n = (1 << 30) // 8
    src, dst = np.ones(n), np.empty(n)
    bandwidth = 2 * n * 8 / _best_of(functools.partial(np.copyto, dst, src), repeat)
    del src, dst
    flops = {}
    for dtype in (np.float32, np.float64):
        a = np.random.default_rng(0).random((2048, 2048)).astype(dtype)
        matmul = functools.partial(np.matmul, a, a, out=np.empty_like(a))
        flops[dtype] = 2 * 2048**3 / _best_of(matmul, repeat)
    return Peaks(bandwidth, flops[np.float32], flops[np.float64])


def build_cases() -> list[Case]:
    rng = np.random.default_rng(0)

    def rand(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32)

    cases = []
    n = B.SAXPY_N
    x, y = rand(n), rand(n)
    cases.append(Case("saxpy", "contiguous", f"n={n}", lambda: K.saxpy(0.5, x, y), 2 * n, 3 * n * F32))
    n, s = B.SAXPY_STRIDED_N, B.SAXPY_STRIDE
    xs, ys = rand(n * s), rand(n * s)
    cases.append(
        Case("saxpy", f"stride {s}", f"n={n}", lambda: K.saxpy_strided(0.5, xs, ys, s), 2 * n, 3 * n * F32)
    )

    for variant, (rows, cols), fn in (
        ("blocked", B.LAYERNORM_SHAPE, K.layernorm),
        ("naive", B.LAYERNORM_NAIVE_SHAPE, K.layernorm_naive),
    ):
        xl, outl, g, b = rand(rows, cols), np.empty((rows, cols), np.float32), rand(cols), rand(cols)
        cases.append(
            Case(
                "layernorm",
                variant,
                f"{rows}x{cols}",
                lambda fn=fn, xl=xl, g=g, b=b, outl=outl: fn(xl, g, b, outl),
                8 * rows * cols,
                (2 * rows * cols + 2 * cols) * F32,
            )
        )

    for variant, size, fn in (("blas", B.GEMM_SIZE, K.gemm), ("rank-1", B.GEMM_NAIVE_SIZE, K.gemm_naive)):
        a, bm, c = rand(size, size), rand(size, size), np.empty((size, size), np.float32)
        cases.append(
            Case(
                "gemm",
                variant,
                f"{size}^3",
                lambda fn=fn, a=a, bm=bm, c=c: fn(a, bm, c),
                2 * size**3,
                3 * size * size * F32,
            )
        )

    rows, cols = B.TRANSPOSE_SHAPE
    at, ot = rand(rows, cols), np.empty((cols, rows), np.float32)
    for variant, fn in (("strips", K.transpose), ("naive", K.transpose_naive)):
        cases.append(
            Case(
                "transpose",
                variant,
                f"{rows}x{cols}",
                lambda fn=fn: fn(at, ot),
                0,
                2 * rows * cols * F32,
            )
        )

    rows, cols = B.BIAS_RELU_SHAPE
    xb, bias, ob = rand(rows, cols), rand(cols), np.empty((rows, cols), np.float32)
    cases.append(
        Case(
            "bias_relu (custom)",
            "blocked",
            f"{rows}x{cols}",
            lambda: K.bias_relu(xb, bias, ob),
            2 * rows * cols,
            (2 * rows * cols + cols) * F32,
        )
    )
    return cases


def time_case(fn: Callable[[], object], repeat: int, flush: np.ndarray | None) -> list[float]:
    fn()  # warm-up: page faults, BLAS thread start
    samples = []
    for _ in range(repeat):
        if flush is not None:
            flush += 1.0  # evict the operands from every cache level, outside the timed window
        samples.append(timeit.timeit(fn, number=1))
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, metavar="N", help="samples per kernel (default 15)")
    parser.add_argument("--no-flush", action="store_true", help="do not flush caches between samples")
    args = parser.parse_args(argv)

    peaks = measure_peaks(max(5, args.repeat // 2))
    print(
        f"bandwidth {peaks.bandwidth / 1e9:.1f} GB/s (np.copyto 1 GiB), "
        f"fp32 {peaks.fp32_flops / 1e9:.0f} GFLOP/s, fp64 {peaks.fp64_flops / 1e9:.0f} GFLOP/s "
        "(np.matmul 2048^3)"
    )
    flush = None if args.no_flush else np.zeros((512 << 20) // 8)
    print(
        f"{'kernel':<20}{'variant':<12}{'shape':<12}{'median ms':>10}{'min ms':>9}{'floor ms':>10}"
        f"{'bound':>9}{'attained':>10}"
    )
    for case in build_cases():
        samples = time_case(case.fn, args.repeat, flush)
        t_mem, t_flop = case.bytes / peaks.bandwidth, case.flops / peaks.fp32_flops
        floor = max(t_mem, t_flop)
        median = statistics.median(samples)
        bound = "memory" if t_mem >= t_flop else "compute"
        print(
            f"{case.kernel:<20}{case.variant:<12}{case.shape:<12}"
            f"{median * 1e3:>10.2f}{min(samples) * 1e3:>9.2f}{floor * 1e3:>10.2f}"
            f"{bound:>9}{floor / median:>10.3f}"
        )


if __name__ == "__main__":
    main()
