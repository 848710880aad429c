"""``roofline llm --from REPORT.json``: a step predicted from a suite's measurements of its ops, its
table, its JSON, its plot, ``--budget-ms``, and each bad input as one line. The reports are written
by hand; each expected figure is worked out here from the step's floors (``--json``'s, not under test)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline import cli
from pytest_roofline.model import units
from pytest_roofline.model.estimate import estimate
from pytest_roofline.output.wrapping import TEXT_WIDTH

H100 = "NVIDIA H100 80GB HBM3"
QKV = {"M": 1, "N": 6144, "K": 4096}  # llama-3-8b's qkv_proj at batch 1
NORM = {"rows": 1, "cols": 4096}  # its three add_rmsnorms


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["llm", "llama-3-8b", "--device", "h100-sxm", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def step(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, _ = run(capsys, "--json", *argv)
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    return data


def record(
    nodeid: str, op: str, attained: float, ci: float = 0.1, *, device: str = "h100-sxm", **params: Any
) -> dict[str, Any]:
    """A measured record of ``op`` at ``params`` in bf16, as a --roofline-json report holds it."""
    est = estimate(op, dtype="bf16", device=device, **params)
    return {
        "nodeid": nodeid, "name": "", "op": op, "params": dict(est.params), "dtype": "bf16",
        "flops": est.flops, "bytes": est.bytes, "floor_s": est.floor_s, "time_s": est.floor_s / attained,
        "attained": attained, "attained_ci_rel": ci, "verdict": "pass", "device": device,
        "device_name": est.device.name, "memory_level": "dram",
    }  # fmt: skip


def report(tmp_path: Path, *records: dict[str, Any], name: str = "report.json") -> str:
    path = tmp_path / name
    path.write_text(
        json.dumps({"schema": 2, "environment": {}, "devices": [], "measurements": list(records)})
    )
    return str(path)


def exact_report(tmp_path: Path) -> str:
    """qkv_proj's GEMM at 0.8 (±25%) and the norms at 0.3 (±10%): every GEMM of the step is matched to
    the one GEMM, every norm exactly; the rest assumed."""
    return report(
        tmp_path,
        record("tests/test_ops.py::test_gemm[qkv]", "gemm", 0.8, 0.25, **QKV),
        record("tests/test_ops.py::test_add_rmsnorm", "add_rmsnorm", 0.3, 0.1, **NORM),
    )


#: (fraction, low, high) by op for :func:`exact_report`, and 0.5 (the default) for the rest
EXACT = {"gemm": (0.8, 0.8 / 1.25, 0.8 * 1.25), "add_rmsnorm": (0.3, 0.3 / 1.1, 0.3 * 1.1)}


def expected(
    ops: list[dict[str, Any]], fractions: dict[str, tuple[float, float, float]], assume: float = 0.5
) -> tuple[float, float, float, float]:
    """The step's predicted time, its low and high ends, and the share measured, by hand: each op's
    floor times its count over its fraction (its high fraction for the low end, and the other way)."""
    total = lo = hi = measured = 0.0
    for op in ops:
        floor = op["floor_s"] * op["count"]
        fraction, low, high = fractions.get(op["op"], (assume, assume, assume))
        total += floor / fraction
        lo += floor / high
        hi += floor / low
        measured += floor / fraction if op["op"] in fractions else 0.0
    return total, lo, hi, measured / total


# -- the prediction --------------------------------------------------------------------------------


def test_json_matches_each_op_and_sums_the_step(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = exact_report(tmp_path)
    data = step(capsys, "--from", path)
    ops = {op["name"]: op for op in data["ops"]}
    qkv = ops["qkv_proj"]
    assert qkv["match"] == {
        "nodeids": ["tests/test_ops.py::test_gemm[qkv]"], "how": "exact", "fraction": 0.8,
        "fraction_lo": 0.8 / 1.25, "fraction_hi": 0.8 * 1.25,
        "predicted_s": pytest.approx(qkv["floor_s"] * 32 / 0.8),
        "predicted_lo_s": pytest.approx(qkv["floor_s"] * 32 / 1.0),
        "predicted_hi_s": pytest.approx(qkv["floor_s"] * 32 / 0.64),
    }  # fmt: skip
    assert ops["input_layernorm"]["match"]["how"] == "exact"
    assert ops["norm"]["match"]["nodeids"] == ["tests/test_ops.py::test_add_rmsnorm"]
    for name in ("o_proj", "gate_up_proj", "down_proj", "lm_head"):  # one GEMM measured: the nearest
        assert (ops[name]["match"]["how"], ops[name]["match"]["fraction"]) == ("nearest", 0.8)
    for name in ("embed_tokens", "rotary_emb", "kv_cache_write", "attention", "act_fn"):
        match = ops[name]["match"]
        assert (match["how"], match["nodeids"], match["fraction"], match["fraction_lo"]) == (
            "assumed",
            [],
            0.5,
            0.5,
        )
        assert match["predicted_s"] == pytest.approx(ops[name]["floor_s"] * ops[name]["count"] * 2)
    total, lo, hi, share = expected(data["ops"], EXACT)
    assert data["total"]["predicted_s"] == pytest.approx(total)
    assert (data["total"]["predicted_lo_s"], data["total"]["predicted_hi_s"]) == (
        pytest.approx(lo),
        pytest.approx(hi),
    )
    assert data["total"]["measured_share"] == pytest.approx(share)
    assert 0.9 < share < 1  # the GEMMs are nearly all of it
    assert data["predicted_tokens_per_s"] == pytest.approx(1 / total)
    assert (data["predicted_tokens_per_s_lo"], data["predicted_tokens_per_s_hi"]) == (
        pytest.approx(1 / hi),
        pytest.approx(1 / lo),
    )
    assert (data["from"], data["assume_fraction"]) == ([path], 0.5)
    assert data["total"]["floor_s"] == pytest.approx(sum(op["step_floor_s"] for op in data["ops"]))


def test_a_test_timed_while_the_machine_ran_slow_predicts_the_step_at_its_calibrated_speed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The probe beside the GEMM saw half the calibrated bandwidth and its time is twice as long: the
    step is predicted as from the GEMM timed at full speed (a shared machine's drift between the op
    tests and the step is not the prediction's error)."""
    gemm = record("tests/test_ops.py::test_gemm[qkv]", "gemm", 0.8, 0.25, **QKV)
    norm = record("tests/test_ops.py::test_add_rmsnorm", "add_rmsnorm", 0.3, 0.1, **NORM)
    bandwidth = 3.35e12
    slowed = {
        **gemm, "time_s": 2 * gemm["time_s"], "ceiling": {
            "resource": "bandwidth", "value": bandwidth / 2, "calibrated": bandwidth, "speed": 0.5,
            "share_of_best": 0.5, "ci_rel": 0.01, "probe": "copy", "probe_rates": [bandwidth / 2],
            "probe_wall_s": 0.01,
        },
    }  # fmt: skip
    at_speed = step(capsys, "--from", report(tmp_path, gemm, norm, name="at_speed.json"))
    at_half = step(capsys, "--from", report(tmp_path, slowed, norm, name="at_half.json"))
    assert at_half["total"]["predicted_s"] == pytest.approx(at_speed["total"]["predicted_s"])
    ops = {op["name"]: op for op in at_half["ops"]}
    assert ops["qkv_proj"]["match"]["fraction"] == pytest.approx(0.8)


