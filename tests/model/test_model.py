"""The roofline model: precisions, dtype parsing, figures, peak resolution and the floor itself."""

from __future__ import annotations

import dataclasses
import math
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO_ROOT

from pytest_roofline.model.core import (
    ACCEPTED_DTYPES,
    Cost,
    Device,
    Figure,
    Precision,
    Source,
    Unit,
    did_you_mean,
    parse_dtype,
    roofline,
)

ROOT = REPO_ROOT
P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR


def figure(value: float, source: Source = Source.DATASHEET) -> Figure:
    return Figure(value, source)


def toy_device(**overrides: object) -> Device:
    """Round numbers so every expected value below is plain arithmetic."""
    fields: dict[str, object] = {
        "key": "toy",
        "name": "Toy GPU",
        "kind": "cuda",
        "peaks": {
            (P.FP32, V): figure(10.0),
            (P.FP16, V): figure(20.0),
            (P.FP16, TC): figure(100.0),
            (P.TF32, TC): figure(40.0),
            (P.FP8_E4M3, TC): figure(200.0),
        },
        "bandwidth": figure(2.0),
    }
    fields.update(overrides)
    return Device(**fields)  # type: ignore[arg-type]


# -- precisions and units ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "label", "itemsize"),
    [
        (P.FP64, "fp64", 8),
        (P.FP32, "fp32", 4),
        (P.TF32, "tf32", 4),
        (P.FP16, "fp16", 2),
        (P.BF16, "bf16", 2),
        (P.FP8_E4M3, "fp8_e4m3", 1),
        (P.FP8_E5M2, "fp8_e5m2", 1),
        (P.INT8, "int8", 1),
    ],
)
def test_precision_label_and_itemsize(precision: Precision, label: str, itemsize: int) -> None:
    assert (precision.label, precision.itemsize, str(precision)) == (label, itemsize, label)


def test_rate_classes_fp8_unsigned_and_complex_share_their_peaks() -> None:
    # both fp8 formats run at one rate, unsigned integers at their signed width's, complex formats
    # at their parts': nothing else borrows a peak
    assert {p: p.rate_class for p in Precision if p.rate_class is not p} == {
        P.FP8_E5M2: P.FP8_E4M3,
        P.UINT8: P.INT8, P.UINT16: P.INT16, P.UINT32: P.INT32, P.UINT64: P.INT64,
        P.COMPLEX32: P.FP16, P.COMPLEX64: P.FP32, P.COMPLEX128: P.FP64,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("member", "text"),
    [(Unit.TENSOR, "tensor"), (Unit.VECTOR, "vector"), (Source.DATASHEET, "datasheet"),
     (Source.DERIVED, "derived"), (Source.MEASURED, "measured"), (Source.USER, "user")],
)  # fmt: skip
def test_units_and_sources_print_as_their_value(member: Unit | Source, text: str) -> None:
    assert str(member) == text
    assert member == text  # str enums compare equal to their text (reports rely on it)


# -- dtype parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("float32", P.FP32), ("fp32", P.FP32), ("f32", P.FP32), ("float", P.FP64), ("single", P.FP32),
        ("half", P.FP16), ("float16", P.FP16), ("fp16", P.FP16), ("f16", P.FP16),
        ("bfloat16", P.BF16), ("bf16", P.BF16),
        ("float64", P.FP64), ("double", P.FP64), ("fp64", P.FP64), ("f64", P.FP64),
        ("tf32", P.TF32),
        ("fp8", P.FP8_E4M3), ("e4m3", P.FP8_E4M3), ("float8_e4m3fn", P.FP8_E4M3),
        ("e5m2", P.FP8_E5M2), ("fp8_e5m2", P.FP8_E5M2), ("float8_e5m2", P.FP8_E5M2),
        ("int8", P.INT8), ("i1", P.INT8),
        # case, whitespace, dashes and library prefixes are forgiven
        ("BF16", P.BF16), ("  Float32 ", P.FP32), ("fp8-e5m2", P.FP8_E5M2),
        ("torch.float16", P.FP16), ("np.float64", P.FP64), ("numpy.int8", P.INT8), ("jnp.bfloat16", P.BF16),
    ],
)  # fmt: skip
def test_parse_dtype_spellings(spelling: str, expected: Precision) -> None:
    assert parse_dtype(spelling) is expected


