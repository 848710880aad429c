"""The CPU's theoretical compute peak: cores × max clock × FLOPs per cycle from its SIMD flags.

A hard *upper* bound, so every uncertain choice errs high: docs/methodology.md ("Why the CPU's theoretical
peak errs high"). Nothing here imports numpy or pytest; the machine is read once (:func:`system_peak`).
"""

from __future__ import annotations

import functools
import math
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import InvalidValueError
from ..model.core import Precision
from ..model.peaks import CpuPeak
from ..model.units import flop_rate

__all__ = [
    "ARM_DEFAULT_FP64",
    "ARM_PARTS",
    "BOOST_ALLOWANCE",
    "X86_FP64",
    "check_rate",
    "cpu_peak",
    "derive_peak",
    "system_peak",
]

#: the base clock is multiplied by this when no max clock is known (why 2: docs/methodology.md)
BOOST_ALLOWANCE = 2.0

#: x86 fp64 FLOPs per cycle per core, the widest ISA first: (label, flags that must all be present, FLOPs).
#: fp32 is twice as many everywhere (twice the lanes).
X86_FP64: tuple[tuple[str, frozenset[str], int], ...] = (
    # 2 FMA units × 8 fp64 lanes × 2 (multiply + add): Skylake-SP and later Xeons, Zen 5. Parts with
    # one 512-bit FMA unit (some Xeon Silver/Bronze) or 256-bit halves (Zen 4) do 16; flags cannot tell.
    ("AVX-512", frozenset({"avx512f"}), 32),
    # 2 FMA units × 4 lanes × 2: Haswell to Alder Lake, Zen 2 to Zen 4 (Zen 1's 128-bit units do 8)
    ("AVX2+FMA", frozenset({"avx2", "fma"}), 16),
    ("AVX+FMA", frozenset({"avx", "fma"}), 16),  # Piledriver: FMA3 without AVX2; counted as AVX2+FMA
    ("AVX+FMA4", frozenset({"avx", "fma4"}), 16),  # Bulldozer
    # Sandy and Ivy Bridge: one 256-bit add port and one 256-bit multiply port, 4 + 4
    ("AVX", frozenset({"avx"}), 8),
    # one 128-bit add and one 128-bit multiply per cycle, 2 + 2
    ("SSE2", frozenset({"sse2"}), 4),
)

#: 64-bit Arm fp64 FLOPs per cycle per core by (CPU implementer, CPU part), from the vendors' software
#: optimization guides: pipes × fp64 lanes × 2 (every pipe listed does FMA).
ARM_PARTS: Mapping[tuple[int, int], tuple[str, int]] = {
    (0x41, 0xD0C): ("Neoverse N1", 8),  # 2 × 128-bit FP/ASIMD pipes (Graviton2, Ampere Altra)
    (0x41, 0xD49): ("Neoverse N2", 8),  # 2 × 128-bit SVE2/ASIMD pipes
    (0x41, 0xD40): ("Neoverse V1", 16),  # 4 × 128-bit ASIMD or 2 × 256-bit SVE pipes (Graviton3)
    (0x41, 0xD4F): ("Neoverse V2", 16),  # 4 × 128-bit SVE2/ASIMD pipes (Grace, Graviton4)
    (0x46, 0x001): ("A64FX", 32),  # 2 × 512-bit SVE pipes (Fugaku)
}
#: any other 64-bit Arm core: 6 × 128-bit pipes × 2 lanes × 2, Cortex-X925's FP/SIMD width, the widest
#: Arm has published (Apple M1 to M4, Neoverse V1 to V3 and Cortex-X4 have 4 pipes)
ARM_DEFAULT_FP64 = 24

_MODEL_CLOCK = re.compile(r"@\s*([0-9]+(?:\.[0-9]+)?)\s*([GM])Hz", re.IGNORECASE)


def check_rate(flops_per_s: float, precision: Precision, peak: CpuPeak | None) -> str | None:
    """Why ``flops_per_s`` cannot be right: not a finite number, or above the theoretical peak for
    ``precision``; None when it can be, or when the peak is unknown."""
    if peak is None:
        return None
    if not math.isfinite(flops_per_s):
        return (
            f"a rate of {flops_per_s} FLOP/s {precision} is not a finite number: the FLOP count or "
            "the timing is wrong"
        )
    limit = peak.flops(precision)
    if flops_per_s <= limit:
        return None
    return (
        f"{flop_rate(flops_per_s)} {precision} is above this CPU's theoretical peak of "
        f"{flop_rate(limit)} {precision} ({peak.formula(precision)}): no CPU runs that fast, so the "
        "FLOP count or the timing is wrong"
    )


