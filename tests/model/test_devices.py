"""The device table (checked against shared/reference/hardware.md), name matching and derivation."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_roofline.model import devices
from pytest_roofline.model.core import Device, Figure, Precision, Source, Unit
from pytest_roofline.model.devices import (
    DeviceError,
    DeviceProperties,
    derive,
    describe_peaks,
    find_device,
    from_properties,
    lookup,
    register_device,
    table,
    unregister_device,
)
from pytest_roofline.model.estimate import estimate

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR
T, GB, MiB = 1e12, 1e9, 1 << 20


@pytest.fixture
def device_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register and unregister devices without leaking into the next test."""
    monkeypatch.setattr(devices, "_TABLE", dict(devices._TABLE))


# hardware.md sections 1 and 6: key, the names CUDA/ROCm report, kind, SMs/CUs, DRAM GB/s, the
# last-level cache in MiB (None: no source gives it)
IDENTITY: list[tuple[str, tuple[str, ...], str, int, float, int | None]] = [
    ("v100-sxm2", ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"), "cuda", 80, 900, 6),
    ("t4", ("Tesla T4",), "cuda", 40, 320, 4),
    ("a100-sxm-40gb", ("NVIDIA A100-SXM4-40GB",), "cuda", 108, 1555, 40),
    ("a100-sxm-80gb", ("NVIDIA A100-SXM4-80GB",), "cuda", 108, 2039, 40),
    ("a100-pcie-80gb", ("NVIDIA A100 80GB PCIe",), "cuda", 108, 1935, 40),
    ("a10", ("NVIDIA A10",), "cuda", 72, 600, 6),
    ("l4", ("NVIDIA L4",), "cuda", 58, 300, 48),
    ("l40s", ("NVIDIA L40S",), "cuda", 142, 864, 96),
    ("rtx-3070-ti", ("NVIDIA GeForce RTX 3070 Ti",), "cuda", 48, 608, 4),
    ("rtx-3090", ("NVIDIA GeForce RTX 3090",), "cuda", 82, 936, 6),
    ("rtx-4090", ("NVIDIA GeForce RTX 4090",), "cuda", 128, 1008, 72),
    ("rtx-5090", ("NVIDIA GeForce RTX 5090",), "cuda", 170, 1792, 96),
    ("h100-sxm", ("NVIDIA H100 80GB HBM3",), "cuda", 132, 3350, 50),
    ("h100-pcie", ("NVIDIA H100 PCIe",), "cuda", 114, 2000, 50),
    ("h100-nvl", ("NVIDIA H100 NVL",), "cuda", 132, 3900, 50),
    ("h200", ("NVIDIA H200",), "cuda", 132, 4800, 60),  # issue 12: the driver reports 60 MB
    ("b200", ("NVIDIA B200",), "cuda", 148, 7700, 126),  # section 6: the current datasheet's 7.7 TB/s
    ("gb200", ("NVIDIA GB200",), "cuda", 0, 8000, 126),  # SM count unconfirmed: 0, so never MIG-scaled
    ("b300", ("NVIDIA B300 SXM6 AC", "NVIDIA B300"), "cuda", 0, 8000, None),
    ("gb300", ("NVIDIA GB300",), "cuda", 0, 8000, None),
    ("mi250x", ("AMD Instinct MI250X/MI250",), "rocm", 110, 1638, 8),
    # MI300-series: the 256 MiB Infinity Cache, which rotation and the flush must exceed
    ("mi300x", ("AMD Instinct MI300X",), "rocm", 304, 5300, 256),
    ("mi325x", ("AMD Instinct MI325X",), "rocm", 304, 6000, 256),
    ("mi355x", ("AMD Instinct MI355X",), "rocm", 256, 8000, 256),
]
KEYS = [row[0] for row in IDENTITY]
NAMES = [(key, name) for key, names, *_ in IDENTITY for name in names]


def test_the_table_holds_exactly_the_reference_rows() -> None:
    assert sorted(table()) == sorted(KEYS)


def test_table_returns_a_copy() -> None:
    copy = table()
    copy.pop("h100-sxm")  # type: ignore[attr-defined]
    assert "h100-sxm" in table()


@pytest.mark.parametrize(("key", "names", "kind", "cores", "gbs", "llc_mib"), IDENTITY, ids=KEYS)
def test_identity_and_memory(
    key: str, names: tuple[str, ...], kind: str, cores: int, gbs: float, llc_mib: int | None
) -> None:
    dev = lookup(key)
    assert (dev.key, dev.name, dev.kind, dev.cores) == (key, names[0], kind, cores)
    assert set(names) <= set(dev.names)
    assert dev.bandwidth == Figure(gbs * GB, Source.DATASHEET)
    assert dev.llc_bytes == (None if llc_mib is None else llc_mib * MiB)


@pytest.mark.parametrize("key", KEYS)
def test_lookup_by_key(key: str) -> None:
    assert lookup(key).key == key
    assert find_device(key) is lookup(key)


@pytest.mark.parametrize(("key", "name"), NAMES, ids=[name for _, name in NAMES])
def test_lookup_by_the_exact_name_the_driver_reports(key: str, name: str) -> None:
    assert lookup(name).key == key
    assert find_device(name) is lookup(key)


@pytest.mark.parametrize(
    ("name", "key"),
    [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
     ("Tesla V100-SXM2-32GB", "v100-sxm2"), ("NVIDIA H200", "h200"), ("NVIDIA A10", "a10"),
     ("nvidia h100 80gb hbm3", "h100-sxm"), ("  NVIDIA  H100 80GB HBM3 ", "h100-sxm"),
     ("H100-SXM", "h100-sxm")],
)  # fmt: skip
def test_name_matching_forgives_case_and_spacing_only(name: str, key: str) -> None:
    assert lookup(name).key == key


@pytest.mark.parametrize(
    "name",
    ["NVIDIA H100", "H100", "NVIDIA A100", "Tesla V100", "NVIDIA H100 80GB", "NVIDIA GeForce RTX 4080"],
)
def test_partial_names_do_not_match(name: str) -> None:
    # a prefix is not a name: "NVIDIA H100" could be any of three cards
    assert find_device(name) is None
    with pytest.raises(DeviceError, match=f"unknown device '{name}'"):
        lookup(name)


@pytest.mark.parametrize(
    ("wrong", "hint"), [("h100-smx", "h100-sxm"), ("a100-pcie", "a100-pcie-80gb"), ("rtx4090", "rtx-4090")]
)
def test_unknown_key_suggests_the_closest_and_lists_all(wrong: str, hint: str) -> None:
    with pytest.raises(
        DeviceError, match=rf"^unknown device '{wrong}' \(did you mean '{hint}'\?\); known: cpu, "
    ) as info:
        lookup(wrong)
    message = str(info.value)
    assert ", ".join(sorted(KEYS)) in message
    assert "roofline devices" in message


@pytest.mark.parametrize("value", [None, 3, b"NVIDIA H200"])
def test_lookup_wants_a_string(value: object) -> None:
    with pytest.raises(DeviceError, match="device must be a key or a device name"):
        lookup(value)  # type: ignore[arg-type]


def test_device_errors_are_value_errors() -> None:
    assert issubclass(DeviceError, ValueError)


# -- peaks (hardware.md section 2) -------------------------------------------------------------

# (key, precision, unit, TFLOP/s, source, what the note says: "" none, else a part of it)
PEAKS: list[tuple[str, Precision, Unit, float, Source, str]] = [
    ("h100-sxm", P.BF16, TC, 989.4, Source.DATASHEET, ""),
    ("h100-sxm", P.FP16, TC, 989.4, Source.DATASHEET, ""),
    ("h100-sxm", P.FP32, V, 66.9, Source.DATASHEET, ""),
    ("h100-sxm", P.FP64, V, 33.5, Source.DATASHEET, ""),
    ("h100-sxm", P.FP64, TC, 66.9, Source.DATASHEET, ""),
    ("h100-sxm", P.FP16, V, 133.8, Source.DATASHEET, ""),
    ("h100-sxm", P.BF16, V, 133.8, Source.DATASHEET, ""),
    ("h100-sxm", P.TF32, TC, 494.7, Source.DATASHEET, ""),
    ("h100-sxm", P.FP8_E4M3, TC, 1978.9, Source.DATASHEET, ""),
    ("h100-sxm", P.FP8_E5M2, TC, 1978.9, Source.DATASHEET, ""),
    ("h100-sxm", P.INT8, TC, 1978.9, Source.DATASHEET, ""),
    ("h100-pcie", P.BF16, TC, 756, Source.DATASHEET, ""),
    ("h100-nvl", P.BF16, TC, 835.5, Source.DATASHEET, ""),
    ("h200", P.BF16, TC, 989.5, Source.DATASHEET, ""),
    ("h200", P.FP64, V, 34, Source.DATASHEET, ""),
    ("h200", P.FP64, TC, 67, Source.DATASHEET, ""),
    ("h200", P.FP8_E4M3, TC, 1979, Source.DATASHEET, ""),
    # not on the H200 datasheet: derived, not H100's figure shown as the H200's
    ("h200", P.FP16, V, 133.8, Source.DERIVED, "132 SMs x 512 FLOP/clk x 1980 MHz"),
    ("b200", P.BF16, TC, 2250, Source.DATASHEET, ""),
    ("b200", P.FP64, TC, 40, Source.DATASHEET, ""),  # the 1000 W brief (issue 12)
    ("b200", P.FP32, V, 80, Source.DATASHEET, ""),
    ("l40s", P.FP64, V, 1.43, Source.DERIVED, "142 SMs x 4 FLOP/clk x 2520 MHz"),  # not on the datasheet
    ("a100-sxm-40gb", P.BF16, V, 39, Source.DATASHEET, ""),
    ("a100-sxm-80gb", P.BF16, V, 39, Source.DATASHEET, ""),
    ("a100-pcie-80gb", P.BF16, V, 39, Source.DATASHEET, ""),
    ("a100-pcie-80gb", P.FP16, V, 78, Source.DATASHEET, ""),
    ("a100-sxm-80gb", P.BF16, TC, 312, Source.DATASHEET, ""),
    ("a100-sxm-80gb", P.TF32, TC, 156, Source.DATASHEET, ""),
    ("a100-sxm-80gb", P.INT8, TC, 624, Source.DATASHEET, ""),
    ("v100-sxm2", P.FP16, TC, 125, Source.DATASHEET, ""),
    ("v100-sxm2", P.FP32, V, 15.7, Source.DATASHEET, ""),
    ("t4", P.FP16, TC, 65, Source.DATASHEET, ""),
    ("t4", P.FP16, V, 16.3, Source.DERIVED, "40 SMs x 256 FLOP/clk x 1590 MHz"),  # "16.3ᵈ"
    ("t4", P.INT8, TC, 130, Source.DATASHEET, ""),
    ("a10", P.FP64, V, 0.49, Source.DERIVED, "72 SMs x 4 FLOP/clk x 1695 MHz"),
    ("a10", P.BF16, TC, 125, Source.DATASHEET, ""),
    ("l4", P.FP64, V, 0.47, Source.DERIVED, "58 SMs x 4 FLOP/clk x 2040 MHz"),
    ("l4", P.FP8_E4M3, TC, 242.5, Source.DATASHEET, ""),
    ("l40s", P.FP8_E4M3, TC, 733, Source.DATASHEET, ""),
    # GeForce: FP16 tensor at the FP16-accumulate rate (the higher); BF16 only accumulates in FP32
    ("rtx-4090", P.FP16, TC, 330.3, Source.DATASHEET, ""),
    ("rtx-4090", P.BF16, TC, 165.2, Source.DATASHEET, ""),
    ("rtx-4090", P.FP8_E4M3, TC, 660.6, Source.DATASHEET, ""),
    ("rtx-4090", P.TF32, TC, 82.6, Source.DATASHEET, ""),
    ("rtx-3090", P.FP16, TC, 142, Source.DATASHEET, ""),
    ("rtx-3090", P.BF16, TC, 71, Source.DATASHEET, ""),
    ("rtx-3070-ti", P.FP16, TC, 87.0, Source.DERIVED, "48 SMs x 1024 FLOP/clk x 1770 MHz"),
    ("rtx-3070-ti", P.BF16, TC, 43.5, Source.DERIVED, "48 SMs x 512 FLOP/clk x 1770 MHz"),
    ("rtx-3070-ti", P.FP32, V, 21.7, Source.DERIVED, "48 SMs x 256 FLOP/clk x 1770 MHz"),
    ("rtx-3070-ti", P.INT8, TC, 174, Source.DERIVED, "48 SMs x 2048 OP/clk x 1770 MHz"),
    ("rtx-5090", P.FP32, V, 104.8, Source.DERIVED, "170 SMs x 256 FLOP/clk x 2407 MHz"),
    ("rtx-5090", P.FP16, TC, 419, Source.DATASHEET, ""),
    ("rtx-5090", P.BF16, TC, 209.5, Source.DATASHEET, ""),  # FP32 accumulate; 419 is its sparse figure
    ("rtx-5090", P.FP4, TC, 1676, Source.DATASHEET, ""),
    ("h100-nvl", P.FP16, V, 120.6, Source.DERIVED, "132 SMs x 512 FLOP/clk x 1785 MHz"),
    ("b200", P.FP4, TC, 9000, Source.DATASHEET, ""),
    ("gb200", P.BF16, TC, 2500, Source.DATASHEET, ""),
    ("gb200", P.FP8_E4M3, TC, 5000, Source.DATASHEET, ""),
    ("gb200", P.FP4, TC, 10000, Source.DATASHEET, ""),
    ("gb200", P.FP64, V, 45, Source.DATASHEET, "unconfirmed: the 1200 W figure"),
    # hardware.md section 6: B300 (HGX) and GB300, per GPU, dense
    ("b300", P.BF16, TC, 2250, Source.DATASHEET, ""),
    ("b300", P.FP8_E4M3, TC, 4500, Source.DATASHEET, ""),
    ("b300", P.FP4, TC, 14000, Source.DATASHEET, "unconfirmed: sources give 13000-14000"),
    ("b300", P.TF32, TC, 1125, Source.DERIVED, "half the BF16 rate"),
    ("b300", P.FP32, V, 80, Source.DATASHEET, "unconfirmed: B200's figure"),
    ("gb300", P.BF16, TC, 2500, Source.DATASHEET, ""),
    ("gb300", P.FP8_E4M3, TC, 5000, Source.DATASHEET, ""),
    ("gb300", P.FP4, TC, 15000, Source.DATASHEET, ""),
    ("gb300", P.TF32, TC, 1250, Source.DERIVED, "half the BF16 rate"),
    ("mi325x", P.BF16, TC, 1307.4, Source.DATASHEET, ""),
    ("mi325x", P.FP64, V, 81.7, Source.DATASHEET, ""),
    # MI355X: AMD's published figures (section 6) where it gives them, else gfx950 per-CU rates x
    # 256 CUs x 2400 MHz
    ("mi355x", P.BF16, TC, 2500, Source.DATASHEET, ""),
    ("mi355x", P.FP16, TC, 2500, Source.DATASHEET, ""),
    ("mi355x", P.FP8_E4M3, TC, 5000, Source.DATASHEET, ""),
    ("mi355x", P.FP4, TC, 10100, Source.DATASHEET, ""),
    ("mi355x", P.FP64, TC, 78.6, Source.DERIVED, "256 CUs x 128 FLOP/clk x 2400 MHz"),
    ("mi355x", P.INT8, TC, 5033.2, Source.DERIVED, "256 CUs x 8192 OP/clk x 2400 MHz"),
    ("mi355x", P.FP32, V, 157.3, Source.DATASHEET, "unconfirmed: "),
    ("rtx-5090", P.INT8, TC, 838, Source.DATASHEET, "unconfirmed: "),  # "838?"
    # MI250X: one CuPy device is one die, half the card
    ("mi250x", P.FP64, V, 47.9 / 2, Source.DATASHEET, ""),
    ("mi250x", P.FP64, TC, 95.7 / 2, Source.DATASHEET, ""),
    ("mi250x", P.FP32, V, 95.7 / 2, Source.DATASHEET, ""),  # the packed-FP32 rate
    ("mi250x", P.FP16, TC, 383 / 2, Source.DATASHEET, ""),
    ("mi250x", P.BF16, TC, 383 / 2, Source.DATASHEET, ""),
    ("mi250x", P.INT8, TC, 383 / 2, Source.DATASHEET, ""),
    # mi300x: each figure as ROCm's "Peak-performance capabilities of the MI300X" table prints it (issue 12)
    ("mi300x", P.FP64, V, 81.7, Source.DATASHEET, ""),
    ("mi300x", P.FP64, TC, 163.4, Source.DATASHEET, ""),
    ("mi300x", P.FP32, V, 163.4, Source.DATASHEET, ""),
    ("mi300x", P.TF32, TC, 653.7, Source.DATASHEET, ""),
    ("mi300x", P.FP16, TC, 1307.4, Source.DATASHEET, ""),
    ("mi300x", P.BF16, TC, 1307.4, Source.DATASHEET, ""),
    ("mi300x", P.FP8_E4M3, TC, 2614.9, Source.DATASHEET, ""),
    ("mi300x", P.INT8, TC, 2614.9, Source.DATASHEET, ""),
]


@pytest.mark.parametrize(
    ("key", "precision", "unit", "tflops", "source", "note"),
    PEAKS,
    ids=[f"{k}-{p}-{u}" for k, p, u, *_ in PEAKS],
)
def test_table_peaks(
    key: str, precision: Precision, unit: Unit, tflops: float, source: Source, note: str
) -> None:
    figure = lookup(key).peak(precision, unit)
    assert figure is not None
    assert figure.value == pytest.approx(tflops * T)
    assert figure.source is source
    assert note in figure.note if note else figure.note == ""


# cells that are "–" or "?" without a number in hardware.md
ABSENT = [
    ("v100-sxm2", P.BF16, TC), ("v100-sxm2", P.BF16, V), ("v100-sxm2", P.TF32, TC), ("v100-sxm2", P.FP64, TC),
    ("t4", P.BF16, TC), ("t4", P.FP8_E4M3, TC), ("a100-sxm-80gb", P.FP8_E4M3, TC),
    ("rtx-5090", P.FP64, V), ("rtx-5090", P.TF32, TC), ("rtx-5090", P.FP16, V),
    ("mi355x", P.TF32, TC), ("h100-sxm", P.FP4, TC), ("mi300x", P.FP4, TC),
    ("mi250x", P.TF32, TC), ("mi250x", P.FP8_E4M3, TC), ("mi300x", P.FP16, V), ("rtx-3090", P.FP8_E4M3, TC),
    ("b300", P.FP64, V), ("b300", P.FP64, TC), ("b300", P.INT8, TC), ("gb300", P.FP64, V),
]  # fmt: skip


@pytest.mark.parametrize(("key", "precision", "unit"), ABSENT, ids=[f"{k}-{p}-{u}" for k, p, u in ABSENT])
def test_absent_cells_have_no_figure(key: str, precision: Precision, unit: Unit) -> None:
    assert lookup(key).peak(precision, unit) is None


@pytest.mark.parametrize("key", KEYS)
def test_every_device_is_usable(key: str) -> None:
    dev = lookup(key)
    assert dev.peaks
    for (precision, unit), figure in dev.peaks.items():
        assert figure.value > 0
        assert figure.source in (Source.DATASHEET, Source.DERIVED)
        assert precision is not P.FP8_E5M2  # stored once, under the e4m3 rate class
        assert unit in (V, TC)
    # a float (or complex) vector peak always resolves, so every op has a floor on every device;
    # datasheets give no integer vector rates: integer work there is judged by its bytes alone
    for precision in Precision:
        peak, _ = dev.resolve_peak(precision, V)
        if precision.integral:
            assert peak is None
        else:
            assert peak is not None
            assert peak.value > 0
    # where the sheet has an fp16 tensor rate, tensor units are never slower than vector ones
    tensor, vector = dev.peak(P.FP16, TC), dev.peak(P.FP16, V)
    if tensor and vector:
        assert tensor.value >= vector.value


@pytest.mark.parametrize("key", [k for k in KEYS if k not in ("v100-sxm2", "t4")])
def test_bf16_tensor_peak_exists_where_the_card_has_bf16_tensor_cores(key: str) -> None:
    # Only Volta and Turing lack BF16 tensor math. Elsewhere, falling back to a vector peak would set
    # a floor far above what a BF16 GEMM really achieves.
    peak, unit = lookup(key).resolve_peak(P.BF16, TC)
    assert unit is TC, f"{key}: bf16 tensor falls back to {(peak and peak.note) or 'vector'}"


@pytest.mark.parametrize(("key", "note"), [("v100-sxm2", "no BF16 support"), ("t4", "no BF16 support")])
def test_notes(key: str, note: str) -> None:
    assert note in lookup(key).notes


def test_rtx_3090_fp16_is_twice_bf16_tensor_and_notes_say_why() -> None:
    dev = lookup("rtx-3090")
    assert dev.peak(P.FP16, TC).value == 2 * dev.peak(P.BF16, TC).value  # type: ignore[union-attr]
    assert any("FP16-accumulate" in note for note in dev.notes)


def test_describe_peaks_orders_by_precision_then_tensor_first() -> None:
    order = [(p, u) for p, u, _ in describe_peaks(lookup("h100-sxm"))]
    assert order == [
        (P.FP64, TC), (P.FP64, V), (P.FP32, V), (P.TF32, TC), (P.FP16, TC), (P.FP16, V),
        (P.BF16, TC), (P.BF16, V), (P.FP8_E4M3, TC), (P.INT8, TC),
    ]  # fmt: skip


# -- devices from driver properties ------------------------------------------------------------


def props(name: str, **fields: object) -> DeviceProperties:
    return DeviceProperties(name=name, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "name"), NAMES, ids=[name for _, name in NAMES])
