"""What a GPU run's ``--roofline-json`` says, in one table, and the checks the first GPU run is held to.

    python3 benchmarks/gpu_suite/check_json.py RESULTS.json [--require-backend cuda]
        [--as-designed cuda [--failed FILE]] [--expect TEST@COLUMN=LO..HI ...] [--expect TEST@level=l2 ...]

Per measurement: the backend that timed it, cold or warm and the memory level that judged it, the
time, attained as judged, attained at the device table's datasheet floor and at the calibrated floor.
Exit status 1 when a measurement reads faster than light (attained above 1, judged or at the
calibrated floor; judged against a peak quoted below the maximum SM clock, above that clock's
ratio, the device's ``at_max_clock`` over the peak), when an ``--expect`` bound is not met (the
first GPU run's acceptance: ``test_mm_bf16_8192@datasheet=0.70..1.0``), or, with
``--require-backend cuda``, when no measurement was timed on the GPU (the example project's CuPy
half skipped), or, with ``--as-designed cuda``, when a measurement that backend timed did not end
as designed: a good variant passes its budget, a bad one (marked xfail) misses it; with
``--failed FILE`` too (the node ids pytest reported failed or in error, one a line), when a failed
test is anything but another backend's budget outcome (a NumPy budget set on another CPU, missed
on the GPU host's): a CUDA test's own assertion, or a test that raised before measuring, fails
the check; 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout, not installed

from pytest_roofline.model.units import seconds

#: attained above this is faster than light (a hair over 1 is rounding in the floor)
LIGHT = 1.0 + 1e-9
_EXPECTATION = re.compile(r"[^@=]+@((judged|datasheet|calibrated)=[0-9.]+\.\.[0-9.]+|level=\w+)")


def judged_light(record: dict[str, Any], devices: list[dict[str, Any]]) -> float:
    """Attained as judged above this is faster than light: :data:`LIGHT`, raised by the clock's ratio
    where the record was judged against a peak quoted below the device's maximum SM clock (an
    H200's bf16 tensor figure at 1830 of 1980 MHz: a kernel at 1980 MHz can attain 1.08)."""
    if record.get("bound") != "compute":
        return LIGHT
    for device in devices:
        if device.get("key") != record.get("device"):
            continue
        for peak in device.get("peaks") or ():
            top = peak.get("at_max_clock")
            if (
                top
                and peak.get("unit") == record.get("unit")
                and peak.get("flops") == record.get("peak_flops")
            ):
                return LIGHT * top / peak["flops"]
    return LIGHT


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


def figures(record: dict[str, Any]) -> dict[str, Any]:
    """What a measurement is checked by: attained as judged, at the datasheet floor and at the
    calibrated one, and the memory level that judged it.

    The calibrated floor is at the faster of the calibration's ceiling and the one a probe measured
    beside the kernel (a CPU's paired ceiling, the JSON's ``ceiling.speed`` above 1), its bounding
    term scaled as the plugin scales it (``model.paired_ceilings.paired_floor_s``): a calibration
    taken while the host was busy is slower than the machine, and a kernel measured on a quiet one
    read 1.05 of it on GPU run 7's 16-core Xeon, where the plugin, pairing, judged it at 0.65."""
    calibrated, time_s = record.get("calibrated_floor_s"), record.get("time_s")
    ceiling = record.get("ceiling")
    speed = ceiling.get("speed") if isinstance(ceiling, dict) else None
    if calibrated and isinstance(ceiling, dict) and isinstance(speed, (int, float)) and speed > 1:
        compute_s, memory_s = record.get("compute_s") or 0.0, record.get("memory_s") or 0.0
        if ceiling.get("resource") == "bandwidth":
            calibrated = max(memory_s / speed, compute_s)
        else:
            calibrated = max(compute_s / speed, memory_s)
    return {
        "judged": record.get("attained"),
        "datasheet": datasheet_attained(record),
        "calibrated": calibrated / time_s if calibrated and time_s else None,
        "level": record.get("memory_level"),
    }


def check(data: dict[str, Any], expectations: list[str]) -> tuple[list[list[str]], list[str]]:
    """The table's rows, and every failed check: faster than light (judged or at the calibrated
    floor), or an expectation ``TEST@COLUMN=LO..HI`` (``judged``, ``datasheet``, ``calibrated``) or
    ``TEST@level=l2`` not met. TEST is the test's name as the table shows it."""
    table, failed = [], []
    measured: dict[str, dict[str, Any]] = {}
    for record in data.get("measurements", []):
        if record.get("verdict") == "skipped":
            continue
        name, found = record["nodeid"].split("::")[-1], figures(record)
        measured[name] = found
        lights = {"judged": judged_light(record, data.get("devices") or []), "calibrated": LIGHT}
        for column, light in lights.items():
            value = found[column]
            if value is not None and value > light:
                failed.append(f"faster than light: {name} attained {value:.3f} ({column})")
        time_s = record.get("time_s")
        table.append([
            name, str(record.get("backend")), f"{record.get('cache_state')} {found['level']}",
            seconds(time_s) if time_s else "-", _fraction(found["judged"]), _fraction(found["datasheet"]),
            _fraction(found["calibrated"]), str(record.get("verdict")), *_digest(record),
        ])  # fmt: skip
    for expectation in expectations:
        problem = _unmet(expectation, measured)
        if problem:
            failed.append(f"expected {expectation}: {problem}")
    return table, failed


