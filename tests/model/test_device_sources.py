"""The device table's figures as their vendors quote them: each figure's rate at the maximum SM clock
(the faster-than-light limit only), and what each row rests on (hardware.md sections 2 and 6)."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_roofline.model import devices
from pytest_roofline.model.core import Figure, Precision, Source, Unit
from pytest_roofline.model.devices import DeviceProperties, from_properties, lookup, register_device
from pytest_roofline.model.estimate import estimate

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR
T, MiB = 1e12, 1 << 20
KEYS = sorted(devices.table())


@pytest.fixture
def device_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register and unregister devices without leaking into the next test."""
    monkeypatch.setattr(devices, "_TABLE", dict(devices._TABLE))


def props(name: str, **fields: object) -> DeviceProperties:
    return DeviceProperties(name=name, **fields)  # type: ignore[arg-type]


# -- figures as quoted, and their rates at the maximum clock (issue 39) ---------------------------


def test_a_card_reporting_a_higher_max_clock_keeps_its_figures_and_allows_for_the_clock() -> None:
    # a factory-overclocked RTX 4090 boosting to 2790 MHz, past the whitepaper's 2520
    base = lookup("rtx-4090")
    dev = from_properties(props("NVIDIA GeForce RTX 4090", multiprocessors=128, clock_khz=2_790_000))
    for key, figure in base.peaks.items():
        assert dev.peaks[key].value == figure.value  # the whitepaper's figure, judged as quoted
        assert dev.peaks[key].source is figure.source
        assert dev.peaks[key].at_max_clock == pytest.approx(figure.value * 2790 / 2520)
    assert base.peak(P.BF16, TC).at_max_clock is None  # type: ignore[union-attr]
    assert dev.bandwidth == base.bandwidth
    assert any("2790 MHz maximum SM clock" in note and "faster-than-light" in note for note in dev.notes)


def test_h200_fp64_tensor_is_67_tflops_at_its_reported_clock() -> None:
    # NVIDIA quotes FP64 tensor at 1980 MHz (132 x 256 x 1.98 GHz): never scaled again (was 72.5)
    dev = from_properties(props("NVIDIA H200", multiprocessors=132, clock_khz=1_980_000))
    fp64 = dev.peak(P.FP64, TC)
    assert fp64 is not None
    assert (fp64.value, fp64.at_max_clock) == (67e12, None)
    assert dev.peak(P.FP64, V) == Figure(34e12, Source.DATASHEET)
    assert dev.peak(P.FP32, V) == Figure(67e12, Source.DATASHEET)


def test_h200_bf16_tensor_stays_the_datasheets_with_its_rate_at_the_max_clock_beside_it() -> None:
    dev = from_properties(props("NVIDIA H200", multiprocessors=132, clock_khz=1_980_000))
    assert dev is lookup("h200")  # the clock its row knows: nothing to change
    for precision, quoted in ((P.BF16, 989.5), (P.FP16, 989.5), (P.TF32, 494.5), (P.FP8_E4M3, 1979)):
        figure = dev.peak(precision, TC)
        assert figure is not None
        assert (figure.value, figure.source) == (quoted * T, Source.DATASHEET)
        assert figure.at_max_clock == pytest.approx(quoted * T * 1980 / 1830)
    e = estimate("gemm", dtype="bf16", device=dev, M=8192, N=8192, K=8192)
    assert e.peak_flops == 989.5e12  # the floor and attained use the figure as quoted
    assert e.floor_s == pytest.approx(2 * 8192**3 / 989.5e12)
    assert e.bounding_figure.at_max_clock == pytest.approx(989.5e12 * 1980 / 1830)


