"""Problem sizes, speed-of-light budgets and the bad-variant mark of the example suite.

NumPy sizes: one call takes ~5-25 ms on the reference CPU (cheap, stable samples) and every good
variant's working set is >= 64 MiB, beyond what this CPU's caches can hold, so even a run without
cache flushing cannot time faster than DRAM allows. Bad variants run on smaller problems where
their waste would otherwise make one call take 100+ ms. CuPy sizes are larger where a GPU would
finish the NumPy size in a few microseconds.

Reference CPU (2-core Intel Xeon VM, AVX-512): np.copyto on 1 GiB float64 ~14-16 GB/s (counting
2*n*8 bytes), np.matmul 2048^3 ~60-68 GFLOP/s fp64, ~120-133 GFLOP/s fp32.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import pytest

# --- problem sizes (fp32 throughout) -----------------------------------------------------------

SAXPY_N = 1 << 23  # x, y: 32 MiB each; 96 MiB of useful traffic
SAXPY_STRIDED_N = 1 << 20  # useful elements; the buffers are SAXPY_STRIDE times longer (64 MiB each)
SAXPY_STRIDE = 16  # one 4 B float per 64 B cache line

LAYERNORM_SHAPE = (8192, 1024)  # rows, cols: x and out 32 MiB each
LAYERNORM_NAIVE_SHAPE = (4096, 1024)  # + three full-size temporaries: ~80 MiB touched

GEMM_SIZE = 768  # M = N = K for BLAS: 0.9 GFLOP
GEMM_NAIVE_SIZE = 256  # M = N = K for K rank-1 updates: 34 MFLOP, yet ~10x BLAS's time
CUPY_GEMM_SIZE = 4096  # cuBLAS: 137 GFLOP, ~2 ms at the H100's FP32 peak
CUPY_GEMM_NAIVE_SIZE = 2048

TRANSPOSE_SHAPE = (8192, 1024)  # rows, cols: in and out 32 MiB each

BIAS_RELU_SHAPE = (8192, 1024)  # rows, cols: x and out 32 MiB each

# --- budgets -----------------------------------------------------------------------------------

# TODO(integration): set each min_fraction from the plugin's own measurement of the good variant,
# with a 2x margin (budget = attained / 2); the bad variant of the family must then miss it.
# Until then every entry is None, so the plugin's default applies. Attained fractions measured
# with plain timeit on the reference CPU (example_project/measure_fractions.py), good / bad:
#   saxpy      ~0.55 / ~0.045    layernorm  ~0.19 / ~0.04     gemm  ~0.5-1.0 / ~0.02
#   transpose  ~0.21 / ~0.08     bias_relu  ~0.35
BUDGETS: Mapping[str, Mapping[str, float | None]] = MappingProxyType(
    {
        "saxpy": {"numpy": None, "cupy": None},
        "layernorm": {"numpy": None, "cupy": None},
        "gemm": {"numpy": None, "cupy": None},
        "transpose": {"numpy": None, "cupy": None},
        "bias_relu": {"numpy": None, "cupy": None},
    }
)


def misses_roofline(reason: str) -> pytest.MarkDecorator:
    """Mark a bad variant: it must miss its speed-of-light budget, and nothing else may fail it.

    ``raises=pytest.fail.Exception`` is what makes this safe: the plugin fails a test that misses
    its budget with ``pytest.fail``, while a wrong result raises ``AssertionError`` and so still
    fails the test instead of hiding behind the expected failure.
    """
    return pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason=reason)
