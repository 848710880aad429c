"""One GPU per pytest-xdist worker, for everything the worker does (``--roofline-gpus``).

The controller starts worker ``gw<i>`` with ``CUDA_VISIBLE_DEVICES`` narrowed to the i-th GPU of the
list (``XSpec.env``), so its GPU is its only one. Why narrowing, what it costs, and when workers are
not spread: docs/gpu.md ("Several GPUs: one per worker").
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

#: the variable CUDA reads, once, to number the GPUs a process sees
VISIBLE = "CUDA_VISIBLE_DEVICES"
#: ROCm's, which narrow further where set: spreading leaves such a machine alone
_ROCM_VISIBLE = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
#: the key of pytest-xdist's ``workerinput`` that gives a worker its GPU's index on the controller
WORKER_GPU = "roofline_gpu"
_WORKER_ID = re.compile(r"gw(?P<index>\d+)")


def count_gpus() -> int:
    """The GPUs this process sees, numbered as CUDA numbers them (``CUDA_VISIBLE_DEVICES`` applied),
    at no cost to a run on a machine without them: through CuPy when something has loaded it
    already, else through the CUDA driver itself (``cuInit`` and ``cuDeviceGetCount`` of libcuda,
    by ctypes: no module imported, no context made, no GPU memory taken); 0 without a driver."""
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            return int(cupy.cuda.runtime.getDeviceCount())
        except Exception:  # CUDARuntimeError: no driver, no device
            return 0
    import ctypes

    for name in ("libcuda.so.1", "nvcuda.dll"):
        try:
            driver = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return 0
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0  # CUDA_ERROR_NO_DEVICE, a driver too old, ...
    return count.value


def check_gpus(gpus: tuple[int, ...], *, origin: str) -> None:
    """A usage error naming ``--roofline-gpus`` LIST's first index that is not a GPU this process sees
    (the controller, or a serial run: a worker sees only its own)."""
    count = count_gpus()
    missing = [i for i in gpus if i >= count]
    if missing:
        text = ",".join(map(str, gpus))
        seen = ", ".join(map(str, range(count))) if count else "none (no GPU, or no CUDA driver)"
        narrowed = f" ({VISIBLE}={os.environ[VISIBLE]})" if VISIBLE in os.environ else ""
        raise pytest.UsageError(
            f"{origin} {text}: no GPU {missing[0]} here; GPUs seen: {seen}{narrowed}; give indices"
            " of those, all, or none"
        )


@dataclass(slots=True)
class Spread:
    """How the workers were spread: each worker spec's GPU (by the spec object's id) and one line."""

    #: ``id(spec)`` -> the controller's index of the worker's GPU
    gpu_of: dict[int, int] = field(default_factory=dict)
    #: the summary's line, "" when there is nothing to say (no GPU seen)
    line: str = ""

    def worker_gpu(self, spec: object) -> int | None:
        return self.gpu_of.get(id(spec))


def spread_workers(
    specs: Sequence[Any],
    *,
    gpus: str | tuple[int, ...],
    count: Callable[[], int],
    device_setting: str,
    environ: Mapping[str, str],
) -> Spread:
    """Narrow each local worker spec's ``CUDA_VISIBLE_DEVICES`` to its GPU (``spec.env``), as
    ``gpus`` and the GPUs this process sees (``count()``, asked only when spreading may follow)
    allow; the one summary line says how."""
    spread = Spread()
    if not specs:
        return spread
    why_not = _why_not_spread(gpus, device_setting, environ)
    if why_not:
        spread.line = f"pytest-xdist workers not spread over GPUs: {why_not}"
        return spread
    seen = count()
    if seen == 0:
        return spread  # a machine without GPUs: nothing to say
    # a LIST was checked at configure (:func:`check_gpus`); "all" is every GPU seen
    chosen = list(range(seen)) if isinstance(gpus, str) else list(gpus)
    # each GPU's entry for CUDA_VISIBLE_DEVICES: this process's own (indices, UUIDs or MIG ids; CUDA
    # stops at the first it cannot use, so only the first ``seen`` are real), else its index
    if VISIBLE in environ:
        entries = [entry.strip() for entry in environ[VISIBLE].split(",")][:seen]
    else:
        entries = [str(i) for i in range(seen)]
    placed: dict[int, list[str]] = {}
    kept: list[str] = []
    for position, spec in enumerate(specs):
        worker = str(getattr(spec, "id", None) or f"gw{position}")
        env = getattr(spec, "env", None)
        if not getattr(spec, "popen", None) or getattr(spec, "via", None) or not isinstance(env, dict):
            kept.append(f"{worker} (not a local process)")
            continue
        if VISIBLE in env:
            kept.append(f"{worker} ({VISIBLE}={env[VISIBLE]} from its --tx)")
            continue
        match = _WORKER_ID.fullmatch(worker)
        gpu = chosen[(int(match["index"]) if match else position) % len(chosen)]
        env[VISIBLE] = entries[gpu]
        spread.gpu_of[id(spec)] = gpu
        placed.setdefault(gpu, []).append(worker)
    spread.line = _line(placed, kept, entries)
    return spread


def _why_not_spread(gpus: str | tuple[int, ...], device_setting: str, environ: Mapping[str, str]) -> str:
    if gpus == "none":
        return "--roofline-gpus none (each worker sees every GPU; its tests' own CUDA work runs on the first)"
    keyword = device_setting.strip().lower()
    if keyword not in ("auto", "cuda", "cpu"):
        return f"--roofline-device {device_setting} names one device for every worker"
    rocm = [name for name in _ROCM_VISIBLE if name in environ]
    if rocm:
        return f"{rocm[0]} is set, and ROCm would apply it with {VISIBLE}"
    return ""


def _line(placed: Mapping[int, list[str]], kept: Sequence[str], entries: Sequence[str]) -> str:
    parts = []
    for gpu in sorted(placed):
        physical = f" ({VISIBLE}={entries[gpu]})" if entries[gpu] != str(gpu) else ""
        parts.append(f"{' '.join(placed[gpu])} -> GPU {gpu}{physical}")
    line = ""
    if parts:
        line = f"pytest-xdist workers spread one GPU each, seeing only it: {', '.join(parts)}"
    if kept:
        left = f"left as they are: {', '.join(kept)}"
        line = f"{line}; {left}" if line else f"pytest-xdist workers not spread: {left}"
    return line
