"""Problem sizes, speed-of-light budgets and the bad-variant mark of the example suite.

NumPy sizes: one call of a good variant takes ~5-25 ms on the reference CPU (cheap, stable
samples) and moves >= 64 MiB, twice its L3, so it runs from DRAM. Bad variants use smaller
problems where their waste would otherwise make one call take 100+ ms. Sizes and shapes are
chosen so that good and bad variants attain fractions of speed of light far apart (see the
budgets below). On the GPU, the good variants still move 64-128 MiB (past a 50 MB L2); gemm and
transpose get CuPy sizes of their own.

Reference CPU: a 2-core AMD EPYC VM (AVX2 + FMA, 512 KiB L2 per core, 32 MiB L3), shared with
other jobs. `roofline calibrate` on it: 33.7 GB/s (BLAS dot; copy 19.1, triad 26.7), np.matmul
185 GFLOP/s fp32 and 80 GFLOP/s fp64 (two BLAS threads).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import pytest

# --- problem sizes (fp32 throughout) -----------------------------------------------------------

SAXPY_N = 1 << 23  # x, y: 32 MiB each; 96 MiB of useful traffic
SAXPY_STRIDED_N = 1 << 14  # useful elements; the buffers are SAXPY_STRIDE times longer (64 MiB each)
SAXPY_STRIDE = 1024  # one column of a row-major (n, 1024) matrix: one 4 B float per 4 KiB page
# CuPy: 16384 floats are a few µs of launch on a GPU (44% of its latency floor on the first H200 run,
# no miss), so 4 Mi useful floats, one per 128 B line: each 32 B sector fetched carries one useful
# float; the buffers are 512 MiB each
CUPY_SAXPY_STRIDED_N = 1 << 22
CUPY_SAXPY_STRIDE = 32

LAYERNORM_SHAPE = (8192, 1024)  # rows, cols: x and out 32 MiB each
LAYERNORM_NAIVE_SHAPE = (1024, 256)  # a small model's rows, in a Python loop: ~50 ms for 1024

GEMM_SIZE = 1024  # M = N = K for BLAS: 2.1 GFLOP
GEMM_NAIVE_SIZE = 64  # M = N = K for K rank-1 updates: 4096x fewer FLOPs than BLAS's, <1 ms
CUPY_GEMM_SIZE = 4096  # cuBLAS: 137 GFLOP, ~2 ms at the H100's FP32 peak
CUPY_GEMM_NAIVE_SIZE = 2048

TRANSPOSE_SHAPE = (1 << 20, 8)  # records of 8 floats (32 B) into 8 columns: in and out 32 MiB each
TRANSPOSE_NAIVE_SHAPE = (1 << 16, 8)  # a NumPy call per record: 65536 of them take ~40 ms
CUPY_TRANSPOSE_SHAPE = (8192, 1024)  # both CuPy variants: whole 32 x 32 tiles, in and out 32 MiB

BIAS_RELU_SHAPE = (8192, 1024)  # rows, cols: x and out 32 MiB each

# tiny_decoder.json: 4 layers of 512, fp32: ~65 MB of weights per decode step, twice the L3
DECODER_BATCH = 1
DECODER_CONTEXT = 512  # tokens already in the KV cache
# the decoders measured whole (tests/test_decoder.py) and kernel by kernel (tests/test_decoder_ops.py),
# each at DECODER_CONTEXT: (id, config beside this file, batch). The first is the main job's; the
# others run with --decoder-variants=all (conftest.py)
DECODER_VARIANTS = (
    ("tiny-b1", "tiny_decoder.json", DECODER_BATCH),
    ("tiny-b8", "tiny_decoder.json", 8),
    ("wide-b1", "wide_decoder.json", DECODER_BATCH),  # 2 layers of 768, 12 heads, 4 KV heads
)

# --- budgets -----------------------------------------------------------------------------------

# NumPy: each budget is the geometric mean of the good variant's lowest and the bad variant's
# highest attained fraction, rounded, so that it sits the same factor above the one as below the
# other. Measured by the plugin itself (ceilings paired with a probe beside each kernel, median;
# every kernel cold, by rotation, as the plugin measures by default since issue 19) in enforce mode
# with `python benchmarks/example_margins.py --enforce --keep DIR`, pooled over 30 runs of this
# suite on a 2-core Intel Xeon VM (504 MiB L3, 2026-11-23): 20 serial, 5 under -n 2 and 5 beside
# the synthetic neighbour `--neighbour mix` (one process streaming memory, one spinning a core:
# the machine's two cores fully taken). The same outcome in all 30 runs.
#              good           bad            separation   geometric mean    budget (was, warm)
#   saxpy      60.2-64.1%     0.59-0.63%     96x          6.1%              6.1% (7%)
#   layernorm  14.3-15.3%     0.49-0.61%     24x          2.9%              2.9% (1.4%)
#   gemm       17.4-93.1%     0.47-0.92%     19x          4.0%              12% (kept: below)
#   transpose  31.3-33.0%     0.70-0.82%     38x          5.1%              5.1% (2.9%)
#   bias_relu  27.6-34.1%     (no bad variant: a quarter of its lowest)     1.6% (6.9%, 3.5%)
#   decoder    4.2-10.4%      (no bad variant: a quarter of its lowest)     1%
# The cold default moved them: the bad variants, timed cold, read 2-3x higher than when their
# small working sets were timed warm in the cache (naive layernorm 0.2% -> 0.5%, naive transpose
# 0.3% -> 0.7%), so the budgets were derived again from these runs. Every other budget has a margin
# of at least 4.9x to both sides, more than the 2x by which heavy contention may make a miss
# inconclusive. gemm keeps 12%: its bad variant was counted on two threads (the probe's spinning
# BLAS threads, no longer counted since 2026-11-29), and a miss less than 10x
# below its budget is inconclusive when those threads waited for a core (verdict.WAITED_SLACK), so
# at the geometric mean (4%) the rank-1 GEMM read inconclusive beside a neighbour and under -n 2
# (0.47%, and XPASSed its strict xfail) in confirmation runs; at 12% it stays a miss (0.92% at most
# over the 30 runs). Its good variant's low comes from the neighbour runs: two BLAS threads beside
# two hogs are slowed erratically (17.4% there, 89-93% quiet). The earlier budgets (in brackets) were
# derived the same way on a 2-core AMD EPYC VM (32 MiB L3) with warm small kernels; where the
# plugin's measurement changes, rerun the script and reset them.
# bias_relu: a quarter of its lowest anywhere, 6.6% on the 16-core Xeon of the first GPU machine
# (2026-11-26), whose all-core bandwidth ceiling (107 GB/s) a single-threaded NumPy loop reaches a
# far smaller share of than on two cores: it missed 6.9% there.
# The other NumPy budgets are the reference VM's alone: on the GPU hosts' Xeons (six runs of
# benchmarks/gpu_run.sh, 2026-11-26) layernorm's fused variant read 2.5-4.3% (missing 2.9% once)
# and transpose's blocked one 5.2-9.5% (5.1%: inconclusive once), while the bad variants read
# 0.1-0.2%. A budget that held on both would sit within 2x of the VM's bad variants, inside the
# margin heavy contention makes inconclusive, so they are kept, and gpu_run.sh judges the example's
# CUDA tests only (check_json.py --as-designed cuda).
# NumPy's single-threaded elementwise loops, not DRAM, cap the good variants of layernorm and
# transpose: the blocked passes run at cache speed, and still lose to the 2-thread BLAS dot that
# set the bandwidth ceiling. The decoder step (tests/test_decoder.py, op="llm": the sum of its 50
# kernels' floors): its two-thread BLAS matrix-vector products wait for a core about half their
# time beside other jobs, so its budget stays a quarter of its lowest (4.2% over the 30 runs).
#
# CuPy: 0.6 of the good variant's lowest attained fraction (cold, against the datasheet) over four
# runs of `bash benchmarks/gpu_run.sh` on an NVIDIA H200 (three on 2026-11-26, one on 2026-11-28;
# between runs a memory-bound GPU kernel's median moves within ±5%, a compute-bound one's within
# ±17%: pytest_roofline/model/run_noise.py), so that the kernel made 2x slower fails its budget
# (0.5 of its fraction is under 0.6 of the lowest), with 40% of margin for that noise; and each bad
# variant's highest:
#              good (lowest)   bad (highest)    budget   2x slower
#   saxpy      76.2%           3.9% *           45%      38%
#   layernorm  38.2%           1.8%             22%      19%
#   gemm       76.4%           10.5%            45%      38%
#   transpose  64.8%           10.1%            38%      32%
#   bias_relu  71.8%           (no bad variant) 43%      36%
# (2026-11-28: saxpy 76.9%, layernorm 39.1%, gemm 76.7%, transpose 66.5%, bias_relu 74.5%.)
# * CUPY_SAXPY_STRIDED_N floats (runs 2 and 3); the first run's 16384 floats sat at the GPU's
#   latency floor and read 44.4%.
# On another GPU, run the suite with --roofline-mode report and set them from what it prints.
#: per kernel, (the good variant's lowest, the bad variant's highest or None) attained on the H200
CUPY_MEASURED: Mapping[str, tuple[float, float | None]] = MappingProxyType(
    {
        "saxpy": (0.762, 0.039),
        "layernorm": (0.382, 0.018),
        "gemm": (0.764, 0.105),
        "transpose": (0.648, 0.101),
        "bias_relu": (0.718, None),
    }
)
#: a CuPy budget's share of its good variant's lowest: over a half, so that 2x slower fails
CUPY_SHARE = 0.6
BUDGETS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "saxpy": {"numpy": 0.061, "cupy": 0.45},
        "layernorm": {"numpy": 0.029, "cupy": 0.22},
        "gemm": {"numpy": 0.12, "cupy": 0.45},
        "transpose": {"numpy": 0.051, "cupy": 0.38},
        "bias_relu": {"numpy": 0.016, "cupy": 0.43},
        "decoder": {"numpy": 0.01},
    }
)

# The decode step's kernels one by one (tests/test_decoder_ops.py), by the step's op: a quarter of
# each op's lowest attained fraction, rounded down, over the three DECODER_VARIANTS in 33 runs of the
# decoder tests on a 2-core Intel Xeon VM (300 MiB L3, 2026-11-29): 15 serial, 15 under -n 2, 3
# beside `neighbour.py --kind mix`. The warm ops run after an 8 MiB read, as in the step:
#              lowest (variant)                  budget
#   embedding       6.2%  (tiny-b1)               1.5%
#   add_rmsnorm     0.095% (tiny-b1, warm, -n 2)  0.023%
#   gemm            0.84% (tiny-b8 qkv_proj, mix) 0.1%   (kept from 2026-11-28: 0.44% beside mix)
#   rope            0.051% (tiny-b1, warm)        0.012%
#   kv_cache_write  0.59% (wide-b1, warm, mix)    0.14%
#   attention      14.7%  (tiny-b1)               1.7%   (kept: 7.1% on 2026-11-28)
#   swiglu          0.23% (tiny-b1, warm)         0.056%
# The warm ones are judged against L2's bandwidth, floors of tens to hundreds of nanoseconds that a
# few NumPy calls of a microsecond or more cannot approach: they are there for their times, which
# `roofline llm --from` adds up, and their budgets only catch a kernel gone far slower. The whole
# steps of the other variants read as low as 1.85% (tiny-b8, heavy contention): within the 2x that
# heavy contention leaves inconclusive of the decoder's 1%.
DECODER_OP_BUDGETS: Mapping[str, float] = MappingProxyType(
    {
        "embedding": 0.015,
        "add_rmsnorm": 0.00023,
        "gemm": 0.001,
        "rope": 0.00012,
        "kv_cache_write": 0.0014,
        "attention": 0.017,
        "swiglu": 0.00056,
    }
)


def decoder_variants(config: pytest.Config) -> tuple[tuple[str, str, int], ...]:
    """The DECODER_VARIANTS this run measures: the first alone, or all with --decoder-variants=all."""
    return DECODER_VARIANTS if config.getoption("decoder_variants") == "all" else DECODER_VARIANTS[:1]


def misses_roofline(reason: str) -> pytest.MarkDecorator:
    """Mark a bad variant: in enforce mode it must miss its speed-of-light budget, and nothing else
    may fail it.

    ``conftest.py`` turns this mark into ``xfail(strict=True, raises=pytest.fail.Exception)`` when
    the plugin enforces budgets. ``raises=`` is what makes that safe: the plugin fails a test that
    misses its budget with ``pytest.fail``, while a wrong result raises ``AssertionError`` and so
    still fails the test instead of hiding behind the expected failure. An inconclusive verdict
    skips it, saying why (``conftest.py``). In report and off modes nothing misses, so the mark does
    nothing and the test must simply pass.
    """
    return pytest.mark.misses_roofline(reason=reason)
