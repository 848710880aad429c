"""The PTX reader (entries, instruction mix, strided accesses) and the SASS counter, on hand-written text."""

from __future__ import annotations

import pytest

from pytest_roofline.analysis import ptx, sass

# The shape nvcc gives a transpose: coalesced load (tid.x x 4 B), store strided by a parameter.
TRANSPOSE = """
.visible .entry transpose_naive(
	.param .u64 transpose_naive_param_0,
	.param .u64 transpose_naive_param_1,
	.param .u32 transpose_naive_param_2,
	.param .u32 transpose_naive_param_3
)
{
	.reg .b32 	%r<11>;
	.reg .b64 	%rd<15>;
	ld.param.u64 	%rd1, [transpose_naive_param_0];
	ld.param.u64 	%rd2, [transpose_naive_param_1];
	ld.param.u32 	%r3, [transpose_naive_param_2];
	ld.param.u32 	%r4, [transpose_naive_param_3];
	mov.u32 	%r5, %ctaid.x;
	mov.u32 	%r6, %ntid.x;
	mov.u32 	%r7, %tid.x;
	mad.lo.s32 	%r1, %r5, %r6, %r7;
	mov.u32 	%r10, %tid.y;
	cvta.to.global.u64 	%rd3, %rd1;
	cvt.s64.s32 	%rd4, %r10;
	mul.wide.s32 	%rd5, %r4, %r10;
	cvt.s64.s32 	%rd6, %r1;
	add.s64 	%rd7, %rd5, %rd6;
	shl.b64 	%rd8, %rd7, 2;
	add.s64 	%rd9, %rd3, %rd8;
	ld.global.f32 	%f1, [%rd9];
	mul.wide.s32 	%rd10, %r3, %r1;
	add.s64 	%rd11, %rd10, %rd4;
	cvta.to.global.u64 	%rd12, %rd2;
	shl.b64 	%rd13, %rd11, 2;
	add.s64 	%rd14, %rd12, %rd13;
	st.global.f32 	[%rd14], %f1;
	ret;
}
"""

# A grid-stride loop: the pointer is advanced by a uniform step each iteration (a loop-carried join).
LOOP = """
.visible .entry scale(
	.param .u64 scale_param_0
)
{
	ld.param.u64 	%rd1, [scale_param_0];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd2, %r1, 16;
	add.s64 	%rd3, %rd1, %rd2;
$L__BB0_1:
	@%p1 ld.global.nc.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd3];
	mul.rn.f32 	%f5, %f1, 0f40000000;
	st.global.v4.f32 	[%rd3+16], {%f5, %f2, %f3, %f4};
	add.s64 	%rd3, %rd3, 4096;
	@%p2 bra 	$L__BB0_1;
	ret;
}
"""

# Every instruction kind the mix counts, once or twice.
MIX = """
.visible .entry mix(
)
{
	.shared .align 4 .b8 tile[1024];
	ld.global.f32 	%f1, [%rd1];
	ld.global.v2.f64 	{%fd1, %fd2}, [%rd2];
	st.global.v4.b32 	[%rd3], {%r1, %r2, %r3, %r4};
	st.global.f32 	[%rd3], %f1;
	ld.shared.f32 	%f2, [%r5];
	st.shared.f32 	[%r5], %f2;
	ld.local.u32 	%r6, [%rd4];
	cp.async.cg.shared.global [%r7], [%rd5], 16;
	cp.async.commit_group;
	cp.async.wait_group 0;
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f1,%f2}, {%r1,%r2}, {%r5,%r6}, {%f1,%f2};
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%f1}, %rd6, %rd7, 1, 1, 1, 0, 0;
	shfl.sync.bfly.b32 	%r8|%p1, %r9, 16, 31, -1;
	bar.sync 	0;
	fma.rn.f32 	%f3, %f1, %f2, %f3;
	cvt.f64.f32 	%fd3, %f3;
	mul.f64 	%fd4, %fd3, 0d3FE0000000000000;
	cvt.rn.f32.f64 	%f4, %fd4;
	ret;
}
"""


def test_entries_and_bodies() -> None:
    text = TRANSPOSE + LOOP
    assert ptx.entries(text) == ("transpose_naive", "scale")
    body = ptx.entry_body(text, "scale")
    assert body.lstrip().startswith(".visible .entry scale(")
    assert "transpose" not in body
    with pytest.raises(KeyError):
        ptx.entry_body(text, "missing")


