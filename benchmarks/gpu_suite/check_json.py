"""What a GPU run's ``--roofline-json`` says, in one table, and the checks the first GPU run is held to.

    python3 benchmarks/gpu_suite/check_json.py RESULTS.json [--require-backend cuda]

Per measurement: the backend that timed it, cold or warm and the memory level that judged it, the
time, attained as judged, attained at the device table's datasheet floor and at the calibrated floor.
Exit status 1 when a measurement reads faster than light (attained above 1, judged or at the
calibrated floor), or, with ``--require-backend cuda``, when no measurement was timed on the GPU (the
example project's CuPy half skipped); 2 when the file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout, not installed

from pytest_roofline.model.units import seconds

#: attained above this is faster than light (a hair over 1 is rounding in the floor)
LIGHT = 1.0 + 1e-9


def datasheet_attained(record: dict[str, Any]) -> float | None:
    """Attained at the device table's own floor for the record's op, where the table knows its device."""
    from pytest_roofline import estimate

    math = "tf32" if record.get("peak_precision") == "tf32" and record.get("dtype") == "fp32" else None
    try:
        floor = estimate(
            record["op"], dtype=record["dtype"], device=record["device"], math=math, **record["params"]
        ).floor_s
    except (ValueError, TypeError, KeyError, RuntimeError):  # a device or op the table cannot price
        return None
    time_s = record.get("time_s")
    return floor / time_s if time_s else None


def rows(data: dict[str, Any]) -> tuple[list[list[str]], list[str]]:
    """The table's rows, and the measurements that read faster than light."""
    found, faster = [], []
    for record in data.get("measurements", []):
        if record.get("verdict") == "skipped":
            continue
        attained = record.get("attained")
        calibrated = record.get("calibrated_floor_s")
        time_s = record.get("time_s")
        at_calibrated = calibrated / time_s if calibrated and time_s else None
        at_sheet = datasheet_attained(record)
        for name, value in (("judged", attained), ("at the calibrated floor", at_calibrated)):
            if value is not None and value > LIGHT:
                faster.append(f"{record['nodeid']}: attained {value:.3f} {name}")
        found.append([
            record["nodeid"].split("::")[-1], str(record.get("backend")),
            f"{record.get('cache_state')} {record.get('memory_level')}",
            seconds(time_s) if time_s else "-", _fraction(attained), _fraction(at_sheet),
            _fraction(at_calibrated), str(record.get("verdict")),
        ])  # fmt: skip
    return found, faster


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("results", help="a --roofline-json file")
    parser.add_argument("--require-backend", metavar="NAME", help="fail unless a measurement used it")
    options = parser.parse_args(argv)
    try:
        data = json.loads(Path(options.results).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"check_json: cannot read {options.results}: {exc}", file=sys.stderr)
        return 2
    from tabulate import tabulate

    table, faster = rows(data)
    headers = ["test", "backend", "cache", "time", "attained", "at datasheet", "at calibrated", "verdict"]
    print(tabulate(table, headers=headers, disable_numparse=True))
    status = 0
    if faster:
        print("faster than light:\n  " + "\n  ".join(faster))
        status = 1
    backends = {str(record.get("backend")) for record in data.get("measurements", [])}
    if options.require_backend and options.require_backend not in backends:
        print(f"no measurement was timed by the {options.require_backend} backend: {sorted(backends)}")
        status = 1
    print("checks: " + ("failed" if status else "ok (nothing faster than light)"))
    return status


if __name__ == "__main__":
    sys.exit(main())
