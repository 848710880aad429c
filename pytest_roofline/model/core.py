"""The roofline model: precisions, units, devices, costs and the speed-of-light estimate.

Pure arithmetic: no pytest, no cupy, no numpy. A kernel doing F FLOPs and moving B bytes of DRAM
traffic cannot finish before ``max(F / peak_flops, B / bandwidth)``; everything here exists to pick
the right peak and to say which of the two walls it hit.
"""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import InvalidValueError

Bound = Literal["compute", "memory"]
Kind = Literal["cpu", "cuda", "rocm"]


class Unit(str, enum.Enum):
    """Which arithmetic units a kernel can use."""

    TENSOR = "tensor"  # matrix units: tensor cores, matrix cores, AMX
    VECTOR = "vector"  # ordinary cores / SIMD lanes

    def __str__(self) -> str:
        return self.value


class Source(str, enum.Enum):
    """Where a figure came from: the report says it, since a floor is only as good as its peaks."""

    DATASHEET = "datasheet"
    DERIVED = "derived"
    MEASURED = "measured"
    USER = "user"

    def __str__(self) -> str:
        return self.value


class Precision(enum.Enum):
    """A numeric format: its canonical name and its storage size in bytes."""

    FP64 = ("fp64", 8)
    FP32 = ("fp32", 4)
    TF32 = ("tf32", 4)  # stored as fp32; only the tensor-core math is reduced
    FP16 = ("fp16", 2)
    BF16 = ("bf16", 2)
    FP8_E4M3 = ("fp8_e4m3", 1)
    FP8_E5M2 = ("fp8_e5m2", 1)
    # e2m1 packed two to a byte (ml_dtypes' float4_e2m1fn takes a byte each: not this); the
    # itemsize leaves out NVFP4's and MXFP4's block scales (docs/floor.md, "Precisions and units")
    FP4 = ("fp4", 0.5)
    # signed 4-bit integers packed two to a byte (GPTQ, AWQ, Marlin weights): storage only, with
    # no peak of its own (the math runs at the activations' dtype); ml_dtypes' int4 takes a byte each
    INT4 = ("int4", 0.5)
    INT8 = ("int8", 1)
    INT16 = ("int16", 2)
    INT32 = ("int32", 4)
    INT64 = ("int64", 8)
    UINT8 = ("uint8", 1)
    UINT16 = ("uint16", 2)
    UINT32 = ("uint32", 4)
    UINT64 = ("uint64", 8)
    BOOL = ("bool", 1)  # one byte per element, as numpy, CuPy and PyTorch store it
    COMPLEX32 = ("complex32", 4)  # two fp16 (PyTorch's chalf)
    COMPLEX64 = ("complex64", 8)  # two fp32
    COMPLEX128 = ("complex128", 16)  # two fp64

    def __init__(self, label: str, itemsize: float) -> None:
        self.label = label
        self.itemsize = itemsize

    def __str__(self) -> str:
        return self.label

    @property
    def rate_class(self) -> Precision:
        """The precision whose peak rates apply: both fp8 formats run at the same rate, unsigned
        integers at their signed width's, complex numbers at their components' (real arithmetic)."""
        return _RATE_CLASS.get(self, self)

    @property
    def integral(self) -> bool:
        """Integers and bool: their work is operations, not FLOPs, and only an integer peak bounds it."""
        return self in _INTEGRAL

    @property
    def component(self) -> Precision | None:
        """The real format of a complex one's two parts (complex64 -> fp32); None for real formats."""
        return _COMPONENT.get(self)


_COMPONENT: dict[Precision, Precision] = {
    Precision.COMPLEX32: Precision.FP16,
    Precision.COMPLEX64: Precision.FP32,
    Precision.COMPLEX128: Precision.FP64,
}
_RATE_CLASS: dict[Precision, Precision] = {
    Precision.FP8_E5M2: Precision.FP8_E4M3,
    Precision.UINT8: Precision.INT8,
    Precision.UINT16: Precision.INT16,
    Precision.UINT32: Precision.INT32,
    Precision.UINT64: Precision.INT64,
    **_COMPONENT,
}
_INTEGRAL = frozenset(
    (
        Precision.INT4, Precision.INT8, Precision.INT16, Precision.INT32, Precision.INT64,
        Precision.UINT8, Precision.UINT16, Precision.UINT32, Precision.UINT64, Precision.BOOL,
    )
)  # fmt: skip

