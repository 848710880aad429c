"""Static facts read from real nvcc output: the example project's kernels, an accidental double
promotion, register spills, the cache, and the kernel objects a test may pass.

The compiling tests are skipped, saying why, where nvcc is not installed (no GPU is needed). All
of them share one cache directory, so each source is compiled once per worker.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from conftest import REPO_ROOT

from pytest_roofline.analysis import compiler
from pytest_roofline.analysis.compiler import CompileError, compile_source, find_tool
from pytest_roofline.analysis.diagnosis import Diagnosis, Standing, diagnose
from pytest_roofline.analysis.kernelfacts import (
    CudaKernel,
    KernelFactsError,
    StaticFacts,
    Unavailable,
    facts_for,
    load_source,
    resource_usage,
    static_facts,
    triton_facts,
)
from pytest_roofline.analysis.occupancy import ArchError
from pytest_roofline.model.estimate import estimate

ROOT = REPO_ROOT
KERNELS_DIR = ROOT / "example_project" / "kernels"
needs_nvcc = pytest.mark.skipif(
    find_tool("nvcc") is None, reason="nvcc is not available: these tests read real compiler output"
)

PROMOTED = r"""
__global__ void scale_promoted(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * 0.5 + 1.0;  /* double literals: computed in FP64, rounded back */
    }
}
"""
FIXED = PROMOTED.replace("0.5 + 1.0", "0.5f + 1.0f").replace("scale_promoted", "scale_fixed")

SPILLY = r"""
extern "C" __global__ void spilly(const float* x, float* y, int n)
{
    float acc[48];
    #pragma unroll
    for (int j = 0; j < 48; ++j) acc[j] = x[threadIdx.x + j * n];
    for (int k = 0; k < n; ++k) {
        #pragma unroll
        for (int j = 0; j < 48; ++j) acc[j] = acc[j] * acc[(j + 7) % 48] + x[k];
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < 48; ++j) s += acc[j];
    y[threadIdx.x] = s;
}
"""


def _load_backend() -> ModuleType:
    """The example's CuPy back-end, by path under a private package name (CuPy is never imported)."""
    name = "_roofline_example_kernels"
    if f"{name}.cupy_backend" in sys.modules:
        return sys.modules[f"{name}.cupy_backend"]
    spec = importlib.util.spec_from_file_location(
        name, KERNELS_DIR / "__init__.py", submodule_search_locations=[str(KERNELS_DIR)]
    )
    assert spec is not None
    assert spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.cupy_backend")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernel-cache")


def _facts(kernel: Any, cache: Path, arch: str = "sm_90") -> tuple[StaticFacts, ...]:
    found = facts_for(kernel, arch=arch, cache_dir=cache)
    assert isinstance(found, tuple), found
    return found


def _missed(op: str, bandwidth_fraction: float = 0.05, **params: Any) -> Standing:
    """A miss on an H100: the estimate's standing with a poor achieved fraction."""
    est = estimate(op, dtype="fp32", device="h100-sxm", **params)
    base = Standing.of_estimate(est)
    if est.bound == "memory":
        return dataclasses.replace(base, attained=bandwidth_fraction, bandwidth_fraction=bandwidth_fraction)
    return dataclasses.replace(base, attained=0.02, compute_fraction=0.02)


def _rules(diagnosis: Diagnosis) -> list[str]:
    return [c.rule for c in diagnosis.causes]


# --- the example project's bad variants: each diagnosis names its real flaw ----------------------


@needs_nvcc
def test_strided_saxpy_has_strided_access_and_no_128_bit_loads(cache: Path) -> None:
    (facts,) = _facts(_load_backend().saxpy_strided, cache)
    assert facts.kernel == "saxpy_strided"
    assert facts.block == 256
    assert facts.mix.global_loads > 0
    assert facts.mix.global_loads_128 == 0
    assert {a.kind for a in facts.strided} == {"load", "store"}
    assert all(a.stride is None for a in facts.strided)  # i * stride: a kernel parameter
    found = diagnose(_missed("elementwise", n=1 << 24, inputs=2, flops_per_element=2), facts)
    assert _rules(found)[:3] == ["uncoalesced_stores", "uncoalesced_loads", "no_vector_loads"]
    assert found.causes[1].line().startswith("memory-bound at 5.0% of bandwidth, and ")
    assert "no 128-bit global loads" in found.causes[2].line()


