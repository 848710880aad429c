"""Budgets without an op on a suite we did not write: do the inferred floors match the explicit ones?

Writes a test file of kernels from NumPy, SciPy and PyTorch on the CPU (and, with ``--gpu`` where a
CUDA device and the library are there, CuPy and Triton), each measured twice in one pytest run:
once with the explicit marker a user would write (``op="gemm", M=..., dtype="fp32"``), once with
no op at all. Report mode, so nothing fails; the JSON gives each record's floor at the calibrated
ceilings (``calibrated_floor_s``: deterministic, unlike the floor judged against the probe beside
the kernel) and, for the inferred one, the tier that answered.

Printed per kernel: the explicit op and its floor, the tier that answered and its floor, their
ratio, and both attained fractions (timings: evidence only from a quiet machine). A row the
catalogue answered (tier ``catalogue``) must agree with its explicit floor to 1%; the script exits
1 if one does not. Every other row says which tier answered and why its floor differs (FLOPs
unknown: the memory floor alone; bytes counted from the arrays the kernel holds).

    python benchmarks/auto_suite.py                  # sizes of a few MB to tens of MB
    python benchmarks/auto_suite.py --small          # a quick check that it works
    python benchmarks/auto_suite.py --gpu            # adds CuPy and Triton rows on a CUDA device
    python benchmarks/auto_suite.py -- -x            # arguments after -- go to pytest
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, not installed

from pytest_roofline.model.units import seconds  # noqa: E402

#: a tier-1 floor must match the explicit marker's this closely
AGREEMENT = 0.01


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel: the code that makes its arrays, the call (after ``roofline(``) and the explicit
    marker's keywords."""

    name: str
    setup: str
    call: str
    explicit: str
    device: str = "cpu"


NUMPY = [
    Kernel("np.add out=", "x, y, z = vec(), vec(), vec()", "np.add, x, y, kwargs={'out': z}",
           "op='elementwise', n=N, inputs=2, dtype='fp32'"),
    Kernel("np.multiply by a scalar", "x = vec()", "np.multiply, x, 2.5",
           "op='elementwise', n=N, dtype='fp32'"),
    Kernel("np.exp", "x = vec()", "np.exp, x", "op='elementwise', n=N, dtype='fp32'"),
    Kernel("np.sqrt out=", "x, z = vec(), vec()", "np.sqrt, x, z", "op='elementwise', n=N, dtype='fp32'"),
    Kernel("np.matmul", "a, b = mat(M, M), mat(M, M)", "np.matmul, a, b",
           "op='gemm', M=M, N=M, K=M, dtype='fp32'"),
    Kernel("@ (operator.matmul)", "import operator\n    a, b = mat(M, M), mat(M, M)", "operator.matmul, a, b",
           "op='gemm', M=M, N=M, K=M, dtype='fp32'"),
    Kernel("np.dot of vectors", "x, y = vec(), vec()", "np.dot, x, y", "op='dot', n=N, dtype='fp32'"),
    Kernel("np.matmul matrix-vector", "a, v = mat(M, M), vec(M)", "np.matmul, a, v",
           "op='gemv', M=M, K=M, dtype='fp32'"),
    Kernel("np.copyto", "x, z = vec(), vec()", "np.copyto, z, x", "op='copy', n=N, dtype='fp32'"),
    Kernel("np.sum axis=1", "a = mat(M, N // M)", "np.sum, a, kwargs={'axis': 1}",
           "op='reduction', n=N, outputs=M, dtype='fp32'"),
    Kernel("np.max", "x = vec()", "np.max, x", "op='reduction', n=N, dtype='fp32'"),
    Kernel("np.mean axis=0", "a = mat(M, N // M)", "np.mean, a, kwargs={'axis': 0}",
           "op='reduction', n=N, outputs=N // M, dtype='fp32'"),
]  # fmt: skip

SCIPY = [
    Kernel("scipy.special.expit", "special = pytest.importorskip('scipy.special')\n    x = vec()",
           "special.expit, x", "op='elementwise', n=N, dtype='fp32'"),
    Kernel("scipy.special.erf out=",
           "special = pytest.importorskip('scipy.special')\n    x, z = vec(), vec()",
           "special.erf, x, kwargs={'out': z}", "op='elementwise', n=N, dtype='fp32'"),
    Kernel("scipy.linalg.blas.sgemm",
           "blas = pytest.importorskip('scipy.linalg.blas')\n    a, b = mat(M, M), mat(M, M)",
           "blas.sgemm, 1.0, a, b", "op='gemm', M=M, N=M, K=M, dtype='fp32'"),
    Kernel("scipy.fft.fft", "fft = pytest.importorskip('scipy.fft')\n    x = vec().astype(np.complex64)",
           "fft.fft, x", "op='fft', n=N, dtype='complex64'"),
    Kernel("scipy.ndimage.uniform_filter",
           "ndimage = pytest.importorskip('scipy.ndimage')\n    img, out = mat(M, N // M), mat(M, N // M)",
           "ndimage.uniform_filter, img, kwargs={'size': 3, 'output': out}",
           "op='elementwise', n=N, flops_per_element=9, dtype='fp32'"),
    Kernel("scipy.sparse CSR @ vector",
           "sparse = pytest.importorskip('scipy.sparse')\n"
           # 16 nonzeros a row, built directly: sparse.random draws from all rows x cols index pairs,
           # 512 GiB of them at the full size
           "    rows = N // 16\n"
           "    cols = np.random.default_rng(0).integers(0, rows, size=N, dtype=np.int32)\n"
           "    starts = np.arange(0, N + 1, 16, dtype=np.int32)\n"
           "    A = sparse.csr_matrix((np.ones(N, np.float32), cols, starts), shape=(rows, rows))\n"
           "    v = vec(N // 16)",
           "A.dot, v",
           "op='custom', flops=2 * A.nnz, dtype='fp32',"
           " bytes=A.data.nbytes + A.indices.nbytes + A.indptr.nbytes + 2 * v.nbytes"),
]  # fmt: skip

