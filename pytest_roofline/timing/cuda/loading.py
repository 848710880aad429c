"""Loading CuPy, on first CUDA use: the only place :mod:`cupy` is imported, and only inside functions.
Several CuPy packages side by side are an error here (:class:`CupyInstallError`), never a silent
fallback to the CPU; a missing NVRTC or an unwritable kernel cache around the plugin's own first
launches (:func:`compiling`) is one :class:`KernelCompileError`: docs/gpu.md ("Installing for a GPU").
"""

from __future__ import annotations

import errno
import os
import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_roofline.model.devices import DeviceError

from ...errors import UnavailableError

NEED_CUPY = (
    "CUDA measurement needs CuPy: pip install 'pytest-roofline[cuda12]' (or [cuda13] for CUDA 13;"
    " with a CuPy already installed, no extra)"
)
NO_DEVICE = "no CUDA device is visible (cupy.cuda.runtime.getDeviceCount() == 0)"

#: CuPy's warning when several of its packages are installed (cupy/_environment.py)
_DUPLICATE_MARK = "multiple CuPy packages are installed"
_duplicate_error: str | None = None


class CupyInstallError(UnavailableError):
    """Several CuPy packages are installed side by side; CuPy warns it may not work."""


class KernelCompileError(UnavailableError):
    """CuPy cannot compile the plugin's CUDA C here: NVRTC is missing, or its kernel cache folder
    cannot be written."""


#: CuPy's kernel cache folder when ``CUPY_CACHE_DIR`` is not set (cupy/cuda/_compiler_cache.py)
DEFAULT_CUPY_CACHE_DIR = "~/.cupy/kernel_cache"
#: what an OSError on the kernel cache says about the folder (not a transient failure)
_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR)
_compile_error: str | None = None


@contextmanager
def compiling() -> Iterator[None]:
    """Around the first launches of the plugin's own CUDA C (never a user's kernel): a missing NVRTC
    or an unwritable ``CUPY_CACHE_DIR`` becomes one :class:`KernelCompileError`, and every later
    block raises it again at once."""
    global _compile_error
    if _compile_error is not None:
        raise KernelCompileError(_compile_error)
    try:
        yield
    except Exception as exc:
        problem = compile_problem(exc)
        if problem is None:
            raise
        _compile_error = problem
        raise KernelCompileError(problem) from None


def compile_problem(exc: BaseException) -> str | None:
    """What ``exc`` (raised by CuPy's first compile) says is missing, in one line with the fix; None
    when it is something else."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if type(exc).__name__ == "DynamicLibNotFoundError" or re.search(r"nvrtc", text, re.IGNORECASE):
        if not re.search(r"not found|failed to load|cannot open|no such file|finding", text, re.IGNORECASE):
            return None  # an NVRTC compile error of the source, not a missing library
        return (
            f"CuPy cannot compile the plugin's CUDA kernels: NVRTC (libnvrtc) is missing"
            f" ({type(exc).__name__}: {text}); install it with CuPy's CUDA components, pip install"
            f" '{_cupy_package()}[ctk]' (or the CUDA Toolkit, with CUDA_PATH set)"
        )
    if isinstance(exc, OSError) and exc.errno in _UNWRITABLE:
        folder = os.path.expanduser(os.environ.get("CUPY_CACHE_DIR") or DEFAULT_CUPY_CACHE_DIR)
        if exc.filename and not _on_the_way(str(exc.filename), folder):
            return None
        named = "CUPY_CACHE_DIR" if os.environ.get("CUPY_CACHE_DIR") else "CuPy's kernel cache"
        return (
            f"CuPy cannot write its compiled kernels to {named} {folder} ({type(exc).__name__}: {text});"
            " set CUPY_CACHE_DIR to a writable folder, e.g. export CUPY_CACHE_DIR=/tmp/cupy-kernel-cache"
        )
    return None


def _on_the_way(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder``, inside it (a cache file), or above it (``os.makedirs`` makes
    each folder on the way)."""
    here, there = (os.path.abspath(p).rstrip(os.sep) + os.sep for p in (path, folder))
    return here.startswith(there) or there.startswith(here)


def _cupy_package() -> str:
    """The CuPy wheel for this CUDA (``cupy-cuda13x``), from the runtime CuPy was built for."""
    cupy = sys.modules.get("cupy")
    try:
        major = int(cupy.cuda.runtime.runtimeGetVersion()) // 1000 if cupy is not None else 0
    except Exception:  # a CuPy without a runtime to ask, or no driver
        major = 0
    return f"cupy-cuda{major}x" if major >= 12 else "cupy-cuda13x"


def device_count() -> int:
    """GPUs CuPy can see; 0 when CuPy is missing or broken, or there is no driver or device. Raises
    only :class:`CupyInstallError`, for several CuPy packages installed (docs/gpu.md, "Installing for a GPU").
    """
    try:
        cupy = load_cupy()
    except CupyInstallError:
        raise
    except Exception:  # ImportError, OSError (missing CUDA libraries)
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # CUDARuntimeError (no driver)
        return 0


@contextmanager
def using_device(index: int) -> Iterator[Any]:
    """Make GPU ``index`` current for the block, restoring the previous one after (``cupy.cuda.Device``)."""
    device = require_cupy().cuda.Device(index)
    with device:
        yield device


def require_cupy() -> Any:
    """CuPy, imported on first use; a RuntimeError saying what to install when it is missing."""
    try:
        return load_cupy()
    except ImportError as exc:
        # no ImportError traceback for users: what to install, and CuPy's own reason if it broke
        raise UnavailableError(f"{NEED_CUPY} ({exc})") from None


def load_cupy() -> Any:
    """``import cupy``; a :class:`CupyInstallError` when CuPy says several of its packages are installed
    (docs/gpu.md, "Installing for a GPU"). Other warnings CuPy gives at import are given again,
    unchanged, after it.
    """
    global _duplicate_error
    if _duplicate_error is not None:
        raise CupyInstallError(_duplicate_error)
    module = sys.modules.get("cupy")
    if module is not None:
        return module
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import cupy
    for warning in caught:
        if _DUPLICATE_MARK in str(warning.message):
            _duplicate_error = _duplicate_message(str(warning.message))
            raise CupyInstallError(_duplicate_error)
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return cupy


def _duplicate_message(text: str) -> str:
    found = re.search(r"in your environment:\s*\n\s*([^\n]+)", text)
    packages = found.group(1).strip() if found else "several cupy packages"
    names = " ".join(name.strip() for name in packages.split(","))
    return (
        f"several CuPy packages are installed side by side ({packages}) and CuPy warns it may not work,"
        f" so no GPU is timed with it: pip uninstall {names}, then install one, the one for your CUDA"
        " (pip install 'pytest-roofline[cuda12]' or '[cuda13]', or cupy-cuda12x / cupy-cuda13x)"
    )


def require_device(index: object) -> Any:
    """CuPy, once GPU ``index`` is known to exist; a clear error otherwise."""
    cupy = require_cupy()
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise DeviceError(f"a CUDA device index is a non-negative integer; got {index!r}")
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # CUDARuntimeError: no driver, or a driver older than the CUDA runtime
        raise DeviceError(
            f"no CUDA device is visible (cupy.cuda.runtime.getDeviceCount() raised {exc})"
        ) from None
    if count == 0:
        raise DeviceError(NO_DEVICE)
    if index >= count:
        raise DeviceError(f"no CUDA device {index}: {count} visible (0..{count - 1})")
    return cupy
