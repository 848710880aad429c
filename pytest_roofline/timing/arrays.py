"""The arrays in a kernel's call, and where each one lives: the host, a GPU, or another device.

:func:`arguments_of_call` walks what ``fn(*args, **kwargs)`` is given, as rotation looks for arrays
(:mod:`.rotation`): the positional arguments, ``kwargs``' values, a ``functools.partial``'s
arguments (the kernel's own, or one passed as an argument), inside tuples, named tuples, lists and
dicts there; and the object a bound method belongs to (``x.sum``: ``x``). :func:`placement_of`
says where the arrays among them live, which decides the device a kernel is timed on under
``--roofline-device auto`` (``plugin/placement.py``).

Where an array lives is read from what the frameworks say of it, without importing any of them:

- a PyTorch tensor's ``device`` (``device.type``: ``cpu``, ``cuda`` (ROCm's too), ``mps``, ...;
  ``device.index``), read before anything else: its ``__cuda_array_interface__`` raises for a
  tensor that requires grad, and its ``__dlpack_device__`` asks whether a CPU tensor is pinned;
- NumPy 2's ``device``, the string ``"cpu"`` (the array API's);
- ``__dlpack_device__()``, the DLPack protocol's ``(device type, device id)`` (CuPy, JAX, NumPy
  before 2): CPU and pinned host memory are the host; CUDA, ROCm and CUDA managed memory a GPU;
- CuPy's ``device.id``, where ``__dlpack_device__`` is missing;
- ``__cuda_array_interface__``: a GPU whose index the protocol does not say;
- ``__array_interface__``, ``__array__`` or the buffer protocol (``bytes``, ``bytearray``,
  ``memoryview``, ``array.array``): the host.

A host value of no dimensions (a NumPy scalar, a 0-d array) is a parameter, not data: it says
nothing of where the kernel runs. Nothing here imports NumPy, CuPy or PyTorch.
"""

from __future__ import annotations

import array
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Home", "Placement", "arguments_of_call", "home_of", "placement_of"]

#: DLPack's ``DLDeviceType`` values (dlpack.h): host memory, and a GPU's
_DLPACK_HOST = {1: "cpu", 3: "cuda host", 11: "rocm host"}
_DLPACK_GPU = {2: "cuda", 10: "rocm", 13: "cuda managed"}