_TORCH = "torch = pytest.importorskip('torch')\n    F = torch.nn.functional\n    "
TORCH = [
    Kernel("torch.mm", _TORCH + "a, b = tmat(M, M), tmat(M, M)", "torch.mm, a, b",
           "op='gemm', M=M, N=M, K=M, dtype='fp32'"),
    Kernel("torch.bmm", _TORCH + "a, b = tmat(8, M // 4, M), tmat(8, M, M // 4)", "torch.bmm, a, b",
           "op='gemm', batch=8, M=M // 4, N=M // 4, K=M, dtype='fp32'"),
    Kernel("F.linear", _TORCH + "x, w, bias = tmat(4 * M, M), tmat(M, M), tmat(M)", "F.linear, x, w, bias",
           "op='gemm', M=4 * M, N=M, K=M, dtype='fp32'"),
    Kernel("F.layer_norm", _TORCH + "x, w, b = tmat(N // M, M), tmat(M), tmat(M)",
           "F.layer_norm, x, (M,), w, b", "op='layernorm', rows=N // M, cols=M, dtype='fp32'"),
    Kernel("F.rms_norm", _TORCH + "x, w = tmat(N // M, M), tmat(M)", "F.rms_norm, x, (M,), w",
           "op='rmsnorm', rows=N // M, cols=M, dtype='fp32'"),
    Kernel("F.softmax", _TORCH + "x = tmat(N // M, M)", "F.softmax, x, kwargs={'dim': -1}",
           "op='softmax', rows=N // M, cols=M, dtype='fp32'"),
    Kernel("F.silu", _TORCH + "x = tmat(N)", "F.silu, x",
           "op='elementwise', n=N, flops_per_element=4, dtype='fp32'"),
    Kernel("F.gelu", _TORCH + "x = tmat(N)", "F.gelu, x",
           "op='elementwise', n=N, flops_per_element=5, dtype='fp32'"),
    Kernel("torch.add", _TORCH + "x, y = tmat(N), tmat(N)", "torch.add, x, y",
           "op='elementwise', n=N, inputs=2, dtype='fp32'"),
    Kernel("F.scaled_dot_product_attention", _TORCH + "q, k, v = (tmat(2, 8, M // 2, 64) for _ in range(3))",
           "F.scaled_dot_product_attention, q, k, v",
           "op='attention', batch=2, heads=8, seq_q=M // 2, seq_k=M // 2, head_dim=64, dtype='fp32'"),
    Kernel("an nn.Sequential MLP",
           _TORCH + "nn = torch.nn\n"
           "    mlp = nn.Sequential(nn.Linear(M, 4 * M), nn.GELU(), nn.Linear(4 * M, M))\n"
           "    x = tmat(64, M)",
           "mlp, x",
           "op='custom', flops=2 * 64 * 8 * M * M, bytes=4 * (2 * 64 * M + 8 * M * M + 5 * M), unit='tensor',"
           " dtype='fp32'"),
    Kernel("F.conv2d", _TORCH + "x, w = tmat(8, 32, 64, 64), tmat(64, 32, 3, 3)", "F.conv2d, x, w",
           "op='conv2d', N=8, C=32, H=64, W=64, K=64, R=3, S=3, dtype='fp32'"),
    Kernel("a lambda: gelu(x @ w)", _TORCH + "x, w = tmat(4 * M, M), tmat(M, M)",
           "lambda: F.gelu(x @ w)", "op='gemm', M=4 * M, N=M, K=M, dtype='fp32'"),
]  # fmt: skip

