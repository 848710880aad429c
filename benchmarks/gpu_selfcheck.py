"""``roofline selfcheck`` on a GPU, with the example project's CuPy kernels as well.

The command (``pytest_roofline/machine/selfcheck``) times a copy, a matmul and two elementwise kernels
with the engine beside cupyx, ``torch.cuda.Event`` pairs, Triton's ``do_bench`` and a CUDA graph
replayed between events; this script adds the example project's kernels, good and bad variants side
by side, so that their ratios are seen on the same GPU. Everything else (the table, the verdict, the
exit status, ``--json``, ``--fake``) is the command's: see docs/cli.md.

Run from the repository root: ``python benchmarks/gpu_selfcheck.py [--device cuda:N] [--json PATH]
[--fake]``. No figure it prints on this machine means anything (``--fake``); the lead runs it on a GPU.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, not installed

from pytest_roofline.errors import RooflineError  # noqa: E402
from pytest_roofline.machine.selfcheck import selfcheck  # noqa: E402
from pytest_roofline.machine.selfcheck.gpu_check import CASES, GpuCase  # noqa: E402
from pytest_roofline.timing.base import Kernel  # noqa: E402


def _example(
    kernel: str, *shapes: tuple[int, ...], lead: tuple[object, ...] = (), tail: tuple[object, ...] = ()
) -> Callable[[Any], tuple[Kernel, tuple[object, ...]]]:
    """A case for one of example_project's CuPy kernels: ``lead``, float32 arrays of ``shapes``, ``tail``."""

    def setup(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
        if str(ROOT / "example_project") not in sys.path:
            sys.path.insert(0, str(ROOT / "example_project"))
        from kernels import cupy_backend

        arrays = tuple(cupy.random.random(shape, dtype=cupy.float32) for shape in shapes)
        return getattr(cupy_backend, kernel), (*lead, *arrays, *tail)

    return setup


_N = 1 << 24
_ROWS, _COLS = 8192, 1024
_COL, _MATRIX, _MATRIX_T = (_COLS,), (_ROWS, _COLS), (_COLS, _ROWS)

EXAMPLE_CASES: list[GpuCase] = [
    GpuCase("example saxpy vec4", _example("saxpy", (_N,), (_N,), lead=(0.5,))),
    GpuCase(
        "example saxpy stride 16", _example("saxpy_strided", (16 * _N,), (16 * _N,), lead=(0.5,), tail=(16,))
    ),
    GpuCase("example layernorm fused", _example("layernorm", _MATRIX, _COL, _COL, _MATRIX)),
    GpuCase("example layernorm naive", _example("layernorm_naive", _MATRIX, _COL, _COL, _MATRIX)),
    GpuCase("example gemm naive 2048³", _example("gemm_naive", (2048, 2048), (2048, 2048), (2048, 2048))),
    GpuCase("example transpose tiled", _example("transpose", _MATRIX, _MATRIX_T)),
    GpuCase("example transpose naive", _example("transpose_naive", _MATRIX, _MATRIX_T)),
    GpuCase("example bias_relu", _example("bias_relu", _MATRIX, _COL, _MATRIX)),
]


def main(argv: Sequence[str] | None = None, cases: Sequence[GpuCase] | None = None) -> int:
    """The self-check over ``cases`` (default: the command's kernels and the example project's);
    exit status 0 when every timer agrees, 1 when one disagrees, 2 for bad usage."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N (default: cuda)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument("--fake", action="store_true", help="run on the test suite's fakes (no GPU needed)")
    options = parser.parse_args(argv)
    chosen = [*CASES, *EXAMPLE_CASES] if cases is None else list(cases)
    try:
        text, status = selfcheck(options.device, json_path=options.json, fake=options.fake, gpu_cases=chosen)
    except (RooflineError, ValueError) as exc:  # a bad device or path: one line, as the command says it
        print(f"gpu_selfcheck: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