def step_record(nodeid: str, time_s: float, **params: Any) -> dict[str, Any]:
    """A whole decode step measured by a test (``op="llm"``), as a --roofline-json report holds it."""
    given = {"config": "llama-3-8b", "phase": "decode", "batch": 1, "context": 0, "tp": 1, **params}
    return {
        "nodeid": nodeid, "name": "", "op": "llm", "params": given, "dtype": "bf16", "flops": 1.0,
        "bytes": 1.0, "floor_s": time_s / 2, "time_s": time_s, "attained": 0.5, "attained_ci_rel": 0.05,
        "verdict": "pass", "device": "h100-sxm", "device_name": H100, "memory_level": "dram",
    }  # fmt: skip


def test_the_step_the_reports_measured_is_printed_beside_the_prediction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gemm = record("t.py::test_gemm[qkv]", "gemm", 0.8, 0.25, **QKV)
    norm = record("t.py::test_add_rmsnorm", "add_rmsnorm", 0.3, 0.1, **NORM)
    ops_only = step(capsys, "--from", report(tmp_path, gemm, norm, name="ops.json"))
    context, predicted = ops_only["context"], ops_only["total"]["predicted_s"]
    measured = step_record("t.py::test_step", predicted / 0.8, context=context)
    other = step_record("t.py::test_step[b8]", predicted, context=context, batch=8)  # another step
    path = report(tmp_path, gemm, norm, measured, other)
    total = step(capsys, "--from", path)["total"]
    assert total["predicted_s"] == pytest.approx(predicted)  # a step's own record predicts no op
    assert (total["measured_step_s"], total["measured_step_by"]) == (predicted / 0.8, ["t.py::test_step"])
    assert total["predicted_over_measured"] == pytest.approx(0.8)
    _, out, _ = run(capsys, "--from", path)
    at = "at the calibrated speed (t.py::test_step); predicted / measured 0.800"
    assert f"measured step   {units.seconds(predicted / 0.8)} {at}" in out
    # no step of this batch, this dtype, these weights measured: no line, no figure
    for other_step in (["--batch", "4"], ["--dtype", "fp16"], ["--weight-dtype", "int4"]):
        total = step(capsys, "--from", path, *other_step)["total"]
        assert "measured_step_s" not in total
    # the step timed while the machine ran at half speed, and under load: scaled, and said
    shipped = Path(cli.__file__).parent / "configs" / "llama-3-8b.json"  # the same config, as a path
    slowed = {
        **step_record("t.py::test_step", 2 * predicted / 0.8, context=context, config=str(shipped)),
        "ceiling": {"resource": "bandwidth", "value": 1.0, "calibrated": 2.0, "speed": 0.5},
        "contention": {"level": "heavy"},
    }
    code, out, err = run(capsys, "--from", report(tmp_path, gemm, norm, slowed, name="slowed.json"))
    assert code == 0
    assert f"measured step   {units.seconds(predicted / 0.8)} {at}" in out
    assert "measurement(s) of the step itself could have been slowed" in err
    assert err.endswith("for a core): t.py::test_step\n")


