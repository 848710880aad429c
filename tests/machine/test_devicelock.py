"""The per-device lock that keeps pytest-xdist workers from timing one device at once.

Exclusion is checked through a second open file description of the lock file (``flock`` locks
belong to one, so a second one in the same process is refused while the first holds it): no
threads, no sleeps, no timing. A real ``-n 2`` run is in tests/plugin/test_xdist.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fakes import locked_elsewhere

from pytest_roofline.machine.devicelock import PREFIX, DeviceLocks, lock_path, remove_lock_files

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")


def test_a_hold_locks_the_devices_file_until_it_ends(tmp_path: Path) -> None:
    locks = DeviceLocks("run1", directory=tmp_path)
    path = lock_path(tmp_path, "run1", "cpu")
    with locks.hold("cpu"):
        assert locks.held("cpu")
        assert locked_elsewhere(path)
    assert not locks.held("cpu")
    assert not locked_elsewhere(path)
    assert path.exists()  # never deleted while workers may use it


def test_an_exception_inside_releases_the_lock(tmp_path: Path) -> None:
    locks = DeviceLocks("run1", directory=tmp_path)
    with pytest.raises(ZeroDivisionError), locks.hold("cpu"):
        1 / 0  # noqa: B018
    assert not locked_elsewhere(lock_path(tmp_path, "run1", "cpu"))


def test_one_process_may_nest_holds_of_a_device(tmp_path: Path) -> None:
    locks = DeviceLocks("run1", directory=tmp_path)
    path = lock_path(tmp_path, "run1", "cpu")
    with locks.hold("cpu"):
        with locks.hold("cpu"):  # a second flock from this process would wait for itself
            assert locked_elsewhere(path)
        assert locks.held("cpu")
        assert locked_elsewhere(path)
    assert not locked_elsewhere(path)


def test_devices_and_runs_have_locks_of_their_own(tmp_path: Path) -> None:
    locks, other_run = DeviceLocks("run1", directory=tmp_path), DeviceLocks("run2", directory=tmp_path)
    with locks.hold("cuda0"), locks.hold("cuda1"), other_run.hold("cuda0"):  # none waits for another
        assert all(locked_elsewhere(path) for path in tmp_path.iterdir())
    assert not any(locked_elsewhere(path) for path in tmp_path.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"{PREFIX}run1-cuda0.lock", f"{PREFIX}run1-cuda1.lock", f"{PREFIX}run2-cuda0.lock",
    ]  # fmt: skip


def test_a_serial_run_locks_nothing(tmp_path: Path) -> None:
    locks = DeviceLocks(None, directory=tmp_path)
    with locks.hold("cpu"):
        assert not locks.held("cpu")
    assert list(tmp_path.iterdir()) == []


def test_names_are_slugged_into_the_temp_dir(tmp_path: Path) -> None:
    path = lock_path(tmp_path, "../Run ID/..", "NVIDIA H100: 80GB/x")
    assert path == tmp_path / f"{PREFIX}run-id-nvidia-h100-80gb-x.lock"


def test_a_lock_that_cannot_be_made_is_a_single_note_not_a_crash(tmp_path: Path) -> None:
    notes: list[str] = []
    locks = DeviceLocks("run1", directory=tmp_path / "missing", note=notes.append)
    for key in ("cpu", "cpu", "cuda0"):
        with locks.hold(key):
            assert not locks.held(key)
    assert len(notes) == 1
    assert notes[0].startswith("pytest-xdist workers measure without the per-device lock (cannot open ")


def test_without_fcntl_measurements_go_unlocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    notes: list[str] = []
    locks = DeviceLocks("run1", directory=tmp_path, note=notes.append)
    with locks.hold("cpu"):
        assert not locks.held("cpu")
    assert notes == [
        "pytest-xdist workers measure without the per-device lock (this platform has no fcntl), "
        "so a worker's timing may overlap another's and be slowed by it"
    ]


def test_remove_lock_files_removes_the_runs_files_only(tmp_path: Path) -> None:
    for run, key in [("run1", "cpu"), ("run1", "cuda0"), ("run2", "cpu")]:
        with DeviceLocks(run, directory=tmp_path).hold(key):
            pass
    (tmp_path / "unrelated.lock").touch()
    remove_lock_files("run1", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{PREFIX}run2-cpu.lock", "unrelated.lock"]
    remove_lock_files("run1", tmp_path)  # nothing left to remove: fine
