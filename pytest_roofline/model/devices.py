"""The built-in device table, name matching, and derivation of devices the table does not know.

Figures are dense peaks as their vendors publish them, at the clocks they quote them at
(``shared/reference/hardware.md`` sections 1, 2 and 6). Where a card has two tensor rates (FP16 vs
FP32 accumulate) the table holds the higher one (docs/floor.md ("Ceilings")); BF16 tensor math only
accumulates in FP32, so BF16 takes that rate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import RooflineUsageError
from .core import CacheSize, Device, Estimate, Figure, Kind, PeakTable, Precision, Source, Unit, did_you_mean

T = 1e12
GB = 1e9
MiB = 1 << 20

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR


class DeviceError(RooflineUsageError, ValueError):
    """A device that cannot be found or built; the message names it and the choices."""


# Column order of the peak rows below, matching hardware.md section 2.
_COLUMNS: tuple[tuple[Precision, Unit], ...] = (
    (P.FP64, V), (P.FP64, TC), (P.FP32, V), (P.FP16, V), (P.TF32, TC),
    (P.FP16, TC), (P.FP8_E4M3, TC), (P.INT8, TC),
)  # fmt: skip


# A peak cell: a number in TFLOP/s (the vendor's figure), a Figure no vendor source confirms
# (:func:`_derived`, :func:`_unconfirmed`), or None (absent).
Cell = float | Figure | None
#: how a figure's note starts where no source confirms it (``roofline devices`` marks it ``?``)
UNCONFIRMED = "unconfirmed"


def _derived(value: float, origin: str) -> Figure:
    return Figure(value * T, Source.DERIVED, origin)


def _unconfirmed(value: float, origin: str) -> Figure:
    return Figure(value * T, Source.DATASHEET, f"{UNCONFIRMED}: {origin}")


def _per_sm(count: int, rate: int, mhz: float, unit: str = "FLOP", cores: str = "SMs") -> str:
    """``132 SMs x 512 FLOP/clk x 1980 MHz``: where a derived figure comes from."""
    return f"{count} {cores} x {rate} {unit}/clk x {mhz:g} MHz"


@dataclass(frozen=True, slots=True)
class _Row:
    key: str
    names: tuple[str, ...]
    kind: Kind
    cores: int
    bandwidth_gbs: float
    #: the last-level cache a cold measurement must exceed, MiB: the L2 on NVIDIA, the 256 MiB
    #: Infinity Cache behind the L2 on MI300-series; None where no source gives it (the driver's
    #: L2 is taken, :func:`from_properties`)
    llc_mib: float | None
    peaks: tuple[Cell, ...]
    # BF16 runs at the FP16 rate unless a row says otherwise ("same"), or not at all (None)
    bf16_vector: Cell | Literal["same"] = "same"
    bf16_tensor: Cell | Literal["same"] = "same"
    #: FP4 tensor rate (NVFP4/MXFP4), where the card has one
    fp4_tensor: Cell = None
    #: the maximum SM clock (MHz), which the vector and FP64 tensor figures are quoted at; None
    #: where no source gives it
    clock_mhz: float | None = None
    #: the lower clock the TF32-and-narrower tensor figures are quoted at, where the vendor quotes
    #: them so (NVIDIA's H100 and H200: 1830 of 1980 MHz); their rate at ``clock_mhz`` is the
    #: figure's :attr:`~.core.Figure.at_max_clock`
    tensor_clock_mhz: float | None = None
    notes: tuple[str, ...] = ()
    #: where the row's figures come from (code only: the table's provenance, not shown to users)
    source: str = ""


_ROWS: tuple[_Row, ...] = (
    _Row("v100-sxm2", ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"), "cuda", 80, 900, 6,
         (7.8, None, 15.7, 31.3, None, 125, None, None), bf16_vector=None, bf16_tensor=None,
         clock_mhz=1530, notes=("no BF16 support",),
         source="NVIDIA Tesla V100 datasheet, SXM2 column"),
    _Row("t4", ("Tesla T4",), "cuda", 40, 320, 4,
         (0.25, None, 8.1, _derived(16.3, _per_sm(40, 256, 1590)), None, 65, None, 130),
         bf16_vector=None, bf16_tensor=None, clock_mhz=1590, notes=("no BF16 support",),
         source="NVIDIA T4 datasheet; FP16 vector derived"),
    _Row("a100-sxm-40gb", ("NVIDIA A100-SXM4-40GB",), "cuda", 108, 1555, 40,
         (9.7, 19.5, 19.5, 78, 156, 312, None, 624), bf16_vector=39, clock_mhz=1410,
         source="NVIDIA A100 Tensor Core GPU datasheet (dense: the sparse figures halved)"),
    _Row("a100-sxm-80gb", ("NVIDIA A100-SXM4-80GB",), "cuda", 108, 2039, 40,
         (9.7, 19.5, 19.5, 78, 156, 312, None, 624), bf16_vector=39, clock_mhz=1410,
         source="NVIDIA A100 Tensor Core GPU datasheet (dense: the sparse figures halved)"),
    _Row("a100-pcie-80gb", ("NVIDIA A100 80GB PCIe",), "cuda", 108, 1935, 40,
         (9.7, 19.5, 19.5, 78, 156, 312, None, 624), bf16_vector=39, clock_mhz=1410,
         source="NVIDIA A100 Tensor Core GPU datasheet, PCIe 80GB column"),
    _Row("a10", ("NVIDIA A10",), "cuda", 72, 600, 6,
         (_derived(0.49, _per_sm(72, 4, 1695)), None, 31.2, 31.2, 62.5, 125, None, 250), clock_mhz=1695,
         source="NVIDIA A10 datasheet; FP64 not on it: derived"),
    _Row("l4", ("NVIDIA L4",), "cuda", 58, 300, 48,
         (_derived(0.47, _per_sm(58, 4, 2040)), None, 30.3, 30.3, 60, 121, 242.5, 242.5), clock_mhz=2040,
         source="NVIDIA L4 datasheet; FP64 not on it: derived"),
    _Row("l40s", ("NVIDIA L40S",), "cuda", 142, 864, 96,
         (_derived(1.43, _per_sm(142, 4, 2520)), None, 91.6, 91.6, 183, 362, 733, 733), clock_mhz=2520,
         source="NVIDIA L40S datasheet; FP64 not on it: derived"),
    _Row("rtx-3070-ti", ("NVIDIA GeForce RTX 3070 Ti",), "cuda", 48, 608, 4,
         (_derived(0.34, _per_sm(48, 4, 1770)), None, _derived(21.7, _per_sm(48, 256, 1770)),
          _derived(21.7, _per_sm(48, 256, 1770)), _derived(21.7, _per_sm(48, 256, 1770) + ", GeForce TF32"),
          _derived(87.0, _per_sm(48, 1024, 1770) + ", FP16 accumulate"), None,
          _derived(174, _per_sm(48, 2048, 1770, "OP"))),
         bf16_tensor=_derived(43.5, _per_sm(48, 512, 1770) + ", FP32 accumulate"), clock_mhz=1770,
         notes=("FP16 tensor figure is the FP16-accumulate rate",),
         source="derived: 48 SMs x 1770 MHz x the GA10x GeForce rates (hardware.md section 3)"),
    _Row("rtx-3090", ("NVIDIA GeForce RTX 3090",), "cuda", 82, 936, 6,
         (_derived(0.56, _per_sm(82, 4, 1695)), None, 35.6, 35.6, 35.6, 142, None, 284), bf16_tensor=71,
         clock_mhz=1695, notes=("FP16 tensor figure is the FP16-accumulate rate",),
         source="NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090 column"),
    _Row("rtx-4090", ("NVIDIA GeForce RTX 4090",), "cuda", 128, 1008, 72,
         (1.29, None, 82.6, 82.6, 82.6, 330.3, 660.6, 660.6), bf16_tensor=165.2, clock_mhz=2520,
         notes=("FP16 and FP8 tensor figures are the FP16-accumulate rates",),
         source="NVIDIA Ada Lovelace GPU architecture whitepaper (v2.02), appendix table 2, as quoted "
                "publicly: dense, the 'Sparsity Feature' figures halved"),
    # BF16 accumulates in FP32 only, at half the FP16-accumulate rate on GeForce: 209.5 (419 is sparse)
    _Row("rtx-5090", ("NVIDIA GeForce RTX 5090",), "cuda", 170, 1792, 96,
         (None, None, _derived(104.8, _per_sm(170, 256, 2407)), None, None, 419, 838,
          _unconfirmed(838, "taken as FP8's FP16-accumulate rate; no INT8 figure checked")),
         bf16_tensor=209.5, fp4_tensor=1676, clock_mhz=2407,
         notes=("FP64, FP16 vector and TF32 peaks unconfirmed",
                "FP16 and FP8 tensor figures are the FP16-accumulate rates"),
         source="NVIDIA RTX Blackwell GPU architecture whitepaper (v1.1), appendix table 3, as quoted "
                "publicly: BF16 209.5/419, FP8 419/838 (FP32 acc), FP4 1676/3352 dense/sparse"),
    # Hopper's TF32-and-narrower tensor figures are quoted at a lower clock than the vector and FP64
    # tensor ones (hardware.md section 6; docs/floor.md, "Limits")
    _Row("h100-sxm", ("NVIDIA H100 80GB HBM3",), "cuda", 132, 3350, 50,
         (33.5, 66.9, 66.9, 133.8, 494.7, 989.4, 1978.9, 1978.9), clock_mhz=1980, tensor_clock_mhz=1830,
         source="NVIDIA H100 Tensor Core GPU datasheet, SXM column"),
    _Row("h100-pcie", ("NVIDIA H100 PCIe",), "cuda", 114, 2000, 50,
         (25.6, 51.2, 51.2, 102.4, 378, 756, 1513, 1513), clock_mhz=1755, tensor_clock_mhz=1620,
         source="NVIDIA H100 Tensor Core GPU datasheet, PCIe column"),
    # The datasheet's tensor figures imply 1545 MHz (835.5 T / (132 x 4096)); the card boosts to
    # 1785, where a kernel can reach 965 T
    _Row("h100-nvl", ("NVIDIA H100 NVL",), "cuda", 132, 3900, 50,
         (30, 60, 60, _derived(120.6, _per_sm(132, 512, 1785)), 417.5, 835.5, 1670.5, 1670.5),
         clock_mhz=1785, tensor_clock_mhz=1545, notes=("SM count, clock and L2 unconfirmed",),
         source="NVIDIA H100 Tensor Core GPU datasheet, NVL column (TF32 835, BF16 1671, FP8 3341 with "
                "sparsity: halved); FP16 vector not on it: derived"),
    _Row("h200", ("NVIDIA H200",), "cuda", 132, 4800, 60,
         (34, 67, 67, _derived(133.8, _per_sm(132, 512, 1980) + ", not on the H200 datasheet"),
          494.5, 989.5, 1979, 1979), clock_mhz=1980, tensor_clock_mhz=1830,
         source="NVIDIA H200 Tensor Core GPU datasheet, SXM column; L2 as the driver reports it (60 MB)"),
    _Row("b200", ("NVIDIA B200",), "cuda", 148, 7700, 126,
         (40, 40, 80, None, 1100, 2250, 4500, 4500), fp4_tensor=9000,
         notes=("FP64/FP32 40/80 (1000 W brief) held over the current datasheet's 37/75, the higher",),
         source="NVIDIA HGX B200 brief (1000 W per GPU): FP64/FP32 40/80; tensor rates and HBM the "
                "current Blackwell datasheet, collected 2026-11 (sparse, halved; NVFP4 18 | 9 PF sparse | "
                "dense; HBM 7.7 TB/s, earlier revisions 8, and the driver reports a 7680-bit bus)"),
    _Row("gb200", ("NVIDIA GB200",), "cuda", 0, 8000, 126,
         (_unconfirmed(45, "the 1200 W figure as published secondhand; the datasheet's is 40"),
          _unconfirmed(45, "the 1200 W figure as published secondhand; the datasheet's is 40"),
          _unconfirmed(90, "the 1200 W figure as published secondhand; the datasheet's is 80"),
          None, 1250, 2500, 5000, 5000), fp4_tensor=10000,
         notes=("per GPU of a GB200 superchip; SM count, clock and L2 unconfirmed",
                "FP64/FP32 45/90 (1200 W, unconfirmed) held over the datasheet's 40/80, the higher"),
         source="NVIDIA Blackwell datasheet, GB200 NVL72 column / 72 GPUs, as transcribed publicly "
                "(tensor figures sparse, halved; NVFP4 20 | 10 PF sparse | dense); checked against "
                "hardware.md section 6, collected 2026-11 (2500/5000/10000, 8.0 TB/s)"),
    # Public HGX B300 logs show "NVIDIA B300 SXM6 AC"; "NVIDIA B300" is unconfirmed. Blackwell Ultra
    # cut FP64 and INT8; no source gives its vector rates, so FP32 is B200's figure
    _Row("b300", ("NVIDIA B300 SXM6 AC", "NVIDIA B300"), "cuda", 0, 8000, None,
         (None, None, _unconfirmed(80, "B200's figure: no source gives B300's"), None,
          _derived(1125, "half the BF16 rate, as on A100, H100 and B200 (1100 of 2250)"), 2250, 4500, None),
         fp4_tensor=_unconfirmed(14000, "sources give 13000-14000 dense: the higher held"),
         notes=("per GPU of an HGX B300; SM count, clock and L2 unconfirmed",
                "HBM 7.7-8.0 TB/s by source: 8 TB/s held, the higher"),
         source="NVIDIA DGX B300 datasheet, per GPU (BF16, FP8); FP4 and HBM from secondary tables, "
                "which disagree; collected 2026-11"),
    # The name the driver reports for a GB300's GPU is unconfirmed ("NVIDIA GB300" by analogy
    # with "NVIDIA GB200"); vector rates as for B300, GB200's figure
    _Row("gb300", ("NVIDIA GB300",), "cuda", 0, 8000, None,
         (None, None, _unconfirmed(90, "GB200's figure: no source gives GB300's"), None,
          _derived(1250, "half the BF16 rate, as on A100, H100 and B200 (1100 of 2250)"), 2500, 5000, None),
         fp4_tensor=15000,
         notes=("per GPU of a GB300 superchip; SM count, clock and L2 unconfirmed",),
         source='NVIDIA "Inside Blackwell Ultra" technical blog, per GPU (BF16, FP8, FP4, HBM 8 TB/s); '
                "collected 2026-11"),
    # One CuPy device is one die, half of the card: the per-card figures are halved.
    _Row("mi250x", ("AMD Instinct MI250X/MI250", "AMD Instinct MI250X", "AMD Instinct MI250"), "rocm",
         110, 1638, 8,
         (23.95, 47.85, 47.85, None, None, 191.5, None, 191.5), clock_mhz=1700,
         notes=("per die (one CuPy device); FP32 is the packed-FP32 rate",),
         source="AMD Instinct MI250X data sheet (per card; halved per die)"),
    # MI300-series: the last-level cache is the 256 MiB Infinity Cache behind the L2 (4 MiB per XCD)
    _Row("mi300x", ("AMD Instinct MI300X",), "rocm", 304, 5300, 256,
         (81.7, 163.4, 163.4, None, 653.7, 1307.4, 2614.9, 2614.9), clock_mhz=2100,
         notes=("last-level cache: the 256 MiB Infinity Cache (L2 4 MiB per XCD)",),
         source="AMD Instinct MI300X data sheet; checked against ROCm docs, MI300 microarchitecture, "
                "table 'Peak-performance capabilities of the MI300X' (5.3 TB/s) and gpu-arch-specs "
                "(304 CUs, L2 4 MB per XCD, 256 MB Infinity Cache)"),
    _Row("mi325x", ("AMD Instinct MI325X",), "rocm", 304, 6000, 256,
         (81.7, 163.4, 163.4, None, 653.7, 1307.4, 2614.9, 2614.9), clock_mhz=2100,
         notes=("last-level cache: the 256 MiB Infinity Cache (L2 4 MiB per XCD)",),
         source="AMD product page (1307.4/2614.9, 6.0 TB/s, 256 MB Infinity Cache; collected 2026-11); "
                "ROCm docs gpu-arch-specs (gfx942, 304 CUs): the MI300X's CUs and clock, so its per-CU "
                "rates (MI300 microarchitecture page)"),
    # gfx950 per-CU rates per clock from rocprofiler-compute's speed-of-light config (BF16/FP16 4096,
    # FP8 and INT8 8192, FP6/FP4 16384, FP64 matrix 128, FP32 matrix 256) x 256 CUs x 2400 MHz give
    # the figures AMD does not publish; AMD's own (BF16 2500, FP8 5000, FP4/FP6 10100) are held
    _Row("mi355x", ("AMD Instinct MI355X",), "rocm", 256, 8000, 256,
         (_unconfirmed(78.6, "as published secondhand; " + _per_sm(256, 128, 2400, cores="CUs")),
          _derived(78.6, _per_sm(256, 128, 2400, cores="CUs")),
          _unconfirmed(157.3, "as published secondhand; " + _per_sm(256, 256, 2400, cores="CUs")),
          None, None, 2500, 5000, _derived(5033.2, _per_sm(256, 8192, 2400, "OP", "CUs"))),
         fp4_tensor=10100, clock_mhz=2400,
         notes=("no TF32 hardware", "last-level cache: the 256 MiB Infinity Cache",
                "clock unconfirmed (2400 MHz, as published secondhand)"),
         source="AMD product page (BF16 2500, FP8 5000, FP4/FP6 10100, 8.0 TB/s, 256 MB Infinity "
                "Cache; collected 2026-11); ROCm docs gpu-arch-specs (gfx950, 256 CUs) and "
                "rocprofiler-compute's gfx950 speed-of-light rates for the rest, derived at 2400 MHz"),
)  # fmt: skip


def _figure(cell: Cell | Literal["same"]) -> Figure | None:
    if isinstance(cell, (int, float)):
        return Figure(cell * T, Source.DATASHEET)
    return cell if isinstance(cell, Figure) else None


def is_unconfirmed(figure: Figure) -> bool:
    """Whether no source confirms ``figure`` (a table cell marked ``?``)."""
    return figure.note.startswith(UNCONFIRMED)


def _quoted_mhz(row: _Row, precision: Precision, unit: Unit) -> float | None:
    """The SM clock a row's figure for (precision, unit) is quoted at (None: not known)."""
    if unit is TC and precision is not P.FP64 and row.tensor_clock_mhz is not None:
        return row.tensor_clock_mhz
    return row.clock_mhz


