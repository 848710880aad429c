"""Why did it miss? A judged result plus the compiler's facts -> a short ranked list of likely causes.

Each rule is a function of (:class:`Standing`, facts) -> :class:`Cause` or None; :func:`diagnose` ranks
them. No pytest here. The rules and their sources: docs/verdicts.md ("On a GPU"), docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import InvalidTypeError
from ..model import units
from ..model.core import Estimate, Precision, Unit
from .kernelfacts import StaticFacts, Unavailable
from .occupancy import LATENCY_HIDING_WARPS, limits_for

if TYPE_CHECKING:
    from ..model.verdict import Result

#: a GPU kernel measured under this, against a floor under OVERHEAD_FLOOR_S, is launch-bound:
#: a launch alone costs a few microseconds (speed-of-light-napkin.md, "overhead")
OVERHEAD_TIME_S = 10e-6
OVERHEAD_FLOOR_S = 5e-6
#: compute/load instruction ratio under which cp.async pipelining pays (procedure step 4)
LOW_COMPUTE_PER_LOAD = 5.0


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a kernel stands on the roofline, as the rules read it; ``attained`` and the fractions are
    None when nothing was measured (the rules then cite the intensity against the ridge)."""

    op: str
    bound: str  # "memory" or "compute"
    dtype: str  # the data's precision label: "fp32"
    unit: str  # the units judged against: "tensor" or "vector"
    intensity: float  # FLOP per byte
    ridge: float | None
    floor_s: float
    gpu: bool = True
    #: whether the device has tensor cores for this dtype (fp32: for TF32 math)
    tensor_available: bool = False
    attained: float | None = None
    time_s: float | None = None
    bandwidth_fraction: float | None = None  # achieved / peak bandwidth
    compute_fraction: float | None = None  # achieved / peak FLOP rate

    @classmethod
    def of_estimate(cls, est: Estimate) -> Standing:
        device = est.device
        tensor_precision = Precision.TF32 if est.precision is Precision.FP32 else est.precision
        return cls(
            op=est.op,
            bound=est.bound,
            dtype=est.precision.label,
            unit=str(est.unit),
            intensity=est.intensity,
            ridge=est.ridge,
            floor_s=est.floor_s,
            gpu=device.kind != "cpu",
            tensor_available=device.peak(tensor_precision, Unit.TENSOR) is not None,
        )

    @classmethod
    def of_result(cls, result: Result) -> Standing:
        est = result.estimate
        time_s = result.time_s
        return replace(
            cls.of_estimate(est),
            attained=result.attained,
            time_s=time_s,
            bandwidth_fraction=(est.bytes / time_s) / est.bandwidth if time_s > 0 else None,
            compute_fraction=(
                (est.flops / time_s) / est.peak_flops if time_s > 0 and est.peak_flops else None
            ),
        )

    def regime(self) -> str:
        """``memory-bound at 9% of bandwidth``, or without a measurement the intensity and ridge."""
        if self.bound == "memory" and self.bandwidth_fraction is not None:
            return f"memory-bound at {units.percent(self.bandwidth_fraction)} of bandwidth"
        if self.bound == "compute" and self.compute_fraction is not None:
            return (
                f"compute-bound at {units.percent(self.compute_fraction)} of the {self.dtype} "
                f"{self.unit} peak"
            )
        ridge = "" if self.ridge is None else f" against a ridge of {units.intensity(self.ridge)}"
        return f"{self.op} is {self.bound}-bound ({units.intensity(self.intensity)} FLOP/B{ridge})"


@dataclass(frozen=True, slots=True)
class Cause:
    """One likely cause: the rule that found it, the fact it cites, the first fix, a rank weight."""

    rule: str
    fact: str
    fix: str
    weight: int

    def line(self) -> str:
        return f"{self.fact}: {self.fix}"

    def to_record(self) -> dict[str, Any]:
        return {"rule": self.rule, "fact": self.fact, "fix": self.fix, "line": self.line()}


Facts = Sequence[StaticFacts]
Rule = Callable[[Standing | None, Facts], Cause | None]


# --- the rules: each small, named, tested on hand-written facts ----------------------------------


def _names(facts: Facts) -> str:
    return ", ".join(f.kernel for f in facts)


def launch_overhead(s: Standing | None, facts: Facts) -> Cause | None:
    """Overhead regime: a tiny GPU kernel is bound by its launch, not by the roofline."""
    if s is None or not s.gpu or s.time_s is None:
        return None
    if s.time_s >= OVERHEAD_TIME_S or s.floor_s >= OVERHEAD_FLOOR_S:
        return None
    return Cause(
        "launch_overhead",
        f"measured {units.seconds(s.time_s)} against a floor of {units.seconds(s.floor_s)}, "
        "about what a kernel launch alone costs",
        "overhead-bound, not on the roofline: give each launch more work (batch), fuse it with its "
        "neighbours, or replay it in a CUDA graph",
        95,
    )


