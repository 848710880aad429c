"""The ``speed_of_light`` marker: its signature, reading and checking it, and parametrize values.

Bound to a real Python signature (:func:`_marker_signature`), so a typo or an extra argument is a clear
error; markers on the function, its class and its module merge, the closest winning. Every check raises
ValueError (an OpError for an op's parameters) naming the argument and the value: docs/usage.md.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import InvalidValueError
from ..model.keywords import BLOCK_SETTINGS, CALL_KEYWORDS

if TYPE_CHECKING:
    from ..model.op_registry import OpSpec

MARKER = "speed_of_light"
FIXTURE = "roofline"

MARKER_DOC = (
    f"{MARKER}(op, *, min_fraction=None, dtype=None, device=None, math=None, stat=None, "
    "max_time=None, cache=None, stream=None, block=None, **params): this test's kernel must "
    "reach min_fraction of the speed-of-light floor of op(**params) in dtype on device (pytest-roofline). "
    "Parameters not given are taken from the test's parametrize values; without the roofline fixture "
    "the test body is the kernel. With no op, the op is inferred from the roofline(kernel, *args) call "
    "(flops= and bytes= override their half). See `roofline ops`."
)

#: the parameters a budget with no op may give: each overrides its half of what is inferred
NO_OP_PARAMS = ("flops", "bytes")


def _marker_signature(
    op: str | None = None,
    *,
    min_fraction: float | None = None,
    dtype: object = None,
    device: str | None = None,
    math: str | None = None,
    stat: str | None = None,
    max_time: float | None = None,
    cache: str | None = None,
    stream: object = None,
    block: str | None = None,
    **params: Any,
) -> None:
    """The speed_of_light marker's real signature: binding to it catches typos and extra arguments."""


@dataclass(frozen=True, slots=True)
class MarkerArgs:
    """The speed_of_light markers on a test, merged (function over class over module) and checked."""

    op: str | None = None
    keywords: Mapping[str, Any] = field(default_factory=dict)  # min_fraction, dtype, ... when given
    params: Mapping[str, Any] = field(default_factory=dict)  # op parameters


def has_marker(item: pytest.Item) -> bool:
    """Whether ``item`` or a node above it carries a speed_of_light marker: the nodes and markers
    ``item.iter_markers`` walks, without its generators (why: docs/options.md, its last paragraph)."""
    node: Any = item  # a Node: pytest exports only its subclasses, Item and Collector
    while node is not None:
        for mark in node.own_markers:
            if mark.name == MARKER:
                return True
        node = node.parent
    return False


def read_marker(item: pytest.Item) -> MarkerArgs | None:
    """Bind and check every speed_of_light marker on ``item``; ValueError on the first mistake."""
    marks = list(item.iter_markers(MARKER))
    if not marks:
        return None
    signature = inspect.signature(_marker_signature)
    op: str | None = None
    keywords: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for mark in reversed(marks):  # farthest first, so the closest marker wins
        if len(mark.args) > 1:
            raise InvalidValueError(
                f"@pytest.mark.{MARKER} takes the op as its only positional argument; got "
                f"{', '.join(map(repr, mark.args))} (write the others as keywords, e.g. dtype=...)"
            )
        try:
            bound = signature.bind(*mark.args, **mark.kwargs)
        except TypeError as exc:
            raise InvalidValueError(f"@pytest.mark.{MARKER}: {exc}") from None
        arguments = dict(bound.arguments)
        if arguments.get("op") is not None:
            if op is not None and arguments["op"] != op:
                params = {}  # a closer marker naming another op starts afresh
            op = arguments["op"]
        own = {k: arguments[k] for k in CALL_KEYWORDS if arguments.get(k) is not None}
        keywords = {**keywords, **own}  # the closer marker's, one by one
        params.update(arguments.get("params", {}))
    args = MarkerArgs(op=op, keywords=keywords, params=params)
    if op is None and params:
        check_no_op_params(params, f"@pytest.mark.{MARKER}")
    spec = check_op_params(op, params, complete=False) if op is not None else None
    check_keywords(keywords)
    if spec is not None and "dtype" in keywords:  # an op with no form for the dtype (fft on fp32)
        from ..model.core import parse_dtype

        spec.check_dtype(parse_dtype(keywords["dtype"]))
    _check_together(item, args, spec)
    return args


