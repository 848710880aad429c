"""The A/B gate on the GPU (issue 39, item 7): two torch kernels, a copy (memory-bound) and a bf16
GEMM (compute-bound), whose work ``WORK`` scales. ``gpu_run.sh``'s ``ab`` step copies this folder
twice, sets ``WORK = 1.1`` in one copy (the pull request: 1.1x the work at the same marker, so
1.1x slower) and runs it with ``--roofline-against`` the other (the base); then an A/A run, the
base against an identical copy, where nothing may read ``slower``.
"""

from __future__ import annotations

import pytest

from pytest_roofline import Roofline

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no GPU: torch.cuda.is_available() is False", allow_module_level=True)

#: the share of the marked work each kernel does; the head's copy sets 1.1
WORK = 1.0
COPY_N = 2**26  # fp32: 256 MiB each way
MM = 4096


@pytest.mark.speed_of_light("copy", n=COPY_N, dtype="fp32")
def test_copy(roofline: Roofline) -> None:
    n = int(COPY_N * WORK)
    src = torch.rand(int(COPY_N * 1.25), device="cuda")
    dst = torch.empty_like(src)
    roofline(dst[:n].copy_, src[:n])


@pytest.mark.speed_of_light("gemm", M=MM, N=MM, K=MM, dtype="bf16")
def test_gemm(roofline: Roofline) -> None:
    k = int(MM * WORK) // 64 * 64
    a = torch.randn(MM, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, MM, device="cuda", dtype=torch.bfloat16)
    roofline(torch.mm, a, b, kwargs={"out": torch.empty(MM, MM, device="cuda", dtype=torch.bfloat16)})
