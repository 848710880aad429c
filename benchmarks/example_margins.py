"""How far apart are the example suite's good and bad variants, and where do its budgets sit?

Runs ``pytest example_project --roofline-mode report --roofline-json ...`` N times (nothing can
miss in report mode, so every run measures every variant), reads the JSON files and prints, per
op: the attained fraction of speed of light of the good and the bad variant (min-max over the
runs), their separation, the geometric mean of the two ranges' near ends, the budget the suite
used and its margin to each side. Good and bad run in the same suite run, so each run measures
both under the same load, and the runs interleave them.

The worst case is what a budget has to survive: the good variant at its slowest against the bad
one at its fastest. So the separation is ``good min / bad max``, the budget that leaves both
sides the same margin is their geometric mean ``sqrt(good min * bad max)``, and each margin is
``good min / budget`` and ``budget / bad max``. Issue 8 asks for a separation of at least 8x
(aim for 12x: a 2.8x margin on each side).

Run from the repository root::

    python benchmarks/example_margins.py                # 5 runs
    python benchmarks/example_margins.py --runs 10 --xdist
    python benchmarks/example_margins.py --neighbour mem   # beside ../shared/tools/neighbour.py
    python benchmarks/example_margins.py --keep /tmp/margins [...]  # pool several invocations

With ``--keep DIR`` each run's JSON stays in DIR and the table covers every JSON there, earlier
invocations' included: run the serial, ``--xdist`` and ``--neighbour`` invocations with one DIR
and the last table is the worst case over all of them (start from an empty DIR after changing a
kernel); ``--runs 0 --keep DIR`` only reports. Budgets and margins are those of
``example_project/budgets.py`` as it is now. Arguments after ``--`` go to pytest. Each run takes
20-30 s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the synthetic neighbour shared by the benchmarks: ``../shared/tools/neighbour.py`` from the root
NEIGHBOUR = ROOT.parent / "shared" / "tools" / "neighbour.py"
TARGET_SEPARATION = 8.0
AIM_SEPARATION = 12.0
#: an op without a bad variant has no geometric mean: its budget leaves its good variant this margin
GOOD_ONLY_MARGIN = 4.0


@dataclass(frozen=True, slots=True)
class Pair:
    """An op's good and bad variant, by the end of their pytest node ids (None: no bad variant)."""

    op: str
    good: str
    bad: str | None


#: NumPy variants only: the CuPy ones skip without a GPU, and their budgets are set on one.
PAIRS: tuple[Pair, ...] = (
    Pair(
        "saxpy",
        "test_saxpy.py::test_saxpy_contiguous[numpy]",
        "test_saxpy.py::test_saxpy_strided[numpy]",
    ),
    Pair(
        "layernorm",
        "test_layernorm.py::test_layernorm[numpy-fused]",
        "test_layernorm.py::test_layernorm[numpy-naive]",
    ),
    Pair("gemm", "test_gemm.py::test_numpy_blas_gemm", "test_gemm.py::test_numpy_rank1_gemm"),
    Pair(
        "transpose",
        "test_transpose.py::TestTranspose::test_blocked[numpy]",
        "test_transpose.py::TestTranspose::test_naive[numpy]",
    ),
    Pair("bias_relu", "test_bias_relu.py::test_bias_relu[numpy]", None),
)


@dataclass(frozen=True, slots=True)
class Variant:
    """One test's attained fractions over the runs."""

    attained: tuple[float, ...]

    @property
    def low(self) -> float:
        return min(self.attained)

    @property
    def high(self) -> float:
        return max(self.attained)

    def span(self) -> str:
        return f"{self.low:.2%}-{self.high:.2%}"


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--runs",
        type=_count,
        default=5,
        metavar="N",
        help="suite runs; 0 only reports on --keep (default: 5)",
    )
    parser.add_argument("--xdist", action="store_true", help="run the suite under -n 2 (default: serial)")
    parser.add_argument(
        "--enforce",
        action="store_true",
        help="run in enforce mode, as the README's main job does, and print each run's outcome: the"
        " stability check (default: report mode, where nothing can miss)",
    )
    parser.add_argument(
        "--neighbour",
        choices=("mem", "cpu", "mix"),
        default=None,
        metavar="KIND",
        help="run beside ../shared/tools/neighbour.py --kind KIND: mem, cpu or mix (default: no neighbour)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the runs' JSON in DIR and report over every JSON there (default: a temporary directory)",
    )
    args = list(argv)
    cut = args.index("--") if "--" in args else len(args)
    parsed = parser.parse_args(args[:cut])
    if parsed.runs == 0 and parsed.keep is None:
        parser.error("--runs 0 reports on the runs kept in --keep DIR; name one")
    if parsed.neighbour is not None and not NEIGHBOUR.is_file():
        parser.error(f"--neighbour needs {NEIGHBOUR} (../shared/tools/neighbour.py from the repository root)")
    return parsed, args[cut + 1 :]


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more; got {value}")
    return value


