"""What one ``roofline(...)`` call asks for: the kernel, and the request resolved through the
precedence chain (the call > the marker > parametrize values > the session's settings)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import InvalidValueError
from .marker import (
    FIXTURE,
    KEYWORDS,
    MARKER,
    MarkerArgs,
    check_keywords,
    check_op_params,
    op_params,
    parametrize_values,
    read_marker,
)
from .placement import place

if TYPE_CHECKING:
    from ..model.policy import Policy
    from .options import SessionSettings

#: the test's markers, read and checked at setup
MARKER_KEY = pytest.StashKey["MarkerArgs | None"]()


@dataclass(frozen=True, slots=True)
class KernelCall:
    """What a ``roofline(...)`` call runs: the kernel, its arguments and keywords, and its setup."""

    fn: Callable[..., object]
    args: tuple[object, ...] = ()
    kwargs: Mapping[str, object] | None = None
    setup: Callable[[], object] | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """Everything one measurement needs, resolved through the precedence chain."""

    op: str
    params: dict[str, Any]
    dtype: object
    math: str | None
    min_fraction: float
    device_spec: str
    policy: Policy
    name: str
    #: the CUDA stream to time on (None: the framework's current one)
    stream: object = None
    #: ``cold`` (the data out of the cache, the floor's assumption) or ``warm`` (judged against the
    #: cache level that holds the op's bytes)
    cache: str = "cold"
    #: the CUDA blocking kernel for this measurement: auto, on, off (None: the session's setting)
    block: str | None = None
    #: what chose ``device_spec`` (:data:`.placement.DEVICE_FROM`): the kernel's arrays, the session
    #: (no arrays), ``--roofline-device`` or ``device=``
    device_from: str = "session"


def policy_for(settings: SessionSettings, keywords: Mapping[str, Any]) -> Policy:
    """The measurement policy: the call's and the marker's keywords over the session's settings."""
    from ..model.policy import Policy

    s = settings
    return Policy(
        stat=keywords.get("stat", s.stat),
        max_time_s=float(keywords.get("max_time", s.max_time)),
        flush=cache_of(settings, keywords) == "cold",
    )


def cache_of(settings: SessionSettings, keywords: Mapping[str, Any]) -> str:
    """``cold`` or ``warm``: the call's or the marker's ``cache=`` (or its old spelling ``flush=``)
    over the session's ``--roofline-cache``."""
    if "cache" in keywords:
        return str(keywords["cache"])
    if "flush" in keywords:
        return "cold" if keywords["flush"] else "warm"
    return settings.cache


def resolve(
    item: pytest.Item,
    call: Mapping[str, Any],
    kernel: KernelCall | None,
    *,
    settings: SessionSettings,
    session_spec: Callable[[], str],
) -> Request:
    """Call keywords over the marker over parametrize values over session settings; a dtype given
    nowhere is read from the ``kernel``'s arguments (:func:`_dtype_of_arguments`).

    Raises ValueError (OpError, DeviceError) naming the parameter and the value.
    """
    # (a session made by a fixture a test requested dynamically did not set its test up)
    marker = (item.stash[MARKER_KEY] if MARKER_KEY in item.stash else read_marker(item)) or MarkerArgs()
    call = dict(call)
    op = call.pop("op", None) or marker.op
    name = check_name(call.pop("name", None))
    if op is None:
        raise InvalidValueError(
            f"no op: pass op=... to {FIXTURE}(...) or mark the test with "
            f"@pytest.mark.{MARKER}(op, ...) (`roofline ops` lists them)"
        )
    from ..model.ops import get_op
    from ..model.verdict import check_fraction

    parametrized = parametrize_values(item)
    params = op_params(get_op(op), parametrized)
    if op == marker.op:
        params.update(marker.params)
    keywords = dict(marker.keywords)
    keywords.update({k: call.pop(k) for k in KEYWORDS if k in call})
    params.update(call)
    # here too for mode off, which estimates nothing; before the dtype, which a kernel's keyword
    # passed as an op parameter (out=...) would otherwise hide
    check_op_params(op, params, complete=True, kernel_keywords=kernel is not None)
    dtype = keywords.get("dtype", parametrized.get("dtype"))
    if dtype is None:
        dtype = dtype_of_arguments(op, kernel)
    check_keywords({**keywords, "dtype": dtype})
    min_fraction = check_fraction(keywords.get("min_fraction", settings.min_fraction))
    placement = None
    if kernel is not None:
        from ..timing.arrays import placement_of

        placement = placement_of(kernel.fn, kernel.args, kernel.kwargs)
    device_spec, device_from = place(
        placement, keyword=keywords.get("device"), setting=settings.device,
        origin=settings.origins.get("device", "--roofline-device"), session_spec=session_spec,
    )  # fmt: skip
    return Request(
        op=op,
        params=params,
        dtype=dtype,
        math=keywords.get("math"),
        min_fraction=min_fraction,
        device_spec=device_spec,
        policy=policy_for(settings, keywords),
        name=name,
        stream=keywords.get("stream"),
        cache=cache_of(settings, keywords),
        block=keywords.get("block"),
        device_from=device_from,
    )


