"""The roofline model: precisions, units, devices, costs and the speed-of-light estimate.

Pure arithmetic: no pytest, no cupy, no numpy. A kernel doing F FLOPs and moving B bytes of DRAM
traffic cannot finish before ``max(F / peak_flops, B / bandwidth)``; everything here exists to pick
the right peak and to say which of the two walls it hit.
"""

from __future__ import annotations

import difflib
import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

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
    INT8 = ("int8", 1)

    def __init__(self, label: str, itemsize: int) -> None:
        self.label = label
        self.itemsize = itemsize

    def __str__(self) -> str:
        return self.label

    @property
    def rate_class(self) -> Precision:
        """The precision whose peak rates apply: both fp8 formats run at the same rate."""
        return Precision.FP8_E4M3 if self is Precision.FP8_E5M2 else self


_DTYPE_ALIASES: dict[str, Precision] = {
    # "float" is numpy's float64, as in np.dtype(float); "f8" is refused as ambiguous (see parse_dtype)
    **dict.fromkeys(("fp64", "float64", "f64", "double", "float", "d", "float_"), Precision.FP64),
    **dict.fromkeys(("fp32", "float32", "f32", "single", "f4", "f"), Precision.FP32),
    **dict.fromkeys(("tf32", "tensorfloat32"), Precision.TF32),
    **dict.fromkeys(("fp16", "float16", "f16", "half", "f2", "e"), Precision.FP16),
    **dict.fromkeys(("bf16", "bfloat16"), Precision.BF16),
    **dict.fromkeys(
        ("fp8", "fp8_e4m3", "e4m3", "float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz"), Precision.FP8_E4M3
    ),
    **dict.fromkeys(("fp8_e5m2", "e5m2", "float8_e5m2", "float8_e5m2fnuz"), Precision.FP8_E5M2),
    **dict.fromkeys(("int8", "i8", "i1", "b", "s8", "qint8"), Precision.INT8),
}

#: the spellings ``parse_dtype`` accepts, for error messages and ``roofline ops``
ACCEPTED_DTYPES: tuple[str, ...] = tuple(sorted(_DTYPE_ALIASES))


def parse_dtype(dtype: object) -> Precision:
    """Turn what users write into a Precision.

    Accepts a Precision, strings ("float32", "fp32", "f32", "half", "bfloat16", "bf16", ...), numpy
    dtypes and scalar types (``np.float32``), and CuPy/PyTorch/JAX dtypes by their name
    (``torch.bfloat16`` -> "bfloat16"). An array-like is read through its ``.dtype``. Anything else is
    a ValueError naming the spelling and listing the accepted ones.
    """
    if isinstance(dtype, Precision):
        return dtype
    name = _dtype_name(dtype)
    key = name.strip().lower().replace("-", "_").replace(" ", "")
    key = key.removeprefix("torch.").removeprefix("numpy.").removeprefix("np.").removeprefix("jnp.")
    if key == "f8":
        raise ValueError(
            "dtype 'f8' is ambiguous: numpy reads it as float64, ML code as fp8; write fp64 or fp8"
        )
    try:
        return _DTYPE_ALIASES[key]
    except KeyError:
        raise ValueError(
            f"unknown dtype {name!r}{did_you_mean(key, _DTYPE_ALIASES)}; "
            f"accepted: {', '.join(_PRIMARY_NAMES)} "
            f"(also numpy/cupy/torch dtypes and spellings such as {', '.join(_EXAMPLE_SPELLINGS)})"
        ) from None


_PRIMARY_NAMES = tuple(p.label for p in Precision)
_EXAMPLE_SPELLINGS = ("float32", "f32", "half", "bfloat16", "double")


def _dtype_name(dtype: object) -> str:
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, type):
        # numpy scalar types (np.float32) and ml_dtypes types carry the dtype name as __name__
        return dtype.__name__
    inner = getattr(dtype, "dtype", None)
    if inner is not None and inner is not dtype and not isinstance(dtype, type):
        return _dtype_name(inner)
    name = getattr(dtype, "name", None)  # numpy / cupy dtype objects
    if isinstance(name, str):
        return name
    return str(dtype)  # torch.float16 prints as "torch.float16"


@dataclass(frozen=True, slots=True)
class Figure:
    """One number on a device sheet and where it came from."""

    value: float
    source: Source
    note: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"a device figure must be a positive finite number; got {self.value!r}")


PeakTable = Mapping[tuple[Precision, Unit], Figure]