@pytest.mark.parametrize(
    ("key", "quoted_mhz", "max_mhz"),
    [("h100-sxm", 1830, 1980), ("h100-pcie", 1620, 1755), ("h100-nvl", 1545, 1785)],
)
def test_hopper_tensor_figures_know_their_rate_at_the_max_clock_without_a_driver(
    key: str, quoted_mhz: int, max_mhz: int
) -> None:
    dev = lookup(key)
    for (precision, unit), figure in dev.peaks.items():
        if unit is TC and precision is not P.FP64:
            assert figure.at_max_clock == pytest.approx(figure.value * max_mhz / quoted_mhz)
        else:  # quoted at the maximum clock already
            assert figure.at_max_clock is None


def test_tensor_figures_quoted_at_a_lower_clock_keep_their_value_at_a_reported_higher_one() -> None:
    # H100 NVL: the datasheet's tensor figures imply 1545 MHz; the card reports 1785
    dev = from_properties(props("NVIDIA H100 NVL", multiprocessors=132, clock_khz=1_785_000))
    bf16 = dev.peak(P.BF16, TC)
    assert bf16 is not None
    assert bf16.value == 835.5e12
    assert bf16.at_max_clock == pytest.approx(132 * 4096 * 1785e6, rel=1e-3)
    assert dev.peak(P.FP64, V) == Figure(30e12, Source.DATASHEET)  # quoted at 1785 already
    h100 = from_properties(props("NVIDIA H100 80GB HBM3", multiprocessors=132, clock_khz=1_980_000))
    assert h100.peak(P.BF16, TC).value == 989.4e12  # type: ignore[union-attr]
    fp64 = h100.peak(P.FP64, TC)
    assert fp64 == lookup("h100-sxm").peak(P.FP64, TC)  # FP64 tensor: quoted at 1980 already
    assert fp64 is not None
    assert (fp64.value, fp64.at_max_clock) == (pytest.approx(66.9e12), None)


@pytest.mark.parametrize("khz", [0, 1_000_000, 2_520_000, 2_525_000])
def test_a_clock_at_or_below_the_datasheets_changes_nothing(khz: int) -> None:
    # unknown (0), power-capped, the same, or within the driver's rounding
    assert from_properties(props("NVIDIA GeForce RTX 4090", multiprocessors=128, clock_khz=khz)) is lookup(
        "rtx-4090"
    )


def test_a_mig_slice_of_a_faster_clocked_card_is_scaled_by_its_sms_alone() -> None:
    dev = from_properties(props("NVIDIA H100 80GB HBM3", multiprocessors=66, clock_khz=1_980_000))
    bf16 = dev.peak(P.BF16, TC)
    assert bf16 is not None
    assert bf16.value == pytest.approx(989.4e12 * 66 / 132)
    assert bf16.at_max_clock == pytest.approx(989.4e12 * 1980 / 1830 * 66 / 132)


@pytest.mark.usefixtures("device_table")
def test_a_registered_device_keeps_its_own_figures_whatever_the_clock() -> None:
    from pytest_roofline.model.devices import at_reported_clock

    own = dataclasses.replace(lookup("rtx-4090"), peaks={(P.FP16, TC): Figure(1e12, Source.USER)})
    assert at_reported_clock(own, 9999) is own
    # also one registered over a built-in key, found by the name the driver reports
    register_device(own, replace=True)
    assert from_properties(props("NVIDIA GeForce RTX 4090", multiprocessors=128, clock_khz=2_790_000)) is own


def test_a_figure_at_the_max_clock_is_never_below_the_figure() -> None:
    with pytest.raises(ValueError, match="rate at the maximum clock must be finite and at least the figure"):
        Figure(10e12, Source.DATASHEET, at_max_clock=9e12)
    assert Figure(10e12, Source.DATASHEET, at_max_clock=11e12).clock_headroom == pytest.approx(1.1)
    assert Figure(10e12, Source.DATASHEET).clock_headroom == 1.0


# -- what each row rests on (hardware.md sections 2 and 6) -------------------------------------