def test_a_measurement_taken_under_load_is_named_where_the_prediction_uses_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gemm = {**record("t.py::test_gemm", "gemm", 0.8, **QKV), "contention": {"level": "heavy"}}
    waited = {**record("t.py::test_norm", "add_rmsnorm", 0.3, **NORM), "thread_wait_share": 0.4}
    unused = {**record("t.py::test_copy", "copy", 0.9, n=1000), "contention": {"level": "heavy"}}
    code, _, err = run(capsys, "--from", report(tmp_path, gemm, waited, unused))
    assert code == 0
    assert err == (
        "roofline: warning: --from: 2 measurement(s) the prediction uses could have been slowed by the"
        " machine's load (an inconclusive verdict, busy or heavy contention, or threads that waited for a"
        " core): t.py::test_gemm, t.py::test_norm\n"
    )
    _, _, err = run(capsys, "--from", report(tmp_path, record("t.py::test_gemm", "gemm", 0.8, **QKV), unused))
    assert err == ""  # a quiet one, and a loaded one no op of the step matched


def test_the_table_says_how_each_op_was_matched(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = exact_report(tmp_path)
    total, lo, hi, share = expected(step(capsys, "--from", path)["ops"], EXACT)
    assert 0.999 < share < 1
    code, out, err = run(capsys, "--from", path)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    at = next(at for at, line in enumerate(lines) if line.startswith("module "))
    header = lines[at].split()
    assert header[:3] == ["module", "kernel", "count"]
    assert "measured by" in lines[at]
    assert "FLOPs" not in header  # FLOPs and bytes make way (--json has them)
    row = {line.split()[0]: line for line in lines[at + 2 :] if line and not line.startswith(" ")}
    assert re.search(r"exact test_gemm\[qkv\]\s+0\.8\s", row["qkv_proj"])
    assert re.search(r"nearest test_gemm\[qkv\]\s+0\.8\s", row["lm_head"])
    assert re.search(r"exact test_add_rmsnorm\s+0\.3\s", row["norm"])
    assert re.search(r"\sassumed\s+0\.5\s", row["rotary_emb"])
    assert (
        f"predicted step  {units.seconds(total)} (95% {units.seconds(lo)}..{units.seconds(hi)}); "
        "measured ops are over 99.9% of it"  # 5 tiny ops assumed: not all of it, so not "100.0%"
    ) in lines
    assert f"                {1 / total:,.0f} tokens/s (95% {1 / hi:,.0f}..{1 / lo:,.0f})" in lines
    assert "assumed         5 of 13 ops at 0.5 of their floor (no measurement of their kind)" in lines
    assert max(map(len, lines)) <= TEXT_WIDTH  # the kernels wrap to the room the match leaves


def test_two_measurements_either_side_interpolate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    small = record("t.py::test_gemm[n2048]", "gemm", 0.5, 0.1, M=1, N=2048, K=4096)
    large = record("t.py::test_gemm[n8192]", "gemm", 0.9, 0.2, M=1, N=8192, K=4096)
    path = report(tmp_path, small, large)
    ops = {op["name"]: op for op in step(capsys, "--from", path)["ops"]}
    for name in ("qkv_proj", "o_proj"):  # 6144 and 4096 columns: between the two
        t = math.log(ops[name]["bytes"] / small["bytes"]) / math.log(large["bytes"] / small["bytes"])
        match = ops[name]["match"]
        assert (match["how"], match["nodeids"]) == (
            "interpolated",
            ["t.py::test_gemm[n2048]", "t.py::test_gemm[n8192]"],
        )
        assert match["fraction"] == pytest.approx(0.5 + 0.4 * t)
        assert match["fraction_lo"] == pytest.approx(0.5 / 1.1 + (0.9 / 1.2 - 0.5 / 1.1) * t)
        assert match["fraction_hi"] == pytest.approx(0.5 * 1.1 + (0.9 * 1.2 - 0.5 * 1.1) * t)
        assert match["predicted_s"] == pytest.approx(ops[name]["floor_s"] * 32 / (0.5 + 0.4 * t))
    assert 0.2 < t < 0.8
    for name in ("gate_up_proj", "down_proj", "lm_head"):  # past the larger one
        assert (ops[name]["match"]["how"], ops[name]["match"]["nodeids"]) == (
            "nearest",
            ["t.py::test_gemm[n8192]"],
        )
    _, out, _ = run(capsys, "--from", path)
    assert "interp. test_gemm[n2048..n8192]" in out


def test_reports_add_up_and_another_devices_is_used_when_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gemm = report(tmp_path, record("t.py::test_gemm", "gemm", 0.8, **QKV), name="gemm.json")
    norm = report(tmp_path, record("t.py::test_norm", "add_rmsnorm", 0.3, **NORM), name="norm.json")
    ops = {op["name"]: op for op in step(capsys, "--from", gemm, "--from", norm)["ops"]}
    assert (ops["qkv_proj"]["match"]["nodeids"], ops["norm"]["match"]["nodeids"]) == (
        ["t.py::test_gemm"],
        ["t.py::test_norm"],
    )
    # measured on an H100, predicted for an H200: refused, then used as asked
    code, out, err = run(capsys, "--from", gemm, "--device", "h200")
    assert (code, out) == (2, "")
    assert err == (
        f"roofline: error: --from {gemm}: measured on {H100}, not on NVIDIA H200 (h200); --across-devices"
        " uses it anyway\n"
    )
    data = step(capsys, "--from", gemm, "--device", "h200", "--across-devices")
    qkv = next(op for op in data["ops"] if op["name"] == "qkv_proj")
    assert (qkv["match"]["how"], qkv["match"]["fraction"]) == ("exact", 0.8)
    assert qkv["match"]["predicted_s"] == pytest.approx(qkv["floor_s"] * 32 / 0.8)  # the H200's floor
    assert data["device"] == "h200"


def test_a_report_with_no_op_of_the_step_assumes_every_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = report(tmp_path, record("t.py::test_copy", "copy", 0.9, n=1000))
    code, out, err = run(capsys, "--from", path, "--assume-fraction", "0.25")
    assert code == 0
    assert err == (
        "roofline: warning: --from: no measurement of this step's ops (1 measurement(s) read); every op is "
        "assumed at 0.25 of its floor\n"
    )
    data = step(capsys, "--from", path, "--assume-fraction", "0.25")
    floor = data["total"]["floor_s"]
    assert (data["total"]["predicted_s"], data["total"]["predicted_lo_s"]) == (
        pytest.approx(4 * floor),
        pytest.approx(4 * floor),
    )
    assert data["total"]["measured_share"] == 0
    assert {op["match"]["how"] for op in data["ops"]} == {"assumed"}
    assert "measured ops are 0.0% of it" in out
    assert "assumed         13 of 13 ops at 0.25 of their floor" in out


# -- the budget ------------------------------------------------------------------------------------


def test_over_budget_exits_1_naming_the_largest_op(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = exact_report(tmp_path)
    data = step(capsys, "--from", path)
    total = data["total"]["predicted_s"]
    largest = max(data["ops"], key=lambda op: op["match"]["predicted_s"])
    assert largest["name"] == "gate_up_proj"
    budget_ms = total * 1e3 * 0.9
    code, out, _ = run(capsys, "--from", path, "--budget-ms", str(budget_ms))
    assert code == 1
    assert out.splitlines()[-1] == (
        f"over budget: predicted step {units.seconds(total)} > budget {units.seconds(budget_ms / 1e3)}; the "
        f"largest part is gate_up_proj, {units.seconds(largest['match']['predicted_s'])} "
        f"({units.percent(largest['match']['predicted_s'] / total)} of the step, nearest test_gemm[qkv])"
    )
    code, out, err = run(capsys, "--json", "--from", path, "--budget-ms", str(budget_ms))
    assert code == 1
    assert err.startswith("over budget: predicted step")
    assert (json.loads(out)["over_budget"], json.loads(out)["budget_s"]) == (
        True,
        pytest.approx(budget_ms / 1e3),
    )


def test_within_budget_exits_0(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = exact_report(tmp_path)
    total = step(capsys, "--from", path)["total"]["predicted_s"]
    code, out, _ = run(capsys, "--from", path, "--budget-ms", str(total * 1e3 * 1.01))
    assert code == 0
    assert (
        out.splitlines()[-1]
        == f"within budget: predicted step {units.seconds(total)} <= {units.seconds(total * 1.01)}"
    )


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--budget-ms", "5"],
            "--budget-ms is for a step predicted from measurements: add --from REPORT.json",
        ),
        (["--assume-fraction", "0.3"], "--assume-fraction is for a step predicted from measurements"),
        (["--across-devices"], "--across-devices is for a step predicted from measurements"),
        (
            ["--from", "R", "--assume-fraction", "0"],
            "argument --assume-fraction: must be above 0 and at most 1; got 0",
        ),
        (
            ["--from", "R", "--assume-fraction", "1.5"],
            "argument --assume-fraction: must be above 0 and at most 1; got 1.5",
        ),
        (
            ["--from", "R", "--assume-fraction", "nan"],
            "argument --assume-fraction: must be above 0 and at most 1",
        ),
        (
            ["--from", "R", "--assume-fraction", "half"],
            "argument --assume-fraction: expected a number; got 'half'",
        ),
        (
            ["--from", "R", "--budget-ms", "0"],
            "argument --budget-ms: must be a positive number of milliseconds",
        ),
        (
            ["--from", "R", "--budget-ms", "x"],
            "argument --budget-ms: expected a number of milliseconds; got 'x'",
        ),
        (["--from", "missing.json"], "--from missing.json: no such file"),
        (["--from", "DIR"], "--from DIR: a directory, not a JSON file"),
        (["--from", "TRUNCATED"], "--from TRUNCATED: not JSON"),
        (["--from", "TEXT"], "--from TEXT: not JSON"),
        (["--from", "SCHEMA"], "--from SCHEMA: schema 7 is not the one this version reads (2)"),
        (["--from", "STEP"], "--from STEP: schema 'roofline-llm/1' is not the one this version reads"),
        (["--from", "A100"], f"--from A100: measured on NVIDIA A100-SXM4-80GB, not on {H100} (h100-sxm)"),
    ],
)
def test_bad_input_is_one_line_and_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    files = {
        "R": exact_report(tmp_path),
        "DIR": str(tmp_path),
        "TRUNCATED": exact_report(tmp_path)[:-1],
        "TEXT": str(tmp_path / "text.json"),
        "SCHEMA": str(tmp_path / "schema.json"),
        "STEP": str(tmp_path / "step.json"),
        "A100": report(
            tmp_path, record("t.py::a", "gemm", 0.5, device="a100-sxm-80gb", **QKV), name="a100.json"
        ),
    }
    whole = Path(files["R"]).read_text()
    Path(files["R"] + ".cut").write_text(whole[: len(whole) // 2])
    files["TRUNCATED"] = files["R"] + ".cut"
    Path(files["TEXT"]).write_text("attained: 0.5\n")
    Path(files["SCHEMA"]).write_text(json.dumps({"schema": 7, "measurements": []}))
    Path(files["STEP"]).write_text(json.dumps({"schema": "roofline-llm/1", "ops": []}))
    argv = [files.get(arg, arg) for arg in argv]
    message = re.sub(r"--from (\w+)", lambda m: f"--from {files.get(m[1], m[1])}", message)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"roofline: error: {message}")
    assert err.count("\n") == 1


def test_an_unavailable_device_exits_2_not_the_budgets_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_roofline.machine import public_estimate

    def unavailable(spec: object, *, measure: bool) -> None:
        raise RuntimeError("CuPy is not installed")

    monkeypatch.setattr(public_estimate, "resolve_device", unavailable)
    code, out, err = run(capsys, "--from", exact_report(tmp_path), "--budget-ms", "1")
    assert (code, out, err) == (2, "", "roofline: error: CuPy is not installed\n")


def test_assume_fraction_one_is_the_floor(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = report(tmp_path, record("t.py::test_copy", "copy", 0.9, n=1000))
    data = step(capsys, "--from", path, "--assume-fraction", "1")
    assert data["total"]["predicted_s"] == pytest.approx(data["total"]["floor_s"])


# -- the plot --------------------------------------------------------------------------------------


def test_the_plot_draws_measured_and_assumed_ops_apart(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    path, drawn, saved = exact_report(tmp_path), tmp_path / "step.svg", tmp_path / "step.json"
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        code, out, err = run(capsys, "--from", path, "--json", "--plot", str(drawn))
    assert (code, err) == (0, f"roofline: wrote {drawn}\n")
    texts = {text.strip() for text in re.findall(r">([^<>]+)</text>", drawn.read_text())}
    assert {"measured", "assumed"} <= texts  # the legend: one colour each
    assert any(t.startswith("llama-3-8b: one decode step as predicted from its tests") for t in texts)
    saved.write_text(out)
    replot = tmp_path / "again.svg"
    assert cli.main(["plot", str(saved), "-o", str(replot)]) == 0
    assert capsys.readouterr().out == f"roofline: wrote {replot}\n"
    data = json.loads(out)
    del data["ops"][2]["match"]
    saved.write_text(json.dumps(data))
    assert cli.main(["plot", str(saved), "-o", str(replot)]) == 2
    assert (
        "ops[2].match must hold a positive 'fraction' and 'predicted_s'; got None" in capsys.readouterr().err
    )
