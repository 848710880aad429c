"""The verdicts of an A/B run on the GPU (``gpu_run.sh``'s ``ab`` step), one line per measurement, and
whether they are what the run was set up to show.

    python3 benchmarks/gpu_suite/ab/verdicts.py REPORT.json --expect slower|not-slower

Exit status 0 when every measurement's ``vs_base`` verdict is as expected (``slower``: the head does
1.1x the work; ``not-slower``: an identical copy, where ``slower`` is a false alarm), 1 otherwise or
when the report holds no measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("report", type=Path)
    parser.add_argument("--expect", choices=("slower", "not-slower"), required=True)
    options = parser.parse_args(argv)
    records = json.loads(options.report.read_text())["measurements"]
    wrong = 0
    for record in records:
        vs = record.get("vs_base") or {}
        verdict = vs.get("verdict")
        wrong += (verdict != "slower") if options.expect == "slower" else (verdict == "slower")
        print(f"{record['nodeid'].split('::')[-1]}: {verdict}; {vs.get('summary')}; ratio {vs.get('ratio')}"
              f" [{vs.get('lo')}, {vs.get('hi')}], {vs.get('pairs')} pairs, A/A floor {vs.get('aa_floor')};"
              f" base {vs.get('base_time_s')} s, head {vs.get('head_time_s')} s")  # fmt: skip
    print(f"expected {options.expect}: {len(records) - wrong} of {len(records)} as expected")
    return 1 if wrong or not records else 0


if __name__ == "__main__":
    sys.exit(main())