def quoted_clock_mhz(estimate: Estimate) -> float | None:
    """The SM clock (MHz) the device table row quotes the peak bounding a compute-bound ``estimate``
    at; None for a figure not from the table (measured, a peaks file's, derived, a MIG slice's) and
    for a row that names no clock."""
    precision, unit = estimate.peak_precision, estimate.unit
    row = _ROW_OF.get(estimate.device.key)
    figure = estimate.device.peaks.get((precision, unit))
    if row is None or figure is None or figure.source is not Source.DATASHEET:
        return None
    return _quoted_mhz(row, precision, unit)


def _at_max_clock(row: _Row, peaks: PeakTable, max_mhz: float) -> dict[tuple[Precision, Unit], Figure]:
    """``peaks`` with each figure's rate at ``max_mhz`` (:attr:`Figure.at_max_clock`) where the row
    quotes it at a lower clock, by more than the driver's rounding; the figures themselves as quoted."""
    result = dict(peaks)
    for (precision, unit), figure in peaks.items():
        quoted = _quoted_mhz(row, precision, unit)
        if quoted is None or max_mhz <= quoted * (1 + _CLOCK_TOLERANCE):
            continue
        rate = figure.value * max_mhz / quoted
        if figure.at_max_clock is None or rate > figure.at_max_clock:
            result[(precision, unit)] = replace(figure, at_max_clock=rate)
    return result