_DTYPE_ALIASES: dict[str, Precision] = {
    # "float" is numpy's float64, as in np.dtype(float), and "complex" its complex128; "f8", "i8",
    # "u8", "int" and a few more are refused as ambiguous (see _AMBIGUOUS)
    **dict.fromkeys(("fp64", "float64", "f64", "double", "float", "float_"), Precision.FP64),
    **dict.fromkeys(("fp32", "float32", "f32", "single", "f4"), Precision.FP32),
    **dict.fromkeys(("tf32", "tensorfloat32"), Precision.TF32),
    **dict.fromkeys(("fp16", "float16", "f16", "half", "f2"), Precision.FP16),
    **dict.fromkeys(("bf16", "bfloat16"), Precision.BF16),
    **dict.fromkeys(
        ("fp8", "fp8_e4m3", "e4m3", "float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz"), Precision.FP8_E4M3
    ),
    **dict.fromkeys(("fp8_e5m2", "e5m2", "float8_e5m2", "float8_e5m2fnuz"), Precision.FP8_E5M2),
    # PyTorch's float4_e2m1fn_x2 packs two values to a byte, as fp4 does (ml_dtypes' float4_e2m1fn
    # takes a byte each, so it is not this)
    **dict.fromkeys(("fp4", "fp4_e2m1", "e2m1", "nvfp4", "mxfp4", "float4_e2m1fn_x2"), Precision.FP4),
    **dict.fromkeys(("int4", "s4", "qint4", "int4_packed"), Precision.INT4),
    **dict.fromkeys(("int8", "i1", "s8", "qint8"), Precision.INT8),
    **dict.fromkeys(("int16", "i2", "i16", "s16", "short"), Precision.INT16),
    **dict.fromkeys(("int32", "i4", "i32", "s32", "intc", "qint32"), Precision.INT32),
    **dict.fromkeys(("int64", "i64", "s64", "longlong"), Precision.INT64),
    **dict.fromkeys(("uint8", "u1", "ubyte", "quint8"), Precision.UINT8),
    **dict.fromkeys(("uint16", "u2", "u16", "ushort"), Precision.UINT16),
    **dict.fromkeys(("uint32", "u4", "u32", "uintc"), Precision.UINT32),
    **dict.fromkeys(("uint64", "u64", "ulonglong"), Precision.UINT64),
    **dict.fromkeys(("bool", "bool_", "bool8", "b1", "boolean"), Precision.BOOL),
    **dict.fromkeys(("complex32", "chalf"), Precision.COMPLEX32),
    **dict.fromkeys(("complex64", "c8", "cfloat", "csingle", "singlecomplex"), Precision.COMPLEX64),
    **dict.fromkeys(("complex128", "c16", "cdouble", "complex", "complex_"), Precision.COMPLEX128),
}

#: numpy's one-character type codes, read with their case: "B" is uint8 where "b" is int8, "F"
#: complex64 where "f" is fp32
_TYPE_CODES: dict[str, Precision] = {
    "d": Precision.FP64, "f": Precision.FP32, "e": Precision.FP16,
    "b": Precision.INT8, "h": Precision.INT16, "i": Precision.INT32, "q": Precision.INT64,
    "B": Precision.UINT8, "H": Precision.UINT16, "I": Precision.UINT32, "Q": Precision.UINT64,
    "?": Precision.BOOL, "F": Precision.COMPLEX64, "D": Precision.COMPLEX128,
}  # fmt: skip

#: numpy's type strings (``np.dtype("int64").str`` is "<i8"): with their byte order they can only
#: be numpy's, so "<f8" is float64 and "<i8" int64 where a bare "f8" or "i8" is ambiguous
_TYPE_STRINGS: dict[str, Precision] = {
    "f2": Precision.FP16, "f4": Precision.FP32, "f8": Precision.FP64,
    "i1": Precision.INT8, "i2": Precision.INT16, "i4": Precision.INT32, "i8": Precision.INT64,
    "u1": Precision.UINT8, "u2": Precision.UINT16, "u4": Precision.UINT32, "u8": Precision.UINT64,
    "b1": Precision.BOOL, "c8": Precision.COMPLEX64, "c16": Precision.COMPLEX128,
}  # fmt: skip

