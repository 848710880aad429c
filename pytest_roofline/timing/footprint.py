"""The op of a call that names none (:func:`infer_call`): a library call the catalogue knows, or what
one untimed first call of the kernel shows (:func:`first_call`): the arrays it holds, which of them
it changed, what it returned, and the FLOPs PyTorch or the NumPy counter (:mod:`.numpy_counter`,
imported only then) counts in it. The tiers and their limits: docs/usage.md ("Budgets without an op").
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from ..model.array_operands import argument_precision, shape_of
from ..model.core import Precision
from ..model.inference import (
    ArrayUse,
    FlopCount,
    Inference,
    catalogue_call,
    count_numpy_calls,
    flattened,
    from_arrays,
    with_given,
)
from .arrays import (
    Home,
    arguments_given,
    arguments_of_kernel,
    dtype_of,
    home_of,
    is_array,
    is_torch,
    layout_of,
    nbytes_of,
    walk,
)

#: how deep closures are followed: the kernel's own, and those of the functions it captured
_CLOSURE_DEPTH = 2


def infer_call(
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: Mapping[str, object] | None,
    setup: Callable[[], object] | None = None,
    *,
    dtype: Precision | None = None,
    flops: float | None = None,
    nbytes: float | None = None,
) -> Inference:
    """What ``fn(*args, **kwargs)`` is, in the first tier that answers; ``dtype``, ``flops`` and
    ``nbytes`` are what the caller gave (each None where not given). ``setup`` runs once first."""
    from .calls import KernelCall

    kernel, call_args = KernelCall(fn, tuple(args), kwargs, setup).prepare()
    target, positional, keywords = flattened(kernel, call_args, {})
    found = catalogue_call(target, positional, keywords, dtype)
    if found is not None:
        return with_given(found, flops=flops, nbytes=nbytes)
    if flops is not None and nbytes is not None:  # nothing left to infer: the call need not run
        arrays = _Arrays()
        arrays.scan_call(target, positional, keywords)
        return from_arrays((), dtype or arrays.precision(), flops=flops, nbytes=nbytes)
    footprint = first_call(target, positional, keywords, count_flops=flops is None)
    return from_arrays(
        footprint.arrays,
        dtype or footprint.precision,
        counted=footprint.count,
        flops=flops,
        nbytes=nbytes,
    )


@dataclass(frozen=True, slots=True)
class Footprint:
    """What one call of a kernel showed: its arrays (given, captured, returned), and the FLOPs a
    counter counted (None where none ran)."""

    arrays: tuple[ArrayUse, ...]
    precision: Precision | None
    count: FlopCount | None = None


def first_call(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object], *, count_flops: bool = True
) -> Footprint:
    """Call ``fn(*args, **kwargs)`` once and take its footprint (docs/usage.md, "Budgets without an
    op"): a device array is copied on the device before the call and compared there after it (one
    boolean comes back), the device synchronized around the call."""
    found = _Arrays()
    found.scan_call(fn, args, kwargs)
    precision = found.precision()
    kept = found.distinct()
    torch = sys.modules.get("torch")
    counting = count_flops and torch is not None and found.touches_torch(torch, fn)
    with _synchronized(kept):
        before = [_fingerprint(value) for _, value in kept]
    with (
        _flop_counter(counting) as counter,
        _numpy_counter(count_flops and not counting, args, kwargs) as run,
        _synchronized(kept),
    ):
        result = fn(*run.args, **run.kwargs) if run is not None else fn(*args, **kwargs)  # type: ignore[operator]
    count = None if counter is None else FlopCount("FlopCounterMode", float(counter()))
    if run is not None:
        from .numpy_counter import plain

        result = plain(result)  # the counted arrays it returned, plain again
        unseen = [where for where, value in kept if id(value) not in run.used]
        count = count_numpy_calls(run.calls, unseen)
    uses = [
        ArrayUse(where, nbytes_of(value), None if was is None else not _same(value, was))
        for (where, value), was in zip(kept, before, strict=True)
    ]
    returned = _Arrays()
    returned.scan(result, "the return value", depth=0)
    extents = [e for e in (_extent(value) for _, value in kept) if e is not None]
    for where, value in returned.distinct():
        extent = _extent(value)
        if extent is None or not any(_within(extent, outer) for outer in extents):
            uses.append(ArrayUse(where, nbytes_of(value), True, returned=True))
    return Footprint(tuple(uses), precision, count)


class _Arrays:
    """The arrays reachable from a call, each once, with where each was found: the call's arguments,
    walked as :mod:`.arrays` walks them, and what the kernel captured (its closure cells and the
    closures of functions found there, a PyTorch module's parameters and buffers)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, object]] = []
        self._seen: set[int] = set()
        self.modules: list[object] = []

    def scan_call(self, fn: object, args: Sequence[object], kwargs: Mapping[str, object]) -> None:
        for where, value in chain(arguments_given(args, kwargs), arguments_of_kernel(fn)):
            self._add(where, value, depth=0)
        self._captured(fn, "the kernel", depth=0)

    def scan(self, value: object, where: str, *, depth: int) -> None:
        for place, item in walk(value, where):
            self._add(place, item, depth=depth)

    def _add(self, where: str, value: object, *, depth: int) -> None:
        if id(value) in self._seen or isinstance(value, type):
            return
        self._seen.add(id(value))
        if is_array(value) and shape_of(value) is not None:  # a shape and a dtype: what is counted
            self.found.append((where, value))
        elif _is_module(value):
            self._scan_module(value)
        elif isinstance(value, types.MethodType):
            self.scan(value.__self__, where, depth=depth)
            self._add(where, value.__func__, depth=depth)
        elif isinstance(value, types.FunctionType) and depth:  # a function a closure captured
            self._captured(value, where, depth=depth)

    def _captured(self, fn: object, where: str, *, depth: int) -> None:
        """What ``fn`` (the kernel, or a function a closure holds) captured: a module's parameters and
        buffers, a function's closure cells (to :data:`_CLOSURE_DEPTH` closures down)."""
        while isinstance(fn, functools.partial):  # its arguments are the call's (arguments_of_kernel)
            fn = fn.func
        if isinstance(fn, types.MethodType):  # its object is the call's too
            fn = fn.__func__
        if _is_module(fn) and id(fn) not in self._seen:
            self._seen.add(id(fn))
            self._scan_module(fn)
        elif isinstance(fn, types.FunctionType) and depth < _CLOSURE_DEPTH:
            names = fn.__code__.co_freevars
            for name, cell in zip(names, fn.__closure__ or (), strict=False):
                with contextlib.suppress(ValueError):  # an empty cell: a name not bound yet
                    self.scan(cell.cell_contents, f"captured {name!r}", depth=depth + 1)

    def _scan_module(self, module: Any) -> None:
        """A PyTorch module's parameters and buffers: what calling it reads."""
        self.modules.append(module)
        for kind, named in (("parameter", module.named_parameters), ("buffer", module.named_buffers)):
            for name, tensor in named():
                if id(tensor) not in self._seen:
                    self._seen.add(id(tensor))
                    self.found.append((f"{kind} {name!r}", tensor))

    def distinct(self) -> list[tuple[str, object]]:
        """The arrays found, leaving out those that lie inside another one found (its views)."""
        spans = [(_extent(value), where, value) for where, value in self.found]
        by_size = sorted(spans, key=lambda s: -(s[0][2] - s[0][1]) if s[0] is not None else 0)
        kept: list[tuple[_Extent | None, str, object]] = []
        for extent, where, value in by_size:
            if extent is not None and any(k is not None and _within(extent, k) for k, _, _ in kept):
                continue
            kept.append((extent, where, value))
        order = {id(value): i for i, (_, value) in enumerate(self.found)}
        return [(where, value) for _, where, value in sorted(kept, key=lambda k: order[id(k[2])])]

    def precision(self) -> Precision | None:
        """The format of the first floating-point array found (else the first array's; None without
        one): with no op, the dtype picks the peak only."""
        arrays = [(where, dtype_of(value)) for where, value in self.found]
        floating = [(where, dtype) for where, dtype in arrays if _floating(dtype)]
        for where, dtype in floating or arrays:
            return argument_precision("auto", where, dtype)
        return None

    def touches_torch(self, torch: Any, fn: object) -> bool:
        """Whether the call is PyTorch's: a module, a function of ``torch``, or tensors among its arrays."""
        tensor = getattr(torch, "Tensor", None)
        if isinstance(tensor, type) and any(isinstance(value, tensor) for _, value in self.found):
            return True
        return bool(self.modules) or str(getattr(fn, "__module__", None) or "").split(".")[0] == "torch"


def _floating(dtype: object) -> bool:
    from ..model.core import parse_dtype

    try:
        precision = parse_dtype(dtype)
    except ValueError:
        return False
    return not precision.integral


def _is_module(value: object) -> bool:
    torch = sys.modules.get("torch")
    module = getattr(getattr(torch, "nn", None), "Module", None)
    return isinstance(module, type) and isinstance(value, module)


#: the bytes an array spans, in its memory: (where it lives, first byte, past the last byte)
_Extent = tuple[Home, int, int]


def _extent(value: object) -> _Extent | None:
    """The bytes ``value`` spans (:meth:`.arrays.Layout.extent`: a strided view, from its lowest
    element to its highest), or None when it cannot be told."""
    layout = layout_of(value)
    span = layout.extent() if layout is not None else None
    return None if span is None else (home_of(value) or Home("host"), *span)


def _within(inner: _Extent, outer: _Extent) -> bool:
    return inner[0] == outer[0] and outer[1] <= inner[1] and inner[2] <= outer[2]


# - whether the call changed an array -


def _on_device(value: object) -> bool:
    home = home_of(value)
    return home is not None and home.kind != "host"


def _fingerprint(value: object) -> object | None:
    """What is compared after the call: a digest of a host array's bytes, a copy of a device array
    made on the device; None when neither can be had (the array's writes are then not known)."""
    try:
        if _on_device(value):
            return _device_copy(value)
        return hashlib.sha1(_host_bytes(value), usedforsecurity=False).digest()
    except Exception:  # each library's own errors (out of memory, an odd dtype): writes not known
        return None


def _same(value: object, before: object) -> bool:
    if isinstance(before, bytes):
        return hashlib.sha1(_host_bytes(value), usedforsecurity=False).digest() == before
    if is_torch(value):
        return bool(sys.modules["torch"].equal(_tensor_bytes(before), _tensor_bytes(value)))
    cupy = sys.modules["cupy"]
    return bool(cupy.array_equal(_cupy_bytes(cupy, before), _cupy_bytes(cupy, value)))


def _host_bytes(value: object) -> Any:
    """A host array's bytes as a flat uint8 NumPy array (a copy only for a strided view)."""
    if is_torch(value):
        return _tensor_bytes(value).numpy()
    import numpy as np

    array = np.ascontiguousarray(np.asarray(value)).reshape(-1)
    return array.view(np.uint8)


def _tensor_bytes(value: Any) -> Any:
    torch = sys.modules["torch"]
    return value.detach().contiguous().reshape(-1).view(torch.uint8)


def _cupy_bytes(cupy: Any, value: Any) -> Any:
    return cupy.ascontiguousarray(value).reshape(-1).view(cupy.uint8)


def _device_copy(value: Any) -> object:
    if is_torch(value):
        return value.detach().clone()
    cupy = sys.modules["cupy"]
    array = value if isinstance(value, cupy.ndarray) else cupy.asarray(value)
    return array.copy()


@contextlib.contextmanager
def _synchronized(arrays: Sequence[tuple[str, object]]) -> Iterator[None]:
    """The devices of ``arrays`` idle before and after: the copies made, the call's work done."""
    devices = [value for _, value in arrays if _on_device(value)]
    _synchronize(devices)
    yield
    _synchronize(devices)


def _synchronize(devices: Sequence[object]) -> None:
    if any(is_torch(v) for v in devices):
        sys.modules["torch"].cuda.synchronize()
    if any(not is_torch(v) for v in devices) and "cupy" in sys.modules:
        sys.modules["cupy"].cuda.Device().synchronize()


@contextlib.contextmanager
def _flop_counter(counting: bool) -> Iterator[Callable[[], int] | None]:
    """``FlopCounterMode`` around the call, for a PyTorch callable; nothing otherwise."""
    if not counting:
        yield None
        return
    import importlib

    # torch is loaded already (the callable is PyTorch's); typed Any, whether or not it is installed
    flop_counter: Any = importlib.import_module("torch.utils.flop_counter")
    counter = flop_counter.FlopCounterMode(display=False)
    with counter:
        yield counter.get_total_flops


@contextlib.contextmanager
def _numpy_counter(counting: bool, args: Sequence[object], kwargs: Mapping[str, object]) -> Iterator[Any]:
    """A count of the NumPy calls made on the call's NumPy arrays (:mod:`.numpy_counter`), for a kernel
    given some; nothing otherwise."""
    if not counting or "numpy" not in sys.modules:  # no NumPy loaded: no NumPy array to count
        yield None
        return
    from . import numpy_counter

    if not any(map(numpy_counter.countable, chain(args, kwargs.values()))):
        yield None
        return
    with numpy_counter.counting(args, kwargs) as run:
        yield run
