"""The library's own contract, no timing: both back-ends define every kernel; CuPy stays lazy."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import kernels
import pytest
from kernels import cuda_src


@pytest.mark.parametrize("name", kernels.BACKENDS)
def test_every_backend_defines_every_kernel_with_one_signature(name: str) -> None:
    module = kernels.get_backend(name)
    reference = kernels.get_backend("numpy")
    for kernel in kernels.KERNELS:
        assert callable(getattr(module, kernel, None)), f"{name} back-end lacks {kernel}"
        got = list(inspect.signature(getattr(module, kernel)).parameters)
        want = list(inspect.signature(getattr(reference, kernel)).parameters)
        assert got == want, f"{name}.{kernel} takes {got}, numpy's takes {want}"


def test_importing_the_library_never_imports_cupy() -> None:
    code = "import sys, kernels, kernels.cupy_backend, kernels.cuda_src; print('cupy' in sys.modules)"
    root = Path(kernels.__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False", "importing kernels (or kernels.cupy_backend) imported cupy"


def test_every_cuda_source_is_registered() -> None:
    constants = {name: value for name, value in vars(cuda_src).items() if name.endswith("_SRC")}
    registered = {source.code for source in cuda_src.CUDA_SOURCES.values()}
    unregistered = [name for name, code in constants.items() if code not in registered]
    assert not unregistered, f"add these to CUDA_SOURCES: {unregistered}"


def test_unknown_backend_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown back-end 'jax'"):
        kernels.get_backend("jax")