def test_from_properties_returns_the_table_entry_for_a_table_name(key: str, name: str) -> None:
    kind = lookup(key).kind
    assert from_properties(props(name, kind=kind)) is lookup(key)  # SM count unknown
    full = props(name, kind=kind, multiprocessors=lookup(key).cores, major=9, clock_khz=1)
    assert from_properties(full) is lookup(key)


def test_from_properties_more_sms_than_the_table_is_still_the_table_entry() -> None:
    assert from_properties(props("NVIDIA H100 80GB HBM3", multiprocessors=144)) is lookup("h100-sxm")


def test_from_properties_scales_a_mig_slice_by_its_sm_count() -> None:
    a100 = lookup("a100-sxm-40gb")
    dev = from_properties(props("NVIDIA A100-SXM4-40GB", major=8, minor=0, multiprocessors=14))
    assert dev.key == "a100-sxm-40gb-14sm"
    assert (dev.name, dev.kind, dev.cores) == (a100.name, "cuda", 14)
    assert set(dev.peaks) == set(a100.peaks)
    for key, figure in dev.peaks.items():
        assert figure.value == pytest.approx(a100.peaks[key].value * 14 / 108)
        assert figure.source is Source.DERIVED
        assert "14 of 108 SMs" in figure.note
    assert dev.peak(P.BF16, TC).value == pytest.approx(312e12 * 14 / 108)  # type: ignore[union-attr]
    assert dev.bandwidth == a100.bandwidth  # left whole: the floor stays optimistic
    assert any("14 of 108 SMs" in note for note in dev.notes)
    e = estimate("gemm", dtype="bf16", device=dev, M=4096, N=4096, K=4096)
    assert e.peak_source is Source.DERIVED
    assert e.floor_s == pytest.approx(2 * 4096**3 / (312e12 * 14 / 108))