#: a reported clock within this of the quoted one is the same clock (kHz rounding)
_CLOCK_TOLERANCE = 0.005


def _build(row: _Row) -> Device:
    peaks: dict[tuple[Precision, Unit], Figure] = {}
    for column, cell in zip(_COLUMNS, row.peaks, strict=True):
        figure = _figure(cell)
        if figure is not None:
            peaks[column] = figure
    extra_cells: tuple[tuple[Precision, Unit, Cell | Literal["same"]], ...] = (
        (P.BF16, V, row.bf16_vector),
        (P.BF16, TC, row.bf16_tensor),
        (P.FP4, TC, row.fp4_tensor),
    )
    for precision, unit, extra in extra_cells:
        figure = peaks.get((P.FP16, unit)) if extra == "same" else _figure(extra)
        if figure is not None:
            peaks[(precision, unit)] = figure
    link = INTERCONNECTS.get(row.key)
    return Device(
        key=row.key,
        name=row.names[0],
        kind=row.kind,
        peaks=peaks if row.clock_mhz is None else _at_max_clock(row, peaks, row.clock_mhz),
        bandwidth=Figure(row.bandwidth_gbs * GB, Source.DATASHEET),
        llc_bytes=None if row.llc_mib is None else int(row.llc_mib * MiB),
        cores=row.cores,
        names=row.names,
        notes=row.notes,
        interconnect=None if link is None else Figure(link[0], Source.DATASHEET, link[1]),
    )