@pytest.mark.parametrize("precision", list(Precision))
def test_parse_dtype_passes_a_precision_through_and_reads_its_own_label(precision: Precision) -> None:
    assert parse_dtype(precision) is precision
    assert parse_dtype(precision.label) is precision


class FakeTorchDtype:
    """Like ``torch.bfloat16``: no ``.name``, no ``.dtype``, prints as ``torch.bfloat16``."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __str__(self) -> str:
        return self._text


class NamedDtype:
    """Like a JAX or ml_dtypes dtype object: a ``.name``."""

    def __init__(self, name: str) -> None:
        self.name = name


class FakeTensor:
    """Anything array-like with a ``.dtype``."""

    def __init__(self, dtype: object) -> None:
        self.dtype = dtype


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.dtype("float16"), P.FP16),
        (np.dtype("float32"), P.FP32),
        (np.dtype(">f8"), P.FP64),  # byte order does not change the name
        (np.dtype("int8"), P.INT8),
        (np.float32, P.FP32),
        (np.float16, P.FP16),
        (np.float64, P.FP64),
        (np.double, P.FP64),
        (np.int8, P.INT8),
        (np.float16(1.0), P.FP16),  # a numpy scalar reads through its .dtype
        (np.zeros(3, dtype=np.float32), P.FP32),
        (np.zeros((2, 2), dtype="float64"), P.FP64),
        (FakeTorchDtype("torch.bfloat16"), P.BF16),
        (FakeTorchDtype("torch.float8_e4m3fn"), P.FP8_E4M3),
        (FakeTensor(FakeTorchDtype("torch.float16")), P.FP16),
        (NamedDtype("bfloat16"), P.BF16),
        (FakeTensor(NamedDtype("float8_e5m2")), P.FP8_E5M2),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, Precision) else str(v),
)
def test_parse_dtype_library_objects(dtype: object, expected: Precision) -> None:
    assert parse_dtype(dtype) is expected


def test_parse_dtype_python_float_is_float64_as_in_numpy() -> None:
    # numpy (and CuPy) read the builtin ``float`` as float64: np.zeros(3, dtype=float) is float64.
    # Reading it as fp32 halves the byte count of the floor.
    assert np.dtype(float) == np.float64
    assert parse_dtype(float) is parse_dtype(np.dtype(float))


@pytest.mark.parametrize(
    ("dtype", "named"),
    [("float17", "float17"), ("bf-16x", "bf-16x"), ("", ""), ("int128", "int128"),
     (NamedDtype("float4_e2m1fn"), "float4_e2m1fn"), (FakeTorchDtype("torch.quint4x2"), "torch.quint4x2"),
     (3, "3")],
)  # fmt: skip
def test_parse_dtype_unknown_names_it_and_lists_the_accepted(dtype: object, named: str) -> None:
    with pytest.raises(ValueError, match=f"unknown dtype {re.escape(repr(named))}") as info:
        parse_dtype(dtype)
    message = str(info.value)
    for primary in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8"):
        assert primary in message


def test_accepted_dtypes_are_sorted_and_all_parse() -> None:
    assert list(ACCEPTED_DTYPES) == sorted(ACCEPTED_DTYPES)
    assert {parse_dtype(s) for s in ACCEPTED_DTYPES} == set(Precision)


# -- figures and devices -----------------------------------------------------------------------


@pytest.mark.parametrize("value", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_figure_must_be_positive_and_finite(value: float) -> None:
    with pytest.raises(ValueError, match="positive finite number"):
        Figure(value, Source.DATASHEET)


def test_figure_is_frozen_and_note_defaults_empty() -> None:
    f = Figure(1e12, Source.MEASURED)
    assert f.note == ""
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.value = 2.0  # type: ignore[misc]


def test_device_peak_reads_the_table_through_the_rate_class() -> None:
    dev = toy_device()
    assert dev.peak(P.FP16, TC) == figure(100.0)
    assert dev.peak(P.FP8_E5M2, TC) == figure(200.0)  # e5m2 runs at the e4m3 rate
    assert dev.peak(P.BF16, TC) is None
    assert dev.peak(P.FP64, V) is None


def test_resolve_peak_uses_the_tables_own_figure() -> None:
    dev = toy_device()
    assert dev.resolve_peak(P.FP16, TC) == (figure(100.0), TC)
    assert dev.resolve_peak(P.FP32, V) == (figure(10.0), V)
    assert dev.resolve_peak(P.FP8_E5M2, TC) == (figure(200.0), TC)


def test_resolve_peak_missing_tensor_falls_back_to_the_same_precisions_vector_peak() -> None:
    dev = toy_device(peaks={(P.FP32, V): figure(10.0), (P.FP16, V): figure(20.0)})
    peak, unit = dev.resolve_peak(P.FP16, TC)
    assert (peak, unit) == (figure(20.0), V)
    assert peak.source is Source.DATASHEET  # a real figure, not a guess


def test_resolve_peak_missing_vector_uses_the_fastest_vector_peak_marked_derived() -> None:
    dev = toy_device()
    peak, unit = dev.resolve_peak(P.BF16, TC)
    assert unit is V
    assert peak.value == 20.0  # fp16's, the fastest vector figure
    assert peak.source is Source.DERIVED
    assert peak.note == "no bf16 vector figure; fp16 vector peak used"


def test_resolve_peak_without_any_vector_peak_is_an_error() -> None:
    dev = toy_device(peaks={(P.FP16, TC): figure(100.0)})
    with pytest.raises(ValueError, match="device 'toy' has no vector peak for bf16"):
        dev.resolve_peak(P.BF16, TC)


def test_ridge_is_peak_over_bandwidth() -> None:
    dev = toy_device()
    assert dev.ridge(P.FP16, TC) == 50.0
    assert dev.ridge(P.FP32, V) == 5.0
    assert dev.ridge(P.BF16, TC) == 10.0  # through the derived fallback


def test_with_figures_replaces_only_what_it_is_given() -> None:
    dev = toy_device(llc_bytes=1 << 20, cores=8, names=("Toy GPU 8GB",), notes=("a toy",))
    measured = Figure(1.5, Source.MEASURED)
    copy = dev.with_figures(bandwidth=measured, key="toy-measured")
    assert (copy.key, copy.bandwidth, copy.peaks) == ("toy-measured", measured, dev.peaks)
    assert (copy.name, copy.kind, copy.llc_bytes, copy.cores, copy.names, copy.notes) == (
        dev.name, dev.kind, dev.llc_bytes, dev.cores, dev.names, dev.notes,
    )  # fmt: skip
    new_peaks = {(P.FP32, V): Figure(12.0, Source.USER)}
    other = dev.with_figures(peaks=new_peaks)
    assert (other.key, other.bandwidth, dict(other.peaks)) == ("toy", dev.bandwidth, new_peaks)
    new_peaks.clear()
    assert other.peak(P.FP32, V) == Figure(12.0, Source.USER)  # copied, not aliased
    assert dev.peak(P.FP32, V) == figure(10.0)  # the original is untouched


# -- roofline() --------------------------------------------------------------------------------


def test_roofline_memory_bound_by_hand() -> None:
    # 100 FLOP at 100 FLOP/s = 1 s; 10 B at 2 B/s = 5 s
    e = roofline(Cost(flops=100, bytes=10), P.FP16, TC, toy_device(), op="mine", label="mine[x]", shape="x=1")
    assert (e.compute_s, e.memory_s, e.floor_s, e.bound) == (1.0, 5.0, 5.0, "memory")
    assert (e.intensity, e.ridge, e.peak_flops, e.bandwidth) == (10.0, 50.0, 100.0, 2.0)
    assert (e.op, e.label, e.shape, e.unit, e.precision, e.peak_precision) == (
        "mine", "mine[x]", "x=1", TC, P.FP16, P.FP16,
    )  # fmt: skip
    assert (e.peak_source, e.bandwidth_source, e.peak_note) == (Source.DATASHEET, Source.DATASHEET, "")


def test_roofline_compute_bound_by_hand() -> None:
    e = roofline(Cost(flops=1000, bytes=2), P.FP16, TC, toy_device())
    assert (e.compute_s, e.memory_s, e.floor_s, e.bound, e.intensity) == (10.0, 1.0, 10.0, "compute", 500.0)


def test_roofline_tie_goes_to_memory() -> None:
    e = roofline(Cost(flops=200, bytes=4), P.FP16, TC, toy_device())
    assert e.compute_s == e.memory_s == 2.0
    assert e.bound == "memory"


def test_roofline_no_bytes_is_infinite_intensity_and_compute_bound() -> None:
    e = roofline(Cost(flops=50, bytes=0), P.FP16, TC, toy_device())
    assert (e.intensity, e.memory_s, e.floor_s, e.bound) == (math.inf, 0.0, 0.5, "compute")


def test_roofline_no_flops_is_memory_bound() -> None:
    e = roofline(Cost(flops=0, bytes=8), P.FP16, V, toy_device())
    assert (e.intensity, e.compute_s, e.floor_s, e.bound) == (0.0, 0.0, 4.0, "memory")


def test_roofline_defaults_label_op_and_params() -> None:
    e = roofline(Cost(flops=1, bytes=1), P.FP32, V, toy_device())
    assert (e.op, e.label, e.shape, dict(e.params)) == ("custom", "custom[fp32]", "", {})


def test_roofline_peak_precision_picks_the_peak_and_precision_stays_the_datas() -> None:
    # fp32 data, TF32 math: bytes at 4 per element, FLOPs at the TF32 tensor rate
    e = roofline(Cost(flops=80, bytes=4), P.FP32, TC, toy_device(), peak_precision=P.TF32)
    assert (e.precision, e.peak_precision, e.peak_flops, e.compute_s) == (P.FP32, P.TF32, 40.0, 2.0)


def test_roofline_reports_the_unit_and_note_it_fell_back_to() -> None:
    e = roofline(Cost(flops=20, bytes=1), P.BF16, TC, toy_device())
    assert (e.unit, e.peak_flops, e.peak_source) == (V, 20.0, Source.DERIVED)
    assert e.peak_note == "no bf16 vector figure; fp16 vector peak used"


def test_roofline_copies_params() -> None:
    params = {"n": 1}
    e = roofline(Cost(flops=1, bytes=1), P.FP32, V, toy_device(), params=params)
    params["n"] = 2
    assert dict(e.params) == {"n": 1}


# -- did_you_mean ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "choices", "expected"),
    [
        ("gemmm", ["gemm", "softmax"], " (did you mean 'gemm'?)"),
        ("k", ["M", "N", "K", "batch"], " (did you mean 'K'?)"),  # case-only difference
        ("HEAD_DIM", ["seq_q", "head_dim"], " (did you mean 'head_dim'?)"),
        ("bacth", ["M", "N", "K", "batch"], " (did you mean 'batch'?)"),
        ("zzz", ["gemm", "gemv"], ""),
        ("gemm", [], ""),
    ],
)
def test_did_you_mean(word: str, choices: list[str], expected: str) -> None:
    assert did_you_mean(word, choices) == expected
    assert did_you_mean(word, iter(choices)) == expected  # any iterable


def test_the_model_and_catalogue_import_neither_pytest_numpy_nor_cupy() -> None:
    code = (
        "import sys; import pytest_roofline, pytest_roofline.model.core, pytest_roofline.model.ops, "
        "pytest_roofline.model.devices, pytest_roofline.model.estimate, pytest_roofline.model.units; "
        "print(sorted(m for m in ('pytest', '_pytest', 'numpy', 'cupy') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