def test_from_properties_recognises_a_mig_name_suffix() -> None:
    # hardware.md: "MIG slices may carry a suffix and fewer SMs (scale by the reported SM count)"
    mig = props(
        "NVIDIA A100-SXM4-40GB MIG 1g.5gb", major=8, minor=0, multiprocessors=14,
        clock_khz=1_410_000, memory_clock_khz=1_215_000, bus_width_bits=5120,
    )  # fmt: skip
    dev = from_properties(mig)
    assert dev.key.startswith("a100-sxm-40gb")
    assert dev.peak(P.BF16, TC).value == pytest.approx(312e12 * 14 / 108)  # type: ignore[union-attr]


@pytest.mark.parametrize("cus", [110, 0])
def test_mi250x_die_is_the_table_entry(cus: int) -> None:
    dev = from_properties(
        props("AMD Instinct MI250X/MI250", kind="rocm", multiprocessors=cus, arch_name="gfx90a")
    )
    assert dev is lookup("mi250x")


def test_mi250_die_reports_the_same_name_but_fewer_cus_and_is_not_the_mi250x() -> None:
    mi250 = props("AMD Instinct MI250X/MI250", kind="rocm", multiprocessors=104, arch_name="gfx90a")
    with pytest.raises(DeviceError, match=r"'AMD Instinct MI250X/MI250' \(gfx90a\).*--roofline-peaks"):
        from_properties(mi250)


