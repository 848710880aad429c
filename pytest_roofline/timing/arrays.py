"""What an array is, how many bytes it holds, where they lie and on which device, for every part
of the package that looks at a kernel's arguments (docs/development.md, "What the package counts as
an array"). Nothing here imports NumPy, CuPy or PyTorch.
"""

from __future__ import annotations

import array
import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Home", "Placement", "arguments_of_call", "home_of", "placement_of"]

#: the protocols an array speaks
PROTOCOLS = ("__array_interface__", "__cuda_array_interface__", "__dlpack__")
#: how deep containers are opened: deeper than any real argument, and the end of a list that holds itself
MAX_DEPTH = 8

#: DLPack's ``DLDeviceType`` values (dlpack.h): host memory, and a GPU's
_DLPACK_HOST = {1: "cpu", 3: "cuda host", 11: "rocm host"}
_DLPACK_GPU = {2: "cuda", 10: "rocm", 13: "cuda managed"}


# -- one value ---------------------------------------------------------------------------------------


def has_attribute(value: object, name: str) -> bool:
    """``hasattr``, but an attribute whose getter raises something else than AttributeError (a torch
    tensor that requires grad, asked for ``__cuda_array_interface__``) is there."""
    try:
        return hasattr(value, name)
    except Exception:  # the getter's own error: the attribute exists, it cannot be read now
        return True


def is_array(value: object) -> bool:
    """An array, as the module says: it speaks an array protocol, and is no library scalar."""
    if isinstance(value, type):
        return False
    kind = type(value)
    known = _ARRAY_TYPES[kind] if kind in _ARRAY_TYPES else _array_type(kind)
    if known is None:  # an instance may speak a protocol its class does not
        known = any(has_attribute(value, protocol) for protocol in PROTOCOLS)
    return known and not _scalar(value)


#: what :func:`_array_type` found, by type
_ARRAY_TYPES: dict[type, bool | None] = {}


def _array_type(kind: type) -> bool | None:
    """Whether instances of ``kind`` speak an array protocol, read from the class (so no getter runs:
    once per type, as a call may pass thousands of arrays); None where an instance may say otherwise."""
    if any(hasattr(kind, protocol) for protocol in PROTOCOLS):
        known: bool | None = True
    elif getattr(kind, "__dictoffset__", 1) == 0 and not hasattr(kind, "__getattr__"):
        known = False  # no attributes of its own (a number, a string, a slotted class): the class decides
    else:
        known = None
    if len(_ARRAY_TYPES) > 1024:  # types made on the fly (a test's local classes)
        _ARRAY_TYPES.clear()
    _ARRAY_TYPES[kind] = known
    return known


def _scalar(value: object) -> bool:
    """A library's scalar: no dimensions, and no item assignment (a 0-d array has it)."""
    return not callable(getattr(type(value), "__setitem__", None)) and _attribute(value, "shape") == ()


def is_torch(value: object) -> bool:
    """A PyTorch tensor (duck typed: torch may not be installed): ``clone``, ``detach`` and ``stride``."""
    return all(callable(getattr(value, name, None)) for name in ("clone", "detach", "stride"))


def nbytes_of(value: object) -> int:
    """The bytes an array holds (0 where it does not say)."""
    nbytes = _attribute(value, "nbytes")
    if isinstance(nbytes, int) and not isinstance(nbytes, bool):
        return nbytes
    numel, size = _attribute(value, "numel"), _attribute(value, "element_size")
    if callable(numel) and callable(size):  # torch before nbytes
        return int(numel()) * int(size())
    return 0


def dtype_of(value: object) -> object:
    """A value's ``dtype`` (None where it has none, and for a class: a NumPy scalar type's is no format)."""
    return None if isinstance(value, type) else _attribute(value, "dtype")


@dataclass(frozen=True, slots=True)
class Home:
    """Where one array lives."""

    kind: Literal["host", "gpu", "other"]
    #: a GPU's index, as this process numbers its GPUs; None when the array does not say
    index: int | None = None
    #: another device's name (``mps``, ``xpu:0``, a DLPack device type)
    name: str = ""


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


