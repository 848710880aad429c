"""A checkpoint's ``quantization_config``, as a step's weights read it: AWQ, GPTQ and FP8 are read, any
other method is named as not read. What each gives, and what is not counted: docs/llm.md ("What is
read from a config.json").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Quantization:
    """What a step needs of a quantization_config."""

    method: str
    #: the weights' storage: int4, int8, fp8_e4m3
    weight_dtype: str
    #: elements along K per scale, or None where the scales are not counted
    group_size: int | None = None
    scale_dtype: str = "fp16"
    #: W8A8: the quantized layers' math runs in ``weight_dtype`` too
    activations: bool = False

    def describe(self) -> str:
        """``awq: int4 weights, one fp16 scale per 128`` for a table's header and the JSON."""
        scales = f", one {self.scale_dtype} scale per {self.group_size}" if self.group_size else ""
        math = f", {self.weight_dtype} math (W8A8)" if self.activations else ""
        return f"{self.method}: {self.weight_dtype} weights{scales}{math}"


def read_quantization(raw: object, where: str) -> tuple[Quantization | None, str]:
    """The quantization_config ``raw`` (None: none), or why it is not read: ``(None, reason)``."""
    if raw is None:
        return None, ""
    if not isinstance(raw, dict):
        return None, f"{where}: quantization_config must be an object; got {raw!r}"
    method = str(raw.get("quant_method", "")).lower()
    if method in ("awq", "gptq"):
        bits = raw.get("bits", raw.get("w_bit"))
        group = raw.get("group_size", raw.get("q_group_size"))
        if bits not in (4, 8) or (method == "awq" and bits != 4):
            return None, f"{where}: quantization_config: {method} with bits={bits!r} is not read here"
        if not (isinstance(group, int) and not isinstance(group, bool)) or group == 0 or group < -1:
            return None, (
                f"{where}: quantization_config: group_size must be a positive integer or -1; got {group!r}"
            )
        weights = "int4" if bits == 4 else "int8"
        return Quantization(method, weights, group if group > 0 else None), ""
    if method == "fp8":
        fmt = str(raw.get("fmt", "e4m3")).lower()
        if fmt != "e4m3":
            return None, f"{where}: quantization_config: fp8 fmt {fmt!r} is not read here (e4m3 is)"
        return Quantization("fp8", "fp8_e4m3", activations=raw.get("activation_scheme") is not None), ""
    shown = repr(raw.get("quant_method")) if "quant_method" in raw else "with no quant_method"
    return None, f"{where}: quantization_config {shown} is not read here (awq, gptq and fp8 are)"