def test_unknown_rocm_device_cannot_be_derived() -> None:
    with pytest.raises(DeviceError, match=r"^device 'AMD Radeon PRO W7900' \(gfx1100\) is not in the table"):
        from_properties(props("AMD Radeon PRO W7900", kind="rocm", multiprocessors=96, arch_name="gfx1100"))
    with pytest.raises(DeviceError, match=r"\(unknown arch\)"):
        from_properties(props("AMD Something", kind="rocm"))


HOPPER_LIKE: dict[str, object] = {
    "major": 9, "minor": 0, "multiprocessors": 100, "clock_khz": 1_500_000, "memory_clock_khz": 2_619_000,
    "bus_width_bits": 5120, "l2_bytes": 50 * MiB,
}  # fmt: skip


def test_unknown_nvidia_device_is_derived_from_its_properties_by_hand() -> None:
    dev = from_properties(props("NVIDIA Hypothetical H50", **HOPPER_LIKE))
    # 100 SMs × 1.5 GHz × per-SM rate of CC 9.0
    expected = {
        (P.FP64, V): 100 * 1.5e9 * 128,  # 19.2 TFLOP/s
        (P.FP64, TC): 100 * 1.5e9 * 256,
        (P.FP32, V): 100 * 1.5e9 * 256,  # 38.4
        (P.FP16, V): 100 * 1.5e9 * 512,
        (P.TF32, TC): 100 * 1.5e9 * 2048,
        (P.FP16, TC): 100 * 1.5e9 * 4096,  # 614.4
        (P.BF16, TC): 614.4e12,
        (P.FP8_E4M3, TC): 100 * 1.5e9 * 8192,
        (P.INT8, TC): 1228.8e12,
    }
    assert set(dev.peaks) == set(expected)
    for key, value in expected.items():
        assert dev.peaks[key].value == pytest.approx(value)
        assert dev.peaks[key].source is Source.DERIVED
        assert dev.peaks[key].note == "100 SMs × 1500 MHz × per-SM rate of CC 9.0"
    # 2 × 2,619,000 kHz × 1000 × 5120 bits / 8 = 3.352 TB/s
    assert dev.bandwidth.value == pytest.approx(3.352_32e12)
    assert dev.bandwidth.source is Source.DERIVED
    assert (dev.key, dev.name, dev.names, dev.kind) == (
        "nvidia-hypothetical-h50", "NVIDIA Hypothetical H50", ("NVIDIA Hypothetical H50",), "cuda",
    )  # fmt: skip
    assert (dev.cores, dev.llc_bytes) == (100, 50 * MiB)
    assert dev.ridge(P.BF16, TC) == pytest.approx(614.4e12 / 3.35232e12)


