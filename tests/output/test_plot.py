"""The roofline plot: roofs, ridge points and measurements drawn; a clear error without matplotlib."""

from __future__ import annotations

import math
import re
import stat
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.output.plot import PlotError, check_path, draw
from pytest_roofline.output.records import MeasurementRecord

#: the plot extra (in the test extra too); the refusals below need no matplotlib
needs_matplotlib = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("matplotlib") is None,
    reason="the plot extra is not installed",
)

DEVICE = {
    "key": "cpu", "name": "Test CPU", "kind": "cpu", "bandwidth": 20e9,
    "peaks": [
        {"precision": "fp64", "unit": "vector", "flops": 1e11, "ridge": 5.0},
        {"precision": "fp32", "unit": "vector", "flops": 2e11, "ridge": 10.0},
        {"precision": "fp16", "unit": "vector", "flops": 2e11, "ridge": 10.0},
    ],
}  # fmt: skip


def record(
    test: str, verdict: str, flops: float, bytes_: float, time_s: float, precision: str = "fp64"
) -> Any:
    return {"nodeid": f"tests/t.py::{test}", "name": "", "device": "cpu", "verdict": verdict, "flops": flops,
            "bytes": bytes_, "time_s": time_s, "peak_precision": precision, "unit": "vector"}  # fmt: skip


RECORDS = [
    record("test_gemm", "pass", 2e9, 2.4e7, 0.025),
    record("test_axpy", "MISS", 2e6, 2.4e7, 0.01, precision="fp32"),
    record("test_copy", "pass", 0.0, 1.6e7, 0.001),  # no FLOPs: not on the plot, counted
]


@needs_matplotlib
def test_the_svg_has_the_roofs_the_ridges_and_the_points(tmp_path: Path) -> None:
    path = draw(RECORDS, [DEVICE], tmp_path / "roofline.svg")
    svg = path.read_text()
    assert svg.startswith("<?xml")
    for text in ("DRAM 20.0 GB/s", "fp64 vector 100 GFLOP/s (ridge 5", "fp32 vector 200 GFLOP/s (ridge 10",
                 "test_gemm", "test_axpy", "arithmetic intensity (FLOP/byte)", "achieved FLOP/s",
                 "1 measurement(s) with no FLOPs"):  # fmt: skip
        assert text in svg, text
    assert "fp16" not in svg  # only the roofs a measurement was judged against
    assert "test_copy" not in svg


@needs_matplotlib
def test_a_warm_point_brings_the_roof_of_the_level_that_judged_it(tmp_path: Path) -> None:
    levels = [
        {"name": "l1", "capacity_bytes": 49152, "bandwidth": 2e11},
        {"name": "l2", "capacity_bytes": 2**21, "bandwidth": 1e11},
    ]
    warm = {**record("test_warm", "pass", 2e6, 1.6e6, 1e-4), "cache_state": "warm", "memory_level": "l2"}
    svg = draw([*RECORDS, warm], [{**DEVICE, "levels": levels}], tmp_path / "warm.svg").read_text()
    assert "L2 100 GB/s" in svg
    assert "L1 200 GB/s" not in svg  # no point was judged against it
    cold_only = draw(RECORDS, [{**DEVICE, "levels": levels}], tmp_path / "cold.svg").read_text()
    assert "L2 100 GB/s" not in cold_only


@needs_matplotlib
def test_a_baseline_draws_an_arrow_from_the_old_point(tmp_path: Path) -> None:
    plain = draw(RECORDS, [DEVICE], tmp_path / "plain.svg").read_text()
    gemm = MeasurementRecord.from_json({**RECORDS[0], "time_s": 0.0125})
    old = {gemm.key: gemm}
    arrowed = draw(RECORDS, [DEVICE], tmp_path / "arrow.svg", baseline=old).read_text()
    assert arrowed.count("<path") > plain.count("<path")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@needs_matplotlib
def test_a_png_is_decodable_and_slide_sized(tmp_path: Path) -> None:
    width, height = png_size(draw(RECORDS, [DEVICE], tmp_path / "roofline.png"))
    assert (width, height) == (1200, 840)  # 8 x 5.6 inches at 150 dpi


def test_other_suffixes_are_refused_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(PlotError, match=r"plot\.pdf: the plot is written as \.svg or \.png; got '\.pdf'"):
        check_path(tmp_path / "plot.pdf")
    assert not list(tmp_path.iterdir())


def test_without_matplotlib_the_error_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(PlotError, match=r"needs matplotlib: pip install 'pytest-roofline\[plot\]'"):
        draw(RECORDS, [DEVICE], tmp_path / "roofline.svg")
    assert not list(tmp_path.iterdir())


