"""CUDA C source of the example kernels, as plain strings (no CuPy import here).

Every source is a self-contained translation unit of ``extern "C"`` kernels, so the same string
compiles with NVRTC at run time (:mod:`kernels.cupy_backend`) and with ``nvcc --ptx`` in the
plugin's compile-time checks (``tests/analysis/test_example_ptx.py``). :data:`CUDA_SOURCES` lists every
one with the kernels it defines and what its PTX must show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

#: What a kernel's PTX can be checked for. Every :class:`CudaSource` states each claim, True or False.
CLAIMS: tuple[str, ...] = (
    "v4_global_loads",  # 128-bit global loads: ld.global[.nc].v4.f32
    "v4_global_stores",  # 128-bit global stores: st.global.v4.f32
    "shared_memory",  # uses __shared__ memory: a .shared declaration / ld.shared / st.shared
    "bar_sync",  # block-wide barrier: bar.sync (__syncthreads)
    "warp_shuffle",  # register-to-register warp reduction: shfl.sync
)


@dataclass(frozen=True, slots=True)
class CudaSource:
    """One CUDA translation unit and what its PTX must show."""

    code: str
    kernels: tuple[str, ...]
    claims: Mapping[str, bool]

    def __post_init__(self) -> None:
        if set(self.claims) != set(CLAIMS):
            raise ValueError(f"claims must state each of {CLAIMS}; got {sorted(self.claims)}")
        missing = [k for k in self.kernels if f'extern "C" __global__ void {k}(' not in self.code]
        if missing:
            raise ValueError(f"kernels not defined in the source: {missing}")


def _claims(
    *,
    v4_global_loads: bool = False,
    v4_global_stores: bool = False,
    shared_memory: bool = False,
    bar_sync: bool = False,
    warp_shuffle: bool = False,
) -> Mapping[str, bool]:
    return MappingProxyType(
        {
            "v4_global_loads": v4_global_loads,
            "v4_global_stores": v4_global_stores,
            "shared_memory": shared_memory,
            "bar_sync": bar_sync,
            "warp_shuffle": warp_shuffle,
        }
    )


# --- elementwise: saxpy y = a*x + y -------------------------------------------------------------

# Memory-bound (AI = 2 FLOP / 12 B): coalesced float4 loads and stores move 16 B per thread per access.
SAXPY_VEC4_SRC = r"""
extern "C" __global__ void saxpy_vec4(const float a, const float* __restrict__ x,
                                      float* __restrict__ y, const long long n)
{
    const long long n4 = n >> 2;
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = first; i < n4; i += step) {
        const float4 xv = __ldg(&x4[i]);
        float4 yv = y4[i];
        yv.x = fmaf(a, xv.x, yv.x);
        yv.y = fmaf(a, xv.y, yv.y);
        yv.z = fmaf(a, xv.z, yv.z);
        yv.w = fmaf(a, xv.w, yv.w);
        y4[i] = yv;
    }
    const long long tail = (n4 << 2) + first;  /* the last n % 4 elements */
    if (tail < n) {
        y[tail] = fmaf(a, x[tail], y[tail]);
    }
}
"""

# Neighbouring threads sit `stride` floats apart: each 4 B element drags in its own 32 B sector.
SAXPY_STRIDED_SRC = r"""
extern "C" __global__ void saxpy_strided(const float a, const float* x, float* y,
                                         const long long n, const long long stride)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const long long j = i * stride;
        y[j] = fmaf(a, x[j], y[j]);
    }
}
"""

# --- layernorm over the last axis --------------------------------------------------------------

# Memory-bound (~1 FLOP/B): a block per row reads x from DRAM once, reduces in warp shuffles, writes once.
LAYERNORM_FUSED_SRC = r"""
__device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

/* Sum over the block: shuffle within each warp, then warp 0 sums the per-warp partials. */
__device__ float block_sum(float v, float* partial /* [32] */, float* total)
{
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    if (warp == 0) {
        const int warps = (blockDim.x + 31) >> 5;
        v = warp_sum(lane < warps ? partial[lane] : 0.0f);
        if (lane == 0) {
            *total = v;
        }
    }
    __syncthreads();
    const float result = *total;
    __syncthreads();  /* partial and total are reused by the next call */
    return result;
}

extern "C" __global__ void layernorm_fused(const float* __restrict__ x,
                                           const float* __restrict__ gamma,
                                           const float* __restrict__ beta,
                                           float* __restrict__ y, const int cols, const float eps)
{
    __shared__ float partial[32];
    __shared__ float total;
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;

    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        s += xr[j];
    }
    const float mean = block_sum(s, partial, &total) / cols;

    float ss = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        const float d = xr[j] - mean;
        ss += d * d;
    }
    const float rstd = rsqrtf(block_sum(ss, partial, &total) / cols + eps);

    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
    }
}
"""

# Four kernels with a centred copy of x in global memory, and uncoalesced one-thread-per-row sums.
LAYERNORM_NAIVE_SRC = r"""
extern "C" __global__ void ln_row_mean(const float* x, float* mean, const int rows, const int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float s = 0.0f;
        for (int j = 0; j < cols; ++j) {
            s += x[(long long)r * cols + j];
        }
        mean[r] = s / cols;
    }
}

