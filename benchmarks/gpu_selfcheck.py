"""Does the CUDA backend agree with the other GPU timers? For whoever has a GPU.

For each case (a 256 MiB device-to-device copy, a 4096³ float32 matmul, a 4 KiB elementwise kernel
short enough to be launch-bound, and the example project's CuPy kernels) it measures the median
per-call time with:

- the engine over :class:`~pytest_roofline.timing.cuda.CudaBackend`, warm (``cache=WARM``) on the
  default stream (the reference every ratio divides by: ``cupyx.profiler.benchmark`` cannot flush;
  its timer is CUPTI where cupti-python is installed, else events); with events;
  on a side stream; with ``block="off"`` (no blocking kernel: what hiding launch overhead is worth)
  and ``block="on"`` (every sampling window held, as ``auto`` does once a kernel proved asynchronous);
  in graph mode (cases that can be captured: no cuBLAS); and cold (``cache=FLUSHED``);
- ``cupyx.profiler.benchmark`` (``gpu_times``), warm;
- ``torch.cuda.Event`` pairs around back-to-back calls, warm, when PyTorch is installed;
- ``triton.testing.do_bench`` (``return_mode="median"``), which clears the L2 before every call,
  so it is set beside the engine's cold figure, when Triton is installed.

Then one table: each timer's median and its ratio to the engine's warm default-stream median; the
GPU's latency floor (:func:`~pytest_roofline.timing.cuda.latency_floor`) and what NVML saw of its
clocks over the whole run (``pytest-roofline[nvml]``). ``--json PATH`` writes the same as JSON.
This was written on a machine without a GPU: no figure from it has been seen yet.

Run from the repository root: ``python benchmarks/gpu_selfcheck.py [--device N] [--json PATH]``.
Without CuPy or without a GPU it prints one line saying so and exits with status 2. To check more
kernels, append :class:`Case` objects to :data:`CASES`, or call :func:`main` with your own list.

``--fake`` runs the whole self-check on this machine against the test suite's fakes
(``tests/fake_cupy.py``, ``tests/fake_cupti.py``, ``tests/fake_timers.py``: a fake CuPy, cupyx and
CUPTI, ``torch.cuda.Event`` and ``triton.testing.do_bench``) and exits 0 when every timer ran: its
figures mean nothing, but a first real run cannot die of a Python error in this script or the
backend (CI runs it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from pytest_roofline.model.units import seconds as format_seconds
from pytest_roofline.timing import FLUSHED, WARM, Policy, measure
from pytest_roofline.timing.cuda import CudaBackend, device_count, latency_floor, using_device

#: cupyx.profiler.benchmark settings: calls timed, calls untimed first, and a wall-time cap (seconds)
CUPYX_REPEAT = 200
CUPYX_WARMUP = 10
CUPYX_MAX_DURATION_S = 2.0
#: calls between one torch.cuda.Event pair, and pairs taken
TORCH_CALLS, TORCH_PAIRS = 20, 25
#: the reference column every ratio divides by
REFERENCE = "engine warm"

Kernel = Callable[..., object]


@dataclass(frozen=True)
class Case:
    """A kernel to time: ``setup(cupy)`` builds its inputs on the current device, returns ``(fn, args)``."""

    name: str
    setup: Callable[[Any], tuple[Kernel, tuple[object, ...]]]
    #: False for kernels that cannot be captured into a CUDA graph (cuBLAS through CuPy)
    graph: bool = True


def _copy_256_mib(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
    src = cupy.ones(64 * 2**20, dtype=cupy.float32)
    return cupy.copyto, (cupy.empty_like(src), src)


def _short_elementwise(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
    x = cupy.ones(1024, dtype=cupy.float32)
    out = cupy.empty_like(x)

    def scale(x: Any, out: Any) -> None:
        cupy.multiply(x, 2, out=out)

    return scale, (x, out)


def _matmul_4096_f32(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
    n = 4096
    a, b = cupy.ones((n, n), dtype=cupy.float32), cupy.ones((n, n), dtype=cupy.float32)

    def matmul(a: Any, b: Any, out: Any) -> None:
        cupy.matmul(a, b, out=out)

    return matmul, (a, b, cupy.empty((n, n), dtype=cupy.float32))


def _example(
    kernel: str, *shapes: tuple[int, ...], lead: tuple[object, ...] = (), tail: tuple[object, ...] = ()
) -> Callable[[Any], tuple[Kernel, tuple[object, ...]]]:
    """A case for one of example_project's CuPy kernels: ``lead``, float32 arrays of ``shapes``, ``tail``."""

    def setup(cupy: Any) -> tuple[Kernel, tuple[object, ...]]:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "example_project"))
        from kernels import cupy_backend

        arrays = tuple(cupy.random.random(shape, dtype=cupy.float32) for shape in shapes)
        return getattr(cupy_backend, kernel), (*lead, *arrays, *tail)

    return setup