@needs_matplotlib
def test_roofline_plot_draws_a_saved_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from pytest_roofline import cli

    measurements = [{**r, "attained": 0.5, "label": "x", "device_name": "Test CPU"} for r in RECORDS]
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"schema": 2, "devices": [DEVICE], "measurements": measurements}))
    out = tmp_path / "roofline.svg"
    assert cli.main(["plot", str(results), "-o", str(out), "--baseline", str(results)]) == 0
    assert capsys.readouterr().out == f"roofline: wrote {out}\n"
    assert "test_gemm" in out.read_text()
    assert cli.main(["plot", str(tmp_path / "none.json"), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"roofline: error: results {tmp_path / 'none.json'}: no such file\n"


@needs_matplotlib
def test_an_id_with_dollars_is_drawn_as_text_not_mathtext(tmp_path: Path) -> None:
    import matplotlib

    odd = record("test_price[a$b$c]", "pass", 2e9, 2.4e7, 0.025)
    device = {**DEVICE, "name": "$5 CPU$"}
    # fonttype none writes each text as one <text> element; mathtext would split it into glyphs (the
    # default, paths, keeps the raw string in an XML comment, where it proves nothing)
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        svg = draw([odd], [device], tmp_path / "odd.svg", title="a $x$ title").read_text()
    for text in ("test_price[a$b$c]", "$5 CPU$", "a $x$ title"):
        assert re.search(rf">{re.escape(text)}\s*</text>", svg), text


# -- the points' labels: one per spot, none over another ------------------------------------------


def svg_texts(path: Path) -> list[str]:
    """The texts of an SVG drawn with svg.fonttype none (one <text> element each)."""
    return [text.strip() for text in re.findall(r">([^<>]+)</text>", path.read_text()) if text.strip()]


@needs_matplotlib
def test_points_at_one_spot_share_one_label_in_roofline_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import matplotlib

    twins = [record(test, "pass", 2e9, 2.4e7, 0.025) for test in ("test_gemm[a]", "test_gemm[b]")]
    results = results_file(
        tmp_path, measurements=[{**r, "attained": 0.5, "label": "x"} for r in [*twins, RECORDS[1]]]
    )
    out = tmp_path / "roofline.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        assert run_plot(capsys, results, "-o", out)[0] == 0
    texts = svg_texts(out)
    assert "test_gemm[a], test_gemm[b]" in texts
    assert {"test_gemm[a]", "test_gemm[b]"}.isdisjoint(texts)
    assert "test_axpy" in texts  # at its own spot: its own label


@needs_matplotlib
def test_points_at_one_spot_share_one_label_in_the_runs_plot(rl: pytest.Pytester) -> None:
    import matplotlib
    from conftest import GEMM

    body = f'roofline(lambda: None, op="gemm", {GEMM}, dtype="fp32")'
    rl.makepyfile(test_twins=f"def test_one(roofline):\n    {body}\n\ndef test_two(roofline):\n    {body}\n")
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        result = rl.runpytest("--roofline-plot=plot.svg")
    result.assert_outcomes(passed=2)
    texts = svg_texts(rl.path / "plot.svg")
    assert "test_one, test_two" in texts
    assert {"test_one", "test_two"}.isdisjoint(texts)


@needs_matplotlib
def test_labels_of_points_close_together_do_not_overlap(tmp_path: Path) -> None:
    from matplotlib.text import Annotation

    from pytest_roofline.output.plot import POINT_LABEL, figure

    # points a few points apart on the memory roof (20 GB/s): their labels would be drawn on one
    # another; and one at the ridge, under the roof's own label
    intensities = (0.50, 0.53, 0.56, 0.60, 5.0)
    close = [record(f"test_kernel_{i}", "pass", 2e9 * x, 2e9, 0.1) for i, x in enumerate(intensities)]
    drawn = figure(close, [DEVICE])
    drawn.draw_without_rendering()  # laid out again, as a save lays it out
    labels = [t for t in drawn.findobj(Annotation) if t.get_label() == POINT_LABEL]
    assert sorted(t.get_text() for t in labels) == [f"test_kernel_{i}" for i in range(5)]
    boxes = [t.get_window_extent() for t in labels]
    roofs = [t.get_window_extent() for ax in drawn.axes for t in ax.texts if t.get_text() and t not in labels]
    assert roofs  # DRAM's and the fp64 roof's labels
    for i, box in enumerate(boxes):
        assert not any(box.overlaps(other) for other in [*boxes[i + 1 :], *roofs]), labels[i].get_text()
        assert drawn.bbox.contains(box.x0, box.y0)  # in the figure, not cut by its edge
        assert drawn.bbox.contains(box.x1, box.y1)


# -- the roofline plot command: every fault one line, exit 2 ---------------------------------------


def results_file(tmp_path: Path, **changes: Any) -> Path:
    """A saved report of RECORDS on DEVICE, with ``changes`` to its top level."""
    import json

    measurements = [{**r, "attained": 0.5, "label": "x", "device_name": "Test CPU"} for r in RECORDS]
    data = {"schema": 2, "devices": [DEVICE], "measurements": measurements, **changes}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return path


def run_plot(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from pytest_roofline import cli

    status = cli.main(["plot", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


@needs_matplotlib
@pytest.mark.parametrize(
    ("output", "problem"),
    [
        ("missing/roofline.svg", "directory '*missing' does not exist"),
        ("folder.svg", "it is a directory"),
        ("read-only.svg", "it is read-only"),
        ("fifo.svg", "it is a FIFO, not a regular file*"),
    ],
)
def test_roofline_plot_refuses_an_output_it_cannot_write_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str, problem: str
) -> None:
    import fnmatch
    import os

    (tmp_path / "folder.svg").mkdir()
    (tmp_path / "read-only.svg").write_text("old")
    (tmp_path / "read-only.svg").chmod(0o444)
    os.mkfifo(tmp_path / "fifo.svg")
    status, out, err = run_plot(capsys, results_file(tmp_path), "-o", tmp_path / output)
    assert status == 2
    assert out == ""
    assert fnmatch.fnmatch(err, f"roofline: error: cannot write '{tmp_path / output}': {problem}\n"), err
    assert (tmp_path / "read-only.svg").read_text() == "old"
    assert stat.S_ISFIFO((tmp_path / "fifo.svg").stat().st_mode)


BAD_DEVICE = {**DEVICE, "bandwidth": 0}


@needs_matplotlib
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"devices": "cpu"}, "'devices' must be a list of objects; got a string"),
        ({"devices": ["cpu"]}, "device 0 is a string, not an object"),
        ({"devices": [BAD_DEVICE]}, "device 0 (cpu): 'bandwidth' is 0; it must be a positive number"),
        ({"devices": [{**DEVICE, "bandwidth": "fast"}]},
         "device 0 (cpu): 'bandwidth' is 'fast'; it must be a positive number"),
        ({"devices": [{**DEVICE, "bandwidth": 10**400}]},  # too large for a float: no OverflowError
         "device 0 (cpu): 'bandwidth' is 1.00e+400; it must be a positive number"),
        ({"devices": [{**DEVICE, "peaks": [{"flops": -(10**400)}]}]},
         "device 0 (cpu): a peak's 'flops' is -1.00e+400; it must be a number, 0 or more"),
        ({"devices": [{**DEVICE, "peaks": None}]},
         "device 0 (cpu): 'peaks' is None; it must be a list of objects"),
        ({"devices": [{k: v for k, v in DEVICE.items() if k != "key"}]}, "device 0: no 'key' field"),
    ],
)  # fmt: skip
def test_roofline_plot_refuses_a_malformed_device_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], message: str
) -> None:
    results = results_file(tmp_path, **changes)
    status, out, err = run_plot(capsys, results, "-o", tmp_path / "roofline.svg")
    assert (status, out) == (2, "")
    assert err == f"roofline: error: results {results}: {message}\n"
    assert not (tmp_path / "roofline.svg").exists()


