"""Does the CUDA backend agree with ``cupyx.profiler.benchmark``? For whoever has a GPU.

For each case (a 256 MiB device-to-device copy and a 4096³ float32 matmul) this prints the
median per-call time measured by the engine over :class:`~pytest_roofline.timing.cuda.CudaBackend`
with ``flush=False`` (``cupyx.profiler.benchmark`` cannot flush, so this is the apples-to-apples
figure), the median of ``cupyx.profiler.benchmark(...).gpu_times`` for the same kernel in the same
process, and their ratio (ours / cupyx). Both kernels are long enough that the ratio should sit
near 1; this was written on a machine without a GPU, so no figure here has been seen yet.

Run from the repository root: ``python benchmarks/gpu_selfcheck.py [--device N]``. Without CuPy
or without a GPU it prints one line saying so and exits with status 2.

It then does the same for every CuPy kernel of the example project (``example_project/kernels``),
good and bad variants alike. To check more kernels, append :class:`Case` objects to :data:`CASES`,
or call :func:`main` with your own list.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from pytest_roofline.timing import Policy, measure
from pytest_roofline.timing.cuda import CudaBackend, device_count, using_device
from pytest_roofline.units import seconds as format_seconds

#: cupyx.profiler.benchmark settings: calls timed, calls untimed first, and a wall-time cap (seconds)
CUPYX_REPEAT = 200
CUPYX_WARMUP = 10
CUPYX_MAX_DURATION_S = 2.0

Kernel = Callable[..., object]


@dataclass(frozen=True)
class Case:
    """A kernel to time: ``setup(cupy)`` builds its inputs on the current device, returns ``(fn, args)``."""

    name: str
    setup: Callable[[Any], tuple[Kernel, tuple[object, ...]]]


def _copy_256_mib(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
    src = cupy.ones(64 * 2**20, dtype=cupy.float32)
    return cupy.copyto, (cupy.empty_like(src), src)


def _matmul_4096_f32(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
    n = 4096
    a, b = cupy.ones((n, n), dtype=cupy.float32), cupy.ones((n, n), dtype=cupy.float32)

    def matmul(a: Any, b: Any, out: Any) -> None:
        cupy.matmul(a, b, out=out)

    return matmul, (a, b, cupy.empty((n, n), dtype=cupy.float32))


def _example(
    kernel: str, *shapes: tuple[int, ...], lead: tuple[object, ...] = (), tail: tuple[object, ...] = ()
) -> Callable[[Any], tuple[Kernel, tuple[object, ...]]]:
    """A case for one of example_project's CuPy kernels: ``lead``, float32 arrays of ``shapes``, ``tail``."""

    def setup(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "example_project"))
        from kernels import cupy_backend

        arrays = tuple(cupy.random.random(shape, dtype=cupy.float32) for shape in shapes)
        return getattr(cupy_backend, kernel), (*lead, *arrays, *tail)

    return setup


_N = 1 << 24
_ROWS, _COLS = 8192, 1024
_COL, _MATRIX, _MATRIX_T = (_COLS,), (_ROWS, _COLS), (_COLS, _ROWS)

CASES: list[Case] = [
    Case("copy 256 MiB d2d", _copy_256_mib),
    Case("matmul 4096³ f32", _matmul_4096_f32),
    # the example project's kernels, good and bad side by side
    Case("example saxpy vec4", _example("saxpy", (_N,), (_N,), lead=(0.5,))),
    Case(
        "example saxpy stride 16", _example("saxpy_strided", (16 * _N,), (16 * _N,), lead=(0.5,), tail=(16,))
    ),
    Case("example layernorm fused", _example("layernorm", _MATRIX, _COL, _COL, _MATRIX)),
    Case("example layernorm naive", _example("layernorm_naive", _MATRIX, _COL, _COL, _MATRIX)),
    Case("example gemm naive 2048³", _example("gemm_naive", (2048, 2048), (2048, 2048), (2048, 2048))),
    Case("example transpose tiled", _example("transpose", _MATRIX, _MATRIX_T)),
    Case("example transpose naive", _example("transpose_naive", _MATRIX, _MATRIX_T)),
    Case("example bias_relu", _example("bias_relu", _MATRIX, _COL, _MATRIX)),
]


def check(case: Case, device: int, cupy: Any, benchmark: Callable[..., Any]) -> str:
    """One line: our median, cupyx's median and their ratio for ``case`` on ``device``."""
    with using_device(device):
        fn, args = case.setup(cupy)
        ours = measure(fn, *args, policy=Policy(flush=False), backend=CudaBackend(device))
        theirs = benchmark(
            fn,
            args,
            n_repeat=CUPYX_REPEAT,
            n_warmup=CUPYX_WARMUP,
            max_duration=CUPYX_MAX_DURATION_S,
            devices=(device,),
        )
    # gpu_times: seconds, one row per device in ``devices``, one column per repeat
    cupyx_median = statistics.median(float(t) for t in theirs.gpu_times[0])
    return (
        f"{case.name:<20} ours {format_seconds(ours.time_s):>11} ({ours.stats.n} samples × "
        f"{ours.calls_per_sample} calls)   cupyx {format_seconds(cupyx_median):>11} "
        f"({len(theirs.gpu_times[0])} calls)   ratio {ours.time_s / cupyx_median:.3f}"
    )


def main(argv: Sequence[str] | None = None, cases: Sequence[Case] = CASES) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default: 0)")
    options = parser.parse_args(argv)

    if importlib.util.find_spec("cupy") is None:
        print(
            "no CuPy: nothing to check (pip install 'pytest-roofline[cuda12]' or '[cuda13]')", file=sys.stderr
        )
        return 2
    if device_count() == 0:
        print("no GPU: nothing to check (cupy.cuda.runtime.getDeviceCount() == 0)", file=sys.stderr)
        return 2

    import cupy
    from cupyx.profiler import benchmark

    backend = CudaBackend(options.device)
    print(f"CuPy {cupy.__version__}; device {options.device}: {backend.device_name}")
    for case in cases:
        print(check(case, options.device, cupy, benchmark), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
