"""Compile-time checks of the example project's CUDA kernels (no GPU, no CuPy needed).

Every source in ``example_project/kernels/cuda_src.py`` must compile with ``nvcc --ptx`` for sm_80
and sm_90, define the ``extern "C"`` kernels it lists, and show in its PTX exactly what its variant
claims: the vectorized kernels issue 128-bit global loads and stores and the naive ones do not,
the tiled transpose stages through shared memory behind a barrier, the fused layernorm reduces
with warp shuffles. Skipped, saying why, where nvcc is not on PATH.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO_ROOT

ARCHS = ("sm_80", "sm_90")
CUDA_SRC = REPO_ROOT / "example_project" / "kernels" / "cuda_src.py"

#: How each claim shows in PTX. A predicate guard (``@%p1``) may precede an instruction.
_GUARD = r"^\s*(?:@!?%\w+\s+)?"
PATTERNS: dict[str, re.Pattern[str]] = {
    "v4_global_loads": re.compile(_GUARD + r"ld\.global(?:\.\w+)*\.v4\.", re.MULTILINE),
    "v4_global_stores": re.compile(_GUARD + r"st\.global(?:\.\w+)*\.v4\.", re.MULTILINE),
    "shared_memory": re.compile(r"\.shared\b"),
    "bar_sync": re.compile(_GUARD + r"(?:bar|barrier)(?:\.cta)?\.sync\b", re.MULTILINE),
    "warp_shuffle": re.compile(_GUARD + r"shfl\.sync\b", re.MULTILINE),
}


def _load_cuda_src() -> ModuleType:
    """Import cuda_src.py by path: the plugin's suite must not need the example importable."""
    spec = importlib.util.spec_from_file_location("_roofline_example_cuda_src", CUDA_SRC)
    assert spec is not None, f"cannot load {CUDA_SRC}"
    assert spec.loader is not None, f"cannot load {CUDA_SRC}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


cuda_src = _load_cuda_src()
SOURCES = cuda_src.CUDA_SOURCES
NAMES = sorted(SOURCES)


@dataclass(frozen=True, slots=True)
class Compiled:
    ptx: str | None  # None when nvcc failed
    log: str


def _compile(nvcc: str, workdir: Path, name: str, arch: str) -> Compiled:
    source = workdir / f"{name}.{arch}.cu"
    target = workdir / f"{name}.{arch}.ptx"
    source.write_text(SOURCES[name].code)
    cmd = [nvcc, "--ptx", f"-arch={arch}", "-o", str(target), str(source)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return Compiled(None, f"{' '.join(cmd)}: timed out after 300 s")
    log = f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}"
    return Compiled(target.read_text() if done.returncode == 0 else None, log)


@pytest.fixture(scope="module")
def ptx(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Compiled]:
    """Every (source, arch) compiled once per module, in parallel (~0.4 s of nvcc each)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH: the PTX checks need the CUDA toolkit (not a GPU)")
    workdir = tmp_path_factory.mktemp("ptx")
    jobs = [(name, arch) for name in NAMES for arch in ARCHS]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        compiled = list(pool.map(lambda job: _compile(nvcc, workdir, *job), jobs))
    return dict(zip(jobs, compiled, strict=True))


def _compiled_ptx(ptx: dict[tuple[str, str], Compiled], name: str, arch: str) -> str:
    result = ptx[name, arch]
    if result.ptx is None:
        pytest.fail(f"nvcc could not compile {name} for {arch}:\n{result.log}", pytrace=False)
    return result.ptx


def test_every_claim_has_a_ptx_pattern() -> None:
    assert set(PATTERNS) == set(cuda_src.CLAIMS)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_source_compiles_and_defines_its_kernels(
    ptx: dict[tuple[str, str], Compiled], name: str, arch: str
) -> None:
    text = _compiled_ptx(ptx, name, arch)
    entries = set(re.findall(r"\.entry\s+(\w+)\s*\(", text))
    assert entries == set(SOURCES[name].kernels), f"{name} ({arch}) defines {sorted(entries)}"


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_ptx_shows_what_the_variant_claims(
    ptx: dict[tuple[str, str], Compiled], name: str, arch: str
) -> None:
    text = _compiled_ptx(ptx, name, arch)
    wrong = [
        f"{claim}: claimed {claimed}, PTX shows {not claimed}"
        for claim, claimed in SOURCES[name].claims.items()
        if bool(PATTERNS[claim].search(text)) != claimed
    ]
    assert not wrong, f"{name} ({arch}): " + "; ".join(wrong)


def test_patterns_tell_vector_from_scalar_accesses() -> None:
    """The patterns themselves, on PTX lines as nvcc writes them."""
    assert PATTERNS["v4_global_loads"].search("\tld.global.nc.v4.f32 {%f1,%f2,%f3,%f4}, [%rd8];")
    assert PATTERNS["v4_global_loads"].search("\t@%p1 ld.global.v4.f32 \t{%f6, %f7, %f8, %f9}, [%rd17];")
    assert not PATTERNS["v4_global_loads"].search("\tld.global.nc.f32 \t%f22, [%rd15];")
    assert not PATTERNS["v4_global_loads"].search("\tld.shared.v4.f32 \t{%f1,%f2,%f3,%f4}, [%r1];")
    assert PATTERNS["v4_global_stores"].search("\tst.global.v4.f32 \t[%rd14], {%f17, %f16, %f15, %f14};")
    assert not PATTERNS["v4_global_stores"].search("\tst.global.f32 \t[%rd43], %f29;")
    assert PATTERNS["bar_sync"].search("\tbar.sync \t0;")
    assert PATTERNS["bar_sync"].search("\tbarrier.sync.aligned \t0;")  # the PTX ISA's other spelling
    assert PATTERNS["warp_shuffle"].search("\tshfl.sync.bfly.b32 \t%r21|%p3, %r17, %r19, %r18, %r20;")
