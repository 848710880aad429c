"""The arrays in a kernel's call, as rotation (:mod:`.rotation`) finds them, and templates that
rebuild the call around copies of them.

An array is anything that speaks an array protocol (``__array_interface__``,
``__cuda_array_interface__`` or ``__dlpack__``) and has a ``copy`` (NumPy, CuPy) or ``clone``
(PyTorch) method. Arrays are looked for in the positional arguments, ``kwargs``' values and
``functools.partial`` arguments, and inside the tuples, named tuples, lists and dicts there that
hold nothing but arrays and plain values (numbers, strings, None, dtypes): such a container is
rebuilt around each set of copies. A container that holds anything else (an object that may keep
arrays and state of its own) is passed as it is, in every set, and the arrays in it are not copied.

Attributes are read with care: a PyTorch CUDA tensor that requires grad raises RuntimeError, not
AttributeError, from ``__cuda_array_interface__`` (``torch/_tensor.py``), which ``hasattr`` does not
swallow.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidValueError

#: at most this many objects are looked at in a call's arguments: past it (a list of a million
#: floats), the search stops and the kernel is not rotated
MAX_SCANNED = 1 << 16

#: values that are the same in every set, whatever the kernel does with them
_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, slice, range, type(...), type, enum.Enum)
#: (module, class name) of the plain values of NumPy and PyTorch: scalars, dtypes, devices
_PLAIN_MODULES = ("numpy", "numpy.dtypes")
_PLAIN_TORCH = ("dtype", "device", "memory_format", "layout")


def has_attribute(value: object, name: str) -> bool:
    """``hasattr``, but an attribute whose getter raises something else than AttributeError (a torch
    tensor that requires grad, asked for ``__cuda_array_interface__``) is there."""
    try:
        return hasattr(value, name)
    except Exception:  # the getter's own error: the attribute exists, it cannot be read now
        return True


def is_array(value: object) -> bool:
    """An array a copy can be made of: it speaks an array protocol and has ``copy`` or ``clone``."""
    if isinstance(value, type):
        return False
    kind = type(value)
    known = _ARRAY_TYPES[kind] if kind in _ARRAY_TYPES else _array_type(kind)
    if known is not None:
        return known
    speaks = any(has_attribute(value, protocol) for protocol in _PROTOCOLS)  # an instance's own attribute
    return speaks and (callable(getattr(value, "clone", None)) or callable(getattr(value, "copy", None)))


_PROTOCOLS = ("__array_interface__", "__cuda_array_interface__", "__dlpack__")


#: what :func:`_array_type` found, by type
_ARRAY_TYPES: dict[type, bool | None] = {}


def _array_type(kind: type) -> bool | None:
    """Whether instances of ``kind`` are arrays, read from the class (so no getter runs: once per type,
    as a call may pass thousands of arrays); None where an instance may say otherwise."""
    if any(hasattr(kind, protocol) for protocol in _PROTOCOLS) and (
        callable(getattr(kind, "clone", None)) or callable(getattr(kind, "copy", None))
    ):
        known: bool | None = True
    elif getattr(kind, "__dictoffset__", 1) == 0 and not hasattr(kind, "__getattr__"):
        known = False  # no attributes of its own (a number, a string, a slotted class): the class decides
    else:
        known = None
    if len(_ARRAY_TYPES) > 1024:  # types made on the fly (a test's local classes)
        _ARRAY_TYPES.clear()
    _ARRAY_TYPES[kind] = known
    return known


def is_torch(value: object) -> bool:
    """A PyTorch tensor (duck typed: torch may not be installed): ``clone``, ``detach`` and ``stride``."""
    return all(callable(getattr(value, name, None)) for name in ("clone", "detach", "stride"))


def gpu_of(value: object) -> int | None:
    """The index of the CUDA (or ROCm) GPU that holds ``value``'s memory; None for any other memory."""
    device = getattr(value, "device", None)
    kind = getattr(device, "type", None)  # torch: device(type='cuda', index=0)
    if isinstance(kind, str):
        return int(getattr(device, "index", None) or 0) if kind == "cuda" else None
    if has_attribute(value, "__cuda_array_interface__"):  # CuPy: a cupy.cuda.Device, its id
        return int(getattr(device, "id", 0) or 0)
    return None