def gpu_of(value: object) -> int | None:
    """The index of the GPU that holds ``value`` (0 where it does not say which); None for anything
    that lives elsewhere."""
    home = home_of(value)
    return (home.index or 0) if home is not None and home.kind == "gpu" else None


def _framework_home(value: object) -> Home | None:
    """What the array's framework says of where it lives: PyTorch's, NumPy 2's, DLPack's or CuPy's device."""
    device = _attribute(value, "device")
    kind = _attribute(device, "type") if device is not None else None
    if isinstance(kind, str) and _holds_data(value):  # PyTorch
        index = _attribute(device, "index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else None
        if kind == "cpu":
            return Home("host")
        if kind == "cuda":
            return Home("gpu", index)
        if kind == "meta":  # no data: the measurement refuses it (arguments.check_has_data)
            return None
        return Home("other", index, kind if index is None else f"{kind}:{index}")
    if device == "cpu" and _holds_data(value):  # NumPy 2, the array API's name for the host
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
    if isinstance(ident, int) and not isinstance(ident, bool) and _holds_data(value):  # CuPy
        return Home("gpu", ident)
    if has_attribute(value, "__cuda_array_interface__"):
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


def _holds_data(value: object) -> bool:
    """An array protocol, or NumPy's ``__array__``: what says a ``device`` is an array's."""
    return any(has_attribute(value, protocol) for protocol in PROTOCOLS) or has_attribute(value, "__array__")


def _is_host_buffer(value: object) -> bool:
    if isinstance(value, (bytes, bytearray, memoryview, array.array)):
        return True
    return (
        has_attribute(value, "__array_interface__")
        or has_attribute(value, "__array__")
        or has_attribute(type(value), "__buffer__")
    )


def _attribute(value: object, name: str) -> object:
    """``getattr(value, name, None)``, None too when reading it raises (a property that refuses)."""
    try:
        return getattr(value, name, None)
    except Exception:  # e.g. PyTorch's __cuda_array_interface__ of a tensor that requires grad
        return None


# -- where an array's bytes lie ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    """Where an array's elements lie: its first element's address, shape, strides and item size
    (strides and item size in one unit: bytes, or elements for PyTorch)."""

    address: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    #: bytes a stride unit spans (1, or the element size for PyTorch)
    unit: int = 1

    @property
    def dense(self) -> bool:
        """Every element side by side with no gap and none twice, in any axis order (C, Fortran,
        ``channels_last``): a copy laid out alike is the same walk through memory."""
        expected = self.itemsize
        for size, stride in sorted(
            ((n, s) for n, s in zip(self.shape, self.strides, strict=True) if n != 1), key=lambda d: d[1]
        ):
            if stride != expected:
                return False
            expected *= size
        return True

    def extent(self) -> tuple[int, int] | None:
        """The bytes ``[low, high)`` from the lowest element to the end of the highest; None when empty."""
        low = high = self.address
        for size, stride in zip(self.shape, self.strides, strict=True):
            if size == 0:
                return None
            step = (size - 1) * stride * self.unit
            if step > 0:
                high += step
            else:
                low += step
        return low, high + self.itemsize * self.unit


def layout_of(value: object) -> Layout | None:
    """``value``'s layout, from the protocol its kind speaks best; None when it cannot be told."""
    try:
        if is_torch(value):
            size = int(value.element_size())  # type: ignore[attr-defined]
            shape = tuple(int(n) for n in value.shape)  # type: ignore[attr-defined]
            steps = tuple(int(s) for s in value.stride())  # type: ignore[attr-defined]
            return Layout(int(value.data_ptr()), shape, steps, 1, unit=size)  # type: ignore[attr-defined]
        described = getattr(value, "__array_interface__", None)
        if not isinstance(described, Mapping):
            described = getattr(value, "__cuda_array_interface__", None)
        if not isinstance(described, Mapping):
            return None
        shape = tuple(int(n) for n in described["shape"])
        itemsize = int(str(described["typestr"])[2:])
        given = described.get("strides")  # None: C order
        strides = c_strides(shape, itemsize) if given is None else tuple(int(s) for s in given)
        address = described["data"][0] if described.get("data") else 0
        if not address:  # no memory to tell (an empty array), or a protocol without the address
            return None
        return Layout(int(address), shape, strides, itemsize)
    except Exception:  # a foreign array's protocol that does not read as documented
        return None


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The strides of ``shape`` laid out in C order."""
    strides: list[int] = []
    step = itemsize
    for size in reversed(shape):
        strides.insert(0, step)
        step *= size
    return tuple(strides)


# -- a call's arguments --------------------------------------------------------------------------------


def is_container(value: object) -> bool:
    """A container whose items are a call's arguments too: a tuple, named tuple, list or dict, not
    another subclass (which may hold more than its items)."""
    kind = type(value)
    if kind in (tuple, list, dict):
        return True
    return isinstance(value, tuple) and callable(getattr(kind, "_make", None))


def items_of(value: object) -> Iterable[tuple[object, object]]:
    """A container's items, each with its key (an index, or a dict's key)."""
    assert isinstance(value, (tuple, list, dict))
    return value.items() if isinstance(value, dict) else enumerate(value)


def arguments_of_call(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None
) -> Iterator[tuple[str, object]]:
    """Every value ``fn(*args, **kwargs)`` is given, with where it is (``argument 0``,
    ``kwargs['x']``, ``argument 1[0]``, ``argument 0 of the functools.partial``, ``the kernel's
    object`` for a bound method's): the kernel's own (:func:`arguments_of_kernel`), then the call's
    (:func:`arguments_given`)."""
    yield from arguments_of_kernel(fn)
    yield from arguments_given(args, kwargs)


def arguments_given(
    args: Sequence[object], kwargs: Mapping[str, object] | None
) -> Iterator[tuple[str, object]]:
    """The values of the positional arguments and ``kwargs``, containers and partials opened."""
    for i, arg in enumerate(args):
        yield from walk(arg, f"argument {i}")
    for key, value in (kwargs or {}).items():
        yield from walk(value, f"kwargs[{key!r}]")


def arguments_of_kernel(fn: object) -> Iterator[tuple[str, object]]:
    """What the kernel holds of its own arguments: a ``functools.partial``'s, and the object a bound
    method belongs to (``x.sum``: ``x``); the kernel itself is no argument."""
    while isinstance(fn, functools.partial):
        yield from _partial_arguments(fn, 0)
        fn = fn.func
    owner = _attribute(fn, "__self__")
    if owner is not None and not isinstance(owner, type):
        yield "the kernel's object", owner


def walk(value: object, where: str, depth: int = 0) -> Iterator[tuple[str, object]]:
    """``value``, with the items of a container (:func:`is_container`) and the arguments and function
    of a ``functools.partial`` in its place, to :data:`MAX_DEPTH` levels."""
    if depth < MAX_DEPTH and isinstance(value, functools.partial):
        yield from walk(value.func, where, depth + 1)
        yield from _partial_arguments(value, depth + 1)
    elif depth < MAX_DEPTH and is_container(value):
        for key, item in items_of(value):
            yield from walk(item, f"{where}[{key!r}]", depth + 1)
    else:
        yield where, value


def _partial_arguments(partial: functools.partial[object], depth: int) -> Iterator[tuple[str, object]]:
    for i, arg in enumerate(partial.args):
        yield from walk(arg, f"argument {i} of the functools.partial", depth)
    for key, item in partial.keywords.items():
        yield from walk(item, f"keyword {key!r} of the functools.partial", depth)


# -- where a call's arrays live ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the arrays of one call live: each place, with where the first array found there is."""

    #: where the first host array is (``argument 1``), "" when there is none
    host: str = ""
    #: GPU index (None: a GPU that did not say which) -> where the first array on it is
    gpus: Mapping[int | None, str] = field(default_factory=dict)
    #: another device's name -> where the first array on it is
    other: Mapping[str, str] = field(default_factory=dict)


def placement_of(fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None) -> Placement:
    """Where the arrays of ``fn(*args, **kwargs)`` live (:func:`arguments_of_call` finds them), which
    decides the device a kernel is timed on under ``--roofline-device auto`` (``plugin/placement.py``)."""
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