#: per-GPU interconnect bandwidth, bytes/s in each direction (NVIDIA's bidirectional NVLink figures
#: halved), and its source: an all-reduce's floor is its bytes over this (``roofline llm --tp``)
INTERCONNECTS: Mapping[str, tuple[float, str]] = {
    "v100-sxm2": (150e9, "NVLink 2: 300 GB/s bidirectional per GPU (V100 datasheet)"),
    "a100-sxm-40gb": (300e9, "NVLink 3: 600 GB/s bidirectional per GPU (A100 datasheet)"),
    "a100-sxm-80gb": (300e9, "NVLink 3: 600 GB/s bidirectional per GPU (A100 datasheet)"),
    "a100-pcie-80gb": (300e9, "NVLink bridge: 600 GB/s bidirectional (A100 PCIe datasheet)"),
    "h100-sxm": (450e9, "NVLink 4: 900 GB/s bidirectional per GPU (H100 datasheet)"),
    "h100-nvl": (300e9, "NVLink bridge: 600 GB/s bidirectional (H100 NVL datasheet)"),
    "h100-pcie": (300e9, "NVLink bridge: 600 GB/s bidirectional (H100 PCIe datasheet)"),
    "h200": (450e9, "NVLink 4: 900 GB/s bidirectional per GPU (H200 datasheet)"),
    "b200": (900e9, "NVLink 5: 1.8 TB/s bidirectional per GPU (B200 / HGX B200 datasheet)"),
    "mi300x": (448e9, "xGMI (Infinity Fabric): 7 links × 64 GB/s per direction (AMD MI300X datasheet)"),
}