def nbytes_of(value: object) -> int:
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int) and not isinstance(nbytes, bool):
        return nbytes
    numel, size = getattr(value, "numel", None), getattr(value, "element_size", None)
    if callable(numel) and callable(size):  # torch before nbytes
        return int(numel()) * int(size())
    return 0


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


class Template:
    """Rebuilds one argument with other arrays in place of those found."""

    def build(self, arrays: Sequence[object]) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Slot(Template):
    index: int

    def build(self, arrays: Sequence[object]) -> Any:
        return arrays[self.index]


@dataclass(frozen=True, slots=True)
class Constant(Template):
    value: object

    def build(self, arrays: Sequence[object]) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class Partial(Template):
    func: Template
    args: Template
    keywords: Template

    def build(self, arrays: Sequence[object]) -> Any:
        return functools.partial(
            self.func.build(arrays), *self.args.build(arrays), **self.keywords.build(arrays)
        )


@dataclass(frozen=True, slots=True)
class Items(Template):
    kind: type
    items: list[Template]

    def build(self, arrays: Sequence[object]) -> Any:
        built = [item.build(arrays) for item in self.items]
        return self.kind._make(built) if hasattr(self.kind, "_make") else self.kind(built)


@dataclass(frozen=True, slots=True)
class Entries(Template):
    items: dict[Any, Template]

    def build(self, arrays: Sequence[object]) -> Any:
        return {key: item.build(arrays) for key, item in self.items.items()}


def flat(template: Template) -> bool:
    """An array or a value as it is: nothing to rebuild."""
    return isinstance(template, (Slot, Constant))


@dataclass
class Found:
    """What a search of a call's arguments found: its arrays, each once, and where."""

    arrays: list[object] = field(default_factory=list)
    #: where each array was first found ("argument 0", "kwargs['out']")
    places: list[str] = field(default_factory=list)
    #: the bytes of every place an array is passed, repeats included
    used_bytes: int = 0
    #: where the first tensor with no data is (:func:`check_has_data`)
    meta: str = ""
    #: the lists and dicts rebuilt around the copies, with where they are: a kernel that changes one
    #: would change the copy, not the caller's
    mutable: list[tuple[str, object]] = field(default_factory=list)
    #: containers that hold arrays and other objects, passed as they are (their arrays not copied)
    kept: list[str] = field(default_factory=list)
    #: templates made: the work of rebuilding one set
    nodes: int = 0
    #: objects looked at; past :data:`MAX_SCANNED` the search stopped
    scanned: int = 0
    _index: dict[int, int] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        return self.scanned > MAX_SCANNED

    @property
    def on_device(self) -> bool:
        return any(gpu_of(array) is not None for array in self.arrays)


def scan_call(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None
) -> tuple[Found, Template, Items, Entries]:
    """The arrays in ``fn(*args, **kwargs)`` and templates of the kernel, its arguments and keywords."""
    found = Found()
    scan = _Scanner(found)
    kernel = scan.template(fn, "the kernel")
    positional = Items(tuple, [scan.template(arg, f"argument {i}") for i, arg in enumerate(args)])
    keywords = Entries({k: scan.template(v, f"kwargs[{k!r}]") for k, v in (kwargs or {}).items()})
    return found, kernel, positional, keywords


