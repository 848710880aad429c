"""Files: every write that must be whole or not at all, and the locks pytest-xdist workers take turns by.

The plugin's own files: :func:`cache_dir`, :func:`writing_atomically`; those a user names: :func:`write`,
:func:`append`, checked before a run by :func:`problem`. The rules: docs/architecture.md ("Files and locks").
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

__all__ = [
    "append",
    "cache_dir",
    "can_lock",
    "lock",
    "open_lock_file",
    "problem",
    "write",
    "writing_atomically",
]

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
    """A text file to write ``path``'s new content to, which replaces ``path`` whole when the block
    ends (the folder made if missing); an exception in the block or an OSError writing leaves ``path``
    as it was, no temporary file behind, and propagates."""
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
    """Take the exclusive lock of the open file ``fd`` (closing ``fd`` releases it), waiting for good,
    or at most ``timeout_s`` and then returning False; OSError where the file system cannot lock
    (ENOLCK on some network ones)."""
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


# - the files a user names -


def problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be written, in a few words for ``cannot write PATH: ...``; None if it can."""
    target = Path(path).expanduser()
    try:
        existing: os.stat_result | None = os.stat(target)  # through symlinks, /proc's magic ones too
    except OSError:
        existing = None
    if existing is None or stat.S_ISREG(existing.st_mode):
        if existing is not None and not existing.st_mode & 0o222:
            # its mode, not os.access: root may write anything, and an atomic write replaces it anyway
            return "it is read-only"
        real = target.resolve()  # through a symlink: its target is what gets replaced
        if real.parent.exists() and not real.parent.is_dir():
            return f"{str(real.parent)!r} is not a directory"
        # what write() does first, tried: os.access says yes to root in /proc or on a read-only mount
        try:
            fd, tmp = _new_temporary(real)
        except OSError as exc:
            return _cannot_create(real.parent, exc)
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
    mode = existing.st_mode
    if stat.S_ISDIR(mode):
        return "it is a directory"
    if stat.S_ISFIFO(mode) and not _held_open(existing):
        # a named FIFO may have no reader when the run ends; a pipe this process was started with (or
        # opened) has one that whoever started us set up, and /dev/stdout piped on must keep working
        return "it is a FIFO, not a regular file (a pipe this process holds, as /dev/stdout, is written)"
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        return "it is a block device or a socket, not a file"
    if not os.access(target, os.W_OK):
        return "it is not writable"
    return None


def _held_open(pipe: os.stat_result) -> bool:
    """Whether one of this process's file descriptors is ``pipe``."""
    try:
        descriptors = [int(name) for name in os.listdir("/dev/fd")]
    except (OSError, ValueError):
        descriptors = [0, 1, 2]
    for fd in descriptors:
        try:
            held = os.fstat(fd)
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
        if (held.st_dev, held.st_ino) == (pipe.st_dev, pipe.st_ino):
            return True
    return False


def write(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` (the rules: docs/json.md); returns the path of what was written."""
    try:
        existing: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise _naming(path, exc) from None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        _write_in_place(path, existing, data)
        return Path(path)
    target = Path(os.path.realpath(path))  # a symlink's target is replaced, not the link
    try:
        fd, tmp = _new_temporary(target)
    except OSError as exc:
        raise OSError(exc.errno, _cannot_create(target.parent, exc), str(path)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            if existing is not None:
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
            handle.write(data)
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _naming(path, exc) from None
        raise
    return target


def append(path: str | os.PathLike[str], text: str, *, separator: str = "") -> None:
    """Append ``text`` to the file at ``path`` (created if missing, with the umask's mode), after
    ``separator`` if the file already has content (a pipe or a device: never)."""
    fd = _open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        with os.fdopen(fd, "wb") as handle:
            held = os.fstat(fd)
            if separator and stat.S_ISREG(held.st_mode) and held.st_size > 0:
                handle.write(separator.encode("utf-8"))
            handle.write(text.encode("utf-8"))
    except OSError as exc:
        raise _naming(path, exc) from None


def _new_temporary(target: Path) -> tuple[int, Path]:
    """A new file beside ``target``, created with mode 0666 less the umask (mkstemp's is always 0600)."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(target.parent))


def _cannot_create(directory: Path, exc: OSError) -> str:
    """Why no file could be created in ``directory``: that it does not exist, only where it does not
    (/proc exists and answers ENOENT too), else the error's own words ("Read-only file system")."""
    if exc.errno == errno.ENOENT and not directory.is_dir():
        return f"directory {str(directory)!r} does not exist"
    return f"no file can be created in {str(directory)!r}: {exc.strerror or exc}"


def _write_in_place(path: str | os.PathLike[str], existing: os.stat_result, data: bytes) -> None:
    mode = existing.st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        kind = "block device" if stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode) else "special file"
        raise OSError(errno.EINVAL, f"it is a {kind}, not a file to write to", str(path))
    fd = _open(path, os.O_WRONLY)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise _naming(path, exc) from None


def _open(path: str | os.PathLike[str], flags: int) -> int:
    """``os.open`` for writing, non-blocking so that a FIFO nobody reads is an error now rather than a
    hang (a regular file ignores the flag); the descriptor returned blocks again."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO and Path(path).is_fifo():
            raise OSError(errno.ENXIO, "it is a FIFO that no process is reading", str(path)) from None
        raise _naming(path, exc) from None
    os.set_blocking(fd, True)
    return fd


def _naming(path: str | os.PathLike[str], exc: OSError) -> OSError:
    """``exc`` as the same kind of OSError, naming ``path`` (not a temporary file beside it)."""
    if exc.errno is None:
        return OSError(f"{path}: {exc}")
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))
