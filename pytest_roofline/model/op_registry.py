"""Ops and their parameters: :class:`OpSpec` and :class:`Param`, strict checking of the values an op
is given, and the registry every catalogue adds to (:func:`register_op`, :func:`get_op`).

The catalogues (:mod:`.builtin_ops`, :mod:`.llm_ops`, the ``llm`` op of :mod:`.llm`) import this
module and register into it; it imports none of them, so imports go one way. :mod:`.ops` gives the
whole catalogue, loaded.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from ..errors import RooflineUsageError
from .core import Cost, Precision, Unit, did_you_mean, parse_dtype
from .keywords import CALL_KEYWORDS, FIXTURE_NAMES
from .units import brief

ParamKind = Literal["size", "count", "amount", "flag", "choice", "dtype", "text"]
Params = Mapping[str, Any]
CostFunction = Callable[[Params, float], Cost]
CrossCheck = Callable[[str, Params], None]

#: names every op's caller already uses (estimate, the marker, the fixture): no op may take them
RESERVED_NAMES = frozenset({*FIXTURE_NAMES, *CALL_KEYWORDS})


#: the largest size or count a parameter may have: a signed 64-bit index
MAX_SIZE = 2**63 - 1


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class OpError(RooflineUsageError, ValueError):
    """A wrong op name or parameter; the message names the culprit and what would be right."""


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of an op.

    kinds: ``size`` a positive integer; ``count`` a non-negative integer; ``amount`` a
    non-negative real number; ``flag`` a bool; ``choice`` one of ``choices``; ``dtype`` a storage
    format (any dtype spelling, kept as its canonical name); ``text`` a non-empty string (a path).
    A default of None means "not given" (an operand dtype then follows ``dtype``).
    """

    name: str
    default: Any = REQUIRED
    kind: ParamKind = "size"
    choices: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def check(self, op: str, value: object) -> object:
        """The checked value, or an OpError naming the op, the parameter and the value."""
        where = f"{op}: {self.name}"
        if self.kind in ("size", "count"):
            number = _as_integer(value)
            if number is None or number < (1 if self.kind == "size" else 0):
                kind = "positive integer" if self.kind == "size" else "non-negative integer"
                raise OpError(f"{where} must be a {kind}; got {brief(value)}")
            if number > MAX_SIZE:  # no device indexes past it, and products of such sizes overflow floats
                raise OpError(f"{where} must be at most 2**63 - 1 ({MAX_SIZE:.3g}); got {brief(value)}")
            return number
        if self.kind == "amount":
            amount = _as_real(value)
            if amount == math.inf and _as_integer(value) is not None:
                raise OpError(
                    f"{where} is past the largest float ({sys.float_info.max:.3g}); got {brief(value)}"
                )
            if amount is None or not math.isfinite(amount) or amount < 0:
                raise OpError(f"{where} must be a non-negative number; got {brief(value)}")
            # plain Python numbers from here on: a numpy scalar would not survive JSON or xdist
            return int(amount) if _as_integer(value) is not None else amount
        if self.kind == "dtype":
            try:
                return parse_dtype(value).label
            except ValueError as exc:
                raise OpError(f"{where}: {exc}") from None
        if self.kind == "text":
            if not isinstance(value, str) or not value.strip():
                raise OpError(f"{where} must be a non-empty string; got {brief(value)}")
            return value
        if self.kind == "flag":
            if not _is_bool(value):
                raise OpError(f"{where} must be True or False; got {brief(value)}")
            return bool(value)
        if value not in self.choices:
            raise OpError(f"{where} must be one of {', '.join(map(repr, self.choices))}; got {brief(value)}")
        return value

    def __str__(self) -> str:
        return self.name if self.required else f"{self.name}={self.default!r}"


def _is_bool(value: object) -> bool:
    # numpy's bool (np.bool_, named "bool" in numpy 2) is not an int subclass but is Integral-like
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_"))


def _as_integer(value: object) -> int | None:
    """``value`` as an int when it is an integer type (numpy's too), never a float or a bool."""
    if isinstance(value, numbers.Integral) and not _is_bool(value):
        return int(value)
    return None