def failed_otherwise(data: dict[str, Any], backend: str, failed: list[str]) -> list[str]:
    """Of the tests pytest reported failed, those that are not another backend's budget outcome:
    a test of ``backend``, one whose record says it passed its budget (its own assertion failed
    after), and one with no record (it raised before measuring, or errored)."""
    records = {str(r.get("nodeid")): r for r in data.get("measurements", [])}
    problems = []
    for nodeid in failed:
        record = records.get(nodeid)
        if record is None or record.get("backend") == backend or record.get("verdict") not in _BUDGET_MISSES:
            problems.append(f"failed: {nodeid}")
        else:
            print(f"a figure here: {nodeid} ({record.get('backend')}) ended {record.get('verdict')}")
    return problems


#: the verdicts of a test that failed on its budget alone
_BUDGET_MISSES = ("MISS", "inconclusive")


def not_as_designed(data: dict[str, Any], backend: str) -> list[str]:
    """The measurements ``backend`` timed that did not end as designed: a good variant that did not
    pass its budget, a bad one (``xfailed``: marked to miss) that did not miss it."""
    problems = []
    for record in data.get("measurements", []):
        if record.get("backend") != backend or record.get("verdict") == "skipped":
            continue
        bad, verdict = bool(record.get("xfailed")), record.get("verdict")
        if verdict != ("MISS" if bad else "pass"):
            designed = "a bad variant, designed to miss" if bad else "a good variant, designed to pass"
            name = record["nodeid"].split("::")[-1]
            problems.append(f"not as designed: {name} ({designed}) ended {verdict}")
    return problems


def _unmet(expectation: str, measured: dict[str, dict[str, Any]]) -> str:
    """Why ``TEST@COLUMN=BOUND`` does not hold ("" when it does)."""
    target, _, bound = expectation.partition("=")
    name, _, column = target.partition("@")
    if name not in measured:
        return "no such measurement"
    if column == "level":
        level = measured[name]["level"]
        return "" if level == bound else f"judged against {level}"
    low, _, high = bound.partition("..")
    value = measured[name].get(column)
    if value is None:
        return f"no {column} figure"
    return "" if float(low) <= value <= float(high) else f"{column} attained {value:.3f}"


def _digest(record: dict[str, Any]) -> list[str]:
    """The rest of a measurement's digest: its 95% interval, the SM clock it held (median, lowest), the
    power drawn, the samples left out (preempted, settling, slowed clocks) and attained at the held
    clock."""
    stats = record.get("stats") or {}
    clocks = record.get("clocks") or {}
    left_out = sum(int(record.get(field) or 0) for field in ("excluded_samples", "transient_samples")) + int(
        clocks.get("slowed_samples_left_out") or 0
    )
    held = record.get("attained_at_held_clock")
    sm = f"{clocks['median_sm_mhz']} ({clocks.get('min_sm_mhz')})" if clocks.get("median_sm_mhz") else "-"
    power = f"{clocks['median_power_w']:.0f}" if clocks.get("median_power_w") else "-"
    interval = f"±{stats['ci_rel'] * 100:.2f}%" if isinstance(stats.get("ci_rel"), (int, float)) else "-"
    return [interval, sm, power, str(left_out), _fraction(held if isinstance(held, (int, float)) else None)]


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("results", help="a --roofline-json file")
    parser.add_argument("--require-backend", metavar="NAME", help="fail unless a measurement used it")
    parser.add_argument(
        "--as-designed", metavar="NAME",
        help="fail when a measurement this backend timed did not end as designed (good pass, bad miss)",
    )  # fmt: skip
    parser.add_argument(
        "--failed", metavar="FILE",
        help="with --as-designed: the node ids pytest reported failed (another backend's budget: a figure)",
    )  # fmt: skip
    parser.add_argument(
        "--expect", action="append", default=[], metavar="TEST@COLUMN=LO..HI",
        help="an acceptance bound: COLUMN judged, datasheet or calibrated; or TEST@level=l2",
    )  # fmt: skip
    options = parser.parse_args(argv)
    for expectation in options.expect:
        if not _EXPECTATION.fullmatch(expectation):
            parser.error(f"--expect {expectation!r}: write TEST@judged=0.7..1.0 (judged, datasheet, "
                         "calibrated) or TEST@level=l2")  # fmt: skip
    try:
        data = json.loads(Path(options.results).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"check_json: cannot read {options.results}: {exc}", file=sys.stderr)
        return 2
    from tabulate import tabulate

    table, failed = check(data, options.expect)
    headers = [
        "test",
        "backend",
        "cache",
        "time",
        "attained",
        "at datasheet",
        "at calibrated",
        "verdict",
        "±95%",
        "SM MHz (min)",
        "W",
        "left out",
        "at held clock",
    ]
    print(tabulate(table, headers=headers, disable_numparse=True))
    backends = {str(record.get("backend")) for record in data.get("measurements", [])}
    if options.require_backend and options.require_backend not in backends:
        failed.append(
            f"no measurement was timed by the {options.require_backend} backend: {sorted(backends)}"
        )
    if options.as_designed:
        failed += not_as_designed(data, options.as_designed)
        if options.failed:
            try:
                ids = Path(options.failed).read_text(encoding="utf-8").split()
            except OSError as exc:
                print(f"check_json: cannot read {options.failed}: {exc}", file=sys.stderr)
                return 2
            failed += failed_otherwise(data, options.as_designed, ids)
    for line in failed:
        print(line)
    met = len(options.expect) - sum(line.startswith("expected ") for line in failed)
    lighter = "yes" if not any(line.startswith("faster") for line in failed) else "no"
    print(f"checks: {'failed' if failed else 'ok'}; nothing faster than light: {lighter};"
          f" expectations met: {met} of {len(options.expect)}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
