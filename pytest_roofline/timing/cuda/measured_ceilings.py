"""A GPU's measured ceilings: DRAM bandwidth by a device-to-device copy and by a read-only stream (the
faster of the two), and matmul FLOP/s per precision, each timed by the engine over
:class:`~.backend.CudaBackend`."""

from __future__ import annotations

import importlib
import os
from typing import Any

from pytest_roofline.model.core import Figure, Precision, Source, Unit
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.base import Kernel
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.cuda.loading import compiling, require_device, using_device
from pytest_roofline.timing.l2 import measure_l2_bandwidth

#: the copy for the bandwidth ceiling moves max(4 × L2, this) bytes each way
MIN_COPY_BYTES = 512 * 2**20
#: square matmul sizes for the FLOP/s ceilings, the best of which is kept: 4096 saturates most GPUs,
#: 8192 the largest (and an 8192² fp64 operand is 512 MiB, within any datacenter GPU's memory)
MATMUL_SIZES = (4096, 8192)
#: the precisions whose tensor-core rates are one, each taking the group's fastest (docs/measurement.md,
#: "Calibration")
SHARED_RATE = ((Precision.FP16, Precision.BF16),)
#: names how :func:`measure_ceilings` measures, in the calibration cache's key: change it with the method
CEILINGS_METHOD = (
    "bandwidth best of copy and ld.global.cg read; matmul random best of 4096,8192; fp64 tensor from cc 8.0;"
    " fp16 and bf16 tensor one rate; matmul samples at slowed clocks left out"
)


def measure_ceilings(
    index: int = 0, policy: Policy | None = None, *, block: bool | str | None = None
) -> tuple[Figure, dict[tuple[Precision, Unit], Figure]]:
    """Measured DRAM bandwidth and matmul FLOP/s of GPU ``index``, each timed warm by the engine under
    ``policy``: the bandwidth, and the FLOP/s keyed by precision and unit. ``block``: the blocking
    kernel's setting (:class:`CudaBackend`); every first call runs unheld either way. Which kernels,
    which keys and why: docs/measurement.md ("Calibration").
    """
    cupy = require_device(index)
    # cuBLAS is refused during stream capture (cupy/cupy#6290): never graph mode here
    backend = CudaBackend(index, block=block)
    try:
        return _measure_ceilings(cupy, backend, index, policy or Policy())
    finally:  # a few GiB of copies and operands: given back before the tests want the memory
        backend.release_memory()