@pytest.mark.parametrize(
    ("key", "cc", "sms", "mhz", "precision", "unit"),
    [("h100-sxm", (9, 0), 132, 1830, P.BF16, TC), ("h100-sxm", (9, 0), 132, 1830, P.FP8_E4M3, TC),
     ("a100-sxm-80gb", (8, 0), 108, 1410, P.FP16, TC), ("a100-sxm-80gb", (8, 0), 108, 1410, P.TF32, TC),
     ("a100-sxm-80gb", (8, 0), 108, 1410, P.FP64, TC), ("v100-sxm2", (7, 0), 80, 1530, P.FP16, TC),
     ("v100-sxm2", (7, 0), 80, 1530, P.FP32, V), ("t4", (7, 5), 40, 1590, P.FP16, TC),
     ("l40s", (8, 9), 142, 2520, P.FP8_E4M3, TC), ("a10", (8, 6), 72, 1695, P.FP16, TC)],
)  # fmt: skip
def test_per_sm_rates_reproduce_the_datasheet(
    key: str, cc: tuple[int, int], sms: int, mhz: int, precision: Precision, unit: Unit
) -> None:
    """Derivation, fed a table card's own SMs and clock, lands within 1% of its datasheet peak."""
    dev = derive(props("x", major=cc[0], minor=cc[1], multiprocessors=sms, clock_khz=mhz * 1000,
                       memory_clock_khz=1, bus_width_bits=1))  # fmt: skip
    assert dev.peak(precision, unit).value == pytest.approx(lookup(key).peak(precision, unit).value, rel=0.01)  # type: ignore[union-attr]