@needs_nvcc
def test_naive_layernorm_sends_intermediates_through_global_memory(cache: Path) -> None:
    facts = _facts(_load_backend().layernorm_naive, cache)
    assert [f.kernel for f in facts] == ["ln_row_mean", "ln_center", "ln_row_rstd", "ln_scale"]
    found = diagnose(_missed("layernorm", rows=8192, cols=1024), facts)
    rules = _rules(found)
    assert "unfused_kernels" in rules
    unfused = found.causes[rules.index("unfused_kernels")]
    assert "the op runs as 4 kernels (ln_row_mean, ln_center, ln_row_rstd, ln_scale)" in unfused.fact
    assert "intermediates round-trip through global memory" in unfused.fix
    # and the one-thread-per-row sums read down the rows
    strided = {f.kernel for f in facts if f.strided}
    assert strided == {"ln_row_mean", "ln_row_rstd"}


@needs_nvcc
def test_naive_gemm_has_no_data_reuse_and_no_tensor_cores(cache: Path) -> None:
    (facts,) = _facts(_load_backend().gemm_naive, cache)
    assert facts.mix.shared_loads == facts.mix.shared_stores == facts.mix.tensor_core == 0
    assert facts.strided == ()  # A is a broadcast along the warp, B coalesced: reuse is the flaw
    found = diagnose(_missed("gemm", M=4096, N=4096, K=4096), facts)
    assert _rules(found)[:2] == ["no_data_reuse", "no_tensor_cores"]
    assert "compute-bound at 2.0% of the fp32 vector peak" in found.causes[0].fact


@needs_nvcc
def test_naive_transpose_has_uncoalesced_stores_only(cache: Path) -> None:
    (facts,) = _facts(_load_backend().transpose_naive, cache)
    assert [(a.kind, a.width) for a in facts.strided] == [("store", 4)]
    found = diagnose(_missed("transpose", rows=8192, cols=1024), facts)
    assert _rules(found)[0] == "uncoalesced_stores"
    assert "uncoalesced stores" in found.causes[0].fix
    assert "uncoalesced_loads" not in _rules(found)


@needs_nvcc
@pytest.mark.parametrize(
    ("fn", "op", "params"),
    [
        ("saxpy", "elementwise", {"n": 1 << 24, "inputs": 2, "flops_per_element": 2}),
        ("transpose", "transpose", {"rows": 8192, "cols": 1024}),
        ("layernorm", "layernorm", {"rows": 8192, "cols": 1024}),
        ("bias_relu", "elementwise", {"n": 1 << 23, "inputs": 1, "flops_per_element": 2}),
    ],
)
def test_good_variants_are_not_blamed_for_flaws_they_lack(
    cache: Path, fn: str, op: str, params: dict[str, Any]
) -> None:
    facts = _facts(getattr(_load_backend(), fn), cache)
    assert all(f.strided == () for f in facts)
    rules = _rules(diagnose(_missed(op, **params), facts))
    assert not {"uncoalesced_loads", "uncoalesced_stores", "unfused_kernels"} & set(rules)


@needs_nvcc
def test_example_resources_and_occupancy(cache: Path) -> None:
    (fused,) = _facts(_load_backend().layernorm, cache)
    assert fused.static_smem == 132  # partial[32] and total: 33 floats
    assert fused.mix.warp_shuffles > 0
    assert fused.mix.barriers > 0
    assert fused.occupancy is not None
    assert fused.occupancy.block == 256
    assert fused.registers is not None
    assert 8 <= fused.registers <= 64
    (tiled,) = _facts(_load_backend().transpose, cache, arch="sm_86")
    assert tiled.static_smem == 32 * 33 * 4
    assert tiled.occupancy is not None
    assert tiled.occupancy.limiter == "warps"
    assert tiled.occupancy.blocks_per_sm == 6
    assert tiled.to_record()["occupancy"]["blocks_per_sm"] == 6