def given(call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if v is not None}


def dtype_of_arguments(op: str, kernel: KernelCall | None) -> object:
    """The dtype of the first argument that has one, when neither the marker nor the call gives it:
    the positional arguments, then ``kwargs``' values, then a ``functools.partial``'s (the kernel
    itself, or a partial inside it)."""
    from ..model.core import parse_dtype

    for where, arg in arguments_of(kernel):
        dtype = getattr(arg, "dtype", None)
        if dtype is not None:
            try:
                precision = parse_dtype(dtype)
            except ValueError as exc:
                raise InvalidValueError(
                    f"{op}: no dtype was given, and {where} has dtype {dtype}, which is not one: {exc}; "
                    "pass dtype=... to the marker or the call"
                ) from None
            if precision.itemsize < 1:  # ml_dtypes' int4 and float4 take a byte per value
                raise InvalidValueError(
                    f"{op}: no dtype was given, and {where} has dtype {dtype}, whose arrays store one value "
                    f"per byte, not the packed {precision} the floor would count; pass dtype=... (and "
                    "b_dtype='int4' for packed weights) to the marker or the call"
                )
            return precision
    late = (
        " (it cannot be read from the arguments setup returns: they are made while measuring)"
        if kernel is not None and kernel.setup is not None
        else ""
    )
    raise InvalidValueError(f"{op} needs dtype: pass dtype=... to the marker or the call{late}")


def arguments_of(kernel: KernelCall | None) -> Iterator[tuple[str, object]]:
    """Each argument the kernel will get, with where it comes from, in the order dtypes are read."""
    if kernel is None:  # roofline.estimate runs nothing
        return
    yield from ((f"argument {i}", arg) for i, arg in enumerate(kernel.args))
    yield from ((f"kwargs[{key!r}]", value) for key, value in (kernel.kwargs or {}).items())
    fn: object = kernel.fn
    while isinstance(fn, functools.partial):
        yield from ((f"argument {i} of the functools.partial", arg) for i, arg in enumerate(fn.args))
        yield from ((f"keyword {key!r} of the functools.partial", v) for key, v in fn.keywords.items())
        fn = fn.func


def check_name(name: object) -> str:
    """A measurement's name, as the report, the JSON and ``--junitxml`` will show it: one printable line."""
    if name is None:
        return ""
    if not isinstance(name, str):
        raise InvalidValueError(f"name must be a string; got {name!r} ({type(name).__name__})")
    if not name.isprintable():
        raise InvalidValueError(
            f"name must be printable text on one line (no newline, tab or control character); got {name!r}"
        )
    return name