#: spellings that name different formats to different readers, and what to write instead
_AMBIGUOUS: dict[str, str] = {
    "f8": "numpy reads it as float64, ML code as fp8; write fp64 or fp8",
    "i8": "numpy reads it as int64, ML code as int8; write int64 or int8",
    "u8": "numpy reads it as uint64, ML code as uint8; write uint64 or uint8",
    "int": "numpy reads it as int64 (int32 on Windows before NumPy 2), C as int32; write int64 or int32",
    "int_": "numpy reads it as int64 (int32 on Windows before NumPy 2); write int64 or int32",
    "long": "PyTorch reads it as int64, numpy as a C long (int32 on Windows); write int64 or int32",
    "uint": "numpy reads it as a C unsigned long (uint32 on Windows before NumPy 2); write uint64 or uint32",
    "byte": "numpy reads it as int8, PyTorch as uint8; write int8 or uint8",
    "l": "numpy reads it as a C long (int32 on Windows); write int64 or int32",
    "L": "numpy reads it as a C unsigned long (uint32 on Windows); write uint64 or uint32",
}
#: formats no device sheet covers
_UNSUPPORTED: dict[str, str] = dict.fromkeys(
    ("float128", "float96", "longdouble", "longfloat", "g", "complex256", "complex192", "clongdouble", "G"),
    "extended precision (long double) runs on no unit with a known peak",
)

#: numpy's dtype kinds that hold no numbers, as a reader would name them
_NON_NUMERIC_KINDS: dict[str, str] = {
    "U": "strings", "T": "strings", "S": "byte strings", "a": "byte strings", "O": "Python objects",
    "V": "a structured or raw-bytes type", "M": "datetimes", "m": "time deltas",
}  # fmt: skip
_NON_NUMERIC_NAMES = re.compile(
    r"(?P<name>str|string|unicode|bytes|object|void|datetime64|timedelta64|category|stringdtype)_?"
    r"\d*(\[\w*\])?(\(\))?"
)
_NON_NUMERIC_WORDS = {
    "str": "T", "string": "T", "unicode": "T", "stringdtype": "T", "bytes": "S", "object": "O",
    "void": "V", "datetime64": "M", "timedelta64": "m",
}  # fmt: skip
_NON_NUMERIC_CODES = re.compile(r"[<>|=]?(?P<code>[USOVMmaT])\d*(\[\w*\])?")

#: the spellings ``parse_dtype`` accepts, for error messages and ``roofline ops``
ACCEPTED_DTYPES: tuple[str, ...] = tuple(sorted({*_DTYPE_ALIASES, *_TYPE_CODES}))


def parse_dtype(dtype: object) -> Precision:
    """Turn what users write into a Precision: a Precision, a name or numpy type code ("bf16",
    "float32", "i4"), a numpy/CuPy/PyTorch/JAX dtype or scalar type, or an array-like's ``.dtype``.
    Raises InvalidValueError (a ValueError) for a non-numeric, ambiguous, unsupported or unknown dtype.
    """
    if isinstance(dtype, Precision):
        return dtype
    non_numeric = _non_numeric(dtype)
    if non_numeric is not None:
        shown, what = non_numeric
        raise InvalidValueError(
            f"dtype {shown!r} is not numeric ({what}): pytest-roofline needs the numeric dtype of the "
            "data the kernel really moves (uint8 for raw bytes)"
        )
    name = _dtype_name(dtype)
    code = name.strip()
    if code in _TYPE_CODES:  # one character: case matters
        return _TYPE_CODES[code]
    if code[:1] in ("<", ">", "|", "=") and code[1:] in _TYPE_STRINGS:  # byte order changes nothing here
        return _TYPE_STRINGS[code[1:]]
    key = name.strip().lower().replace("-", "_").replace(" ", "")
    key = key.removeprefix("torch.").removeprefix("numpy.").removeprefix("np.").removeprefix("jnp.")
    for table in (_AMBIGUOUS, _UNSUPPORTED):
        why = table.get(code) or table.get(key)
        if why is not None:
            kind = "ambiguous" if table is _AMBIGUOUS else "not supported"
            raise InvalidValueError(f"dtype {name!r} is {kind}: {why}")
    try:
        return _DTYPE_ALIASES[key]
    except KeyError:
        raise InvalidValueError(
            f"unknown dtype {name!r}{did_you_mean(key, _DTYPE_ALIASES)}; "
            f"accepted: {', '.join(p.label for p in Precision)} (also numpy/cupy/torch dtypes and "
            "spellings such as float32, f32, half, bfloat16, double, i4, c8)"
        ) from None


