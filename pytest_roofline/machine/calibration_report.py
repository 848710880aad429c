"""What ``roofline calibrate`` prints: a calibrated device, its ceilings, the cache file and the time
taken, in a few aligned lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.core import Device, Figure, Precision, Unit
from ..model.devices import GB, describe_cache, describe_peaks
from ..model.units import whole_binary_bytes

if TYPE_CHECKING:
    from ..model.peaks import CpuPeak
    from .calibration_cache import Calibration

__all__ = ["cache_rows", "format_calibration"]


def format_calibration(cal: Calibration, *, theoretical: CpuPeak | str | None = None) -> str:
    """What ``roofline calibrate`` prints (see the module docstring); precisions whose peaks are one
    figure share a line. A CPU also gets its ``theoretical`` peak: a :class:`CpuPeak`, the reason it
    is unknown, or None (the default) for this machine's (:func:`cpupeak.system_peak`)."""
    device = cal.device
    facts: list[str] = [device.kind]
    if device.cores:
        facts.append(f"{device.cores} {'cores' if device.kind == 'cpu' else 'SMs'}")
    if device.llc_bytes:
        seen = " (effective)" if device.caches and device.caches[-1].found == "knee" else ""
        facts.append(f"{whole_binary_bytes(device.llc_bytes)} last-level cache{seen}")
    bw = device.bandwidth
    rows = [
        ("device", f"{device.name} [{', '.join(facts)}]"),
        ("bandwidth", f"{bw.value / GB:,.1f} GB/s  {_source(bw)}"),
    ]
    groups: dict[tuple[Figure, Unit, bool], list[Precision]] = {}
    for precision, unit, figure in describe_peaks(device):
        groups.setdefault((figure, unit, precision.integral), []).append(precision)
    for (figure, unit, integer), precisions in groups.items():
        prefix, scale = ("T", 1e12) if figure.value >= 1e12 else ("G", 1e9)
        rate = f"{figure.value / scale:,.1f} {prefix}{'OPS' if integer else 'FLOP/s'}"
        rows.append((", ".join(p.label for p in precisions), f"{rate} {unit}  {_source(figure)}"))
    rows.extend(cache_rows(device))
    if device.kind == "cpu":
        rows.append(("theoretical", _theoretical(theoretical)))
    rows.append(("cache", "not written (see the warning)" if cal.cache_path is None else str(cal.cache_path)))
    how = "read from the cache" if cal.from_cache else "calibrated"
    took = f"{cal.seconds:.2f} s" if cal.seconds >= 1 else f"{cal.seconds * 1e3:.1f} ms"
    rows.append(("", f"{how} in {took}"))
    width = max(len(label) for label, _ in rows if len(label) <= 16)  # a long group just sticks out
    return "\n".join(f"{label:<{width}}  {text}" for label, text in rows)


def cache_rows(device: Device, *, why: bool = True) -> list[tuple[str, str]]:
    """A row per cache level: its size as the OS (or driver) reports it and as the capacity sweep
    found it, and its roof (``l3``, ``480 MiB (sysfs), 48 MiB effective, 27.2 GB/s``), and with
    ``why`` how each was found. A device calibrated before the sweep has its levels' sizes alone."""
    roofs = {level.name: level for level in device.levels}
    by = "sysfs" if device.kind == "cpu" else "driver"
    rows = []
    for cache in device.caches:
        roof = roofs.get(cache.name)
        text = describe_cache(cache, reported_by=by, rate=roof.bandwidth.value if roof else None)
        how = [cache.note] if cache.note else []
        if roof is not None:
            how.append(_source(roof.bandwidth)[1:-1])
        rows.append((cache.name, f"{text}  ({'; '.join(how)})" if how and why else text))
    if not device.caches:
        for level in device.levels:
            where = "per core" if level.per_core else "shared"
            rows.append(
                (
                    f"{level.name} ({whole_binary_bytes(level.capacity_bytes)}, {where})",
                    f"{level.bandwidth.value / GB:,.1f} GB/s  {_source(level.bandwidth)}",
                )
            )
    return rows


def _theoretical(peak: CpuPeak | str | None) -> str:
    if peak is None:
        from . import cpupeak

        peak = cpupeak.system_peak()
    if isinstance(peak, str):
        return f"unknown ({peak})"
    return f"{peak.rates()}  ({peak.formula()})"


def _source(figure: Figure) -> str:
    return f"({figure.source}: {figure.note})" if figure.note else f"({figure.source})"
