"""The roofline plot: arithmetic intensity against achieved FLOP/s, on log-log axes. No pytest here.

What it draws: docs/ci.md ("The regression verdict"). matplotlib (the ``plot`` extra) is imported only
here, when a plot is asked for (:func:`require_matplotlib`); every text from the data is drawn as it is.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RooflineUsageError
from ..machine import files
from ..model import units
from .baseline import Key, finite_number, json_kind, positive_number

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

    from .records import MeasurementRecord

Record = Mapping[str, Any]


def _as_json(item: object) -> Record:
    """A typed record or device record as the JSON this module reads."""
    to_json = getattr(item, "to_json", None)
    return to_json() if callable(to_json) else item  # type: ignore[return-value]


FORMATS = (".svg", ".png")
#: verdict -> colour (colour-blind safe: Okabe-Ito)
COLOURS = {
    "pass": "#009E73",
    "MISS": "#D55E00",
    "inconclusive": "#E69F00",
    "faster-than-light": "#CC79A7",
    # roofline llm --from: an op at the time its tests predict, or at a fraction assumed
    "measured": "#0072B2",
    "assumed": "#999999",
}
_ROOF_COLOURS = ("#0072B2", "#56B4E9", "#000000", "#999999", "#F0E442")
#: the artist label of a point's label, where a test finds them in a :func:`figure`
POINT_LABEL = "point-label"
#: for every Text drawn from the data: a ``$`` in a test id is a dollar, not the start of mathtext
_AS_IS: dict[str, Any] = {"parse_math": False, "usetex": False}


class PlotError(RooflineUsageError, ValueError):
    """A plot that cannot be drawn: names the path or the missing extra."""


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotError("the roofline plot needs matplotlib: pip install 'pytest-roofline[plot]'") from None


def check_path(path: str | os.PathLike[str]) -> Path:
    """The plot's path, if its suffix is one we draw and it can be written; PlotError otherwise."""
    target = Path(path).expanduser()
    if target.suffix.lower() not in FORMATS:
        raise PlotError(f"{path}: the plot is written as .svg or .png; got {target.suffix or 'no suffix'!r}")
    reason = files.problem(target)
    if reason:
        raise PlotError(f"cannot write {str(path)!r}: {reason}")
    return target


def check_devices(devices: object) -> list[Record]:
    """``devices`` as a report holds them, if each has what its panel draws; else a PlotError."""
    if not isinstance(devices, list | tuple):
        raise PlotError(f"'devices' must be a list of objects; got a {json_kind(devices)}")
    for index, device in enumerate(devices):
        if not isinstance(device, Mapping):
            raise PlotError(f"device {index} is a {json_kind(device)}, not an object")
        if "key" not in device:
            raise PlotError(f"device {index}: no 'key' field")
        named = f"device {index} ({device['key']})"
        bandwidth = device.get("bandwidth")
        if not positive_number(bandwidth):
            raise PlotError(f"{named}: 'bandwidth' is {units.brief(bandwidth)}; it must be a positive number")
        peaks = device.get("peaks")
        if not isinstance(peaks, list) or not all(isinstance(p, Mapping) for p in peaks):
            raise PlotError(f"{named}: 'peaks' is {peaks!r}; it must be a list of objects")
        for peak in peaks:
            flops = peak.get("flops")
            if not finite_number(flops) or flops < 0:
                raise PlotError(
                    f"{named}: a peak's 'flops' is {units.brief(flops)}; it must be a number, 0 or more"
                )
        levels = device.get("levels") or []
        if not isinstance(levels, list) or not all(isinstance(level, Mapping) for level in levels):
            raise PlotError(f"{named}: 'levels' is {levels!r}; it must be a list of objects")
    return list(devices)


def fault(record: Record) -> str | None:
    """Why a measurement cannot be a point on the plot, or None (having no FLOPs is no fault)."""
    for name in ("flops", "bytes", "time_s"):
        if name not in record:
            return f"no {name!r} field"
    flops = record["flops"]
    if not finite_number(flops) or flops < 0:
        return f"'flops' is {units.brief(flops)}; it must be a number, 0 or more"
    for name in ("bytes", "time_s", "size"):  # size: roofline llm's, by the op's share of the step
        if name in record and not positive_number(record[name]):
            return f"{name!r} is {units.brief(record[name])}; it must be a positive number"
    return None


