"""A second clock for the self-check's kernels: Nsight Compute's ``gpu__time_duration.sum``.

Warm and cold, beside the engine's (``--ncu``; by default where ``ncu`` is on the PATH), in a subprocess
(:func:`launch`). Why: docs/cli.md ("roofline selfcheck"), docs/methodology.md ("Timers in the self-check").
"""

from __future__ import annotations

import csv
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...model.units import seconds
from .compare import CaseResult

METRIC = "gpu__time_duration.sum"
#: the marker kernel's name
MARKER = "roofline_case_marker"
#: calls of each kernel profiled, each after a marker
CALLS = 5
#: the engine within 5% of ncu, or within 0.5 µs (issue 39's bound for 2-100 µs kernels)
AGREE_REL, AGREE_ABS_S = 0.05, 0.5e-6
#: under this (ncu's figure) a kernel is shown, not judged: a launch's own cost is its size there
MIN_JUDGED_S = 2e-6
#: what one ncu run may take, all its kernels profiled
TIMEOUT_S = 120
#: ncu's units in base units (seconds, bytes), where ``--print-units base`` is not honoured (docs/gpu.md)
UNITS = {
    "ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
    "second": 1.0, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "kibyte": 2.0**10,
    "mibyte": 2.0**20, "gibyte": 2.0**30,
}  # fmt: skip
#: the engine's figures each ncu mode stands beside
MODES = {"warm": ("none", "engine warm"), "cold": ("all", "engine cold")}

Run = Callable[..., subprocess.CompletedProcess[str]]
Launch = tuple[int, str, dict[str, float]]


@dataclass(frozen=True, slots=True)
class SecondClock:
    """One kernel in one mode: the engine's median beside ncu's (median of its calls), seconds."""

    case: str
    mode: str
    engine_s: float
    ncu_s: float
    kernels: int
    #: what of the engine's figure is its window's, not the kernel's: the event pair (cold), or 0
    window_s: float = 0.0

    @property
    def kernel_s(self) -> float:
        """The engine's figure less its window's own time: what ncu's duration is compared with."""
        return self.engine_s - self.window_s

    @property
    def judged(self) -> bool:
        return self.ncu_s >= MIN_JUDGED_S

    @property
    def agrees(self) -> bool:
        return abs(self.kernel_s - self.ncu_s) <= max(AGREE_REL * self.ncu_s, AGREE_ABS_S)

    def describe(self) -> str:
        pair = seconds(self.window_s)
        less = f" ({seconds(self.kernel_s)} less the event pair's {pair})" if self.window_s else ""
        return (
            f"{self.case} ({self.mode}): the engine reads {seconds(self.engine_s)}{less}, ncu"
            f" {seconds(self.ncu_s)} ({self.kernel_s / self.ncu_s:.3f}×; within {AGREE_REL:.0%} or"
            f" {seconds(AGREE_ABS_S)} agrees)"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "case": self.case, "mode": self.mode, "engine_s": self.engine_s, "window_s": self.window_s,
            "ncu_s": self.ncu_s, "kernels": self.kernels, "judged": self.judged, "agrees": self.agrees,
        }  # fmt: skip


def find_ncu() -> str | None:
    return shutil.which("ncu")