def test_the_most_threads_per_block_launch_bounds_allow() -> None:
    bounded = LOOP.replace(")\n{", ")\n.maxntid 128, 2, 1\n{", 1)
    assert ptx.max_threads(ptx.entry_body(bounded, "scale")) == 256
    assert ptx.max_threads(ptx.entry_body(LOOP, "scale")) is None


def test_instruction_mix_counts_each_kind() -> None:
    mix = ptx.instruction_mix(MIX)
    assert (mix.global_loads, mix.global_loads_128) == (2, 1)  # v2.f64 is 128 bits
    assert (mix.global_stores, mix.global_stores_128) == (2, 1)
    assert (mix.shared_loads, mix.shared_stores, mix.local_accesses) == (1, 1, 1)
    assert mix.cp_async == 1  # commit and wait are not copies
    assert mix.tensor_core == 2  # mma.sync and wgmma.mma_async; the fence is not an MMA
    assert (mix.warp_shuffles, mix.barriers) == (1, 1)
    assert mix.fp32_math == 1
    assert mix.fp64_math == 3  # the promotion, the double multiply, the demotion
    assert mix.to_record()["fp64_math"] == 3


def test_a_transpose_store_strided_by_a_parameter() -> None:
    found = ptx.strided_accesses(ptx.entry_body(TRANSPOSE, "transpose_naive"))
    assert len(found) == 1
    (store,) = found
    assert (store.kind, store.width, store.stride) == ("store", 4, None)
    assert store.line.startswith("st.global.f32")
    assert "run-time stride" in store.describe()


def test_vector_accesses_one_vector_apart_are_coalesced() -> None:
    body = ptx.entry_body(LOOP, "scale")
    assert ptx.strided_accesses(body) == ()  # 16 B per thread, 16 B apart
    mix = ptx.instruction_mix(body)
    assert (mix.global_loads_128, mix.global_stores_128) == (1, 1)


def test_a_constant_stride_wider_than_the_access() -> None:
    body = """.visible .entry s(
)
{
	mov.u32 	%r1, %tid.x;
	mul.lo.s32 	%r2, %r1, 32;
	mul.wide.s32 	%rd2, %r2, 4;
	add.s64 	%rd3, %rd1, %rd2;
	ld.global.f32 	%f1, [%rd3];
	mov.u32 	%r3, %ctaid.x;
	mul.wide.s32 	%rd4, %r3, 4;
	add.s64 	%rd5, %rd1, %rd4;
	ld.global.f32 	%f2, [%rd5];
	ret;
}"""
    (load,) = ptx.strided_accesses(body)  # the second load is uniform: a broadcast, not strided
    assert (load.kind, load.stride) == ("load", 128)
    assert "128 B" in load.describe()


def test_non_affine_addresses_are_not_blamed() -> None:
    body = """.visible .entry g(
)
{
	mov.u32 	%r1, %tid.x;
	rem.s32 	%r2, %r1, %r9;
	mul.wide.s32 	%rd2, %r2, 4;
	add.s64 	%rd3, %rd1, %rd2;
	ld.global.f32 	%f1, [%rd3];
	ret;
}"""
    assert ptx.strided_accesses(body) == ()


SASS = """
	code for sm_86
		Function : gemm
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM86"
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128.CONSTANT R4, [R2.64] ;
        /*0020*/                   LDG.E R8, [R2.64] ;
        /*0030*/                   LDGSTS.E.BYPASS.128 [R0], [R2.64] ;
        /*0040*/                   HMMA.16816.F32.BF16 R12, R4, R8, R12 ;
        /*0050*/               @P0 FFMA R9, R4, R5, R9 ;
        /*0060*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0070*/                   STG.E.128 [R2.64], R12 ;
        /*0080*/                   DFMA R2, R4, R6, R2 ;
		Function : other
        /*0000*/                   FFMA R1, R2, R3, R1 ;
"""


def test_sass_counts_per_function() -> None:
    counts = sass.counts(SASS, "gemm")
    assert counts is not None
    assert counts["LDG"] == 2
    assert counts["LDG.128"] == 1
    assert (counts["LDGSTS"], counts["HMMA"], counts["FFMA"], counts["BAR.SYNC"]) == (1, 1, 1, 1)
    assert (counts["STG"], counts["STG.128"], counts["DFMA/DADD/DMUL"], counts["IMMA"]) == (1, 1, 1, 0)
    assert sass.counts(SASS, "other") == {**dict.fromkeys(sass.PATTERNS, 0), "FFMA": 1}
    assert sass.counts(SASS, "missing") is None
