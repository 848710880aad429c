"""``roofline selfcheck``: the ratios judged against each timer's own noise, the CPU path end to end on
one fake clock, the GPU path on the fakes (``--device cuda:1`` included), and bad options."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_roofline import cli
from pytest_roofline.machine.selfcheck import compare, cpu, gpu
from pytest_roofline.machine.selfcheck.compare import CaseResult, Rule, Timing
from pytest_roofline.model.stats import Stats
from pytest_roofline.timing.cpu import CpuBackend

KERNEL_S = 1e-3


def stats(median: float, spread: float = 0.0, n: int = 21) -> Stats:
    """``n`` samples around ``median``, evenly from ``median * (1 - spread)`` to ``median * (1 + spread)``."""
    return Stats.from_samples(median * (1 - spread + 2 * spread * i / (n - 1)) for i in range(n))


def result(case: str, **medians: Stats | None) -> CaseResult:
    return CaseResult(
        case, tuple(Timing(name.replace("_", " "), s, "" if s else "boom") for name, s in medians.items())
    )


RULES = {"other": Rule("engine", 0.03, min_time_s=100e-6)}


# -- the comparison -----------------------------------------------------------------------------


def test_equal_medians_agree_and_the_verdict_says_within_what() -> None:
    results = [result("k", engine=stats(KERNEL_S), other=stats(KERNEL_S * 1.021))]

    comparisons = compare.compare(results, RULES)
    found = compare.verdict(results, comparisons, engine={"engine"})

    assert [(c.timer, round(c.ratio, 3), c.judged, c.agrees) for c in comparisons] == [
        ("other", 1.021, True, True)
    ]
    assert found == compare.Verdict("agrees within 2.1%", compare.AGREES)


def test_a_ratio_past_the_floor_with_tight_spreads_disagrees() -> None:
    results = [result("k", engine=stats(KERNEL_S, 0.001), other=stats(KERNEL_S * 1.08, 0.001))]

    comparisons = compare.compare(results, RULES)
    found = compare.verdict(results, comparisons, engine={"engine"})

    assert comparisons[0].tolerance == pytest.approx(0.03)  # the floor: the spreads are under it
    assert found.status == compare.DISAGREES
    assert found.line.startswith("disagrees: other on k reads 1.080× engine's median (noise ±3.0%)")


def test_a_noisy_timer_widens_the_tolerance_to_its_own_spread() -> None:
    results = [result("k", engine=stats(KERNEL_S, 0.02), other=stats(KERNEL_S * 1.08, 0.2))]

    (comparison,) = compare.compare(results, RULES)

    noise = results[0].timings[0].stats.ci_rel + results[0].timings[1].stats.ci_rel  # type: ignore[union-attr]
    assert comparison.noise == pytest.approx(noise)
    assert comparison.tolerance == pytest.approx(noise)
    assert noise > 0.08  # wider than the ratio's distance from 1, so within the noise
    assert comparison.agrees


def test_a_kernel_under_the_judged_length_is_shown_not_judged() -> None:
    results = [result("k", engine=stats(10e-6), other=stats(20e-6))]

    (comparison,) = compare.compare(results, RULES)

    assert (comparison.judged, comparison.agrees) == (False, False)
    assert "not judged: 10.0 µs is under 100.0 µs" in comparison.note
    assert compare.verdict(results, [comparison], engine={"engine"}).line == (
        "disagrees: no timer could be set beside the engine for any kernel"
    )


def test_an_allowance_lets_the_other_timer_read_higher_only() -> None:
    rules = {"other": Rule("engine", 0.05, allowance_s=0.10 * KERNEL_S, allowance_note="it writes")}
    higher = [result("k", engine=stats(KERNEL_S), other=stats(KERNEL_S * 1.12))]
    lower = [result("k", engine=stats(KERNEL_S), other=stats(KERNEL_S * 0.88))]

    (up,) = compare.compare(higher, rules)
    (down,) = compare.compare(lower, rules)

    assert (up.allowance, up.agrees, up.note) == (pytest.approx(0.10), True, "it writes")
    assert not down.agrees
    line = compare.verdict(higher, [up], engine={"engine"}).line
    assert line == "agrees within 0.0% (other on k +12.0%, within the +10.0% its method adds)"


def test_an_engine_failure_or_a_kernel_that_cannot_be_built_disagrees() -> None:
    results = [
        result("k", engine=stats(KERNEL_S), other=stats(KERNEL_S)),
        result("broken", engine=None, other=stats(KERNEL_S)),
        CaseResult("unbuilt", (Timing(compare.SETUP, None, "OutOfMemoryError"),)),
    ]

    found = compare.verdict(results, compare.compare(results, RULES), engine={"engine"})

    assert found == compare.Verdict(
        "disagrees: engine failed on broken; setup failed on unbuilt", compare.DISAGREES
    )


def test_another_timers_failure_is_shown_not_judged() -> None:
    results = [result("k", engine=stats(KERNEL_S), other=stats(KERNEL_S), third=None)]

    comparisons = compare.compare(results, RULES)
    found = compare.verdict(results, comparisons, engine={"engine"})
    text = compare.table(results, comparisons)

    assert found.status == compare.AGREES
    assert "failed (1)" in text
    assert "(1) third on k: boom" in text


def test_do_bench_may_read_higher_by_the_l2_written_back_over_dram_bandwidth() -> None:
    l2, bandwidth = 50 * 2**20, 3.35e12

    rule = gpu.rules(l2, bandwidth)["triton do_bench (cold)"]

    assert (rule.reference, rule.floor) == (gpu.COLD, gpu.COLD_FLOOR)
    assert rule.allowance_s == pytest.approx(l2 / bandwidth)
    assert "15.7 µs" in rule.allowance_note
    assert gpu.rules(l2, bandwidth)["torch.cuda.Event"] == Rule(gpu.WARM, gpu.WARM_FLOOR, gpu.MIN_JUDGED_S)


# -- the CPU path, end to end on one fake clock ------------------------------------------------


class TickingClock:
    """A clock that moves a nanosecond each time it is read, and a kernel's length each call."""

    def __init__(self) -> None:
        self.ns = 0

    def now_ns(self) -> int:
        self.ns += 1
        return self.ns

    def now(self) -> float:
        return self.now_ns() / 1e9

    def kernel(self) -> Callable[[], None]:
        def run() -> None:
            self.ns += round(KERNEL_S * 1e9)

        return run


