"""The JSON file of a run (``--roofline-json``, ``--roofline-save``), written atomically. No pytest here.

Records become JSON here (and on the test reports that carry them between pytest-xdist processes);
:mod:`.records` says what each field means, docs/json.md documents the file.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import secrets
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .records import (
    SCHEMA_VERSION,
    DeviceRecord,
    JsonObject,
    MeasurementRecord,
    Record,
    as_device_record,
    as_record,
)

__all__ = ["SCHEMA_VERSION", "device_judgements", "environment", "payload", "write_json_atomic"]


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
    records: Sequence[Record | Mapping[str, Any]],
    devices: Iterable[DeviceRecord | Mapping[str, Any]],
    *,
    interruption: str | None = None,
) -> JsonObject:
    """The JSON file: every device with the figures that judged the measurements, and whether the
    run was cut short (``interruption`` says how: its measurements are not all there)."""
    typed = [as_record(r) for r in records]
    return {
        "schema": SCHEMA_VERSION,
        "environment": environment(),
        "interrupted": interruption is not None,
        "interruption": interruption,
        "devices": [
            # how many rows each set of figures judged, and whether the device had other figures too
            {**device.to_json(), "remeasured": remeasured, "measurements": judged}
            for device, remeasured, judged in device_judgements(devices, typed)
        ],
        "measurements": [r.to_json() for r in typed],
    }


def device_judgements(
    devices: Iterable[DeviceRecord | Mapping[str, Any]], records: Sequence[Record | Mapping[str, Any]]
) -> list[tuple[DeviceRecord, bool, int]]:
    """Each device record, whether its device had other figures too during the run (each such set
    is an entry of its own), and how many ``records`` its figures judged."""
    typed = [as_device_record(d) for d in devices]
    measured = [r for r in map(as_record, records) if isinstance(r, MeasurementRecord)]
    versions: dict[str, int] = {}
    for device in typed:
        versions[device.key] = versions.get(device.key, 0) + 1
    return [
        (device, versions[device.key] > 1, sum(r.device_version == device.version for r in measured))
        for device in typed
    ]


def write_json_atomic(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write ``data`` as JSON to ``path``: never a half-written file, never a replaced special file.

    A regular file, or a new path, is written to a temporary file beside it and renamed over it, with
    the existing file's mode (a new one gets the umask's, as any program's output would). A symlink is
    followed: the file it points to is replaced, the link kept. A character device (``/dev/null``, a
    terminal) or a FIFO that a process reads is written in place; renaming over one would destroy it.
    Anything else (a directory, a block device, a socket, a FIFO nobody reads) is an OSError saying
    what it is. Returns the path of what was written.
    """
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"  # first: bad data leaves nothing behind
    try:
        existing: os.stat_result | None = os.stat(path)  # through symlinks, /proc's magic ones too
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_in_place(Path(path), existing, text)
        return Path(path)
    target = Path(os.path.realpath(path))  # a symlink's target is replaced, not the link
    fd, tmp = _new_temporary(target)
    try:
        if existing is not None:
            os.fchmod(fd, stat.S_IMODE(existing.st_mode))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _new_temporary(target: Path) -> tuple[int, Path]:
    """A new file beside ``target``, created with mode 0666 less the umask (mkstemp's is always 0600)."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(target.parent))


def _write_in_place(path: Path, existing: os.stat_result, text: str) -> None:
    mode = existing.st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        kind = "block device" if stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode) else "special file"
        raise OSError(errno.EINVAL, f"it is a {kind}, not a file to write JSON to", str(path))
    try:
        # non-blocking, so a FIFO nobody reads is an error now rather than a hang
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "it is a FIFO that no process is reading", str(path)) from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