def _measure_ceilings(
    cupy: Any, backend: CudaBackend, index: int, policy: Policy
) -> tuple[Figure, dict[tuple[Precision, Unit], Figure]]:
    from pytest_roofline.timing.cache import WARM
    from pytest_roofline.timing.engine import measure

    props = backend.properties
    # CuPy compiles the casts of the random inputs with NVRTC: no user kernel runs in here
    with using_device(index), compiling():
        nbytes = max(4 * props.l2_bytes, MIN_COPY_BYTES)
        src = cupy.empty(nbytes, dtype=cupy.uint8)
        dst = cupy.empty(nbytes, dtype=cupy.uint8)
        m = measure(cupy.copyto, dst, src, policy=policy, backend=backend, cache=WARM)
        del src, dst
        copy = 2 * nbytes / m.time_s
        copy_note = f"cupy.copyto of {nbytes / 2**20:.0f} MiB (read + write), {m.stat} of {m.stats.n} samples"
        read = measure_l2_bandwidth(cupy, backend, l2_bytes=nbytes, policy=policy, fill=1.0)
        if read.value > copy:
            note = f"{read.note}; beside {copy_note}: {copy / 1e9:,.1f} GB/s"
            bandwidth = Figure(read.value, Source.MEASURED, note)
        else:
            note = f"{copy_note}; beside a read-only stream: {read.value / 1e9:,.1f} GB/s"
            bandwidth = Figure(copy, Source.MEASURED, note)

        fp32_key = (Precision.TF32, Unit.TENSOR) if tf32_requested() else (Precision.FP32, Unit.VECTOR)
        fp64_unit = Unit.TENSOR if props.kind == "cuda" and props.major >= 8 else Unit.VECTOR
        matmuls: list[tuple[Any, tuple[Precision, Unit]]] = [
            (cupy.float64, (Precision.FP64, fp64_unit)),
            (cupy.float32, fp32_key),
            (cupy.float16, (Precision.FP16, Unit.TENSOR)),
        ]
        bf16 = _bfloat16(cupy)
        if bf16 is not None:
            matmuls.append((bf16, (Precision.BF16, Unit.TENSOR)))

        peaks: dict[tuple[Precision, Unit], Figure] = {}
        for dtype, (precision, unit) in matmuls:
            best: tuple[float, str] | None = None
            for n in MATMUL_SIZES:
                a, b = _random_matrix(cupy, n, dtype), _random_matrix(cupy, n, dtype)
                c = cupy.empty((n, n), dtype=dtype)
                # slowed samples left out: a ceiling is the maximum clock's, as the datasheet's is
                with backend.watch_clocks() as watcher:
                    matmul = _matmul_into(cupy)
                    m = measure(matmul, a, b, c, policy=policy, backend=backend, cache=WARM, throttle=watcher)
                del a, b, c
                rate = 2 * n**3 / m.time_s
                if best is None or rate > best[0]:
                    samples = f"{m.stat} of {m.stats.n} samples"
                    best = (rate, f"cupy.matmul {n}×{n}×{n} {precision}, random inputs, {samples}")
            assert best is not None  # MATMUL_SIZES is not empty
            peaks[(precision, unit)] = Figure(best[0], Source.MEASURED, best[1])
    return bandwidth, shared_rates(peaks)


def shared_rates(peaks: dict[tuple[Precision, Unit], Figure]) -> dict[tuple[Precision, Unit], Figure]:
    """``peaks`` with each :data:`SHARED_RATE` group's tensor ceilings raised to the group's fastest
    measurement, the note saying whose it is."""
    shared = dict(peaks)
    for group in SHARED_RATE:
        found = [(p, peaks[(p, Unit.TENSOR)]) for p in group if (p, Unit.TENSOR) in peaks]
        if not found:
            continue
        fastest, best = max(found, key=lambda item: item[1].value)
        for precision, figure in found:
            if figure.value < best.value:
                note = (
                    f"{fastest}'s rate, the tensor cores' for both ({best.note}); {precision}'s own:"
                    f" {figure.value / 1e12:,.1f} TFLOP/s"
                )
                shared[(precision, Unit.TENSOR)] = Figure(best.value, Source.MEASURED, note)
    return shared


def _random_matrix(cupy: Any, n: int, dtype: Any) -> Any:
    """An n×n matrix of uniform random values in [0, 1) in ``dtype`` (drawn in float32, cast)."""
    random = getattr(cupy, "random", None)
    if random is None:  # a stand-in CuPy without cupy.random
        return cupy.ones((n, n), dtype=dtype)
    return random.random((n, n), dtype=cupy.float32).astype(dtype)


def tf32_requested() -> bool:
    """Whether ``CUPY_TF32`` asks CuPy for TF32 fp32 matmuls (read by CuPy as ``int(...) > 0``)."""
    try:
        return int(os.environ.get("CUPY_TF32", "0")) > 0
    except ValueError:
        return False


def _matmul_into(cupy: Any) -> Kernel:
    def matmul(a: Any, b: Any, out: Any) -> None:
        cupy.matmul(a, b, out=out)  # into a preallocated result: no allocator in the window

    return matmul


def _bfloat16(cupy: Any) -> Any:
    """ml_dtypes' bfloat16 when this CuPy can matmul it (CuPy 14 with ml_dtypes), else None."""
    try:
        bfloat16 = importlib.import_module("ml_dtypes").bfloat16
        x = cupy.ones((2, 2), dtype=bfloat16)
        cupy.matmul(x, x)
    except Exception:  # no ml_dtypes, or a CuPy without bfloat16 kernels
        return None
    return bfloat16
