"""The op catalogue: what each operation computes and moves, and strict checking of its parameters.

Byte counts are the *ideal* DRAM traffic: every input read once, every output written once, as a
perfectly fused kernel would. That is what makes the result a floor: a kernel that re-reads memory
pays for it in measured time, and the gap shows up as a lower attained fraction.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import RooflineUsageError
from .core import Cost, Precision, Unit, did_you_mean, parse_dtype
from .units import brief

ParamKind = Literal["size", "count", "amount", "flag", "choice", "dtype", "text"]
Params = Mapping[str, Any]
CostFunction = Callable[[Params, float], Cost]
CrossCheck = Callable[[str, Params], None]

#: names every op's caller already uses (estimate, the marker, the fixture): no op may take them
RESERVED_NAMES = frozenset(
    {"dtype", "math", "device", "op", "name", "min_fraction", "stat", "max_time", "cache", "flush", "block"}
)


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
    #: whether ``dtype`` may be a packed sub-byte integer (int4): ops whose kernels have such a form
    packed: bool = False
    #: the kernel names users know it by (``silu_and_mul`` for ``swiglu``)
    aliases: tuple[str, ...] = ()
    #: where its counting convention comes from, or how it is derived (``roofline ops`` prints it)
    source: str = ""
    #: whether the cost function needs the dtype's name, not only its size (a whole model's step):
    #: it then finds it in ``params["dtype"]``
    needs_dtype: bool = False

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
        anything but a Cost of finite, non-negative numbers is an OpError naming the op: a floor
        built on it would be nonsense.
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


# -- the built-in catalogue ------------------------------------------------------------------


def storage(p: Params, operand: str, size: float) -> float:
    """Bytes per element of an operand: its own ``<operand>_dtype`` where given, else ``size`` (the
    dtype's)."""
    given = p.get(f"{operand}_dtype")
    return size if given is None else parse_dtype(given).itemsize


#: bytes per block scale, by the ``scale_dtype`` spellings the quantized formats use
SCALE_SIZES: dict[str, float] = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8_e4m3": 1, "e8m0": 1}


def scale_bytes(p: Params, elements: float) -> float:
    """Bytes of the block scales of ``elements`` quantized values: one ``scale_dtype`` (fp16 unless
    given) per ``group_size`` elements along K; 0 without a group_size."""
    group = p.get("group_size")
    return 0.0 if not group else elements / group * SCALE_SIZES[p.get("scale_dtype") or "fp16"]


def _quantized(p: Params, operand: str, size: float) -> bool:
    """Whether an operand carries block scales: B (the weights) whenever group_size is given, A
    only when it is stored sub-byte (NVFP4 and MX formats scale both operands)."""
    return bool(p.get("group_size")) and (operand == "b" or storage(p, operand, size) < 1)


def _gemm(p: Params, size: float) -> Cost:
    """C[M,N] = A[M,K] @ B[K,N], ``batch`` times.

    FLOPs 2·batch·M·N·K (one multiply and one add per term); bytes batch·(M·K·a + K·N·b + M·N·c +
    scales): A and B read once, C written once, each at its own storage size (``a_dtype``,
    ``b_dtype``, ``c_dtype``; ``dtype`` where not given: it is the math and picks the peak). With
    ``group_size`` g, B (the weights) carries one ``scale_dtype`` per g elements along K, K·N/g
    scales (A too when it is stored in 4 bits: NVFP4, MXFP4). W4A16: dtype=bf16 b_dtype=int4
    group_size=128. Assumes C is not read (beta = 0) and that a tiled kernel keeps its reuse on
    chip; the floor therefore ignores re-reads a real kernel may pay for. Complex data: each term
    is a complex multiply-add, 8 real FLOPs (the count × 4; a 3M kernel does fewer).
    """
    b, m, n, k = p["batch"], p["M"], p["N"], p["K"]
    operands = (("a", m * k), ("b", k * n))
    scales = sum(scale_bytes(p, elements) for operand, elements in operands if _quantized(p, operand, size))
    moved = m * k * storage(p, "a", size) + k * n * storage(p, "b", size) + m * n * storage(p, "c", size)
    return Cost(flops=2 * b * m * n * k, bytes=b * (moved + scales))


def _gemv(p: Params, size: float) -> Cost:
    """y[M] = A[M,K] @ x[K].

    FLOPs 2·M·K; bytes M·K·a + K·b + M·c + scales: the matrix (``a_dtype``) and x (``b_dtype``)
    read once, y (``c_dtype``) written once; with ``group_size`` g the matrix carries M·K/g scales
    of ``scale_dtype``. Complex data: 8 real FLOPs per complex multiply-add (the count × 4).
    """
    m, k = p["M"], p["K"]
    scales = scale_bytes(p, m * k)
    moved = m * k * storage(p, "a", size) + k * storage(p, "b", size) + m * storage(p, "c", size)
    return Cost(flops=2 * m * k, bytes=moved + scales)


def _check_groups(op: str, p: Params) -> None:
    group, k = p.get("group_size"), p.get("K", p.get("hidden"))
    if group and k is not None and k % group:
        raise OpError(f"{op}: group_size={group} does not divide K={k}; scales come one per group along K")


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
    """Fused scaled-dot-product attention, O = softmax(Q·Kᵀ)·V, as FlashAttention and FlashInfer count it.

    Forward FLOPs 2·batch·heads·seq_q·avg_k·(head_dim + head_dim_v): Q·Kᵀ and P·V over the
    visible (query, key) pairs, softmax not counted. Without a mask avg_k = seq_k. ``causal`` is
    aligned bottom-right (the last query sees every key, as in a KV cache): avg_k = (max(0, seq_k −
    seq_q) + seq_k)/2, FlashAttention's benchmark convention (for seq_q > seq_k, where the first
    queries see nothing, the seq_k visible rows count seq_k/2 each). ``window`` w (a causal sliding
    window, Mistral's and Gemma's) caps each query at w keys along that ramp. ``pass`` (fwd unless given): bwd
    is 2.5× and fwd+bwd 3.5× the forward FLOPs.

    Bytes: Q + K + V + O, Q and O at ``heads`` and K, V at ``kv_heads`` (GQA/MQA: a decode kernel
    reads the KV cache once per KV head, not once per query head; LLM-Viewer#12 charged GQA as MHA),
    each at its dtype (``q_dtype``, ``kv_dtype``, ``o_dtype``). With a window only the last
    w + seq_q − 1 keys are read. ``shared_kv`` (MLA's latent cache: V is the first head_dim_v
    values of each cached K row) reads the cache once, kv_heads·keys·head_dim. The score matrix
    never leaves the chip (a non-fused kernel moves seq_q·seq_k more per head); a paged cache
    moves the same bytes. Backward reads Q, K, V, dO and
    writes dQ, dK, dV. Decode is seq_q=1. No complex form: its softmax needs real scores.
    """
    b, h, sq, sk, d = p["batch"], p["heads"], p["seq_q"], p["seq_k"], p["head_dim"]
    kvh = p["kv_heads"] or h
    dv = p["head_dim_v"] or d
    pairs = sq * _avg_keys(sq, sk, p["causal"], p["window"])
    forward = 2 * b * h * pairs * (d + dv)
    keys = sk if not p["window"] else min(sk, p["window"] + sq - 1)
    q, kv, o = storage(p, "q", size), storage(p, "kv", size), storage(p, "o", size)
    q_bytes, o_bytes = b * h * sq * d * q, b * h * sq * dv * o
    kv_bytes = b * kvh * keys * (d if p["shared_kv"] else d + dv) * kv
    fwd_bytes = q_bytes + kv_bytes + o_bytes
    bwd_bytes = 2 * (q_bytes + kv_bytes) + o_bytes  # read Q K V dO, write dQ dK dV
    flops, nbytes = {
        "fwd": (forward, fwd_bytes),
        "bwd": (2.5 * forward, bwd_bytes),
        "fwd+bwd": (3.5 * forward, fwd_bytes + bwd_bytes),
    }[p["pass"] or "fwd"]
    return Cost(flops=flops, bytes=nbytes)


def _avg_keys(seq_q: int, seq_k: int, causal: bool, window: int | None) -> float:
    """Keys each query sees on average: all of them, or a causal ramp from max(0, seq_k − seq_q)
    to seq_k (FlashAttention's convention) capped at ``window``."""
    if not causal:
        return float(seq_k)
    if seq_q > seq_k:  # the first seq_q - seq_k queries see no key: seq_k rows of the ramp 0..seq_k
        return seq_k * _avg_keys(seq_k, seq_k, True, window) / seq_q
    low, high = seq_k - seq_q, seq_k
    if not window or window >= high:
        return (low + high) / 2
    if window <= low:
        return float(window)
    below = (window - low) / (high - low)  # the share of queries under the cap
    return below * (low + window) / 2 + (1 - below) * window


def _check_attention(op: str, p: Params) -> None:
    heads, kv_heads = p["heads"], p["kv_heads"]
    if kv_heads is not None and heads % kv_heads:
        raise OpError(
            f"{op}: kv_heads={kv_heads} does not divide heads={heads}; each KV head serves a whole "
            "group of query heads (GQA)"
        )
    if p["window"] is not None and not p["causal"]:
        raise OpError(f"{op}: window={p['window']} is a causal sliding window; pass causal=True with it")
    if p["shared_kv"] and (p["head_dim_v"] or p["head_dim"]) > p["head_dim"]:
        raise OpError(
            f"{op}: shared_kv reads V as the first head_dim_v values of each K row; head_dim_v="
            f"{p['head_dim_v']} is more than head_dim={p['head_dim']}"
        )


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
#: alias -> op name: the kernel names users know (``silu_and_mul`` -> ``swiglu``)
_ALIASES: dict[str, str] = {}


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
    packed: bool = False,
    aliases: Sequence[str] = (),
    source: str = "",
    needs_dtype: bool = False,
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
    for alias in aliases:
        owner = _ALIASES.get(alias)
        taken = alias in _REGISTRY or owner not in (None, name)
        if not alias.isidentifier() or (taken and not replace):
            raise OpError(f"op {name!r}: alias {alias!r} is not an identifier or names another op already")
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
        packed=packed,
        aliases=tuple(aliases),
        source=source,
        needs_dtype=needs_dtype,
    )
    _REGISTRY[name] = spec
    _ALIASES.update(dict.fromkeys(aliases, name))
    return spec


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


