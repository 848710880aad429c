"""Each diagnosis rule on hand-written facts, the ranking, the generic fallback, and the outputs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pytest_roofline.analysis import diagnosis as dg
from pytest_roofline.analysis.diagnosis import Cause, Diagnosis, Standing, diagnose, format_diagnosis
from pytest_roofline.analysis.kernelfacts import StaticFacts, Unavailable
from pytest_roofline.analysis.occupancy import KIB, occupancy
from pytest_roofline.analysis.ptx import InstructionMix, StridedAccess
from pytest_roofline.model.estimate import estimate
from pytest_roofline.model.measurement import Measurement, StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.stats import Stats
from pytest_roofline.model.verdict import Result, Verdict

MEMORY = Standing(
    op="elementwise", bound="memory", dtype="fp32", unit="vector", intensity=0.17, ridge=20.0,
    floor_s=1e-3, attained=0.09, time_s=11e-3, bandwidth_fraction=0.09,
)  # fmt: skip
COMPUTE = Standing(
    op="gemm", bound="compute", dtype="bf16", unit="tensor", intensity=1365.0, ridge=295.0,
    floor_s=139e-6, tensor_available=True, attained=0.04, time_s=3.5e-3, compute_fraction=0.04,
)  # fmt: skip


def facts(kernel: str = "k", *, arch: str = "sm_90", **changes: Any) -> StaticFacts:
    """A clean kernel (128-bit loads, no spills, full occupancy) with ``changes`` applied."""
    mix = InstructionMix(
        global_loads=2, global_loads_128=2, global_stores=1, global_stores_128=1, fp32_math=4
    )
    base = StaticFacts(
        kernel=kernel, arch=arch, origin="nvcc", registers=32, spill_stores=0, spill_loads=0,
        stack_frame=0, static_smem=0, mix=mix, block=256, occupancy=occupancy(arch, 256, 32),
    )  # fmt: skip
    mix_changes = {k: changes.pop(k) for k in list(changes) if k in InstructionMix.__dataclass_fields__}
    return dataclasses.replace(base, mix=dataclasses.replace(mix, **mix_changes), **changes)


def strided(kind: str, stride: int | None = None) -> StridedAccess:
    return StridedAccess(kind, 4, stride, f"{'ld' if kind == 'load' else 'st'}.global.f32 ...")


# --- each rule: fires on its fact, cites it, and stays quiet without it --------------------------


def test_fp64_promotion() -> None:
    cause = dg.fp64_promotion(MEMORY, [facts(fp64_math=3)])
    assert cause is not None
    assert cause.fact == "the PTX of k has 3 FP64 instruction(s) in a fp32 kernel"
    assert "float literals (0.5f" in cause.fix
    assert dg.fp64_promotion(MEMORY, [facts()]) is None
    assert dg.fp64_promotion(dataclasses.replace(MEMORY, dtype="fp64"), [facts(fp64_math=3)]) is None
    assert dg.fp64_promotion(None, [facts(fp64_math=3)]) is None  # which float it claims is unknown


def test_launch_overhead() -> None:
    tiny = dataclasses.replace(MEMORY, floor_s=0.4e-6, time_s=4e-6)
    cause = dg.launch_overhead(tiny, [])
    assert cause is not None
    assert cause.fact.startswith("measured 4.0 µs against a floor of 400.0 ns")
    assert "CUDA graph" in cause.fix
    assert dg.launch_overhead(MEMORY, []) is None  # 11 ms: not launch-bound
    assert dg.launch_overhead(dataclasses.replace(tiny, gpu=False), []) is None  # no launches on a CPU
    assert dg.launch_overhead(dataclasses.replace(tiny, time_s=None), []) is None  # nothing measured


def test_uncoalesced_stores() -> None:
    cause = dg.uncoalesced_stores(MEMORY, [facts("transpose_naive", strided=(strided("store"),))])
    assert cause is not None
    assert cause.fact == (
        "memory-bound at 9.0% of bandwidth, and 1 global store(s) in transpose_naive move a stride "
        "set at run time (a kernel parameter times threadIdx.x) from one thread to the next"
    )
    assert cause.fix.startswith("uncoalesced stores")
    assert dg.uncoalesced_stores(MEMORY, [facts(strided=(strided("load"),))]) is None
    assert dg.uncoalesced_stores(COMPUTE, [facts(strided=(strided("store"),))]) is None


def test_uncoalesced_loads() -> None:
    cause = dg.uncoalesced_loads(MEMORY, [facts(strided=(strided("load", 128), strided("load", 64)))])
    assert cause is not None
    assert "2 global load(s) in k move 128 B" in cause.fact
    assert cause.fix.startswith("strided access")
    unmeasured = dg.uncoalesced_loads(None, [facts(strided=(strided("load"),))])
    assert unmeasured is not None
    assert unmeasured.fact.startswith("1 global load(s)")
    assert dg.uncoalesced_loads(MEMORY, [facts()]) is None


def test_unfused_kernels() -> None:
    cause = dg.unfused_kernels(MEMORY, [facts("mean"), facts("center"), facts("scale")])
    assert cause is not None
    assert cause.fact.endswith("the op runs as 3 kernels (mean, center, scale)")
    assert dg.unfused_kernels(MEMORY, [facts()]) is None
    assert dg.unfused_kernels(COMPUTE, [facts("a"), facts("b")]) is None


def test_no_data_reuse() -> None:
    cause = dg.no_data_reuse(COMPUTE, [facts("gemm_naive")])
    assert cause is not None
    assert cause.fact.startswith(
        "compute-bound at 4.0% of the bf16 tensor peak, yet gemm_naive stages nothing"
    )
    assert cause.fix.startswith("no data reuse")
    assert dg.no_data_reuse(COMPUTE, [facts(shared_loads=8, shared_stores=2)]) is None
    assert dg.no_data_reuse(MEMORY, [facts()]) is None


def test_no_tensor_cores() -> None:
    cause = dg.no_tensor_cores(COMPUTE, [facts()])
    assert cause is not None
    assert "has no tensor-core instructions (mma/wgmma)" in cause.fact
    assert "tensor-core peak" in cause.fix
    assert cause.weight == 80
    assert dg.no_tensor_cores(COMPUTE, [facts(tensor_core=16)]) is None
    assert dg.no_tensor_cores(COMPUTE, [facts(sass={"HMMA": 64})]) is None  # SASS counts too
    fp32 = dataclasses.replace(COMPUTE, dtype="fp32", unit="vector")
    cause = dg.no_tensor_cores(fp32, [facts()])
    assert cause is not None
    assert "TF32 math (math='tf32')" in cause.fix
    assert cause.weight == 60
    assert dg.no_tensor_cores(dataclasses.replace(fp32, tensor_available=False), [facts()]) is None
    assert dg.no_tensor_cores(MEMORY, [facts()]) is None


def test_register_spills() -> None:
    cause = dg.register_spills(None, [facts(registers=255, spill_stores=96, spill_loads=128)])
    assert cause is not None
    assert cause.fact == "k spills 96 B stored + 128 B loaded to local memory at 255 registers/thread"
    assert "__launch_bounds__" in cause.fix
    assert dg.register_spills(None, [facts()]) is None


def test_smem_cliff_on_sm86() -> None:
    over = facts(arch="sm_86", static_smem=56 * KIB, occupancy=occupancy("sm_86", 128, 32, 56 * KIB))
    cause = dg.smem_cliff(None, [over])
    assert cause is not None
    assert cause.fact == (
        "k uses 56 KiB of shared memory per block, over sm_86's cliff of 49 KiB: 1 block/SM, 4 warps"
    )
    under = facts(arch="sm_86", static_smem=48 * KIB, occupancy=occupancy("sm_86", 128, 32, 48 * KIB))
    assert dg.smem_cliff(None, [under]) is None
    assert dg.smem_cliff(None, [facts(occupancy=None)]) is None


def test_low_occupancy() -> None:
    few = facts(arch="sm_86", static_smem=56 * KIB, occupancy=occupancy("sm_86", 128, 32, 56 * KIB))
    cause = dg.low_occupancy(None, [few])
    assert cause is not None
    assert (
        cause.fact == "k keeps 4 warps/SM resident (1 block(s) of 4 warps, limited by shared memory; under 8)"
    )
    assert "use less shared memory per block" in cause.fix
    # 255 registers still leave 8 warps (2 per sub-partition): enough
    assert dg.low_occupancy(None, [facts(registers=255, occupancy=occupancy("sm_86", 256, 255))]) is None
    assert dg.low_occupancy(None, [facts()]) is None


def test_no_vector_loads() -> None:
    cause = dg.no_vector_loads(MEMORY, [facts(global_loads=3, global_loads_128=0)])
    assert cause is not None
    assert cause.fact == (
        "memory-bound at 9.0% of bandwidth, and the PTX of k has no 128-bit global loads "
        "(3 narrower ld.global)"
    )
    assert cause.fix.startswith("vectorize loads (float4")
    assert dg.no_vector_loads(MEMORY, [facts()]) is None
    assert dg.no_vector_loads(MEMORY, [facts(global_loads_128=0, cp_async=4)]) is None  # async copies
    assert dg.no_vector_loads(COMPUTE, [facts(global_loads_128=0)]) is None


def test_no_async_copy() -> None:
    tiled = facts(shared_stores=4, shared_loads=16, global_loads=8, global_loads_128=8, fp32_math=16)
    cause = dg.no_async_copy(COMPUTE, [tiled])
    assert cause is not None
    assert "at 2.0 math instructions per global load (under 5:1)" in cause.fact
    assert "cp.async" in cause.fix
    assert dg.no_async_copy(COMPUTE, [dataclasses.replace(tiled, arch="sm_75")]) is None  # no cp.async
    busy = facts(shared_stores=4, global_loads=2, fp32_math=200)
    assert dg.no_async_copy(COMPUTE, [busy]) is None  # 100:1 hides latency already
    by_sass = dataclasses.replace(tiled, sass={"LDG": 4, "FFMA": 400})
    assert dg.no_async_copy(COMPUTE, [by_sass]) is None  # SASS counts win over PTX
    assert dg.no_async_copy(COMPUTE, [facts(shared_stores=4, cp_async=2)]) is None


def test_every_rule_is_listed_once() -> None:
    names = [rule.__name__ for rule in dg.RULES]
    assert len(names) == len(set(names))
    documented = [
        n for n in dir(dg) if callable(getattr(dg, n)) and getattr(getattr(dg, n), "__module__", "")
    ]
    assert set(names) <= set(documented)


# --- diagnose: ranking, generic fixes, outputs ---------------------------------------------------


def test_causes_are_ranked_and_limited() -> None:
    bad = facts(
        "bad", fp64_math=1, global_loads_128=0, strided=(strided("store"), strided("load")),
        spill_stores=4, spill_loads=4,
    )  # fmt: skip
    found = diagnose(MEMORY, bad)
    assert [c.rule for c in found.causes] == [
        "fp64_promotion", "uncoalesced_stores", "uncoalesced_loads", "register_spills",
    ]  # fmt: skip
    assert len(diagnose(MEMORY, bad, limit=2).causes) == 2


@pytest.mark.parametrize(
    ("standing", "words"),
    [(MEMORY, "coalesce global accesses"), (COMPUTE, "run matrix math on tensor cores"), (None, "--op")],
)
def test_generic_fixes_when_nothing_specific_is_known(standing: Standing | None, words: str) -> None:
    found = diagnose(standing, None)
    assert found.generic
    assert len(found.causes) == 1
    assert words in found.causes[0].fix
    if standing is not None:
        assert found.causes[0].fact == standing.regime()
    clean = facts(shared_loads=8, shared_stores=2, cp_async=2, tensor_core=4)  # tiles, async copies, MMA
    assert diagnose(standing, clean).generic  # nothing specific in a clean kernel either


def test_unmeasured_standing_cites_intensity_and_ridge() -> None:
    est = estimate("gemm", M=4096, N=4096, K=4096, dtype="bf16", device="h100-sxm")
    found = diagnose(est, facts("gemm_naive", global_loads_128=0))
    assert found.causes[0].fact.startswith("gemm is compute-bound (1365 FLOP/B against a ridge of 295)")


def test_a_result_gives_its_achieved_fractions() -> None:
    est = estimate("copy", n=2**28, dtype="bf16", device="h100-sxm")
    time_s = est.floor_s * 10
    stats = Stats(
        n=9, min=time_s, max=time_s, median=time_s, mean=time_s, stdev=0.0, q1=time_s, q3=time_s,
        iqr_rel=0.0, ci_half=0.0, ci_rel=0.0,
    )  # fmt: skip
    measured = Measurement(
        samples_s=(time_s,) * 9, calls_per_sample=1, stats=stats, stat="median", time_s=time_s, wall_s=0.1,
        warmup_calls=3, warmup_s=0.03, backend="cuda", device="NVIDIA H100 80GB HBM3",
        cold_method="flush", stop_reason=StopReason.PRECISION, policy=Policy(),
    )  # fmt: skip
    result = Result(
        name="copy", estimate=est, measurement=measured, min_fraction=0.7,
        attained=0.1,
        verdict=Verdict.MISS,
    )  # fmt: skip
    standing = Standing.of_result(result)
    assert standing.bound == "memory"
    assert standing.gpu
    assert standing.tensor_available
    assert standing.bandwidth_fraction == pytest.approx(0.1)
    assert standing.regime() == "memory-bound at 10.0% of bandwidth"
    assert diagnose(result, None).causes[0].fact == "memory-bound at 10.0% of bandwidth"


def test_message_lines_and_record() -> None:
    found = diagnose(MEMORY, [facts("a", global_loads_128=0), facts("b")])
    text = format_diagnosis(found, indent="    ")
    lines = text.splitlines()
    assert lines[0] == "likely causes:"
    assert lines[1].startswith(
        "    1. memory-bound at 9.0% of bandwidth, and the op runs as 2 kernels (a, b): "
    )
    assert lines[2].startswith("    2. memory-bound at 9.0% of bandwidth, and the PTX of a has no 128-bit")
    record = json.loads(json.dumps(found.to_record()))
    assert record["generic"] is False
    assert record["unavailable"] is None
    assert [c["rule"] for c in record["causes"]] == ["unfused_kernels", "no_vector_loads"]
    assert record["causes"][0]["line"] == found.causes[0].line()
    assert [f["kernel"] for f in record["facts"]] == ["a", "b"]
    assert record["facts"][0]["occupancy"]["limiter"] == "registers"


def test_unavailable_facts_are_said_once() -> None:
    found = diagnose(MEMORY, Unavailable("nvcc is not available"))
    assert found.lines()[-1] == "(no static analysis: nvcc is not available)"
    assert format_diagnosis(found).splitlines()[0] == "likely causes (generic: nothing specific known):"
    assert found.to_record()["unavailable"] == "nvcc is not available"


def test_diagnose_rejects_what_it_cannot_read() -> None:
    with pytest.raises(TypeError, match="diagnose takes a Result, a Standing or an Estimate; got str"):
        diagnose("gemm")  # type: ignore[arg-type]


def test_cause_line_joins_fact_and_fix() -> None:
    assert Cause("r", "the fact", "the fix", 1).line() == "the fact: the fix"
    assert Diagnosis((Cause("generic", "f", "x", 0),)).generic
