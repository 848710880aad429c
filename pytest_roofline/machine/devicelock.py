"""One timing window per device at a time, across the pytest-xdist workers of one test run.

Each measurement holds an exclusive ``flock`` on its run's and device's lock file; where none can be
made it measures unlocked, with one note: docs/architecture.md ("Files and locks").
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from .files import can_lock, lock, open_lock_file

__all__ = ["PREFIX", "DeviceLocks", "lock_path", "remove_lock_files"]

PREFIX = "pytest-roofline-"


def lock_path(directory: str | os.PathLike[str], run_id: str, device_key: str) -> Path:
    """The lock file of ``device_key`` in the run ``run_id`` (both slugged: they may be anything)."""
    return Path(directory) / f"{PREFIX}{_slug(run_id)}-{_slug(device_key)}.lock"


def remove_lock_files(run_id: str, directory: str | os.PathLike[str] | None = None) -> None:
    """Remove the run's lock files, best effort; call it only once no worker of the run measures."""
    folder = Path(tempfile.gettempdir() if directory is None else directory)
    for path in folder.glob(f"{PREFIX}{_slug(run_id)}-*.lock"):
        with contextlib.suppress(OSError):  # gone already, or not ours: a stale empty file is harmless
            path.unlink()


class DeviceLocks:
    """The device locks of one run, as one process holds them: ``hold(key)`` is a context manager,
    nestable (docs/architecture.md, "Files and locks"), a no-op for ``run_id=None`` (a serial run);
    ``note`` hears, once, why locking does not work here."""

    def __init__(
        self,
        run_id: str | None,
        *,
        directory: str | os.PathLike[str] | None = None,
        note: Callable[[str], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self.directory = Path(tempfile.gettempdir() if directory is None else directory)
        self._note = note
        self._noted = False
        #: device key -> (open file descriptor or None when unlocked, nesting depth)
        self._held: dict[str, tuple[int | None, int]] = {}

    def hold(self, device_key: str) -> _Hold:
        return _Hold(self, device_key)

    def held(self, device_key: str) -> bool:
        """Whether this process holds ``device_key``'s lock now (False when it measures unlocked)."""
        fd, _ = self._held.get(device_key, (None, 0))
        return fd is not None

    def _acquire(self, key: str) -> None:
        fd, depth = self._held[key] if key in self._held else (self._lock(key), 0)
        self._held[key] = (fd, depth + 1)

    def _release(self, key: str) -> None:
        fd, depth = self._held.pop(key)
        if depth > 1:
            self._held[key] = (fd, depth - 1)
        elif fd is not None:
            os.close(fd)  # releases the lock

    def _lock(self, key: str) -> int | None:
        if self.run_id is None:
            return None
        if not can_lock():
            self._unlocked("this platform has no fcntl")
            return None
        path = lock_path(self.directory, self.run_id, key)
        try:
            fd = open_lock_file(path)
        except OSError as exc:
            self._unlocked(f"cannot open {path}: {exc.strerror or exc}")
            return None
        try:
            lock(fd)  # waits while another worker measures on this device
        except OSError as exc:
            os.close(fd)
            self._unlocked(f"cannot lock {path}: {exc.strerror or exc}")
            return None
        return fd

    def _unlocked(self, why: str) -> None:
        if self._noted or self._note is None:
            return
        self._noted = True
        self._note(
            f"pytest-xdist workers measure without the per-device lock ({why}), so a worker's "
            "timing may overlap another's and be slowed by it"
        )


class _Hold:
    """A class, not a generator: an exception from the kernel passes through with no frame of ours."""

    def __init__(self, locks: DeviceLocks, key: str) -> None:
        self._locks = locks
        self._key = key

    def __enter__(self) -> None:
        self._locks._acquire(self._key)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._locks._release(self._key)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "x"
