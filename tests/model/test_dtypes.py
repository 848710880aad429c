"""Integer, bool and complex dtypes, and the fft op: spellings, bytes, FLOPs, peaks, peaks files, and
an unknown compute side in every place it shows (``tests/cli/test_cli_dtypes.py`` has the command
line, ``tests/plugin/test_bad_input.py`` a marker's dtype mistakes)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import FakeBackend

from pytest_roofline.model.core import Cost, Device, Figure, Precision, Source, Unit, parse_dtype, roofline
from pytest_roofline.model.devices import lookup
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.op_registry import OpError
from pytest_roofline.model.ops import get_op, register_op
from pytest_roofline.model.paired_ceilings import PairedCeiling, paired_floor_s
from pytest_roofline.model.peaks import CpuPeak, load_peaks_file, parse_peak_key
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.verdict import Result, Verdict, failure_message, judge, result_of
from pytest_roofline.output.records import JsonObject, MeasurementRecord, record_from_json
from pytest_roofline.output.table import table_rows
from pytest_roofline.timing.cache import WARM
from pytest_roofline.timing.engine import measure

P = Precision
V, TC = Unit.VECTOR, Unit.TENSOR
H100 = lookup("h100-sxm")
SQUARE = {"M": 64, "N": 64, "K": 64}


def result_record(result: Result, *, nodeid: str, mode: str) -> JsonObject:
    return MeasurementRecord.from_result(result, nodeid=nodeid, mode=mode).to_json()


def cost(op: str, dtype: object, **params: Any) -> Cost:
    spec = get_op(op)
    return spec.cost(spec.check(params), parse_dtype(dtype))


class FakeTorchDtype:
    """Like ``torch.int32``: no ``.name``, no ``.dtype``, prints as ``torch.int32``."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __str__(self) -> str:
        return self._text


# -- spellings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "itemsize"),
    [(P.INT8, 1), (P.INT16, 2), (P.INT32, 4), (P.INT64, 8), (P.UINT8, 1), (P.UINT16, 2), (P.UINT32, 4),
     (P.UINT64, 8), (P.BOOL, 1), (P.COMPLEX32, 4), (P.COMPLEX64, 8), (P.COMPLEX128, 16)],
)  # fmt: skip
def test_new_precisions_store_their_real_item_size(precision: Precision, itemsize: int) -> None:
    assert precision.itemsize == itemsize
    if precision.label in ("bool", "complex32"):
        return  # numpy has no complex32; its bool is one byte as said
    assert np.dtype(precision.label).itemsize == itemsize


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("int64", P.INT64), ("i64", P.INT64), ("longlong", P.INT64),
        ("int32", P.INT32), ("i4", P.INT32), ("intc", P.INT32),
        ("int16", P.INT16), ("i2", P.INT16), ("short", P.INT16),
        ("int8", P.INT8), ("i1", P.INT8),
        ("uint8", P.UINT8), ("u1", P.UINT8), ("ubyte", P.UINT8),
        ("uint16", P.UINT16), ("u2", P.UINT16), ("uint32", P.UINT32), ("u4", P.UINT32), ("uint64", P.UINT64),
        ("bool", P.BOOL), ("bool_", P.BOOL), ("b1", P.BOOL), ("?", P.BOOL),
        ("complex64", P.COMPLEX64), ("c8", P.COMPLEX64), ("cfloat", P.COMPLEX64),
        ("complex128", P.COMPLEX128), ("c16", P.COMPLEX128), ("cdouble", P.COMPLEX128),
        # as numpy reads the builtin: np.dtype(complex) is complex128, as np.dtype(float) is float64
        ("complex", P.COMPLEX128),
        ("complex32", P.COMPLEX32), ("chalf", P.COMPLEX32),
        ("torch.int32", P.INT32), ("torch.complex64", P.COMPLEX64), ("torch.bool", P.BOOL),
        ("np.uint8", P.UINT8), ("Complex64", P.COMPLEX64),
        # numpy's one-character codes keep their case: upper case is unsigned, or complex
        ("b", P.INT8), ("B", P.UINT8), ("h", P.INT16), ("H", P.UINT16), ("i", P.INT32), ("I", P.UINT32),
        ("q", P.INT64), ("Q", P.UINT64), ("f", P.FP32), ("F", P.COMPLEX64), ("d", P.FP64),
        ("D", P.COMPLEX128), ("e", P.FP16),
    ],
)  # fmt: skip
def test_integer_bool_and_complex_spellings(spelling: str, expected: Precision) -> None:
    assert parse_dtype(spelling) is expected


