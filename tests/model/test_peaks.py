"""User peaks files (``--roofline-peaks FILE``): alone, over a base device, and every mistake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_roofline.model.core import Figure, Precision, Source, Unit
from pytest_roofline.model.devices import DeviceError, lookup
from pytest_roofline.model.peaks import load_peaks_file

P, V, TC = Precision, Unit.VECTOR, Unit.TENSOR


def write(tmp_path: Path, content: object, name: str = "peaks.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


GOOD = {
    "name": "my-gpu",
    "kind": "cuda",
    "bandwidth_gbs": 3350,
    "peaks_tflops": {"bf16:tensor": 989.4, "fp32:vector": 66.9, "fp8:tensor": 1978.9},
    "peaks_gflops": {"float64:VECTOR": 33500},
    "llc_mib": 50,
    "cores": 132,
    "notes": ["borrowed card"],
}


def test_peaks_file_standalone(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    device = load_peaks_file(path)
    assert device.key == "my-gpu"
    assert device.name == "my-gpu"
    assert device.kind == "cuda"
    assert device.bandwidth == Figure(3350e9, Source.USER, "from peaks.json")
    assert device.peaks == {
        (P.BF16, TC): Figure(989.4 * 1e12, Source.USER, "from peaks.json"),
        (P.FP32, V): Figure(66.9 * 1e12, Source.USER, "from peaks.json"),
        (P.FP8_E4M3, TC): Figure(1978.9 * 1e12, Source.USER, "from peaks.json"),
        (P.FP64, V): Figure(33500e9, Source.USER, "from peaks.json"),
    }
    assert device.llc_bytes == 50 * 2**20
    assert device.cores == 132
    assert device.notes == ("ceilings from peaks.json", "borrowed card")
    assert device.peak(P.FP8_E5M2, TC) is not None  # both fp8 formats share one rate


def test_peaks_file_over_a_base_keeps_what_it_does_not_give(tmp_path: Path) -> None:
    base = lookup("h100-sxm")
    path = write(tmp_path, {"bandwidth_gbs": 3000, "peaks_tflops": {"bf16:tensor": 700}})
    device = load_peaks_file(str(path), base=base)
    assert device.key == "h100-sxm"
    assert device.name == base.name
    assert device.kind == "cuda"
    assert device.bandwidth.value == 3000e9
    assert device.bandwidth.source is Source.USER
    assert device.peaks[(P.BF16, TC)].value == 700e12
    assert device.peaks[(P.FP32, V)] == base.peaks[(P.FP32, V)]
    assert device.cores == base.cores
    assert device.llc_bytes == base.llc_bytes
    assert device.notes[-1] == "ceilings from peaks.json"


def test_empty_peaks_file_over_a_base_is_the_base(tmp_path: Path) -> None:
    base = lookup("a10")
    device = load_peaks_file(write(tmp_path, {}), base=base)
    assert device.peaks == base.peaks
    assert device.bandwidth == base.bandwidth


def test_peaks_file_over_a_base_can_rename(tmp_path: Path) -> None:
    device = load_peaks_file(
        write(tmp_path, {"name": "lab box", "key": "lab", "cores": 2}), base=lookup("t4")
    )
    assert (device.key, device.name, device.cores) == ("lab", "lab box", 2)
    assert device.names[0] == "lab box"


def _with(**changes: object) -> dict[str, object]:
    data = dict(GOOD)
    for key, value in changes.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    ("content", "match"),
    [
        pytest.param("{not json", "is not valid JSON", id="bad-json"),
        pytest.param("[1, 2]", "must hold a JSON object; got list", id="array"),
        pytest.param(
            _with(bandwith_gbs=1),
            r"unknown key 'bandwith_gbs' \(did you mean 'bandwidth_gbs'\?\); accepted: name",
            id="unknown-key",
        ),
        pytest.param(
            _with(peaks_tflops={"fp23:vector": 1}),
            r"peaks_tflops\['fp23:vector'\] = 1: unknown precision 'fp23' \(did you mean 'fp32'\?\); "
            r"accepted: fp64, fp32",
            id="precision",
        ),
        pytest.param(
            _with(peaks_tflops={"fp32:vectr": 66.9}),
            r"peaks_tflops\['fp32:vectr'\] = 66.9: unknown unit 'vectr' \(did you mean 'vector'\?\); "
            r"accepted: tensor, vector",
            id="unit",
        ),
        pytest.param(
            _with(peaks_tflops={"fp32": 66.9}),
            r"peaks_tflops\['fp32'\] = 66.9: expected precision:unit",
            id="no-unit",
        ),
        pytest.param(
            _with(peaks_tflops={"fp32:vector": 0}),
            r"peaks_tflops\['fp32:vector'\] must be a positive number; got 0",
            id="zero",
        ),
        pytest.param(_with(peaks_tflops={"fp32:vector": -5}), "got -5", id="negative"),
        pytest.param(_with(peaks_tflops={"fp32:vector": True}), "got True", id="bool"),
        pytest.param(_with(peaks_tflops={"fp32:vector": "66.9"}), "got '66.9'", id="string"),
        pytest.param(
            '{"name": "x", "kind": "cuda", "bandwidth_gbs": NaN, "peaks_tflops": {"fp32:vector": 1}}',
            "'bandwidth_gbs' must be a positive number; got nan",
            id="nan",
        ),
        pytest.param(
            _with(bandwidth_gbs=-1), "'bandwidth_gbs' must be a positive number; got -1", id="bandwidth"
        ),
        pytest.param(_with(llc_mib=0), "'llc_mib' must be a positive number; got 0", id="llc"),
        pytest.param(_with(cores=1.5), "'cores' must be a positive integer; got 1.5", id="cores"),
        pytest.param(_with(kind="xyz"), r"'kind' is 'xyz'; accepted: cpu, cuda, rocm", id="kind"),
        pytest.param(_with(kind="cdua"), r"did you mean 'cuda'", id="kind-typo"),
        pytest.param(_with(name=""), "'name' must be a non-empty string; got ''", id="empty-name"),
        pytest.param(_with(notes="one note"), "'notes' must be a list of strings", id="notes"),
        pytest.param(_with(peaks_tflops={}), "'peaks_tflops' must be a non-empty object", id="empty-peaks"),
        pytest.param(_with(peaks_tflops=[1]), "'peaks_tflops' must be a non-empty object", id="peaks-list"),
        pytest.param(_with(name=None, bandwidth_gbs=None), "missing name, bandwidth_gbs", id="missing"),
        pytest.param(
            _with(peaks_tflops=None, peaks_gflops=None),
            r"missing peaks_tflops \(or peaks_gflops\)",
            id="no-peaks",
        ),
        pytest.param(
            _with(peaks_tflops={"bf16:tensor": 1}, peaks_gflops=None),
            "needs at least one 'vector' peak",
            id="no-vector",
        ),
        pytest.param(
            _with(peaks_tflops={"fp8:tensor": 1, "fp8_e5m2:tensor": 2, "fp32:vector": 1}),
            r"gives the fp8_e4m3:tensor peak a second time",
            id="same-peak",
        ),
        pytest.param(
            _with(peaks_gflops={"fp32:vector": 1}),
            r"peaks_gflops\['fp32:vector'\] gives the fp32:vector peak a second time",
            id="same-peak-units",
        ),
        pytest.param('{"name": "a", "name": "b"}', "key 'name' appears more than once", id="duplicate-key"),
        pytest.param(
            _with(peaks_tflops={"int8:tensor": 1e300, "fp32:vector": 1}),
            r"peaks_tflops\['int8:tensor'\] must be below 1.8e\+296; got 1e\+300$",
            id="overflowing-tflops",
        ),
        pytest.param(
            _with(peaks_gflops={"fp64:vector": 10**400}),
            r"peaks_gflops\['fp64:vector'\] must be below 1.8e\+299; got 1.00e\+400$",
            id="overflowing-integer",
        ),
        pytest.param(
            _with(bandwidth_gbs=1e300),
            r"'bandwidth_gbs' must be below 1.8e\+299; got 1e\+300$",
            id="bandwidth-inf",
        ),
        pytest.param(_with(llc_mib=1e308), r"'llc_mib' must be below 1.71e\+302; got 1e\+308$", id="llc-inf"),
    ],
)
def test_peaks_file_errors_name_the_file_key_and_value(tmp_path: Path, content: object, match: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(DeviceError, match=match) as info:
        load_peaks_file(path)
    assert str(info.value).startswith(f"peaks file {str(path)!r}: ")


def test_missing_peaks_file(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match=r"peaks file '.*nowhere\.json': cannot be read \(.*No such file"):
        load_peaks_file(tmp_path / "nowhere.json")


def test_peaks_file_that_is_a_folder(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match="cannot be read"):
        load_peaks_file(tmp_path)


def test_peaks_file_errors_also_apply_over_a_base(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match="unknown unit 'tensr'"):
        load_peaks_file(write(tmp_path, {"peaks_tflops": {"bf16:tensr": 1}}), base=lookup("h100-sxm"))