@needs_matplotlib
@pytest.mark.parametrize("field", ["attained", "floor_s", "precision", "unit", "flops"])
def test_roofline_plot_of_a_record_missing_a_field_is_one_line_or_a_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    import json

    results = results_file(tmp_path)
    data = json.loads(results.read_text())
    for m in data["measurements"]:
        m.pop(field, None)
    results.write_text(json.dumps(data))
    status, _, err = run_plot(capsys, results, "-o", tmp_path / "roofline.svg")
    assert "Traceback" not in err
    assert len(err.splitlines()) <= len(RECORDS), err  # an error, or a note per measurement not drawn
    if field == "attained":  # what a comparison needs: the file is no report
        assert (status, err) == (2, f"roofline: error: results {results}: measurement 0 "
                                    f"(tests/t.py::test_gemm): no 'attained' field\n")  # fmt: skip
    else:
        assert status == 0, err
        assert (tmp_path / "roofline.svg").is_file()


@needs_matplotlib
def test_roofline_plot_leaves_out_a_measurement_it_cannot_draw_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    results = results_file(tmp_path)
    data = json.loads(results.read_text())
    data["measurements"][1]["flops"] = math.nan
    data["measurements"][0]["bytes"] = -1
    results.write_text(json.dumps(data))  # NaN, as Python's json writes it
    out = tmp_path / "roofline.svg"
    status, stdout, err = run_plot(capsys, results, "-o", out)
    assert status == 0, err
    assert err.splitlines() == [
        f"roofline: warning: results {results}: measurement 0 (tests/t.py::test_gemm): 'bytes' is -1;"
        " it must be a positive number: not drawn",
        f"roofline: warning: results {results}: measurement 1 (tests/t.py::test_axpy): 'flops' is nan;"
        " it must be a number, 0 or more: not drawn",
    ]
    assert stdout == f"roofline: wrote {out}\n"
    svg = out.read_text()
    assert "test_gemm" not in svg
    assert "2 measurement(s) could not be drawn" in svg


@needs_matplotlib
def test_a_plot_gets_the_umasks_mode_and_keeps_an_existing_ones(
    tmp_path: Path, umask: Callable[[int], None]
) -> None:
    umask(0o022)
    new = draw(RECORDS, [DEVICE], tmp_path / "new.svg")
    assert stat.S_IMODE(new.stat().st_mode) == 0o644  # as the JSON beside it, not mkstemp's 0600
    old = tmp_path / "old.png"
    old.write_text("old")
    old.chmod(0o640)
    umask(0o077)
    draw(RECORDS, [DEVICE], old)
    assert stat.S_IMODE(old.stat().st_mode) == 0o640
    assert old.read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.svg", "old.png"]