@pytest.mark.parametrize(
    "dtype",
    ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "complex64",
     "complex128"],
)  # fmt: skip
def test_numpy_dtypes_types_arrays_and_codes_agree(dtype: str) -> None:
    expected = parse_dtype(dtype)
    array = np.zeros(3, dtype=dtype)
    # (the one-character code of int64 is "l" here, a C long: ambiguous, and refused below)
    for spelled in (np.dtype(dtype), array.dtype.type, array, array[:1][0], np.dtype(dtype).str):
        assert parse_dtype(spelled) is expected, spelled


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [(FakeTorchDtype("torch.int64"), P.INT64), (FakeTorchDtype("torch.uint8"), P.UINT8),
     (FakeTorchDtype("torch.bool"), P.BOOL), (FakeTorchDtype("torch.complex64"), P.COMPLEX64),
     (FakeTorchDtype("torch.complex32"), P.COMPLEX32), (bool, P.BOOL), (complex, P.COMPLEX128)],
)  # fmt: skip
def test_torch_dtypes_and_builtin_types(dtype: object, expected: Precision) -> None:
    assert parse_dtype(dtype) is expected


@pytest.mark.parametrize(
    ("spelling", "says"),
    [("i8", "numpy reads it as int64, ML code as int8; write int64 or int8"), ("l", "write int64 or int32"),
     ("u8", "numpy reads it as uint64, ML code as uint8; write uint64 or uint8"),
     ("int", "write int64 or int32"), (int, "write int64 or int32"), ("long", "write int64 or int32"),
     ("byte", "numpy reads it as int8, PyTorch as uint8; write int8 or uint8"),
     ("f8", "write fp64 or fp8")],
)  # fmt: skip
def test_ambiguous_spellings_are_refused_saying_what_to_write(spelling: object, says: str) -> None:
    name = spelling.__name__ if isinstance(spelling, type) else spelling
    with pytest.raises(
        ValueError, match=rf"^dtype {re.escape(repr(name))} is ambiguous: .*{re.escape(says)}$"
    ):
        parse_dtype(spelling)


@pytest.mark.parametrize("dtype", ["float128", "complex256", "longdouble", np.dtype("g"), np.clongdouble])
def test_long_double_is_refused_as_unsupported(dtype: object) -> None:
    with pytest.raises(ValueError, match=r"is not supported: extended precision \(long double\)"):
        parse_dtype(dtype)


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("int46", "int64"), ("int33", "int32"), ("unit8", "uint8"), ("uint61", "uint16"),
     ("complx64", "complex64"), ("comlex128", "complex128"), ("compelx64", "complex64"), ("bol", "bool"),
     ("torch.int46", "int64")],
)  # fmt: skip
def test_a_misspelled_integer_or_complex_name_suggests_the_right_one(typo: str, meant: str) -> None:
    with pytest.raises(
        ValueError, match=rf"^unknown dtype '{re.escape(typo)}' \(did you mean '{meant}'\?\); "
    ):
        parse_dtype(typo)