def draw(
    records: Sequence[object],
    devices: Sequence[object],
    path: str | os.PathLike[str],
    *,
    baseline: Mapping[Key, MeasurementRecord] | None = None,
    title: str = "",
) -> Path:
    """Draw the plot to ``path`` (.svg or .png), atomically; returns the path written. ``records`` and
    ``devices``: typed records or their JSON (``roofline llm``'s points: JSON with a marker ``size``);
    ``baseline``: each test's baseline record."""
    target = check_path(path)
    drawn = figure(records, devices, baseline=baseline, title=title)
    image = io.BytesIO()  # drawn whole first: a failed draw leaves the old plot as it was
    drawn.savefig(image, format=target.suffix[1:].lower(), dpi=150)
    try:
        files.write(target, image.getvalue())
    except OSError as exc:
        raise PlotError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    return target


def figure(
    records: Sequence[object],
    devices: Sequence[object],
    *,
    baseline: Mapping[Key, MeasurementRecord] | None = None,
    title: str = "",
) -> Figure:
    """The plot as a matplotlib Figure, laid out, its point labels apart (what :func:`draw` saves)."""
    require_matplotlib()
    from matplotlib.figure import Figure

    shown_all = [_as_json(r) for r in records]
    devices = check_devices([_as_json(d) for d in devices])
    shown = [r for r in shown_all if r.get("verdict") != "skipped"]
    measured = [r for r in shown if fault(r) is None and r["flops"] > 0]
    panels = [d for d in devices if any(r.get("device") == d["key"] for r in measured)] or list(devices[:1])
    drawn = Figure(figsize=(8.0 * max(1, len(panels)), 5.6), layout="constrained")
    axes = drawn.subplots(1, max(1, len(panels)), squeeze=False)[0]
    labels: list[tuple[Annotation, float]] = []
    for ax, device in zip(axes, panels, strict=False):
        on_device = [r for r in measured if r.get("device") == device["key"]]
        labels += _panel(ax, device, on_device, baseline or {})
    flopless = sum(1 for r in shown if fault(r) is None and r["flops"] == 0)
    faulty = sum(1 for r in shown if fault(r) is not None)
    caption = title or "pytest-roofline"
    if flopless:
        caption += f"  ({flopless} measurement(s) with no FLOPs, e.g. copies, are not on a FLOP/s axis)"
    if faulty:
        caption += f"  ({faulty} measurement(s) could not be drawn)"
    drawn.suptitle(caption, fontsize=11, **_AS_IS)
    _lead_apart(drawn, labels)
    return drawn


