"""The CPU's theoretical peak, from sample /proc/cpuinfo and lscpu texts of Intel, AMD and Arm machines."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline.machine import cpupeak
from pytest_roofline.machine.cpupeak import check_rate, derive_peak
from pytest_roofline.model.core import Precision
from pytest_roofline.model.peaks import CpuPeak


def peak_of(**texts: Any) -> CpuPeak | None:
    """derive_peak's peak, or None where it gives the reason there is none."""
    peak = derive_peak(**texts)
    return peak if isinstance(peak, CpuPeak) else None


# A Google Cloud VM on a Cascade Lake Xeon: the base clock in the model name, no cpufreq.
INTEL_BLOCK = """\
processor	: {n}
vendor_id	: GenuineIntel
cpu family	: 6
model		: 85
model name	: Intel(R) Xeon(R) CPU @ 2.20GHz
stepping	: 7
microcode	: 0xffffffff
cpu MHz		: 2199.998
cache size	: 39424 KB
physical id	: 0
siblings	: 2
core id		: 0
cpu cores	: 1
fpu		: yes
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr \
sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid \
tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c \
rdrand hypervisor lahf_lm abm 3dnowprefetch invpcid_single ssbd ibrs ibpb stibp ibrs_enhanced \
fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm mpx avx512f avx512dq rdseed adx smap \
clflushopt clwb avx512cd avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves arat avx512_vnni md_clear \
arch_capabilities
bugs		: spectre_v1 spectre_v2 spec_store_bypass swapgs taa mmio_stale_data retbleed
bogomips	: 4399.99
clflush size	: 64
cache_alignment	: 64
address sizes	: 46 bits physical, 48 bits virtual
power management:
"""
INTEL = "\n".join(INTEL_BLOCK.format(n=n) for n in range(2))

# This project's reference VM: an AMD EPYC (Zen 3) under KVM; no model-name clock, no cpufreq.
AMD_BLOCK = """\
processor	: {n}
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 1
model name	: AMD EPYC
stepping	: 1
microcode	: 0x1000065
cpu MHz		: 2445.430
cache size	: 512 KB
physical id	: 0
siblings	: 2
core id		: {n}
cpu cores	: 2
fpu		: yes
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr \
sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology \
nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic \
movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy \
abm sse4a misalignsse 3dnowprefetch osvw topoext vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms \
invpcid rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves clzero xsaveerptr arat \
umip vaes vpclmulqdq rdpid fsrm
bugs		: sysret_ss_attrs null_seg spectre_v1 spectre_v2 spec_store_bypass srso spectre_v2_user
bogomips	: 4890.86
TLB size	: 2560 4K pages
clflush size	: 64
cache_alignment	: 64
address sizes	: 48 bits physical, 48 bits virtual
power management:
"""
AMD = "\n".join(AMD_BLOCK.format(n=n) for n in range(2))
AMD_LSCPU = """\
Architecture:                            x86_64
CPU(s):                                  2
Vendor ID:                               AuthenticAMD
Model name:                              AMD EPYC
Hypervisor vendor:                       KVM
"""

# An AWS Graviton3 (Neoverse V1): no MHz anywhere in /proc/cpuinfo, the max clock from lscpu.
ARM_FEATURES = (
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc "
    "dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm "
    "svebf16 i8mm bf16 dgh rng"
)
ARM_BLOCK = """\
processor	: {n}
BogoMIPS	: 2100.00
Features	: {features}
CPU implementer	: {implementer}
CPU architecture: 8
CPU variant	: 0x1
CPU part	: {part}
CPU revision	: 1
"""


def arm(*parts: str, features: str = ARM_FEATURES, implementer: str = "0x41") -> str:
    return "\n".join(
        ARM_BLOCK.format(n=n, features=features, implementer=implementer, part=part)
        for n, part in enumerate(parts)
    )