def _non_numeric(dtype: object) -> tuple[str, str] | None:
    """(how to show it, what it holds) for a dtype that holds no numbers, else None.

    numpy dtypes say so by their ``kind``; strings and types by numpy's names and codes.
    """
    inner = getattr(dtype, "dtype", None)
    if inner is not None and inner is not dtype and not isinstance(dtype, (str, type)):
        return _non_numeric(inner)
    kind = getattr(dtype, "kind", None)
    if not isinstance(dtype, (str, type)) and isinstance(kind, str):
        return (str(dtype), _NON_NUMERIC_KINDS[kind]) if kind in _NON_NUMERIC_KINDS else None
    text = _dtype_name(dtype).strip()
    code = _NON_NUMERIC_CODES.fullmatch(text)
    if code is not None:
        return text, _NON_NUMERIC_KINDS[code["code"]]
    key = text.lower().removeprefix("numpy.").removeprefix("np.").removeprefix("pandas.")
    word = _NON_NUMERIC_NAMES.fullmatch(key.removeprefix("numpy.dtypes.").removesuffix("dtype()"))
    if word is not None:
        name = word["name"]
        return text, "categories" if name == "category" else _NON_NUMERIC_KINDS[_NON_NUMERIC_WORDS[name]]
    return None


def _dtype_name(dtype: object) -> str:
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, type):
        # numpy scalar types (np.float32) and ml_dtypes types carry the dtype name as __name__
        return dtype.__name__
    inner = getattr(dtype, "dtype", None)
    if inner is not None and inner is not dtype:
        return _dtype_name(inner)
    name = getattr(dtype, "name", None)  # numpy / cupy dtype objects
    return name if isinstance(name, str) else str(dtype)  # torch.float16 prints as "torch.float16"


@dataclass(frozen=True, slots=True)
class Figure:
    """One number on a device sheet and where it came from."""

    #: the figure as its source quotes it: the floor and attained use it
    value: float
    source: Source
    note: str = ""
    #: the same unit's rate at the maximum SM clock where ``value`` is quoted at a lower one, else
    #: None: only for the faster-than-light limit (:func:`~.verdict.ftl_limit`), never for a floor
    at_max_clock: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.value) and self.value > 0):
            raise InvalidValueError(f"a device figure must be a positive finite number; got {self.value!r}")
        if self.at_max_clock is not None and not (
            math.isfinite(self.at_max_clock) and self.at_max_clock >= self.value
        ):
            raise InvalidValueError(
                f"a figure's rate at the maximum clock must be finite and at least the figure "
                f"({self.value!r}); got {self.at_max_clock!r}"
            )

    @property
    def clock_headroom(self) -> float:
        """How far a kernel at the maximum SM clock can beat ``value``: ``at_max_clock / value``, or 1."""
        return 1.0 if self.at_max_clock is None else self.at_max_clock / self.value


PeakTable = Mapping[tuple[Precision, Unit], Figure]

#: a warm op is judged at the smallest cache level whose capacity, times this, holds its bytes
#: (why the whole capacity: docs/methodology.md)
LEVEL_FILL = 1.0


@dataclass(frozen=True, slots=True)
class MemoryLevel:
    """A cache level a warm kernel's bytes can be served from, and its bandwidth.

    ``capacity_bytes`` is one core's share where the level is per core (a CPU's L1 and, on most
    CPUs, L2): a kernel's bytes count against the cache of the core it runs on.
    """

    #: ``l1``, ``l2``, ``l3`` (DRAM is the device's own ``bandwidth``)
    name: str
    capacity_bytes: int
    bandwidth: Figure
    per_core: bool = False

    def __post_init__(self) -> None:
        if (
            isinstance(self.capacity_bytes, bool)
            or not isinstance(self.capacity_bytes, int)
            or (self.capacity_bytes < 1)
        ):
            raise InvalidValueError(
                f"a memory level's capacity must be a positive integer; got {self.capacity_bytes!r}"
            )

    def holds(self, nbytes: float) -> bool:
        """Whether this level serves ``nbytes``, all or in part (:data:`LEVEL_FILL`)."""
        return nbytes <= LEVEL_FILL * self.capacity_bytes


