"""The fakes' signatures against the real CuPy's, where CuPy is installed (skipped otherwise).

A fake that accepts what the real API refuses (or names a parameter differently) would let a wrong
call pass every test; this compares the parameter names of each CuPy callable the backend uses.
Cython functions built without ``binding=True`` have no signature to read: those are skipped by
name, and the test fails if it could compare none at all.
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

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


class _Signature(NamedTuple):
    """A callable's parameter names (self, *args and **kwargs left out), and whether it takes
    *args and **kwargs."""

    names: list[str]
    varargs: bool
    kwargs: bool


def _names(fn: Any) -> _Signature | None:
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
    kinds = {p.kind for p in params}
    return _Signature(
        names, inspect.Parameter.VAR_POSITIONAL in kinds, inspect.Parameter.VAR_KEYWORD in kinds
    )


def _mismatch(path: str, real: Any, ours: Any) -> str | None:
    """Why the fake ``ours`` would accept a call the real ``real`` refuses (None: it would not, or
    the real one has no signature to read)."""
    want, got = _names(real), _names(ours)
    if want is None:
        return None
    if got is None:
        return f"{path}: the fake has no signature"
    problem = f"{path}: CuPy {want.names}, fake {got.names}"
    if want.varargs:
        # CuPy's ufuncs (cupy.matmul: ``(*args, axes, ..., out)``, seen on the first GPU run) take the
        # operands through *args: the fake's own names are those positionals, before any it shares
        shared = [name for name in got.names if name in want.names]
        own = [name for name in got.names if name not in want.names]
        if got.names[: len(own)] != own or shared != [name for name in want.names if name in shared]:
            return problem
        return None
    n = min(len(want.names), len(got.names))
    # the fake may stop early (parameters the backend never passes), never differ in order; a
    # keyword the real one takes only through **kwargs (RawKernel's stream=) must still exist
    if want.names[:n] != got.names[:n]:
        return problem
    if not want.kwargs and not set(got.names) <= set(want.names):
        return problem
    return None


def test_the_comparison_reads_a_ufunc_that_takes_its_operands_through_args() -> None:
    def matmul(*args: Any, axes: Any = None, axis: Any = None, out: Any = None) -> None: ...
    def fake(a: Any, b: Any, out: Any = None) -> None: ...
    def misnamed(a: Any, b: Any, out: Any = None, output: Any = None) -> None: ...
    def keyword_first(out: Any, a: Any, b: Any) -> None: ...
    def copyto(dst: Any, src: Any, casting: str = "same_kind") -> None: ...
    def reordered(src: Any, dst: Any) -> None: ...
    def kernel(grid: Any, block: Any, args: Any, **kwargs: Any) -> None: ...
    def fake_kernel(grid: Any, block: Any, args: Any, stream: Any = None) -> None: ...

    assert _mismatch("matmul", matmul, fake) is None
    assert _mismatch("matmul", matmul, misnamed) == (
        "matmul: CuPy ['axes', 'axis', 'out'], fake ['a', 'b', 'out', 'output']"
    )
    assert _mismatch("matmul", matmul, keyword_first) is not None
    assert _mismatch("copyto", copyto, copyto) is None
    assert _mismatch("copyto", copyto, reordered) is not None
    assert _mismatch("RawKernel.__call__", kernel, fake_kernel) is None


def test_fake_signatures_match_cupy() -> None:
    cupy = pytest.importorskip("cupy")
    fake = FakeCupy().cupy
    compared = 0
    pairs = [(_get(cupy, p), _get(fake, p), p) for p in USED]
    pairs += [(getattr(_get(cupy, c), m), getattr(_get(fake, c), m), f"{c}.{m}") for c, m in METHODS]
    problems = []
    for real, ours, path in pairs:
        if _names(real) is None:
            continue
        problem = _mismatch(path, real, ours)
        if problem:
            problems.append(problem)
        compared += 1
    assert not problems
    assert compared, "no CuPy signature could be read"
