"""One decode step of a whole (small) model, gated at a fraction of its speed of light.

``op="llm"`` reads the model's config.json and floors the step as the sum of its kernels' floors
(`roofline llm example_project/tiny_decoder.json --device cpu --context 512` prints them one by one;
tests/test_decoder_ops.py times each of them alone). One case per decoder of
``budgets.DECODER_VARIANTS`` the run measures (``--decoder-variants``): the config and the batch
come from parametrize. The weights are random, made here; the KV cache holds ``DECODER_CONTEXT``
tokens before the step's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from budgets import BUDGETS, DECODER_CONTEXT, decoder_variants
from kernels import numpy_decoder

from pytest_roofline import Roofline

HERE = Path(__file__).resolve().parents[1]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The config (a path) and the batch of each decoder variant the run measures."""
    if "config" in metafunc.fixturenames:
        variants = decoder_variants(metafunc.config)
        cases = [pytest.param(str(HERE / config), batch, id=name) for name, config, batch in variants]
        metafunc.parametrize(("config", "batch"), cases)


@pytest.mark.speed_of_light("llm", phase="decode", context=DECODER_CONTEXT, dtype="fp32")
def test_decode_step(roofline: Roofline, rng: np.random.Generator, config: str, batch: int) -> None:
    fields = json.loads(Path(config).read_text())
    model = numpy_decoder.random_decoder(fields, rng)
    cache = numpy_decoder.empty_cache(model, batch, DECODER_CONTEXT + 1)
    for k_cache, v_cache in zip(*cache, strict=True):  # the context already cached
        k_cache[:, :, :DECODER_CONTEXT] = rng.standard_normal(k_cache[:, :, :DECODER_CONTEXT].shape)
        v_cache[:, :, :DECODER_CONTEXT] = rng.standard_normal(v_cache[:, :, :DECODER_CONTEXT].shape)
    tokens = rng.integers(0, fields["vocab_size"], batch)

    logits = numpy_decoder.decode_step(model, cache, tokens, DECODER_CONTEXT)
    assert (logits.shape, logits.dtype) == ((batch, fields["vocab_size"]), np.float32)  # fp32 throughout
    wide = numpy_decoder.cast(model, np.float64)
    wide_cache = ([k.astype(np.float64) for k in cache[0]], [v.astype(np.float64) for v in cache[1]])
    expected = numpy_decoder.decode_step(wide, wide_cache, tokens, DECODER_CONTEXT)
    np.testing.assert_allclose(logits, expected, rtol=1e-3, atol=1e-3)

    # the step writes this token's K and V at the same slot each call: safe to run again
    roofline(numpy_decoder.decode_step, model, cache, tokens, DECODER_CONTEXT, device="cpu",
             min_fraction=BUDGETS["decoder"]["numpy"])  # fmt: skip
