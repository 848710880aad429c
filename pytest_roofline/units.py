"""Human-readable quantities for reports, failures and the command line (SI prefixes, µs)."""

from __future__ import annotations

import math

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def si(value: float, unit: str, digits: int = 3) -> str:
    """``si(989.4e12, "FLOP/s") == "989 TFLOP/s"``: three significant digits by default."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}"


def _sig(x: float, digits: int, max_decimals: int = 3) -> str:
    magnitude = math.floor(math.log10(abs(x))) if x else 0
    decimals = min(max_decimals, max(0, digits - 1 - magnitude))
    return f"{x:.{decimals}f}"


def seconds(value: float) -> str:
    """Four significant digits, in µs up to 10 ms (``139.0 µs``, ``1130 µs``), then ms, then s."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g} s"
    for limit, scale, unit in ((1e-6, 1e-9, "ns"), (1e-2, 1e-6, "µs"), (10.0, 1e-3, "ms")):
        if abs(value) < limit:
            return f"{_sig(value / scale, 4, 1)} {unit}"
    return f"{_sig(value, 4, 1)} s"


def flops(value: float) -> str:
    return si(value, "FLOP")


def flop_rate(value: float) -> str:
    return si(value, "FLOP/s")


def nbytes(value: float) -> str:
    return si(value, "B")


def byte_rate(value: float) -> str:
    return si(value, "B/s")


def intensity(value: float) -> str:
    """FLOP per byte: whole numbers from 100 up (``1365``), three significant digits below."""
    if math.isinf(value):
        return "inf"
    return f"{value:.0f}" if value >= 100 else _sig(value, 3) if value else "0"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"