def derive_peak(
    *,
    cpuinfo: str,
    lscpu: str | None = None,
    max_khz: int | None = None,
    boost_unlisted: bool = False,
    sve_bits: int | None = None,
    cores: int,
    machine: str,
) -> CpuPeak | str:
    """The peak derived from these texts, or the reason it cannot be (a phrase, for ``unknown (...)``).

    ``cpuinfo``: ``/proc/cpuinfo``; ``lscpu``: lscpu's output (``LC_ALL=C``), if run; ``max_khz``: the
    highest ``cpufreq/cpuinfo_max_freq``, if any, a clock without boost (given the boost allowance) when
    ``boost_unlisted``; ``sve_bits``: the SVE vector length, if known; ``cores``: the logical CPUs
    counted; ``machine``: ``platform.machine()``.
    """
    if cores < 1:
        raise InvalidValueError(f"cores must be a positive integer; got {cores!r}")
    arch = machine.lower()
    if arch in ("x86_64", "amd64", "i386", "i686", "x86"):
        isa = _x86_isa(cpuinfo, lscpu)
    elif arch in ("aarch64", "arm64"):
        isa = _arm_isa(cpuinfo, lscpu, sve_bits)
    else:
        return f"no FLOP/cycle table for {machine or 'this architecture'}"
    if isinstance(isa, str):
        return isa
    clock = _clock(cpuinfo, lscpu, max_khz, boost_unlisted)
    if clock is None:
        return (
            "no clock: no cpufreq max, no lscpu CPU max MHz, no model-name clock and no cpu MHz "
            "in /proc/cpuinfo"
        )
    label, fp64 = isa
    hz, source = clock
    return CpuPeak(cores, hz, source, label, fp64, 2 * fp64)


# -- parsing -----------------------------------------------------------------------------------


def _fields(text: str | None, name: str) -> list[str]:
    """Every value of ``name:`` lines (``/proc/cpuinfo`` repeats them per processor)."""
    if not text:
        return []
    values = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == name.lower() and value.strip():
            values.append(value.strip())
    return values


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _hex(block: str, name: str) -> int | None:
    """The first ``name:`` value as a hexadecimal number (``0x41``); None when there is none."""
    try:
        return int(_fields(block, name)[0], 16)
    except (IndexError, ValueError):
        return None


def _words(text: str | None, name: str) -> set[str]:
    """The union of every ``name:`` line's words, lower-cased: a hybrid part's widest core sets the bound."""
    return {word for line in _fields(text, name) for word in line.lower().split()}


def _x86_isa(cpuinfo: str, lscpu: str | None) -> tuple[str, int] | str:
    flags = _words(cpuinfo, "flags") or _words(lscpu, "flags")
    if not flags:
        return "no CPU flags in /proc/cpuinfo or lscpu"
    for label, needed, fp64 in X86_FP64:
        if needed <= flags:
            return label, fp64
    return "no SIMD extension in the CPU flags (not even SSE2)"