def _check_together(item: pytest.Item, marker: MarkerArgs, spec: OpSpec | None) -> None:
    """What the marker and the test's parametrize values say together, before the test body runs:
    ``math`` against a parametrized dtype (a marker's own is checked with its keywords), and, once they
    give every parameter the op requires (every one, for an op that requires none, such as ``custom``),
    the whole kernel's parameters checked as one, defaults filled in, cross-parameter rules included.
    A marker that leaves parameters to the fixture call is checked there. docs/usage.md ("The marker").
    """
    parametrized = parametrize_values(item)
    if "math" in marker.keywords and "dtype" not in marker.keywords and "dtype" in parametrized:
        from ..model.core import parse_dtype
        from ..model.unit_choice import check_math

        try:
            precision = parse_dtype(parametrized["dtype"])
        except ValueError:
            precision = None  # a parametrize value the call may still replace: the call checks it
        check_math(marker.keywords["math"], precision)
    if spec is None:
        return
    given = located(item, spec.name, {**op_params(spec, parametrized), **marker.params})
    required = [p.name for p in spec.params if p.required] or list(spec.param_names)
    if all(name in given for name in required):
        spec.check(given)


def check_fixtureless(item: pytest.Item, marker: MarkerArgs) -> None:
    """A test whose body is the kernel: marker and parametrize values must say everything."""
    if marker.op is None:
        raise InvalidValueError(
            f"@pytest.mark.{MARKER} needs an op when the test does not use the {FIXTURE} fixture (an op is"
            f" inferred only from a {FIXTURE}(kernel, *args) call)"
        )
    from ..model.core import parse_dtype
    from ..model.ops import get_op

    parametrized = parametrize_values(item)
    params = op_params(get_op(marker.op), parametrized)
    check_op_params(marker.op, located(item, marker.op, {**params, **marker.params}), complete=True)
    dtype = marker.keywords.get("dtype", parametrized.get("dtype"))
    if dtype is None:
        raise InvalidValueError(f"{marker.op} needs dtype: pass dtype=... to the marker or parametrize dtype")
    parse_dtype(dtype)