_N = 1 << 24
_ROWS, _COLS = 8192, 1024
_COL, _MATRIX, _MATRIX_T = (_COLS,), (_ROWS, _COLS), (_COLS, _ROWS)

CASES: list[Case] = [
    Case("copy 256 MiB d2d", _copy_256_mib),
    Case("matmul 4096³ f32", _matmul_4096_f32, graph=False),
    Case("short 4 KiB scale", _short_elementwise),
    # the example project's kernels, good and bad side by side
    Case("example saxpy vec4", _example("saxpy", (_N,), (_N,), lead=(0.5,))),
    Case(
        "example saxpy stride 16", _example("saxpy_strided", (16 * _N,), (16 * _N,), lead=(0.5,), tail=(16,))
    ),
    Case("example layernorm fused", _example("layernorm", _MATRIX, _COL, _COL, _MATRIX)),
    Case("example layernorm naive", _example("layernorm_naive", _MATRIX, _COL, _COL, _MATRIX)),
    Case("example gemm naive 2048³", _example("gemm_naive", (2048, 2048), (2048, 2048), (2048, 2048))),
    Case("example transpose tiled", _example("transpose", _MATRIX, _MATRIX_T)),
    Case("example transpose naive", _example("transpose_naive", _MATRIX, _MATRIX_T)),
    Case("example bias_relu", _example("bias_relu", _MATRIX, _COL, _MATRIX)),
]


@dataclass
class Row:
    """One case's medians (seconds per call) by timer, and the notes of timers that could not run it."""

    case: str
    medians: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def ratios(self) -> dict[str, float]:
        ref = self.medians.get(REFERENCE)
        return {name: t / ref for name, t in self.medians.items()} if ref else {}


def _engine(fn: Kernel, args: tuple[object, ...], backend: CudaBackend, *, flush: bool = False) -> float:
    return measure(fn, *args, policy=Policy(), backend=backend, cache=FLUSHED if flush else WARM).time_s


def _torch_events(torch: Any, fn: Kernel, args: tuple[object, ...]) -> float:
    for _ in range(TORCH_CALLS):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(TORCH_PAIRS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(TORCH_CALLS):
            fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / TORCH_CALLS)  # ms per pair -> s per call
    return statistics.median(times)


def check(case: Case, device: int, cupy: Any, benchmark: Callable[..., Any], extra: dict[str, Any]) -> Row:
    """Every timer's median for ``case`` on ``device``; a timer that fails is noted, not fatal."""
    row = Row(case.name)
    with using_device(device):
        try:
            fn, args = case.setup(cupy)
        except Exception as exc:  # a case that cannot be built is a finding too, not the end of the run
            row.notes["setup"] = f"{type(exc).__name__}: {exc}"
            return row
        side = cupy.cuda.Stream(non_blocking=True)
        timers: list[tuple[str, Callable[[], float]]] = [
            (REFERENCE, lambda: _engine(fn, args, CudaBackend(device))),
            ("engine side stream", lambda: _engine(fn, args, CudaBackend(device, stream=side))),
            ("engine events", lambda: _engine(fn, args, CudaBackend(device, timer="events"))),
            ("engine block=off", lambda: _engine(fn, args, CudaBackend(device, block="off", timer="events"))),
            ("engine block=on", lambda: _engine(fn, args, CudaBackend(device, block="on", timer="events"))),
            ("engine cold", lambda: _engine(fn, args, CudaBackend(device), flush=True)),
        ]
        if case.graph:
            timers.append(("engine graph", lambda: _engine(fn, args, CudaBackend(device, graph=True))))

        def cupyx() -> float:
            theirs = benchmark(
                fn, args, n_repeat=CUPYX_REPEAT, n_warmup=CUPYX_WARMUP,
                max_duration=CUPYX_MAX_DURATION_S, devices=(device,),
            )  # fmt: skip
            # gpu_times: seconds, one row per device in ``devices``, one column per repeat
            return statistics.median(float(t) for t in theirs.gpu_times[0])

        timers.append(("cupyx", cupyx))
        if "torch" in extra:
            timers.append(("torch.cuda.Event", lambda: _torch_events(extra["torch"], fn, args)))
        if "do_bench" in extra:
            do_bench = extra["do_bench"]
            timers.append(
                ("triton do_bench (cold)", lambda: do_bench(lambda: fn(*args), return_mode="median") / 1e3)
            )
        for name, timer in timers:
            try:
                row.medians[name] = timer()
            except Exception as exc:  # one timer's failure (graph capture refused, say) is a finding
                row.notes[name] = f"{type(exc).__name__}: {exc}"
    return row