def _arm_isa(cpuinfo: str, lscpu: str | None, sve_bits: int | None) -> tuple[str, int] | str:
    features = _words(cpuinfo, "features") or _words(lscpu, "flags")
    if not features:
        return "no CPU features in /proc/cpuinfo or lscpu"
    if "sve" in features:
        label = f"SVE {sve_bits}-bit" if sve_bits else "SVE"
    elif "asimd" in features:
        label = "NEON"
    else:
        return "no Advanced SIMD (asimd) in the CPU features"
    # without a vendor figure: NEON's upper bound, or 2 SVE pipes of the vector length when wider
    fallback = max(ARM_DEFAULT_FP64, 2 * (sve_bits or 0) // 64 * 2)
    processors = [block for block in re.split(r"\n\s*\n", cpuinfo) if _fields(block, "processor")]
    known = [_arm_part(block) for block in processors]
    if not known or None in known:  # a core nobody identified may be the widest
        return label, fallback
    return label, max(fp64 for fp64 in known if fp64 is not None)


def _arm_part(block: str) -> int | None:
    implementer, part = _hex(block, "cpu implementer"), _hex(block, "cpu part")
    if implementer is None or part is None:
        return None
    entry = ARM_PARTS.get((implementer, part))
    return entry[1] if entry else None


def _clock(
    cpuinfo: str, lscpu: str | None, max_khz: int | None, boost_unlisted: bool
) -> tuple[float, str] | None:
    """(Hz, where from), the highest-ranked source first; None when nothing gives a clock."""
    allowance = f"× {BOOST_ALLOWANCE:g} boost allowance"
    if max_khz is not None and max_khz > 0:
        if boost_unlisted:
            base = max_khz / 1e3
            return base * 1e6 * BOOST_ALLOWANCE, f"cpufreq non-boost max {base:.0f} MHz {allowance}"
        return max_khz * 1e3, "cpufreq max"
    lscpu_max = _highest(map(_number, _fields(lscpu, "cpu max mhz")))
    if lscpu_max > 0:
        if any(v.lower() == "enabled" for v in _fields(lscpu, "frequency boost")):
            return lscpu_max * 1e6 * BOOST_ALLOWANCE, f"lscpu non-boost max {lscpu_max:.0f} MHz {allowance}"
        return lscpu_max * 1e6, "lscpu CPU max MHz"
    model = _highest(map(_model_clock_mhz, _fields(cpuinfo, "model name")))
    current = _highest(map(_number, _fields(cpuinfo, "cpu mhz")))
    if model <= 0 and current <= 0:
        return None
    # cpu MHz may be a current, throttled clock, the model name's is the base: the higher is kept
    if model >= current:
        return model * 1e6 * BOOST_ALLOWANCE, f"model name's {model / 1e3:.2f} GHz {allowance}"
    return current * 1e6 * BOOST_ALLOWANCE, f"cpu MHz {current:.0f} {allowance}"


def _highest(values: Iterable[float | None]) -> float:
    """The highest of the values that are positive numbers (what did not parse is None); else 0."""
    return max((v for v in values if v is not None and math.isfinite(v) and v > 0), default=0.0)


def _model_clock_mhz(name: str) -> float | None:
    """``"Intel(R) Xeon(R) CPU @ 2.20GHz"`` -> 2200.0; None when the name states no clock."""
    match = _MODEL_CLOCK.search(name)
    if match is None:
        return None
    value = float(match.group(1))
    return value * 1e3 if match.group(2).upper() == "G" else value


# -- this machine ------------------------------------------------------------------------------

_SYS_CPU = Path("/sys/devices/system/cpu")
_PROC_CPUINFO = Path("/proc/cpuinfo")
_SVE_DEFAULT = Path("/proc/sys/abi/sve_default_vector_length")


@functools.cache
def system_peak() -> CpuPeak | str:
    """This machine's peak, or why it is unknown; read once per process, on Linux only
    (docs/methodology.md, "Why the CPU's theoretical peak errs high")."""
    if not sys.platform.startswith("linux"):
        return f"not derived on {sys.platform} (Linux only)"
    try:
        cpuinfo = _PROC_CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"/proc/cpuinfo cannot be read ({exc.strerror or exc})"
    cpus = _cpus()
    max_khz = _max_khz(cpus)
    return derive_peak(
        cpuinfo=cpuinfo,
        lscpu=_lscpu() if max_khz is None else None,
        max_khz=max_khz,
        boost_unlisted=max_khz is not None and _boost_unlisted(),
        sve_bits=_sve_bits(),
        cores=len(cpus),
        machine=platform.machine(),
    )


def cpu_peak() -> CpuPeak | None:
    """This machine's peak, or None when it cannot be derived (:func:`system_peak` says why)."""
    peak = system_peak()
    return peak if isinstance(peak, CpuPeak) else None


def _cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _max_khz(cpus: Iterable[int]) -> int | None:
    """The highest ``cpuinfo_max_freq`` of these CPUs (a big.LITTLE cpu0 is often a little core)."""
    best = 0
    for cpu in cpus:
        text = _read(_SYS_CPU / f"cpu{cpu}" / "cpufreq" / "cpuinfo_max_freq")
        if text and text.isdigit():
            best = max(best, int(text))
    return best or None


def _boost_unlisted() -> bool:
    # acpi-cpufreq's table stops at the highest non-boost P-state; its global boost switch is on
    driver = _read(_SYS_CPU / "cpu0" / "cpufreq" / "scaling_driver")
    return driver == "acpi-cpufreq" and _read(_SYS_CPU / "cpufreq" / "boost") == "1"


def _sve_bits() -> int | None:
    # the default vector length of new processes: the hardware's, unless an admin lowered it
    text = _read(_SVE_DEFAULT)
    return int(text) * 8 if text and text.isdigit() and int(text) > 0 else None


def _lscpu() -> str | None:
    try:
        done = subprocess.run(
            ["lscpu"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            env={**os.environ, "LC_ALL": "C"},  # labels in English, numbers with a dot
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
