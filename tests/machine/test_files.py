"""The plugin's own files: written whole or not at all, and locked between processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pytest_roofline.machine.files import can_lock, lock, open_lock_file, writing_atomically


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