def parse_launches(text: str) -> list[Launch]:
    """(ID, kernel name, {metric: value in base units}) per profiled launch of ncu's ``--csv`` output,
    in launch order."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    # by launch and kernel: a launch's rows share its ID (a hand-made log may reuse one)
    found: dict[tuple[int, str], dict[str, float]] = {}
    for row in csv.DictReader(lines[start:]):
        try:
            ident = int(row.get("ID") or "")
            value = float((row.get("Metric Value") or "").replace(",", ""))
        except ValueError:
            continue
        name = (row.get("Kernel Name") or row.get("Function Name") or "").split("(")[0].strip()
        scale = UNITS.get((row.get("Metric Unit") or "").strip().lower(), 1.0)
        found.setdefault((ident, name), {})[row.get("Metric Name") or ""] = value * scale
    return [
        (ident, name, metrics) for (ident, name), metrics in sorted(found.items(), key=lambda kv: kv[0][0])
    ]


def per_call(launches: Sequence[Launch], names: Sequence[str], calls: int) -> dict[str, list[dict[str, Any]]]:
    """Each case's calls, in order: the kernels between one marker and the next, their metrics summed
    (``kernels``: their names). The markers come ``calls`` to a case, in the order of ``names``."""
    groups: list[list[tuple[str, dict[str, float]]]] = []
    for _, kernel, metrics in launches:
        if kernel.endswith(MARKER):
            groups.append([])
        elif groups:
            groups[-1].append((kernel, metrics))
    found: dict[str, list[dict[str, Any]]] = {}
    for index, kernels in enumerate(groups[: len(names) * calls]):
        total: dict[str, Any] = {"kernels": [name for name, _ in kernels]}
        for _, metrics in kernels:
            for metric, value in metrics.items():
                total[metric] = total.get(metric, 0.0) + value
        found.setdefault(names[index // calls], []).append(total)
    return found


def second_clocks(
    index: int,
    cases: Sequence[str],
    results: Sequence[CaseResult],
    *,
    ncu: str,
    event_pair_s: float = 0.0,
    run: Run = subprocess.run,
) -> tuple[list[SecondClock], list[str]]:
    """ncu's figures for ``cases`` (the self-check's kernels, by name) on GPU ``index`` beside the
    engine's in ``results``; and what went wrong (a mode ncu could not profile), one line each.
    ``event_pair_s``: what an event pair around nothing reads, which the engine's cold figure holds
    (0 where the engine is not timed by events)."""
    clocks: list[SecondClock] = []
    problems: list[str] = []
    by_case = {result.case: result for result in results}
    for mode, (cache_control, reference) in MODES.items():
        with tempfile.TemporaryDirectory(prefix="roofline-ncu-") as scratch:
            log = Path(scratch) / "ncu.csv"
            command = [
                ncu, "--metrics", METRIC, "--csv", "--print-units", "base", "--clock-control", "none",
                "--cache-control", cache_control, "--log-file", str(log),
                sys.executable, "-m", __name__, str(index), *cases,
            ]  # fmt: skip
            try:
                done = run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                problems.append(f"ncu ({mode}) did not finish: {exc}")
                continue
            text = log.read_text(errors="replace") if log.exists() else ""
        names = _launched(done.stdout)
        calls = per_call(parse_launches(text), names, CALLS)
        if done.returncode != 0 or not calls:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            problems.append(
                f"ncu ({mode}) exited {done.returncode} and timed {len(calls)} kernels: {tail[0]}"
            )
        for name, found in calls.items():
            timing = by_case[name].timing(reference) if name in by_case else None
            engine = timing.stats if timing is not None else None
            durations = [float(call.get(METRIC, 0.0)) for call in found]
            if engine is None or not durations or not all(durations):
                continue
            kernels = len(found[0]["kernels"])
            window = event_pair_s if mode == "cold" else 0.0
            ncu_s = statistics.median(durations)
            clocks.append(SecondClock(name, mode, engine.median, ncu_s, kernels, window))
    return clocks, problems


def lines(clocks: Sequence[SecondClock], problems: Sequence[str]) -> list[str]:
    """The second clock's table, for the report's notes."""
    from tabulate import tabulate

    rows = [
        [
            c.case, c.mode, str(c.kernels), seconds(c.engine_s), seconds(c.kernel_s), seconds(c.ncu_s),
            f"{c.kernel_s / c.ncu_s:.3f}",
            ("agrees" if c.agrees else "DISAGREES") if c.judged else "shown, not judged",
        ]
        for c in clocks
    ]  # fmt: skip
    title = (
        f"second clock: ncu's {METRIC} (median of {CALLS} calls; --clock-control none) beside the"
        f" engine's median (cold: less the event pair around its one call); agrees within"
        f" {AGREE_REL:.0%} or {seconds(AGREE_ABS_S)}; under {seconds(MIN_JUDGED_S)} shown, not judged"
    )
    headers = ["kernel", "cache", "kernels", "engine", "less window", "ncu", "ratio", ""]
    return [title, tabulate(rows, headers=headers, disable_numparse=True), *problems]


def _launched(stdout: str) -> list[str]:
    for line in stdout.splitlines():
        if line.startswith("cases: "):
            names = json.loads(line.removeprefix("cases: "))
            return [str(name) for name in names]
    return []


def launch(index: int, names: Sequence[str]) -> None:
    """Under ncu: the named self-check kernels on GPU ``index``, each called once, then :data:`CALLS`
    times, each call after a marker; prints the names it launched."""
    import cupy

    from ...timing.cuda.loading import using_device
    from .gpu_check import CASES

    with using_device(index):
        marker = cupy.RawKernel(f'extern "C" __global__ void {MARKER}(int* flag) {{ *flag = 1; }}', MARKER)
        flag = cupy.zeros(1, dtype=cupy.int32)
        built = []
        for case in CASES:
            if case.name in names:
                fn, args = case.setup(cupy)
                fn(*args)
                built.append((case.name, fn, args))
        cupy.cuda.Device().synchronize()
        for _, fn, args in built:
            for _ in range(CALLS):
                marker((1,), (1,), (flag,))
                fn(*args)
        cupy.cuda.Device().synchronize()
    print("cases: " + json.dumps([name for name, _, _ in built]), flush=True)


if __name__ == "__main__":  # the child ncu runs: python -m ...ncu_clock INDEX CASE...
    launch(int(sys.argv[1]), sys.argv[2:])
