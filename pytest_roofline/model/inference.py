"""A budget with no op: what the kernel call is, inferred in three tiers (catalogue, flop_counter,
arguments: docs/usage.md, "Budgets without an op"), and what is known of it. Tiers 2 and 3 run the
kernel once (``timing/footprint.py``); this module says what their findings mean (:func:`from_arrays`,
:func:`count_numpy_calls`), and ``flops=`` or ``bytes=`` given alone override their half (:func:`with_given`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidValueError
from . import units
from .array_calls import map_array_call, moves_only
from .core import Cost, Precision, parse_dtype
from .op_registry import OpError
from .ops import get_op
from .torch_calls import map_torch_call

Tier = Literal["catalogue", "flop_counter", "arguments"]
#: where FLOPs and bytes came from
FlopsFrom = Literal["catalogue", "flop_counter", "given", "unknown"]
BytesFrom = Literal["catalogue", "arguments", "given"]
#: what counted the FLOPs of tier 2
Counter = Literal["FlopCounterMode", "NumPy"]

#: the verdict's reason for a miss it cannot call with the FLOPs unknown
UNKNOWN_FLOPS = "FLOPs unknown: give flops= or an op"
#: what FlopCounterMode counts, said wherever its FLOPs are used
FLOP_COUNTER_SCOPE = "matmul, convolution and attention only"


@dataclass(frozen=True, slots=True)
class ArrayUse:
    """One array a kernel was given or captured, or returned: where it was found, its bytes, and
    whether the first call changed it (None: it could not be told)."""

    where: str
    nbytes: int
    written: bool | None = False
    returned: bool = False

    def to_record(self) -> dict[str, Any]:
        return {"where": self.where, "bytes": self.nbytes, "written": self.written, "returned": self.returned}


@dataclass(frozen=True, slots=True)
class Inference:
    """What a call with no op was inferred to be: the op and parameters its floor is computed from,
    and where its FLOPs and bytes came from."""

    tier: Tier
    op: str
    params: Mapping[str, Any]
    dtype: str
    #: ``gemm M=4096 N=4096 K=4096 bf16``, ``bytes from 3 arrays, FLOPs unknown``
    summary: str
    flops_from: FlopsFrom
    bytes_from: BytesFrom
    #: tiers 2 and 3: the arrays the bytes were counted from
    arrays: tuple[ArrayUse, ...] = ()
    #: what counted the FLOPs, where the kernel ran under a counter (tier 2, or its fallback)
    counter: Counter | None = None

    @property
    def label(self) -> str:
        """How reports name the floor: ``auto: gemm M=4096 N=4096 K=4096 bf16``."""
        return f"auto: {self.summary}"

    @property
    def flops_known(self) -> bool:
        return self.flops_from != "unknown"

    def marker(self, min_fraction: float | None = None) -> str:
        """The explicit marker that gives the same floor, ready to paste over the test."""
        params = {
            k: v for k, v in self.params.items() if not (self.op == "custom" and k == "flops" and not v)
        }
        text = marker_text(self.op, params, self.dtype, min_fraction=min_fraction)
        return text if self.flops_known else f"{text}  # FLOPs unknown: count them and add flops="

    def overcount_note(self) -> str:
        """Why a faster-than-light reading of this inference may be the count's, and what to do."""
        if self.bytes_from == "arguments":
            total = sum(a.nbytes for a in self.arrays)
            # the arrays worth naming: those that hold a tenth of the bytes or more, the largest two
            read_only = (a for a in self.arrays if not a.written and a.nbytes >= total / 10)
            largest = sorted(read_only, key=lambda a: -a.nbytes)[:2]
            whole = ", ".join(f"{a.where} ({units.binary_bytes(a.nbytes)}, not written)" for a in largest)
            why = (
                "its bytes were inferred from the arrays it was given or captured, each counted whole"
                + (f" (the largest it only reads: {whole})" if whole else "")
                + ", and a kernel that reads only part of one (a paged KV pool, an embedding table read at"
                " a few rows) moves less"
            )
        elif self.counter == "FlopCounterMode" and self.flops_known:
            why = "its FLOPs are FlopCounterMode's, which counts causal attention as if it were unmasked"
        else:
            return ""
        return (
            f'{why}: declare the op, @pytest.mark.speed_of_light("<op>", ...) (`roofline ops` lists them),'
            " or give bytes= and flops="
        )

    def to_record(self, min_fraction: float | None = None) -> dict[str, Any]:
        """The record's ``inferred`` field (docs/json.md)."""
        return {
            "tier": self.tier, "summary": self.summary, "flops_from": self.flops_from,
            "bytes_from": self.bytes_from, "counter": self.counter, "marker": self.marker(min_fraction),
            "arrays": [a.to_record() for a in self.arrays],
        }  # fmt: skip


