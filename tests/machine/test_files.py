"""The plugin's own files: written whole or not at all, and locked between processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_roofline.machine import files
from pytest_roofline.machine.files import can_lock, lock, open_lock_file, problem, write, writing_atomically


def test_a_write_replaces_the_file_whole_and_makes_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / "entry.txt"
    with writing_atomically(path) as out:
        out.write("first")
    with writing_atomically(path) as out:
        out.write("second")
    assert path.read_text(encoding="utf-8") == "second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["entry.txt"]


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "entry.txt"
    path.write_text("old", encoding="utf-8")

    def half_written() -> None:
        with writing_atomically(path) as out:
            out.write("half of the ne")
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        half_written()
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["entry.txt"]


@pytest.mark.skipif(not can_lock(), reason="the lock is POSIX flock")
def test_a_held_lock_is_waited_for_at_most_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / ".x.lock"
    holder = open_lock_file(path)
    other = open_lock_file(path)  # a descriptor of its own: flock locks open files, not processes
    try:
        assert lock(holder, timeout_s=0.0)
        assert not lock(other, timeout_s=0.0)
        os.close(holder)  # closing releases it
        holder = -1
        assert lock(other, timeout_s=0.0)
    finally:
        for fd in (holder, other):
            if fd >= 0:
                os.close(fd)


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks and O_NOFOLLOW")
def test_a_lock_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("", encoding="utf-8")
    link = tmp_path / ".x.lock"
    link.symlink_to(target)
    with pytest.raises(OSError, match="symbolic links"):
        open_lock_file(link)


def test_windows_has_no_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    assert not can_lock()


# - the files a user names: the check before a run, and the message of a write that fails -


def test_a_path_is_checked_by_creating_a_file_beside_it_and_an_existing_one_is_left_as_it_is(
    tmp_path: Path,
) -> None:
    existing = tmp_path / "report.json"
    existing.write_text("an earlier run's")
    os.utime(existing, (1_000_000, 1_000_000))
    assert problem(existing) is None
    assert problem(tmp_path / "new.json") is None
    assert existing.read_text() == "an earlier run's"
    assert existing.stat().st_mtime == 1_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary file left


def test_a_folder_that_refuses_new_files_is_named_with_the_real_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: os.access said yes (root, a read-only mount), and a write at the end failed."""
    real_open = os.open

    def read_only_mount(path: str, flags: int, mode: int = 0o777) -> int:
        if flags & os.O_CREAT:
            raise OSError(30, "Read-only file system", path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(files.os, "open", read_only_mount)
    cause = f"no file can be created in {str(tmp_path)!r}: Read-only file system"
    assert problem(tmp_path / "out.json") == cause


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="a Linux /proc")
def test_a_folder_that_exists_is_never_said_not_to() -> None:
    """Issue 40: /proc answers ENOENT to a new file, and was said not to exist."""
    cause = "no file can be created in '/proc': No such file or directory"
    assert problem("/proc/nope.json") == cause
    with pytest.raises(OSError, match="No such file or directory") as raised:
        write("/proc/nope.json", b"{}")
    assert (raised.value.strerror, raised.value.filename) == (cause, "/proc/nope.json")
    assert problem("/no/such/folder/out.json") == "directory '/no/such/folder' does not exist"