#: the rows above by key, and as devices; :data:`_TABLE` starts as them and takes registered devices too
_ROW_OF: dict[str, _Row] = {row.key: row for row in _ROWS}
_BUILT_IN: dict[str, Device] = {row.key: _build(row) for row in _ROWS}
_TABLE: dict[str, Device] = dict(_BUILT_IN)
_CPU_KEY = "cpu"


def table() -> Mapping[str, Device]:
    """The built-in and registered devices by key (the CPU is measured, so it is not in here)."""
    return dict(_TABLE)


def register_device(device: Device, *, replace: bool = False) -> Device:
    """Add a device to the table so ``get_device`` finds it by key and by reported name."""
    if not isinstance(device, Device):
        raise DeviceError(f"register_device takes a Device; got {device!r}")
    if device.key == _CPU_KEY:
        raise DeviceError("the key 'cpu' is reserved for this machine's measured CPU")
    if device.key in _TABLE and not replace:
        raise DeviceError(f"device {device.key!r} is already registered; pass replace=True to redefine it")
    _TABLE[device.key] = device
    return device


def unregister_device(key: str) -> None:
    _TABLE.pop(key, None)


def _normalize(name: str) -> str:
    return re.sub(r"[\s_]+", " ", name.strip()).lower()


def find_device(name_or_key: str) -> Device | None:
    """A table device by key (``h100-sxm``) or by the exact name the driver reports."""
    if name_or_key in _TABLE:
        return _TABLE[name_or_key]
    wanted = _normalize(name_or_key)
    # newest first: a device registered by a plugin wins over the built-in entry it renames
    for device in reversed(list(_TABLE.values())):
        if wanted == device.key or any(_normalize(n) == wanted for n in device.names):
            return device
    return None