def table(rows: Sequence[Row]) -> str:
    names = list(dict.fromkeys(name for row in rows for name in (*row.medians, *row.notes)))
    lines = [f"{'case':<26}" + "".join(f"{name:>26}" for name in names)]
    for row in rows:
        ratios = row.ratios()
        cells = []
        for name in names:
            if name in row.medians:
                cells.append(f"{format_seconds(row.medians[name])} ({ratios.get(name, float('nan')):.3f})")
            else:
                cells.append("failed" if name in row.notes else "-")
        lines.append(f"{row.case:<26}" + "".join(f"{cell:>26}" for cell in cells))
    for row in rows:
        lines.extend(f"  {row.case}, {name}: {note}" for name, note in row.notes.items())
    return "\n".join(lines)


def _optional_timers() -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available():
            extra["torch"] = torch
    if importlib.util.find_spec("triton") is not None:
        from triton.testing import do_bench

        extra["do_bench"] = do_bench
    return extra


def main(argv: Sequence[str] | None = None, cases: Sequence[Case] = CASES) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", type=int, default=0, metavar="N", help="GPU index (default: 0)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    parser.add_argument(
        "--fake",
        action="store_true",
        help="run against the test suite's fake CuPy and timers (no GPU needed)",
    )
    options = parser.parse_args(argv)
    if options.fake:
        return _run_faked(options, cases)

    if importlib.util.find_spec("cupy") is None:
        print(
            "no CuPy: nothing to check (pip install 'pytest-roofline[cuda12]' or '[cuda13]')", file=sys.stderr
        )
        return 2
    if device_count() == 0:
        print("no GPU: nothing to check (cupy.cuda.runtime.getDeviceCount() == 0)", file=sys.stderr)
        return 2
    return _run(options, cases, _optional_timers())


def _run_faked(options: argparse.Namespace, cases: Sequence[Case]) -> int:
    """The whole self-check over ``tests/fake_cupy.py``'s device; 1 when a timer failed."""
    import pytest

    tests = str(Path(__file__).resolve().parents[1] / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from fake_cupti import FakeCupti
    from fake_cupy import FakeCupy
    from fake_timers import fake_do_bench, fake_torch

    print(
        "--fake: the test suite's fake CuPy, cupyx, CUPTI, torch.cuda.Event and do_bench;"
        " no figure means anything"
    )
    with pytest.MonkeyPatch.context() as patch:
        world = FakeCupy(device_count=options.device + 1, kernel_ms=0.01).install(patch)
        FakeCupti(world).install(
            patch
        )  # the default timer is then CUPTI's, as where cupti-python is installed
        rows: list[Row] = []
        status = _run(options, cases, {"torch": fake_torch(world), "do_bench": fake_do_bench(world)}, rows)
    failed = [f"{row.case}, {name}" for row in rows for name in row.notes]
    if failed:
        print(f"--fake: {len(failed)} timer(s) failed on the fakes: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return status


def _run(
    options: argparse.Namespace, cases: Sequence[Case], extra: dict[str, Any], rows: list[Row] | None = None
) -> int:
    import cupy
    from cupyx.profiler import benchmark

    rows = [] if rows is None else rows
    backend = CudaBackend(options.device)
    print(f"CuPy {cupy.__version__}; device {options.device}: {backend.device_name}")
    print(f"timer: {backend.timer_note}")
    print(f"blocking kernel: {'on' if backend.block else 'off (' + backend.block_note + ')'}")
    print(f"optional timers: {', '.join(sorted(extra)) or 'none (no PyTorch with CUDA, no Triton)'}")
    floor = latency_floor(options.device)
    print(f"latency floor: {format_seconds(floor.floor_s)} ({floor.note})")
    graph_floor = latency_floor(options.device, graph=True)
    print(f"latency floor, graph mode: {format_seconds(graph_floor.floor_s)} ({graph_floor.note})")
    with backend.watch_clocks(interval_s=0.1) as watcher:
        for case in cases:
            rows.append(check(case, options.device, cupy, benchmark, extra))
            print(f"  measured {case.name}", flush=True)
    print(f"ratios: each timer's median over {REFERENCE!r}'s")
    print(table(rows))
    print(f"clocks: {watcher.log.summary()}")
    if options.json:
        Path(options.json).write_text(
            json.dumps(
                {
                    "device": backend.device_name,
                    "cupy": cupy.__version__,
                    "reference": REFERENCE,
                    "blocking_kernel": backend.block_note or "on",
                    "latency_floor_s": floor.floor_s,
                    "latency_floor_graph_s": graph_floor.floor_s,
                    "event_pair_s": floor.event_pair_s,
                    "clocks": {
                        "watched": watcher.log.watched,
                        "note": watcher.log.note,
                        "min_sm_mhz": watcher.log.min_sm_mhz,
                        "max_sm_mhz": watcher.log.max_sm_mhz,
                        "throttled": list(watcher.log.reasons),
                        "events": list(watcher.log.events),
                    },
                    "rows": [
                        {"case": r.case, "median_s": r.medians, "ratio": r.ratios(), "failed": r.notes}
                        for r in rows
                    ],
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