def _as_real(value: object) -> float | None:
    """``value`` as a float (inf past the largest float), or None when it is not a real number."""
    if isinstance(value, numbers.Real) and not _is_bool(value):
        try:
            return float(value)
        except OverflowError:
            return math.inf
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class OpSpec:
    """An operation, every field given: a field left out is an error where the op is declared, never a
    default. The catalogues declare each op as one ``register_op(OpSpec(...))``; :func:`register_op`
    also builds one from keywords, with defaults for a user's op (docs/floor.md ("Ops")).
    """

    name: str
    params: tuple[Param, ...]
    #: ``cost(params, itemsize)``: the op's Cost; its docstring states the formula and what it assumes
    cost_fn: CostFunction
    #: short formulas for ``roofline ops`` and the docs' table
    flops_formula: str
    bytes_formula: str
    #: matrix-shaped ops may run on tensor units; the rest use the vector peak
    matrix: bool
    #: real FLOPs per counted FLOP on complex data (4 for multiply-add ops, 2 for sums), or None where
    #: the op has no complex form
    complex_flops: float | None
    #: whether the op takes real (and integer) data; False for ops defined on complex data (fft)
    real: bool
    #: whether ``dtype`` may be a packed sub-byte integer (int4): ops whose kernels have such a form
    packed: bool
    #: the kernel names users know it by (``silu_and_mul`` for ``swiglu``)
    aliases: tuple[str, ...]
    #: rules across parameters (a conv2d filter fits its input, a custom op has work), or None
    cross_check: CrossCheck | None
    #: where its counting convention comes from, or how it is derived (``roofline ops`` prints it)
    source: str
    #: whether the cost function needs the dtype's name, not only its size (a whole model's step):
    #: it then finds it in ``params["dtype"]``
    needs_dtype: bool

    @property
    def doc(self) -> str:
        """The cost function's docstring: its formula (a built-in op's assumptions: docs/floor.md, "Ops")."""
        return (self.cost_fn.__doc__ or "").strip()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def check(self, params: Params) -> dict[str, Any]:
        """All parameters, defaults filled in, each checked; raises OpError on the first mistake."""
        by_name = {p.name: p for p in self.params}
        params = self.canonical(params)
        for name in params:
            if name not in by_name:
                raise OpError(
                    f"{self.name} has no parameter {name!r}{did_you_mean(name, by_name)}; "
                    f"it takes {self.signature()}"
                )
        checked: dict[str, Any] = {}
        for param in self.params:
            if param.name in params:
                checked[param.name] = param.check(self.name, params[param.name])
            elif param.required:
                raise OpError(f"{self.name} needs {param.name} (it takes {self.signature()})")
            else:
                checked[param.name] = param.default
        if self.cross_check is not None:
            self.cross_check(self.name, checked)
        return checked

    def canonical(self, params: Params) -> dict[str, Any]:
        """``params`` with ``pass_`` read as ``pass``: a Python keyword cannot be a keyword argument."""
        names = set(self.param_names)
        return {
            (n[:-1] if n.endswith("_") and n[:-1] in names and n not in names else n): v
            for n, v in params.items()
        }

    def check_dtype(self, precision: Precision) -> None:
        """An OpError when the op has no form for ``precision``: complex data where it takes
        none (softmax: complex numbers have no order), real data where it takes only complex (fft)."""
        if precision.component is not None and self.complex_flops is None:
            raise OpError(
                f"{self.name} takes no complex data; dtype is {precision} "
                "(count the kernel's real FLOPs and bytes with custom)"
            )
        if precision is Precision.INT4 and not self.packed:
            packed = ", ".join(spec.name for spec in all_ops() if spec.packed)
            raise OpError(
                f"{self.name} has no packed int4 form; dtype int4 applies to {packed} "
                "(for int4 weights under other data, give the operand's dtype: b_dtype='int4')"
            )
        if precision.component is None and not self.real:
            raise OpError(
                f"{self.name} takes complex data only (complex32, complex64 or complex128); dtype is "
                f"{precision} (count other kernels with custom)"
            )

    def cost(self, params: Params, precision: Precision) -> Cost:
        """The cost of one call; ``params`` must come from :meth:`check`.

        Complex data costs :attr:`complex_flops` real FLOPs per FLOP the formula counts; bytes
        follow the item size (complex64 is 8 bytes). A registered cost function that returns
        anything but a Cost of finite, non-negative numbers is an OpError naming the op.
        """
        self.check_dtype(precision)
        cost = self.cost_fn(
            {**params, "dtype": precision.label} if self.needs_dtype else params, precision.itemsize
        )
        if not isinstance(cost, Cost):
            raise OpError(f"cost function of op {self.name!r} returned {cost!r}, not a Cost")
        numbers: list[float] = []
        for what, value in (("flops", cost.flops), ("bytes", cost.bytes)):
            number = _as_real(value)
            if number is None or not math.isfinite(number) or number < 0:
                given = ", ".join(f"{name}={brief(v)}" for name, v in params.items())
                raise OpError(
                    f"op {self.name!r} costs {what}={brief(value)}; expected a finite number >= 0 "
                    f"(are the sizes right? {given})"
                )
            numbers.append(number)
        if precision.component is not None and self.complex_flops is not None:
            numbers[0] *= self.complex_flops
        # plain floats: numpy scalars would not survive JSON or pytest-xdist
        return Cost(flops=numbers[0], bytes=numbers[1], parts=cost.parts)

    def unit_for(self, params: Params) -> Unit:
        """Matrix-shaped ops may use tensor units; ``custom`` says so through its ``unit`` parameter."""
        if "unit" in params and isinstance(params["unit"], str):
            return Unit(params["unit"])
        return Unit.TENSOR if self.matrix else Unit.VECTOR

    def shape(self, params: Params) -> str:
        """``M=4096 N=4096 K=4096``: required and non-default parameters (a path by its file name)."""
        return " ".join(
            f"{p.name}={_fmt(params[p.name]) if p.kind != 'text' else os.path.basename(params[p.name])}"
            for p in self.params
            if p.name in params and (p.required or params[p.name] != p.default)
        )

    def label(self, params: Params, precision: Precision) -> str:
        """``gemm[M=4096 N=4096 K=4096 bf16]``: the shape, then the dtype."""
        shape = self.shape(params)
        return f"{self.name}[{shape} {precision}]" if shape else f"{self.name}[{precision}]"

    def signature(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})"


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_REGISTRY: dict[str, OpSpec] = {}
#: alias -> op name: the kernel names users know (``silu_and_mul`` -> ``swiglu``)
_ALIASES: dict[str, str] = {}


