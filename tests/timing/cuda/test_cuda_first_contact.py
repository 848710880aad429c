"""First contact with a GPU machine, on the fake (``fake_cupy.py``): CuPy compiles the plugin's CUDA C
with NVRTC into ``CUPY_CACHE_DIR`` on its first launch; without NVRTC, or without a writable cache
folder, every CUDA measurement fails with one line naming what is missing and the fix (issue 27)."""

from __future__ import annotations

import pytest
from fake_cupy import FakeCupy

from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.cuda.loading import KernelCompileError

COPY_TEST = """
import pytest

@pytest.mark.speed_of_light("copy", n=1 << 20, dtype="fp32")
def test_copy_{i}(roofline):
    import cupy
    a, b = cupy.empty(1 << 20, dtype=cupy.float32), cupy.empty(1 << 20, dtype=cupy.float32)
    roofline(cupy.copyto, b, a)
"""

NVRTC_MISSING = "NVRTC (libnvrtc) is missing"
NVRTC_MISSING_PATTERN = r"NVRTC \(libnvrtc\) is missing"


pytestmark = pytest.mark.usefixtures("no_profiler")


def test_a_missing_nvrtc_is_one_line_naming_it_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(nvrtc=False).install(monkeypatch)

    with pytest.raises(KernelCompileError) as caught:
        CudaBackend()  # the blocking kernel is compiled as the backend is built

    message = str(caught.value)
    assert NVRTC_MISSING in message
    assert "DynamicLibNotFoundError" in message
    assert "pip install 'cupy-cuda13x[ctk]'" in message
    assert "\n" not in message
    assert caught.value.__cause__ is None  # no CuPy traceback chained above it


def test_the_reason_is_kept_for_every_later_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(nvrtc=False).install(monkeypatch)
    with pytest.raises(KernelCompileError):
        CudaBackend()
    fake.nvrtc = True  # were it found now, the process's CuPy has already failed to load it

    with pytest.raises(KernelCompileError, match=NVRTC_MISSING_PATTERN):
        CudaBackend()


def test_an_unwritable_cache_folder_names_cupy_cache_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUPY_CACHE_DIR", "/read-only/cupy")
    FakeCupy(cache_writable=False).install(monkeypatch)

    with pytest.raises(KernelCompileError) as caught:
        CudaBackend()

    assert "CUPY_CACHE_DIR /read-only/cupy" in str(caught.value)
    assert "set CUPY_CACHE_DIR to a writable folder" in str(caught.value)


def test_unheld_the_first_flush_says_it_too(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCupy(nvrtc=False).install(monkeypatch)
    backend = CudaBackend(block="off")  # nothing compiled yet

    with pytest.raises(KernelCompileError, match=NVRTC_MISSING_PATTERN):
        backend.run(lambda: None, (), calls=1, samples=1, flush=True)


def test_another_error_of_a_kernel_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.timing.cuda.loading import compiling

    FakeCupy().install(monkeypatch)
    with pytest.raises(PermissionError, match="elsewhere"), compiling():
        raise PermissionError(13, "Permission denied", "/somewhere/elsewhere")


def test_every_cuda_test_fails_with_the_one_line_and_no_traceback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeCupy(nvrtc=False).install(monkeypatch)
    pytester.makepyfile(**{f"test_{i}": COPY_TEST.format(i=i) for i in range(2)})

    result = pytester.runpytest_inprocess(
        "--roofline-device=cuda",
        "--roofline-mode=report",
        "--roofline-latency-floor=off",
        "-p",
        "no:randomly",
    )

    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    assert output.count(NVRTC_MISSING) >= 2
    assert "Traceback" not in output
    assert "INTERNALERROR" not in output