extern "C" __global__ void ln_center(const float* x, const float* mean, float* xc,
                                     const int rows, const int cols)
{
    const long long n = (long long)rows * cols;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        xc[i] = x[i] - mean[i / cols];
    }
}

extern "C" __global__ void ln_row_rstd(const float* xc, float* rstd, const int rows, const int cols,
                                       const float eps)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float ss = 0.0f;
        for (int j = 0; j < cols; ++j) {
            const float d = xc[(long long)r * cols + j];
            ss += d * d;
        }
        rstd[r] = rsqrtf(ss / cols + eps);
    }
}

extern "C" __global__ void ln_scale(const float* xc, const float* rstd, const float* gamma,
                                    const float* beta, float* y, const int rows, const int cols)
{
    const long long n = (long long)rows * cols;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const int j = (int)(i % cols);
        y[i] = xc[i] * rstd[i / cols] * gamma[j] + beta[j];
    }
}
"""

# --- gemm ----------------------------------------------------------------------------------------

# One thread per output re-reads a row of A and a column of B: AI ~0.25 FLOP/B, far under the ridge.
GEMM_NAIVE_SRC = r"""
extern "C" __global__ void gemm_naive(const float* a, const float* b, float* c,
                                      const int M, const int N, const int K)
{
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) {
            acc = fmaf(a[(long long)row * K + k], b[(long long)k * N + col], acc);
        }
        c[(long long)row * N + col] = acc;
    }
}
"""

# --- transpose -----------------------------------------------------------------------------------

# Coalesced reads, but a warp's 32 stores land `rows` floats apart: 32 sectors per store instruction.
TRANSPOSE_NAIVE_SRC = r"""
extern "C" __global__ void transpose_naive(const float* in, float* out, const int rows, const int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[(long long)c * rows + r] = in[(long long)r * cols + c];
    }
}
"""

# A 32x33 shared tile makes both global sides coalesced; the +1 pad spreads a tile column over 32 banks.
TRANSPOSE_TILED_SRC = r"""
#define TILE 32
#define BLOCK_ROWS 8

extern "C" __global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out,
                                           const int rows, const int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        if (c < cols && r + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in[(long long)(r + j) * cols + c];
        }
    }
    __syncthreads();
    c = blockIdx.y * TILE + threadIdx.x;  /* output column = input row */
    r = blockIdx.x * TILE + threadIdx.y;  /* output row = input column */
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        if (c < rows && r + j < cols) {
            out[(long long)(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
"""

# --- custom op: y = relu(x + bias), bias broadcast over rows --------------------------------------

# Memory-bound: float4 loads of x, float4 stores of y; the bias row stays in cache.
BIAS_RELU_VEC4_SRC = r"""
extern "C" __global__ void bias_relu_vec4(const float* __restrict__ x, const float* __restrict__ bias,
                                          float* __restrict__ y, const int rows, const int cols)
{
    const int cols4 = cols >> 2;
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const float4* __restrict__ b4 = reinterpret_cast<const float4*>(bias);
    float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols4; c += gridDim.x * blockDim.x) {
            const long long i = (long long)r * cols4 + c;
            float4 v = __ldg(&x4[i]);
            const float4 b = __ldg(&b4[c]);
            v.x = fmaxf(v.x + b.x, 0.0f);
            v.y = fmaxf(v.y + b.y, 0.0f);
            v.z = fmaxf(v.z + b.z, 0.0f);
            v.w = fmaxf(v.w + b.w, 0.0f);
            y4[i] = v;
        }
    }
}
"""

#: Every CUDA source of the example, by name, with the kernels it defines and what its PTX shows.
CUDA_SOURCES: Mapping[str, CudaSource] = MappingProxyType(
    {
        "saxpy_vec4": CudaSource(
            SAXPY_VEC4_SRC, ("saxpy_vec4",), _claims(v4_global_loads=True, v4_global_stores=True)
        ),
        "saxpy_strided": CudaSource(SAXPY_STRIDED_SRC, ("saxpy_strided",), _claims()),
        "layernorm_fused": CudaSource(
            LAYERNORM_FUSED_SRC,
            ("layernorm_fused",),
            _claims(shared_memory=True, bar_sync=True, warp_shuffle=True),
        ),
        "layernorm_naive": CudaSource(
            LAYERNORM_NAIVE_SRC, ("ln_row_mean", "ln_center", "ln_row_rstd", "ln_scale"), _claims()
        ),
        "gemm_naive": CudaSource(GEMM_NAIVE_SRC, ("gemm_naive",), _claims()),
        "transpose_naive": CudaSource(TRANSPOSE_NAIVE_SRC, ("transpose_naive",), _claims()),
        "transpose_tiled": CudaSource(
            TRANSPOSE_TILED_SRC, ("transpose_tiled",), _claims(shared_memory=True, bar_sync=True)
        ),
        "bias_relu_vec4": CudaSource(
            BIAS_RELU_VEC4_SRC, ("bias_relu_vec4",), _claims(v4_global_loads=True, v4_global_stores=True)
        ),
    }
)