@pytest.mark.parametrize(
    ("dtype", "shown", "what"),
    [
        (np.array(["a", "bc"]), "<U2", "strings"),
        (np.array([b"ab"]), "|S2", "byte strings"),
        (np.array([None, 1]), "object", "Python objects"),
        (np.zeros(2, dtype="datetime64[ns]"), "datetime64[ns]", "datetimes"),
        (np.zeros(2, dtype="timedelta64[s]"), "timedelta64[s]", "time deltas"),
        (np.zeros(2, dtype=[("x", "f4"), ("y", "i4")]), "[('x', '<f4'), ('y', '<i4')]",
         "a structured or raw-bytes type"),
        (np.dtype("U5"), "<U5", "strings"),
        ("<U5", "<U5", "strings"), ("U5", "U5", "strings"), ("O", "O", "Python objects"),
        ("S10", "S10", "byte strings"), ("M8[ns]", "M8[ns]", "datetimes"),
        ("str", "str", "strings"), ("object", "object", "Python objects"),
        ("datetime64[ms]", "datetime64[ms]", "datetimes"),
        ("category", "category", "categories"),
        (str, "str", "strings"), (object, "object", "Python objects"), (np.str_, "str_", "strings"),
        (np.bytes_, "bytes_", "byte strings"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)  # fmt: skip
def test_a_non_numeric_dtype_says_so_and_suggests_nothing(dtype: object, shown: str, what: str) -> None:
    with pytest.raises(ValueError, match="is not numeric") as info:
        parse_dtype(dtype)
    message = str(info.value)
    assert message == (
        f"dtype {shown!r} is not numeric ({what}): pytest-roofline needs the numeric dtype of the data "
        "the kernel really moves (uint8 for raw bytes)"
    )
    assert "did you mean" not in message


def test_numpy_string_dtype_is_not_numeric() -> None:
    dtypes = pytest.importorskip("numpy.dtypes")
    string = getattr(dtypes, "StringDType", None)
    if string is None:
        pytest.skip("numpy < 2 has no StringDType")
    with pytest.raises(ValueError, match=r"is not numeric \(strings\)"):
        parse_dtype(np.zeros(2, dtype=string()))


def test_torchs_packed_fp4_is_fp4() -> None:
    assert parse_dtype("torch.float4_e2m1fn_x2") is Precision.FP4


# -- bytes and FLOPs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "size"),
    [("int64", 8), ("int32", 4), ("int16", 2), ("uint8", 1), ("bool", 1), ("complex32", 4), ("complex64", 8),
     ("complex128", 16)],
)  # fmt: skip
def test_bytes_follow_the_real_item_size(dtype: str, size: int) -> None:
    assert cost("copy", dtype, n=10).bytes == 20 * size
    assert cost("gemm", dtype, M=2, N=3, K=5).bytes == (10 + 15 + 6) * size
    assert cost("custom", dtype, bytes=100).bytes == 100  # already bytes


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_integer_work_counts_operations_as_the_formula_says(dtype: str) -> None:
    assert cost("gemm", dtype, M=2, N=3, K=5).flops == 60
    assert cost("reduction", dtype, n=100).flops == 100
    assert cost("elementwise", dtype, n=10, flops_per_element=3).flops == 30


@pytest.mark.parametrize(
    ("op", "params", "real_flops", "factor"),
    [
        ("gemm", {"M": 2, "N": 3, "K": 5}, 60, 4),  # a complex multiply-add is 8 real FLOPs, not 2
        ("gemv", {"M": 3, "K": 5}, 30, 4),
        ("dot", {"n": 7}, 14, 4),
        ("conv2d", {"N": 1, "C": 1, "H": 8, "W": 5, "K": 1, "R": 3, "S": 1}, 180, 4),
        ("reduction", {"n": 100}, 100, 2),  # a complex add is 2 real FLOPs
        ("elementwise", {"n": 10, "flops_per_element": 6}, 60, 1),  # counted in real FLOPs, as given
        ("custom", {"flops": 1e9, "bytes": 1e6}, 1e9, 1),
        ("copy", {"n": 10}, 0, 1),
        ("transpose", {"rows": 3, "cols": 5}, 0, 1),
    ],
)
@pytest.mark.parametrize("dtype", ["complex64", "complex128", "complex32"])
def test_complex_flops_follow_the_real_arithmetic_convention(
    op: str, params: dict[str, Any], real_flops: float, factor: float, dtype: str
) -> None:
    assert cost(op, dtype, **params).flops == real_flops * factor
    assert get_op(op).complex_flops == factor
    if op != "custom":  # bytes as given there
        real = parse_dtype(dtype).component
        assert cost(op, dtype, **params).bytes == 2 * cost(op, real, **params).bytes


@pytest.mark.parametrize(
    ("op", "params"),
    [("softmax", {"rows": 4, "cols": 4}), ("layernorm", {"rows": 4, "cols": 4}),
     ("rmsnorm", {"rows": 4, "cols": 4}),
     ("attention", {"batch": 1, "heads": 1, "seq_q": 4, "seq_k": 4, "head_dim": 8})],
)  # fmt: skip
def test_ops_without_a_complex_form_refuse_complex_data(op: str, params: dict[str, Any]) -> None:
    expected = f"{op} takes no complex data; dtype is complex64 (count the kernel's real FLOPs and bytes with"
    with pytest.raises(OpError, match=f"^{re.escape(expected)} custom\\)$"):
        estimate(op, dtype="c8", device=H100, **params)
    estimate(op, dtype="int32", device=H100, **params)  # integers are fine


# -- fft ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "flops", "elements"),
    [({"n": 8}, 5 * 8 * 3, 16), ({"n": 1024, "batch": 3}, 5 * 3 * 1024 * 10, 2 * 3 * 1024),
     ({"n": 1}, 0, 2), ({"n": 12}, 5 * 12 * math.log2(12), 24)],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_fft_costs_five_n_log2_n_real_flops_and_reads_and_writes_once(
    params: dict[str, Any], flops: float, elements: float, dtype: str
) -> None:
    c = cost("fft", dtype, **params)
    assert c.flops == pytest.approx(flops)
    assert c.bytes == elements * parse_dtype(dtype).itemsize


def test_fft_formulas_match_its_cost_function() -> None:
    spec = get_op("fft")
    names = {"n": 4096, "batch": 5, "log2": math.log2}
    flops = eval(spec.flops_formula.replace("·", "*"), {}, names)
    assert (flops, eval(spec.bytes_formula.replace("·", "*"), {}, names) * 8) == (
        cost("fft", "complex64", n=4096, batch=5).flops,
        cost("fft", "complex64", n=4096, batch=5).bytes,
    )
    assert "5·batch·n·log2(n)" in spec.doc
    assert "real FLOPs" in spec.doc


def test_fft_on_h100_is_memory_bound_at_the_fp32_vector_peak() -> None:
    e = estimate("fft", n=2**20, batch=8, dtype="complex64", device=H100)
    assert (e.label, e.unit, e.peak_precision, e.bound) == (
        "fft[n=1048576 batch=8 complex64]",
        V,
        P.FP32,
        "memory",
    )
    assert e.peak_flops == pytest.approx(66.9e12)
    assert e.bytes == 2 * 8 * 2**20 * 8


@pytest.mark.parametrize("dtype", ["fp32", "fp64", "int32", "bool"])
def test_fft_refuses_real_and_integer_data(dtype: str) -> None:
    expected = (
        f"fft takes complex data only (complex32, complex64 or complex128); dtype is {parse_dtype(dtype)} "
        "(count other kernels with custom)"
    )
    with pytest.raises(OpError, match=f"^{re.escape(expected)}$"):
        estimate("fft", n=1024, dtype=dtype, device=H100)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"complex_flops": 0}, "complex_flops must be a positive number or None; got 0"),
     ({"complex_flops": True}, "complex_flops must be a positive number or None; got True"),
     ({"complex_flops": math.inf}, "complex_flops must be a positive number or None; got inf"),
     ({"complex_flops": None, "real": False}, "takes neither real data (real=False) nor complex")],
)  # fmt: skip
def test_register_op_checks_its_complex_options(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(OpError, match=re.escape(message)):
        register_op("never_registered", ["n"], lambda p, size: Cost(p["n"], p["n"] * size), **kwargs)


def test_a_registered_op_says_how_complex_data_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_roofline.model import op_registry

    monkeypatch.setattr(op_registry, "_REGISTRY", dict(op_registry._REGISTRY))
    register_op("cmul", ["n"], lambda p, size: Cost(p["n"], 3 * p["n"] * size), complex_flops=6)
    assert cost("cmul", "complex64", n=10) == Cost(60, 240)
    assert cost("cmul", "fp32", n=10) == Cost(10, 120)
    register_op("cfft", ["n"], lambda p, size: Cost(p["n"], p["n"] * size), real=False)
    with pytest.raises(OpError, match="cfft takes complex data only"):
        cost("cfft", "fp32", n=10)
    register_op("rsort", ["n"], lambda p, size: Cost(p["n"], p["n"] * size), complex_flops=None)
    with pytest.raises(OpError, match="rsort takes no complex data"):
        cost("rsort", "complex128", n=10)


# -- which peak: complex -----------------------------------------------------------------------


def test_complex64_runs_at_the_fp32_peaks_and_complex128_at_the_fp64_ones() -> None:
    e = estimate("gemm", dtype="complex64", device=H100, **SQUARE)
    assert (e.precision, e.peak_precision, e.unit, e.peak_flops) == (
        P.COMPLEX64,
        P.FP32,
        V,
        pytest.approx(66.9e12),
    )
    assert e.flops == 8 * 64**3
    e = estimate("gemm", dtype="complex64", device=H100, math="tf32", **SQUARE)
    assert (e.peak_precision, e.unit, e.peak_flops) == (P.TF32, TC, pytest.approx(494.7e12))
    # cuBLAS runs ZGEMM on the fp64 tensor units where a card has them
    e = estimate("gemm", dtype="complex128", device=H100, **SQUARE)
    assert (e.peak_precision, e.unit, e.peak_flops) == (P.FP64, TC, pytest.approx(66.9e12))
    e = estimate("dot", dtype="complex128", device=H100, n=1024)
    assert (e.peak_precision, e.unit, e.peak_flops) == (P.FP64, V, pytest.approx(33.5e12))
    e = estimate("gemm", dtype="complex128", device=lookup("t4"), **SQUARE)  # no fp64 tensor cores
    assert (e.peak_precision, e.unit, e.peak_flops) == (P.FP64, V, pytest.approx(0.25e12))


def test_math_tf32_on_complex128_is_an_error() -> None:
    with pytest.raises(
        OpError, match=r"^math='tf32' applies to fp32 \(or complex64\) data only; dtype is complex128$"
    ):
        estimate("gemm", dtype="complex128", device=H100, math="tf32", **SQUARE)


def test_roofline_reads_a_complex_precision_as_its_parts() -> None:
    e = roofline(Cost(flops=1e12, bytes=8.0), P.COMPLEX128, V, H100)
    assert (e.peak_precision, e.peak_flops) == (P.FP64, pytest.approx(33.5e12))


# -- which peak: integers ----------------------------------------------------------------------


def test_int8_and_uint8_matrix_ops_use_the_int8_tensor_peak() -> None:
    for dtype in ("int8", "uint8"):
        e = estimate("gemm", dtype=dtype, device=H100, M=4096, N=4096, K=4096)
        assert (e.unit, e.peak_flops, e.bound) == (TC, pytest.approx(1978.9e12), "compute")
        assert e.compute_s == pytest.approx(2 * 4096**3 / 1978.9e12)


@pytest.mark.parametrize(
    ("op", "params"),
    [("elementwise", {"n": 2**24}), ("gemm", SQUARE), ("reduction", {"n": 2**24}), ("dot", {"n": 2**20}),
     ("custom", {"flops": 1e12, "bytes": 1e6})],
)  # fmt: skip
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint32", "bool", "int8"])
def test_integer_work_without_an_integer_peak_is_memory_bound_with_compute_unknown(
    op: str, params: dict[str, Any], dtype: str
) -> None:
    if dtype == "int8" and op == "gemm":
        return  # H100 has int8 tensor cores (above)
    e = estimate(op, dtype=dtype, device=H100, **params)
    assert (e.bound, e.compute_s, e.peak_flops, e.ridge, e.peak_source, e.unit) == (
        "memory",
        None,
        None,
        None,
        None,
        V,
    )
    assert e.floor_s == e.memory_s == e.bytes / 3.35e12
    assert e.intensity == e.flops / e.bytes  # operations per byte: still known
    assert e.peak_note == f"compute side unknown: no {parse_dtype(dtype).rate_class} peak on h100-sxm"


def test_integer_work_that_computes_nothing_has_a_known_compute_side() -> None:
    e = estimate("copy", dtype="int32", device=H100, n=1000)
    assert (e.compute_s, e.peak_flops, e.bound, e.peak_note) == (0.0, None, "memory", "")


def test_integer_work_that_moves_no_bytes_has_no_floor_without_a_peak() -> None:
    with pytest.raises(ValueError, match=re.escape(
        "custom[flops=1e+09 int32] has no floor on h100-sxm: it moves no bytes and the device has no int32 "
        "peak (give one in a peaks file as 'int32:vector')"
    )):  # fmt: skip
        estimate("custom", dtype="int32", device=H100, flops=1e9)


def with_peaks(device: Device, peaks: dict[tuple[Precision, Unit], float]) -> Device:
    return device.with_figures(
        peaks={**device.peaks, **{k: Figure(v, Source.USER) for k, v in peaks.items()}}
    )


def test_an_integer_peak_someone_knows_makes_the_compute_side_known() -> None:
    dev = with_peaks(H100, {(P.INT32, V): 30e12})
    e = estimate("elementwise", dtype="uint32", device=dev, n=1000, flops_per_element=1000)
    assert (e.peak_flops, e.peak_source, e.bound) == (30e12, Source.USER, "compute")
    assert e.compute_s == pytest.approx(1e6 / 30e12)
    # a matrix op with no int32 tensor peak runs on that vector peak
    assert estimate("gemm", dtype="int32", device=dev, **SQUARE).peak_flops == 30e12


def test_an_integer_peak_never_stands_in_for_a_missing_float_one() -> None:
    dev = Device("toy", "Toy", "cuda", {(P.FP32, V): Figure(1e12, Source.DATASHEET),
                                         (P.INT8, V): Figure(9e12, Source.USER)},
                 Figure(1e11, Source.DATASHEET))  # fmt: skip
    peak, unit = dev.resolve_peak(P.BF16, V)
    assert peak is not None
    assert (peak.value, unit, peak.note) == (1e12, V, "no bf16 vector figure; fp32 vector peak used")
    assert dev.resolve_peak(P.INT16, V) == (None, V)
    assert dev.ridge(P.INT16, V) is None


# -- peaks files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [("int32:vector", (P.INT32, V)), ("uint32:vector", (P.INT32, V)), ("int64:vector", (P.INT64, V)),
     ("i4:vector", (P.INT32, V)), ("uint8:tensor", (P.INT8, TC)), ("bool:vector", (P.BOOL, V))],
)  # fmt: skip
def test_peaks_files_accept_integer_keys(key: str, expected: tuple[Precision, Unit]) -> None:
    assert parse_peak_key(key) == expected


