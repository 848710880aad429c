"""A small kernel library used to demonstrate pytest-roofline.

Each kernel comes in two back-ends with the same signatures: :mod:`kernels.numpy_backend` (runs
everywhere) and :mod:`kernels.cupy_backend` (raw CUDA kernels from :mod:`kernels.cuda_src`,
used when a GPU is present). Importing this package never imports CuPy.

Good and bad variants sit side by side; each bad one wastes the resource its roofline says
matters (see ``README.md``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["BACKENDS", "KERNELS", "get_backend", "unavailable_reason"]

BACKENDS: tuple[str, ...] = ("numpy", "cupy")

#: The kernel functions every back-end defines, with the same signature in each.
KERNELS: tuple[str, ...] = (
    "saxpy",
    "saxpy_strided",
    "layernorm",
    "layernorm_naive",
    "gemm",
    "gemm_naive",
    "transpose",
    "transpose_naive",
    "bias_relu",
)


def get_backend(name: str) -> ModuleType:
    """The back-end module called ``name`` (importing it does not import CuPy)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown back-end {name!r}; choose one of {', '.join(BACKENDS)}")
    return importlib.import_module(f"{__name__}.{name}_backend")


def unavailable_reason(name: str) -> str | None:
    """Why back-end ``name`` cannot run on this machine, or None when it can."""
    if name not in BACKENDS:
        raise ValueError(f"unknown back-end {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "numpy":
        return None
    try:
        import cupy
    except ImportError as exc:
        return f"the cupy back-end needs CuPy, which is not importable ({exc})"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError without a driver; HIP builds raise their own type
        return f"the cupy back-end needs a GPU; CuPy cannot reach one ({exc})"
    if count < 1:
        return "the cupy back-end needs a GPU; CuPy sees none"
    return None