def fp64_promotion(s: Standing | None, facts: Facts) -> Cause | None:
    """FP64 instructions in a kernel judged as a narrower float: an accidental double promotion."""
    if s is None or s.dtype in ("fp64", "complex128"):
        return None
    culprits = [f for f in facts if f.mix.fp64_math > 0]
    if not culprits:
        return None
    n = sum(f.mix.fp64_math for f in culprits)
    return Cause(
        "fp64_promotion",
        f"the PTX of {_names(culprits)} has {n} FP64 instruction(s) in a {s.dtype} kernel",
        "an accidental promotion to double: write float literals (0.5f, not 0.5) and call the float "
        "functions (sqrtf, expf, fabsf); FP64 runs at 1/2 to 1/64 of the FP32 rate",
        100,
    )


def uncoalesced_stores(s: Standing | None, facts: Facts) -> Cause | None:
    """Global stores whose neighbouring threads write far apart (a naive transpose's scatter)."""
    return _uncoalesced(
        s, facts, "store", "uncoalesced_stores",
        "uncoalesced stores: each thread's bytes land in a 32-B sector of their own; make threadIdx.x "
        "walk consecutive output addresses (for a transpose, stage a tile through shared memory)",
        90,
    )  # fmt: skip


def uncoalesced_loads(s: Standing | None, facts: Facts) -> Cause | None:
    """Global loads whose neighbouring threads read far apart: strided access."""
    return _uncoalesced(
        s, facts, "load", "uncoalesced_loads",
        "strided access: a warp's 32 loads touch up to 32 sectors for 128 useful bytes; map "
        "threadIdx.x to the contiguous axis (or stage through shared memory)",
        88,
    )  # fmt: skip


def _uncoalesced(
    s: Standing | None, facts: Facts, kind: str, rule: str, fix: str, weight: int
) -> Cause | None:
    """The cause both uncoalesced rules give: the strided accesses of ``kind``, cited."""
    if s is not None and s.bound != "memory":
        return None
    culprits = [f for f in facts if any(a.kind == kind for a in f.strided)]
    if not culprits:
        return None
    accesses = [a for f in culprits for a in f.strided if a.kind == kind]
    strides = {a.stride for a in accesses}
    moved = (
        "a stride set at run time (a kernel parameter times threadIdx.x)"
        if None in strides
        else f"{max(s for s in strides if s is not None)} B"
    )
    lead = s.regime() + ", and " if s is not None else ""
    n = len(accesses)
    fact = f"{lead}{n} global {kind}(s) in {_names(culprits)} move {moved} from one thread to the next"
    return Cause(rule, fact, fix, weight)


def unfused_kernels(s: Standing | None, facts: Facts) -> Cause | None:
    """One op run as several kernels: the intermediates go through global memory."""
    if len(facts) < 2 or (s is not None and s.bound != "memory"):
        return None
    lead = s.regime() + ", and " if s is not None else ""
    return Cause(
        "unfused_kernels",
        f"{lead}the op runs as {len(facts)} kernels ({_names(facts)})",
        "intermediates round-trip through global memory between them; fuse into one kernel that keeps "
        "them in registers and shared memory (each byte read once, written once)",
        85,
    )


def no_data_reuse(s: Standing | None, facts: Facts) -> Cause | None:
    """A compute-bound op whose kernel stages nothing on chip: every operand comes from DRAM/L2."""
    if s is None or s.bound != "compute":
        return None
    culprits = [
        f for f in facts if f.mix.shared_loads + f.mix.shared_stores + f.mix.cp_async + f.mix.tensor_core == 0
    ]
    if not culprits:
        return None
    return Cause(
        "no_data_reuse",
        f"{s.regime()}, yet {_names(culprits)} stages nothing "
        "in shared memory (no ld.shared/st.shared, no cp.async, no mma)",
        "no data reuse: each operand is fetched from global memory for one FMA; tile the inputs through "
        "shared memory and registers so each loaded value feeds many FMAs",
        84,
    )


def _tensor_instructions(f: StaticFacts) -> int:
    sass = f.sass or {}
    return f.mix.tensor_core + sass.get("HMMA", 0) + sass.get("IMMA", 0) + sass.get("HGMMA", 0)