def lookup(name_or_key: str) -> Device:
    """Like :func:`find_device`, but a DeviceError naming the key and the choices when absent."""
    if not isinstance(name_or_key, str):
        raise DeviceError(f"device must be a key or a device name; got {name_or_key!r}")
    found = find_device(name_or_key)
    if found is None:
        choices = sorted(_TABLE)
        raise DeviceError(
            f"unknown device {name_or_key!r}{did_you_mean(name_or_key, [*choices, _CPU_KEY])}; "
            f"known: cpu, {', '.join(choices)} (run `roofline devices`)"
        )
    return found


# -- devices that are not in the table -------------------------------------------------------

# Dense FLOP per clock per SM (hardware.md section 3), by compute capability. Where a GeForce part
# is slower (GA10x/Ada TF32 and FP32-accumulate rates), the higher professional rate is kept.
_PER_SM_RATES: dict[tuple[int, int], dict[tuple[Precision, Unit], int]] = {
    (7, 0): {(P.FP64, V): 64, (P.FP32, V): 128, (P.FP16, V): 256, (P.FP16, TC): 1024},
    (7, 5): {(P.FP64, V): 4, (P.FP32, V): 128, (P.FP16, V): 256, (P.FP16, TC): 1024, (P.INT8, TC): 2048},
    (8, 0): {(P.FP64, V): 64, (P.FP64, TC): 128, (P.FP32, V): 128, (P.FP16, V): 512, (P.TF32, TC): 1024,
             (P.FP16, TC): 2048, (P.BF16, TC): 2048, (P.INT8, TC): 4096},
    (8, 6): {(P.FP64, V): 4, (P.FP32, V): 256, (P.FP16, V): 256, (P.TF32, TC): 512, (P.FP16, TC): 1024,
             (P.BF16, TC): 1024, (P.INT8, TC): 2048},
    (8, 9): {(P.FP64, V): 4, (P.FP32, V): 256, (P.FP16, V): 256, (P.TF32, TC): 512, (P.FP16, TC): 1024,
             (P.BF16, TC): 1024, (P.FP8_E4M3, TC): 2048, (P.INT8, TC): 2048},
    (9, 0): {(P.FP64, V): 128, (P.FP64, TC): 256, (P.FP32, V): 256, (P.FP16, V): 512, (P.TF32, TC): 2048,
             (P.FP16, TC): 4096, (P.BF16, TC): 4096, (P.FP8_E4M3, TC): 8192, (P.INT8, TC): 8192},
}  # fmt: skip
# Other GA10x-like minors (8.7 Orin) share 8.6's rates.
_ARCH_ALIASES = {(8, 7): (8, 6)}


