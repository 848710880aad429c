"""The CUDA audit's questions, answered on a GPU (issue 27): each test prints what it saw (``-s``).

- What does ``Graph.debug_dot_str()`` print for a one-kernel capture, at CuPy's default flags and
  verbose, and how many kernels does graph mode count in it?
- Is an ``nn.Parameter`` (a CUDA tensor that requires grad) measured: ``roofline(F.linear, x, W)``?
- Does a kernel that synchronizes, held with ``block="on"``, fail within 2 s (not stall)?
- Is a NumPy kernel in a run whose device is the GPU timed on the host?
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from pytest_roofline import Roofline

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.nn.functional")
cupy = pytest.importorskip("cupy")

#: the most a held kernel that synchronizes may take to fail
HOLD_FAILS_WITHIN_S = 2.0
#: the child measuring it is stopped after this: a stall, not a failure
STALL_S = 20.0


def test_debug_dot_str_of_a_one_kernel_capture_at_default_and_verbose_flags() -> None:
    from pytest_roofline.timing.cuda.graphs import graph_nodes

    x = cupy.ones(1 << 20, dtype=cupy.float32)
    out = cupy.empty_like(x)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        cupy.multiply(x, 2, out=out)  # its module loads outside the capture
        stream.synchronize()
        stream.begin_capture()
        cupy.multiply(x, 2, out=out)
        graph = stream.end_capture()
    verbose_flag = getattr(cupy.cuda.runtime, "cudaGraphDebugDotFlagsVerbose", 1)
    default, verbose = graph.debug_dot_str(), graph.debug_dot_str(verbose_flag)
    print(f"--- debug_dot_str() ---\n{default}\n--- debug_dot_str({verbose_flag}) (verbose) ---\n{verbose}")
    kernels, nodes = graph_nodes(graph)
    print(f"graph mode counts: {kernels} kernel node(s) of {nodes} node(s)")
    assert (kernels, nodes) == (1, 1), "graph mode must count the one kernel this graph holds"


def test_an_nn_parameter_is_measured(roofline: Roofline) -> None:
    layer = torch.nn.Linear(4096, 4096, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    assert layer.weight.requires_grad

    result = roofline.measure(F.linear, x, layer.weight, op="gemv", M=4096, K=4096, dtype="bf16")

    assert result is not None
    print(f"nn.Parameter measured: {result.measurement}")


_HELD_SYNC = """
import time
import cupy
from pytest_roofline.errors import MeasurementError
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cache import WARM
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.engine import measure

x = cupy.arange(1 << 16, dtype=cupy.float32)

def syncs():
    return float(x.sum().item())  # .item() waits for the GPU: it cannot run held

backend = CudaBackend(0, block="on")
start = time.perf_counter()
try:
    measure(syncs, policy=Policy(max_time_s=0.3), backend=backend, cache=WARM)
    print(f"no error after {time.perf_counter() - start:.2f} s")
except MeasurementError as exc:
    print(f"MeasurementError after {time.perf_counter() - start:.2f} s: {exc}")
"""


def test_a_kernel_that_synchronizes_under_block_on_fails_within_2_s() -> None:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _HELD_SYNC], capture_output=True, text=True, timeout=STALL_S, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"a held kernel that synchronizes stalled: no answer after {STALL_S:.0f} s")
    elapsed = time.perf_counter() - start
    print(done.stdout, done.stderr[-2000:], f"(the child took {elapsed:.1f} s, CuPy's start-up included)")
    assert done.stdout.startswith("MeasurementError after ")
    took = float(done.stdout.split()[2])
    assert took < HOLD_FAILS_WITHIN_S


def test_a_numpy_kernel_in_a_gpu_run_is_timed_on_the_host(roofline: Roofline) -> None:
    import numpy as np

    n = 1 << 22
    a, b, out = np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)

    result: Any = roofline.measure(
        np.add, a, b, kwargs={"out": out}, op="elementwise", n=n, inputs=2, outputs=1, dtype="fp32"
    )

    print(f"NumPy kernel timed by the {result.measurement.backend} backend: {result.measurement}")
    assert result.measurement.backend == "cpu"