@overload
def register_op(spec: OpSpec, /, *, replace: bool = ...) -> OpSpec: ...


@overload
def register_op(
    name: str,
    params: Sequence[str | Param],
    cost: CostFunction,
    *,
    matrix: bool = ...,
    flops: str = ...,
    bytes: str = ...,
    check: CrossCheck | None = ...,
    complex_flops: float | None = ...,
    real: bool = ...,
    packed: bool = ...,
    aliases: Sequence[str] = ...,
    source: str = ...,
    needs_dtype: bool = ...,
    replace: bool = ...,
) -> OpSpec: ...


def register_op(
    name: str | OpSpec,
    params: Sequence[str | Param] | None = None,
    cost: CostFunction | None = None,
    *,
    replace: bool = False,
    **fields: Any,
) -> OpSpec:
    """Add an op to the catalogue: an :class:`OpSpec` with every field given (as the catalogues
    declare theirs), or its name, parameters and cost function with the other fields as keywords
    (what each means: docs/floor.md ("Ops")). Registering an existing name is an OpError unless
    ``replace``.

    ``params`` are Param objects or plain names (a required positive integer each). ``cost`` is
    called as ``cost(params, itemsize)`` with checked parameters (``itemsize`` in bytes, 0.5 for
    fp4) and returns a :class:`Cost` of real FLOPs; its docstring should state the formula and
    what it assumes. ``check(op_name, params)`` may raise OpError for rules across parameters.

    >>> from pytest_roofline import Cost, register_op
    >>> spec = register_op("axpby", ["n"], lambda p, size: Cost(3 * p["n"], 3 * p["n"] * size),
    ...                    flops="3·n", bytes="3·n", replace=True)
    """
    if isinstance(name, OpSpec):
        if params is not None or cost is not None or fields:
            raise OpError(
                f"op {name.name!r}: an OpSpec holds every field; give register_op only replace= beside it"
            )
        spec = name
    else:
        known = [*(_spec.__kwdefaults__ or {}), "replace"]
        unknown = sorted(fields.keys() - set(known))
        if unknown:
            raise OpError(f"register_op has no keyword {unknown[0]!r}{did_you_mean(unknown[0], known)}")
        spec = _spec(name, params, cost, **fields)
    _check_spec(spec, replace)
    _REGISTRY[spec.name] = spec
    _ALIASES.update(dict.fromkeys(spec.aliases, spec.name))
    return spec


def _spec(
    name: str,
    params: Sequence[str | Param] | None,
    cost: CostFunction | None,
    *,
    matrix: bool = False,
    flops: str = "",
    bytes: str = "",
    check: CrossCheck | None = None,
    complex_flops: float | None = 1.0,
    real: bool = True,
    packed: bool = False,
    aliases: Sequence[str] = (),
    source: str = "",
    needs_dtype: bool = False,
) -> OpSpec:
    """A user's op from :func:`register_op`'s keywords: the defaults of its fields are these."""
    return OpSpec(
        name=name,
        params=tuple(p if isinstance(p, Param) else Param(p) for p in params or ()),
        cost_fn=cost,  # type: ignore[arg-type]  # _check_spec refuses one that is not callable
        flops_formula=flops,
        bytes_formula=bytes,
        matrix=matrix,
        complex_flops=complex_flops,
        real=real,
        packed=packed,
        aliases=tuple(aliases),
        cross_check=check,
        source=source,
        needs_dtype=needs_dtype,
    )