def check_has_data(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object] | None, *, given_by: str = ""
) -> None:
    """A ValueError naming the argument of ``fn(*args, **kwargs)`` that is a tensor with no data
    (PyTorch's meta device: a shape and a dtype, no storage), found where rotation finds arrays.

    The kernel would compute nothing on it, and be judged faster than light. ``given_by`` names who
    gave the arguments (``setup's ``).
    """
    found, *_ = scan_call(fn, args, kwargs)
    if found.meta:
        raise InvalidValueError(
            f"{given_by}{found.meta} is a tensor on the meta device: it has a shape but no data, so the"
            " kernel would compute nothing and its time would be no time at all; give it a tensor on the"
            " device to measure"
        )


class _Scanner:
    def __init__(self, found: Found) -> None:
        self.found = found

    def template(self, value: object, where: str) -> Template:
        """A template that rebuilds ``value`` with other arrays in place of the ones found."""
        found = self.found
        found.nodes += 1
        if not self._look(value, where):
            return Constant(value)
        if is_array(value):
            found.used_bytes += nbytes_of(value)
            key = id(value)
            if key not in found._index:
                found._index[key] = len(found.arrays)
                found.arrays.append(value)
                found.places.append(where)
            return Slot(found._index[key])
        if isinstance(value, functools.partial):
            args = [
                self.template(a, f"argument {i} of the functools.partial") for i, a in enumerate(value.args)
            ]
            keywords = {
                k: self.template(v, f"keyword {k!r} of the functools.partial")
                for k, v in value.keywords.items()
            }
            return Partial(self.template(value.func, where), Items(tuple, args), Entries(keywords))
        if not _container(value):
            return Constant(value)
        holds, plain = self._contents(value, where)
        if not holds:
            return Constant(value)
        if not plain:
            found.kept.append(f"{where} (a {type(value).__name__} holding other objects)")
            return Constant(value)
        return self._rebuilt(value, where)

    def _rebuilt(self, value: object, where: str) -> Template:
        if isinstance(value, (list, dict)):
            self.found.mutable.append((f"{where} (a {type(value).__name__})", value))
        if isinstance(value, dict):
            return Entries({k: self.template(v, f"{where}[{k!r}]") for k, v in value.items()})
        assert isinstance(value, (tuple, list))
        items = [self.template(item, f"{where}[{i}]") for i, item in enumerate(value)]
        return Items(type(value), items)

    def _look(self, value: object, where: str) -> bool:
        """Count ``value`` as looked at, and note a tensor with no data; False past the limit."""
        found = self.found
        found.scanned += 1
        if found.truncated:
            return False
        # duck typed (torch may not be installed): a torch.Tensor's is_meta, never a mock's attribute
        if not found.meta and not isinstance(value, type) and getattr(value, "is_meta", False) is True:
            found.meta = where or "an argument"
        return True

    def _contents(self, value: object, where: str) -> tuple[bool, bool]:
        """Whether the container ``value`` holds arrays (at any depth), and whether everything else
        in it is a plain value or such a container."""
        assert isinstance(value, (tuple, list, dict))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        holds, plain = False, True
        for key, item in items:
            place = f"{where}[{key!r}]"
            if not self._look(item, place):
                return holds, False
            if is_array(item):
                holds = True
            elif _container(item):
                inner_holds, inner_plain = self._contents(item, place)
                holds, plain = holds or inner_holds, plain and inner_plain
            elif not _plain(item):
                plain = False
        return holds, plain


def _container(value: object) -> bool:
    """A container rotation may rebuild: a tuple, named tuple, list or dict, not a subclass (which may
    need more than its items to be made again)."""
    kind = type(value)
    if kind in (tuple, list, dict):
        return True
    return isinstance(value, tuple) and callable(getattr(kind, "_make", None))


def _plain(value: object) -> bool:
    if isinstance(value, _PLAIN_TYPES):
        return True
    kind = type(value)
    if kind.__module__ in _PLAIN_MODULES:  # a NumPy scalar or dtype (an ndarray is an array)
        return True
    return kind.__module__ == "torch" and kind.__name__ in _PLAIN_TORCH