# --- facts from real nvcc output for hand-written kernels ----------------------------------------


@needs_nvcc
def test_an_accidental_double_promotion(cache: Path) -> None:
    promoted = static_facts(PROMOTED, "scale_promoted", "sm_86", 256, cache_dir=cache)  # C++ mangled
    fixed = static_facts(FIXED, "scale_fixed", "sm_86", 256, cache_dir=cache)
    assert promoted.mix.fp64_math >= 2  # the promotion, the double arithmetic, the rounding back
    assert fixed.mix.fp64_math == 0
    standing = _missed("elementwise", n=1 << 24, inputs=1, flops_per_element=2)
    found = diagnose(standing, promoted)
    assert found.causes[0].rule == "fp64_promotion"
    assert "FP64 instruction(s) in a fp32 kernel" in found.causes[0].fact
    assert "fp64_promotion" not in _rules(diagnose(standing, fixed))


@needs_nvcc
def test_register_spills_read_from_ptxas(cache: Path) -> None:
    facts = static_facts(SPILLY, "spilly", "sm_80", 256, options=("--maxrregcount=32",), cache_dir=cache)
    assert facts.registers is not None
    assert facts.registers <= 32
    assert facts.spill_stores > 0
    assert facts.spill_loads > 0
    assert diagnose(None, facts).causes[0].rule == "register_spills"


@needs_nvcc
def test_compiles_are_cached_by_source_and_architecture(tmp_path: Path) -> None:
    first = compile_source(FIXED, "sm_80", cache_dir=tmp_path)
    again = compile_source(FIXED, "sm_80", cache_dir=tmp_path)
    other = compile_source(FIXED, "sm_89", cache_dir=tmp_path)
    assert (first.cached, again.cached, other.cached) == (False, True, False)
    assert again.ptx == first.ptx
    assert ".target sm_89" in other.ptx
    assert len(list(tmp_path.iterdir())) == 2


@needs_nvcc
def test_a_raw_kernel_and_a_raw_module_duck_typed(cache: Path) -> None:
    source = _load_backend().CUDA_SOURCES["layernorm_naive"].code
    raw_kernel = SimpleNamespace(code=source, name="ln_center", options=("-std=c++14", "--fmad=false"))
    (one,) = _facts(raw_kernel, cache)
    assert one.kernel == "ln_center"
    assert one.module_kernels[0] == "ln_row_mean"
    raw_module = SimpleNamespace(code=source, options=())
    assert [f.kernel for f in _facts(raw_module, cache)] == list(one.module_kernels)


@needs_nvcc
def test_unknown_kernel_names_and_compile_errors(cache: Path) -> None:
    with pytest.raises(KernelFactsError, match=r"kernel 'scale_promote' is not defined .*did you mean"):
        static_facts(PROMOTED, "scale_promote", "sm_90", cache_dir=cache)
    with pytest.raises(CompileError, match="nvcc could not compile the kernel source"):
        compile_source("__global__ void broken( {", "sm_90", cache_dir=cache)
    found = facts_for(CudaKernel("broken", "__global__ void broken( {"), arch="sm_90", cache_dir=cache)
    assert isinstance(found, Unavailable)
    assert "could not compile" in found.reason


# --- no compiler needed -----------------------------------------------------------------------------


def test_without_nvcc_facts_are_unavailable_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler, "find_tool", lambda name: None)
    found = facts_for(CudaKernel("k", "__global__ void k() {}"), arch="sm_90")
    assert isinstance(found, Unavailable)
    assert found.reason.startswith("nvcc is not available")
    assert "\n" not in found.reason
    assert found.to_record() == {"unavailable": found.reason}
    diagnosis = diagnose(None, found)
    assert diagnosis.unavailable == found.reason
    assert diagnosis.generic


