"""The roofline plot: arithmetic intensity against achieved FLOP/s, on log-log axes. No pytest here.

Each device used gets a panel: its DRAM-bandwidth slope and a flat roof for each precision and unit
that a measurement was judged against, labelled, with the ridge point marked; each measurement is a
point coloured by its verdict and labelled by its test; with a baseline, an arrow runs from where
the test stood then. matplotlib is imported only here, only when a plot is asked for (the ``plot``
extra); :func:`require_matplotlib` says so as a clear error. Ops that do no arithmetic (a copy) have
no place on a FLOP/s axis: the caption counts them.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model import units
from ..model.verdict import Verdict
from .records import DeviceRecord, MeasurementRecord, Record, as_device_record, as_record

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from .baseline import BaselineRecord

FORMATS = (".svg", ".png")
#: verdict -> colour (colour-blind safe: Okabe-Ito)
COLOURS: dict[str, str] = {
    Verdict.PASS: "#009E73",
    Verdict.MISS: "#D55E00",
    Verdict.INCONCLUSIVE: "#E69F00",
    Verdict.FASTER_THAN_LIGHT: "#CC79A7",
}
_ROOF_COLOURS = ("#0072B2", "#56B4E9", "#000000", "#999999", "#F0E442")


class PlotError(ValueError):
    """A plot that cannot be drawn: names the path or the missing extra."""


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotError("the roofline plot needs matplotlib: pip install 'pytest-roofline[plot]'") from None


def check_path(path: str | os.PathLike[str]) -> Path:
    """The plot's path, if its suffix is one we draw; PlotError naming it otherwise."""
    target = Path(path).expanduser()
    if target.suffix.lower() not in FORMATS:
        raise PlotError(f"{path}: the plot is written as .svg or .png; got {target.suffix or 'no suffix'!r}")
    return target


@dataclass(frozen=True, slots=True)
class Point:
    """What the plot draws of a measurement: where it sits, its colour and its label."""

    nodeid: str
    name: str
    device: str
    flops: float
    bytes: float
    time_s: float
    #: the roof it was judged against
    peak_precision: str
    unit: str
    #: a :class:`Verdict`'s value, or another word (``roofline llm`` draws floors: ``floor``)
    verdict: str
    cache_state: str = "cold"
    memory_level: str = "dram"
    #: the marker's size (``roofline llm`` sizes each op by its share of the step)
    size: float = 7.0

    @classmethod
    def of(cls, record: MeasurementRecord) -> Point:
        return cls(
            record.nodeid, record.name, record.device, record.flops, record.bytes, record.time_s,
            record.peak_precision, record.unit, str(record.verdict), record.cache_state, record.memory_level,
        )  # fmt: skip

    @property
    def plottable(self) -> bool:
        """Ops that do no arithmetic (a copy) have no place on a FLOP/s axis."""
        return bool(self.flops) and bool(self.bytes) and self.time_s > 0

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def flop_rate(self) -> float:
        return self.flops / self.time_s


def _point(record: Point | Record | Mapping[str, Any]) -> Point | None:
    """A measurement's point; None for a test that measured nothing."""
    if isinstance(record, Point):
        return record
    typed = as_record(record)
    return Point.of(typed) if isinstance(typed, MeasurementRecord) else None


def draw(
    records: Sequence[Point | Record | Mapping[str, Any]],
    devices: Sequence[DeviceRecord | Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    baseline: Mapping[tuple[str, str], BaselineRecord | Mapping[str, Any]] | None = None,
    title: str = "",
) -> Path:
    """Draw the plot to ``path`` (.svg or .png), atomically; returns the path written. ``baseline``:
    each test's earlier record, whose time an arrow starts from."""
    target = check_path(path)
    require_matplotlib()
    from matplotlib.figure import Figure

    points = [p for p in map(_point, records) if p is not None]
    measured = [p for p in points if p.plottable]
    boards = [as_device_record(d) for d in devices]
    panels = [d for d in boards if any(p.device == d.key for p in measured)] or boards[:1]
    figure = Figure(figsize=(8.0 * max(1, len(panels)), 5.6), layout="constrained")
    axes = figure.subplots(1, max(1, len(panels)), squeeze=False)[0]
    old_times = {key: _time_s(old) for key, old in (baseline or {}).items()}
    for ax, device in zip(axes, panels, strict=False):
        on_device = [p for p in measured if p.device == device.key]
        _panel(ax, device, on_device, old_times)
    skipped = len(points) - len(measured)
    caption = title or "pytest-roofline"
    if skipped:
        caption += f"  ({skipped} measurement(s) with no FLOPs, e.g. copies, are not on a FLOP/s axis)"
    figure.suptitle(caption, fontsize=11)
    directory = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=directory)
    os.close(fd)
    try:
        figure.savefig(tmp, format=target.suffix[1:].lower(), dpi=150)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _time_s(old: BaselineRecord | Mapping[str, Any]) -> float | None:
    time_s = old.get("time_s") if isinstance(old, Mapping) else old.time_s
    return float(time_s) if time_s else None