GRAVITON3 = arm("0xd40", "0xd40", "0xd40", "0xd40")
GRAVITON3_LSCPU = """\
Architecture:                    aarch64
CPU op-mode(s):                  32-bit, 64-bit
CPU(s):                          4
Vendor ID:                       ARM
Model name:                      Neoverse-V1
CPU max MHz:                     2600.0000
CPU min MHz:                     1050.0000
BogoMIPS:                        2100.00
Flags:                           fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve
"""
# an Arm VM whose kernel exposes no cpufreq, with an lscpu that has no clock either
ARM_LSCPU_NO_CLOCK = """\
Architecture:                    aarch64
CPU(s):                          2
Vendor ID:                       ARM
Model name:                      Neoverse-N1
BogoMIPS:                        50.00
"""


# -- the four machines -------------------------------------------------------------------------


def test_intel_xeon_avx512_base_clock_from_the_model_name() -> None:
    peak = peak_of(cpuinfo=INTEL, cores=2, machine="x86_64")
    # the model name's 2.20 GHz beats cpu MHz 2199.998; both are the base clock, doubled for boost
    assert peak == CpuPeak(2, 4.4e9, "model name's 2.20 GHz × 2 boost allowance", "AVX-512", 32, 64)
    assert peak.flops(Precision.FP64) == pytest.approx(281.6e9)
    assert peak.flops(Precision.FP32) == pytest.approx(563.2e9)
    assert peak.describe() == (
        "theoretical peak 2 cores × 4.40 GHz (model name's 2.20 GHz × 2 boost allowance) × "
        "32 fp64 FLOP/cycle (AVX-512) = 282 GFLOP/s fp64, 563 GFLOP/s fp32"
    )


def test_amd_epyc_avx2_fma_clock_from_cpu_mhz() -> None:
    peak = peak_of(cpuinfo=AMD, lscpu=AMD_LSCPU, cores=2, machine="x86_64")
    assert peak == CpuPeak(2, 4890.86e6, "cpu MHz 2445 × 2 boost allowance", "AVX2+FMA", 16, 32)
    assert peak.flops(Precision.FP64) == pytest.approx(156.50752e9)
    assert peak.flops(Precision.FP32) == pytest.approx(313.01504e9)
    assert peak.describe() == (
        "theoretical peak 2 cores × 4.89 GHz (cpu MHz 2445 × 2 boost allowance) × "
        "16 fp64 FLOP/cycle (AVX2+FMA) = 157 GFLOP/s fp64, 313 GFLOP/s fp32"
    )


def test_arm_neoverse_v1_sve_clock_from_lscpu() -> None:
    peak = peak_of(cpuinfo=GRAVITON3, lscpu=GRAVITON3_LSCPU, cores=4, machine="aarch64")
    assert peak == CpuPeak(4, 2.6e9, "lscpu CPU max MHz", "SVE", 16, 32)
    assert peak.flops(Precision.FP64) == pytest.approx(166.4e9)
    assert peak.describe() == (
        "theoretical peak 4 cores × 2.60 GHz (lscpu CPU max MHz) × 16 fp64 FLOP/cycle (SVE) "
        "= 166 GFLOP/s fp64, 333 GFLOP/s fp32"
    )


def test_arm_without_any_clock_is_unknown() -> None:
    n1 = arm("0xd0c", "0xd0c", features="fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics")
    assert peak_of(cpuinfo=n1, lscpu=ARM_LSCPU_NO_CLOCK, cores=2, machine="aarch64") is None
    reason = derive_peak(cpuinfo=n1, lscpu=ARM_LSCPU_NO_CLOCK, cores=2, machine="aarch64")
    assert reason == (
        "no clock: no cpufreq max, no lscpu CPU max MHz, no model-name clock and no cpu MHz in /proc/cpuinfo"
    )


# -- the clock ---------------------------------------------------------------------------------


def test_cpufreq_max_comes_first_and_is_taken_as_it_is() -> None:
    peak = peak_of(cpuinfo=INTEL, lscpu=GRAVITON3_LSCPU, max_khz=3_900_000, cores=2, machine="x86_64")
    assert peak is not None
    assert (peak.clock_hz, peak.clock_source) == (3.9e9, "cpufreq max")