def marker_text(
    op: str, params: Mapping[str, object], dtype: str, *, min_fraction: float | None = None, **extra: object
) -> str:
    """``@pytest.mark.speed_of_light("op", k=v, ..., dtype="...", [extra...,] [min_fraction=...])``: a
    marker to paste over a test (``extra``: ``math="tf32"`` and the like)."""
    parts = [json.dumps(op), *(f"{_keyword(k)}={_literal(v)}" for k, v in params.items())]
    parts.append(f"dtype={json.dumps(dtype)}")
    parts += [f"{k}={_literal(v)}" for k, v in extra.items()]
    if min_fraction is not None:
        parts.append(f"min_fraction={min_fraction!r}")
    return f"@pytest.mark.speed_of_light({', '.join(parts)})"


def _keyword(name: str) -> str:
    """A parameter as a keyword argument: ``pass`` is written ``pass_``."""
    return f"{name}_" if keyword.iskeyword(name) else name


def _literal(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def flattened(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object]
) -> tuple[object, tuple[object, ...], dict[str, object]]:
    """The function a call reaches through ``functools.partial`` layers, with all its arguments."""
    call_args, call_kwargs = tuple(args), dict(kwargs)
    while isinstance(fn, functools.partial):
        call_args, call_kwargs = (*fn.args, *call_args), {**fn.keywords, **call_kwargs}
        fn = fn.func
    return fn, call_args, call_kwargs


def catalogue_call(
    fn: object, args: Sequence[object], kwargs: Mapping[str, object], dtype: Precision | None = None
) -> Inference | None:
    """Tier 1: the op ``fn(*args, **kwargs)`` is, when it is a library call the catalogue knows;
    ``dtype`` (the caller's, if any) is the op's dtype. Nothing runs."""
    fn, args, kwargs = flattened(fn, args, kwargs)
    mapped = map_array_call(fn, args, kwargs, dtype) or map_torch_call(fn, args, kwargs, dtype)
    if mapped is None:
        return None
    spec = get_op(mapped.op)
    try:
        checked = spec.check(mapped.params)
        spec.check_dtype(mapped.precision)
    except OpError as exc:
        if any(p.kind == "size" and mapped.params.get(p.name) == 0 for p in spec.params):
            raise InvalidValueError(
                f"no op was given, and the kernel's call is {mapped.op} on an empty array: {exc}"
            ) from None
        return None  # a format the op does not take: the next tier answers
    summary = " ".join(part for part in (mapped.op, spec.shape(checked), mapped.precision.label) if part)
    if mapped.note:
        summary += f" ({mapped.note})"
    return Inference("catalogue", mapped.op, dict(mapped.params), mapped.precision.label, summary,
                     "catalogue", "catalogue")  # fmt: skip


@dataclass(frozen=True, slots=True)
class SeenCall:
    """One NumPy call a counted run of the kernel made: as it was written (``np.add``, ``.sum()``),
    the library's function (a method bound to a plain array) and its arguments, plain arrays."""

    name: str
    fn: object
    args: tuple[object, ...]
    kwargs: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class FlopCount:
    """The FLOPs one run of the kernel counted (tier 2), and what counted them; ``flops`` None where
    the count cannot be used, ``why`` saying why."""

    counter: Counter
    flops: float | None
    #: the calls seen (NumPy), whether or not each was priced
    calls: int = 0
    #: the peak the FLOPs run at: ``tensor`` for matrix FLOPs, or FLOPs of unknown or mixed kinds
    unit: str = "tensor"
    why: str = ""
    #: a count of one call: that call, as tier 1 infers it (its marker pins the same floor)
    only: Inference | None = None


def count_numpy_calls(calls: Sequence[SeenCall], unseen: Sequence[str] = ()) -> FlopCount:
    """The FLOPs of the NumPy calls a kernel made, each priced as tier 1 prices it (one that only
    moves data at none), summed; unknown where none was seen, where ``unseen`` names an array the
    kernel holds that no call was seen to use (the calls on it were not counted), or where a call
    has no price."""
    if not calls:
        return FlopCount("NumPy", None, why="the counter saw no NumPy call")
    if unseen:
        return FlopCount("NumPy", None, len(calls), why=f"the counter did not see {unseen[0]} used")
    total, units, priced = 0.0, set(), []
    for call in calls:
        if moves_only(call.fn):
            continue
        try:
            found = catalogue_call(call.fn, call.args, call.kwargs)
        except InvalidValueError:  # a call on an empty array: no work
            continue
        if found is None:
            return FlopCount("NumPy", None, len(calls), why=f"{call.name} has no price in the catalogue")
        cost, unit = _cost(found)
        total += cost.flops
        units.add(unit)
        priced.append(found)
    unit = units.pop() if len(units) == 1 else "tensor"
    only = priced[0] if len(calls) == 1 and priced else None
    return FlopCount("NumPy", total, len(calls), unit, only=only)