@pytest.mark.parametrize(("key", "real"), [("complex64:vector", "fp32"), ("c16:tensor", "fp64")])
def test_peaks_files_refuse_complex_keys_naming_the_real_one(key: str, real: str) -> None:
    unit = key.partition(":")[2]
    with pytest.raises(
        ValueError, match=re.escape(f"runs at the {real} peaks") + ".*" + re.escape(f"'{real}:{unit}'")
    ):
        parse_peak_key(key)


def test_a_misspelled_integer_peak_key_suggests_the_right_one(tmp_path: Path) -> None:
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"peaks_tflops": {"int46:vector": 30}}))
    with pytest.raises(ValueError, match=r"unknown precision 'int46' \(did you mean 'int64'\?\)") as info:
        load_peaks_file(path, base=H100)
    assert "complex64" not in str(info.value).partition("accepted: ")[2]


def test_a_peaks_file_integer_peak_is_used(tmp_path: Path) -> None:
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"peaks_tflops": {"int32:vector": 30}}))
    dev = load_peaks_file(path, base=H100)
    e = estimate("elementwise", dtype="int32", device=dev, n=1000, flops_per_element=10**4)
    assert (e.peak_flops, e.peak_source, e.bound) == (30e12, Source.USER, "compute")


# -- where an unknown compute side shows ---------------------------------------------------------


