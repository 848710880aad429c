"""The kernels an LLM engine runs, each a case: its catalogue op and shape, and how to build it on the
GPU. ``test_gpu_llm.py`` times every case under its op; ``ncu_llm.py`` launches the same cases under
Nsight Compute for their DRAM bytes, tensor FLOPs and kernel durations. One list, so the two always
measure the same kernels.

Torch bf16 unless a case says otherwise; the fused norms, rotary embedding, SiLU-and-mul and the fp8
quantization are this folder's Triton kernels (``llm_kernels.py``), one kernel each as vLLM writes
them; the rest are PyTorch's (cuBLAS, SDPA, a gather).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: what a case's ``build(torch)`` returns: the kernel and its arguments (its keyword arguments last, a
#: dict, possibly empty)
Built = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]

#: where the cases' arrays are made: a CPU check of the builders sets "cpu" (with TRITON_INTERPRET=1)
DEVICE = "cuda"


@dataclass(frozen=True)
class Case:
    """One kernel at one shape: ``build(torch)`` makes its arrays on the current GPU and returns the
    call; ``check(torch, built)`` (after one call) raises when its result is wrong."""

    name: str
    op: str
    params: dict[str, Any]
    build: Callable[[Any], Built]
    dtype: str = "bf16"
    #: what the case is beside the op it is judged as (a gather before attention, a loop of GEMMs)
    note: str = ""
    check: Callable[[Any, Built], None] | None = None


def _randn(torch: Any, *shape: int, dtype: Any = None, scale: float = 1.0) -> Any:
    return torch.randn(*shape, device=DEVICE, dtype=dtype or torch.bfloat16) * scale


def _close(torch: Any, got: Any, want: Any, tol: float = 2e-2) -> None:
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


# -- norms, rope, activation, quantization: the Triton kernels ------------------------------------------


def _rms_norm(rows: int, cols: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        from llm_kernels import rms_norm

        x, w = _randn(torch, rows, cols), 1 + 0.1 * _randn(torch, cols)
        return rms_norm, (x, w, torch.empty_like(x)), {}

    return build


def _check_rms_norm(torch: Any, built: Built) -> None:
    _, (x, w, out), _ = built
    xf = x.float()
    _close(torch, out, xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float())


def _add_rms_norm(rows: int, cols: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        from llm_kernels import fused_add_rms_norm

        # in place: every call adds x to the residual again; the values stay finite (a norm's output)
        x, residual, w = _randn(torch, rows, cols), _randn(torch, rows, cols), 1 + 0.1 * _randn(torch, cols)
        return fused_add_rms_norm, (x, residual, w), {}

    return build


def _rope(tokens: int, heads: int, kv_heads: int, head_dim: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        from llm_kernels import rope_cache, rotary_embedding

        q, k = _randn(torch, tokens, heads, head_dim), _randn(torch, tokens, kv_heads, head_dim)
        cache = rope_cache(torch, 8192, head_dim, 500000.0, DEVICE, torch.bfloat16)
        positions = torch.randint(0, 8192, (tokens,), device=DEVICE)
        return rotary_embedding, (positions, q, k, cache), {}

    return build


def _silu_and_mul(rows: int, cols: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        from llm_kernels import silu_and_mul

        x = _randn(torch, rows, 2 * cols)
        return silu_and_mul, (x, torch.empty(rows, cols, device=DEVICE, dtype=torch.bfloat16)), {}

    return build


def _check_silu_and_mul(torch: Any, built: Built) -> None:
    _, (x, out), _ = built
    d = out.shape[1]
    _close(torch, out, torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())


def _fp8_quant(rows: int, cols: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        from llm_kernels import per_token_fp8_quant

        x = _randn(torch, rows, cols)
        out = torch.empty(rows, cols, device=DEVICE, dtype=torch.float8_e4m3fn)
        return per_token_fp8_quant, (x, out, torch.empty(rows, device=DEVICE, dtype=torch.float32)), {}

    return build


def _check_fp8_quant(torch: Any, built: Built) -> None:
    _, (x, out, scales), _ = built
    _close(torch, scales, x.float().abs().amax(-1) / 448.0, tol=1e-3)
    # within an e4m3 step (3 mantissa bits: 1/8) of PyTorch's own rounding of the same quotient
    _close(torch, out, (x.float() / scales[:, None]).to(torch.float8_e4m3fn), tol=0.13)


# -- gathers, GEMMs, attention: PyTorch's kernels -------------------------------------------------------


def _embedding(tokens: int, vocab: int, hidden: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        table = _randn(torch, vocab, hidden)
        ids = torch.randint(0, vocab, (tokens,), device=DEVICE)
        return torch.nn.functional.embedding, (ids, table), {}

    return build


def _linear(m: int, n: int, k: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        x, w = _randn(torch, m, k), _randn(torch, n, k, scale=k**-0.5)
        return torch.mm, (x, w.t()), {"out": torch.empty(m, n, device=DEVICE, dtype=torch.bfloat16)}

    return build


def _check_mm(torch: Any, built: Built) -> None:
    _, (a, b), kwargs = built
    _close(torch, kwargs["out"][:64, :64], a[:64].float() @ b[:, :64].float(), tol=5e-2)


def _moe(tokens: int, experts: int, top_k: int, hidden: int, inter: int) -> Callable[[Any], Built]:
    """The experts of a MoE layer on tokens already routed (sorted by expert, as fused_moe permutes
    them): gate-and-up grouped GEMM, SiLU-and-mul, down grouped GEMM. ``torch._grouped_mm`` where this
    PyTorch runs it, else a loop over the experts (the case's name says which ran)."""

    def build(torch: Any) -> Built:
        from llm_kernels import silu_and_mul

        rows = tokens * top_k
        # balanced routing: every expert gets its share (the catalogue's active = min(rows, experts))
        counts = [rows // experts + (e < rows % experts) for e in range(experts)]
        ends = torch.tensor(counts, device=DEVICE, dtype=torch.int32).cumsum(0).to(torch.int32)
        x = _randn(torch, rows, hidden)
        w13 = _randn(torch, experts, hidden, 2 * inter, scale=hidden**-0.5)
        w2 = _randn(torch, experts, inter, hidden, scale=inter**-0.5)
        act = torch.empty(rows, inter, device=DEVICE, dtype=torch.bfloat16)
        grouped = getattr(torch, "_grouped_mm", None)

        def looped(x: Any) -> Any:
            out, start = torch.empty(rows, hidden, device=DEVICE, dtype=torch.bfloat16), 0
            for e, n in enumerate(counts):
                if n:
                    h = x[start : start + n] @ w13[e]
                    silu_and_mul(h, act[start : start + n])
                    torch.mm(act[start : start + n], w2[e], out=out[start : start + n])
                start += n
            return out

        def fused(x: Any) -> Any:
            h = grouped(x, w13, offs=ends)
            silu_and_mul(h, act)
            return grouped(act, w2, offs=ends)

        if grouped is not None:
            try:
                _close(torch, fused(x)[:8], looped(x)[:8], tol=5e-2)
                return fused, (x,), {}
            except (RuntimeError, TypeError, AssertionError) as exc:  # not on this PyTorch or GPU
                print(f"moe: torch._grouped_mm does not run here ({exc}); a loop over the experts")
        return looped, (x,), {}

    return build


def _paged_decode(
    batch: int, heads: int, kv_heads: int, context: int, head_dim: int, block: int
) -> Callable[[Any], Built]:
    """Decode attention over a paged KV cache: each sequence's blocks gathered through its block table
    (shuffled, as an engine's allocator leaves them), then SDPA with GQA. The gather is a second pass
    over the cache (read, written, read again): the op's floor counts one read."""

    def build(torch: Any) -> Built:
        per_seq = context // block
        pages = batch * per_seq
        k_pages, v_pages = (_randn(torch, pages, block, kv_heads, head_dim) for _ in range(2))
        table = torch.randperm(pages, device=DEVICE).view(batch, per_seq)
        q = _randn(torch, batch, heads, 1, head_dim)

        def paged_attention(q: Any, k_pages: Any, v_pages: Any, table: Any) -> Any:
            k = k_pages[table].view(batch, context, kv_heads, head_dim).transpose(1, 2)
            v = v_pages[table].view(batch, context, kv_heads, head_dim).transpose(1, 2)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)

        return paged_attention, (q, k_pages, v_pages, table), {}

    return build


def _fp8_block_gemm(m: int, n: int, k: int) -> Callable[[Any], Built]:
    """fp8 e4m3 GEMM with DeepSeek-style scales: 1x128 per token for A, 128x128 blocks for B, through
    ``torch._scaled_mm`` (PyTorch 2.9+ on Hopper); the test skips, saying why, where it does not run."""

    def build(torch: Any) -> Built:
        fp8 = torch.float8_e4m3fn
        a = _randn(torch, m, k).to(fp8)
        b = _randn(torch, n, k).to(fp8).t()  # column-major, as cuBLASLt's fp8 GEMM wants its second operand
        # the layouts cuBLASLt's blockwise modes may want: A's (m, k/128) M-major or K-major, B's
        # (k/128, n/128) either way; the first that runs is timed
        a_scales = [torch.ones(k // 128, m, device=DEVICE).t(), torch.ones(m, k // 128, device=DEVICE)]
        b_scales = [
            torch.ones(n // 128, k // 128, device=DEVICE).t(),
            torch.ones(k // 128, n // 128, device=DEVICE),
        ]
        errors = []
        for scale_a in a_scales:
            for scale_b in b_scales:
                kwargs = {"scale_a": scale_a, "scale_b": scale_b, "out_dtype": torch.bfloat16}
                try:
                    torch._scaled_mm(a, b, **kwargs)
                except (RuntimeError, TypeError, ValueError) as exc:
                    errors.append(str(exc).splitlines()[0][:200])
                    continue
                return torch._scaled_mm, (a, b), kwargs
        raise RuntimeError("blockwise torch._scaled_mm does not run here: " + " | ".join(errors))

    return build


def _triton_matmul(n: int) -> Callable[[Any], Built]:
    def build(torch: Any) -> Built:
        from triton_matmul import matmul

        a, b = _randn(torch, n, n), _randn(torch, n, n, scale=n**-0.5)
        return matmul, (a, b, torch.empty(n, n, device=DEVICE, dtype=torch.bfloat16)), {}

    return build


def _check_triton_matmul(torch: Any, built: Built) -> None:
    _, (a, b, out), _ = built
    _close(torch, out[:64, :64], a[:64].float() @ b[:, :64].float(), tol=5e-2)


# -- the set --------------------------------------------------------------------------------------------

HIDDEN = (4096, 8192)
NORM_TOKENS = (1, 64, 4096)
SKINNY_M = (1, 8, 64, 256, 1024)
#: (N, K) of the skinny GEMMs: a square projection, and an MLP's gate-and-up of a 70B-shaped model
SKINNY_NK = ((4096, 4096), (28672, 8192))
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
VOCAB = 128256
FFN = 14336


def cases() -> list[Case]:
    out: list[Case] = []
    for hidden in HIDDEN:
        for tokens in NORM_TOKENS:
            shape = {"rows": tokens, "cols": hidden}
            out.append(
                Case(
                    f"rmsnorm-{tokens}x{hidden}",
                    "rmsnorm",
                    shape,
                    _rms_norm(tokens, hidden),
                    check=_check_rms_norm,
                )
            )
            out.append(
                Case(f"add_rmsnorm-{tokens}x{hidden}", "add_rmsnorm", shape, _add_rms_norm(tokens, hidden))
            )
    for tokens in (1, 256, 4096):
        rope = {"tokens": tokens, "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM}
        out.append(Case(f"rope-{tokens}", "rope", rope, _rope(tokens, HEADS, KV_HEADS, HEAD_DIM)))
        act = {"rows": tokens, "cols": FFN}
        out.append(
            Case(
                f"silu_and_mul-{tokens}", "swiglu", act, _silu_and_mul(tokens, FFN), check=_check_silu_and_mul
            )
        )
        quant = {"rows": tokens, "cols": 4096}
        out.append(
            Case(f"fp8_quant-{tokens}", "quantize", quant, _fp8_quant(tokens, 4096), check=_check_fp8_quant)
        )
        emb = {"tokens": tokens, "vocab": VOCAB, "hidden": 4096}
        out.append(Case(f"embedding-{tokens}", "embedding", emb, _embedding(tokens, VOCAB, 4096)))
    for n, k in SKINNY_NK:
        for m in SKINNY_M:
            out.append(
                Case(f"gemm-{m}x{n}x{k}", "gemm", {"M": m, "N": n, "K": k}, _linear(m, n, k), check=_check_mm)
            )
    for tokens in (16, 512):
        moe = {"tokens": tokens, "experts": 8, "top_k": 2, "hidden": 4096, "intermediate": FFN}
        out.append(
            Case(
                f"moe-{tokens}",
                "moe",
                moe,
                _moe(tokens, 8, 2, 4096, FFN),
                note="torch._grouped_mm (or a loop) + Triton SiLU-and-mul: three kernels",
            )
        )
    paged = {
        "batch": 16,
        "heads": HEADS,
        "kv_heads": KV_HEADS,
        "seq_q": 1,
        "seq_k": 4096,
        "head_dim": HEAD_DIM,
    }
    out.append(
        Case(
            "paged_decode-16x4096",
            "attention",
            paged,
            _paged_decode(16, HEADS, KV_HEADS, 4096, HEAD_DIM, 16),
            note="a block-table gather (a second pass over the cache) + SDPA",
        )
    )
    block = {"M": 4096, "N": 4096, "K": 4096, "c_dtype": "bf16", "group_size": 128, "scale_dtype": "fp32"}
    out.append(
        Case(
            "fp8_block_gemm-4096",
            "gemm",
            block,
            _fp8_block_gemm(4096, 4096, 4096),
            dtype="fp8_e4m3",
            note="the catalogue counts one scale per 128 of K for B; 128x128 blocks store 1/128 of that",
        )
    )
    out.append(
        Case(
            "triton_matmul-4096",
            "gemm",
            {"M": 4096, "N": 4096, "K": 4096},
            _triton_matmul(4096),
            check=_check_triton_matmul,
        )
    )
    return out
