"""``roofline analyze``: the report on a real compile, its JSON, and its errors (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from pytest_roofline import cli
from pytest_roofline.analysis import compiler
from pytest_roofline.analysis.compiler import find_tool

ROOT = REPO_ROOT
CUDA_SRC = ROOT / "example_project" / "kernels" / "cuda_src.py"
TRANSPOSE = f"{CUDA_SRC}:TRANSPOSE_NAIVE_SRC"
needs_nvcc = pytest.mark.skipif(
    find_tool("nvcc") is None, reason="nvcc is not available: analyze compiles the kernel"
)
KERNEL = r"""
extern "C" __global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg")


@pytest.fixture(autouse=True)
def _cache(shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One private cache for the module: each source compiles once, and ~/.cache is left alone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared_cache))


@pytest.fixture
def scale_cu(tmp_path: Path) -> Path:
    path = tmp_path / "scale.cu"
    path.write_text(KERNEL)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["analyze", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@needs_nvcc
def test_the_report_of_the_naive_transpose(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, TRANSPOSE, "--arch", "sm_86", "--block", "256",
        "--op", "transpose", "rows=8192", "cols=8192", "--dtype", "fp32", "--device", "a10",
    )  # fmt: skip
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"transpose_naive ({TRANSPOSE}) for sm_86, 256 threads/block"
    assert (
        "  smem cliff     49 KiB per block on sm_86 (two blocks/SM up to it, one beyond); "
        "this kernel is under it" in lines
    )
    assert "  resident       6 blocks x 8 warps = 48 of 48 warps (100.0%), limited by warps" in lines
    assert any(line.startswith("  global loads 1 (128-bit 0), global stores 1 (128-bit 0)") for line in lines)
    assert any(line.startswith("  strided: 1 x store of 4 B moving a run-time stride") for line in lines)
    assert "roofline floor" in lines
    assert any(line.strip().startswith("floor") and "memory-bound" in line for line in lines)
    causes = lines[lines.index("likely causes:") + 1 :]
    assert causes[0].startswith(
        "  1. transpose is memory-bound (0 FLOP/B against a ridge of 52.0), and 1 global store(s)"
    )
    assert "uncoalesced stores" in causes[0]


@needs_nvcc
def test_a_cu_file_with_one_kernel_needs_no_kernel_name(
    capsys: pytest.CaptureFixture[str], scale_cu: Path
) -> None:
    code, out, _ = run(capsys, str(scale_cu), "--device", "h100-sxm")  # the arch from the device
    assert code == 0
    assert out.splitlines()[0] == f"scale ({scale_cu}) for sm_90"
    assert "  (give --block for the launch's threads per block)" in out.splitlines()


@needs_nvcc
def test_json(capsys: pytest.CaptureFixture[str], scale_cu: Path) -> None:
    code, out, _ = run(
        capsys, str(scale_cu), "--kernel", "scale", "--arch", "sm_80", "--block", "128", "--json",
        "--op", "elementwise", "n=1048576", "inputs=1", "flops_per_element=1", "dtype=fp32",
        "--device", "a100-sxm-80gb",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    (facts,) = data["facts"]
    assert (facts["kernel"], facts["arch"], facts["block"]) == ("scale", "sm_80", 128)
    assert facts["occupancy"]["blocks_per_sm"] == 16  # 4-warp blocks: 16 fill sm_80's 64 warps
    assert data["estimate"]["bound"] == "memory"
    assert data["causes"][0]["rule"] == "no_vector_loads"


OVERLOADED = r"""
__global__ void scale(float* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0f; }
__global__ void scale(double* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= 2.0; }
"""
FLOAT, DOUBLE = "scale(float*, int)", "scale(double*, int)"


@needs_nvcc
def test_an_overloaded_kernel_is_named_by_its_signature(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cu = tmp_path / "overloaded.cu"
    cu.write_text(OVERLOADED)
    code, out, err = run(capsys, str(cu), "--arch", "sm_90")
    assert (code, out) == (2, "")
    assert err == f"roofline: error: --kernel is required: {cu} defines {FLOAT!r}, {DOUBLE!r}\n"
    code, out, err = run(capsys, str(cu), "--arch", "sm_90", "--kernel", "scale")
    assert (code, out) == (2, "")
    assert err == (
        f"roofline: error: kernel 'scale' is overloaded in {cu}: {FLOAT!r}, {DOUBLE!r}; name one of them\n"
    )
    code, out, err = run(capsys, str(cu), "--arch", "sm_90", "--kernel", "scale(double *,int)", "--json")
    assert (code, err) == (0, "")
    (facts,) = json.loads(out)["facts"]
    assert facts["kernel"] == DOUBLE
    assert facts["mix"]["fp64_math"] > 0  # the double overload's PTX, not the float one's


@needs_nvcc
def test_without_a_demangler_overloads_are_named_by_their_ptx_names(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = compiler.find_tool
    monkeypatch.setattr(compiler, "find_tool", lambda name: None if name.endswith("++filt") else real(name))
    cu = tmp_path / "overloaded.cu"
    cu.write_text(OVERLOADED)
    code, _, err = run(capsys, str(cu), "--arch", "sm_90", "--kernel", "scale")
    assert code == 2
    assert err.endswith(f"is overloaded in {cu}: '_Z5scalePfi', '_Z5scalePdi'; name one of them\n")
    code, out, err = run(capsys, str(cu), "--arch", "sm_90", "--kernel", "_Z5scalePdi")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"_Z5scalePdi ({cu}) for sm_90"


@needs_nvcc
def test_a_kernel_defined_by_a_macro_is_found(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cu = tmp_path / "macro.cu"
    cu.write_text(
        "#define KERNEL(name, factor) \\\n"
        '    extern "C" __global__ void name(float* x) { x[threadIdx.x] *= factor; }\n'
        "KERNEL(scale, 2.0f)\n"
    )
    code, out, err = run(capsys, str(cu), "--arch", "sm_90")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"scale ({cu}) for sm_90"
    code, out, err = run(capsys, str(cu), "--arch", "sm_90", "--kernel", "scale")
    assert (code, err) == (0, "")


@needs_nvcc
def test_commented_out_kernels_do_not_exist(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cu = tmp_path / "commented.cu"
    cu.write_text(
        "// __global__ void old(float* x) { x[0] = 1.0f; }\n"
        "/* __global__ void older(float* x) {\n    x[0] = 1.0f;\n} */\n" + KERNEL
    )
    code, out, err = run(capsys, str(cu), "--arch", "sm_90")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == f"scale ({cu}) for sm_90"
    code, out, err = run(capsys, str(cu), "--arch", "sm_90", "--kernel", "old")
    assert (code, out) == (2, "")
    assert err == f"roofline: error: kernel 'old' is not defined in {cu}; it defines: scale\n"


BOUNDED = KERNEL.replace("void scale(", "void __launch_bounds__(128) scale(")
#: 96 live accumulators: far over the 64 registers per thread a 1024-thread block can have
HEAVY = r"""
extern "C" __global__ void heavy(const float* x, float* y, int n)
{
    float acc[96];
    #pragma unroll
    for (int j = 0; j < 96; ++j) acc[j] = x[threadIdx.x + j * n];
    for (int k = 0; k < n; ++k) {
        #pragma unroll
        for (int j = 0; j < 96; ++j) acc[j] = acc[j] * acc[(j + 7) % 96] + x[k];
    }
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < 96; ++j) s += acc[j];
    y[threadIdx.x] = s;
}
"""


@needs_nvcc
@pytest.mark.parametrize(
    ("source", "argv", "message"),
    [
        (BOUNDED, ["--block", "256"],
         "block=256 cannot run scale: its __launch_bounds__ allow 128 threads per block"),
        (HEAVY, ["--block", "1024"], "block=1024 cannot run on sm_90 with registers="),
        (KERNEL, ["--block", "128", "--dynamic-smem", "232449"],
         "dynamic_smem=232449 bytes cannot run scale on sm_90: with its 0 B of static shared memory, "
         "over the 232448 bytes a block may have"),
        (KERNEL, ["--dynamic-smem", "300000"], "dynamic_smem=300000 bytes cannot run scale on sm_90"),
        (KERNEL, ["--block", "1025"], "--block 1025 is over sm_90's 1024 threads per block"),
        (KERNEL, ["--dynamic-smem", "-1"], "--dynamic-smem must be a byte count (0 or more); got -1"),
    ],
    ids=["launch-bounds", "registers", "smem", "smem-without-block", "block", "negative-smem"],
)  # fmt: skip
def test_a_launch_that_cannot_run_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, source: str, argv: list[str], message: str
) -> None:
    """Not a latency-bound verdict on 0 resident warps: the launch would fail."""
    cu = tmp_path / "launch.cu"
    cu.write_text(source)
    code, out, err = run(capsys, str(cu), "--arch", "sm_90", *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"roofline: error: {message}")
    assert err.count("\n") == 1


@needs_nvcc
def test_dynamic_shared_memory_counts_in_occupancy(
    capsys: pytest.CaptureFixture[str], scale_cu: Path
) -> None:
    code, out, err = run(
        capsys, str(scale_cu), "--arch", "sm_86", "--block", "128", "--dynamic-smem", "57344"
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "  shared memory  0 B static + 56 KiB dynamic per block" in lines
    assert any(line.startswith("  resident       1 blocks x 4 warps") for line in lines)
    assert "over it: 1 block/SM at most" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.cu", "--arch", "sm_90"], "no such file: 'missing.cu'"),
        pytest.param(["{cu}", "--kernel", "scal", "--arch", "sm_90"],
                     "kernel 'scal' is not defined in {cu} (did you mean 'scale'?)", marks=needs_nvcc),
        (["{cu}", "--arch", "sm_91"], "unknown architecture 'sm_91'"),
        (["{cu}"], "--arch is required (for example --arch sm_90), or --device with a table GPU"),
        (["{cu}", "--device", "mi300x"],
         "or --device with a table GPU (mi300x is not a table GPU)"),
        (["{cu}", "--arch", "sm_90", "--op", "gemm", "M=1", "N=1", "K=1"], "--op gemm needs --dtype"),
        (["{cu}", "--arch", "sm_90", "--op", "gemm", "M=1", "N=1", "K=1", "--dtype", "fp32"],
         "--op needs --device"),
        (["{cu}", "--arch", "sm_90", "--op", "gemn", "--device", "h100-sxm"], "unknown op 'gemn'"),
        (["{cu}", "--arch", "sm_90", "--block", "0"], "--block must be a positive thread count; got 0"),
        ([f"{CUDA_SRC}:NOPE", "--arch", "sm_90"], "has no 'NOPE'"),
    ],
)  # fmt: skip
def test_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], scale_cu: Path, argv: list[str], message: str
) -> None:
    argv = [a.replace("{cu}", str(scale_cu)) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("roofline: error: ")
    assert message.replace("{cu}", str(scale_cu)) in err


@pytest.mark.parametrize(
    ("body", "raised"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit(3)"),
        ("raise ValueError('no\\nsource')\n", "ValueError('no\\nsource')"),
        ("raise KeyError('SRC')\n", "KeyError('SRC')"),
    ],
)
def test_a_module_that_fails_at_import_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str, raised: str
) -> None:
    """Its SystemExit would have ended the command with the module's own status."""
    module = tmp_path / "kernels.py"
    module.write_text(f"SRC = 'extern \"C\" __global__ void k() {{}}'\n{body}")
    code, out, err = run(capsys, f"{module}:SRC", "--arch", "sm_90")
    assert (code, out) == (2, "")
    assert err == f"roofline: error: {module}: importing it raised {raised}\n"


def test_no_nvcc_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], scale_cu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compiler, "find_tool", lambda name: None)
    code, out, err = run(capsys, str(scale_cu), "--arch", "sm_90")
    assert (code, out) == (2, "")
    assert err == (
        "roofline: error: nvcc is not available (not on PATH, nor in $CUDA_HOME/bin): static kernel "
        "facts need the CUDA toolkit (not a GPU)\n"
    )


def test_help_names_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["analyze", "--help"])
    out = capsys.readouterr().out
    assert "--kernel" in out
    assert "--block" in out
    assert "FILE.py:NAME" in out
