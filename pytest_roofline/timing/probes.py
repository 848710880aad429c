"""The CPU's reference probes, short kernels whose rate tracks how fast the machine runs right now:
a single-threaded ``copy`` (``np.copyto``, 2 arrays of traffic, STREAM's convention) and a
``matmul`` of a few milliseconds, their arrays made on first use and kept for the process. Why and
how large: docs/measurement.md ("The CPU timer", "Calibration").
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ..model.paired_ceilings import BANDWIDTH, ProbeReference
from .base import Probe

if TYPE_CHECKING:
    from collections.abc import Callable

MiB = 2**20
#: one probe call should take about this long: long enough to time well, short enough to repeat
PROBE_TARGET_S = 0.008
_COPY_MIN, _COPY_MAX = 32 * MiB, 256 * MiB


def copy_probe_bytes(llc_bytes: int) -> int:
    """Bytes of each of the copy probe's two arrays: 2x the last-level cache, within 32-256 MiB."""
    return min(max(2 * llc_bytes, _COPY_MIN), _COPY_MAX) // 8 * 8


def matmul_probe_n(flops_per_s: float) -> int:
    """The n (a multiple of 32, 64..2048) for which one n x n matmul takes about :data:`PROBE_TARGET_S`."""
    n = int((flops_per_s * PROBE_TARGET_S / 2) ** (1 / 3)) // 32 * 32
    return min(max(n, 64), 2048)


def probe_for(reference: ProbeReference) -> Probe:
    """The probe a calibration measured as ``reference``, ready to time: a call's work is bytes (copy:
    two arrays of ``size`` bytes) or FLOPs (matmul: 2 n^3)."""
    fn = kernel(reference.resource, reference.kind, reference.size)
    size = reference.size
    amount = 2.0 * size if reference.kind == "copy" else 2.0 * size**3
    return Probe(reference.name, reference.resource, amount, fn, warmup_calls=int(reference.kind == "matmul"))


@functools.cache
def kernel(resource: str, kind: str, size: int) -> Callable[[], object]:
    """The probe's call, its arrays allocated (and touched) once per process."""
    import numpy as np

    if kind == "copy":
        if resource != BANDWIDTH:
            raise ValueError(f"a copy probe measures bandwidth, not {resource!r}")
        src = np.full(size // 8, 1.0)
        dst = np.empty_like(src)
        np.copyto(dst, src)  # first touch, untimed: page faults are not bandwidth
        return functools.partial(np.copyto, dst, src)
    if kind == "matmul":
        dtype = {"fp64": np.float64, "fp32": np.float32}[resource]
        x = np.full((size, size), 1.0, dtype=dtype)
        y = np.full((size, size), 0.5, dtype=dtype)
        out = np.empty((size, size), dtype=dtype)
        return functools.partial(np.matmul, x, y, out=out)
    raise ValueError(f"probe kind must be copy or matmul; got {kind!r}")