def _panel(
    ax: Axes, device: Record, records: Sequence[Record], baseline: Mapping[Key, MeasurementRecord]
) -> list[tuple[Annotation, float]]:
    """One device's roofs and points; the points' labels, one per spot (:func:`_spots`), each with
    the size of its spot's marker."""
    bandwidth = float(device["bandwidth"])
    used = {(r.get("peak_precision"), r.get("unit")) for r in records}  # the math's precision
    roofs = [p for p in device["peaks"] if (p.get("precision"), p.get("unit")) in used and p["flops"] > 0]
    if not roofs:  # nothing measured here yet: show the device's own roofs
        roofs = [p for p in device["peaks"] if p["flops"] > 0][:3]
    intensities = [r["flops"] / r["bytes"] for r in records] + [p["flops"] / bandwidth for p in roofs]
    low = 10 ** math.floor(math.log10(min(intensities) / 4)) if intensities else 1e-2
    high = 10 ** math.ceil(math.log10(max(intensities) * 4)) if intensities else 1e3
    top = max([p["flops"] for p in roofs], default=bandwidth)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    floor_y = min([r["flops"] / r["time_s"] for r in records] + [bandwidth * low])
    ax.set_ylim(floor_y / 3, top * 3)
    _memory_roof(ax, "DRAM", bandwidth, low, top, linewidth=1.6)
    for colour, peak in zip(_ROOF_COLOURS * 3, sorted(roofs, key=lambda p: -p["flops"]), strict=False):
        ridge = peak["flops"] / bandwidth
        ax.plot([ridge, high], [peak["flops"]] * 2, color=colour, linewidth=1.6)
        ax.plot([ridge], [peak["flops"]], marker="o", markersize=4, color=colour)
        label = f"{peak.get('precision', '')} {peak.get('unit', '')} {units.flop_rate(peak['flops'])}"
        ax.annotate(
            f"{label} (ridge {units.intensity(ridge)} FLOP/B)",
            (high, peak["flops"]), xytext=(-4, 3), textcoords="offset points", ha="right", fontsize=8,
            color=colour, **_AS_IS,
        )  # fmt: skip
    _level_roofs(ax, device, records, low, top)
    for r in records:
        x, y = r["flops"] / r["bytes"], r["flops"] / r["time_s"]
        colour = COLOURS.get(r.get("verdict", ""), "#777777")
        old = baseline.get((r.get("nodeid", ""), r.get("name", "")))
        if old is not None and old.time_s:
            y_old = r["flops"] / old.time_s
            ax.annotate(
                "", (x, y), xytext=(x, y_old),
                arrowprops={"arrowstyle": "->", "color": "#777777", "linewidth": 1.0},
            )  # fmt: skip
            ax.plot([x], [y_old], marker="o", markersize=5, markerfacecolor="none", color="#777777")
        size = float(r.get("size", 7))  # roofline llm sizes each op by its share of the step
        ax.plot(
            [x], [y], marker="o", markersize=size, color=colour, markeredgecolor="white", linestyle="none"
        )
    labels = [
        (
            ax.annotate(
                ", ".join(spot.names), (spot.x, spot.y), xytext=(5, -3), textcoords="offset points",
                fontsize=7, va="top", label=POINT_LABEL, in_layout=False, **_AS_IS,
            ),  # placed by _lead_apart, after the layout (which it therefore leaves as it is)
            spot.size,
        )
        for spot in _spots(ax, records)
    ]  # fmt: skip
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(str(device.get("name", device["key"])), fontsize=10, **_AS_IS)
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    handles = [
        ax.plot([], [], marker="o", linestyle="none", color=c, label=v)[0]
        for v, c in COLOURS.items()
        if any(r.get("verdict") == v for r in records)
    ]
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    return labels


@dataclass(slots=True)
class _Spot:
    """Markers drawn over each other: the first one's place (also in points), the largest size, all names."""

    x: float
    y: float
    at: tuple[float, float]
    size: float
    names: list[str]

    def holds(self, at: tuple[float, float], size: float) -> bool:
        """Whether a marker of ``size`` centred at ``at`` (in points) has its centre in this spot's
        marker, or this spot's centre in it."""
        return math.hypot(at[0] - self.at[0], at[1] - self.at[1]) <= max(size, self.size) / 2


def _spots(ax: Axes, records: Sequence[Record]) -> list[_Spot]:
    """The spots the points are drawn at: a point joins the first spot whose marker its centre lies in."""
    to_points = 72 / ax.figure.dpi if ax.figure is not None else 1.0
    spots: list[_Spot] = []
    for r in records:
        x, y = r["flops"] / r["bytes"], r["flops"] / r["time_s"]
        at_x, at_y = ax.transData.transform((x, y)) * to_points
        at, size, name = (float(at_x), float(at_y)), float(r.get("size", 7)), _short(r)
        spot = next((spot for spot in spots if spot.holds(at, size)), None)
        if spot is None:
            spots.append(_Spot(x, y, at, size, [name]))
            continue
        spot.size = max(spot.size, size)
        if name not in spot.names:
            spot.names.append(name)
    return spots


#: where a point's label may go, in this order (right-below, left-above, left-below, right-above); its
#: near corner at (x · reach, y · 3) points from the point
_PLACES = ((1, -1), (-1, 1), (-1, -1), (1, 1))