def get_op(name: object) -> OpSpec:
    """The op called ``name``, or an OpError listing the ops and the closest name."""
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    if isinstance(name, str) and _ALIASES.get(name) in _REGISTRY:
        return _REGISTRY[_ALIASES[name]]
    hint = did_you_mean(name, [*_REGISTRY, *_ALIASES]) if isinstance(name, str) else ""
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
        ("gemm", [Param("M"), Param("N"), Param("K"), Param("batch", 1), *_operands("abc"), *_groups()],
         _gemm, True, "2·batch·M·N·K",
         "batch·(M·K·a + K·N·b + M·N·c + scales) (a, b, c: each operand's size, dtype's unless given; "
         "scales: K·N/group_size of scale_dtype)"),
        ("gemv", [Param("M"), Param("K"), *_operands("abc"), *_groups()], _gemv, True, "2·M·K",
         "M·K·a + K·b + M·c + scales (a: the matrix, b: x, c: y; scales: M·K/group_size of scale_dtype)"),
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
          Param("causal", False, "flag"), Param("kv_heads", None), Param("head_dim_v", None),
          Param("window", None), Param("pass", None, "choice", ("fwd", "bwd", "fwd+bwd")),
          Param("shared_kv", False, "flag"),
          *_operands(("q", "kv", "o"))],
         _attention, True,
         "2·batch·heads·seq_q·avg_k·(head_dim + head_dim_v) (avg_k = seq_k; causal: (max(0, seq_k − "
         "seq_q) + seq_k)/2, capped by window; bwd ×2.5, fwd+bwd ×3.5)",
         "batch·(heads·seq_q·(head_dim·q + head_dim_v·o) + kv_heads·keys·(head_dim + head_dim_v)·kv) "
         "(keys = seq_k, or window + seq_q − 1; shared_kv: the cache once, no head_dim_v; "
         "bwd: Q K V dO read, dQ dK dV written)"),
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
    cross_checks = {
        "conv2d": _check_conv2d, "custom": _check_custom, "elementwise": _check_elementwise,
        "gemm": _check_groups, "gemv": _check_groups, "attention": _check_attention,
    }  # fmt: skip
    sources = {
        "attention": "FlashAttention's benchmark (flash_attn/utils/benchmark.py, causal bottom-right from "
        "FA 2.1) and FlashInfer's (bench_batch_decode: GQA K/V at kv_heads); not vLLM's perf metrics, "
        "which count prefill attention without the causal halving",
        "gemm": "W4A16 as Marlin and GPTQ store it: int4 weights, one fp16 scale per group_size along K",
    }
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
            packed=name in ("gemm", "gemv", "copy", "custom"),
            source=sources.get(name, ""),
            replace=True,
        )


def _operands(names: Iterable[str]) -> list[Param]:
    """``a_dtype``, ... : each operand's storage, ``dtype``'s where not given."""
    return [Param(f"{name}_dtype", None, "dtype") for name in names]


def _groups() -> list[Param]:
    """Block scales: ``group_size`` elements along K per scale, stored as ``scale_dtype``."""
    return [Param("group_size", None), Param("scale_dtype", None, "choice", tuple(SCALE_SIZES))]


_register_builtins()

from . import llm_ops  # noqa: E402, F401  (the LLM kernel set: registered on import)
