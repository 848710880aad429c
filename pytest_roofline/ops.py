"""The op catalogue: what each operation computes and moves, and strict checking of its parameters.

Byte counts are the *ideal* DRAM traffic: every input read once, every output written once, as a
perfectly fused kernel would. That is what makes the result a floor: a kernel that re-reads memory
pays for it in measured time, and the gap shows up as a lower attained fraction.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .model import Cost, Precision, Unit, did_you_mean
from .units import brief

ParamKind = Literal["size", "count", "amount", "flag", "choice"]
Params = Mapping[str, Any]
CostFunction = Callable[[Params, float], Cost]
CrossCheck = Callable[[str, Params], None]

#: names every op's caller already uses (estimate, the marker, the fixture): no op may take them
RESERVED_NAMES = frozenset(
    {"dtype", "math", "device", "op", "name", "min_fraction", "stat", "max_time", "cache", "flush"}
)


#: the largest size or count a parameter may have: a signed 64-bit index
MAX_SIZE = 2**63 - 1


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class OpError(ValueError):
    """A wrong op name or parameter; the message names the culprit and what would be right."""


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of an op.

    kinds: ``size`` a positive integer; ``count`` a non-negative integer; ``amount`` a
    non-negative real number; ``flag`` a bool; ``choice`` one of ``choices``.
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
                raise OpError(f"{where} must be a {_kind_words(self.kind)}; got {brief(value)}")
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
        if self.kind == "flag":
            if not _is_bool(value):
                raise OpError(f"{where} must be True or False; got {brief(value)}")
            return bool(value)
        if value not in self.choices:
            raise OpError(f"{where} must be one of {', '.join(map(repr, self.choices))}; got {brief(value)}")
        return value

    def __str__(self) -> str:
        return self.name if self.required else f"{self.name}={self.default!r}"


def _kind_words(kind: ParamKind) -> str:
    return "positive integer" if kind == "size" else "non-negative integer"


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


@dataclass(frozen=True, slots=True)
class OpSpec:
    """An operation: its parameters, its cost function and whether it is matrix-shaped."""

    name: str
    params: tuple[Param, ...]
    cost_fn: CostFunction
    #: matrix-shaped ops may run on tensor units; the rest use the vector peak
    matrix: bool = False
    flops_formula: str = ""
    bytes_formula: str = ""
    #: rules across parameters (a conv2d filter fits its input, a custom op has work), or None
    cross_check: CrossCheck | None = None
    #: real FLOPs per counted FLOP on complex data, or None where the op has no complex form. A
    #: formula counts real arithmetic; a complex multiply-add is 8 real FLOPs where a real one is
    #: 2 (4 for multiply-add ops), a complex add 2 where a real one is 1 (2 for sums)
    complex_flops: float | None = 1.0
    #: whether the op takes real (and integer) data; False for ops defined on complex data (fft)
    real: bool = True

    @property
    def doc(self) -> str:
        """The cost function's docstring: its formula and what it assumes."""
        return (self.cost_fn.__doc__ or "").strip()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def check(self, params: Params) -> dict[str, Any]:
        """All parameters, defaults filled in, each checked; raises OpError on the first mistake."""
        by_name = {p.name: p for p in self.params}
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

    def check_dtype(self, precision: Precision) -> None:
        """An OpError when the op has no form for ``precision``: complex data where it takes
        none (softmax: complex numbers have no order), real data where it takes only complex (fft)."""
        if precision.component is not None and self.complex_flops is None:
            raise OpError(
                f"{self.name} takes no complex data; dtype is {precision} "
                "(count the kernel's real FLOPs and bytes with custom)"
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
        anything but a Cost of finite, non-negative numbers is an OpError naming the op: a floor
        built on it would be nonsense.
        """
        self.check_dtype(precision)
        cost = self.cost_fn(params, precision.itemsize)
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
        return Cost(flops=numbers[0], bytes=numbers[1])

    def unit_for(self, params: Params) -> Unit:
        """Matrix-shaped ops may use tensor units; ``custom`` says so through its ``unit`` parameter."""
        if "unit" in params and isinstance(params["unit"], str):
            return Unit(params["unit"])
        return Unit.TENSOR if self.matrix else Unit.VECTOR

    def shape(self, params: Params) -> str:
        """``M=4096 N=4096 K=4096``: required and non-default parameters."""
        return " ".join(
            f"{p.name}={_fmt(params[p.name])}"
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


# -- the built-in catalogue ------------------------------------------------------------------


def _gemm(p: Params, size: float) -> Cost:
    """C[M,N] = A[M,K] @ B[K,N], ``batch`` times.

    FLOPs 2·batch·M·N·K (one multiply and one add per term); bytes batch·(M·K + K·N + M·N)·size:
    A and B read once, C written once. Assumes C is not read (beta = 0) and that a tiled kernel keeps
    its reuse on chip; the floor therefore ignores re-reads a real kernel may pay for. Complex data:
    each term is a complex multiply-add, 8 real FLOPs (the count × 4; a 3M kernel does fewer).
    """
    b, m, n, k = p["batch"], p["M"], p["N"], p["K"]
    return Cost(flops=2 * b * m * n * k, bytes=b * (m * k + k * n + m * n) * size)


def _gemv(p: Params, size: float) -> Cost:
    """y[M] = A[M,K] @ x[K].

    FLOPs 2·M·K; bytes (M·K + K + M)·size: the matrix and x read once, y written once. Complex
    data: 8 real FLOPs per complex multiply-add (the count × 4).
    """
    m, k = p["M"], p["K"]
    return Cost(flops=2 * m * k, bytes=(m * k + k + m) * size)


def _dot(p: Params, size: float) -> Cost:
    """s = x · y over n elements.

    FLOPs 2·n; bytes (2·n + 1)·size: both vectors read once, one scalar written. Complex data: 8
    real FLOPs per complex multiply-add (the count × 4).
    """
    n = p["n"]
    return Cost(flops=2 * n, bytes=(2 * n + 1) * size)


def _elementwise(p: Params, size: float) -> Cost:
    """out_j = f(in_1, ..., in_inputs) over n elements.

    FLOPs n·flops_per_element; bytes n·(inputs + outputs)·size: every input read once, every output
    written once (a fused kernel; an unfused chain pays for its temporaries). On complex data
    flops_per_element counts real FLOPs, as given (a complex multiply is 6, an add 2).
    """
    n = p["n"]
    return Cost(flops=n * p["flops_per_element"], bytes=n * (p["inputs"] + p["outputs"]) * size)


def _copy(p: Params, size: float) -> Cost:
    """dst = src over n elements.

    FLOPs 0; bytes 2·n·size (read once, written once; write-allocate traffic is not counted, as in STREAM).
    """
    return Cost(flops=0, bytes=2 * p["n"] * size)


def _transpose(p: Params, size: float) -> Cost:
    """out[cols, rows] = in[rows, cols].

    FLOPs 0; bytes 2·rows·cols·size: read once, written once (a tiled kernel keeps both coalesced).
    """
    return Cost(flops=0, bytes=2 * p["rows"] * p["cols"] * size)


def _reduction(p: Params, size: float) -> Cost:
    """A sum (or max, ...) of n elements into ``outputs`` results.

    FLOPs n (one add per element); bytes (n + outputs)·size. Complex data: a complex add is 2 real
    FLOPs (the count × 2).
    """
    n = p["n"]
    return Cost(flops=n, bytes=(n + p["outputs"]) * size)


def _softmax(p: Params, size: float) -> Cost:
    """Row-wise softmax of a rows × cols matrix.

    FLOPs 5·rows·cols (max, subtract, exp, sum, divide; exp counted as one); bytes 2·rows·cols·size:
    one pass in, one pass out (the online/fused formulation; a three-pass kernel reads three times).
    No complex form: complex numbers have no maximum.
    """
    rc = p["rows"] * p["cols"]
    return Cost(flops=5 * rc, bytes=2 * rc * size)


def _layernorm(p: Params, size: float) -> Cost:
    """Row-wise LayerNorm of a rows × cols matrix with affine gamma and beta.

    FLOPs 8·rows·cols (mean, variance, normalize, scale, shift); bytes (2·rows·cols + 2·cols)·size:
    input read once, output written once, gamma and beta read once. No complex form.
    """
    r, c = p["rows"], p["cols"]
    return Cost(flops=8 * r * c, bytes=(2 * r * c + 2 * c) * size)


def _rmsnorm(p: Params, size: float) -> Cost:
    """Row-wise RMSNorm of a rows × cols matrix with a gain vector.

    FLOPs 4·rows·cols (square, sum, scale, gain); bytes (2·rows·cols + cols)·size. No complex form.
    """
    r, c = p["rows"], p["cols"]
    return Cost(flops=4 * r * c, bytes=(2 * r * c + c) * size)


def _attention(p: Params, size: float) -> Cost:
    """Fused scaled-dot-product attention, O = softmax(Q·Kᵀ)·V, per batch and head.

    FLOPs 4·batch·heads·seq_q·seq_k·head_dim (Q·Kᵀ and P·V, softmax not counted); with ``causal``,
    only the unmasked (query, key) pairs count, about half for square shapes (the mask is aligned to
    the bottom right, as in FlashAttention, when seq_q != seq_k). Bytes
    batch·heads·(2·seq_q + 2·seq_k)·head_dim·size: Q, K, V read once and O written once; the score
    matrix never leaves the chip (a non-fused kernel moves seq_q·seq_k more per head). No complex
    form: its softmax needs real scores.
    """
    b, h, sq, sk, d = p["batch"], p["heads"], p["seq_q"], p["seq_k"], p["head_dim"]
    pairs = _causal_pairs(sq, sk) if p["causal"] else sq * sk
    return Cost(flops=4 * b * h * pairs * d, bytes=b * h * (2 * sq + 2 * sk) * d * size)


def _causal_pairs(seq_q: int, seq_k: int) -> int:
    """Visible (query, key) pairs when query i sees keys j <= i + (seq_k - seq_q).

    Query i sees t = i + seq_k - seq_q + 1 keys (at least 0), so t runs over
    max(1, seq_k - seq_q + 1) .. seq_k and the pairs are a difference of triangular numbers.
    """

    def triangle(x: int) -> int:
        return x * (x + 1) // 2

    return triangle(seq_k) - triangle(max(0, seq_k - seq_q))


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _conv2d(p: Params, size: float) -> Cost:
    """Direct 2-D convolution, NCHW input, K filters of C×R×S, output N×K×P×Q.

    P = (H + 2·padding − R) // stride + 1 and Q likewise from W and S. FLOPs 2·N·K·P·Q·C·R·S; bytes
    (N·C·H·W + K·C·R·S + N·K·P·Q)·size: input, filters read once, output written once (an implicit
    GEMM keeps the R·S-fold reuse on chip; a naive kernel re-reads the input up to R·S times).
    Complex data: 8 real FLOPs per complex multiply-add (the count × 4).
    """
    n, c, h, w, k, r, s = (p[x] for x in ("N", "C", "H", "W", "K", "R", "S"))
    out_p = _conv_out(h, r, p["stride"], p["padding"])
    out_q = _conv_out(w, s, p["stride"], p["padding"])
    return Cost(
        flops=2 * n * k * out_p * out_q * c * r * s,
        bytes=(n * c * h * w + k * c * r * s + n * k * out_p * out_q) * size,
    )


def _fft(p: Params, size: float) -> Cost:
    """``batch`` complex-to-complex FFTs of n points each.

    FLOPs 5·batch·n·log2(n), the conventional count of a radix-2 transform in real FLOPs (the one
    FFT benchmarks quote for every n; an actual algorithm does somewhat fewer); bytes
    2·batch·n·size, size the complex item size: the input read once, the output written once. A
    multi-dimensional transform is counted with n its total number of points (the log of a product
    is the sum of the logs).
    """
    n, b = p["n"], p["batch"]
    return Cost(flops=5 * b * n * math.log2(n), bytes=2 * b * n * size)


def _custom(p: Params, size: float) -> Cost:
    """Any kernel whose work you counted yourself.

    FLOPs as given (real FLOPs on complex data); bytes as given, already in bytes (the dtype only
    picks the peak). ``unit`` says whether the kernel runs on tensor units.
    """
    return Cost(flops=p["flops"], bytes=p["bytes"])


def _check_conv2d(op: str, p: Params) -> None:
    for axis, length, kernel in (("H", p["H"], p["R"]), ("W", p["W"], p["S"])):
        if _conv_out(length, kernel, p["stride"], p["padding"]) < 1:
            raise OpError(
                f"{op}: the filter ({'R' if axis == 'H' else 'S'}={kernel}) does not fit in "
                f"{axis}={length} with padding={p['padding']}; the output would be empty"
            )


def _check_custom(op: str, p: Params) -> None:
    if not p["flops"] and not p["bytes"]:
        raise OpError(f"{op} needs flops or bytes greater than 0: with neither there is nothing to bound")


def _check_elementwise(op: str, p: Params) -> None:
    if p["inputs"] + p["outputs"] == 0:
        raise OpError(f"{op}: inputs and outputs cannot both be 0")


_REGISTRY: dict[str, OpSpec] = {}


def register_op(
    name: str,
    params: Sequence[str | Param],
    cost: CostFunction,
    *,
    matrix: bool = False,
    flops: str = "",
    bytes: str = "",
    check: CrossCheck | None = None,
    complex_flops: float | None = 1.0,
    real: bool = True,
    replace: bool = False,
) -> OpSpec:
    """Add an op to the catalogue.

    ``params`` are Param objects or plain names (a required positive integer each). ``cost`` is
    called as ``cost(params, itemsize)`` with checked parameters (``itemsize`` in bytes, 0.5 for
    fp4) and returns a :class:`Cost`; its docstring should state the formula and what it assumes.
    ``flops`` and ``bytes`` are short formulas for ``roofline ops``. ``check(op_name, params)`` may
    raise OpError for rules across parameters. The cost counts real FLOPs; on complex data they are
    multiplied by ``complex_flops`` (4 for multiply-add ops, whose complex multiply-add is 8 real
    FLOPs to a real one's 2), and ``None`` refuses complex data; ``real=False`` refuses real and integer data.
    Registering an existing name is an error unless ``replace``.

    >>> from pytest_roofline import Cost, register_op
    >>> spec = register_op("axpby", ["n"], lambda p, size: Cost(3 * p["n"], 3 * p["n"] * size),
    ...                    flops="3·n", bytes="3·n", replace=True)
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise OpError(f"op name must be an identifier; got {name!r}")
    if name in _REGISTRY and not replace:
        raise OpError(f"op {name!r} is already registered; pass replace=True to redefine it")
    if not callable(cost):
        raise OpError(f"cost for op {name!r} must be callable; got {cost!r}")
    if complex_flops is not None and not (
        isinstance(complex_flops, (int, float))
        and not isinstance(complex_flops, bool)
        and math.isfinite(complex_flops)
        and complex_flops > 0
    ):
        raise OpError(f"op {name!r}: complex_flops must be a positive number or None; got {complex_flops!r}")
    if complex_flops is None and not real:
        raise OpError(f"op {name!r} takes neither real data (real=False) nor complex (complex_flops=None)")
    checked = tuple(p if isinstance(p, Param) else Param(p) for p in params)
    names = [p.name for p in checked]
    if len(set(names)) != len(names):
        raise OpError(f"op {name!r} lists a parameter twice: {names}")
    for param_name in names:
        if not param_name.isidentifier():
            raise OpError(f"op {name!r}: parameter names must be identifiers; got {param_name!r}")
        if param_name in RESERVED_NAMES:
            raise OpError(
                f"op {name!r}: {param_name!r} cannot be a parameter: every caller already uses it "
                f"(reserved: {', '.join(sorted(RESERVED_NAMES))})"
            )
    spec = OpSpec(
        name,
        checked,
        cost,
        matrix=matrix,
        flops_formula=flops,
        bytes_formula=bytes,
        cross_check=check,
        complex_flops=complex_flops,
        real=real,
    )
    _REGISTRY[name] = spec
    return spec


def unregister_op(name: str) -> None:
    """Remove an op (tests and plugins that register ops for one session)."""
    _REGISTRY.pop(name, None)


def get_op(name: object) -> OpSpec:
    """The op called ``name``, or an OpError listing the ops and the closest name."""
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    hint = did_you_mean(name, _REGISTRY) if isinstance(name, str) else ""
    raise OpError(f"unknown op {name!r}{hint}; known ops: {', '.join(sorted(_REGISTRY))}")


def op_names() -> list[str]:
    return sorted(_REGISTRY)


def all_ops() -> Iterable[OpSpec]:
    return (_REGISTRY[name] for name in sorted(_REGISTRY))


def check_params(spec: OpSpec, params: Params) -> dict[str, Any]:
    """Check ``params`` against ``spec``, cross-parameter rules included (same as ``spec.check``)."""
    return spec.check(params)


def _register_builtins() -> None:
    count: ParamKind = "count"
    builtin: list[tuple[str, list[Param], CostFunction, bool, str, str]] = [
        ("gemm", [Param("M"), Param("N"), Param("K"), Param("batch", 1)], _gemm, True,
         "2·batch·M·N·K", "batch·(M·K + K·N + M·N)"),
        ("gemv", [Param("M"), Param("K")], _gemv, True, "2·M·K", "M·K + K + M"),
        ("dot", [Param("n")], _dot, False, "2·n", "2·n + 1"),
        ("elementwise",
         [Param("n"), Param("inputs", 1, count), Param("outputs", 1, count),
          Param("flops_per_element", 1, "amount")],
         _elementwise, False, "n·flops_per_element", "n·(inputs + outputs)"),
        ("copy", [Param("n")], _copy, False, "0", "2·n"),
        ("transpose", [Param("rows"), Param("cols")], _transpose, False, "0", "2·rows·cols"),
        ("reduction", [Param("n"), Param("outputs", 1)], _reduction, False, "n", "n + outputs"),
        ("softmax", [Param("rows"), Param("cols")], _softmax, False, "5·rows·cols", "2·rows·cols"),
        ("layernorm", [Param("rows"), Param("cols")], _layernorm, False,
         "8·rows·cols", "2·rows·cols + 2·cols"),
        ("rmsnorm", [Param("rows"), Param("cols")], _rmsnorm, False, "4·rows·cols", "2·rows·cols + cols"),
        ("attention",
         [Param("batch"), Param("heads"), Param("seq_q"), Param("seq_k"), Param("head_dim"),
          Param("causal", False, "flag")],
         _attention, True, "4·batch·heads·seq_q·seq_k·head_dim (~half if causal)",
         "batch·heads·(2·seq_q + 2·seq_k)·head_dim"),
        ("conv2d",
         [Param("N"), Param("C"), Param("H"), Param("W"), Param("K"), Param("R"), Param("S"),
          Param("stride", 1), Param("padding", 0, count)],
         _conv2d, True, "2·N·K·P·Q·C·R·S", "N·C·H·W + K·C·R·S + N·K·P·Q"),
        ("fft", [Param("n"), Param("batch", 1)], _fft, False, "5·batch·n·log2(n)", "2·batch·n"),
        ("custom",
         [Param("flops", 0, "amount"), Param("bytes", 0, "amount"),
          Param("unit", "vector", "choice", ("vector", "tensor"))],
         _custom, False, "flops", "bytes (in bytes, not elements)"),
    ]  # fmt: skip
    cross_checks = {"conv2d": _check_conv2d, "custom": _check_custom, "elementwise": _check_elementwise}
    # real FLOPs per counted FLOP on complex data: multiply-adds 4, sums 2; elementwise and custom
    # count real FLOPs as given, fft's formula is already real FLOPs. Softmax, attention and the
    # norms need ordered or real values: no complex form
    complex_flops: dict[str, float | None] = {
        "gemm": 4, "gemv": 4, "dot": 4, "conv2d": 4, "reduction": 2,
        "attention": None, "softmax": None, "layernorm": None, "rmsnorm": None,
    }  # fmt: skip
    for name, params, fn, matrix, flops, nbytes in builtin:
        register_op(
            name,
            params,
            fn,
            matrix=matrix,
            flops=flops,
            bytes=nbytes,
            check=cross_checks.get(name),
            complex_flops=complex_flops.get(name, 1.0),
            real=name != "fft",
            replace=True,
        )


_register_builtins()