def _cost(inference: Inference) -> tuple[Cost, str]:
    """What an inference's op costs, and the unit it runs on."""
    spec = get_op(inference.op)
    checked = spec.check(inference.params)
    return spec.cost(checked, parse_dtype(inference.dtype)), spec.unit_for(checked).value


def from_arrays(
    arrays: Sequence[ArrayUse],
    precision: Precision | None,
    *,
    counted: FlopCount | None = None,
    flops: float | None = None,
    nbytes: float | None = None,
) -> Inference:
    """Tiers 2 and 3: a ``custom`` op of the arrays' compulsory bytes (each once) and the FLOPs a
    run ``counted`` (None where none ran; ``FlopCounterMode``'s 0 is work it does not count, so
    unknown), unless ``flops=`` or ``bytes=`` was given. A count of one NumPy call whose op moves
    the same bytes is that op."""
    total = nbytes if nbytes is not None else sum(a.nbytes for a in arrays)
    work = counted.flops if counted is not None else None
    if counted is not None and counted.counter == "FlopCounterMode" and not work:
        work = None
    flops_from: FlopsFrom
    if flops is not None:
        flops_from, work = "given", float(flops)
    elif work is not None:
        flops_from = "flop_counter"
    else:
        flops_from, work = "unknown", 0.0
    if not total and not work and arrays:
        names = ", ".join(a.where for a in arrays)
        raise InvalidValueError(
            f"no op was given, and every array the kernel holds is empty ({names}): their size must be a"
            " positive integer; got 0"
        )
    if not total and not work:
        raise InvalidValueError(
            "no op was given, and nothing to infer one from: the kernel is no call the catalogue knows and"
            " holds no array (none among its arguments, kwargs, functools.partial arguments or closure; an"
            " array read from a module's globals is not seen); pass op=... (`roofline ops` lists them), or"
            " bytes= and flops="
        )
    if precision is None:
        raise InvalidValueError(
            "no op and no dtype were given, and the kernel holds no array to read a dtype from: pass"
            " dtype=... (or op=...) to the marker or the call"
        )
    moved = (
        "bytes= given" if nbytes is not None else f"bytes from {len(arrays)} array{'s' * (len(arrays) != 1)}"
    )
    counter = counted.counter if counted is not None else None
    tier: Tier = "flop_counter" if flops_from == "flop_counter" else "arguments"
    bytes_from: BytesFrom = "given" if nbytes is not None else "arguments"
    if flops_from == "flop_counter" and counted is not None and counted.counter == "NumPy":
        calls = f"FLOPs counted from {counted.calls} NumPy call{'s' * (counted.calls != 1)}"
        only = counted.only
        if only is not None and _cost(only)[0].bytes == total:
            return Inference(tier, only.op, only.params, only.dtype, f"{calls}: {only.summary}", flops_from,
                             bytes_from, tuple(arrays), counter)  # fmt: skip
        summary = f"{calls}, {moved}"
        unit = counted.unit
    else:
        work_words = {
            "given": "flops= given",
            "flop_counter": f"FLOPs from FlopCounterMode ({FLOP_COUNTER_SCOPE})",
            "unknown": UNKNOWN_FLOPS.split(":")[0],
        }[flops_from]
        why = counted.why if counted is not None and flops_from == "unknown" else ""
        summary = f"{moved}, {work_words}" + (f" ({why})" if why else "")
        # matrix FLOPs, or FLOPs of unknown kind: the higher peak keeps a floor a floor
        unit = "tensor"
    params: dict[str, Any] = {"flops": work, "bytes": total}
    if flops_from != "unknown" and unit != "vector":
        params["unit"] = unit
    return Inference(tier, "custom", params, precision.label, summary, flops_from, bytes_from, tuple(arrays),
                     counter)  # fmt: skip


def with_given(inference: Inference, *, flops: float | None = None, nbytes: float | None = None) -> Inference:
    """``inference`` with the half ``flops=`` or ``bytes=`` gives replaced, the other half kept (a
    catalogue op becomes ``custom`` with its own count of the other half, on its own unit)."""
    if flops is None and nbytes is None:
        return inference
    cost, unit = _cost(inference)
    params: dict[str, Any] = {
        "flops": float(flops) if flops is not None else cost.flops,
        "bytes": float(nbytes) if nbytes is not None else cost.bytes,
    }
    if unit != "vector":
        params["unit"] = unit
    given = " and ".join(
        f"{what}= given" for what, v in (("flops", flops), ("bytes", nbytes)) if v is not None
    )
    return dataclasses.replace(
        inference, op="custom", params=params, summary=f"{inference.summary}, {given}",
        flops_from="given" if flops is not None else inference.flops_from,
        bytes_from="given" if nbytes is not None else inference.bytes_from,
    )  # fmt: skip
