"""The arrays in a kernel's call, as rotation (:mod:`.rotation`) finds them, and templates that
rebuild the call around copies of them. What an array is, and which containers are searched (to
:data:`.arrays.MAX_DEPTH`), is :mod:`.arrays`'s answer; which arrays are copied, and which
containers are passed as they are: docs/cache.md ("Rotation").
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidValueError
from .arrays import MAX_DEPTH, gpu_of, is_array, is_container, items_of, nbytes_of

#: at most this many objects are looked at in a call's arguments: past it (a list of a million
#: floats), the search stops and the kernel is not rotated
MAX_SCANNED = 1 << 16

#: values that are the same in every set, whatever the kernel does with them
_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes, slice, range, type(...), type, enum.Enum)
#: (module, class name) of the plain values of NumPy and PyTorch: scalars, dtypes, devices
_PLAIN_MODULES = ("numpy", "numpy.dtypes")
_PLAIN_TORCH = ("dtype", "device", "memory_format", "layout")


def copyable(value: object) -> bool:
    """An array (:func:`.arrays.is_array`) a copy can be made of: it has ``copy`` or ``clone``."""
    return is_array(value) and (
        callable(getattr(value, "clone", None)) or callable(getattr(value, "copy", None))
    )


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
class Fields(Template):
    """A dataclass instance rebuilt with its fields' templates: a shallow copy of it, each field set
    in place (its ``__init__`` and ``__post_init__`` not run again, its other attributes kept)."""

    original: object
    fields: dict[str, Template]

    def build(self, arrays: Sequence[object]) -> Any:
        built = copy.copy(self.original)
        for name, item in self.fields.items():
            object.__setattr__(built, name, item.build(arrays))  # a frozen dataclass's way too
        return built


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
    #: the lists, dicts and mutable dataclasses rebuilt around the copies, with where they are: a
    #: kernel that changes one would change the copy, not the caller's
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
    (PyTorch's meta device: a shape and a dtype, no storage), found where rotation finds arrays
    (docs/cache.md, "When rotation cannot apply"). ``given_by`` names who gave the arguments
    (``setup's ``).
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
        if copyable(value):
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
        if not rotated_container(value):
            return Constant(value)
        holds, plain = self._contents(value, where, depth=1)
        if not holds:
            return Constant(value)
        if not plain:
            found.kept.append(f"{where} (a {type(value).__name__} holding other objects)")
            return Constant(value)
        return self._rebuilt(value, where)

    def _rebuilt(self, value: object, where: str) -> Template:
        if isinstance(value, (list, dict)) or _mutable_dataclass(value):
            self.found.mutable.append((f"{where} (a {type(value).__name__})", value))
        if _dataclass(value):
            fields = {
                str(name): self.template(item, _place(where, name, value)) for name, item in contents(value)
            }
            return Fields(value, fields)
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

    def _contents(self, value: object, where: str, *, depth: int) -> tuple[bool, bool]:
        """Whether the container ``value`` holds arrays (at any depth), and whether everything else
        in it is a plain value or such a container (one nested past :data:`.arrays.MAX_DEPTH` is not)."""
        holds, plain = False, depth <= MAX_DEPTH
        for key, item in contents(value) if plain else ():
            place = _place(where, key, value)
            if not self._look(item, place):
                return holds, False
            if copyable(item):
                holds = True
            elif rotated_container(item):
                inner_holds, inner_plain = self._contents(item, place, depth=depth + 1)
                holds, plain = holds or inner_holds, plain and inner_plain
            elif not _plain(item):
                plain = False
        return holds, plain


def rotated_container(value: object) -> bool:
    """A container rotation rebuilds around each set: one :func:`.arrays.is_container` names, or a
    dataclass instance (a model's weights)."""
    return is_container(value) or _dataclass(value)


def contents(value: object) -> Iterable[tuple[object, object]]:
    """A rotated container's items, each with its key: an index, a dict's key, a field's name."""
    if not _dataclass(value):
        return items_of(value)
    fields = dataclasses.fields(value)  # type: ignore[arg-type]
    return ((f.name, getattr(value, f.name)) for f in fields if hasattr(value, f.name))  # set ones alone


def _dataclass(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _mutable_dataclass(value: object) -> bool:
    params = getattr(type(value), "__dataclass_params__", None)
    return _dataclass(value) and not getattr(params, "frozen", True)


def _place(where: str, key: object, container: object) -> str:
    return f"{where}.{key}" if _dataclass(container) else f"{where}[{key!r}]"


def _plain(value: object) -> bool:
    if isinstance(value, _PLAIN_TYPES):
        return True
    kind = type(value)
    if kind.__module__ in _PLAIN_MODULES:  # a NumPy scalar or dtype (an ndarray is an array)
        return True
    return kind.__module__ == "torch" and kind.__name__ in _PLAIN_TORCH
