"""User peaks files (``--roofline-peaks FILE``, :func:`load_peaks_file`) and the peak keys they and the
calibration cache use (``"bf16:tensor"``); a CPU's theoretical peak (:class:`CpuPeak`, worked out
from the machine by :mod:`..machine.cpupeak`). A peaks file's fields: docs/floor.md ("Ceilings"),
docs/options.md ("Your own peaks").
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InvalidValueError
from .core import ACCEPTED_DTYPES, Device, Figure, Kind, Precision, Source, Unit, did_you_mean, parse_dtype
from .devices import GB, DeviceError, MiB, slug
from .units import brief, flop_rate

__all__ = ["CpuPeak", "load_peaks_file", "parse_peak_key", "peak_key", "peaks_file_kind"]


def peak_key(precision: Precision, unit: Unit) -> str:
    """(BF16, TENSOR) -> ``"bf16:tensor"``: how files and the cache name a peak."""
    return f"{precision.label}:{unit.value}"


def parse_peak_key(text: object) -> tuple[Precision, Unit]:
    """``"bf16:tensor"`` -> (BF16, TENSOR); ValueError saying what is wrong and what is accepted."""
    if not isinstance(text, str):
        raise InvalidValueError(f"a peak's key must be a string such as 'bf16:tensor'; got {text!r}")
    spelled, colon, unit_text = text.partition(":")
    if not colon:
        raise InvalidValueError("expected precision:unit, such as 'bf16:tensor' or 'fp32:vector'")
    labels = [p.label for p in Precision if p.component is None]
    try:
        precision = parse_dtype(spelled)
    except ValueError:
        raise InvalidValueError(
            f"unknown precision {spelled!r}{did_you_mean(spelled, [*labels, *ACCEPTED_DTYPES])}; "
            f"accepted: {', '.join(labels)}"
        ) from None
    if precision.component is not None:  # one peak per real format: complex math is real arithmetic
        raise InvalidValueError(
            f"{spelled.strip()} runs at the {precision.component} peaks (complex arithmetic is real "
            f"arithmetic on its parts); give '{precision.component}:{unit_text.strip() or 'vector'}'"
        )
    units = [u.value for u in Unit]
    wanted = unit_text.strip().lower()
    if wanted not in units:
        raise InvalidValueError(
            f"unknown unit {unit_text!r}{did_you_mean(wanted, units)}; accepted: {', '.join(units)}"
        )
    return precision.rate_class, Unit(wanted)


_PEAKS_KEYS = (
    "name",
    "key",
    "kind",
    "bandwidth_gbs",
    "peaks_tflops",
    "peaks_gflops",
    "llc_mib",
    "cores",
    "notes",
)
_KINDS: tuple[Kind, ...] = ("cpu", "cuda", "rocm")


def load_peaks_file(path: Path | str, *, base: Device | None = None) -> Device:
    """A device from a user peaks file (its fields: docs/floor.md, "Ceilings"); ``base`` fills the gaps."""
    path = Path(path)

    def fail(message: str) -> DeviceError:
        return DeviceError(f"peaks file {str(path)!r}: {message}")

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"cannot be read ({exc})") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise fail(f"key {exc.args[0]!r} appears more than once") from None
    except ValueError as exc:
        raise fail(f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise fail(f"must hold a JSON object; got {type(data).__name__}")
    for name in data:
        if name not in _PEAKS_KEYS:
            raise fail(
                f"unknown key {name!r}{did_you_mean(name, _PEAKS_KEYS)}; accepted: {', '.join(_PEAKS_KEYS)}"
            )
    if base is None:
        missing = [name for name in ("name", "kind", "bandwidth_gbs") if name not in data]
        if not ("peaks_tflops" in data or "peaks_gflops" in data):
            missing.append("peaks_tflops (or peaks_gflops)")
        if missing:
            raise fail(f"missing {', '.join(missing)} (needed without a base device)")

    def text_field(name: str) -> str | None:
        value = data.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise fail(f"{name!r} must be a non-empty string; got {value!r}")
        return value.strip() if isinstance(value, str) else None

    def number(where: str, value: object, scale: float = 1.0) -> float:
        """``value`` x ``scale``: the figure in base units (FLOP/s, bytes), checked to fit a float."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise fail(f"{where} must be a positive number; got {brief(value)}")
        try:
            scaled = float(value) * scale
        except OverflowError:  # an integer past the largest float
            scaled = math.inf
        if not math.isfinite(scaled):
            largest = "a positive finite number" if scale == 1 else f"below {sys.float_info.max / scale:.3g}"
            raise fail(f"{where} must be {largest}; got {brief(value)}")
        return scaled

    note = f"from {path.name}"
    name = text_field("name")
    kind = text_field("kind")
    if kind is not None and kind not in _KINDS:
        raise fail(f"'kind' is {kind!r}{did_you_mean(kind, _KINDS)}; accepted: {', '.join(_KINDS)}")

    peaks: dict[tuple[Precision, Unit], Figure] = {}
    for table, scale in (("peaks_tflops", 1e12), ("peaks_gflops", 1e9)):
        if table not in data:
            continue
        entries = data[table]
        if not isinstance(entries, dict) or not entries:
            raise fail(
                f'{table!r} must be a non-empty object such as {{"bf16:tensor": 989.4}}; got {entries!r}'
            )
        for spelled, value in entries.items():
            try:
                peak = parse_peak_key(spelled)
            except ValueError as exc:
                raise fail(f"{table}[{spelled!r}] = {value!r}: {exc}") from None
            figure = Figure(number(f"{table}[{spelled!r}]", value, scale), Source.USER, note)
            if peak in peaks:
                raise fail(f"{table}[{spelled!r}] gives the {peak_key(*peak)} peak a second time")
            peaks[peak] = figure
    if base is None and not any(unit is Unit.VECTOR for _, unit in peaks):
        raise fail("needs at least one 'vector' peak (kernels that cannot use tensor units fall back to it)")

    bandwidth = None
    if "bandwidth_gbs" in data:
        bandwidth = Figure(number("'bandwidth_gbs'", data["bandwidth_gbs"], GB), Source.USER, note)
    llc_bytes = int(number("'llc_mib'", data["llc_mib"], MiB)) if "llc_mib" in data else None
    cores = data.get("cores")
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores <= 0):
        raise fail(f"'cores' must be a positive integer; got {brief(cores)}")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise fail(f"'notes' must be a list of strings; got {notes!r}")

    if base is None:
        if name is None or kind is None or bandwidth is None:  # pragma: no cover - checked above
            raise fail("missing name, kind or bandwidth_gbs")
        return Device(
            key=text_field("key") or slug(name) or "device",
            name=name,
            kind=kind,
            peaks=peaks,
            bandwidth=bandwidth,
            llc_bytes=llc_bytes,
            cores=cores,
            names=(name,),
            notes=(f"ceilings {note}", *notes),
        )
    return replace(
        base.with_figures(peaks={**base.peaks, **peaks}, bandwidth=bandwidth, key=text_field("key")),
        name=name or base.name,
        kind=kind or base.kind,
        llc_bytes=llc_bytes if llc_bytes is not None else base.llc_bytes,
        cores=cores if cores is not None else base.cores,
        names=base.names if name is None else (name, *base.names),
        notes=(*base.notes, f"ceilings {note}", *notes),
    )


