"""``roofline floor`` with integer, bool and complex dtypes: where a compute side is unknown it says so,
and a mistaken dtype is one line."""

import json

import pytest

from pytest_roofline import cli
from pytest_roofline.model.core import Precision

# -- the command line ----------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_floor_of_integer_work_says_the_compute_side_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "floor", "elementwise", "n=16777216", "dtype=int32", "--device", "h100-sxm")
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        "  FLOPs      16.8 MFLOP",
        "  bytes      134 MB",
        "  intensity  0.125 FLOP/byte",
        "  ridge      unknown: h100-sxm has no int32 peak",
        "  compute    unknown (give the peak as 'int32:vector' in --roofline-peaks FILE)",
        "  memory     40.1 µs",
        "  floor      40.1 µs  memory-bound (compute side unknown)",
    ]
    code, out, err = run(
        capsys, "floor", "elementwise", "n=1024", "dtype=uint8", "--device", "h100-sxm", "--json"
    )
    data = json.loads(out)
    assert (data["compute_s"], data["peak_flops"], data["ridge"], data["peak_source"], data["bound"]) == (
        None, None, None, None, "memory",
    )  # fmt: skip


def test_floor_of_a_complex_gemm_and_an_fft(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "floor", "gemm", "M=4096", "N=4096", "K=4096", "dtype=complex64", "--device", "h100-sxm"
    )
    assert code == 0
    assert "  FLOPs      550 GFLOP" in out
    assert "= 66.9 TFLOP/s fp32 vector (datasheet)" in out
    code, out, _ = run(capsys, "floor", "fft", "n=1048576", "batch=8", "dtype=c8", "--device", "h100-sxm")
    assert code == 0
    assert out.startswith("fft[n=1048576 batch=8 complex64] on NVIDIA H100 80GB HBM3 (h100-sxm)")


def test_ops_lists_fft_the_complex_factors_and_the_dtypes(capsys: pytest.CaptureFixture[str]) -> None:
    _, text, _ = run(capsys, "ops")
    out = " ".join(text.split())  # an op's lines as one text: a formula may wrap
    assert "[tensor; complex: ×4] FLOPs: 2·batch·M·N·K bytes (× size of dtype): batch·" in out
    assert "reduction(n, outputs=1) [vector; complex: ×2] FLOPs: n bytes (× size of dtype): n + out" in out
    assert "softmax(rows, cols) [vector; complex: no] FLOPs: 5·rows·cols bytes (× size of dtype):" in out
    assert "fft(n, batch=1) [vector; complex: ×1 (only)] FLOPs: 5·batch·n·log2(n) bytes" in out
    assert "a complex multiply-add is 8 real FLOPs" in out
    assert "compute side unknown" in out
    assert ", ".join(p.label for p in Precision) in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["floor", "copy", "n=8", "dtype=int46"], "unknown dtype 'int46' (did you mean 'int64'?)"),
     (["floor", "copy", "n=8", "dtype=<U5"], "dtype '<U5' is not numeric (strings)"),
     (["floor", "copy", "n=8", "dtype=i8"], "dtype 'i8' is ambiguous"),
     (["floor", "fft", "n=8", "dtype=fp32"], "fft takes complex data only"),
     (["floor", "softmax", "rows=8", "cols=8", "dtype=complex64"], "softmax takes no complex data"),
     (["floor", "custom", "flops=8", "dtype=int32"], "custom[flops=8 int32] has no floor on h100-sxm: it")],
)  # fmt: skip
def test_bad_dtypes_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv, "--device", "h100-sxm")
    assert (code, out) == (2, "")
    assert err.startswith(f"roofline: error: {message}")
    assert len(err.splitlines()) == 1