def current_budgets() -> Mapping[str, float]:
    """The NumPy budgets in ``example_project/budgets.py`` now, by op."""
    sys.path.insert(0, str(ROOT / "example_project"))
    try:
        import budgets  # the example's own module; it needs pytest, which runs the suite anyway
    finally:
        sys.path.pop(0)
    return {op: by_backend["numpy"] for op, by_backend in budgets.BUDGETS.items()}


@contextmanager
def neighbour(kind: str | None, seconds: float) -> Iterator[None]:
    """Run the synthetic neighbour (its own process group) for the duration, then stop it."""
    if kind is None:
        yield
        return
    command = [sys.executable, str(NEIGHBOUR), "--kind", kind, "--procs", "1", "--seconds", f"{seconds:.0f}"]
    proc = subprocess.Popen(command, start_new_session=True)
    try:
        time.sleep(1.0)  # let it start loading the machine
        if proc.poll() is not None:
            raise SystemExit(f"the neighbour exited at once (status {proc.returncode}): {' '.join(command)}")
        yield
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the neighbour and the workers it started
        proc.wait()


def run_suite(json_path: Path, xdist: bool, extra: Sequence[str], *, enforce: bool = False) -> str:
    """Run the suite once; return pytest's closing line. In report mode a failure stops the script;
    in enforce mode it is an outcome to count (the failures are printed)."""
    command = [
        sys.executable, "-m", "pytest", "example_project", "-q", "-p", "no:cacheprovider",
        "--roofline-mode", "enforce" if enforce else "report", "--roofline-json", str(json_path),
        *(["-n", "2"] if xdist else []), *extra,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    closing = lines[-1].strip("= ") if lines else f"no output (status {result.returncode})"
    if result.returncode != 0:
        sys.stdout.write("\n".join(line for line in lines if line.startswith(("FAILED", "ERROR"))) + "\n")
        if not enforce:
            sys.stdout.write(result.stdout[-4000:] + result.stderr[-2000:])
            raise SystemExit(f"the suite failed (status {result.returncode}): {' '.join(command)}")
    return re.sub(r" in [0-9.]+s( \(.*\))?$", "", closing)


def collect(paths: Sequence[Path]) -> dict[str, Variant]:
    """Each measured test's attained fractions over the runs, keyed by node id."""
    attained: dict[str, list[float]] = {}
    for path in paths:
        for row in json.loads(path.read_text())["measurements"]:
            attained.setdefault(row["nodeid"], []).append(float(row["attained"]))
    return {nodeid: Variant(tuple(values)) for nodeid, values in attained.items()}


def find(variants: Mapping[str, Variant], suffix: str, runs: int) -> Variant:
    matches = [nodeid for nodeid in variants if nodeid.endswith(suffix)]
    if len(matches) != 1:
        raise SystemExit(f"expected one measured test ending in {suffix!r}; found {matches or 'none'}")
    variant = variants[matches[0]]
    if len(variant.attained) != runs:
        raise SystemExit(f"{matches[0]} was measured {len(variant.attained)} times in {runs} runs")
    return variant


def readable(fraction: float) -> float:
    """``fraction`` rounded to two significant figures (0.05127 -> 0.051)."""
    digits = 1 - math.floor(math.log10(fraction))
    return round(fraction, digits)


def report(variants: Mapping[str, Variant], runs: int, budgets: Mapping[str, float]) -> list[str]:
    """The table, and the ops that miss the 8x target (empty when none does)."""
    header = (
        f"{'op':<10} {'good (min-max)':>15} {'bad (min-max)':>15} {'separation':>11} {'median sep':>10}"
        f" {'geo mean':>9} {'budget':>7} {'margin good':>11} {'margin bad':>10}"
    )
    print(header)
    print("-" * len(header))
    short: list[str] = []
    for pair in PAIRS:
        good = find(variants, pair.good, runs)
        budget = budgets[pair.op]
        margin_good = f"{good.low / budget:.1f}x"
        if pair.bad is None:
            suggested = f"*{readable(good.low / GOOD_ONLY_MARGIN):.2%}"
            print(
                f"{pair.op:<10} {good.span():>15} {'-':>15} {'-':>11} {'-':>10} {suggested:>9}"
                f" {budget:>7.2%} {margin_good:>11} {'-':>10}"
            )
            continue
        bad = find(variants, pair.bad, runs)
        separation = good.low / bad.high
        median_sep = statistics.median(good.attained) / statistics.median(bad.attained)
        geo = math.sqrt(good.low * bad.high)
        print(
            f"{pair.op:<10} {good.span():>15} {bad.span():>15} {separation:>10.1f}x {median_sep:>9.1f}x"
            f" {readable(geo):>9.2%} {budget:>7.2%} {margin_good:>11} {budget / bad.high:>9.1f}x"
        )
        if separation < TARGET_SEPARATION:
            short.append(pair.op)
    return short


def main(argv: Sequence[str] | None = None) -> None:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    mode = "-n 2" if args.xdist else "serial"
    if args.runs:
        print(
            f"{args.runs} run(s) of pytest example_project ({mode}"
            f"{', neighbour ' + args.neighbour if args.neighbour else ''}); load average before: {load}"
        )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="example-margins-") as tmp:
        directory = Path(tmp) if args.keep is None else args.keep
        directory.mkdir(parents=True, exist_ok=True)
        tag = (
            time.strftime("%Y%m%d-%H%M%S")
            + ("-xdist" if args.xdist else "")
            + (f"-{args.neighbour}" if args.neighbour else "")
        )
        outcomes: dict[str, int] = {}
        with neighbour(args.neighbour if args.runs else None, seconds=120.0 * args.runs + 60.0):
            for i in range(1, args.runs + 1):
                closing = run_suite(directory / f"{tag}-run{i}.json", args.xdist, extra, enforce=args.enforce)
                outcomes[closing] = outcomes.get(closing, 0) + 1
                print(f"  run {i}/{args.runs}: {closing} ({time.perf_counter() - start:.0f} s)", flush=True)
        if args.enforce:
            verdict = "the same outcome every run" if len(outcomes) == 1 else "FLAKY: outcomes differ"
            print(f"outcomes: {'; '.join(f'{n}x {line}' for line, n in outcomes.items())} ({verdict})")
        paths = sorted(directory.glob("*.json"), key=lambda path: path.stat().st_mtime)
        variants = collect(paths)
    if not paths:
        raise SystemExit(f"no runs to report on in {directory}")
    if len(paths) > args.runs:
        print(f"\nover all {len(paths)} runs kept in {directory} ({args.runs} new):")
    print()
    short = report(variants, len(paths), current_budgets())
    print(
        f"\nseparation = good min / bad max (worst case over the runs); median sep = the medians' ratio;"
        f"\ngeo mean = sqrt(good min * bad max), rounded to 2 significant figures: the budget that leaves"
        f"\nboth sides the same margin; margins = good min / budget and budget / bad max;"
        f"\n* no bad variant: the budget that leaves the good one a {GOOD_ONLY_MARGIN:.0f}x margin."
        f"\ntarget: separation >= {TARGET_SEPARATION:.0f}x, a {math.sqrt(TARGET_SEPARATION):.1f}x margin each"
        f" side at the geometric mean; aim {AIM_SEPARATION:.0f}x ({math.sqrt(AIM_SEPARATION):.1f}x)"
    )
    if short:
        print(f"below the {TARGET_SEPARATION:.0f}x target: {', '.join(short)}")


if __name__ == "__main__":
    main()