def test_what_is_not_a_cuda_kernel_gives_none() -> None:
    assert facts_for(len, arch="sm_90") is None
    assert facts_for(lambda x: x, arch="sm_90") is None
    assert facts_for([CudaKernel("k", "x"), print], arch="sm_90") is None


def test_an_unknown_architecture_is_the_callers_mistake() -> None:
    with pytest.raises(ArchError, match="unknown architecture 'sm_99'"):
        facts_for(CudaKernel("k", "x"), arch="sm_99")


TRITON_PTX = """
.version 8.4
.target sm_90a
.address_size 64
.visible .entry add_kernel(
	.param .u64 add_kernel_param_0
)
{
	ld.param.u64 	%rd1, [add_kernel_param_0];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd2, %r1, 16;
	add.s64 	%rd3, %rd1, %rd2;
	ld.global.v4.b32 	{%r2, %r3, %r4, %r5}, [%rd3];
	cvt.f64.f32 	%fd1, %f1;
	st.global.v4.b32 	[%rd3], {%r2, %r3, %r4, %r5};
	ret;
}
"""


def test_triton_kernels_are_read_without_triton() -> None:
    compiled = SimpleNamespace(
        asm={"ptx": TRITON_PTX, "cubin": b""},
        n_regs=40,
        n_spills=3,
        metadata=SimpleNamespace(
            num_warps=4, shared=16384, target=SimpleNamespace(arch=90), name="add_kernel"
        ),
    )
    facts = triton_facts(compiled)
    assert (facts.origin, facts.kernel, facts.arch) == ("triton", "add_kernel", "sm_90")
    assert (facts.registers, facts.spill_stores, facts.static_smem, facts.block) == (40, 12, 16384, 128)
    assert facts.mix.global_loads_128 == 1
    assert facts.mix.fp64_math == 1
    assert facts.occupancy is not None
    assert facts.occupancy.block == 128
    # through facts_for, the same object is recognised by its asm["ptx"]
    (same,) = _facts(compiled, Path("/nonexistent"), arch="sm_90")
    assert same.registers == 40
    # a kernel not loaded yet has no register count: said in a note
    bare = SimpleNamespace(asm={"ptx": TRITON_PTX})
    facts = triton_facts(bare)
    assert facts.arch == "sm_90a"
    assert facts.notes == ("registers unknown: the Triton kernel is not loaded yet",)


def test_resource_usage_lines_per_kernel() -> None:
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_86'
ptxas info    : Function properties for a
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 49152 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_86'
ptxas info    : Function properties for b
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 360 bytes cmem[0]
"""
    usage = resource_usage(log)
    a, b = usage["a"], usage["b"]
    assert (a.registers, a.spill_stores, a.spill_loads, a.stack_frame, a.static_smem, a.barriers) == (
        255, 8, 4, 16, 49152, 1,
    )  # fmt: skip
    assert (b.registers, b.static_smem, b.spill_stores) == (12, 0, 0)


def test_sources_from_files(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text(PROMOTED + FIXED)
    assert load_source(str(cu)) == PROMOTED + FIXED
    with pytest.raises(KernelFactsError, match=r"no such file: '.*missing.cu'"):
        load_source(str(tmp_path / "missing.cu"))
    source = load_source(f"{KERNELS_DIR / 'cuda_src.py'}:TRANSPOSE_NAIVE_SRC")
    assert "out[(long long)c * rows + r]" in source
    assert "gemm_naive" in load_source(f"{KERNELS_DIR / 'cuda_src.py'}:CUDA_SOURCES.gemm_naive")
    with pytest.raises(KernelFactsError, match=r"has no 'TRANSPOSE_NAIVE' \(did you mean"):
        load_source(f"{KERNELS_DIR / 'cuda_src.py'}:TRANSPOSE_NAIVE")


NAMESPACED = r"""
namespace ns {
template <typename T> __global__ void scale(T* x) { x[threadIdx.x] *= T(2); }
template __global__ void scale<float>(float*);
__global__ void shift(float* x) { x[threadIdx.x] += 1.0f; }
}
"""


@needs_nvcc
def test_kernels_are_found_in_the_compiled_ptx(cache: Path) -> None:
    """The compiler's .entry list, not a look at the text: comments, macros and overloads are its."""
    with pytest.raises(
        KernelFactsError, match=r"--kernel is required: k\.cu defines scale_promoted, scale_fixed$"
    ):
        static_facts(PROMOTED + FIXED, None, "sm_90", cache_dir=cache, where="k.cu")
    assert static_facts(PROMOTED + FIXED, "scale_fixed", "sm_90", cache_dir=cache).kernel == "scale_fixed"
    assert static_facts(FIXED, None, "sm_90", cache_dir=cache).kernel == "scale_fixed"
    with pytest.raises(KernelFactsError, match=r"^the source defines no kernel \(no __global__ function\)$"):
        static_facts("__device__ float twice(float x) { return 2 * x; }", None, "sm_90", cache_dir=cache)