_CUPY = "cupy = pytest.importorskip('cupy')\n    "
GPU = [
    Kernel("cupy.add out=", _CUPY + "x, y, z = (cupy.ones(N, cupy.float32) for _ in range(3))",
           "cupy.add, x, y, kwargs={'out': z}", "op='elementwise', n=N, inputs=2, dtype='fp32'", "cuda"),
    Kernel("cupy.matmul", _CUPY + "a, b = (cupy.ones((M, M), cupy.float32) for _ in range(2))",
           "cupy.matmul, a, b", "op='gemm', M=M, N=M, K=M, dtype='fp32'", "cuda"),
    Kernel("a CuPy RawKernel (saxpy)",
           _CUPY + "x, y = (cupy.ones(N, cupy.float32) for _ in range(2))\n"
           "    saxpy = cupy.RawKernel(SAXPY, 'saxpy')\n"
           "    launch = lambda: saxpy(((N + 255) // 256,), (256,), (cupy.float32(2.0), x, y, np.int32(N)))",
           "launch", "op='elementwise', n=N, inputs=2, flops_per_element=2, dtype='fp32'", "cuda"),
    Kernel("a Triton kernel (add)",
           "torch = pytest.importorskip('torch')\n    add = triton_add()\n"
           "    x, y, z = (torch.ones(N, device='cuda') for _ in range(3))",
           "add, x, y, z", "op='elementwise', n=N, inputs=2, dtype='fp32'", "cuda"),
]  # fmt: skip

HEADER = """
import numpy as np
import pytest

N, M = {n}, {m}
SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}}
'''


def vec(n=N):
    return np.random.default_rng(0).random(n, dtype=np.float32)


def mat(*shape):
    return np.random.default_rng(0).random(shape, dtype=np.float32)


def tmat(*shape):
    import torch

    return torch.rand(*shape)


def triton_add():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)

    return lambda x, y, z: add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, z, x.numel(), BLOCK=1024)
"""

TEST = """

@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_{index:02d}(roofline, mode):
    {setup}
    explicit = dict({explicit}) if mode == "explicit" else {{}}
    roofline({call}, name=mode, device={device!r}, **explicit)
"""


def suite(kernels: list[Kernel], *, n: int, m: int) -> str:
    tests = (TEST.format(index=i, setup=k.setup, call=k.call, explicit=k.explicit, device=k.device)
             for i, k in enumerate(kernels))  # fmt: skip
    return textwrap.dedent(HEADER).format(n=n, m=m) + "".join(tests)


def run(kernels: list[Kernel], *, n: int, m: int, pytest_args: list[str]) -> dict[tuple[int, str], dict]:
    """Run the suite in a pytest process of its own; its records by (kernel index, mode)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_auto_suite.py"
        path.write_text(suite(kernels, n=n, m=m))
        out = Path(tmp) / "out.json"
        command = [
            sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider", "--rootdir", tmp,
            "--roofline-mode=report", f"--roofline-json={out}", *pytest_args,
        ]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        if not out.exists():
            sys.exit(f"the suite did not run:\n{done.stdout}\n{done.stderr}")
        skipped = [line for line in done.stdout.splitlines() if "SKIPPED" in line or "FAILED" in line]
        print("\n".join(skipped))
        records = json.loads(out.read_text())["measurements"]
    found = {}
    for record in records:
        index = int(record["nodeid"].split("::test_")[1].split("[")[0])
        found[index, record["name"]] = record
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="small sizes: a check that it works")
    parser.add_argument("--gpu", action="store_true", help="add the CuPy and Triton rows (a CUDA device)")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    args = parser.parse_args()
    n, m = (1 << 16, 128) if args.small else (1 << 22, 1024)
    kernels = NUMPY + SCIPY + TORCH + (GPU if args.gpu else [])
    records = run(kernels, n=n, m=m, pytest_args=["--roofline-max-time=0.3", *args.pytest_args])
    header = ("kernel", "explicit op", "floor", "inferred (tier)", "floor", "ratio", "attained", "")
    rows, disagree = [], 0
    for i, kernel in enumerate(kernels):
        explicit, auto = records.get((i, "explicit")), records.get((i, "auto"))
        if explicit is None or auto is None:
            rows.append((kernel.name, "(not measured: see above)", "", "", "", "", "", ""))
            continue
        tier = (auto.get("inferred") or {}).get("tier", "?")
        ratio = auto["calibrated_floor_s"] / explicit["calibrated_floor_s"]
        verdict = ""
        if tier == "catalogue":
            ok = abs(ratio - 1) <= AGREEMENT
            disagree += not ok
            verdict = "agrees" if ok else "DISAGREES"
        attained = f"{explicit['attained']:.0%} / {auto['attained']:.0%}"
        given, found = seconds(explicit["calibrated_floor_s"]), seconds(auto["calibrated_floor_s"])
        inferred, share = f"{auto['label']} ({tier})", f"{ratio:.4f}"
        rows.append((kernel.name, explicit["label"], given, inferred, found, share, attained, verdict))
    widths = [max(len(str(r[c])) for r in (header, *rows)) for c in range(len(header))]
    for row in (header, *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    catalogue = sum(1 for row in rows if row[-1])
    print(
        f"\n{len(rows)} kernels; {catalogue} answered by the catalogue, {disagree} of them off by more than"
        f" {AGREEMENT:.0%}; attained: explicit / inferred, timings on this machine (evidence only when quiet)"
    )
    sys.exit(1 if disagree else 0)


if __name__ == "__main__":
    main()
