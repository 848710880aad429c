"""Tier 2 for NumPy: the calls a kernel makes on its NumPy array arguments, recorded in its one
untimed first call (:func:`counting`) through a thin ``ndarray`` subclass (:class:`Counted`). What
is counted, and what is not seen: docs/usage.md ("Budgets without an op"). Imported only where a
kernel is given a NumPy array (NumPy is loaded already).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.inference import SeenCall


@dataclass(slots=True)
class Counting:
    """One counted run: the arguments to call the kernel with, and what the run showed."""

    args: tuple[object, ...]
    kwargs: dict[str, object]
    calls: list[SeenCall] = field(default_factory=list)
    #: the ``id`` of each argument the kernel was seen to use (in a call, an index, a view of it)
    used: set[int] = field(default_factory=set)
    #: how many recorded calls are under way: inside one, nothing more is recorded
    depth: int = 0


#: the run being counted (one at a time: the first call of one kernel)
_RUNS: list[Counting] = []


def _active() -> Counting | None:
    """The run counting now, outside any call it recorded; None otherwise."""
    run = _RUNS[-1] if _RUNS else None
    return run if run is not None and not run.depth else None


@contextlib.contextmanager
def counting(args: Sequence[object], kwargs: Mapping[str, object]) -> Iterator[Counting]:
    """A run with each plain NumPy array among ``args`` and ``kwargs``' values counted."""
    run = Counting(tuple(map(_counted_argument, args)), {k: _counted_argument(v) for k, v in kwargs.items()})
    _RUNS.append(run)
    try:
        yield run
    finally:
        _RUNS.remove(run)


def countable(value: object) -> bool:
    """A plain host NumPy array (a subclass of its own, ``np.matrix`` or a memmap, is left alone)."""
    return type(value) is np.ndarray


def plain(value: object) -> Any:
    """``value`` with each counted array in it (inside tuples, lists and dicts) a plain view."""
    if isinstance(value, Counted):
        return value.view(np.ndarray)
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _counted_argument(value: object) -> object:
    if not countable(value):
        return value
    view = value.view(Counted)  # type: ignore[attr-defined]
    view.root = id(value)
    return view


def _wrap(value: object) -> Any:
    """What a recorded call made, counted while a run is (a tuple's items each); as it is otherwise."""
    if not _RUNS:
        return value
    if type(value) is np.ndarray:
        return value.view(Counted)
    if type(value) is tuple:
        return tuple(_wrap(v) for v in value)
    return value


def _use(run: Counting, values: Sequence[object]) -> None:
    """Mark the arguments ``values`` (and what lies inside tuples and lists there) stem from as used."""
    for value in values:
        if isinstance(value, Counted) and value.root is not None:
            run.used.add(value.root)
        elif isinstance(value, (tuple, list)):
            _use(run, value)


def _call(
    name: str,
    fn: Callable[..., Any],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    priced: tuple[object, Mapping[str, object]] | None = None,
) -> Any:
    """Record ``name``, priced as ``fn`` (or ``priced``: another function, its keywords) given the same
    arguments, then make the call on plain arrays with recording off."""
    run = _active()
    plain_args, plain_kwargs = plain(tuple(args)), plain(dict(kwargs))
    if run is None:
        return fn(*plain_args, **plain_kwargs)
    what, keywords = priced if priced is not None else (fn, kwargs)
    _use(run, (*args, *kwargs.values()))
    seen_kwargs = plain(dict(keywords))
    if isinstance(out := seen_kwargs.get("out"), tuple) and len(out) == 1:
        seen_kwargs["out"] = out[0]  # a ufunc's out of one array as that array: how the catalogue reads it
    run.calls.append(SeenCall(name, what, plain_args, seen_kwargs))
    run.depth += 1
    try:
        return fn(*plain_args, **plain_kwargs)
    finally:
        run.depth -= 1


def _returned(result: object, kwargs: Mapping[str, object]) -> Any:
    """What a call returns: ``out=`` as given (the caller's arrays, counted), else what it made."""
    out = kwargs.get("out")
    if out is None or (isinstance(out, tuple) and any(o is None for o in out)):
        return _wrap(result)
    return out[0] if isinstance(out, tuple) and len(out) == 1 else out


#: a ufunc's reduction as the catalogue's function of it (``np.add.reduce`` is a ``sum`` over axis 0)
_REDUCES = {"add": "sum", "maximum": "max", "minimum": "min"}


def _method(name: str) -> Callable[..., Any]:
    """An array method that computes, recorded as a call of the plain array's own method."""

    def method(self: Counted, *args: Any, **kwargs: Any) -> Any:
        run = _active()
        if run is not None:
            _use(run, (self,))
        bound = getattr(self.view(np.ndarray), name)
        return _returned(_call(f".{name}()", bound, args, kwargs), kwargs)

    method.__name__ = name
    return method


class Counted(np.ndarray[Any, Any]):
    """A NumPy array whose calls (``__array_ufunc__``, ``__array_function__``, the computing
    methods) are recorded while a run is counted (:class:`~pytest_roofline.model.inference.SeenCall`),
    then made on plain arrays, nested calls unrecorded. A new array it makes comes back counted, an
    ``out=`` as given; outside a count it records nothing and returns plain arrays."""

    #: the ``id`` of the argument this is, or a view of; None for an array a call made
    root: int | None = None

    def __array_finalize__(self, obj: object) -> None:
        self.root = getattr(obj, "root", None)
        run = _active()
        if run is not None and self.root is not None:  # a view, a slice, a copy of it: used
            run.used.add(self.root)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        priced: tuple[object, Mapping[str, object]] = (ufunc, kwargs)
        if method == "reduce" and ufunc.__name__ in _REDUCES:  # its axis given: reduce's default is 0
            priced = (getattr(np, _REDUCES[ufunc.__name__]), {"axis": 0, **kwargs})
        elif method != "__call__":  # accumulate, outer, at: no price, so the count is unknown
            priced = (getattr(ufunc, method), kwargs)
        result = _call(name, getattr(ufunc, method), inputs, kwargs, priced)
        return None if method == "at" else _returned(result, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        module = str(getattr(func, "__module__", None) or "numpy").replace("numpy", "np", 1)
        result = _call(f"{module}.{func.__name__}", func, args, kwargs)
        return _returned(result, kwargs)

    def __getitem__(self, key: Any) -> Any:
        run = _active()
        if run is not None:  # an index array is used, and the array indexed (a view of it, below)
            _use(run, (self, key))
        return super().__getitem__(plain(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        run = _active()
        if run is not None:
            _use(run, (self, key, value))
        super().__setitem__(plain(key), plain(value))

    # the methods that compute without passing through the protocols above (or through them several
    # times): each one call; those the catalogue cannot price make the count unknown, not short
    sum = _method("sum")
    max = _method("max")
    min = _method("min")
    mean = _method("mean")
    dot = _method("dot")
    prod = _method("prod")
    std = _method("std")
    var = _method("var")
    cumsum = _method("cumsum")
    cumprod = _method("cumprod")
    argmax = _method("argmax")
    argmin = _method("argmin")
    all = _method("all")
    any = _method("any")
    sort = _method("sort")
    argsort = _method("argsort")
    partition = _method("partition")
    trace = _method("trace")
    round = _method("round")
    clip = _method("clip")
