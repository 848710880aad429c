"""``op="llm"`` in a marked test: the config found beside the test file (then the rootdir), and what
the run reports."""

from __future__ import annotations

import json

import pytest
from llm_configs import LLAMA

# -- op="llm" in a test --------------------------------------------------------------------------


def test_a_marked_test_gets_the_step_floor(pytester: pytest.Pytester) -> None:
    pytester.makefile(".json", config=json.dumps(LLAMA))
    pytester.makepyfile(
        """
        import pytest

        def test_step(roofline):
            e = roofline.estimate("llm", config="config.json", phase="decode", batch=2, context=64,
                                  dtype="bf16", kv_dtype="fp8", device="h100-sxm")
            assert e.op == "llm"
            assert e.label == "llm[config=config.json batch=2 context=64 kv_dtype=fp8_e4m3 bf16]"
            assert 4e-3 < e.floor_s < 6e-3

        @pytest.mark.speed_of_light("llm", config="missing.json", dtype="bf16")
        def test_missing():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*llm: missing.json: no such config file*"])


def test_the_marker_takes_the_new_keywords(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speed_of_light("attention", batch=8, heads=32, kv_heads=8, seq_q=1, seq_k=4096,
                                    head_dim=128, causal=True, kv_dtype="fp8", dtype="bf16")
        def test_decode_attention(roofline):
            e = roofline.estimate(device="h100-sxm")
            assert e.bytes == 8 * (2 * 32 * 128 * 2 + 2 * 8 * 4096 * 128)

        @pytest.mark.speed_of_light("gemm", M=16, N=4096, K=4096, dtype="bf16", b_dtype="int4",
                                    group_size=128)
        def test_w4a16(roofline):
            assert roofline.estimate(device="h100-sxm").bytes == 8_912_896

        @pytest.mark.speed_of_light("fused_moe", tokens=16, experts=8, top_k=2, hidden=4096,
                                    intermediate=14336, dtype="bf16")
        def test_moe(roofline):
            assert roofline.estimate(device="h100-sxm").op == "moe"

        @pytest.mark.speed_of_light("attention", batch=1, heads=32, kv_heads=5, seq_q=1, seq_k=8,
                                    head_dim=128, dtype="bf16")
        def test_bad_kv_heads():
            pass

        @pytest.mark.speed_of_light("attention", batch=1, heads=32, seq_q=1, seq_k=8, head_dim=128,
                                    dtype="bf16", pass_="backward")
        def test_bad_pass():
            pass
        """
    )
    quiet = "ignore::pytest_roofline.errors.RooflineWarning"  # estimates alone measure nothing
    result = pytester.runpytest("-p", "no:cacheprovider", "-W", quiet)
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*attention: kv_heads=5 does not divide heads=32*",
            "*attention: pass must be one of 'fwd', 'bwd', 'fwd+bwd'; got 'backward'*",
        ]
    )


def test_a_config_is_found_beside_the_test_then_in_rootdir_wherever_pytest_starts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\n")
    tests = pytester.mkdir("tests")
    (tests / "beside.json").write_text(json.dumps(LLAMA))
    (pytester.path / "at_root.json").write_text(json.dumps({**LLAMA, "num_hidden_layers": 16}))
    (tests / "test_step.py").write_text(
        """
import pathlib
import pytest

@pytest.mark.speed_of_light("llm", config="beside.json", dtype="bf16")
def test_beside(roofline):
    beside = pathlib.Path(__file__).parent / "beside.json"
    assert roofline.estimate(device="h100-sxm").params["config"] == str(beside)

def test_at_root(roofline):
    e = roofline.estimate("llm", config="at_root.json", dtype="bf16", device="h100-sxm")
    assert e.label == "llm[config=at_root.json bf16]"

def test_a_path_object(roofline):
    assert roofline.estimate("llm", config=pathlib.Path("beside.json"), dtype="bf16", device="h100-sxm")

@pytest.mark.speed_of_light("llm", config="nowhere.json", dtype="bf16")
def test_nowhere():
    pass
"""
    )
    monkeypatch.chdir(tests.parent.parent)  # started from elsewhere: the configs are not in the cwd
    quiet = "ignore::pytest_roofline.errors.RooflineWarning"  # estimates alone measure nothing
    result = pytester.runpytest(
        str(tests), "-p", "no:cacheprovider", "-W", quiet, f"--rootdir={pytester.path}"
    )
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*llm: nowhere.json: no such config file; looked in the test's folder"
            f" {tests} and rootdir {pytester.path}*"
        ]
    )
