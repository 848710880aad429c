"""``roofline llm`` from end to end: the table, the JSON, the plot and the errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from llm_configs import LLAMA

from pytest_roofline import cli

# -- roofline llm ------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["llm", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    code, out, err = run(capsys, str(path), "--device", "h100-sxm", "--context", "4096")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"{tmp_path.name} (llama")  # a config.json is named by its directory
    words = " ".join(out.split())  # the heading wraps at 100 columns
    assert "(llama, 32 layers) on NVIDIA H100 80GB HBM3 (h100-sxm): decode, batch 1, context 4096" in words
    for module in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "attention", "rotary_emb", "lm_head"):
        assert any(line.startswith(module + " ") for line in lines), module
    assert "step floor  4644 µs  (the sum of the ops' floors; 17.2 GFLOP, 15.6 GB)" in out
    assert "decode      at most 215 tokens/s (1 per step)" in out
    assert "bounded by  gate_up_proj (memory-bound, 48.3% of the step)" in out


def test_prefill_prints_time_to_first_token(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "qwen2-7b", "--device", "h100-sxm", "--phase", "prefill", "--prompt", "512")
    assert code == 0
    assert "prefill     time to first token at least" in out
    assert "(compute-bound" in out


def test_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "mixtral-8x7b", "--device", "h100-sxm", "--batch", "8", "--tp", "2", "--json"
    )
    assert (code, err) == (0, "")
    data = json.loads(out)
    for op in data["ops"]:
        assert {"name", "op", "count", "flops", "bytes", "floor_s", "bound"} <= set(op)
    assert {op["name"] for op in data["ops"]} >= {"experts", "router", "all_reduce", "lm_head"}
    assert set(data["total"]) == {"flops", "bytes", "floor_s"}
    assert data["total"]["floor_s"] == pytest.approx(sum(op["floor_s"] * op["count"] for op in data["ops"]))
    assert data["tokens_per_s"] == pytest.approx(8 / data["total"]["floor_s"])
    assert data["bounding_op"]["name"] == "experts"
    assert data["link"]["bandwidth"] == 450e9
    assert data["schema"] == "roofline-llm/1"


def test_json_always_has_its_schema_and_link(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "llama-3-8b", "--device", "l4", "--json")
    data = json.loads(out)
    assert (data["schema"], data["link"]) == ("roofline-llm/1", None)
    _, out, _ = run(capsys, "llama-3-8b", "--device", "h100-sxm", "--json")
    assert json.loads(out)["link"]["bandwidth"] == 450e9  # tp 1 crosses no link, but the GPU has one


def test_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "step.svg"
    code, printed, err = run(capsys, "llama-3-8b", "--device", "h100-sxm", "--plot", str(out))
    assert (code, err) == (0, "")
    assert printed.splitlines()[-1] == f"roofline: wrote {out}"
    svg = out.read_text()
    assert "gate_up_proj" in svg
    assert "llama-3-8b: one decode step at its floor (not shown, no FLOPs: embed_tokens, kv_cache_write)" in (
        svg
    )


def test_ops_at_one_spot_on_the_plot_share_one_label(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    out = tmp_path / "step.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # each label one <text> element
        code, _, err = run(
            capsys, "mixtral-8x7b", "--device", "h100-sxm", "--batch", "64", "--plot", str(out)
        )
    assert (code, err) == (0, "")
    texts = [text.strip() for text in re.findall(r">([^<>]+)</text>", out.read_text()) if text.strip()]
    # the three GEMMs of one intensity and the three norms of one shape: one label each, not three
    # printed over each other
    assert "qkv_proj, o_proj, lm_head" in texts
    assert "input_layernorm, post_attention_layernorm, norm" in texts
    assert {"qkv_proj", "o_proj", "lm_head", "norm"}.isdisjoint(texts)
    assert {"experts", "router", "rotary_emb", "attention"} <= set(texts)  # the others, one each


def test_json_with_plot_keeps_stdout_for_the_json_and_roofline_plot_reads_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    drawn, step = tmp_path / "step.svg", tmp_path / "step.json"
    code, out, err = run(capsys, "llama-3-8b", "--device", "h100-sxm", "--json", "--plot", str(drawn))
    assert (code, err) == (0, f"roofline: wrote {drawn}\n")
    step.write_text(out)
    replot = tmp_path / "again.svg"
    assert cli.main(["plot", str(step), "-o", str(replot)]) == 0
    assert capsys.readouterr().out == f"roofline: wrote {replot}\n"
    assert "gate_up_proj" in replot.read_text()
    data = json.loads(out)
    data["ops"][0]["flops"] = "none"
    step.write_text(json.dumps(data))
    assert cli.main(["plot", str(step), "-o", str(replot)]) == 2
    assert "ops[0].flops must be a number, 0 or more; got 'none'" in capsys.readouterr().err


def test_a_slow_step_says_how_slow(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({**LLAMA, "num_hidden_layers": 2**20}))
    _, out, _ = run(capsys, str(path), "--device", "h100-sxm")
    assert "decode      at most 0.00" in out  # a rate, not "at most 0 tokens/s"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope.json"], "roofline: error: nope.json: no such config file"),
        (["llama-3-8b", "--context", str(10**10)], "roofline: error: context must be at most 16,777,216"),
        (["llama-3-8b", "--phase", "prefill"], "roofline: error: prefill needs prompt"),
        (
            ["llama-3-8b", "--tp", "2", "--device", "l4"],
            "roofline: error: --tp 2: no interconnect figure for l4",
        ),
        (["llama-3-8b", "--batch", "0"], "roofline: error: argument --batch: must be at least 1; got 0"),
        (
            ["llama-3-8b", "--context", "x"],
            "roofline: error: argument --context: expected an integer; got 'x'",
        ),
        (["llama-3-8b", "--kv-dtype", "fp9"], "roofline: error: kv_dtype: unknown dtype 'fp9'"),
        (
            ["llama-3-8b", "--plot", "out.txt"],
            "roofline: error: out.txt: the plot is written as .svg or .png",
        ),
        (["llama-3-8b", "--device", "h100"], "roofline: error: "),
    ],
)
def test_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv, *(["--device", "h100-sxm"] if "--device" not in argv else []))
    assert (code, out) == (2, "")
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_a_malformed_config_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama"')
    code, _, err = run(capsys, str(path), "--device", "h100-sxm")
    assert code == 2
    assert err.startswith(f"roofline: error: {path}: not JSON")


@pytest.mark.parametrize("config", ["llama-3-8b", "mixtral-8x7b", "qwen2-7b"])
def test_the_table_fits_100_columns_and_says_what_it_left_out(
    capsys: pytest.CaptureFixture[str], config: str
) -> None:
    code, out, _ = run(capsys, config, "--device", "h100-sxm", "--batch", "8", "--tp", "2")
    assert code == 0
    assert max(map(len, out.splitlines())) <= 100
    words = " ".join(out.split())
    assert (
        "4 of 10 columns left out to fit 100 characters: FLOPs, bytes, FLOP/B, floor; --wide shows them"
        in words
    )
    header = next(line for line in out.splitlines() if line.startswith("module "))
    assert header.split() == ["module", "kernel", "count", "bound", "×", "count", "share"]


def test_wide_shows_every_column_each_kernel_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "llama-3-8b", "--device", "h100-sxm", "--wide")
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("module "))
    assert header.split()[3:6] == ["FLOPs", "bytes", "FLOP/B"]
    assert "left out" not in out
    assert any("attention[batch=1 heads=32 seq_q=1 seq_k=1 head_dim=128 causal=True kv_heads=8 bf16]" in line
               for line in out.splitlines())  # fmt: skip
