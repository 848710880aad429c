"""Human-readable quantities for reports, failures and the command line (SI prefixes, µs)."""

from __future__ import annotations

import math

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def si(value: float, unit: str, digits: int = 3) -> str:
    """``si(989.4e12, "FLOP/s") == "989 TFLOP/s"``: three significant digits by default."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    for scale, prefix in _PREFIXES:
        # round first, then pick the prefix: 999.96e9 is "1.00 TB", not "1000 GB"
        if abs(_round_sig(value, digits)) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}"


def _round_sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits - 1}e}")


def _sig(x: float, digits: int, max_decimals: int = 3) -> str:
    rounded = _round_sig(x, digits)  # 999.96 has four digits as 1000, not as 999.96
    magnitude = math.floor(math.log10(abs(rounded))) if rounded else 0
    decimals = min(max_decimals, max(0, digits - 1 - magnitude))
    return f"{x:.{decimals}f}"


def seconds(value: float) -> str:
    """In µs up to 10 ms (``139.0 µs``, ``1130 µs``), then ms, then s: four significant digits at
    most, one decimal at most."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g} s"
    rounded = _round_sig(value, 4)
    # picoseconds only below 0.1 ns: a floor that small is a napkin curiosity, not a kernel
    for limit, scale, unit in (
        (1e-10, 1e-12, "ps"),
        (1e-6, 1e-9, "ns"),
        (1e-2, 1e-6, "µs"),
        (10.0, 1e-3, "ms"),
    ):
        if abs(rounded) < limit:
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
    if not math.isfinite(value):
        return "inf" if value > 0 else str(value)
    if value == 0:
        return "0"
    return f"{value:.0f}" if _round_sig(value, 3) >= 100 else _sig(value, 3)


def percent(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def binary_bytes(value: float) -> str:
    """Cache sizes as vendors state them: ``50 MiB``, ``300 MiB``, ``2 MiB``."""
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} B"


def whole_binary_bytes(nbytes: int) -> str:
    """A buffer's size in whole KiB or MiB (``29 MiB``), or GiB to a tenth, as calibration notes state it."""
    if nbytes >= 1 << 30:
        return f"{nbytes / (1 << 30):.1f} GiB"
    return f"{nbytes / (1 << 20):.0f} MiB" if nbytes >= 1 << 20 else f"{nbytes / 1024:.0f} KiB"


def brief(value: object, limit: int = 60) -> str:
    """``repr(value)``, short enough for a message: an integer of 16 digits or more as ``1.00e+200``
    (past 4300 digits Python will not print one), a long repr cut."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        import decimal

        return format(decimal.Decimal(value), ".2e")  # exact, whatever the size
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
