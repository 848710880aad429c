"""``roofline selfcheck``: the ratios judged against each timer's own noise, the CPU path end to end on
one fake clock, the GPU path on the fakes (``--device cuda:1`` included), and bad options."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_roofline import cli
from pytest_roofline.errors import InvalidValueError
from pytest_roofline.machine.selfcheck import compare, cpu_check, gpu_check, interleave
from pytest_roofline.machine.selfcheck.compare import CaseResult, Rule, Timing
from pytest_roofline.model.policy import Policy
from pytest_roofline.model.stats import Stats, median_ci_ranks
from pytest_roofline.timing.cpu import CpuBackend

KERNEL_S = 1e-3
ROUNDS = interleave.ROUNDS


def rounds(*figures: float) -> tuple[Stats, ...]:
    """One round per figure, each of 5 samples whose median is that figure."""
    return tuple(Stats.from_samples(f * (1 + d) for d in (-0.01, -0.005, 0, 0.005, 0.01)) for f in figures)


def same(figure: float, n: int = ROUNDS) -> tuple[float, ...]:
    return (figure,) * n


def result(case: str, **figures: Sequence[float] | None) -> CaseResult:
    """A kernel's timers (``_`` in a name is a space), each by its figures round by round; None: it failed."""
    return CaseResult(
        case,
        tuple(
            Timing(
                name.replace("_", " "), rounds(*f) if f is not None else (), "" if f is not None else "boom"
            )
            for name, f in figures.items()
        ),
    )


RULES = {"other": Rule("engine", 0.03, min_time_s=100e-6)}


# -- the comparison: paired rounds ------------------------------------------------------------


def test_equal_figures_agree_and_the_verdict_says_within_what() -> None:
    results = [result("k", engine=same(KERNEL_S), other=same(KERNEL_S * 1.021))]

    comparisons = compare.compare(results, RULES)
    found = compare.verdict(results, comparisons, engine={"engine"})

    assert [(c.timer, round(c.ratio, 3), c.judged, c.agrees, len(c.ratios)) for c in comparisons] == [
        ("other", 1.021, True, True, ROUNDS)
    ]
    assert found == compare.Verdict("agrees within 2.1%", compare.AGREES)


def test_a_ratio_past_the_floor_with_steady_rounds_disagrees() -> None:
    results = [result("k", engine=same(KERNEL_S), other=same(KERNEL_S * 1.08))]

    comparisons = compare.compare(results, RULES)
    found = compare.verdict(results, comparisons, engine={"engine"})

    assert comparisons[0].noise == pytest.approx(0.0)  # every round's ratio is 1.08
    assert comparisons[0].tolerance == pytest.approx(0.03)  # the floor, then
    assert found.status == compare.DISAGREES
    assert found.line.startswith(
        f"disagrees: other on k reads 1.080× engine (median of {ROUNDS} paired rounds; noise ±3.0%)"
    )