def _check_spec(spec: OpSpec, replace: bool) -> None:
    """An OpError naming the op and the field that cannot be registered, if one cannot."""
    name, complex_flops = spec.name, spec.complex_flops
    if not isinstance(name, str) or not name.isidentifier():
        raise OpError(f"op name must be an identifier; got {name!r}")
    if name in _REGISTRY and not replace:
        raise OpError(f"op {name!r} is already registered; pass replace=True to redefine it")
    for alias in spec.aliases:
        owner = _ALIASES.get(alias)
        taken = alias in _REGISTRY or owner not in (None, name)
        if not alias.isidentifier() or (taken and not replace):
            raise OpError(f"op {name!r}: alias {alias!r} is not an identifier or names another op already")
    if not callable(spec.cost_fn):
        raise OpError(f"cost for op {name!r} must be callable; got {spec.cost_fn!r}")
    if complex_flops is not None and not (
        isinstance(complex_flops, (int, float))
        and not isinstance(complex_flops, bool)
        and math.isfinite(complex_flops)
        and complex_flops > 0
    ):
        raise OpError(f"op {name!r}: complex_flops must be a positive number or None; got {complex_flops!r}")
    if complex_flops is None and not spec.real:
        raise OpError(f"op {name!r} takes neither real data (real=False) nor complex (complex_flops=None)")
    if not all(isinstance(p, Param) for p in spec.params):
        raise OpError(f"op {name!r}: an OpSpec's params must be Param objects; got {spec.params!r}")
    names = spec.param_names
    if len(set(names)) != len(names):
        raise OpError(f"op {name!r} lists a parameter twice: {list(names)}")
    for param_name in names:
        if not param_name.isidentifier():
            raise OpError(f"op {name!r}: parameter names must be identifiers; got {param_name!r}")
        if param_name in RESERVED_NAMES:
            raise OpError(
                f"op {name!r}: {param_name!r} cannot be a parameter: every caller already uses it "
                f"(reserved: {', '.join(sorted(RESERVED_NAMES))})"
            )


def restore_op(spec: OpSpec) -> None:
    """Put an op back exactly as it was (every field: its checks, complex form, aliases), after a
    session replaced it."""
    unregister_op(spec.name)
    _REGISTRY[spec.name] = spec
    _ALIASES.update(dict.fromkeys(spec.aliases, spec.name))


def unregister_op(name: str) -> None:
    """Remove an op (tests and plugins that register ops for one session)."""
    spec = _REGISTRY.pop(name, None)
    for alias in spec.aliases if spec is not None else ():
        _ALIASES.pop(alias, None)


#: what libraries call some ops, named in the error of an unknown op (not accepted as aliases: a
#: ``matmul`` may be a batched GEMM or a GEMV, whose parameters differ)
_OTHER_NAMES = {
    "matmul": "gemm", "mm": "gemm", "bmm": "gemm", "linear": "gemm", "dense": "gemm",
    "sdpa": "attention", "scaled_dot_product_attention": "attention", "flash_attention": "attention",
    "mv": "gemv", "add": "elementwise", "mul": "elementwise", "sum": "reduction", "memcpy": "copy",
    "rms_norm": "rmsnorm", "layer_norm": "layernorm", "silu_and_mul": "swiglu",
}  # fmt: skip


def get_op(name: object) -> OpSpec:
    """The op called ``name``, or an OpError listing the ops and the closest name."""
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    if isinstance(name, str) and _ALIASES.get(name) in _REGISTRY:
        return _REGISTRY[_ALIASES[name]]
    hint = ""
    if isinstance(name, str):
        other = _OTHER_NAMES.get(name.lower())
        hint = f" (did you mean {other!r}?)" if other else did_you_mean(name, [*_REGISTRY, *_ALIASES])
    raise OpError(f"unknown op {name!r}{hint}; known ops: {', '.join(sorted(_REGISTRY))}")


def op_names() -> list[str]:
    return sorted(_REGISTRY)


def all_ops() -> Iterable[OpSpec]:
    return (_REGISTRY[name] for name in sorted(_REGISTRY))
