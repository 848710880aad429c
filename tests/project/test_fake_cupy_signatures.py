"""The fakes' signatures against the real CuPy's, where CuPy is installed (skipped otherwise).

A fake that accepts what the real API refuses (or names a parameter differently) would let a wrong
call pass every test; this compares the parameter names of each CuPy callable the backend uses.
Cython functions built without ``binding=True`` have no signature to read: those are skipped by
name, and the test fails if it could compare none at all.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from fake_cupy import FakeCupy

#: dotted paths below ``cupy`` of what pytest_roofline.timing.cuda calls
USED = (
    "cuda.Device",
    "cuda.Event",
    "cuda.Stream",
    "cuda.ExternalStream",
    "cuda.get_elapsed_time",
    "cuda.get_current_stream",
    "cuda.PinnedMemory",
    "cuda.runtime.getDeviceCount",
    "cuda.runtime.getDeviceProperties",
    "cuda.runtime.deviceGetAttribute",
    "cuda.runtime.memsetAsync",
    "cuda.runtime.deviceGetLimit",
    "cuda.runtime.runtimeGetVersion",
    "get_default_memory_pool",
    "RawKernel",
    "empty",
    "ones",
    "zeros",
    "copyto",
    "matmul",
    "random.random",
)
METHODS = (
    # an instance's: the fake's cuda.Event is a factory function, CuPy's a class
    ("cuda.Event()", "record"),
    ("cuda.Event()", "synchronize"),
    ("cuda.Stream", "record"),
    ("cuda.Stream", "wait_event"),
    ("cuda.Stream", "begin_capture"),
    ("cuda.Stream", "end_capture"),
    ("cuda.Stream", "synchronize"),
    ("RawKernel", "__call__"),
    ("get_default_memory_pool()", "free_all_blocks"),
)


def _get(module: Any, path: str) -> Any:
    """``module.a.b``; a part ending in ``()`` is called (an object a function gives)."""
    for part in path.split("."):
        module = getattr(module, part.removesuffix("()"))
        if part.endswith("()"):
            module = module()
    return module


def test_the_constants_the_backend_reads_are_cupys() -> None:
    cupy = pytest.importorskip("cupy")
    fake = FakeCupy().cupy
    assert cupy.cuda.runtime.cudaGraphDebugDotFlagsVerbose == fake.cuda.runtime.cudaGraphDebugDotFlagsVerbose
    assert cupy.cuda.runtime.hostAllocMapped == fake.cuda.runtime.hostAllocMapped


def _names(fn: Any) -> tuple[list[str], bool] | None:
    """Parameter names (self and *args/**kwargs left out), and whether it takes **kwargs."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = signature.parameters.values()
    names = [
        p.name
        for p in params
        if p.name not in ("self", "cls") and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def test_fake_signatures_match_cupy() -> None:
    cupy = pytest.importorskip("cupy")
    fake = FakeCupy().cupy
    compared = 0
    pairs = [(_get(cupy, p), _get(fake, p), p) for p in USED]
    pairs += [(getattr(_get(cupy, c), m), getattr(_get(fake, c), m), f"{c}.{m}") for c, m in METHODS]
    for real, ours, path in pairs:
        real_sig, ours_sig = _names(real), _names(ours)
        if real_sig is None:
            continue
        assert ours_sig is not None, path
        (want, open_ended), (got, _) = real_sig, ours_sig
        n = min(len(want), len(got))
        # the fake may stop early (parameters the backend never passes), never differ in order; a
        # keyword the real one takes only through **kwargs (RawKernel's stream=) must still exist
        assert want[:n] == got[:n], f"{path}: CuPy {want}, fake {got}"
        if not open_ended:
            assert set(got) <= set(want), f"{path}: CuPy {want}, fake {got}"
        compared += 1
    assert compared, "no CuPy signature could be read"
