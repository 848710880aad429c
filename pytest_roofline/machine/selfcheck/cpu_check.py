"""The self-check on this CPU: the engine, warm, beside :mod:`timeit` and, where installed,
pytest-benchmark (its ``BenchmarkFixture``, in-process), in alternating rounds (:mod:`.interleave`).

Every timer reads the clock it is given (the tests drive all three with one fake clock).
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
from .compare import SETUP, CaseResult, Report, Rule, Timing, compare, verdict
from .interleave import ROUNDS, RoundTimer, interleave, round_policy, share_count

#: the engine's figure every other timer is set beside
ENGINE = "engine warm"
#: a CPU timer's paired ratio to the engine differs from 1 by this much without either being wrong:
#: the drift within a round that alternating rounds do not cancel (benchmarks/cpu_accuracy.py's target)
CPU_FLOOR = 0.05
#: kernels shorter than this (by the engine's median) are shown, not judged
MIN_JUDGED_S = 100e-6
#: the engine's settings here over all rounds: warm, as timeit and pytest-benchmark time
POLICY = Policy()
#: timeit: repeats taken over all rounds, and the least time one repeat of ``number`` calls should take
TIMEIT_REPEAT = 25
TIMEIT_REPEAT_S = 0.01
#: pytest-benchmark: its time budget over all rounds (its default ``max_time``), in seconds
BENCHMARK_MAX_TIME_S = 1.0

#: a timer: a kernel and its arguments in, its rounds out (each call one round's per-call seconds)
Timer = Callable[[Kernel, tuple[object, ...]], RoundTimer]


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


def engine_timer(backend: Backend | None = None, rounds: int = ROUNDS) -> Timer:
    """The engine, warm, over ``backend`` (None: the process's CPU backend), a round's share of
    :data:`POLICY` at a time."""
    from ...timing.cache import WARM
    from ...timing.engine import measure

    policy = round_policy(POLICY, rounds)

    def engine(fn: Kernel, args: tuple[object, ...]) -> RoundTimer:
        return lambda: measure(fn, *args, policy=policy, backend=backend, cache=WARM).stats

    return engine


def timeit_timer(clock: Callable[[], float] = time.perf_counter, rounds: int = ROUNDS) -> Timer:
    """:mod:`timeit` on ``clock``: a round's share of :data:`TIMEIT_REPEAT` repeats of as many calls
    as take :data:`TIMEIT_REPEAT_S` (counted in the first round, after one untimed call); each
    repeat's time over its calls is a sample."""
    repeat = share_count(TIMEIT_REPEAT, rounds)

    def time_it(fn: Kernel, args: tuple[object, ...]) -> RoundTimer:
        timer = timeit.Timer(lambda: fn(*args), timer=clock)
        calls: list[int] = []  # per repeat, once known

        def one_round() -> Stats:
            if not calls:
                fn(*args)
                start = clock()
                fn(*args)
                one = clock() - start
                calls.append(max(1, math.ceil(TIMEIT_REPEAT_S / one)) if one > 0 else 1000)
            number = calls[0]
            return Stats.from_samples(t / number for t in timer.repeat(repeat=repeat, number=number))

        return one_round

    return time_it


def pytest_benchmark_timer(
    clock: Callable[[], float] = time.perf_counter, rounds: int = ROUNDS
) -> Timer | None:
    """pytest-benchmark's ``BenchmarkFixture`` at its defaults but a round's share of its ``max_time``,
    on ``clock``, its rounds the samples; None when pytest-benchmark is not installed."""
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
        "max_time": BENCHMARK_MAX_TIME_S / rounds, "precision": None, "confidence": None,
        "warmup": False, "warmup_iterations": 100000, "calibration_precision": 10, "add_stats": quiet,
        "logger": types.SimpleNamespace(debug=quiet, info=quiet, warning=quiet, error=quiet),
        "warner": quiet, "disabled": False, "cprofile": False, "cprofile_loops": None,
        "cprofile_dump": None,
    }  # fmt: skip
    # the constructor's parameters differ between pytest-benchmark releases: pass those it takes
    accepted = inspect.signature(benchmark_fixture).parameters
    kwargs = {name: value for name, value in settings.items() if name in accepted}

    def bench(fn: Kernel, args: tuple[object, ...]) -> RoundTimer:
        def one_round() -> Stats:
            fixture = benchmark_fixture(**kwargs)
            fixture(fn, *args)
            return Stats.from_samples(fixture.stats.stats.data)

        return one_round

    return bench


def default_timers(rounds: int = ROUNDS) -> list[tuple[str, Timer]]:
    """The engine, timeit and (where installed) pytest-benchmark, on this machine's clock, each
    taking a ``rounds``-th of its budget a round."""
    timers: list[tuple[str, Timer]] = [
        (ENGINE, engine_timer(rounds=rounds)),
        ("timeit", timeit_timer(rounds=rounds)),
    ]
    bench = pytest_benchmark_timer(rounds=rounds)
    if bench is not None:
        timers.append(("pytest-benchmark", bench))
    return timers


def run_cpu(
    cases: Sequence[CpuCase] | None = None,
    timers: Sequence[tuple[str, Timer]] | None = None,
    progress: Callable[[str], None] | None = None,
    rounds: int = ROUNDS,
) -> Report:
    """Each case (default: :data:`CASES`) timed by each timer (default: :func:`default_timers`) in
    ``rounds`` alternating rounds (``timers`` given: each sized for that many rounds), compared
    round by round and judged."""
    from ...timing.cpu import cpu_model_name

    cases = CASES if cases is None else cases
    timers = default_timers(rounds) if timers is None else timers
    say = progress or _stderr
    results = []
    for case in cases:
        say(f"measuring {case.name} ...")
        try:
            fn, args = case.setup()
        except Exception as exc:  # a kernel that cannot be built is a finding, not the end of the run
            results.append(CaseResult(case.name, (Timing(SETUP, (), f"{type(exc).__name__}: {exc}"),)))
            continue
        bound = [(name, timer(fn, args)) for name, timer in timers]
        results.append(interleave(case.name, bound, rounds))
    comparisons = compare(results, RULES)
    names = ", ".join(name for name, _ in timers)
    header = (
        f"self-check on this CPU: {cpu_model_name()}",
        f"timers: {names}, in {rounds} alternating rounds; each ratio is the median over the rounds of a"
        f" timer's figure over {ENGINE}'s in the same round",
        f"noise: the 95% interval of that median, from the paired ratios; floor {CPU_FLOOR:.0%}; kernels"
        f" under {MIN_JUDGED_S * 1e6:.0f} µs shown, not judged",
    )
    return Report(
        device="cpu",
        header=header,
        results=tuple(results),
        comparisons=tuple(comparisons),
        notes=(),
        verdict=verdict(results, comparisons, engine={ENGINE}),
        details={"floor": CPU_FLOOR, "min_judged_s": MIN_JUDGED_S, "rounds": rounds},
    )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