def _lead_apart(drawn: Figure, labels: Sequence[tuple[Annotation, float]]) -> None:
    """Place each point's label, top point first, inside its panel where it covers no marker and no
    text placed before it, else moved down below what is in its way (docs/ci.md, "Outputs people
    look at")."""
    gap = 1.0  # points between two texts
    to_points = 72 / drawn.dpi

    def top_first(pair: tuple[Annotation, float]) -> tuple[float, float]:
        x, y = pair[0].axes.transData.transform(pair[0].xy) if pair[0].axes is not None else (0.0, 0.0)
        return (-y, x)

    drawn.draw_without_rendering()
    fixed = [t for ax in drawn.axes for t in ax.texts if t.get_text() and t.get_label() != POINT_LABEL]
    placed = [text.get_window_extent() for text in fixed]  # the roofs' labels stay
    placed += [_marker(label, size, drawn.dpi) for label, size in labels]
    for label, size in sorted(labels, key=top_first):
        reach = max(5.0, size / 2 + 1.5)  # clear of its marker, however large
        inside = [place for place in _PLACES if _within(_put(label, reach, place), label)]
        free = (place for place in inside if not _clashes(_put(label, reach, place), placed))
        box = _put(label, reach, next(free, None) or (inside or _PLACES)[0])
        for _ in range(len(placed)):  # each step moves it below every text it still overlaps
            clashes = _clashes(box, placed)
            if not clashes:
                break
            dx, dy = label.xyann
            label.xyann = (dx, dy - (box.y1 - min(other.y0 for other in clashes)) * to_points - gap)
            box = label.get_window_extent()
        placed.append(box)


def _marker(label: Annotation, size: float, dpi: float) -> Bbox:
    """Where the marker of a label's point is drawn, in pixels."""
    from matplotlib.transforms import Bbox

    x, y = label.axes.transData.transform(label.xy) if label.axes is not None else label.xy
    radius = size / 2 * dpi / 72
    return Bbox.from_extents(x - radius, y - radius, x + radius, y + radius)


def _put(label: Annotation, reach: float, place: tuple[int, int]) -> Bbox:
    """Move ``label`` to ``place`` (one of :data:`_PLACES`) beside its point; its extent there."""
    across, up = place
    label.xyann = (across * reach, up * 3.0)
    label.set_horizontalalignment("left" if across > 0 else "right")
    label.set_verticalalignment("top" if up < 0 else "bottom")
    return label.get_window_extent()


def _within(box: Bbox, label: Annotation) -> bool:
    """Whether ``box`` lies across its panel's width: a label past the edge would be cut."""
    panel = label.axes.bbox if label.axes is not None else box
    return bool(panel.x0 <= box.x0 and box.x1 <= panel.x1)


def _clashes(box: Bbox, placed: Sequence[Bbox]) -> list[Bbox]:
    return [other for other in placed if box.overlaps(other)]


def _level_roofs(ax: Axes, device: Record, records: Sequence[Record], low: float, top: float) -> None:
    """The memory roof of each cache level that judged a warm point here (the cache-aware roofline),
    dashed beside DRAM's."""
    judged = {r.get("memory_level") for r in records if r.get("cache_state") == "warm"}
    for level in device.get("levels") or ():
        if level.get("name") not in judged or not positive_number(level.get("bandwidth")):
            continue
        _memory_roof(
            ax, str(level["name"]).upper(), float(level["bandwidth"]), low, top, linewidth=1.0, linestyle="--"
        )


def _memory_roof(ax: Axes, name: str, bandwidth: float, low: float, top: float, **line: Any) -> None:
    """A memory roof, up to the highest compute roof, named at its foot."""
    ax.plot([low, top / bandwidth], [bandwidth * low, top], color="#444444", **line)
    ax.text(
        low * 1.3, bandwidth * low * 1.6, f"{name} {units.byte_rate(bandwidth)}", fontsize=8, color="#444444",
        va="bottom", **_AS_IS,
    )  # fmt: skip


def _short(r: Record) -> str:
    """``test_gemm[numpy]`` from ``tests/test_gemm.py::TestGemm::test_gemm[numpy]``, plus the name."""
    test = str(r.get("nodeid", "")).rsplit("::", 1)[-1]
    return f"{test} [{r['name']}]" if r.get("name") else test
