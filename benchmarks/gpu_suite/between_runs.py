"""The noise between runs: the same tests run in several processes, one after another with an idle gap
between them, at one commit, and per measurement the medians of the runs beside the 95% band each
run reported and the clocks it held (issue 39, item 2).

    python3 benchmarks/gpu_suite/between_runs.py --out DIR [--runs 3] [--gap 10] -- PYTEST_ARGS...
    python3 benchmarks/gpu_suite/between_runs.py --out DIR --table-only   # the table of DIR's runs

Each run is ``python -m pytest PYTEST_ARGS --roofline-json DIR/run-K.json``. A measurement's medians
are *within its band* when every run's median lies inside every run's reported interval (median ±
``stats.ci_half``): what one run's interval promises about the next; and *within the band with the
term between runs* when they lie inside that interval widened by the record's ``between_runs``
(:mod:`pytest_roofline.model.run_noise`, the two added in quadrature). The table says, per
measurement: the medians (µs), their spread (max / min − 1), the widest band reported (±%), whether
the medians are within it, the term between runs and whether they are within the two, and each
run's median SM clock, power and samples left out.

Exit status 0 when the table was printed, 1 when a run failed to write its report.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout, not installed

from pytest_roofline.model import run_noise


def run_all(out: Path, runs: int, gap_s: float, pytest_args: list[str]) -> list[Path]:
    reports = []
    for k in range(1, runs + 1):
        if k > 1:
            time.sleep(gap_s)  # idle: the GPU's clocks and power fall back between runs, as between CI jobs
        report = out / f"run-{k}.json"
        command = [sys.executable, "-m", "pytest", *pytest_args, "--roofline-json", str(report)]
        print(f"== run {k}: {' '.join(command)}", flush=True)
        done = subprocess.run(command, check=False)
        print(f"== run {k} exited {done.returncode}", flush=True)
        reports.append(report)
    return reports


def _key(record: dict[str, Any]) -> str:
    return f"{record['nodeid']}::{record.get('name') or ''}"


def between_runs(record: dict[str, Any]) -> float:
    """The record's term between runs (a 95% half-width), from its kind where the file predates it."""
    found = (record.get("between_runs") or {}).get("rel")
    if isinstance(found, (int, float)):
        return float(found)
    return run_noise.between_runs_rel(run_noise.prior(record.get("backend"), record.get("bound")))


def table(reports: list[Path]) -> tuple[list[list[str]], int, int]:
    """One row per measurement present in every run; how many have their medians within the runs'
    bands, and within them widened by the term between runs."""
    runs = [
        {_key(r): r for r in json.loads(p.read_text())["measurements"] if r.get("stats")} for p in reports
    ]
    rows, within_count, within_both_count = [], 0, 0
    for key in runs[0]:
        records = [run.get(key) for run in runs]
        if any(r is None for r in records):
            continue
        medians = [r["stats"]["median"] for r in records]  # type: ignore[index]
        halves = [r["stats"]["ci_half"] for r in records]  # type: ignore[index]
        within = all(abs(m - other) <= h for m, h in zip(medians, halves, strict=True) for other in medians)
        between = between_runs(records[0])  # type: ignore[arg-type]
        wide = [math.hypot(h, between * m) for m, h in zip(medians, halves, strict=True)]
        within_both = all(abs(m - o) <= w for m, w in zip(medians, wide, strict=True) for o in medians)
        within_count += within
        within_both_count += within_both
        clocks = [r.get("clocks") or {} for r in records]  # type: ignore[union-attr]
        rows.append(
            [
                records[0]["name"] or key.split("::")[-2],  # type: ignore[index]
                " ".join(f"{m * 1e6:.2f}" for m in medians),
                f"{(max(medians) / min(medians) - 1) * 100:.1f}%",
                f"±{max(h / m for m, h in zip(medians, halves, strict=True)) * 100:.2f}%",
                "yes" if within else "NO",
                f"±{between * 100:.1f}%",
                "yes" if within_both else "NO",
                " ".join(str(c.get("median_sm_mhz") or "-") for c in clocks),
                " ".join(f"{c['median_power_w']:.0f}" if c.get("median_power_w") else "-" for c in clocks),
                " ".join(str(c.get("slowed_samples_left_out") or 0) for c in clocks),
            ]
        )
    return rows, within_count, within_both_count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gap", type=float, default=10.0, help="idle seconds between runs")
    parser.add_argument("--table-only", action="store_true", help="the table of the reports already in --out")
    parser.add_argument("pytest_args", nargs="*")
    options = parser.parse_args(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    if options.table_only:
        reports = sorted(options.out.glob("run-*.json"))
    else:
        reports = run_all(options.out, options.runs, options.gap, options.pytest_args)
    missing = [str(p) for p in reports if not p.exists()]
    if missing or not reports:
        print(f"no report from: {', '.join(missing) or 'any run'}")
        return 1
    from tabulate import tabulate

    rows, within, within_both = table(reports)
    print(
        f"\n{len(reports)} runs, {len(rows)} measurements in all of them;"
        f" medians within every run's band: {within}; with the term between runs: {within_both}"
    )
    headers = [
        "measurement",
        "medians µs",
        "spread",
        "widest band",
        "within",
        "between runs",
        "within both",
        "SM MHz",
        "power W",
        "left out",
    ]
    print(tabulate(rows, headers=headers, disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