def _panel(
    ax: Axes, device: DeviceRecord, points: Sequence[Point], old_times: Mapping[tuple[str, str], float | None]
) -> None:
    bandwidth = device.bandwidth
    used = {(p.peak_precision, p.unit) for p in points}
    roofs = [p for p in device.peaks if (p.precision, p.unit) in used and p.flops > 0]
    if not roofs:  # nothing measured here yet: show the device's own roofs
        roofs = [p for p in device.peaks if p.flops > 0][:3]
    intensities = [r.intensity for r in points] + [p.flops / bandwidth for p in roofs]
    low = 10 ** math.floor(math.log10(min(intensities) / 4)) if intensities else 1e-2
    high = 10 ** math.ceil(math.log10(max(intensities) * 4)) if intensities else 1e3
    top = max([p.flops for p in roofs], default=bandwidth)
    xs = [low, high]
    # the memory roof, up to the highest compute roof
    ax.plot([low, top / bandwidth], [bandwidth * low, top], color="#444444", linewidth=1.6)
    ax.text(
        low * 1.3, bandwidth * low * 1.6, f"DRAM {units.byte_rate(bandwidth)}", rotation=0, fontsize=8,
        color="#444444", va="bottom",
    )  # fmt: skip
    for colour, peak in zip(_ROOF_COLOURS * 3, sorted(roofs, key=lambda p: -p.flops), strict=False):
        ridge = peak.flops / bandwidth
        ax.plot([ridge, high], [peak.flops] * 2, color=colour, linewidth=1.6)
        ax.plot([ridge], [peak.flops], marker="o", markersize=4, color=colour)
        label = f"{peak.precision} {peak.unit} {units.flop_rate(peak.flops)}"
        ax.annotate(
            f"{label} (ridge {units.intensity(ridge)} FLOP/B)",
            (high, peak.flops), xytext=(-4, 3), textcoords="offset points", ha="right", fontsize=8,
            color=colour,
        )  # fmt: skip
    _level_roofs(ax, device, points, low, top)
    for r in points:
        x, y = r.intensity, r.flop_rate
        colour = COLOURS.get(r.verdict, "#777777")
        old_time_s = old_times.get((r.nodeid, r.name))
        if old_time_s:
            y_old = r.flops / old_time_s
            ax.annotate(
                "", (x, y), xytext=(x, y_old),
                arrowprops={"arrowstyle": "->", "color": "#777777", "linewidth": 1.0},
            )  # fmt: skip
            ax.plot([x], [y_old], marker="o", markersize=5, markerfacecolor="none", color="#777777")
        ax.plot(
            [x], [y], marker="o", markersize=r.size, color=colour, markeredgecolor="white", linestyle="none"
        )
        ax.annotate(_short(r), (x, y), xytext=(5, -3), textcoords="offset points", fontsize=7, va="top")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*xs)
    floor_y = min([r.flop_rate for r in points] + [bandwidth * low])
    ax.set_ylim(floor_y / 3, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(device.name, fontsize=10)
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    handles = [
        ax.plot([], [], marker="o", linestyle="none", color=c, label=v)[0]
        for v, c in COLOURS.items()
        if any(r.verdict == v for r in points)
    ]
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)


def _level_roofs(ax: Axes, device: DeviceRecord, points: Sequence[Point], low: float, top: float) -> None:
    """The memory roof of each cache level that judged a warm point here (the cache-aware roofline),
    dashed beside DRAM's."""
    judged = {r.memory_level for r in points if r.cache_state == "warm"}
    for level in device.levels:
        if level.name not in judged or not level.bandwidth:
            continue
        bandwidth = level.bandwidth
        ax.plot(
            [low, top / bandwidth], [bandwidth * low, top], color="#444444", linewidth=1.0, linestyle="--"
        )
        ax.text(
            low * 1.3, bandwidth * low * 1.6, f"{level.name.upper()} {units.byte_rate(bandwidth)}",
            fontsize=8, color="#444444", va="bottom",
        )  # fmt: skip


def _short(r: Point) -> str:
    """``test_gemm[numpy]`` from ``tests/test_gemm.py::TestGemm::test_gemm[numpy]``, plus the name."""
    test = r.nodeid.rsplit("::", 1)[-1]
    return f"{test} [{r.name}]" if r.name else test