def no_tensor_cores(s: Standing | None, facts: Facts) -> Cause | None:
    """Matrix math on a device with tensor cores, and not one tensor-core instruction."""
    if s is None or s.bound != "compute":
        return None
    culprits = [f for f in facts if _tensor_instructions(f) == 0]
    if not culprits:
        return None
    fact = f"{s.regime()}, and {_names(culprits)} has no tensor-core instructions (mma/wgmma)"
    if s.unit == "tensor":
        fix = (
            "judged against the tensor-core peak, it runs on the vector units: use mma.sync/WMMA "
            "(wgmma on sm_90), or cuBLAS/CUTLASS"
        )
        return Cause("no_tensor_cores", fact, fix, 80)
    if s.dtype == "fp32" and s.tensor_available:
        fix = (
            "fp32 IEEE math cannot use tensor cores; TF32 math (math='tf32') or bf16 inputs would, at "
            "several times the vector rate"
        )
        return Cause("no_tensor_cores", fact, fix, 60)
    return None


def register_spills(s: Standing | None, facts: Facts) -> Cause | None:
    """Registers spilled to local memory: every spill is a global-memory round trip."""
    culprits = [f for f in facts if f.spilled > 0]
    if not culprits:
        return None
    worst = max(culprits, key=lambda f: f.spilled)
    return Cause(
        "register_spills",
        f"{worst.kernel} spills {worst.spill_stores} B stored + {worst.spill_loads} B loaded to local "
        f"memory at {worst.registers} registers/thread",
        "cut live registers (a smaller per-thread tile, fewer unrolled accumulators) or relax the cap "
        "(__launch_bounds__, --maxrregcount); spills go through L1/L2 at memory latency",
        70,
    )


def smem_cliff(s: Standing | None, facts: Facts) -> Cause | None:
    """Shared memory per block just over the architecture's two-blocks-per-SM cliff."""
    for f in facts:
        occ = f.occupancy
        if occ is None or occ.blocks_per_sm != 1 or occ.limiter != "shared memory":
            continue
        cliff = limits_for(occ.arch).smem_cliff
        if f.smem <= cliff:
            continue
        return Cause(
            "smem_cliff",
            f"{f.kernel} uses {units.binary_bytes(f.smem)} of shared memory per block, over {occ.arch}'s "
            f"cliff of {units.binary_bytes(cliff)}: 1 block/SM, {occ.active_warps} warps",
            f"shrink the tile (or drop a pipeline stage) to get under {units.binary_bytes(cliff)}: two "
            "blocks per SM hide each other's stalls (the procedure measured 2x)",
            75,
        )
    return None


_LIMITER_FIX = {
    "registers": "cap registers (__launch_bounds__, --maxrregcount) or keep fewer values live",
    "shared memory": "use less shared memory per block (smaller tiles, fewer stages)",
    "warps": "this block size already fills the SM's warps",
    "blocks": "use larger blocks: the SM's block limit, not its warps, is reached",
}


def low_occupancy(s: Standing | None, facts: Facts) -> Cause | None:
    """Fewer resident warps than latency hiding needs (procedure step 3: 8 per SM)."""
    for f in facts:
        occ = f.occupancy
        if occ is None or occ.active_warps >= LATENCY_HIDING_WARPS:
            continue
        return Cause(
            "low_occupancy",
            f"{f.kernel} keeps {occ.active_warps} warps/SM resident ({occ.blocks_per_sm} block(s) of "
            f"{occ.warps_per_block} warps, limited by {occ.limiter}; under {LATENCY_HIDING_WARPS})",
            f"latency-bound: too few warps to hide memory latency; {_LIMITER_FIX[occ.limiter]}",
            65,
        )
    return None


def no_vector_loads(s: Standing | None, facts: Facts) -> Cause | None:
    """A memory-bound kernel reading with scalar (sub-128-bit) loads only."""
    if s is not None and s.bound != "memory":
        return None
    culprits = [
        f for f in facts if f.mix.global_loads > 0 and f.mix.global_loads_128 == 0 and not f.mix.cp_async
    ]
    if not culprits:
        return None
    lead = s.regime() + ", and " if s is not None else ""
    return Cause(
        "no_vector_loads",
        f"{lead}the PTX of {_names(culprits)} has no 128-bit global loads "
        f"({sum(f.mix.global_loads for f in culprits)} narrower ld.global)",
        "vectorize loads (float4/uint4: 16 B per thread per instruction, ~4x fewer load instructions "
        "in flight for the same bytes)",
        50,
    )


def _compute_per_load(f: StaticFacts) -> float | None:
    if f.sass is not None and f.sass.get("LDG", 0):
        math_ops = f.sass.get("FFMA", 0) + f.sass.get("HMMA", 0) + f.sass.get("IMMA", 0)
        return math_ops / f.sass["LDG"]
    if f.mix.global_loads:
        return (f.mix.fp32_math + f.mix.tensor_core) / f.mix.global_loads
    return None