@dataclass(frozen=True, slots=True)
class DeviceProperties:
    """What the driver reports about a GPU, in the units CUDA uses (clocks in kHz)."""

    name: str
    kind: Kind = "cuda"
    major: int = 0
    minor: int = 0
    multiprocessors: int = 0
    clock_khz: int = 0
    memory_clock_khz: int = 0
    bus_width_bits: int = 0
    l2_bytes: int = 0
    arch_name: str = ""  # ROCm gcnArchName


_MIG_SUFFIX = re.compile(r"\s+MIG\s+\S+$")


def from_properties(props: DeviceProperties) -> Device:
    """The device a driver describes: the table's entry when the name matches, else derived.

    A table match whose reported SM count is lower (a MIG slice) has its compute peaks scaled by the
    SM ratio, its bandwidth left whole; a row with no last-level cache figure takes the driver's L2.
    MI250 and MI250X report one name and are told apart by their CU count.
    """
    # MIG slices report e.g. "NVIDIA A100-SXM4-40GB MIG 1g.5gb": the card is the name before " MIG"
    known = find_device(_MIG_SUFFIX.sub("", props.name))
    if known is not None and known.key == "mi250x" and props.multiprocessors and props.multiprocessors < 110:
        known = None  # an MI250 die has 104 CUs: derive nothing, ask for peaks below
    if known is not None:
        known = at_reported_clock(known, props.clock_khz / 1e3)
        if known.llc_bytes is None and props.l2_bytes:
            known = replace(known, llc_bytes=props.l2_bytes)
        if props.multiprocessors and known.cores and props.multiprocessors < known.cores:
            return _scaled(known, props.multiprocessors)
        return known
    if props.kind == "rocm":
        raise DeviceError(
            f"device {props.name!r} ({props.arch_name or 'unknown arch'}) is not in the table and AMD "
            "peaks cannot be derived from properties; give its peaks with --roofline-peaks FILE"
        )
    return derive(props)


def at_reported_clock(device: Device, max_mhz: float) -> Device:
    """A built-in device whose driver reports a higher maximum SM clock than its row's figures are
    quoted at (a factory-overclocked GeForce card), with each such figure's rate at that clock as its
    :attr:`~.core.Figure.at_max_clock`; the figures themselves stay as quoted. A clock no higher than
    the row's maximum, or unknown (0), changes nothing. Why: docs/floor.md ("Limits")."""
    row = _ROW_OF.get(device.key)
    if row is None or max_mhz <= 0 or _BUILT_IN.get(device.key) is not device:
        return device  # not a built-in row: a registered device keeps its own figures, under any key
    peaks = _at_max_clock(row, device.peaks, max_mhz)
    raised = [f"{precision} {unit}" for (precision, unit), figure in peaks.items()
              if figure is not device.peaks[(precision, unit)]]  # fmt: skip
    if not raised:
        return device
    note = (
        f"the driver reports a {max_mhz:.0f} MHz maximum SM clock, above the one the figures are quoted "
        f"at: the faster-than-light limit allows for it ({', '.join(raised)})"
    )
    return replace(device, peaks=peaks, notes=(*device.notes, note))


