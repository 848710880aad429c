"""The self-check on a GPU: the engine beside the other GPU timers, kernel by kernel (:data:`CASES`).

The engine in each of its modes, cupyx, ``torch.cuda.Event``, Triton's ``do_bench`` and a replayed CUDA
graph, in alternating rounds (:mod:`.interleave`). Why: docs/methodology.md ("Timers in the self-check").
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from ...model.policy import Policy
from ...model.stats import Stats
from ...timing.base import Kernel
from ...timing.cuda.backend import CudaBackend
from .compare import SETUP, CaseResult, Rule, Timing
from .interleave import ROUNDS, RoundTimer, interleave, round_policy, share_count

#: the engine's figures other timers are set beside
WARM, COLD, GRAPH = "engine warm", "engine cold", "engine graph"
#: the engine's own timers: a failure of one of them is a finding (exit 1)
ENGINE_TIMERS = frozenset(
    {WARM, "engine events", "engine side stream", "engine block=off", "engine block=on", COLD, GRAPH}
)
#: floors (:mod:`.compare`), warm, cold and for a replayed graph (whose own launch is a larger share
#: of a few-µs kernel): the drift within a round that alternating rounds do not cancel
WARM_FLOOR, COLD_FLOOR, GRAPH_FLOOR = 0.03, 0.05, 0.10
#: warm and cold comparisons of kernels shorter than this are shown, not judged
MIN_JUDGED_S = 100e-6
# the budgets below are a kernel's over all rounds; each round takes a ``rounds``-th of it
#: the engine's time budget per timer here (the kernels are short and steady)
MAX_TIME_S = 0.5
#: calls between one event pair (and calls untimed before the first), and pairs taken
#: (torch.cuda.Event, cupyx's repeats, and the graph replay's)
EVENT_CALLS, EVENT_PAIRS = 20, 25
#: cupyx.profiler.benchmark settings: repeats timed (of EVENT_CALLS calls each), repeats untimed first,
#: and a wall-time cap (seconds)
CUPYX_REPEAT, CUPYX_WARMUP, CUPYX_MAX_DURATION_S = EVENT_PAIRS, 2, 1.0
#: do_bench's warm-up and timing budgets, in milliseconds (its defaults)
DO_BENCH_WARMUP_MS, DO_BENCH_REP_MS = 25.0, 100.0
#: the kernel's calls captured into the one graph replayed between two events
GRAPH_CALLS = 20
#: what do_bench zeroes before each call (Triton's get_empty_cache_for_benchmark: 256 MiB of int32)
DO_BENCH_CACHE_BYTES = 256 * 2**20


@dataclass(frozen=True, slots=True)
class GpuCase:
    """A kernel to time: ``setup(cupy)`` builds it and its arguments on the current device."""

    name: str
    setup: Callable[[Any], tuple[Kernel, tuple[object, ...]]]
    #: False for kernels that cannot be captured into a CUDA graph (cuBLAS through CuPy)
    graph: bool = True


def _copy_256_mib(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
    src = cupy.ones(64 * 2**20, dtype=cupy.float32)
    return cupy.copyto, (cupy.empty_like(src), src)


def _matmul_4096_f32(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
    n = 4096
    a, b = cupy.ones((n, n), dtype=cupy.float32), cupy.ones((n, n), dtype=cupy.float32)

    def matmul(a: Any, b: Any, out: Any) -> None:
        cupy.matmul(a, b, out=out)

    return matmul, (a, b, cupy.empty((n, n), dtype=cupy.float32))


def _scale(elements: int) -> Callable[[Any], tuple[Kernel, tuple[object, ...]]]:
    def setup(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
        x = cupy.ones(elements, dtype=cupy.float32)
        out = cupy.empty_like(x)

        def scale(x: Any, out: Any) -> None:
            cupy.multiply(x, 2, out=out)

        return scale, (x, out)

    return setup


CASES: tuple[GpuCase, ...] = (
    GpuCase("copy 256 MiB d2d", _copy_256_mib),
    GpuCase("matmul 4096³ f32", _matmul_4096_f32, graph=False),
    GpuCase("scale 8 MiB", _scale(2**21)),
    GpuCase("scale 4 KiB", _scale(1024)),
)


def rules(l2_bytes: int, bandwidth: float) -> dict[str, Rule]:
    """How each timer is judged on a GPU with ``l2_bytes`` of L2 and ``bandwidth`` bytes/s of DRAM."""
    warm = Rule(WARM, WARM_FLOOR, MIN_JUDGED_S)
    write_back_s = min(l2_bytes, DO_BENCH_CACHE_BYTES) / bandwidth
    do_bench = Rule(
        COLD,
        COLD_FLOOR,
        MIN_JUDGED_S,
        allowance_s=write_back_s,
        allowance_note=f"do_bench clears the L2 by writing {DO_BENCH_CACHE_BYTES >> 20} MiB: writing back"
        f" up to {l2_bytes / 2**20:.0f} MiB of dirty lines may add up to {write_back_s * 1e6:.1f} µs"
        " (L2 / DRAM bandwidth) to its window; the engine's flush reads",
    )
    return {
        "engine events": warm,
        "engine side stream": warm,
        "engine block=off": warm,
        "engine block=on": warm,
        "cupyx benchmark": warm,
        "torch.cuda.Event": warm,
        "triton do_bench (cold)": do_bench,
        "graph replay, events": Rule(GRAPH, GRAPH_FLOOR),
    }


def time_case(
    case: GpuCase,
    index: int,
    cupy: Any,
    benchmark: Callable[..., Any],
    extra: Mapping[str, Any],
    rounds: int = ROUNDS,
) -> CaseResult:
    """Every timer's rounds for ``case`` on GPU ``index``, ``rounds`` of them, interleaved;
    ``extra``: ``torch`` and ``do_bench`` where they are available."""
    from ...timing.cuda.loading import using_device

    with using_device(index):
        try:
            fn, args = case.setup(cupy)
        except Exception as exc:  # a case that cannot be built is a finding, not the end of the run
            return CaseResult(case.name, (Timing(SETUP, (), f"{type(exc).__name__}: {exc}"),))
        side = cupy.cuda.Stream(non_blocking=True)

        def engine(flush: bool = False, **options: Any) -> RoundTimer:
            # one backend for every round, built in the first (where its failure is the timer's)
            backend = functools.cache(lambda: CudaBackend(index, **options))
            policy = round_policy(Policy(max_time_s=MAX_TIME_S), rounds)
            return lambda: _engine(fn, args, backend(), policy, flush=flush)

        def calls(*args: Any) -> None:
            for _ in range(EVENT_CALLS):
                fn(*args)

        def cupyx() -> Stats:
            theirs = benchmark(
                calls, args, n_repeat=share_count(CUPYX_REPEAT, rounds),
                n_warmup=share_count(CUPYX_WARMUP, rounds),
                max_duration=CUPYX_MAX_DURATION_S / rounds, devices=(index,),
            )  # fmt: skip
            # gpu_times: seconds, one row per device in ``devices``, one column per repeat
            return Stats.from_samples(float(t) / EVENT_CALLS for t in theirs.gpu_times[0])

        timers: list[tuple[str, RoundTimer]] = [
            (WARM, engine()),
            ("engine events", engine(timer="events")),
            ("engine side stream", engine(stream=side)),
            ("engine block=off", engine(block="off", timer="events")),
            ("engine block=on", engine(block="on", timer="events")),
            (COLD, engine(flush=True)),
            ("cupyx benchmark", cupyx),
        ]
        torch = extra.get("torch")
        if torch is not None:
            timers.append(("torch.cuda.Event", lambda: torch_events(torch, index, fn, args, rounds)))
            do_bench = extra.get("do_bench")
            if do_bench is not None:
                cold = lambda: triton_do_bench(torch, do_bench, index, fn, args, rounds)  # noqa: E731
                timers.append(("triton do_bench (cold)", cold))
        if case.graph:
            timers.append((GRAPH, engine(graph=True)))
            timers.append(("graph replay, events", graph_replay(cupy, fn, args, rounds)))
        return interleave(case.name, timers, rounds)


def _engine(fn: Kernel, args: tuple[object, ...], backend: Any, policy: Policy, *, flush: bool) -> Stats:
    from ...timing.cache import FLUSHED, WARM
    from ...timing.engine import measure

    return measure(fn, *args, policy=policy, backend=backend, cache=FLUSHED if flush else WARM).stats


def torch_events(torch: Any, index: int, fn: Kernel, args: tuple[object, ...], rounds: int = ROUNDS) -> Stats:
    """A round's share of :data:`EVENT_PAIRS` ``torch.cuda.Event`` pairs around :data:`EVENT_CALLS`
    back-to-back calls (after its share of as many untimed calls), on GPU ``index``'s current
    PyTorch stream (``torch.cuda.device(index)``: PyTorch's current device is not CuPy's)."""
    with torch.cuda.device(index):
        for _ in range(share_count(EVENT_CALLS, rounds)):
            fn(*args)
        torch.cuda.synchronize()
        times = []
        for _ in range(share_count(EVENT_PAIRS, rounds)):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(EVENT_CALLS):
                fn(*args)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / EVENT_CALLS)  # ms per pair -> s per call
    return Stats.from_samples(times)


def triton_do_bench(
    torch: Any,
    do_bench: Callable[..., Any],
    index: int,
    fn: Kernel,
    args: tuple[object, ...],
    rounds: int = ROUNDS,
) -> Stats:
    """``do_bench``'s every call (``return_mode="all"``, Triton 3.2+; its median alone, one figure,
    where the installed Triton refuses that) with a round's share of its default warm-up and timing
    budgets, on GPU ``index``: its cache buffer and its events are on PyTorch's current device."""
    budget = {"warmup": DO_BENCH_WARMUP_MS / rounds, "rep": DO_BENCH_REP_MS / rounds}
    with torch.cuda.device(index):
        try:
            times = do_bench(lambda: fn(*args), return_mode="all", **budget)
        except (AssertionError, ValueError):  # older Triton: min, max, mean or median only
            times = do_bench(lambda: fn(*args), return_mode="median", **budget)
    samples = [times] if isinstance(times, (int, float)) else list(times)
    return Stats.from_samples(float(t) / 1e3 for t in samples)