@dataclass(frozen=True, slots=True)
class CacheSize:
    """A cache level's capacity as the OS (or the GPU's driver) reports it, and as this process sees it
    (docs/cache.md, "How big the caches are").

    ``effective_bytes``: where a footprint sweep's bandwidth steps down; None where the sweep saw no
    step (the level is not used). ``found``: ``knee``, ``unseen``, or ``unreached`` (the sweep stopped
    short of it: the reported size stands).
    """

    level: int
    reported_bytes: int
    effective_bytes: int | None
    per_core: bool = False
    found: Literal["knee", "unseen", "unreached"] = "knee"
    note: str = ""
    #: the capacity each sweep found, where it took several; ``effective_bytes`` is the largest
    seen: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return f"l{self.level}"

    @property
    def sizing_bytes(self) -> int:
        """What to size by: the effective figure, or the reported one where the sweep saw none (the
        larger guess keeps a cold measurement cold)."""
        return self.effective_bytes or self.reported_bytes


@dataclass(frozen=True, slots=True)
class Device:
    """A device's ceilings: peak FLOP/s per (precision, unit), DRAM bandwidth, cache, core count."""

    key: str
    name: str
    kind: Kind
    peaks: PeakTable
    bandwidth: Figure  # bytes per second
    #: last-level cache (L2 on most GPUs, the Infinity Cache on MI300-series, L3 on most CPUs): the
    #: capacity this process sees where it was measured (:attr:`caches`), else what the OS or the
    #: datasheet says
    llc_bytes: int | None = None
    cores: int | None = None  # SMs, CUs or CPU cores
    names: tuple[str, ...] = ()  # names the driver reports for this device (CUDA, ROCm)
    notes: tuple[str, ...] = ()
    #: the cache levels with a known bandwidth, smallest first (DRAM is ``bandwidth``)
    levels: tuple[MemoryLevel, ...] = ()
    #: every cache level the OS or the driver reports, with the capacity a sweep found for it,
    #: smallest first; empty where no sweep ran
    caches: tuple[CacheSize, ...] = ()
    #: the GPU-to-GPU link's bandwidth per GPU and direction (NVLink, xGMI), bytes/s, where known:
    #: what a tensor-parallel all-reduce moves its bytes at
    interconnect: Figure | None = None

    def level_for(self, nbytes: float) -> MemoryLevel | None:
        """The smallest cache level that holds ``nbytes`` (a warm op's bytes), None for DRAM."""
        return next((level for level in self.levels if level.holds(nbytes)), None)

    def peak(self, precision: Precision, unit: Unit) -> Figure | None:
        """The table's own peak for (precision, unit), or None when the sheet has none."""
        return self.peaks.get((precision.rate_class, unit))

    def resolve_peak(self, precision: Precision, unit: Unit) -> tuple[Figure | None, Unit]:
        """The peak a kernel of this precision and unit runs against, falling back honestly: a missing tensor
        peak to the vector one, a narrow float format's missing vector peak to the fastest float vector peak
        (marked derived); a missing integer peak is None, the compute side unknown. Why: docs/floor.md
        ("Precisions and units").
        """
        figure = self.peak(precision, unit)
        if figure is not None:
            return figure, unit
        if unit is Unit.TENSOR:
            return self.resolve_peak(precision, Unit.VECTOR)
        if precision is Precision.TF32:  # TF32 exists only in tensor units; off them it is fp32
            return self.resolve_peak(Precision.FP32, Unit.VECTOR)
        if precision.integral:
            return None, Unit.VECTOR
        vector = [(fig, p) for (p, u), fig in self.peaks.items() if u is Unit.VECTOR and not p.integral]
        if not vector:
            raise InvalidValueError(
                f"device {self.key!r} has no vector peak for {precision} or any other precision"
            )
        fig, used = max(vector, key=lambda item: item[0].value)
        return (
            Figure(
                fig.value,
                Source.DERIVED,
                f"no {precision} vector figure; {used} vector peak used",
                fig.at_max_clock,
            ),
            Unit.VECTOR,
        )

    def ridge(self, precision: Precision, unit: Unit) -> float | None:
        """Arithmetic intensity (FLOP/byte) where compute time equals memory time; None when the
        device has no peak for the precision (integers without an integer peak)."""
        peak, _ = self.resolve_peak(precision, unit)
        return None if peak is None else peak.value / self.bandwidth.value

    def with_figures(
        self, *, peaks: PeakTable | None = None, bandwidth: Figure | None = None, key: str | None = None
    ) -> Device:
        """A copy with some figures replaced (measured or user ceilings)."""
        return replace(
            self,
            key=key or self.key,
            peaks=dict(peaks) if peaks is not None else self.peaks,
            bandwidth=bandwidth or self.bandwidth,
        )


