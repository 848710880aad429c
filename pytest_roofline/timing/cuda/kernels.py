"""The CUDA C that the backend and its measurements launch, as ``cupy.RawKernel`` sources.

Kept apart from what launches them: the backend's flush and the L2 roof (:mod:`pytest_roofline.timing.l2`)
share the L2 read, and neither should import the other for it.
"""

from __future__ import annotations

#: ``roofline_block`` spins until the host writes a release count >= ``ticket`` into ``flags[0]``,
#: or ``timeout_ns`` pass on the GPU's global timer; then it writes its ticket to ``flags[1]``
#: (nvbench's blocking_kernel, with a count instead of a 0/1 flag: windows are queued back to back,
#: so the host never resets the flag under a kernel that has not seen it yet). ``roofline_delay``
#: spins ``delay_ns`` and returns: the probe of a kernel's first windows, which cannot deadlock.
BLOCK_SOURCE = r"""
extern "C" __global__ void roofline_block(unsigned long long flags, long long ticket,
                                          unsigned long long timeout_ns) {
    volatile long long* shared = (volatile long long*)flags;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (shared[0] < ticket) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            shared[1] = ticket;
            __threadfence_system();
            return;
        }
    }
}

extern "C" __global__ void roofline_delay(unsigned long long delay_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < delay_ns);
}
"""
#: the latency floor's kernel: a launch that does nothing
EMPTY_SOURCE = 'extern "C" __global__ void roofline_empty() {}'

#: the L2 read: every thread reads the same ``float4`` elements each pass with ``ld.global.cg``
#: (cached in the L2, not the L1); many passes over a buffer within the L2 are the L2 roof
#: (``roofline_l2_read``), one pass over twice the L2 the flush (``roofline_l2_flush``, named apart
#: so that CUPTI's records of it are left out of a window)
L2_READ_THREADS = 256
#: blocks per SM: enough warps in flight to cover the L2's latency
BLOCKS_PER_SM = 8
#: the flush kernel's name, as CUPTI's kernel records give it (``extern "C"``: not mangled)
FLUSH_KERNEL = "roofline_l2_flush"
#: kernels the backend launches around a window, never the kernel's own work
HOUSEKEEPING_KERNELS = (FLUSH_KERNEL, "roofline_block", "roofline_delay")

L2_READ_SOURCE = r"""
__device__ __forceinline__ void l2_read(const float4* __restrict__ buf, unsigned long long n4,
                                        int passes, float* __restrict__ sink) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (int p = 0; p < passes; ++p) {
        for (unsigned long long i = first; i < n4; i += stride) {
            float4 v = __ldcg(buf + i);  /* cached in the L2 only: the L1 would serve the next pass */
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
    }
    float total = acc.x + acc.y + acc.z + acc.w;
    if (total == 1.0f) sink[0] = total;  /* the buffer holds zeros: never written, but the loads stay */
}

extern "C" __global__ void roofline_l2_read(const float4* __restrict__ buf, unsigned long long n4,
                                            int passes, float* __restrict__ sink) {
    l2_read(buf, n4, passes, sink);
}

extern "C" __global__ void roofline_l2_flush(const float4* __restrict__ buf, unsigned long long n4,
                                             float* __restrict__ sink) {
    l2_read(buf, n4, 1, sink);
}
"""