def test_cc_8_7_uses_ga10x_rates() -> None:
    orin = derive(props("Orin", major=8, minor=7, multiprocessors=16, clock_khz=1_300_000,
                        memory_clock_khz=3_200_000, bus_width_bits=256))  # fmt: skip
    assert orin.peak(P.FP32, V).value == pytest.approx(16 * 1.3e9 * 256)  # type: ignore[union-attr]
    assert orin.peak(P.FP64, TC) is None
    assert orin.peaks[(P.FP32, V)].note.endswith("per-SM rate of CC 8.6")


@pytest.mark.parametrize(("major", "minor"), [(12, 0), (10, 0), (6, 1), (0, 0)])
def test_unconfirmed_compute_capability_is_an_error(major: int, minor: int) -> None:
    with pytest.raises(
        DeviceError, match=rf"compute capability {major}\.{minor}\) is not in the table.*--roofline-peaks"
    ):
        from_properties(props("NVIDIA Future GPU", **(HOPPER_LIKE | {"major": major, "minor": minor})))


@pytest.mark.parametrize(
    ("field", "reported"),
    [("clock_khz", "clockRate"), ("memory_clock_khz", "memoryClockRate"),
     ("bus_width_bits", "memoryBusWidth"), ("multiprocessors", "multiProcessorCount")],
)  # fmt: skip
def test_derive_names_what_the_driver_did_not_report(field: str, reported: str) -> None:
    broken = props("NVIDIA Hypothetical H50", **(HOPPER_LIKE | {field: 0}))
    with pytest.raises(
        DeviceError,
        match=rf"^cannot derive device 'NVIDIA Hypothetical H50': the driver did not report {reported}$",
    ):
        from_properties(broken)