@dataclass(frozen=True, slots=True)
class Cost:
    """What one call of an op does: FLOPs (or integer ops) and bytes of DRAM traffic.

    ``parts``: a sequence of kernels (a whole model step) whose floor is the *sum* of their own
    floors, each on its own unit (``part_units``: "tensor" or "vector"), not the floor of the sums
    (why: docs/llm.md ("A whole model: `roofline llm`")).
    """

    flops: float
    bytes: float
    parts: tuple[tuple[float, float, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Estimate:
    """The speed-of-light floor of one op on one device, and everything that went into it."""

    op: str
    params: Mapping[str, object]
    precision: Precision  # of the data: sets the byte count
    peak_precision: Precision  # of the math: picks the peak (fp32 data with TF32 math differs)
    unit: Unit
    device: Device
    flops: float
    bytes: float
    intensity: float  # FLOP per byte; inf when the op moves no bytes
    #: None when the device has no peak for the math's precision (an integer without an integer
    #: peak): the compute side is unknown, the floor is the memory time and the bound "memory"
    compute_s: float | None
    memory_s: float
    floor_s: float
    bound: Bound
    ridge: float | None  # None with an unknown peak
    peak_flops: float | None  # None with an unknown peak
    bandwidth: float
    peak_source: Source | None  # None with an unknown peak
    bandwidth_source: Source
    #: ``gemm[M=4096 N=4096 K=4096 bf16]``: how reports and failures name this floor
    label: str = ""
    #: ``M=4096 N=4096 K=4096``: the parameters that matter to a reader (defaults left out)
    shape: str = ""
    peak_note: str = ""
    #: the memory level whose bandwidth the memory time is taken at: ``dram``, or the cache level
    #: that serves a warm op (:func:`at_level`)
    memory_level: str = "dram"
    #: the peak's rate at the device's maximum SM clock (:attr:`Figure.at_max_clock`): for the
    #: faster-than-light limit only
    peak_at_max_clock: float | None = None

    @property
    def bounding_figure(self) -> Figure:
        """The ceiling that bounds this floor: the peak FLOP/s when compute-bound, else the bandwidth
        (of the memory level that serves the bytes)."""
        if self.bound == "compute" and self.peak_flops is not None and self.peak_source is not None:
            return Figure(self.peak_flops, self.peak_source, self.peak_note, self.peak_at_max_clock)
        return Figure(self.bandwidth, self.bandwidth_source)


def at_level(estimate: Estimate, level: MemoryLevel) -> Estimate:
    """``estimate`` with its bytes served by the cache ``level``: the memory time at the level's
    bandwidth (the cache-aware roofline), the bound and the ridge taken again."""
    bandwidth = level.bandwidth.value
    memory_s = estimate.bytes / bandwidth
    compute_s = estimate.compute_s
    bound: Bound = "compute" if compute_s is not None and compute_s > memory_s else "memory"
    return replace(
        estimate,
        memory_s=memory_s,
        floor_s=max(compute_s or 0.0, memory_s),
        bound=bound,
        ridge=None if estimate.peak_flops is None else estimate.peak_flops / bandwidth,
        bandwidth=bandwidth,
        bandwidth_source=level.bandwidth.source,
        memory_level=level.name,
    )


def roofline(
    cost: Cost,
    precision: Precision,
    unit: Unit,
    device: Device,
    *,
    op: str = "custom",
    params: Mapping[str, object] | None = None,
    label: str = "",
    shape: str = "",
    peak_precision: Precision | None = None,
) -> Estimate:
    """The floor of ``cost`` on ``device``: max(compute time, memory time).

    ``precision`` is the data's; ``peak_precision`` (default: the same, a complex format's
    component) is the math's. Where the device has no peak for the math (integers without an
    integer peak), the compute side is unknown and the floor is the memory time; an op with no bytes
    to move then has no floor: InvalidValueError.
    """
    math_precision = peak_precision or precision.component or precision
    peak, used_unit = device.resolve_peak(math_precision, unit)
    bandwidth = device.bandwidth
    memory_s = cost.bytes / bandwidth.value
    compute_s: float | None
    if cost.parts:
        compute_s, memory_s = _summed_times(cost, math_precision, device)
        note = "the sum of its kernels' floors, each on its own unit"
        peak = peak or device.resolve_peak(math_precision, Unit.VECTOR)[0]
    elif peak is not None:
        compute_s = cost.flops / peak.value
        note = peak.note
    elif cost.flops:
        if not cost.bytes:
            raise InvalidValueError(
                f"{label or op} has no floor on {device.key}: it moves no bytes and the device has no "
                f"{math_precision.rate_class} peak (give one in a peaks file as "
                f"'{math_precision.rate_class}:vector')"
            )
        compute_s = None
        note = f"compute side unknown: no {math_precision.rate_class} peak on {device.key}"
    else:
        compute_s, note = 0.0, ""  # no work takes no time, whatever the peak
    # Ties go to memory: with nothing to compute, or equal times, moving bytes is the wall.
    bound: Bound = "compute" if compute_s is not None and compute_s > memory_s else "memory"
    # a sequence of kernels' floor is the sum of theirs, each at its own wall
    floor_s = (compute_s or 0.0) + memory_s if cost.parts else max(compute_s or 0.0, memory_s)
    intensity = cost.flops / cost.bytes if cost.bytes else math.inf
    return Estimate(
        op=op,
        params=dict(params or {}),
        precision=precision,
        peak_precision=math_precision,
        unit=used_unit,
        device=device,
        flops=cost.flops,
        bytes=cost.bytes,
        intensity=intensity,
        compute_s=compute_s,
        memory_s=memory_s,
        floor_s=floor_s,
        bound=bound,
        ridge=None if peak is None else peak.value / bandwidth.value,
        peak_flops=None if peak is None else peak.value,
        bandwidth=bandwidth.value,
        peak_source=None if peak is None else peak.source,
        bandwidth_source=bandwidth.source,
        label=label or f"{op}[{precision}]",
        shape=shape,
        peak_note=note,
        peak_at_max_clock=None if peak is None else peak.at_max_clock,
    )


def _summed_times(cost: Cost, precision: Precision, device: Device) -> tuple[float, float]:
    """(compute time, memory time) of a sequence of kernels: the compute and memory times of the
    parts whose wall they are."""
    compute_s = memory_s = 0.0
    for flops, nbytes, unit in cost.parts:
        peak, _ = device.resolve_peak(precision, Unit(unit))
        part_memory = nbytes / device.bandwidth.value
        part_compute = flops / peak.value if peak is not None else 0.0
        if part_compute > part_memory:
            compute_s += part_compute
        else:
            memory_s += part_memory
    return compute_s, memory_s


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'K'?)`` when choices are close to ``word`` (equally close ones all named:
    'gemn' could be 'gemm' or 'gemv'), else an empty string."""
    close = [repr(c) for c in close_matches(word, choices)]
    if not close:
        return ""
    names = f"{', '.join(close[:-1])} or {close[-1]}" if len(close) > 1 else close[0]
    return f" (did you mean {names}?)"


def close_matches(word: str, choices: Iterable[str]) -> list[str]:
    """The choices close to ``word``, sorted: those it is a prefix of (up to three: 'h100' is
    'h100-nvl', 'h100-pcie' or 'h100-sxm'), else the closest (up to two)."""
    if not word:
        return []  # nothing typed is close to everything
    names = list(dict.fromkeys(choices))
    extending = sorted(n for n in names if n.lower().startswith(word.lower()) and n != word)
    if extending:  # "a100-pcie" is a prefix of 'a100-pcie-80gb', which beats the closer-looking 'h100-pcie'
        return extending[:3]
    scored = sorted(
        ((difflib.SequenceMatcher(None, word, name).ratio(), name) for name in names), key=lambda t: -t[0]
    )
    close = [name for ratio, name in scored if ratio >= 0.5 and ratio == scored[0][0]] if scored else []
    # the same letters swapped is the likelier typo: 'int46' is int64, not int16 (nor the closer int4)
    letters = sorted(word.lower())
    swapped = [name for ratio, name in scored if ratio >= 0.5 and sorted(name.lower()) == letters]
    close = (swapped or close)[:2]
    if not close:
        lowered = {n.lower(): n for n in names}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    return sorted(close)