def peaks_file_kind(path: Path | str) -> str | None:
    """The ``kind`` a peaks file gives (None when it gives none): the file was checked already."""
    try:
        kind = json.loads(Path(path).read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        return None  # load_peaks_file says what is wrong
    return kind if isinstance(kind, str) else None


class _DuplicateKey(InvalidValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for name, value in pairs:
        if name in result:
            raise _DuplicateKey(name)
        result[name] = value
    return result


@dataclass(frozen=True, slots=True)
class CpuPeak:
    """This CPU's theoretical peak: ``cores × clock_hz × FLOPs per cycle``, an upper bound."""

    #: logical CPUs this process may run on (SMT siblings included: an upper bound)
    cores: int
    #: the highest clock any core may run at, in Hz
    clock_hz: float
    #: where the clock came from, for people (``"cpufreq max"``, ``"cpu MHz 2445 × 2 boost allowance"``)
    clock_source: str
    #: the widest vector ISA the flags show: ``"AVX-512"``, ``"AVX2+FMA"``, ``"NEON"``, ``"SVE"``, ...
    isa: str
    #: fp64 FLOPs per cycle per core
    fp64_per_cycle: int
    #: fp32 FLOPs per cycle per core
    fp32_per_cycle: int

    def flops(self, precision: Precision) -> float:
        """The peak FLOP/s for ``precision`` (:meth:`per_cycle`'s; why: docs/measurement.md
        ("Calibration")). Pass a complex format's parts' precision; integer operations are not FLOPs,
        and nothing here bounds them."""
        return self.cores * self.clock_hz * self.per_cycle(precision)

    def per_cycle(self, precision: Precision) -> int:
        """FLOPs per cycle per core for ``precision`` (fp32's for every format narrower than fp64)."""
        return self.fp64_per_cycle if precision is Precision.FP64 else self.fp32_per_cycle

    def formula(self, precision: Precision = Precision.FP64) -> str:
        """``2 cores × 4.89 GHz (cpu MHz 2445 × 2 boost allowance) × 16 fp64 FLOP/cycle (AVX2+FMA)``."""
        cores = f"{self.cores} core{'s' if self.cores != 1 else ''}"
        label = Precision.FP64 if precision is Precision.FP64 else Precision.FP32
        return (
            f"{cores} × {self.clock_hz / 1e9:.2f} GHz ({self.clock_source}) × "
            f"{self.per_cycle(precision)} {label} FLOP/cycle ({self.isa})"
        )

    def rates(self) -> str:
        """``157 GFLOP/s fp64, 313 GFLOP/s fp32``."""
        fp64, fp32 = self.flops(Precision.FP64), self.flops(Precision.FP32)
        return f"{flop_rate(fp64)} fp64, {flop_rate(fp32)} fp32"

    def describe(self) -> str:
        """One line: ``theoretical peak <formula> = <rates>``."""
        return f"theoretical peak {self.formula()} = {self.rates()}"