def test_the_ratio_is_the_median_of_paired_rounds_so_a_drift_common_to_both_cancels() -> None:
    # the machine slows by 30% halfway: both timers see it in the same rounds
    machine = [KERNEL_S * (1.3 if i >= ROUNDS // 2 else 1.0) for i in range(ROUNDS)]
    results = [result("k", engine=machine, other=[t * 1.01 for t in machine])]

    (comparison,) = compare.compare(results, RULES)

    assert comparison.ratios == pytest.approx(same(1.01))
    assert (comparison.ratio, comparison.noise) == (pytest.approx(1.01), pytest.approx(0.0))
    assert comparison.agrees
    # each timer's own figures spread by the drift; their ratio does not
    assert results[0].timings[0].stats.ci_rel > 0.1  # type: ignore[union-attr]


def test_the_noise_is_the_95_percent_half_width_of_the_median_paired_ratio() -> None:
    ratios = [1.08 + 0.3 * ((i * 7) % ROUNDS / (ROUNDS - 1) - 0.5) for i in range(ROUNDS)]  # 0.93..1.23
    results = [result("k", engine=same(KERNEL_S), other=[KERNEL_S * r for r in ratios])]

    (comparison,) = compare.compare(results, RULES)

    paired = Stats.from_samples(ratios)
    assert comparison.ratio == pytest.approx(paired.median)
    assert comparison.noise == pytest.approx(paired.ci_half)
    assert comparison.tolerance == pytest.approx(paired.ci_half)
    assert comparison.noise > comparison.ratio - 1  # wider than the ratio's distance from 1
    assert comparison.agrees


def test_a_timers_own_spread_within_rounds_is_not_the_noise() -> None:
    # every round reads 8% long, each with a wide spread of its own: the paired medians are steady
    wide = tuple(Stats.from_samples(KERNEL_S * 1.08 * (1 + d) for d in (-0.3, 0, 0.3)) for _ in range(ROUNDS))
    results = [CaseResult("k", (Timing("engine", rounds(*same(KERNEL_S))), Timing("other", wide)))]

    (comparison,) = compare.compare(results, RULES)

    assert (comparison.noise, comparison.agrees) == (pytest.approx(0.0), False)


def test_a_kernel_under_the_judged_length_is_shown_not_judged() -> None:
    results = [result("k", engine=same(10e-6), other=same(20e-6))]

    (comparison,) = compare.compare(results, RULES)

    assert (comparison.judged, comparison.agrees) == (False, False)
    assert "not judged: 10.0 µs is under 100.0 µs" in comparison.note
    assert compare.verdict(results, [comparison], engine={"engine"}).line == (
        "disagrees: no timer could be set beside the engine for any kernel"
    )


def test_an_allowance_lets_the_other_timer_read_higher_only() -> None:
    rules = {"other": Rule("engine", 0.05, allowance_s=0.10 * KERNEL_S, allowance_note="it writes")}
    higher = [result("k", engine=same(KERNEL_S), other=same(KERNEL_S * 1.12))]
    lower = [result("k", engine=same(KERNEL_S), other=same(KERNEL_S * 0.88))]

    (up,) = compare.compare(higher, rules)
    (down,) = compare.compare(lower, rules)

    assert (up.allowance, up.agrees, up.note) == (pytest.approx(0.10), True, "it writes")
    assert not down.agrees
    line = compare.verdict(higher, [up], engine={"engine"}).line
    assert line == "agrees within 0.0% (other on k +12.0%, within the +10.0% its method adds)"


def test_an_engine_failure_or_a_kernel_that_cannot_be_built_disagrees() -> None:
    results = [
        result("k", engine=same(KERNEL_S), other=same(KERNEL_S)),
        result("broken", engine=None, other=same(KERNEL_S)),
        CaseResult("unbuilt", (Timing(compare.SETUP, (), "OutOfMemoryError"),)),
    ]

    found = compare.verdict(results, compare.compare(results, RULES), engine={"engine"})

    assert found == compare.Verdict(
        "disagrees: engine failed on broken; setup failed on unbuilt", compare.DISAGREES
    )


def test_another_timers_failure_is_shown_not_judged() -> None:
    results = [result("k", engine=same(KERNEL_S), other=same(KERNEL_S), third=None)]

    comparisons = compare.compare(results, RULES)
    found = compare.verdict(results, comparisons, engine={"engine"})
    text = compare.table(results, comparisons)

    assert found.status == compare.AGREES
    assert "failed (1)" in text
    assert "(1) third on k: boom" in text


def test_the_json_keeps_every_rounds_figure_and_paired_ratio() -> None:
    results = [result("k", engine=(1e-3, 2e-3, 1e-3), other=(1.1e-3, 2e-3, 1e-3))]

    (kernel,) = compare.results_json(results, compare.compare(results, RULES))

    other = kernel["timers"]["other"]  # type: ignore[index]
    assert other["rounds"] == 3
    assert other["samples"] == 15
    assert other["rounds_s"] == pytest.approx([1.1e-3, 2e-3, 1e-3])
    assert other["comparison"]["round_ratios"] == pytest.approx([1.1, 1.0, 1.0])
    assert other["comparison"]["ratio"] == pytest.approx(1.0)


# -- the rounds --------------------------------------------------------------------------------


class Recorder:
    """Timers that note each call; a call's figure is its place in the run (1, 2, ...)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def timer(self, name: str) -> Callable[[], Stats]:
        def one_round() -> Stats:
            self.calls.append(name)
            return Stats.from_samples([len(self.calls)])

        return one_round

    def timers(self, names: Sequence[str]) -> list[tuple[str, Callable[[], Stats]]]:
        return [(name, self.timer(name)) for name in names]


def test_every_timer_runs_once_a_round_in_an_order_shuffled_per_round() -> None:
    names = ["engine", "a", "b", "c"]
    recorder = Recorder()

    found = interleave.interleave("k", recorder.timers(names), rounds=12)

    calls = recorder.calls
    orders = [tuple(calls[i : i + 4]) for i in range(0, 48, 4)]
    assert all(sorted(order) == sorted(names) for order in orders)
    assert len(set(orders)) > 6  # shuffled afresh, not one order repeated
    assert {order.index("a") < order.index("engine") for order in orders} == {True, False}
    for timing in found.timings:  # round i's figure of every timer was taken in round i
        places = [int(figure) - 1 for figure in timing.figures]
        assert [calls[p] for p in places] == [timing.timer] * 12
        assert [p // 4 for p in places] == list(range(12))
    again = Recorder()
    interleave.interleave("k", again.timers(names), rounds=12)
    assert again.calls == calls  # seeded by the kernel's name: the same orders on every run


def test_a_timer_that_raises_is_kept_with_its_error_and_not_run_again() -> None:
    tries: list[int] = []

    def flaky() -> Stats:
        tries.append(1)
        if len(tries) == 3:
            raise RuntimeError("capture refused")
        return Stats.from_samples([KERNEL_S])

    found = interleave.interleave(
        "k", [("engine", lambda: Stats.from_samples([KERNEL_S])), ("flaky", flaky)], 6
    )

    engine, failed = found.timings
    assert (len(engine.rounds), engine.error) == (6, "")
    assert (failed.rounds, failed.error, failed.stats) == ((), "RuntimeError: capture refused", None)
    assert len(tries) == 3


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_rounds_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(InvalidValueError, match=f"rounds must be an integer >= 1; got {bad!r}"):
        interleave.interleave("k", [], bad)  # type: ignore[arg-type]


def test_the_rounds_leave_out_two_extreme_ratios_at_each_end_of_the_noise() -> None:
    # one round split by a step in speed (or two) cannot widen the 95% interval of the median alone
    assert median_ci_ranks(ROUNDS)[0] - 1 >= 2


def test_a_rounds_share_splits_the_budget_and_keeps_at_least_one_call() -> None:
    policy = interleave.round_policy(Policy(max_time_s=0.5, min_samples=7), 10)

    assert (policy.max_time_s, policy.warmup_s, policy.min_time_s) == pytest.approx((0.05, 0.0025, 0.006))
    assert policy.min_samples == 7  # what is not time is kept (the cache is measure()'s cache=)
    assert interleave.round_policy(Policy(), 1) == Policy()
    assert [interleave.share_count(total, 15) for total in (25, 20, 3)] == [2, 2, 1]


def test_do_bench_may_read_higher_by_the_l2_written_back_over_dram_bandwidth() -> None:
    l2, bandwidth = 50 * 2**20, 3.35e12

    rule = gpu_check.rules(l2, bandwidth)["triton do_bench (cold)"]

    assert (rule.reference, rule.floor) == (gpu_check.COLD, gpu_check.COLD_FLOOR)
    assert rule.allowance_s == pytest.approx(l2 / bandwidth)
    assert "15.7 µs" in rule.allowance_note
    warm = Rule(gpu_check.WARM, gpu_check.WARM_FLOOR, gpu_check.MIN_JUDGED_S)
    assert gpu_check.rules(l2, bandwidth)["torch.cuda.Event"] == warm


# -- the CPU path, end to end on one fake clock ------------------------------------------------


class TickingClock:
    """A clock that moves a nanosecond each time it is read, and a kernel's length each call: 1 ms,
    or ``slow`` times that once the clock has passed ``slow_from_ns`` (the machine slowed down)."""

    def __init__(self, slow_from_ns: int | None = None, slow: float = 1.3) -> None:
        self.ns = 0
        self.slow_from_ns = slow_from_ns
        self.slow = slow

    def now_ns(self) -> int:
        self.ns += 1
        return self.ns

    def now(self) -> float:
        return self.now_ns() / 1e9

    def kernel(self) -> Callable[[], None]:
        def run() -> None:
            slowed = self.slow_from_ns is not None and self.ns >= self.slow_from_ns
            self.ns += round(KERNEL_S * 1e9 * (self.slow if slowed else 1.0))

        return run


def fake_engine(clock: TickingClock, **rounds: int) -> cpu_check.Timer:
    backend = CpuBackend(
        clock_ns=clock.now_ns, thread_clock_ns=clock.now_ns, process_clock_ns=clock.now_ns,
        resolution_s=1e-6, device_name="fake cpu", switches=lambda: 0, schedstats=lambda: None,
    )  # fmt: skip
    return cpu_check.engine_timer(backend, **rounds)


def on_clock(clock: TickingClock, *, off: float = 1.0, **rounds: int) -> list[tuple[str, cpu_check.Timer]]:
    """The engine and timeit on ``clock``; timeit's reads ``off`` times as long (1.0: the same)."""
    return [
        (cpu_check.ENGINE, fake_engine(clock, **rounds)),
        ("timeit", cpu_check.timeit_timer(lambda: clock.now() * off, **rounds)),
    ]


def one_kernel(clock: TickingClock) -> tuple[cpu_check.CpuCase, ...]:
    return (cpu_check.CpuCase("fake 1 ms", lambda: (clock.kernel(), ())),)


@pytest.fixture
def one_clock(monkeypatch: pytest.MonkeyPatch) -> TickingClock:
    """Every CPU timer on one ticking clock, over one kernel of exactly 1 ms."""
    clock = TickingClock()
    monkeypatch.setattr(cpu_check, "CASES", one_kernel(clock))
    monkeypatch.setattr(cpu_check, "_stderr", lambda line: None)
    return clock


def test_the_cpu_check_agrees_when_every_timer_reads_the_same_clock(
    one_clock: TickingClock,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = cpu_check.pytest_benchmark_timer(one_clock.now)
    assert bench is not None  # pytest-benchmark is a test dependency
    timers = [*on_clock(one_clock), ("pytest-benchmark", bench)]
    monkeypatch.setattr(cpu_check, "default_timers", lambda *rounds: timers)
    out = tmp_path / "check.json"

    code = cli.main(["selfcheck", "--device", "cpu", "--json", str(out)])

    text = capsys.readouterr().out
    assert code == 0
    assert text.rstrip().endswith("verdict: agrees within 0.0%")
    assert f"in {ROUNDS} alternating rounds" in text
    data = json.loads(out.read_text())
    (kernel,) = data["kernels"]
    assert set(kernel["timers"]) == {cpu_check.ENGINE, "timeit", "pytest-benchmark"}
    for name in ("timeit", "pytest-benchmark"):
        assert kernel["timers"][name]["median_s"] == pytest.approx(KERNEL_S, rel=1e-4)
        assert kernel["timers"][name]["rounds"] == ROUNDS
        assert kernel["timers"][name]["comparison"]["agrees"] is True
    assert data["agrees"] is True
    assert data["device"] == "cpu"
    assert data["rounds"] == ROUNDS


def run_length(**rounds: int) -> int:
    """Nanoseconds the engine and timeit take on a steady fake 1 ms kernel: to put a step at half."""
    clock = TickingClock()
    cpu_check.run_cpu(one_kernel(clock), on_clock(clock, **rounds), progress=lambda line: None, **rounds)
    return clock.ns


def test_a_drift_that_slows_both_timers_alike_cancels_in_the_interleaved_rounds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the machine runs 30% slow in the second half of the run, for every timer alike
    clock = TickingClock(slow_from_ns=run_length() // 2)
    monkeypatch.setattr(cpu_check, "CASES", one_kernel(clock))
    monkeypatch.setattr(cpu_check, "default_timers", lambda *rounds: on_clock(clock))
    monkeypatch.setattr(cpu_check, "_stderr", lambda line: None)

    code = cli.main(["selfcheck", "--device", "cpu"])

    text = capsys.readouterr().out
    assert text.rstrip().endswith("verdict: agrees within 0.0%")
    assert code == 0
    # the same fake timed the old way, one timer after the other (one round each), reads the drift
    sequential = TickingClock(slow_from_ns=run_length(rounds=1) // 2)
    report = cpu_check.run_cpu(
        one_kernel(sequential), on_clock(sequential, rounds=1), progress=lambda line: None, rounds=1
    )
    (comparison,) = report.comparisons
    assert abs(comparison.ratio - 1) > 0.2  # 1.3 or 1 / 1.3, by which ran first
    assert report.verdict.status == compare.DISAGREES


@pytest.mark.parametrize("drift", [False, True], ids=["steady", "drifting"])
def test_the_cpu_check_fails_when_a_timer_reads_ten_percent_long(
    drift: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = TickingClock(slow_from_ns=run_length() // 2 if drift else None)
    monkeypatch.setattr(cpu_check, "CASES", one_kernel(clock))
    monkeypatch.setattr(cpu_check, "default_timers", lambda *rounds: on_clock(clock, off=1.10))
    monkeypatch.setattr(cpu_check, "_stderr", lambda line: None)

    code = cli.main(["selfcheck", "--device", "cpu"])

    text = capsys.readouterr().out
    assert code == 1
    assert "DISAGREES" in text
    assert (
        f"verdict: disagrees: timeit on fake 1 ms reads 1.100× engine warm (median of {ROUNDS} paired"
        " rounds; noise ±5.0%)"
    ) in text


def test_the_cpu_kernels_build_and_the_default_timers_are_named() -> None:
    for case in cpu_check.CASES:
        fn, args = case.setup()
        fn(*args)
    names = [name for name, _ in cpu_check.default_timers()]
    assert names == [cpu_check.ENGINE, "timeit", "pytest-benchmark"]


# -- the GPU path, on the fakes ----------------------------------------------------------------


FEW = ["copy 256 MiB d2d", "scale 8 MiB"]


def few_cases() -> list[gpu_check.GpuCase]:
    return [case for case in gpu_check.CASES if case.name in FEW]


@pytest.mark.usefixtures("quiet_gpu")
@pytest.mark.parametrize("device", ["auto", "cuda:1"])
def test_the_gpu_check_runs_on_the_fakes_with_every_timer_on_the_device_asked(
    device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_roofline.machine.selfcheck import gpu_run
    from pytest_roofline.timing.cuda.backend import CudaBackend

    monkeypatch.setattr(gpu_check, "CASES", tuple(few_cases()))
    monkeypatch.setattr("pytest_roofline.machine.selfcheck.gpu_run.CASES", tuple(few_cases()))
    built: list[dict[str, object]] = []

    class CountedBackend(CudaBackend):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(gpu_check, "CudaBackend", CountedBackend)
    monkeypatch.setattr(gpu_run, "CudaBackend", CountedBackend)
    out = tmp_path / "check.json"

    code = cli.main(["selfcheck", "--fake", "--device", device, "--json", str(out)])

    data = json.loads(out.read_text())
    assert data["fake"] is True
    assert [k["kernel"] for k in data["kernels"]] == FEW
    timers = data["kernels"][0]["timers"]
    expected = {
        *gpu_check.ENGINE_TIMERS,
        "cupyx benchmark",
        "torch.cuda.Event",
        "triton do_bench (cold)",
        "graph replay, events",
    }
    assert set(timers) == expected
    assert all("error" not in entry for kernel in data["kernels"] for entry in kernel["timers"].values())
    assert data["rounds"] == ROUNDS
    assert all(entry["rounds"] == ROUNDS for kernel in data["kernels"] for entry in kernel["timers"].values())
    # each engine timer builds its backend once for all its rounds (and the header's, once)
    assert len(built) == 1 + len(gpu_check.ENGINE_TIMERS) * len(FEW)
    # PyTorch's and Triton's events are on the GPU the kernel runs on: they see its work (on another
    # GPU's stream they would see none and read 0)
    for name in ("torch.cuda.Event", "triton do_bench (cold)"):
        assert timers[name]["comparison"]["ratio"] == pytest.approx(1.0)
    assert data["verdict"] == "agrees within 0.0%"
    assert code == 0
    assert data["device"] == ("cuda:1" if device == "cuda:1" else "cuda:0")
    assert data["do_bench_allowance_s"] == pytest.approx(50 * 2**20 / 3.35e12)
    assert {c["ceiling"] for c in data["ceilings"]} >= {"DRAM bandwidth", "L2 bandwidth"}


@pytest.mark.usefixtures("quiet_gpu")
def test_a_gpu_timer_that_disagrees_on_the_fakes_fails_the_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = gpu_check.torch_events

    def slow(*args: object) -> Stats:
        found = real(*args)  # type: ignore[arg-type]
        return Stats.from_samples(t * 1.2 for t in (found.min, found.median, found.max))

    monkeypatch.setattr(gpu_check, "torch_events", slow)

    code = cli.main(["selfcheck", "--fake"])

    out = capsys.readouterr().out
    assert code == 1
    assert (
        "verdict: disagrees: torch.cuda.Event on copy 256 MiB d2d reads 1.200× engine warm"
        f" (median of {ROUNDS} paired rounds" in out
    )


@pytest.mark.usefixtures("quiet_gpu")
def test_a_gpu_kernel_that_cannot_be_built_fails_the_check(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.machine.selfcheck import selfcheck

    def broken(cupy: object) -> tuple[object, tuple[object, ...]]:
        raise AttributeError("the fake has no such call")

    text, status = selfcheck("auto", fake=True, gpu_cases=[gpu_check.GpuCase("broken", broken)])

    assert status == 1
    assert "failed (1)" in text
    assert "setup failed on broken" in text.splitlines()[-1]


def test_the_graph_replay_captures_once_and_replays_each_round(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_cupy import FakeCupy

    world = FakeCupy(kernel_ms=0.2).install(monkeypatch)
    replay = gpu_check.graph_replay(world.cupy, world.kernel, (), rounds=5)

    found = [replay() for _ in range(5)]

    assert world.count("begin_capture") == 1
    pairs = interleave.share_count(gpu_check.EVENT_PAIRS, 5)
    assert [s.n for s in found] == [pairs] * 5
    assert all(s.median == pytest.approx(0.2e-3) for s in found)
    # each round: one untimed replay, then its pairs
    assert [entry[2] for entry in world.entries("launch")] == [gpu_check.GRAPH_CALLS] * (5 * (1 + pairs))


@pytest.mark.usefixtures("quiet_gpu")
def test_cupyx_times_back_to_back_calls_so_an_idle_gpus_launch_gap_is_a_sliver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the first H200 run: cupyx synchronizes after every repeat, so one call a repeat put the host's
    # launch (8 µs) inside each window, and a 129 µs copy read 1.06x the engine's
    from fake_cupy import FakeCupy

    world = FakeCupy(kernel_ms=0.129, idle_launch_ms=0.008).install(monkeypatch)
    copy = next(case for case in gpu_check.CASES if case.name == "copy 256 MiB d2d")

    result = gpu_check.time_case(copy, 0, world.cupy, world.cupyx.profiler.benchmark, {}, rounds=3)

    theirs, ours = result.timing("cupyx benchmark"), result.timing(gpu_check.WARM)
    assert theirs is not None
    assert ours is not None
    assert theirs.stats is not None, theirs.error
    assert ours.stats is not None, ours.error
    assert ours.stats.median == pytest.approx(0.129e-3, rel=0.01)
    # the gap spread over EVENT_CALLS calls: 8 / 20 µs on 129 µs, 0.3%, not 6%
    assert theirs.stats.median / ours.stats.median == pytest.approx(1.0, abs=0.005)
    gap = 0.008e-3 / gpu_check.EVENT_CALLS
    assert theirs.stats.median == pytest.approx(0.129e-3 + gap, rel=1e-6)


def test_do_bench_takes_every_call_and_falls_back_to_its_median(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    import types

    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(device=lambda index: contextlib.nullcontext()))
    calls: list[tuple[str, float, float]] = []

    def old_do_bench(
        fn: Callable[[], object], warmup: float = 25, rep: float = 100, return_mode: str = "mean"
    ) -> float:
        calls.append((return_mode, warmup, rep))
        assert return_mode in ("min", "max", "mean", "median")  # Triton before "all"
        return 0.25

    found = gpu_check.triton_do_bench(torch, old_do_bench, 0, lambda: None, (), 10)

    # each round takes a tenth of do_bench's default budgets (25 ms warm-up, 100 ms timed)
    assert calls == [("all", 2.5, 10.0), ("median", 2.5, 10.0)]
    assert (found.n, found.median, found.ci_rel) == (1, pytest.approx(0.25e-3), 0.0)


# -- bad options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device", "tpu"], "unknown device 'tpu'"),
        (["--device", "h100-sxm"], "the self-check times this machine's hardware"),
        (["--device", "cuda:7"], "cuda:7: no such CUDA device"),
        (["--fake", "--device", "cpu"], "--fake runs the GPU self-check on the test suite's fakes"),
        (
            ["--json", "/nonexistent/folder/check.json"],
            "--json /nonexistent/folder/check.json: cannot write it",
        ),
        pytest.param(  # issue 40: it ran the whole check, then said /proc did not exist, and exited 1
            ["--json", "/proc/nope.json"],
            "--json /proc/nope.json: cannot write it: no file can be created in '/proc': No such file or"
            " directory",
            marks=pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="a Linux /proc"),
            id="json-in-proc",
        ),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_bad_options_are_one_line_and_exit_2_before_anything_runs(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured despite a bad option")

    monkeypatch.setattr(cpu_check, "run_cpu", never)
    monkeypatch.setattr("pytest_roofline.timing.cuda.loading.device_count", lambda: 0)

    code = cli.main(["selfcheck", *argv])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("roofline: error: ")
    assert message in err
    assert len(err.splitlines()) == 1


def test_a_json_that_cannot_be_written_at_the_end_exits_2_not_the_disagreement_1(
    one_clock: TickingClock,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A path writable when checked and not by the end (a disk filled, a mount gone read-only)."""
    from pytest_roofline.machine import files

    monkeypatch.setattr(cpu_check, "default_timers", lambda *rounds: on_clock(one_clock))

    def read_only(path: object, data: bytes) -> None:
        raise OSError(30, "Read-only file system", str(path))

    monkeypatch.setattr(files, "write", read_only)
    out = tmp_path / "check.json"

    code = cli.main(["selfcheck", "--device", "cpu", "--json", str(out)])

    err = capsys.readouterr().err
    assert code == 2
    assert err == f"roofline: error: --json {out}: cannot write it: Read-only file system\n"


def test_the_json_is_not_written_when_the_check_does_not_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the GPU fell off the bus")

    monkeypatch.setattr(cpu_check, "run_cpu", interrupted)
    out = tmp_path / "check.json"
    out.write_text("an earlier run's")

    assert cli.main(["selfcheck", "--device", "cpu", "--json", str(out)]) == 1

    assert out.read_text() == "an earlier run's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check.json"]


def test_the_command_imports_no_timer_library_until_it_runs() -> None:
    import subprocess

    code = (
        "import sys\n"
        "import pytest_roofline.cli as cli, pytest_roofline.machine.selfcheck.gpu_run\n"
        "cli.build_parser().parse_args(['selfcheck', '--device', 'cpu'])\n"
        "print(sorted(m for m in ('cupy', 'torch', 'triton', 'numpy', 'tabulate', 'pytest_benchmark')"
        " if m in sys.modules))\n"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def test_a_reference_of_zero_is_not_divided_by() -> None:
    zero = [result("k", engine=(KERNEL_S, 0.0, KERNEL_S), other=same(KERNEL_S, 3))]

    assert compare.compare(zero, RULES) == []