@pytest.mark.parametrize("key", KEYS)
def test_every_derived_or_unconfirmed_figure_says_from_what(key: str) -> None:
    for (precision, unit), figure in lookup(key).peaks.items():
        where = f"{key} {precision} {unit}"
        if figure.source is Source.DERIVED:
            assert figure.note, f"{where}: derived, but not from what"
        elif figure.note.startswith("unconfirmed"):
            assert len(figure.note) > len("unconfirmed: "), f"{where}: unconfirmed, but not why"
            assert figure.note.startswith("unconfirmed: ")
        else:
            assert figure.note == "", f"{where}: a vendor figure with a note: {figure.note}"


#: dense rates keep these ratios on every tensor core in the table: FP8 twice FP16 (at the same
#: accumulation), FP4 twice FP8 (three times on Blackwell Ultra), TF32 half BF16. A sparse figure
#: among dense ones breaks one of them by a factor of 2
DENSE_RATIOS = (
    ((P.FP8_E4M3, P.FP16), 1.9, 2.1),
    ((P.FP4, P.FP8_E4M3), 1.9, 3.2),
    ((P.TF32, P.BF16), 0.45, 0.55),
)


@pytest.mark.parametrize("key", KEYS)
def test_no_tensor_figure_is_a_sparse_one_among_dense_ones(key: str) -> None:
    device = lookup(key)
    for (high, low), least, most in DENSE_RATIOS:
        a, b = device.peak(high, TC), device.peak(low, TC)
        if a is not None and b is not None:
            assert least <= a.value / b.value <= most, (
                f"{key}: {high} {a.value / T:g} over {low} {b.value / T:g}"
            )


@pytest.mark.parametrize(
    ("key", "cited"),
    [("b300", "DGX B300 datasheet"), ("gb300", "Inside Blackwell Ultra"), ("b200", "Blackwell datasheet"),
     ("gb200", "GB200 NVL72"), ("mi325x", "AMD product page"), ("mi355x", "AMD product page")],
)  # fmt: skip
def test_rows_from_section_6_name_their_source_and_when(key: str, cited: str) -> None:
    from pytest_roofline.model.devices import _ROWS

    (row,) = [row for row in _ROWS if row.key == key]
    assert cited in row.source
    assert "2026-11" in row.source


def test_a_row_without_a_cache_figure_takes_the_l2_the_driver_reports() -> None:
    dev = from_properties(props("NVIDIA B300 SXM6 AC", multiprocessors=148, l2_bytes=126 * MiB))
    assert (dev.key, dev.llc_bytes) == ("b300", 126 * MiB)
    assert from_properties(props("NVIDIA H200", l2_bytes=50 * MiB)).llc_bytes == 60 * MiB  # the table's


def test_fp4_is_half_a_byte_and_runs_at_the_fp4_tensor_rate() -> None:
    from pytest_roofline.model.core import parse_dtype

    assert parse_dtype("nvfp4") is parse_dtype("mxfp4") is P.FP4
    assert P.FP4.itemsize == 0.5
    e = estimate("gemm", dtype="fp4", device=lookup("b200"), M=8192, N=8192, K=8192)
    assert e.bytes == 3 * 8192 * 8192 * 0.5
    assert e.floor_s == pytest.approx(max(2 * 8192**3 / 9000e12, e.bytes / 7700e9))


def test_table_gpus_carry_their_interconnect_with_its_source() -> None:
    from pytest_roofline.model.devices import lookup

    h100 = lookup("h100-sxm").interconnect
    assert h100 is not None
    assert (h100.value, str(h100.source)) == (450e9, "datasheet")
    assert "NVLink 4" in h100.note
    assert lookup("l4").interconnect is None  # PCIe only: no figure, and --tp says so


def test_roofline_devices_lists_the_links() -> None:
    from pytest_roofline import cli

    out = cli._devices(__import__("argparse").Namespace())
    assert "GPU-to-GPU links, per GPU and direction (roofline llm --tp): " in out
    assert "h100-sxm 450 GB/s" in out