@needs_nvcc
@pytest.mark.parametrize("demangler", [True, False])
def test_kernels_in_namespaces_and_templates(
    cache: Path, monkeypatch: pytest.MonkeyPatch, demangler: bool
) -> None:
    """By their identifier, their qualified name, or (with a demangler) their signature."""
    if not demangler:
        real = compiler.find_tool
        monkeypatch.setattr(compiler, "find_tool", lambda n: None if n.endswith("++filt") else real(n))
    for name in ("scale", "ns::scale", "shift", "ns::shift"):
        facts = static_facts(NAMESPACED, name, "sm_90", cache_dir=cache)
        assert facts.kernel == "ns::" + name.removeprefix("ns::")
        assert facts.mix.global_stores == 1
    if demangler:
        assert static_facts(NAMESPACED, "ns::scale<float>(float*)", "sm_90", cache_dir=cache).kernel == (
            "ns::scale"
        )
    with pytest.raises(
        KernelFactsError, match=r"kernel 'scal' is not defined in the source \(did you mean 'ns::scale'\?\)"
    ):
        static_facts(NAMESPACED, "scal", "sm_90", cache_dir=cache)
    both = NAMESPACED + "namespace other { __global__ void shift(float* x) { x[0] = 0.0f; } }\n"
    with pytest.raises(KernelFactsError, match=r"kernel 'shift' is ambiguous in the source: '.*'; name one"):
        static_facts(both, "shift", "sm_90", cache_dir=cache)
    assert static_facts(both, "other::shift", "sm_90", cache_dir=cache).kernel == "other::shift"
    plain = NAMESPACED + "__global__ void shift(float* x) { x[0] = 0.0f; }\n"
    assert static_facts(plain, "shift", "sm_90", cache_dir=cache).kernel == "shift"


@needs_nvcc
def test_a_launch_that_cannot_run_is_refused_not_diagnosed(cache: Path) -> None:
    bounded = FIXED.replace("void scale_fixed(", "void __launch_bounds__(64) scale_fixed(")
    assert static_facts(bounded, "scale_fixed", "sm_90", 64, cache_dir=cache).occupancy is not None
    with pytest.raises(KernelFactsError, match=r"^block=128 cannot run scale_fixed: its __launch_bounds__"):
        static_facts(bounded, "scale_fixed", "sm_90", 128, cache_dir=cache)
    with pytest.raises(KernelFactsError, match=r"^dynamic_smem must be a byte count \(0 or more\); got -1$"):
        static_facts(FIXED, "scale_fixed", "sm_90", dynamic_smem=-1, cache_dir=cache)
    with pytest.raises(KernelFactsError, match=r"^dynamic_smem=102401 bytes cannot run scale_fixed on sm_86"):
        static_facts(FIXED, "scale_fixed", "sm_86", dynamic_smem=100 * 1024 + 1, cache_dir=cache)
    # in a test's diagnosis, the launch's fault says why there are no facts
    found = facts_for(CudaKernel("scale_fixed", bounded, block=128), arch="sm_90", cache_dir=cache)
    assert isinstance(found, Unavailable)
    assert found.reason.startswith("block=128 cannot run scale_fixed")