def test_derive_names_every_missing_property() -> None:
    with pytest.raises(DeviceError, match=r"did not report clockRate, memoryClockRate$"):
        derive(props("x", **(HOPPER_LIKE | {"clock_khz": 0, "memory_clock_khz": 0})))


def test_device_properties_default_to_unknown() -> None:
    p = DeviceProperties(name="x")
    assert (p.kind, p.major, p.minor, p.multiprocessors, p.clock_khz, p.arch_name) == ("cuda", 0, 0, 0, 0, "")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "y"  # type: ignore[misc]


# -- registering devices -----------------------------------------------------------------------


def my_gpu(key: str = "my-gpu", **overrides: object) -> Device:
    fields: dict[str, object] = {
        "key": key,
        "name": "My GPU",
        "kind": "cuda",
        "peaks": {(P.FP32, V): Figure(10e12, Source.USER), (P.BF16, TC): Figure(100e12, Source.USER)},
        "bandwidth": Figure(1e12, Source.USER),
        "names": ("My GPU", "My GPU 24GB"),
    }
    fields.update(overrides)
    return Device(**fields)  # type: ignore[arg-type]


@pytest.mark.usefixtures("device_table")
def test_register_device_then_find_it_by_key_and_name() -> None:
    dev = my_gpu()
    assert register_device(dev) is dev
    assert lookup("my-gpu") is dev
    assert lookup("My GPU 24GB") is dev
    assert table()["my-gpu"] is dev
    assert from_properties(props("My GPU 24GB")) is dev
    e = estimate("gemm", dtype="bf16", device=lookup("my-gpu"), M=1000, N=1000, K=1000)
    assert (e.peak_flops, e.peak_source, e.floor_s) == (100e12, Source.USER, pytest.approx(2e9 / 100e12))


@pytest.mark.usefixtures("device_table")
def test_register_device_twice_needs_replace() -> None:
    register_device(my_gpu())
    with pytest.raises(DeviceError, match="device 'my-gpu' is already registered; pass replace=True"):
        register_device(my_gpu(name="Other"))
    assert lookup("my-gpu").name == "My GPU"
    replacement = my_gpu(name="Other", names=("Other",))
    register_device(replacement, replace=True)
    assert lookup("my-gpu") is replacement
    with pytest.raises(DeviceError, match="already registered"):
        register_device(lookup("h100-sxm"))


@pytest.mark.usefixtures("device_table")
def test_register_device_refuses_the_cpu_key_and_non_devices() -> None:
    with pytest.raises(DeviceError, match="the key 'cpu' is reserved"):
        register_device(my_gpu("cpu"))
    with pytest.raises(DeviceError, match="register_device takes a Device; got 'h100-sxm'"):
        register_device("h100-sxm")  # type: ignore[arg-type]


@pytest.mark.usefixtures("device_table")
def test_unregister_device() -> None:
    register_device(my_gpu())
    unregister_device("my-gpu")
    assert "my-gpu" not in table()
    with pytest.raises(DeviceError, match="unknown device 'my-gpu'"):
        lookup("my-gpu")
    unregister_device("my-gpu")  # a no-op the second time
    assert sorted(table()) == sorted(KEYS)