def _scaled(device: Device, sms: int) -> Device:
    ratio = sms / (device.cores or sms)
    note = f"{sms} of {device.cores} SMs (MIG or partition): compute peaks scaled by {ratio:.3f}"

    def share(figure: Figure) -> Figure:
        top = None if figure.at_max_clock is None else figure.at_max_clock * ratio
        return Figure(figure.value * ratio, Source.DERIVED, note, top)

    peaks = {k: share(f) for k, f in device.peaks.items()}
    return replace(device, key=f"{device.key}-{sms}sm", peaks=peaks, cores=sms, notes=(*device.notes, note))


def derive(props: DeviceProperties) -> Device:
    """Peaks from SMs × clock × per-SM rate; bandwidth = 2 × memory clock × bus width / 8."""
    arch = _ARCH_ALIASES.get((props.major, props.minor), (props.major, props.minor))
    rates = _PER_SM_RATES.get(arch)
    if rates is None:
        raise DeviceError(
            f"device {props.name!r} (compute capability {props.major}.{props.minor}) is not in the table "
            "and its per-SM rates are not confirmed; give its peaks with --roofline-peaks FILE"
        )
    missing = [
        label
        for label, value in (
            ("multiProcessorCount", props.multiprocessors),
            ("clockRate", props.clock_khz),
            ("memoryClockRate", props.memory_clock_khz),
            ("memoryBusWidth", props.bus_width_bits),
        )
        if value <= 0
    ]
    if missing:
        raise DeviceError(
            f"cannot derive device {props.name!r}: the driver did not report {', '.join(missing)}"
        )
    clock_hz = props.clock_khz * 1e3
    mhz = props.clock_khz / 1e3
    note = f"{props.multiprocessors} SMs × {mhz:.0f} MHz × per-SM rate of CC {arch[0]}.{arch[1]}"
    peaks: PeakTable = {
        key: Figure(props.multiprocessors * clock_hz * rate, Source.DERIVED, note)
        for key, rate in rates.items()
    }
    bandwidth = 2 * props.memory_clock_khz * 1e3 * props.bus_width_bits / 8
    return Device(
        key=slug(props.name) or "gpu",
        name=props.name,
        kind=props.kind,
        peaks=peaks,
        bandwidth=Figure(bandwidth, Source.DERIVED, "2 × memory clock × bus width / 8"),
        llc_bytes=props.l2_bytes or None,
        cores=props.multiprocessors,
        names=(props.name,),
        notes=("derived from device properties",),
    )


def slug(name: str) -> str:
    """``"NVIDIA H100 80GB HBM3"`` -> ``"nvidia-h100-80gb-hbm3"`` (``""`` when nothing is left)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def describe_peaks(device: Device) -> Iterable[tuple[Precision, Unit, Figure]]:
    """The device's peaks in a stable order: precision, then tensor before vector."""
    order = list(Precision)
    return sorted(
        ((p, u, f) for (p, u), f in device.peaks.items()),
        key=lambda item: (order.index(item[0]), item[1] is Unit.VECTOR),
    )


def describe_cache(cache: CacheSize, *, reported_by: str, rate: float | None = None) -> str:
    """A cache level's two capacities and its roof, for ``roofline calibrate``, ``roofline devices``
    and the report: ``480 MiB (sysfs), 48 MiB effective, 27.2 GB/s``; ``48 KiB per core (sysfs), not
    seen by the capacity sweep: not used``."""
    from .units import binary_bytes

    text = f"{binary_bytes(cache.reported_bytes)}{' per core' if cache.per_core else ''} ({reported_by})"
    if cache.effective_bytes is None:
        return f"{text}, not seen by the capacity sweep: not used"
    if cache.found == "unreached":
        text += ", kept: the capacity sweep stopped short of it"
    else:
        text += f", {binary_bytes(cache.effective_bytes)} effective"
    return text if rate is None else f"{text}, {rate / GB:,.1f} GB/s"
