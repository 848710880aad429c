"""The JSON file of a run (``--roofline-json``, ``--roofline-save``), written atomically. No pytest here.

Records become JSON here (and on the test reports that carry them between pytest-xdist processes);
:mod:`.records` says what each field means, docs/json.md documents the file.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidValueError
from ..machine import files

if TYPE_CHECKING:
    from .comparison import Comparison
from .baseline import SCHEMA_VERSION
from .records import DeviceRecord, JsonObject, MeasurementRecord, Record

__all__ = ["device_judgements", "environment", "payload", "write_json_atomic"]


def environment() -> JsonObject:
    """Versions that change what a time means; CuPy is looked up, never imported, for this."""
    from importlib.metadata import PackageNotFoundError, version

    def dist_version(*names: str) -> str | None:
        for name in names:
            try:
                return version(name)
            except PackageNotFoundError:
                continue
        return None

    import datetime

    cupy = sys.modules.get("cupy")
    return {
        # when the run ended: a baseline's regression message says how old the baseline is
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "numpy": dist_version("numpy"),
        "cupy": getattr(cupy, "__version__", None)
        or dist_version("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x"),
        "pytest": dist_version("pytest"),
        "pytest_roofline": dist_version("pytest-roofline"),
    }


def payload(
    records: Sequence[Record],
    devices: Iterable[DeviceRecord],
    *,
    interruption: str | None = None,
    comparisons: Sequence[Comparison] = (),
) -> JsonObject:
    """The JSON file (docs/json.md); ``interruption``: how the run was cut short, None if it was not;
    ``comparisons``: each test's with a baseline (``--roofline-compare``), empty without one."""
    return {
        "schema": SCHEMA_VERSION,
        "environment": environment(),
        "interrupted": interruption is not None,
        "interruption": interruption,
        "devices": [
            # how many rows each set of figures judged, and whether the device had other figures too
            {**device.to_json(), "remeasured": remeasured, "measurements": judged}
            for device, remeasured, judged in device_judgements(devices, records)
        ],
        "measurements": [r.to_json() for r in records],
        "comparisons": [c.to_json() for c in comparisons],
    }


def device_judgements(
    devices: Iterable[DeviceRecord], records: Sequence[Record]
) -> list[tuple[DeviceRecord, bool, int]]:
    """Each device record, whether its device had other figures too during the run (each such set
    is an entry of its own), and how many ``records`` its figures judged."""
    listed = list(devices)  # read twice
    measured = [r for r in records if isinstance(r, MeasurementRecord)]
    versions = Counter(device.key for device in listed)
    return [
        (device, versions[device.key] > 1, sum(r.device_version == device.version for r in measured))
        for device in listed
    ]


def write_json_atomic(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write ``data`` as JSON to ``path`` as :func:`..files.write` does: never a half-written file,
    never a replaced special file, errors naming ``path``. Returns the path of what was written."""
    try:  # first: bad data leaves nothing behind
        text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    except ValueError as exc:  # a NaN or an infinity (a TypeError, an object JSON lacks, is a bug)
        raise InvalidValueError(f"{path}: {exc}") from None
    return files.write(path, text.encode("utf-8"))