# what CUDA 13's cu++filt printed on the GPU machine (benchmarks/gpu_runs/2026-11-26-h200/run4):
# EDG's form, a space before '*' and a function template's parameters left as T1, T2
CU_FILT_LINES = {
    "_Z5scalePfi": "scale(float *, int)",
    "_ZN2ns5scaleIfEEvPT_": "ns::scale<float>(T1 *)",
    "_ZN2ns4pairIiLi4EEEvPT_PKS1_": "ns::pair<int, (int)4>(T1 *, const T1 *)",
}


def fake_tool(tmp_path: Path, name: str, lines: dict[str, str]) -> str:
    """An executable ``name`` that prints, for each symbol argument, its line in ``lines``."""
    script = tmp_path / name
    table = repr(lines)
    script.write_text(
        f"#!{sys.executable}\nimport sys\nlines = {table}\nfor s in sys.argv[1:]: print(lines[s])\n"
    )
    script.chmod(0o755)
    return str(script)


def test_cu_filt_s_edg_form_is_read_as_binutils_writes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cu_filt = fake_tool(tmp_path, "cu++filt", CU_FILT_LINES)
    monkeypatch.setattr(compiler, "find_tool", lambda name: cu_filt if name == "cu++filt" else None)

    assert compiler.demangle(list(CU_FILT_LINES)) == {
        "_Z5scalePfi": "scale(float*, int)",
        "_ZN2ns5scaleIfEEvPT_": "ns::scale<float>(float*)",
        "_ZN2ns4pairIiLi4EEEvPT_PKS1_": "ns::pair<int, (int)4>(int*, const int*)",
    }


def test_binutils_c_filt_is_preferred_where_both_are_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "cuda").mkdir()
    cu_filt = fake_tool(tmp_path / "cuda", "cu++filt", CU_FILT_LINES)
    c_filt = fake_tool(tmp_path, "c++filt", {"_Z5scalePfi": "scale(float const*, int)"})
    monkeypatch.setattr(compiler, "find_tool", {"cu++filt": cu_filt, "c++filt": c_filt}.get)

    assert compiler.demangle(["_Z5scalePfi"]) == {"_Z5scalePfi": "scale(float const*, int)"}


@pytest.mark.parametrize(
    ("line", "source"),
    [
        ("scale(float *, int)", "scale(float*, int)"),
        ("void ns::scale<float>(float*)", "void ns::scale<float>(float*)"),  # binutils' form unchanged
        ("(anonymous namespace)::k<int, 4>(T1 *, T1 &)", "(anonymous namespace)::k<int, 4>(int*, int&)"),
        ("f<std::pair<int, float>>(T1 *)", "f<std::pair<int, float>>(std::pair<int, float>*)"),
        ("k<float>(T2 *)", "k<float>(T2*)"),  # no second argument: left as it is
        ("T1(T1 *)", "T1(T1*)"),  # not a template: a type named T1 stays
    ],
)
def test_source_form(line: str, source: str) -> None:
    assert compiler.source_form(line) == source


def test_binutils_lines_are_kept_as_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A user's type named T1 in binutils' line is that type, not an EDG template parameter."""
    c_filt = fake_tool(tmp_path, "c++filt", {"_Z1fIiEvP2T1": "void f<int>(T1*)"})
    monkeypatch.setattr(compiler, "find_tool", {"c++filt": c_filt}.get)

    assert compiler.demangle(["_Z1fIiEvP2T1"]) == {"_Z1fIiEvP2T1": "void f<int>(T1*)"}