@dataclass(frozen=True, slots=True)
class Device:
    """A device's ceilings: peak FLOP/s per (precision, unit), DRAM bandwidth, cache, core count."""

    key: str
    name: str
    kind: Kind
    peaks: PeakTable
    bandwidth: Figure  # bytes per second
    llc_bytes: int | None = None  # last-level cache (L2 on GPUs, L3 on most CPUs)
    cores: int | None = None  # SMs, CUs or CPU cores
    names: tuple[str, ...] = ()  # names the driver reports for this device (CUDA, ROCm)
    notes: tuple[str, ...] = ()

    def peak(self, precision: Precision, unit: Unit) -> Figure | None:
        """The table's own peak for (precision, unit), or None when the sheet has none."""
        return self.peaks.get((precision.rate_class, unit))

    def resolve_peak(self, precision: Precision, unit: Unit) -> tuple[Figure, Unit]:
        """The peak a kernel of this precision and unit runs against, falling back honestly.

        A missing tensor peak falls back to the vector one (the kernel cannot use units that
        are not there). A missing vector peak for a narrow format falls back to the fastest vector
        peak the sheet has, marked derived: narrow formats are at least as fast as fp32 on every
        device we know, and a floor must never be above the true best time.
        """
        figure = self.peak(precision, unit)
        if figure is not None:
            return figure, unit
        if unit is Unit.TENSOR:
            return self.resolve_peak(precision, Unit.VECTOR)
        if precision is Precision.TF32:  # TF32 exists only in tensor units; off them it is fp32
            return self.resolve_peak(Precision.FP32, Unit.VECTOR)
        vector = [(fig, p) for (p, u), fig in self.peaks.items() if u is Unit.VECTOR]
        if not vector:
            raise ValueError(f"device {self.key!r} has no vector peak for {precision} or any other precision")
        fig, used = max(vector, key=lambda item: item[0].value)
        return (
            Figure(fig.value, Source.DERIVED, f"no {precision} vector figure; {used} vector peak used"),
            Unit.VECTOR,
        )

    def ridge(self, precision: Precision, unit: Unit) -> float:
        """Arithmetic intensity (FLOP/byte) where compute time equals memory time."""
        peak, _ = self.resolve_peak(precision, unit)
        return peak.value / self.bandwidth.value

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
    """What one call of an op does: FLOPs (or integer ops) and bytes of DRAM traffic."""

    flops: float
    bytes: float


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
    compute_s: float
    memory_s: float
    floor_s: float
    bound: Bound
    ridge: float
    peak_flops: float
    bandwidth: float
    peak_source: Source
    bandwidth_source: Source
    #: ``gemm[M=4096 N=4096 K=4096 bf16]``: how reports and failures name this floor
    label: str = ""
    #: ``M=4096 N=4096 K=4096``: the parameters that matter to a reader (defaults left out)
    shape: str = ""
    peak_note: str = ""


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

    ``precision`` is the data's; ``peak_precision`` (default: the same) is the math's.
    """
    math_precision = peak_precision or precision
    peak, used_unit = device.resolve_peak(math_precision, unit)
    bandwidth = device.bandwidth
    compute_s = cost.flops / peak.value
    memory_s = cost.bytes / bandwidth.value
    # Ties go to memory: with nothing to compute, or equal times, moving bytes is the wall.
    bound: Bound = "compute" if compute_s > memory_s else "memory"
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
        floor_s=max(compute_s, memory_s),
        bound=bound,
        ridge=peak.value / bandwidth.value,
        peak_flops=peak.value,
        bandwidth=bandwidth.value,
        peak_source=peak.source,
        bandwidth_source=bandwidth.source,
        label=label or f"{op}[{precision}]",
        shape=shape,
        peak_note=peak.note,
    )


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'K'?)`` when choices are close to ``word`` (up to two, equally close ones
    both named: 'gemn' could be 'gemm' or 'gemv'), else an empty string."""
    if not word:
        return ""  # nothing typed is close to everything
    names = list(dict.fromkeys(choices))
    extending = sorted(n for n in names if n.lower().startswith(word.lower()) and n != word)
    if extending:  # "a100-pcie" is a prefix of 'a100-pcie-80gb', which beats the closer-looking 'h100-pcie'
        return f" (did you mean {' or '.join(repr(c) for c in extending[:2])}?)"
    scored = sorted(
        ((difflib.SequenceMatcher(None, word, name).ratio(), name) for name in names), key=lambda t: -t[0]
    )
    close = [name for ratio, name in scored if ratio >= 0.5 and ratio == scored[0][0]][:2] if scored else []
    if not close:
        lowered = {n.lower(): n for n in names}
        if word.lower() in lowered:
            close = [lowered[word.lower()]]
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in sorted(close))}?)"