def graph_replay(cupy: Any, fn: Kernel, args: tuple[object, ...], rounds: int = ROUNDS) -> RoundTimer:
    """:data:`GRAPH_CALLS` calls captured into one CUDA graph on a non-blocking CuPy stream (in the
    first round), replayed between an event pair a round's share of :data:`EVENT_PAIRS` times,
    after one untimed replay: graph mode as do_bench_cudagraph times it."""
    pairs = share_count(EVENT_PAIRS, rounds)
    captured = functools.cache(lambda: _capture(cupy, fn, args))

    def replay() -> Stats:
        stream, graph = captured()
        with stream:
            graph.launch(stream)
            stream.synchronize()
            times = []
            for _ in range(pairs):
                start, end = cupy.cuda.Event(), cupy.cuda.Event()
                start.record(stream)
                graph.launch(stream)
                end.record(stream)
                end.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3 / GRAPH_CALLS)
        return Stats.from_samples(times)

    return replay


def _capture(cupy: Any, fn: Kernel, args: tuple[object, ...]) -> tuple[Any, Any]:
    """A non-blocking stream and a graph of :data:`GRAPH_CALLS` calls captured on it."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        fn(*args)  # module loading and pool growth belong outside the capture
        stream.synchronize()
        stream.begin_capture()
        try:
            for _ in range(GRAPH_CALLS):
                fn(*args)
        except BaseException:
            with suppress(Exception):  # leave capture mode; the kernel's error is the one to see
                stream.end_capture()
            raise
        return stream, stream.end_capture()


def optional_timers() -> dict[str, Any]:
    """PyTorch (when it has CUDA) and Triton's ``do_bench`` (with it), where installed."""
    import importlib
    import importlib.util

    extra: dict[str, Any] = {}
    if importlib.util.find_spec("torch") is None:
        return extra
    torch = importlib.import_module("torch")
    if not torch.cuda.is_available():
        return extra
    extra["torch"] = torch
    if importlib.util.find_spec("triton") is not None:
        extra["do_bench"] = importlib.import_module("triton.testing").do_bench
    return extra