def test_a_cpufreq_max_without_boost_states_gets_the_allowance() -> None:
    peak = derive_peak(cpuinfo=AMD, max_khz=2_250_000, boost_unlisted=True, cores=2, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert peak.clock_hz == 4.5e9
    assert peak.clock_source == "cpufreq non-boost max 2250 MHz × 2 boost allowance"


@pytest.mark.parametrize("max_khz", [None, 0])
def test_lscpu_max_mhz_comes_next(max_khz: int | None) -> None:
    peak = derive_peak(cpuinfo=INTEL, lscpu=GRAVITON3_LSCPU, max_khz=max_khz, cores=1, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert (peak.clock_hz, peak.clock_source) == (2.6e9, "lscpu CPU max MHz")
    assert peak.describe().startswith("theoretical peak 1 core × 2.60 GHz")


def test_lscpu_max_mhz_with_frequency_boost_enabled_gets_the_allowance() -> None:
    lscpu = "CPU max MHz:  2250.0000\nCPU min MHz:  1500.0000\nFrequency boost:  enabled\n"
    peak = derive_peak(cpuinfo=AMD, lscpu=lscpu, cores=2, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert peak.clock_hz == 4.5e9
    assert peak.clock_source == "lscpu non-boost max 2250 MHz × 2 boost allowance"


def test_lscpu_max_mhz_of_zero_or_garbage_is_no_clock() -> None:
    lscpu = "CPU max MHz:  0\nCPU max MHz:  n/a\nCPU max MHz:  inf\nCPU max MHz:  nan\n"
    peak = derive_peak(cpuinfo=AMD, lscpu=lscpu, cores=2, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert peak.clock_source == "cpu MHz 2445 × 2 boost allowance"


def test_a_cpu_mhz_above_the_model_names_clock_is_kept() -> None:
    boosted = INTEL.replace("cpu MHz\t\t: 2199.998", "cpu MHz\t\t: 3100.000", 1)
    peak = derive_peak(cpuinfo=boosted, cores=2, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert (peak.clock_hz, peak.clock_source) == (6.2e9, "cpu MHz 3100 × 2 boost allowance")


def test_a_model_name_clock_in_mhz() -> None:
    cpuinfo = "processor : 0\nmodel name : Some CPU @ 1800MHz\nflags : sse2\n"
    peak = derive_peak(cpuinfo=cpuinfo, cores=1, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert (peak.clock_hz, peak.clock_source) == (3.6e9, "model name's 1.80 GHz × 2 boost allowance")


# -- x86 ISAs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "isa", "fp64"),
    [
        ("sse sse2 avx avx2 fma avx512f avx512bw", "AVX-512", 32),
        ("sse sse2 avx avx2 fma", "AVX2+FMA", 16),
        ("sse sse2 avx fma", "AVX+FMA", 16),
        ("sse sse2 avx fma4", "AVX+FMA4", 16),
        ("sse sse2 avx avx2", "AVX", 8),  # AVX2 without FMA: still one add and one multiply port
        ("sse sse2 avx", "AVX", 8),
        ("sse sse2 sse4_2", "SSE2", 4),
    ],
)
def test_x86_flops_per_cycle_from_the_flags(flags: str, isa: str, fp64: int) -> None:
    cpuinfo = f"processor : 0\nmodel name : X @ 1.00GHz\nflags : {flags}\n"
    peak = derive_peak(cpuinfo=cpuinfo, cores=1, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert (peak.isa, peak.fp64_per_cycle, peak.fp32_per_cycle) == (isa, fp64, 2 * fp64)
    assert peak.flops(Precision.FP64) == 2e9 * fp64


def test_x86_flags_are_the_union_over_processors() -> None:
    cpuinfo = (
        "processor : 0\nmodel name : X @ 1.00GHz\nflags : sse2 avx avx2 fma\n\n"
        "processor : 1\nmodel name : X @ 1.00GHz\nflags : sse2 avx avx2 fma avx512f\n"
    )
    peak = derive_peak(cpuinfo=cpuinfo, cores=2, machine="x86_64")
    assert isinstance(peak, CpuPeak)
    assert peak.isa == "AVX-512"


def test_x86_flags_from_lscpu_when_cpuinfo_has_none() -> None:
    lscpu = "CPU max MHz: 3000.0000\nFlags: fpu sse sse2 avx avx2 fma\n"
    peak = derive_peak(cpuinfo="", lscpu=lscpu, cores=2, machine="AMD64")
    assert isinstance(peak, CpuPeak)
    assert (peak.isa, peak.clock_hz) == ("AVX2+FMA", 3e9)


@pytest.mark.parametrize(
    ("cpuinfo", "reason"),
    [
        ("processor : 0\ncpu MHz : 1000\n", "no CPU flags in /proc/cpuinfo or lscpu"),
        (
            "processor : 0\ncpu MHz : 1000\nflags : fpu mmx\n",
            "no SIMD extension in the CPU flags (not even SSE2)",
        ),
    ],
)
def test_x86_without_simd_flags_is_unknown(cpuinfo: str, reason: str) -> None:
    assert derive_peak(cpuinfo=cpuinfo, cores=1, machine="x86_64") == reason
    assert peak_of(cpuinfo=cpuinfo, cores=1, machine="x86_64") is None


# -- Arm ---------------------------------------------------------------------------------------

LSCPU_2GHZ = "CPU max MHz: 2000.0000\n"
NEON = "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics"


@pytest.mark.parametrize(
    ("cpuinfo", "sve_bits", "isa", "fp64"),
    [
        pytest.param(arm("0xd0c", features=NEON), None, "NEON", 8, id="neoverse-n1"),
        pytest.param(arm("0xd49"), 128, "SVE 128-bit", 8, id="neoverse-n2"),
        pytest.param(arm("0xd4f"), 128, "SVE 128-bit", 16, id="neoverse-v2"),
        pytest.param(arm("0x001", implementer="0x46"), 512, "SVE 512-bit", 32, id="a64fx"),
        # a core nobody identified: 6 × 128-bit pipes, or 2 pipes of the SVE vector when wider
        pytest.param(arm("0xd85", features=NEON), None, "NEON", 24, id="unknown-neon"),
        pytest.param(arm("0x022", implementer="0x61"), 128, "SVE 128-bit", 24, id="unknown-sve-128"),
        pytest.param(arm("0x999", implementer="0xc0"), 512, "SVE 512-bit", 32, id="unknown-sve-512"),
        pytest.param(arm("0xd0c", "0xd85", features=NEON), None, "NEON", 24, id="big-little-unknown"),
        pytest.param(arm("0xd0c", "0xd40", features=NEON), None, "NEON", 16, id="big-little-known"),
        pytest.param(arm("zz", features=NEON), None, "NEON", 24, id="garbage-part"),
        pytest.param(f"Features : {NEON}\n", None, "NEON", 24, id="no-processor-lines"),
    ],
)
def test_arm_flops_per_cycle(cpuinfo: str, sve_bits: int | None, isa: str, fp64: int) -> None:
    peak = derive_peak(cpuinfo=cpuinfo, lscpu=LSCPU_2GHZ, sve_bits=sve_bits, cores=1, machine="arm64")
    assert isinstance(peak, CpuPeak)
    assert (peak.isa, peak.fp64_per_cycle, peak.fp32_per_cycle) == (isa, fp64, 2 * fp64)


def test_arm_part_without_an_implementer_is_unknown_part() -> None:
    cpuinfo = f"processor : 0\nFeatures : {NEON}\nCPU part : 0xd0c\n"
    peak = derive_peak(cpuinfo=cpuinfo, lscpu=LSCPU_2GHZ, cores=1, machine="aarch64")
    assert isinstance(peak, CpuPeak)
    assert peak.fp64_per_cycle == cpupeak.ARM_DEFAULT_FP64


def test_arm_features_from_lscpu_when_cpuinfo_has_none() -> None:
    peak = derive_peak(cpuinfo="", lscpu=GRAVITON3_LSCPU, cores=4, machine="aarch64")
    assert isinstance(peak, CpuPeak)
    assert (peak.isa, peak.fp64_per_cycle) == ("SVE", 24)


@pytest.mark.parametrize(
    ("cpuinfo", "reason"),
    [
        ("processor : 0\n", "no CPU features in /proc/cpuinfo or lscpu"),
        ("processor : 0\nFeatures : fp evtstrm\n", "no Advanced SIMD (asimd) in the CPU features"),
    ],
)
def test_arm_without_simd_features_is_unknown(cpuinfo: str, reason: str) -> None:
    assert derive_peak(cpuinfo=cpuinfo, lscpu=LSCPU_2GHZ, cores=1, machine="aarch64") == reason


# -- other machines and bad input --------------------------------------------------------------


@pytest.mark.parametrize("machine", ["ppc64le", "riscv64", "armv7l", ""])
def test_an_architecture_without_a_table_is_unknown(machine: str) -> None:
    reason = derive_peak(cpuinfo=AMD, lscpu=LSCPU_2GHZ, cores=1, machine=machine)
    assert reason == f"no FLOP/cycle table for {machine or 'this architecture'}"


def test_cores_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cores must be a positive integer; got 0"):
        derive_peak(cpuinfo=AMD, cores=0, machine="x86_64")


# -- flops, formula, check_rate ----------------------------------------------------------------

PEAK = CpuPeak(2, 4e9, "test", "AVX2+FMA", 16, 32)


@pytest.mark.parametrize("precision", list(Precision))
def test_every_precision_narrower_than_fp64_takes_fp32s_rate(precision: Precision) -> None:
    expected = 128e9 if precision is Precision.FP64 else 256e9
    assert PEAK.flops(precision) == expected


def test_formula_and_rates() -> None:
    assert PEAK.formula() == "2 cores × 4.00 GHz (test) × 16 fp64 FLOP/cycle (AVX2+FMA)"
    assert PEAK.formula(Precision.BF16) == "2 cores × 4.00 GHz (test) × 32 fp32 FLOP/cycle (AVX2+FMA)"
    assert PEAK.rates() == "128 GFLOP/s fp64, 256 GFLOP/s fp32"


def test_check_rate_at_or_below_the_peak_is_silent() -> None:
    assert check_rate(128e9, Precision.FP64, PEAK) is None
    assert check_rate(200e9, Precision.FP32, PEAK) is None
    assert check_rate(1e15, Precision.FP64, None) is None  # unknown peak: nothing to say


def test_check_rate_above_the_peak_names_both_figures() -> None:
    assert check_rate(129e9, Precision.FP64, PEAK) == (
        "129 GFLOP/s fp64 is above this CPU's theoretical peak of 128 GFLOP/s fp64 "
        "(2 cores × 4.00 GHz (test) × 16 fp64 FLOP/cycle (AVX2+FMA)): no CPU runs that fast, so the "
        "FLOP count or the timing is wrong"
    )
    message = check_rate(300e9, Precision.FP16, PEAK)
    assert message is not None
    assert message.startswith("300 GFLOP/s fp16 is above this CPU's theoretical peak of 256 GFLOP/s fp16")
    assert "32 fp32 FLOP/cycle" in message


@pytest.mark.parametrize("rate", [math.inf, math.nan])
def test_check_rate_of_a_rate_that_is_not_finite(rate: float) -> None:
    message = check_rate(rate, Precision.FP64, PEAK)
    assert message == (
        f"a rate of {rate} FLOP/s fp64 is not a finite number: the FLOP count or the timing is wrong"
    )


# -- reading this machine ----------------------------------------------------------------------


@pytest.fixture
def fresh() -> Iterator[None]:
    cpupeak.system_peak.cache_clear()
    yield
    cpupeak.system_peak.cache_clear()


@pytest.fixture
def fake_system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> Path:
    """A Linux machine under ``tmp_path``: AMD's /proc/cpuinfo, two CPUs, no cpufreq, no lscpu."""
    (tmp_path / "cpuinfo").write_text(AMD)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cpupeak, "_PROC_CPUINFO", tmp_path / "cpuinfo")
    monkeypatch.setattr(cpupeak, "_SYS_CPU", tmp_path / "sys")
    monkeypatch.setattr(cpupeak, "_SVE_DEFAULT", tmp_path / "sve_default_vector_length")
    monkeypatch.setattr(cpupeak, "_cpus", lambda: [0, 1])
    monkeypatch.setattr(cpupeak, "_lscpu", lambda: None)
    return tmp_path


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_system_peak_reads_cpuinfo_and_is_cached(fake_system: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[None] = []

    def lscpu() -> str:
        calls.append(None)
        return AMD_LSCPU

    monkeypatch.setattr(cpupeak, "_lscpu", lscpu)
    peak = cpupeak.cpu_peak()
    assert peak == CpuPeak(2, 4890.86e6, "cpu MHz 2445 × 2 boost allowance", "AVX2+FMA", 16, 32)
    assert cpupeak.system_peak() is peak
    assert len(calls) == 1  # no cpufreq max: lscpu was asked, once


def test_system_peak_takes_the_highest_cpufreq_max_and_skips_lscpu(
    fake_system: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(fake_system / "sys/cpu0/cpufreq/cpuinfo_max_freq", "2000000")
    write(fake_system / "sys/cpu1/cpufreq/cpuinfo_max_freq", "3500000")  # big.LITTLE: cpu0 is little
    write(fake_system / "sys/cpu2/cpufreq/cpuinfo_max_freq", "9000000")  # not ours to run on
    write(fake_system / "sys/cpu0/cpufreq/scaling_driver", "intel_pstate")

    def lscpu() -> str:
        raise AssertionError("lscpu is not needed when cpufreq has a max")

    monkeypatch.setattr(cpupeak, "_lscpu", lscpu)
    peak = cpupeak.cpu_peak()
    assert peak is not None
    assert (peak.cores, peak.clock_hz, peak.clock_source) == (2, 3.5e9, "cpufreq max")


@pytest.mark.parametrize(("boost", "clock_hz"), [("1", 4.5e9), ("0", 2.25e9)])
def test_system_peak_acpi_cpufreq_with_boost_on_lists_no_boost_clock(
    fake_system: Path, boost: str, clock_hz: float
) -> None:
    write(fake_system / "sys/cpu0/cpufreq/cpuinfo_max_freq", "2250000")
    write(fake_system / "sys/cpu0/cpufreq/scaling_driver", "acpi-cpufreq")
    write(fake_system / "sys/cpufreq/boost", boost)
    peak = cpupeak.cpu_peak()
    assert peak is not None
    assert peak.clock_hz == clock_hz


def test_system_peak_on_arm_reads_the_sve_vector_length(
    fake_system: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(fake_system / "cpuinfo", arm("0x999", implementer="0xc0"))
    write(fake_system / "sve_default_vector_length", "64")
    write(fake_system / "sys/cpu0/cpufreq/cpuinfo_max_freq", "garbage")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(cpupeak, "_lscpu", lambda: GRAVITON3_LSCPU)
    peak = cpupeak.cpu_peak()
    assert peak is not None
    assert (peak.isa, peak.fp64_per_cycle, peak.clock_hz) == ("SVE 512-bit", 32, 2.6e9)


def test_system_peak_without_cpuinfo(fake_system: Path) -> None:
    (fake_system / "cpuinfo").unlink()
    reason = cpupeak.system_peak()
    assert isinstance(reason, str)
    assert reason.startswith("/proc/cpuinfo cannot be read (")
    assert cpupeak.cpu_peak() is None


@pytest.mark.parametrize("platform_name", ["darwin", "win32"])
def test_system_peak_elsewhere_is_unknown(
    monkeypatch: pytest.MonkeyPatch, fresh: None, platform_name: str
) -> None:
    monkeypatch.setattr(sys, "platform", platform_name)
    assert cpupeak.system_peak() == f"not derived on {platform_name} (Linux only)"
    assert cpupeak.cpu_peak() is None


def test_cpus_are_the_affinity_set_or_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 1}, raising=False)
    assert cpupeak._cpus() == [1, 3]
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert cpupeak._cpus() == [0, 1, 2]
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpupeak._cpus() == [0]


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (subprocess.CompletedProcess(["lscpu"], 0, "CPU max MHz: 1\n", ""), "CPU max MHz: 1\n"),
        (subprocess.CompletedProcess(["lscpu"], 1, "", "lscpu: failed"), None),
        (FileNotFoundError(2, "No such file or directory"), None),
        (subprocess.TimeoutExpired(["lscpu"], 5), None),
    ],
)
def test_lscpu_runs_in_the_c_locale_and_failures_are_none(
    monkeypatch: pytest.MonkeyPatch, outcome: object, expected: str | None
) -> None:
    seen: dict[str, Any] = {}

    def run(argv: list[str], **kwargs: Any) -> object:
        seen.update(kwargs, argv=argv)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(subprocess, "run", run)
    assert cpupeak._lscpu() == expected
    assert seen["argv"] == ["lscpu"]
    assert seen["env"]["LC_ALL"] == "C"