@pytest.mark.usefixtures("device_table")
def test_a_registered_device_claiming_a_table_name_is_found_by_that_name_or_refused() -> None:
    # register_device: "so get_device finds it by key and by reported name". A device registered
    # for a name the table already has (say, measured peaks for a clock-locked H100) must either be
    # what that name finds, or be refused; silently losing to the built-in entry is neither.
    mine = my_gpu("my-h100", name="NVIDIA H100 80GB HBM3", names=("NVIDIA H100 80GB HBM3",))
    refusal = ""
    try:
        register_device(mine)
    except DeviceError as exc:
        refusal = str(exc)
    if refusal:
        assert "NVIDIA H100 80GB HBM3" in refusal
    else:
        assert lookup("NVIDIA H100 80GB HBM3") is mine
        assert from_properties(props("NVIDIA H100 80GB HBM3", multiprocessors=132)) is mine


def test_the_device_table_fixture_left_the_table_alone() -> None:
    assert sorted(table()) == sorted(KEYS)


#: sparse (2:4) figures as the datasheets print them, TFLOP/s (TOPS for INT8): a dense cell equal to
#: one of these is a sparse figure copied into the dense table (hardware.md section 2's warning)
KNOWN_SPARSE = {
    "a100-sxm-80gb": {(P.TF32, TC): 312, (P.FP16, TC): 624, (P.BF16, TC): 624, (P.INT8, TC): 1248},
    "l4": {(P.TF32, TC): 120, (P.FP16, TC): 242, (P.FP8_E4M3, TC): 485, (P.INT8, TC): 485},
    "l40s": {(P.TF32, TC): 366, (P.FP16, TC): 733, (P.FP8_E4M3, TC): 1466, (P.INT8, TC): 1466},
    "h100-sxm": {(P.TF32, TC): 989, (P.FP16, TC): 1979, (P.FP8_E4M3, TC): 3958, (P.INT8, TC): 3958},
    "h100-pcie": {(P.TF32, TC): 756, (P.FP16, TC): 1513, (P.FP8_E4M3, TC): 3026, (P.INT8, TC): 3026},
    "h100-nvl": {(P.TF32, TC): 835, (P.BF16, TC): 1671, (P.FP8_E4M3, TC): 3341, (P.INT8, TC): 3341},
    "h200": {(P.TF32, TC): 989, (P.FP16, TC): 1979, (P.FP8_E4M3, TC): 3958, (P.INT8, TC): 3958},
    "b200": {
        (P.TF32, TC): 2200,
        (P.FP16, TC): 4500,
        (P.FP8_E4M3, TC): 9000,
        (P.INT8, TC): 9000,
        (P.FP4, TC): 18000,
    },
    "gb200": {
        (P.TF32, TC): 2500,
        (P.FP16, TC): 5000,
        (P.FP8_E4M3, TC): 10000,
        (P.INT8, TC): 10000,
        (P.FP4, TC): 20000,
    },
    # GeForce: each against the sparse figure of the same accumulation (the table holds FP16
    # accumulate for FP16 and FP8, FP32 for BF16): across accumulations dense and sparse coincide
    "rtx-4090": {(P.FP16, TC): 660.6, (P.BF16, TC): 330.4, (P.FP8_E4M3, TC): 1321.2, (P.INT8, TC): 1321.2},
    "rtx-5090": {(P.FP16, TC): 838, (P.BF16, TC): 419, (P.FP8_E4M3, TC): 1676, (P.FP4, TC): 3352},
    "mi300x": {(P.TF32, TC): 1307.4, (P.FP16, TC): 2614.9, (P.FP8_E4M3, TC): 5229.8, (P.INT8, TC): 5229.8},
    "mi325x": {(P.TF32, TC): 1307.4, (P.FP16, TC): 2614.9, (P.FP8_E4M3, TC): 5229.8, (P.INT8, TC): 5229.8},
    "mi355x": {(P.FP16, TC): 5033.2, (P.FP8_E4M3, TC): 10066.3, (P.FP4, TC): 20132.7},
    "b300": {(P.FP16, TC): 4500, (P.FP8_E4M3, TC): 9000},
    "gb300": {(P.FP16, TC): 5000, (P.FP8_E4M3, TC): 10000},
}


@pytest.mark.parametrize("key", sorted(KNOWN_SPARSE))
def test_no_dense_figure_is_a_known_sparse_one(key: str) -> None:
    device = lookup(key)
    for (precision, unit), sparse in KNOWN_SPARSE[key].items():
        dense = device.peaks[(precision, unit)].value / 1e12
        assert abs(dense - sparse) > 0.01 * sparse, f"{key} {precision} {unit}: {dense} is the sparse figure"


def test_mi300x_source_names_the_rocm_table_it_was_checked_against() -> None:
    from pytest_roofline.model.devices import _ROWS

    (row,) = [row for row in _ROWS if row.key == "mi300x"]
    assert "Peak-performance capabilities of the MI300X" in row.source
    assert "data sheet" in row.source


def test_every_row_names_its_source() -> None:
    from pytest_roofline.model.devices import _ROWS

    assert [row.key for row in _ROWS if not row.source] == []
