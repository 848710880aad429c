"""The self-check on this CPU: the engine's warm median for a few kernels beside :mod:`timeit`'s and,
where it is installed, pytest-benchmark's (its ``BenchmarkFixture``, driven in-process).

Every timer reads the clock it is given, so the tests drive all three with one fake clock. The
kernels run from 0.1 to 10 ms on any CPU in use today, long enough for every timer to time a call
of its own: under :data:`MIN_JUDGED_S` they would still be shown, not judged.
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
import time
import timeit
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...model.policy import Policy
from ...model.stats import Stats
from ...timing.base import Backend, Kernel
from .compare import SETUP, CaseResult, Report, Rule, Timing, compare, run_timers, verdict

#: the engine's figure every other timer is set beside
ENGINE = "engine warm"
#: two CPU timers' medians differ by this much without either being wrong: drift between the two
#: measurements (frequency, a neighbour's load); benchmarks/cpu_accuracy.py's target
CPU_FLOOR = 0.05
#: kernels shorter than this (by the engine's median) are shown, not judged
MIN_JUDGED_S = 100e-6
#: the engine's settings here: warm, as timeit and pytest-benchmark time
POLICY = Policy()
#: timeit: repeats taken, and the least time one repeat of ``number`` calls should take
TIMEIT_REPEAT = 25
TIMEIT_REPEAT_S = 0.01

#: a timer: a kernel and its arguments in, per-call statistics (seconds) out
Timer = Callable[[Kernel, tuple[object, ...]], Stats]


@dataclass(frozen=True, slots=True)
class CpuCase:
    """A kernel to time: ``setup()`` builds it and its arguments."""

    name: str
    setup: Callable[[], tuple[Kernel, tuple[object, ...]]]


def _copy_64_mib() -> tuple[Kernel, tuple[object, ...]]:
    import numpy as np

    src = np.ones(16 * 2**20, dtype=np.float32)
    return np.copyto, (np.empty_like(src), src)


def _matmul_512_f64() -> tuple[Kernel, tuple[object, ...]]:
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.random((512, 512)), rng.random((512, 512))

    def matmul(a: Any, b: Any, out: Any) -> None:
        np.matmul(a, b, out=out)

    return matmul, (a, b, np.empty((512, 512)))


def _python_sum() -> tuple[Kernel, tuple[object, ...]]:
    def total(n: int) -> int:
        return sum(range(n))

    return total, (100_000,)


CASES: tuple[CpuCase, ...] = (
    CpuCase("copy 64 MiB (numpy)", _copy_64_mib),
    CpuCase("matmul 512³ f64 (BLAS)", _matmul_512_f64),
    CpuCase("sum(range(100k)) (Python)", _python_sum),
)

RULES: dict[str, Rule] = {
    "timeit": Rule(ENGINE, CPU_FLOOR, MIN_JUDGED_S),
    "pytest-benchmark": Rule(ENGINE, CPU_FLOOR, MIN_JUDGED_S),
}


def engine_timer(backend: Backend | None = None) -> Timer:
    """The engine, warm, over ``backend`` (None: the process's CPU backend)."""
    from ...timing.cache import WARM
    from ...timing.engine import measure

    def engine(fn: Kernel, args: tuple[object, ...]) -> Stats:
        return measure(fn, *args, policy=POLICY, backend=backend, cache=WARM).stats

    return engine


def timeit_timer(clock: Callable[[], float] = time.perf_counter) -> Timer:
    """:mod:`timeit` on ``clock``: :data:`TIMEIT_REPEAT` repeats of as many calls as take
    :data:`TIMEIT_REPEAT_S`, after one untimed call; each repeat's time over its calls is a sample."""

    def time_it(fn: Kernel, args: tuple[object, ...]) -> Stats:
        fn(*args)
        start = clock()
        fn(*args)
        one = clock() - start
        number = max(1, math.ceil(TIMEIT_REPEAT_S / one)) if one > 0 else 1000
        timer = timeit.Timer(lambda: fn(*args), timer=clock)
        return Stats.from_samples(t / number for t in timer.repeat(repeat=TIMEIT_REPEAT, number=number))

    return time_it


def pytest_benchmark_timer(clock: Callable[[], float] = time.perf_counter) -> Timer | None:
    """pytest-benchmark's ``BenchmarkFixture`` with its default settings, on ``clock``; None when
    pytest-benchmark is not installed. Its rounds (per-call times) are the samples."""
    try:
        fixture_module = importlib.import_module("pytest_benchmark.fixture")
        utils = importlib.import_module("pytest_benchmark.utils")
    except ImportError:
        return None
    benchmark_fixture: Any = fixture_module.BenchmarkFixture

    def quiet(*args: object, **kwargs: object) -> None:
        pass

    settings: dict[str, object] = {
        "node": types.SimpleNamespace(name="selfcheck", nodeid="roofline-selfcheck"),
        "disable_gc": False, "timer": utils.NameWrapper(clock), "min_rounds": 5, "min_time": 0.000005,
        "max_time": 1.0, "precision": None, "confidence": None, "warmup": False,
        "warmup_iterations": 100000, "calibration_precision": 10, "add_stats": quiet,
        "logger": types.SimpleNamespace(debug=quiet, info=quiet, warning=quiet, error=quiet),
        "warner": quiet, "disabled": False, "cprofile": False, "cprofile_loops": None,
        "cprofile_dump": None,
    }  # fmt: skip
    # the constructor's parameters differ between pytest-benchmark releases: pass those it takes
    accepted = inspect.signature(benchmark_fixture).parameters
    kwargs = {name: value for name, value in settings.items() if name in accepted}

    def bench(fn: Kernel, args: tuple[object, ...]) -> Stats:
        fixture = benchmark_fixture(**kwargs)
        fixture(fn, *args)
        return Stats.from_samples(fixture.stats.stats.data)

    return bench


def default_timers() -> list[tuple[str, Timer]]:
    """The engine, timeit and (where installed) pytest-benchmark, on this machine's clock."""
    timers: list[tuple[str, Timer]] = [(ENGINE, engine_timer()), ("timeit", timeit_timer())]
    bench = pytest_benchmark_timer()
    if bench is not None:
        timers.append(("pytest-benchmark", bench))
    return timers


def run_cpu(
    cases: Sequence[CpuCase] | None = None,
    timers: Sequence[tuple[str, Timer]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Each case (default: :data:`CASES`) timed by each timer (default: :func:`default_timers`),
    compared and judged."""
    from ...timing.cpu import cpu_model_name

    cases = CASES if cases is None else cases
    timers = default_timers() if timers is None else timers
    say = progress or _stderr
    results = []
    for case in cases:
        say(f"measuring {case.name} ...")
        try:
            fn, args = case.setup()
        except Exception as exc:  # a kernel that cannot be built is a finding, not the end of the run
            results.append(CaseResult(case.name, (Timing(SETUP, None, f"{type(exc).__name__}: {exc}"),)))
            continue
        bound = [(name, _bind(timer, fn, args)) for name, timer in timers]
        results.append(run_timers(case.name, bound))
    comparisons = compare(results, RULES)
    names = ", ".join(name for name, _ in timers)
    header = (
        f"self-check on this CPU: {cpu_model_name()}",
        f"timers: {names}; each ratio is a timer's median over {ENGINE}'s",
        f"noise: each timer's 95% interval of the median, added; floor {CPU_FLOOR:.0%}; kernels under "
        f"{MIN_JUDGED_S * 1e6:.0f} µs shown, not judged",
    )
    return Report(
        device="cpu",
        header=header,
        results=tuple(results),
        comparisons=tuple(comparisons),
        notes=(),
        verdict=verdict(results, comparisons, engine={ENGINE}),
        details={"floor": CPU_FLOOR, "min_judged_s": MIN_JUDGED_S},
    )


def _bind(timer: Timer, fn: Kernel, args: tuple[object, ...]) -> Callable[[], Stats]:
    return lambda: timer(fn, args)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