def no_async_copy(s: Standing | None, facts: Facts) -> Cause | None:
    """Tiles staged through shared memory with synchronous loads, where cp.async pays (sm_80+)."""
    for f in facts:
        ratio = _compute_per_load(f)
        if f.mix.cp_async or not f.mix.shared_stores or ratio is None or ratio == 0:
            continue
        if ratio >= LOW_COMPUTE_PER_LOAD or int(f.arch[3:].rstrip("af")) < 80:
            continue
        return Cause(
            "no_async_copy",
            f"{f.kernel} stages global data through shared memory with synchronous loads (no cp.async), "
            f"at {ratio:.1f} math instructions per global load (under {LOW_COMPUTE_PER_LOAD:g}:1)",
            "pipeline the tile loads with cp.async (double-buffer); double buffering doubles shared "
            "memory, so check the cliff",
            40,
        )
    return None


#: every specific rule, in the order ties are ranked
RULES: tuple[Rule, ...] = (
    fp64_promotion,
    launch_overhead,
    uncoalesced_stores,
    uncoalesced_loads,
    unfused_kernels,
    no_data_reuse,
    no_tensor_cores,
    smem_cliff,
    register_spills,
    low_occupancy,
    no_vector_loads,
    no_async_copy,
)


def generic_fixes(s: Standing | None) -> Cause:
    """The regime's first fixes, when no rule found anything specific."""
    if s is None:
        return Cause(
            "generic",
            "nothing specific found in the static facts",
            "give an op (--op) to place the kernel on the roofline",
            0,
        )
    if s.bound == "memory":
        fix = (
            "coalesce global accesses (neighbouring threads, neighbouring addresses), use 128-bit loads, "
            "fuse away intermediate round trips, keep reused data in shared memory or L2"
        )
    else:
        fix = (
            "run matrix math on tensor cores, raise the reuse of each loaded value (larger tiles), keep "
            "enough warps resident, cut non-math instructions (address arithmetic, branches)"
        )
    return Cause("generic", s.regime(), fix, 0)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The ranked causes of one result, the facts behind them, and why facts are missing if they are."""

    causes: tuple[Cause, ...]
    facts: tuple[StaticFacts, ...] = ()
    unavailable: str = ""  # why there are no static facts (no nvcc, a compile error)

    @property
    def generic(self) -> bool:
        return all(c.rule == "generic" for c in self.causes)

    def lines(self) -> list[str]:
        """One line per cause, best first (no numbering: the caller indents them)."""
        out = [c.line() for c in self.causes]
        if self.unavailable:
            out.append(f"(no static analysis: {self.unavailable})")
        return out

    def to_record(self) -> dict[str, Any]:
        return {
            "causes": [c.to_record() for c in self.causes],
            "generic": self.generic,
            "facts": [f.to_record() for f in self.facts],
            "unavailable": self.unavailable or None,
        }


def diagnose(
    judged: Result | Standing | Estimate | None,
    facts: StaticFacts | Sequence[StaticFacts] | Unavailable | None = None,
    *,
    limit: int = 4,
) -> Diagnosis:
    """The likely causes of ``judged`` (a Result, a :class:`Standing`, an unmeasured Estimate, or None:
    static facts only), best first, at most ``limit``. ``facts``: the test's kernel(s)'
    (:func:`~.kernelfacts.facts_for`), an :class:`~.kernelfacts.Unavailable` saying why none, or None."""
    standing = _standing(judged)
    unavailable = ""
    known: tuple[StaticFacts, ...]
    if isinstance(facts, Unavailable):
        unavailable, known = facts.reason, ()
    elif isinstance(facts, StaticFacts):
        known = (facts,)
    else:
        known = tuple(facts or ())
    found = [cause for rule in RULES if (cause := rule(standing, known)) is not None]
    found.sort(key=lambda c: -c.weight)  # stable: ties keep RULES order
    causes = tuple(found[:limit]) if found else (generic_fixes(standing),)
    return Diagnosis(causes, known, unavailable)


def _standing(judged: object) -> Standing | None:
    if judged is None or isinstance(judged, Standing):
        return judged
    if isinstance(judged, Estimate):
        return Standing.of_estimate(judged)
    from ..model.verdict import Result

    if isinstance(judged, Result):
        return Standing.of_result(judged)
    raise InvalidTypeError(f"diagnose takes a Result, a Standing or an Estimate; got {type(judged).__name__}")


def format_diagnosis(diagnosis: Diagnosis, indent: str = "  ") -> str:
    """The lines to put under a miss's numbers: a heading, then one numbered cause per line."""
    heading = "likely causes" + (" (generic: nothing specific known)" if diagnosis.generic else "") + ":"
    body = [f"{indent}{i}. {line}" for i, line in enumerate(diagnosis.lines(), 1)]
    return "\n".join([heading, *body])