def located(item: pytest.Item, op: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with a relative path read as the test means it: ``op="llm"``'s ``config=`` in the
    test file's folder, else in rootdir (not wherever pytest was started); an OpError says where
    it looked."""
    config = params.get("config")
    if isinstance(config, os.PathLike):
        config = os.fspath(config)
    if op != "llm" or not isinstance(config, str):
        return dict(params)
    from ..model.llm import LlmError, locate_config
    from ..model.op_registry import OpError

    folders = [("the test's folder", item.path.parent), ("rootdir", item.config.rootpath)]
    try:
        return {**params, "config": locate_config(config, folders)}
    except LlmError as exc:
        raise OpError(f"{op}: {exc}") from None


def check_op_params(
    op: str, params: Mapping[str, Any], *, complete: bool, forwarded: Collection[str] = ()
) -> OpSpec:
    """Each given parameter against the op's real ones; with ``complete``, all of them together. An
    OpError names the op, the parameter and the value, and a required one missing while a call passed
    keywords on to the kernel (``forwarded``) names them, or the one close to it."""
    from ..model.core import did_you_mean
    from ..model.op_registry import OpError
    from ..model.ops import get_op

    spec = get_op(op)
    params = spec.canonical(params)
    for name in params:
        if name not in spec.param_names:  # a misspelled keyword (min_fracton) is as likely as a parameter
            hint = did_you_mean(name, [*spec.param_names, *CALL_KEYWORDS])
            raise OpError(
                f"{spec.name} has no parameter {name!r}{hint}; "
                f"it takes {spec.signature()} and the keywords {', '.join(CALL_KEYWORDS)}"
            )
    if complete:
        missing = [p.name for p in spec.params if p.required and p.name not in params]
        if missing and forwarded:
            raise OpError(_needs_but_forwarded(spec, missing, forwarded))
        spec.check(params)  # required ones present, cross-parameter rules (custom has work)
        return spec
    by_name = {p.name: p for p in spec.params}
    for name, value in params.items():
        by_name[name].check(spec.name, value)
    return spec


def _needs_but_forwarded(spec: OpSpec, missing: list[str], forwarded: Collection[str]) -> str:
    """A required parameter is missing and the call passed keywords on to the kernel: the likely typo
    among them, and where a kernel keyword named like a parameter goes."""
    from ..model.core import close_matches

    where = (
        f"(a keyword that is neither the op's nor one of the {FIXTURE} fixture's goes to the kernel; one"
        f" for the kernel named like them goes in kwargs={{...}}); it takes {spec.signature()}"
    )
    for name in forwarded:
        close = close_matches(name, missing)
        if close:
            return (
                f"{spec.name} needs {close[0]}; {name!r} went to the kernel as a keyword: did you mean"
                f" {close[0]}? {where}"
            )
    went = ", ".join(map(repr, forwarded))
    keywords = "a keyword" if len(forwarded) == 1 else "keywords"
    return f"{spec.name} needs {missing[0]}; {went} went to the kernel as {keywords} {where}"


def check_no_op_params(params: Mapping[str, Any], where: str) -> None:
    """What a budget with no op may give: ``flops=`` and ``bytes=`` (non-negative numbers), nothing else."""
    others = sorted(set(params) - set(NO_OP_PARAMS))
    if others:
        raise InvalidValueError(
            f"{where}: parameters {others} given without an op; with no op, the op is inferred from the "
            f"{FIXTURE}(kernel, *args) call and only flops= and bytes= may be given (pass op=... for the"
            " others)"
        )
    check_op_params("custom", params, complete=False)


def check_keywords(kw: Mapping[str, Any]) -> None:
    """The marker's (or a call's) keywords; the device only for its spelling (whether it is on this
    machine is the session's question)."""
    from ..model.core import parse_dtype
    from ..model.unit_choice import check_math
    from ..model.verdict import check_fraction

    if "dtype" in kw:
        parse_dtype(kw["dtype"])
    if "min_fraction" in kw:
        check_fraction(kw["min_fraction"])
    if "math" in kw:
        check_math(kw["math"], parse_dtype(kw["dtype"]) if "dtype" in kw else None)
    from ..model.stats import STATS

    if "stat" in kw and kw["stat"] not in STATS:
        raise InvalidValueError(f"stat must be one of {', '.join(STATS)}; got {kw['stat']!r}")
    if "max_time" in kw:
        from ..model.policy import check_positive

        check_positive("max_time", kw["max_time"])
    if "cache" in kw:
        from ..timing.cache import check_cache_state

        check_cache_state(kw["cache"])
    # a stream= the CUDA backend can time on (its _wrap reads it), by shape only: no framework imported
    stream = kw.get("stream")
    handle = isinstance(stream, int) and not isinstance(stream, bool)
    shaped = any(hasattr(stream, name) for name in ("cuda_stream", "__cuda_stream__", "ptr"))  # ptr: CuPy's
    if "stream" in kw and not (handle or shaped):
        raise InvalidValueError(
            f"stream must be a CUDA stream: a CuPy or PyTorch stream, an object with cuda_stream or "
            f"__cuda_stream__, or an int handle; got {kw['stream']!r} ({type(kw['stream']).__name__})"
        )
    if "block" in kw and kw["block"] not in BLOCK_SETTINGS:
        raise InvalidValueError(
            f"block must be one of {', '.join(repr(b) for b in BLOCK_SETTINGS)} (the CUDA blocking kernel: "
            f"--roofline-cuda-block); got {kw['block']!r}"
        )
    if "device" in kw and not isinstance(kw["device"], str):
        raise InvalidValueError(f"device must be a string such as 'cuda' or 'cpu'; got {kw['device']!r}")


# -- parametrize values ------------------------------------------------------------------------------


def parametrize_values(item: pytest.Item) -> dict[str, Any]:
    """The test's parametrize values by name (an indirect one as its fixture's value, once set up)."""
    callspec = getattr(item, "callspec", None)
    params: Mapping[str, Any] = getattr(callspec, "params", {})
    funcargs: Mapping[str, Any] = getattr(item, "funcargs", {})
    return {name: funcargs.get(name, value) for name, value in params.items()}


def op_params(spec: OpSpec, parametrized: Mapping[str, Any]) -> dict[str, Any]:
    """The parametrize values named like one of the op's parameters: they feed it, below marker and call."""
    return {p.name: parametrized[p.name] for p in spec.params if p.name in parametrized}