def fake_engine(clock: TickingClock) -> cpu.Timer:
    backend = CpuBackend(
        clock_ns=clock.now_ns, thread_clock_ns=clock.now_ns, process_clock_ns=clock.now_ns,
        resolution_s=1e-6, device_name="fake cpu", switches=lambda: 0, schedstats=lambda: None,
    )  # fmt: skip
    return cpu.engine_timer(backend)


@pytest.fixture
def one_clock(monkeypatch: pytest.MonkeyPatch) -> TickingClock:
    """Every CPU timer on one ticking clock, over one kernel of exactly 1 ms."""
    clock = TickingClock()
    cases = (cpu.CpuCase("fake 1 ms", lambda: (clock.kernel(), ())),)
    monkeypatch.setattr(cpu, "CASES", cases)
    monkeypatch.setattr(cpu, "_stderr", lambda line: None)
    return clock


def test_the_cpu_check_agrees_when_every_timer_reads_the_same_clock(
    one_clock: TickingClock,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = cpu.pytest_benchmark_timer(one_clock.now)
    assert bench is not None  # pytest-benchmark is a test dependency
    timers = [(cpu.ENGINE, fake_engine(one_clock)), ("timeit", cpu.timeit_timer(one_clock.now))]
    monkeypatch.setattr(cpu, "default_timers", lambda: [*timers, ("pytest-benchmark", bench)])
    out = tmp_path / "check.json"

    code = cli.main(["selfcheck", "--device", "cpu", "--json", str(out)])

    text = capsys.readouterr().out
    assert code == 0
    assert text.rstrip().endswith("verdict: agrees within 0.0%")
    data = json.loads(out.read_text())
    (kernel,) = data["kernels"]
    assert set(kernel["timers"]) == {cpu.ENGINE, "timeit", "pytest-benchmark"}
    for name in ("timeit", "pytest-benchmark"):
        assert kernel["timers"][name]["median_s"] == pytest.approx(KERNEL_S, rel=1e-4)
        assert kernel["timers"][name]["comparison"]["agrees"] is True
    assert data["agrees"] is True
    assert data["device"] == "cpu"


def test_the_cpu_check_fails_when_a_timer_reads_ten_percent_long(
    one_clock: TickingClock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def slow_clock() -> float:
        return one_clock.now() * 1.10

    timers = [(cpu.ENGINE, fake_engine(one_clock)), ("timeit", cpu.timeit_timer(slow_clock))]
    monkeypatch.setattr(cpu, "default_timers", lambda: timers)

    code = cli.main(["selfcheck", "--device", "cpu"])

    text = capsys.readouterr().out
    assert code == 1
    assert "DISAGREES" in text
    assert "verdict: disagrees: timeit on fake 1 ms reads 1.100× engine warm's median (noise ±5.0%)" in text


def test_the_cpu_kernels_build_and_the_default_timers_are_named() -> None:
    for case in cpu.CASES:
        fn, args = case.setup()
        fn(*args)
    names = [name for name, _ in cpu.default_timers()]
    assert names == [cpu.ENGINE, "timeit", "pytest-benchmark"]


# -- the GPU path, on the fakes ----------------------------------------------------------------


@pytest.fixture
def quiet_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CUDA_LAUNCH_BLOCKING", "CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("pytest_roofline.machine.selfcheck.gpu_run._stderr", lambda line: None)


FEW = ["copy 256 MiB d2d", "scale 8 MiB"]


def few_cases() -> list[gpu.GpuCase]:
    return [case for case in gpu.CASES if case.name in FEW]


@pytest.mark.usefixtures("quiet_gpu")
@pytest.mark.parametrize("device", ["auto", "cuda:1"])
def test_the_gpu_check_runs_on_the_fakes_with_every_timer_on_the_device_asked(
    device: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu, "CASES", tuple(few_cases()))
    monkeypatch.setattr("pytest_roofline.machine.selfcheck.gpu_run.CASES", tuple(few_cases()))
    out = tmp_path / "check.json"

    code = cli.main(["selfcheck", "--fake", "--device", device, "--json", str(out)])

    data = json.loads(out.read_text())
    assert data["fake"] is True
    assert [k["kernel"] for k in data["kernels"]] == FEW
    timers = data["kernels"][0]["timers"]
    expected = {
        *gpu.ENGINE_TIMERS,
        "cupyx benchmark",
        "torch.cuda.Event",
        "triton do_bench (cold)",
        "graph replay, events",
    }
    assert set(timers) == expected
    assert all("error" not in entry for kernel in data["kernels"] for entry in kernel["timers"].values())
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
    real = gpu.torch_events

    def slow(*args: object) -> Stats:
        found = real(*args)  # type: ignore[arg-type]
        return Stats.from_samples(t * 1.2 for t in (found.min, found.median, found.max))

    monkeypatch.setattr(gpu, "torch_events", slow)

    code = cli.main(["selfcheck", "--fake"])

    out = capsys.readouterr().out
    assert code == 1
    assert "verdict: disagrees: torch.cuda.Event on copy 256 MiB d2d reads 1.200× engine warm's median" in out


@pytest.mark.usefixtures("quiet_gpu")
def test_a_gpu_kernel_that_cannot_be_built_fails_the_check(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_roofline.machine.selfcheck import selfcheck

    def broken(cupy: object) -> tuple[object, tuple[object, ...]]:
        raise AttributeError("the fake has no such call")

    text, status = selfcheck("auto", fake=True, gpu_cases=[gpu.GpuCase("broken", broken)])

    assert status == 1
    assert "failed (1)" in text
    assert "setup failed on broken" in text.splitlines()[-1]


def test_do_bench_takes_every_call_and_falls_back_to_its_median(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib
    import types

    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(device=lambda index: contextlib.nullcontext()))
    calls: list[str] = []

    def old_do_bench(fn: Callable[[], object], return_mode: str = "mean") -> float:
        calls.append(return_mode)
        assert return_mode in ("min", "max", "mean", "median")  # Triton before "all"
        return 0.25

    found = gpu.triton_do_bench(torch, old_do_bench, 0, lambda: None, ())

    assert calls == ["all", "median"]
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
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ],
)
def test_bad_options_are_one_line_and_exit_2_before_anything_runs(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("measured despite a bad option")

    monkeypatch.setattr(cpu, "run_cpu", never)
    monkeypatch.setattr("pytest_roofline.timing.cuda.device_count", lambda: 0)

    code = cli.main(["selfcheck", *argv])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("roofline: error: ")
    assert message in err
    assert len(err.splitlines()) == 1


def test_the_json_is_not_written_when_the_check_does_not_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the GPU fell off the bus")

    monkeypatch.setattr(cpu, "run_cpu", interrupted)
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
    zero = [result("k", engine=Stats.from_samples([0.0]), other=stats(KERNEL_S))]

    assert compare.compare(zero, RULES) == []
