"""One decode step of a whole (small) model, gated at a fraction of its speed of light.

``op="llm"`` reads the model's config.json and floors the step as the sum of its kernels' floors
(`roofline llm example_project/tiny_decoder.json --device cpu --context 512` prints them one by one).
The weights are random, made here; the KV cache holds ``CONTEXT`` tokens before the step's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from budgets import BUDGETS, DECODER_BATCH, DECODER_CONTEXT
from kernels import numpy_decoder

from pytest_roofline import Roofline

CONFIG = Path(__file__).resolve().parents[1] / "tiny_decoder.json"


@pytest.mark.speed_of_light(
    "llm", config=str(CONFIG), phase="decode", batch=DECODER_BATCH, context=DECODER_CONTEXT, dtype="fp32"
)
def test_decode_step(roofline: Roofline, rng: np.random.Generator) -> None:
    config = json.loads(CONFIG.read_text())
    model = numpy_decoder.random_decoder(config, rng)
    cache = numpy_decoder.empty_cache(model, DECODER_BATCH, DECODER_CONTEXT + 1)
    for k_cache, v_cache in zip(*cache, strict=True):  # the context already cached
        k_cache[:, :, :DECODER_CONTEXT] = rng.standard_normal(k_cache[:, :, :DECODER_CONTEXT].shape)
        v_cache[:, :, :DECODER_CONTEXT] = rng.standard_normal(v_cache[:, :, :DECODER_CONTEXT].shape)
    tokens = rng.integers(0, config["vocab_size"], DECODER_BATCH)

    logits = numpy_decoder.decode_step(model, cache, tokens, DECODER_CONTEXT)
    assert logits.shape == (DECODER_BATCH, config["vocab_size"])
    wide = numpy_decoder.cast(model, np.float64)
    wide_cache = ([k.astype(np.float64) for k in cache[0]], [v.astype(np.float64) for v in cache[1]])
    expected = numpy_decoder.decode_step(wide, wide_cache, tokens, DECODER_CONTEXT)
    np.testing.assert_allclose(logits, expected, rtol=1e-3, atol=1e-3)

    # the step writes this token's K and V at the same slot each call: safe to run again
    roofline(numpy_decoder.decode_step, model, cache, tokens, DECODER_CONTEXT, device="cpu",
             min_fraction=BUDGETS["decoder"]["numpy"])  # fmt: skip
