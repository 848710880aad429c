"""What one ``roofline(...)`` call asks for: the kernel, and the request resolved through the
precedence chain (the call > the marker > parametrize values > the session's settings)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import InvalidValueError
from ..model.keywords import CALL_KEYWORDS
from .marker import (
    FIXTURE,
    MARKER,
    NO_OP_PARAMS,
    MarkerArgs,
    check_keywords,
    check_no_op_params,
    check_op_params,
    located,
    op_params,
    parametrize_values,
    read_marker,
)
from .placement import place

if TYPE_CHECKING:
    from ..model.inference import Inference
    from ..model.op_registry import OpSpec
    from ..model.policy import Policy
    from ..timing.calls import KernelCall
    from .options import SessionSettings

#: the test's markers, read and checked at setup
MARKER_KEY = pytest.StashKey["MarkerArgs | None"]()


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
    #: who asked for ``cache``, as a message says it: ``flush=False``, ``--roofline-cache=warm``
    cache_asked: str = "default"
    #: the CUDA blocking kernel for this measurement: auto, on, off (None: the session's setting)
    block: str | None = None
    #: what was inferred of a call that named no op (None: the op was given, or mode off inferred nothing)
    inference: Inference | None = None
    #: what chose ``device_spec`` (:func:`.placement.place`): ``arguments`` (the kernel's arrays),
    #: ``session`` (no arrays), ``option`` (``--roofline-device``) or ``keyword`` (``device=``)
    device_from: str = "session"


def resolve(
    item: pytest.Item,
    call: Mapping[str, Any],
    kernel: KernelCall | None,
    *,
    settings: SessionSettings,
    session_spec: Callable[[], str],
    infer: bool = True,
) -> Request:
    """Call keywords over the marker over parametrize values over session settings; a dtype given
    nowhere is read from the ``kernel``'s arguments (:func:`dtype_of_arguments`). With no op, the op
    is inferred from the kernel's call (:func:`..timing.footprint.infer_call`, with the ``flops=``
    and ``bytes=`` given), unless ``infer`` is false (mode off, which estimates nothing: the
    request's op is then ``auto``).

    Raises ValueError (OpError, DeviceError) naming the parameter and the value.
    """
    marker = marker_of(item)
    call = dict(call)
    op = call.pop("op", None) or marker.op
    name = check_name(call.pop("name", None))
    if op is None and kernel is None:
        raise InvalidValueError(
            f"no op: pass op=... to {FIXTURE}(...) or mark the test with "
            f"@pytest.mark.{MARKER}(op, ...) (`roofline ops` lists them)"
        )
    from ..model.ops import get_op
    from ..model.policy import Policy

    parametrized = parametrize_values(item)
    own = {k: call.pop(k) for k in CALL_KEYWORDS if k in call}
    keywords = {**marker.keywords, **own}  # the call's over the marker's, one by one
    dtype = keywords.get("dtype", parametrized.get("dtype"))
    inference = None
    if op is None:
        params = {**marker.params, **call}
        check_no_op_params(params, f"{FIXTURE}(...) with no op")
        if infer and kernel is not None:
            from ..model.core import parse_dtype
            from ..timing.footprint import infer_call

            inference = infer_call(
                kernel.fn, kernel.args, kernel.kwargs, kernel.setup,
                dtype=parse_dtype(dtype) if dtype is not None else None,
                flops=params.get("flops"), nbytes=params.get("bytes"),
            )  # fmt: skip
            op, params, dtype = inference.op, dict(inference.params), dtype or inference.dtype
        else:
            op = "auto"
    else:
        params = op_params(get_op(op), parametrized)
        if op == marker.op:
            params.update(marker.params)
        params = located(item, op, {**params, **call})
        # here too for mode off, which estimates nothing; before the dtype, which a misspelled
        # parameter gone to the kernel would otherwise hide
        check_op_params(op, params, complete=True, forwarded=kernel.forwarded if kernel is not None else ())
        if dtype is None:
            dtype = dtype_of_arguments(op, kernel)
        else:
            check_dtype_against_arguments(op, dtype, kernel)
    check_keywords({**keywords, "dtype": dtype} if dtype is not None else keywords)
    min_fraction = float(keywords.get("min_fraction", settings.min_fraction))
    # cold or warm, and who asked for it as a message says it: the call's cache=, the marker's, the setting
    if "cache" in keywords:
        whose = "" if "cache" in own else "the marker's "
        cache = str(keywords["cache"])
        cache_asked = f"{whose}cache={keywords['cache']!r}"
    else:
        cache = settings.cache
        cache_asked = settings.said("cache")
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
        policy=Policy(
            stat=keywords.get("stat", settings.stat),
            max_time_s=float(keywords.get("max_time", settings.max_time)),
        ),
        name=name,
        stream=keywords.get("stream"),
        cache=cache,
        cache_asked=cache_asked,
        block=keywords.get("block"),
        inference=inference,
        device_from=device_from,
    )


def given(call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if v is not None}


def marker_of(item: pytest.Item) -> MarkerArgs:
    """The test's markers, merged (empty when it has none)."""
    # (a session made by a fixture a test requested dynamically did not set its test up)
    return (item.stash[MARKER_KEY] if MARKER_KEY in item.stash else read_marker(item)) or MarkerArgs()


def split_keywords(spec: OpSpec | None, keywords: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fixture call's other keywords, split as pytest-benchmark's ``benchmark(f, *args, **kwargs)``
    splits them: the op's parameters (``spec``'s; ``pass_`` for ``pass``) with the marker's keywords,
    and every other one, which goes to the kernel. With no op, all but the marker's and ``flops=`` and
    ``bytes=`` go to the kernel.

    A kernel keyword named like an op parameter or a fixture keyword goes in ``kwargs=`` instead.
    """
    # with no op, only flops= and bytes= are the budget's (the rest of the op is inferred)
    names = set(spec.param_names) if spec is not None else set(NO_OP_PARAMS)
    ours: dict[str, Any] = {}
    kernel: dict[str, Any] = {}
    for key, value in keywords.items():
        is_ours = key in CALL_KEYWORDS or key in names or (key.endswith("_") and key[:-1] in names)
        (ours if is_ours else kernel)[key] = value
    return ours, kernel


def kernel_call(
    item: pytest.Item,
    kernel: KernelCall,
    call: Mapping[str, Any],
    keywords: Mapping[str, Any],
) -> tuple[dict[str, Any], KernelCall]:
    """A fixture call's keywords for the request, and its ``kernel`` with the keywords forwarded to it
    (:func:`split_keywords`, for the op the call or the marker names) joined to its ``kwargs=``."""
    from ..model.ops import get_op

    op = call.get("op") or marker_of(item).op
    spec = get_op(op) if op is not None else None
    ours, forwarded = split_keywords(spec, keywords)
    twice = sorted(set(forwarded) & set(kernel.kwargs or {}))
    if twice:
        raise InvalidValueError(
            f"the kernel's keyword {twice[0]!r} was given twice, as a keyword of the call and in kwargs=;"
            " give it once"
        )
    if forwarded:
        kwargs = {**(kernel.kwargs or {}), **forwarded}
        kernel = dataclasses.replace(kernel, kwargs=kwargs, forwarded=tuple(forwarded))
    return {**call, **given(ours)}, kernel


def check_takes(kernel: KernelCall, op: str) -> None:
    """A keyword forwarded to a kernel whose signature shows it takes no such keyword is a mistake
    named now (a misspelled ``min_fracton``, a parameter of another op), not the kernel's TypeError
    later. A kernel without a signature to read (some builtins) is left to say so itself."""
    import inspect

    if not kernel.forwarded:
        return
    try:
        parameters = inspect.signature(kernel.fn).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    takes = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for name in kernel.forwarded:
        if name not in takes:
            from ..model.core import did_you_mean
            from ..model.ops import get_op

            spec = get_op(op)
            raise InvalidValueError(
                f"{name!r} went to the kernel as a keyword, being neither a parameter of {spec.name} nor a"
                f" keyword of the {FIXTURE} fixture, but the kernel takes no keyword {name!r}"
                f"{did_you_mean(name, [*spec.param_names, *CALL_KEYWORDS, *takes])}"
            )


def _argument_dtypes(kernel: KernelCall) -> Iterator[tuple[str, object]]:
    """Where each argument with a dtype is, and its dtype: the positional arguments, then ``kwargs``'
    values, then the kernel's own (a ``functools.partial``'s, a bound method's object), inside
    containers too (:mod:`..timing.arrays` walks them)."""
    from ..timing.arrays import arguments_given, arguments_of_kernel, dtype_of

    given = arguments_given(kernel.args, kernel.kwargs)
    for where, arg in itertools.chain(given, arguments_of_kernel(kernel.fn)):
        dtype = dtype_of(arg)
        if dtype is not None:
            yield where, dtype


def dtype_of_arguments(op: str, kernel: KernelCall | None) -> object:
    """The dtype of the first argument that has one (:func:`_argument_dtypes`), when neither the marker
    nor the call gives it."""
    from ..model.array_operands import argument_precision

    if kernel is not None:  # roofline.estimate runs nothing
        for where, dtype in _argument_dtypes(kernel):
            return argument_precision(op, where, dtype)
    late = (
        " (it cannot be read from the arguments setup returns: they are made while measuring)"
        if kernel is not None and kernel.setup is not None
        else ""
    )
    raise InvalidValueError(f"{op} needs dtype: pass dtype=... to the marker or the call{late}")


def check_dtype_against_arguments(op: str, dtype: object, kernel: KernelCall | None) -> None:
    """A floating-point ``dtype`` given for ``op`` that none of the kernel's floating-point arrays has
    is an InvalidValueError naming both; one array of that format is enough. Nothing is checked where
    no floating-point array is found, or it is not known. Why: docs/usage.md ("The marker")."""
    from ..model.core import Precision, parse_dtype

    if kernel is None:
        return
    try:
        declared = parse_dtype(dtype)
    except ValueError:
        return  # check_keywords says what is wrong with it
    stored = Precision.FP32 if declared is Precision.TF32 else declared
    if stored.integral:
        return
    seen: dict[str, Precision] = {}
    for where, found in _argument_dtypes(kernel):
        try:
            precision = parse_dtype(found)
        except ValueError:
            continue
        if not precision.integral:
            seen.setdefault(where, precision)
    if not seen or stored in seen.values():
        return
    arrays = ", ".join(f"{where} {precision}" for where, precision in list(seen.items())[:4])
    formats = sorted({str(p) for p in seen.values()})
    raise InvalidValueError(
        f"{op}: dtype={str(declared)!r}, but no floating-point array the kernel is given is {declared}"
        f" ({arrays}): the floor would count every byte at {declared}'s width; pass dtype={formats[0]!r}"
        + (" (and math=... for math in another format, such as math='tf32')" if len(formats) == 1 else "")
    )


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
