"""The plugin's own files: the folder they are cached in, writing one whole or not at all, and the
file locks that let pytest-xdist workers take turns.

Used by the calibration cache (:mod:`.calibration_cache`), the per-device timing locks
(:mod:`.devicelock`) and the compiler's cache (:mod:`pytest_roofline.analysis.compiler`). Locks are
POSIX ``flock``: the OS releases one when its holder exits, crashed or not, so a dead worker never
blocks the others. The files a user names (the JSON report, the baseline, the plot) are written by
:mod:`pytest_roofline.outputs` instead: they take the umask's mode and may be a pipe or a device,
where these are private (mode 0600) and flushed to disk before they replace the old one.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

__all__ = ["cache_dir", "can_lock", "lock", "open_lock_file", "writing_atomically"]

#: how often a lock with a timeout is tried again while another process holds it
_POLL_S = 0.05


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pytest-roofline`` (when set to an absolute path) or ``~/.cache/pytest-roofline``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "pytest-roofline"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return Path(tempfile.gettempdir()) / "pytest-roofline"
    return home / ".cache" / "pytest-roofline"


@contextlib.contextmanager
def writing_atomically(path: Path) -> Iterator[TextIO]:
    """A text file to write ``path``'s new content to, which replaces ``path`` when the block ends.

    A temporary file beside it, flushed to disk, then renamed over it: another process reading
    ``path`` (a pytest-xdist worker) sees the old file or the new one, never half of one. The folder
    is made when missing. An exception in the block, or an OSError writing, leaves ``path`` as it
    was and no temporary file behind, and propagates.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())  # the rename must not reach the disk before the content
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def can_lock() -> bool:
    """Whether this platform has ``flock`` (Windows has not: there the plugin's locks are skipped)."""
    return sys.platform != "win32"


def open_lock_file(path: Path) -> int:
    """An open descriptor of the lock file ``path``, created (mode 0600) when missing; OSError when it
    cannot be opened. A symlink is refused: a lock in the shared temp dir has a guessable name."""
    return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)


def lock(fd: int, *, timeout_s: float | None = None) -> bool:
    """Take the exclusive lock of the open file ``fd``; closing ``fd`` releases it.

    Waits while another process holds it: for good without ``timeout_s``, else at most that long
    and then returns False. OSError where the file system cannot lock (ENOLCK on some network ones).
    """
    import fcntl

    if timeout_s is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