def int32_result(seconds: float = 1e-3, device: Device = H100) -> Any:
    est = estimate("elementwise", dtype="int32", device=device, n=2**26)
    m = measure(lambda: None, policy=Policy(), cache=WARM, backend=FakeBackend(seconds))
    return result_of(est, [m], 0.5)


def test_the_json_record_has_nulls_for_an_unknown_compute_side() -> None:
    r = result_record(int32_result(), nodeid="t.py::test_int", mode="enforce")
    assert json.loads(json.dumps(r, allow_nan=False)) == r
    assert (r["compute_s"], r["peak_flops"], r["ridge"], r["peak_source"]) == (None, None, None, None)
    assert (r["bound"], r["dtype"], r["peak_precision"], r["bandwidth_source"]) == (
        "memory",
        "int32",
        "int32",
        "datasheet",
    )
    assert r["floor_s"] == pytest.approx(2**26 * 8 / 3.35e12)


def test_the_table_says_compute_unknown() -> None:
    fp32 = result_of(estimate("copy", dtype="fp32", device=H100, n=2**26), [int32_result().measurement], 0.5)
    known = result_record(fp32, nodeid="t.py::test_f", mode="enforce")
    unknown = result_record(int32_result(), nodeid="t.py::test_int", mode="enforce")
    rows = table_rows([record_from_json(unknown), record_from_json(known)])
    assert rows[0][3] == "memory (compute unknown)"
    assert rows[1][3] == "memory"


