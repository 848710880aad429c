"""The calibration cache: one JSON file per calibrated device, and the ceilings it holds.

Each file holds its key; an unusable one is a :class:`CorruptCache`; a re-measure keeps each figure's
better value (:func:`keep_best`). The key and the rules: docs/architecture.md ("Files and locks").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..errors import RooflineError, RooflineWarning
from ..model.core import Device, Figure, PeakTable, Source, Unit
from ..model.devices import GB, MiB, slug
from ..model.paired_ceilings import BANDWIDTH, ProbeReference
from ..model.peaks import parse_peak_key, peak_key
from .files import writing_atomically

__all__ = [
    "SCHEMA",
    "Calibration",
    "Ceilings",
    "CorruptCache",
    "cache_file_of",
    "ceilings_payload",
    "figure_payload",
    "keep_best",
    "plain_rate",
    "probes_to_json",
    "read_ceilings",
    "read_figure",
    "warn",
    "write_ceilings",
]

#: 3: the cache capacities and their levels' roofs are always there; another schema is measured again
SCHEMA = 3
#: a re-measure that comes out below this share of a cached figure is worth a warning
_MUCH_LOWER = 0.8


@dataclass(frozen=True, slots=True)
class Ceilings:
    """What a calibration measures: DRAM bandwidth (bytes/s), peak FLOP/s, and how they were found."""

    bandwidth: Figure
    peaks: PeakTable
    #: raw numbers behind the figures (per-kernel rates, sizes, run counts), for the cache file
    details: Mapping[str, float | int | str] = field(default_factory=dict)
    #: per resource (bandwidth, fp64, fp32), the probe measured beside its figure (CPU only)
    probes: Mapping[str, ProbeReference] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Calibration:
    """A device with measured ceilings, where they are cached and how this call got them."""

    device: Device
    #: the cache file, or None when it could not be written
    cache_path: Path | None
    #: True when the ceilings were read from the cache rather than measured now
    from_cache: bool
    #: wall time of this call: the measurement, or reading the cache
    seconds: float
    #: per resource, the probe that pairs a measurement's ceiling with its calibrated figure
    probes: Mapping[str, ProbeReference] = field(default_factory=dict)


def cache_file_of(directory: Path, kind: str, key: Mapping[str, object]) -> Path:
    canonical = json.dumps({"schema": SCHEMA, "kind": kind, "key": key}, sort_keys=True)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    label = str(key.get("cpu_model") or key.get("name") or kind)
    name = slug(label)[:40].strip("-")
    return directory / f"{kind}-{name}-{digest}.json" if name else directory / f"{kind}-{digest}.json"


class CorruptCache(RooflineError):
    """A cache file that exists but cannot be used; the message says why."""


def read_ceilings(path: Path, kind: str, key: Mapping[str, object]) -> Ceilings | None:
    """The cached ceilings, None when there is no file, CorruptCache when it cannot be used."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # none yet, or no folder to hold one
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptCache(f"cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CorruptCache(f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CorruptCache("is not a JSON object")
    if data.get("schema") != SCHEMA or data.get("kind") != kind:
        raise CorruptCache(
            f"has schema {data.get('schema')!r} and kind {data.get('kind')!r}; expected {SCHEMA} and {kind!r}"
        )
    if data.get("key") != dict(key):
        raise CorruptCache(f"was written for {data.get('key')!r}, not for {dict(key)!r}")
    try:
        bandwidth = _figure_from_json(data["bandwidth"])
        raw_peaks = data["peaks"]
        if not isinstance(raw_peaks, dict):
            raise TypeError("'peaks' is not an object")
        peaks = {parse_peak_key(name): _figure_from_json(value) for name, value in raw_peaks.items()}
        if not any(unit is Unit.VECTOR for _, unit in peaks):  # every kernel falls back to one
            raise ValueError(f"'peaks' has no vector peak: {sorted(raw_peaks) or 'none at all'}")
        details = data.get("details", {})
        if not isinstance(details, dict) or not all(
            isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in details.values()
        ):
            raise TypeError("'details' is not an object of numbers and strings")
        probes = _probes_from_json(data.get("probes", {}))
        for resource, probe in probes.items():
            figure = bandwidth if resource == BANDWIDTH else peaks.get(parse_peak_key(f"{resource}:vector"))
            if figure is None or not math.isclose(figure.value, probe.figure, rel_tol=1e-9):
                raise ValueError(f"probe {resource!r} was measured beside another figure ({probe.figure})")
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptCache(f"does not match the cache schema ({type(exc).__name__}: {exc})") from None
    return Ceilings(bandwidth=bandwidth, peaks=peaks, details=details, probes=probes)


_PROBE_FIELDS = ("kind", "size", "figure", "rate", "best_rate", "best_seen")
#: the sizes a probe may have: bytes per copy array, n of a matmul
_PROBE_SIZES = {"copy": (8, 256 * MiB), "matmul": (16, 4096)}


def read_figure(path: Path, kind: str, key: Mapping[str, object]) -> Figure | None:
    """A one-figure cache file's figure (a GPU's L2 roof), None when there is none, CorruptCache when
    it cannot be used."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:  # a UnicodeDecodeError is a ValueError
        raise CorruptCache(f"cannot be read ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("kind") != kind:
        raise CorruptCache(f"is not a {kind!r} cache file of schema {SCHEMA}")
    if data.get("key") != dict(key):
        raise CorruptCache(f"was written for {data.get('key')!r}, not for {dict(key)!r}")
    try:
        figure = _figure_from_json(data["figure"])
        if not figure.value > 0:
            raise ValueError(f"figure {figure.value!r} is not positive")
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptCache(f"does not match the cache schema ({type(exc).__name__}: {exc})") from None
    return figure


def figure_payload(kind: str, key: Mapping[str, object], figure: Figure, seconds: float) -> dict[str, object]:
    return {**_payload_head(kind, key, seconds), "figure": _figure_to_json(figure)}


def _payload_head(kind: str, key: Mapping[str, object], seconds: float) -> dict[str, object]:
    """What every cache file starts with: its schema, kind and key, when and how long."""
    return {
        "schema": SCHEMA,
        "kind": kind,
        "key": dict(key),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(seconds, 4),
    }


def _probes_from_json(data: object) -> dict[str, ProbeReference]:
    if not isinstance(data, dict):
        raise TypeError("'probes' is not an object")
    probes = {}
    for resource, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != set(_PROBE_FIELDS):
            raise TypeError(f"probe {resource!r} must be {{{', '.join(_PROBE_FIELDS)}}}; got {entry!r}")
        kind, size = entry["kind"], entry["size"]
        lo, hi = _PROBE_SIZES.get(kind, (1, 0))
        if isinstance(size, bool) or not isinstance(size, int) or not lo <= size <= hi:
            raise TypeError(f"probe {resource!r} has a bad kind or size: {entry!r}")
        probes[resource] = ProbeReference(resource=resource, **entry)
    return probes


def probes_to_json(probes: Mapping[str, ProbeReference]) -> dict[str, dict[str, object]]:
    return {r: {name: getattr(p, name) for name in _PROBE_FIELDS} for r, p in probes.items()}


def _figure_to_json(figure: Figure) -> dict[str, object]:
    return {"value": figure.value, "source": figure.source.value, "note": figure.note}


def _figure_from_json(data: object) -> Figure:
    if not isinstance(data, dict) or set(data) != {"value", "source", "note"}:
        raise TypeError(f"a figure must be {{value, source, note}}; got {data!r}")
    value, source, note = data["value"], data["source"], data["note"]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not isinstance(note, str):
        raise TypeError(f"bad figure {data!r}")
    return Figure(float(value), Source(source), note)


def write_ceilings(path: Path, payload: Mapping[str, object]) -> bool:
    """Write ``payload`` atomically; on failure warn, leave any old file untouched and return False."""
    try:
        with writing_atomically(path) as out:
            json.dump(payload, out, indent=2, sort_keys=True)
            out.write("\n")
    except OSError as exc:
        warn(
            f"cannot write the calibration cache {path} ({exc}); the measured ceilings are used but not kept"
        )
        return False
    return True


def ceilings_payload(
    kind: str, key: Mapping[str, object], ceilings: Ceilings, seconds: float
) -> dict[str, object]:
    return {
        **_payload_head(kind, key, seconds),
        "bandwidth": _figure_to_json(ceilings.bandwidth),
        "peaks": {peak_key(p, u): _figure_to_json(f) for (p, u), f in ceilings.peaks.items()},
        "details": dict(ceilings.details),
        "probes": probes_to_json(ceilings.probes),
    }


def keep_best(old: Ceilings, new: Ceilings, *, where: str = "the cache") -> Ceilings:
    """Per figure, the better of ``old`` and ``new``, kept together with the probe measured beside it;
    warns, naming each figure, where ``new`` came out below :data:`_MUCH_LOWER` of ``old``."""
    peaks = dict(new.peaks)
    probes = dict(new.probes)
    bandwidth = new.bandwidth
    lower: list[str] = []
    figures: list[tuple[str, Figure, Figure]] = [(BANDWIDTH, old.bandwidth, new.bandwidth)]
    for (precision, unit), figure in new.peaks.items():
        cached = old.peaks.get((precision, unit))
        if cached is not None and figure.source is Source.MEASURED:
            figures.append((peak_key(precision, unit), cached, figure))
    for name, cached, fresh in figures:
        if fresh.value >= cached.value:
            continue
        if fresh.value < _MUCH_LOWER * cached.value:
            lower.append(f"{name} {plain_rate(fresh.value, name)} (cached {plain_rate(cached.value, name)})")
        resource = name.partition(":")[0]  # "bandwidth", or a peak's precision
        if name == BANDWIDTH:
            bandwidth = cached
        else:
            peaks[parse_peak_key(name)] = cached
        if resource in old.probes:
            probes[resource] = old.probes[resource]
        else:  # the new probe was measured beside the new figure, not the kept one
            probes.pop(resource, None)
    for resource, probe in probes.items():  # the best probe rate ever seen survives either way
        seen = old.probes.get(resource)
        if seen is not None and seen.best_rate > probe.best_rate:
            probes[resource] = dataclasses.replace(probe, best_rate=seen.best_rate, best_seen=seen.best_seen)
    if lower:
        warn(
            f"the new calibration came out much lower than {where} for {'; '.join(lower)}: the machine is "
            "busy or slower; the cached figures are kept (`roofline calibrate --reset` forgets them)"
        )
    from .capacity import larger_capacities

    details = larger_capacities(old.details, _best_levels(old.details, new.details))
    return dataclasses.replace(new, bandwidth=bandwidth, peaks=peaks, probes=probes, details=details)


def _best_levels(
    old: Mapping[str, float | int | str], new: Mapping[str, float | int | str]
) -> dict[str, float | int | str]:
    """``new``'s details with each cache level's roof the better of the two calibrations'."""
    from .cachelevels import level_details, rates_from_details

    best = rates_from_details(new)
    for name, (rate, how) in rates_from_details(old).items():
        if rate > best.get(name, (0.0, ""))[0]:
            best[name] = (rate, how)
    return {**new, **level_details(best)}


def plain_rate(value: float, name: str) -> str:
    return f"{value / GB:.1f} GB/s" if name == BANDWIDTH else f"{value / 1e9:.1f} GFLOP/s"


def warn(message: str) -> None:
    """A :class:`RooflineWarning` pointing at the caller's caller."""
    warnings.warn(message, RooflineWarning, stacklevel=3)