@dataclass(frozen=True, slots=True)
class Home:
    """Where one array lives."""

    kind: Literal["host", "gpu", "other"]
    #: a GPU's index, as this process numbers its GPUs; None when the array does not say
    index: int | None = None
    #: another device's name (``mps``, ``xpu:0``, a DLPack device type)
    name: str = ""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the arrays of one call live: each place, with where the first array found there is."""

    #: where the first host array is (``argument 1``), "" when there is none
    host: str = ""
    #: GPU index (None: a GPU that did not say which) -> where the first array on it is
    gpus: Mapping[int | None, str] = field(default_factory=dict)
    #: another device's name -> where the first array on it is
    other: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_arrays(self) -> bool:
        return bool(self.host or self.gpus or self.other)


def placement_of(fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None) -> Placement:
    """Where the arrays of ``fn(*args, **kwargs)`` live (:func:`arguments_of_call` finds them)."""
    host = ""
    gpus: dict[int | None, str] = {}
    other: dict[str, str] = {}
    for where, value in arguments_of_call(fn, args, kwargs):
        home = home_of(value)
        if home is None:
            continue
        if home.kind == "host":
            host = host or where
        elif home.kind == "gpu":
            gpus.setdefault(home.index, where)
        else:
            other.setdefault(home.name, where)
    return Placement(host=host, gpus=gpus, other=other)


def arguments_of_call(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None
) -> Iterator[tuple[str, object]]:
    """Every value ``fn(*args, **kwargs)`` is given, with where it is (``argument 0``,
    ``kwargs['x']``, ``argument 1[0]``, ``argument 0 of the functools.partial``, ``the kernel's
    object`` for a bound method's), containers opened as rotation opens them."""
    yield from _walk(fn, "the kernel", kernel=True)
    for i, arg in enumerate(args):
        yield from _walk(arg, f"argument {i}")
    for key, value in (kwargs or {}).items():
        yield from _walk(value, f"kwargs[{key!r}]")


def _walk(value: object, where: str, *, kernel: bool = False) -> Iterator[tuple[str, object]]:
    if isinstance(value, functools.partial):
        yield from _walk(value.func, where, kernel=kernel)
        for i, arg in enumerate(value.args):
            yield from _walk(arg, f"argument {i} of the functools.partial")
        for key, item in value.keywords.items():
            yield from _walk(item, f"keyword {key!r} of the functools.partial")
        return
    if kernel:  # the kernel itself is no array; a bound method's object may be one (``x.sum``)
        owner = getattr(value, "__self__", None)
        if owner is not None and not isinstance(owner, type):
            yield "the kernel's object", owner
        return
    if type(value) in (tuple, list) or _is_namedtuple(value):
        for i, item in enumerate(value):  # type: ignore[arg-type]
            yield from _walk(item, f"{where}[{i}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            yield from _walk(item, f"{where}[{key!r}]")
        return
    yield where, value


def _is_namedtuple(value: object) -> bool:
    return isinstance(value, tuple) and callable(getattr(type(value), "_make", None))


def home_of(value: object) -> Home | None:
    """Where ``value`` lives when it is an array; None for anything else (a scalar, a string, a
    host array of no dimensions, a tensor on PyTorch's meta device)."""
    if isinstance(value, (type, str)):
        return None
    home = _framework_home(value)
    if home is None and _is_host_buffer(value):
        home = Home("host")
    if home is not None and home.kind == "host" and _attribute(value, "ndim") == 0:
        return None  # a scalar parameter
    return home


def _framework_home(value: object) -> Home | None:
    """What the array's framework says of where it lives, in the order the module docstring gives."""
    device = _attribute(value, "device")
    kind = _attribute(device, "type") if device is not None else None
    if isinstance(kind, str) and _speaks_array(value):  # PyTorch
        index = _attribute(device, "index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else None
        if kind == "cpu":
            return Home("host")
        if kind == "cuda":
            return Home("gpu", index)
        if kind == "meta":  # no data: the measurement refuses it (rotation.check_has_data)
            return None
        return Home("other", index, kind if index is None else f"{kind}:{index}")
    if device == "cpu" and _speaks_array(value):  # NumPy 2, the array API's name for the host
        return Home("host")
    dlpack = _dlpack_device(value)
    if dlpack is not None:
        kind_code, index = dlpack
        if kind_code in _DLPACK_HOST:
            return Home("host")
        if kind_code in _DLPACK_GPU:
            return Home("gpu", index)
        return Home("other", index, f"DLPack device type {kind_code}")
    ident = _attribute(device, "id") if device is not None else None
    if isinstance(ident, int) and not isinstance(ident, bool) and _speaks_array(value):  # CuPy
        return Home("gpu", ident)
    if _has(value, "__cuda_array_interface__"):
        return Home("gpu")
    return None


def _dlpack_device(value: object) -> tuple[int, int] | None:
    method = _attribute(value, "__dlpack_device__")
    if not callable(method):
        return None
    try:
        kind, index = method()
        return int(kind), int(index)
    except Exception:  # a framework's own error, or an answer of another shape: it says nothing
        return None


def _speaks_array(value: object) -> bool:
    return (
        _has(value, "__dlpack__")
        or _has(value, "__array_interface__")
        or _has(value, "__array__")
        or _has(value, "__cuda_array_interface__")
    )


def _is_host_buffer(value: object) -> bool:
    if isinstance(value, (bytes, bytearray, memoryview, array.array)):
        return True
    return _has(value, "__array_interface__") or _has(value, "__array__") or _has(type(value), "__buffer__")


def _attribute(value: object, name: str) -> object:
    """``getattr(value, name, None)``, None too when reading it raises (a property that refuses)."""
    try:
        return getattr(value, name, None)
    except Exception:  # e.g. PyTorch's __cuda_array_interface__ of a tensor that requires grad
        return None


def _has(value: object, name: str) -> bool:
    return _attribute(value, name) is not None