def test_the_message_says_compute_unknown() -> None:
    text = failure_message(int32_result(1e-3))
    assert text.startswith(
        "attained 16.0% of speed of light (budget 50%): elementwise[n=67108864 int32] on NVIDIA H100 80GB "
        "HBM3:\nfloor 160.3 µs, memory-bound at 3.35 TB/s (compute side unknown: no int32 peak on"
        " h100-sxm);\nmeasured 1000 µs ("
    )


def test_a_paired_ceiling_with_an_unknown_compute_side_scales_the_memory_time() -> None:
    est = estimate("elementwise", dtype="int64", device=H100, n=2**20)
    ceiling = PairedCeiling("bandwidth", 3.35e12, 0.5, 0.0, 0.5, "copy", 3)
    assert paired_floor_s(est, ceiling) == pytest.approx(est.memory_s * 2)


def test_the_cpu_theoretical_peak_does_not_bound_integer_operations() -> None:
    cpu = Device("cpu", "Test CPU", "cpu",
                 {(P.FP32, V): Figure(1e9, Source.MEASURED), (P.INT32, V): Figure(1e15, Source.USER)},
                 Figure(1e9, Source.MEASURED))  # fmt: skip
    est = estimate("elementwise", dtype="int32", device=cpu, n=1000, flops_per_element=10**6)
    peak = CpuPeak(2, 4e9, "cpufreq max", "AVX2+FMA", 16, 32)  # 256 GFLOP/s fp32
    m = measure(lambda: None, policy=Policy(), cache=WARM, backend=FakeBackend(1.0))  # 1 G int ops/s
    assert est.flops / m.time_s > peak.flops(P.FP32) / 1000
    m = measure(lambda: None, policy=Policy(), cache=WARM, backend=FakeBackend(1e-3))  # 1 T int ops/s
    assert judge(est, m, 0.5, peak=peak).verdict is not Verdict.FASTER_THAN_LIGHT
    fp32 = estimate("elementwise", dtype="fp32", device=cpu, n=1000, flops_per_element=10**6)
    assert judge(fp32, m, 0.5, peak=peak).verdict is Verdict.FASTER_THAN_LIGHT  # as before, for floats
