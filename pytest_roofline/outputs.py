"""Writing the files a user names: the JSON report, the baseline, the plot, the Markdown summary. No pytest.

A regular file, or a new path, is written to a temporary file beside it and renamed over it: never
half-written, with the existing file's mode (a new one gets 0666 less the umask, as any program's
output would). A symlink is followed: the file it points to is replaced, the link kept. A character
device (``/dev/null``, a terminal) or a pipe is written in place, since renaming over one would destroy
it; it is opened non-blocking, so a FIFO nobody reads is an error rather than a hang. Every error is an
OSError naming the path the user gave, never a temporary file.

:func:`problem` is the check made before a run, so that a path that cannot be written is a usage error
before any test runs rather than a lost report at the end.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path


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
        directory = target.resolve().parent  # through a symlink: its target is what gets replaced
        if directory.exists() and not directory.is_dir():
            return f"{str(directory)!r} is not a directory"
        if not directory.is_dir():
            return f"directory {str(directory)!r} does not exist"
        if not os.access(directory, os.W_OK):
            return f"directory {str(directory)!r} is read-only"
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
    """Write ``data`` to ``path`` (see the module's docstring); returns the path of what was written."""
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
        if exc.errno == errno.ENOENT:
            raise OSError(exc.errno, f"directory {str(target.parent)!r} does not exist", str(path)) from None
        raise _naming(path, exc) from None
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
