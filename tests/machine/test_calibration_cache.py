"""The calibration cache: where it lives, the CPU it is keyed on, what ``calibrate_cpu`` writes and
reads, corrupt and unwritable files, and the lock that makes concurrent workers calibrate once."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_calibration import FAKE_CAPACITIES, FakeMeasure, cached_payload, private_cache

from pytest_roofline.errors import RooflineWarning
from pytest_roofline.machine import calibrate
from pytest_roofline.machine.calibrate import calibrate_cpu, cpu_device, cpu_identity
from pytest_roofline.machine.calibration_cache import Calibration, Ceilings
from pytest_roofline.machine.calibration_report import format_calibration
from pytest_roofline.machine.cpu_ceilings import CPU_NOTE
from pytest_roofline.machine.files import cache_dir
from pytest_roofline.model.core import Precision, Source, Unit
from pytest_roofline.timing.cpu import cpu_model_name

P, V, TC = Precision, Unit.VECTOR, Unit.TENSOR


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return private_cache(tmp_path, monkeypatch)


@pytest.fixture
def fake() -> FakeMeasure:
    return FakeMeasure()


def only_file(directory: Path) -> Path:
    files = sorted(directory.glob("*.json"))
    assert len(files) == 1, files
    return files[0]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- where the cache lives ---------------------------------------------------------------------


def test_cache_dir_follows_xdg_cache_home(cache: Path) -> None:
    assert cache_dir() == cache


def test_cache_dir_defaults_to_home_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "pytest-roofline"


def test_cache_dir_ignores_a_relative_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec says to ignore it
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "pytest-roofline"


# -- the CPU's identity ------------------------------------------------------------------------


def test_cpu_model_name_reads_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Fake Xeon 9999 @ 3.0GHz\n")
    assert cpu_model_name(cpuinfo) == "Fake Xeon 9999 @ 3.0GHz"


@pytest.mark.parametrize("content", [None, "processor\t: 0\nmodel name\t:   \n"])
def test_cpu_model_name_falls_back_to_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    if content is not None:
        cpuinfo.write_text(content)
    monkeypatch.setattr(platform, "processor", lambda: "fakeproc")
    assert cpu_model_name(cpuinfo) == "fakeproc"
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(platform, "machine", lambda: "fakemachine")
    assert cpu_model_name(cpuinfo) == "fakemachine"


def test_cpu_identity_is_model_cores_and_numpy() -> None:
    assert cpu_identity() == {"cpu_model": cpu_model_name(), "cores": os.cpu_count(), "numpy": np.__version__}


# -- calibrate_cpu and its cache ---------------------------------------------------------------


def test_first_call_measures_and_writes_the_keyed_file(cache: Path, fake: FakeMeasure) -> None:
    cal = calibrate_cpu(measure=fake)
    assert fake.calls == 1
    path = only_file(cache)
    assert cal.cache_path == path
    assert not cal.from_cache
    assert cal.seconds >= 0
    assert path.name.startswith("cpu-")
    data = json.loads(path.read_text())
    assert data["key"] == {"cpu_model": cpu_model_name(), "cores": os.cpu_count(), "numpy": np.__version__}
    assert data["kind"] == "cpu"
    assert data["bandwidth"] == {"value": 20e9, "source": "measured", "note": "copy; fake"}
    assert data["peaks"]["fp64:vector"]["value"] == 100e9
    assert data["details"] == fake.ceilings.details  # the capacities found among them
    assert leftovers(cache) == []


def test_second_call_reads_the_cache(cache: Path, fake: FakeMeasure) -> None:
    first = calibrate_cpu(measure=fake)
    second = calibrate_cpu(measure=fake)
    assert fake.calls == 1
    assert second.from_cache
    assert second.cache_path == first.cache_path
    assert second.device == first.device


def test_force_remeasures(cache: Path, fake: FakeMeasure) -> None:
    calibrate_cpu(measure=fake)
    newer = FakeMeasure(bandwidth=30e9)
    cal = calibrate_cpu(force=True, measure=newer)
    assert newer.calls == 1
    assert not cal.from_cache
    assert cal.device.bandwidth.value == 30e9
    assert calibrate_cpu(measure=fake).device.bandwidth.value == 30e9  # and the cache has the new one


def test_explicit_cache_dir(tmp_path: Path, fake: FakeMeasure) -> None:
    cal = calibrate_cpu(cache_dir=tmp_path / "mine", measure=fake)
    assert cal.cache_path is not None
    assert cal.cache_path.parent == tmp_path / "mine"


def test_key_is_in_the_file_name(cache: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch) -> None:
    calibrate_cpu(measure=fake)
    monkeypatch.setattr(np, "__version__", "0.0.0-other")
    cal = calibrate_cpu(measure=fake)  # another numpy: another file, measured afresh, no warning
    assert fake.calls == 2
    assert not cal.from_cache
    assert len(list(cache.glob("cpu-*.json"))) == 2


def test_cpu_device_fields(cache: Path, fake: FakeMeasure) -> None:
    device = calibrate_cpu(measure=fake).device
    assert device.key == "cpu"
    assert device.kind == "cpu"
    assert device.name == cpu_model_name()
    assert device.cores == os.cpu_count()
    assert device.llc_bytes == 40 * 2**20  # the capacity sweep's, not sysfs's 480 MiB
    assert device.caches == FAKE_CAPACITIES
    assert device.notes == (CPU_NOTE,)
    assert device.bandwidth == fake.ceilings.bandwidth
    assert all(unit is V for _, unit in device.peaks)
    assert device.peaks[(P.FP64, V)].source is Source.MEASURED
    for precision in (P.TF32, P.FP16, P.BF16, P.FP8_E4M3):
        figure = device.peaks[(precision, V)]
        assert figure.value == 200e9
        assert figure.source is Source.DERIVED
        assert "fp32" in figure.note
    # no float figure bounds integer work: its compute side stays unknown
    assert not [precision for precision, _ in device.peaks if precision.integral]
    assert device.resolve_peak(P.INT8, V) == (None, V)
    assert device.resolve_peak(P.INT32, TC) == (None, V)
    # numpy has no tensor path: a tensor-unit kernel runs against the vector peak
    assert device.resolve_peak(P.BF16, TC) == (device.peaks[(P.BF16, V)], V)
    assert device.resolve_peak(P.FP8_E5M2, V)[0].value == 200e9


def test_cpu_device_is_memoized(cache: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibrate, "measure_cpu", fake)
    first = cpu_device()
    assert cpu_device() is first
    assert fake.calls == 1
    calibrate._cpu_memo.clear()
    assert cpu_device() == first  # a new process: from the cache, not measured again
    assert fake.calls == 1


# -- corrupt files -----------------------------------------------------------------------------


def test_corrupt_json_is_replaced_with_a_warning(cache: Path, fake: FakeMeasure) -> None:
    path, _ = cached_payload(cache, fake)
    path.write_text('{"schema": 1, "kind": "cpu", "key": {')
    with pytest.warns(
        RooflineWarning, match=r"(?s)calibration cache .*cpu-.*\.json is not valid JSON.*recalib"
    ):
        cal = calibrate_cpu(measure=fake)
    assert fake.calls == 2
    assert not cal.from_cache
    assert cal.cache_path == path
    assert json.loads(path.read_text())["bandwidth"]["value"] == 20e9
    assert calibrate_cpu(measure=fake).from_cache  # replaced: no warning the next time


def _drop(data: dict[str, Any], key: str) -> None:
    del data[key]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(lambda d: d.update(schema=0), "schema 0", id="old-schema"),
        pytest.param(lambda d: d.update(kind="cuda"), "kind 'cuda'", id="kind"),
        pytest.param(lambda d: _drop(d, "bandwidth"), "KeyError", id="no-bandwidth"),
        pytest.param(lambda d: d.update(peaks=[]), "'peaks' is not an object", id="peaks-list"),
        pytest.param(lambda d: d["bandwidth"].update(value=-1.0), "positive", id="negative"),
        pytest.param(lambda d: d["bandwidth"].update(value="fast"), "bad figure", id="string-value"),
        pytest.param(lambda d: d["bandwidth"].update(source="guessed"), "guessed", id="bad-source"),
        pytest.param(lambda d: d["bandwidth"].update(extra=1), "value, source, note", id="extra-field"),
        pytest.param(
            lambda d: d["peaks"].update({"fp99:vector": d["bandwidth"]}), "fp99", id="bad-precision"
        ),
        pytest.param(lambda d: d.update(details={"x": [1]}), "details", id="bad-details"),
        pytest.param(lambda d: d.update(peaks={}), "'peaks' has no vector peak: none at all", id="no-peaks"),
        pytest.param(
            lambda d: d.update(peaks={"bf16:tensor": d["bandwidth"]}),
            "'peaks' has no vector peak: ['bf16:tensor']",
            id="no-vector-peak",
        ),
    ],
)
def test_wrong_schema_is_replaced_with_a_warning(
    cache: Path, fake: FakeMeasure, damage: Any, reason: str
) -> None:
    path, data = cached_payload(cache, fake)
    damage(data)
    path.write_text(json.dumps(data))
    with pytest.warns(RooflineWarning, match=str(path)) as record:
        cal = calibrate_cpu(measure=fake)
    assert reason in str(record[0].message)
    assert fake.calls == 2
    assert not cal.from_cache
    assert calibrate_cpu(measure=fake).from_cache


def test_a_schema_1_cache_is_recalibrated(cache: Path, fake: FakeMeasure) -> None:
    path, payload = cached_payload(cache, fake)
    payload["schema"] = 1
    path.write_text(json.dumps(payload))
    with pytest.warns(RooflineWarning, match="has schema 1 .* expected 3"):
        cal = calibrate_cpu(measure=fake)
    assert not cal.from_cache


def test_a_json_array_is_corrupt(cache: Path, fake: FakeMeasure) -> None:
    path, _ = cached_payload(cache, fake)
    path.write_text("[1, 2]")
    with pytest.warns(RooflineWarning, match="is not a JSON object"):
        calibrate_cpu(measure=fake)
    assert fake.calls == 2


def test_wrong_key_inside_the_file_is_recalibrated(cache: Path, fake: FakeMeasure) -> None:
    path, data = cached_payload(cache, fake)
    data["key"]["cpu_model"] = "Some Other CPU"
    path.write_text(json.dumps(data))
    with pytest.warns(RooflineWarning, match="was written for .*Some Other CPU"):
        cal = calibrate_cpu(measure=fake)
    assert fake.calls == 2
    assert not cal.from_cache
    assert json.loads(path.read_text())["key"]["cpu_model"] == cpu_model_name()


# -- writing: atomic, and never fatal ----------------------------------------------------------


def test_failed_dump_leaves_the_old_file_and_no_temp_file(
    cache: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = cached_payload(cache, fake)
    before = path.read_bytes()

    def half_dump(obj: object, fp: Any, **kwargs: Any) -> None:
        fp.write('{"schema": 1, "kind": "cp')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", half_dump)
    with pytest.warns(RooflineWarning, match="cannot write the calibration cache .*No space left"):
        cal = calibrate_cpu(force=True, measure=FakeMeasure(bandwidth=30e9))
    assert cal.cache_path is None
    assert cal.device.bandwidth.value == 30e9  # the new measurement is still used
    assert path.read_bytes() == before
    assert leftovers(cache) == []


def test_failed_replace_leaves_the_old_file_and_no_temp_file(
    cache: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = cached_payload(cache, fake)
    before = path.read_bytes()

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.warns(RooflineWarning, match="cannot write the calibration cache"):
        cal = calibrate_cpu(force=True, measure=fake)
    assert cal.cache_path is None
    assert path.read_bytes() == before
    assert leftovers(cache) == []


def test_unwritable_cache_dir_warns_and_calibrates(tmp_path: Path, fake: FakeMeasure) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # works for root too, unlike chmod
    with pytest.warns(RooflineWarning, match="cannot write the calibration cache"):
        cal = calibrate_cpu(cache_dir=blocker / "cache", measure=fake)
    assert isinstance(cal, Calibration)
    assert cal.cache_path is None
    assert not cal.from_cache
    assert cal.device.bandwidth.value == 20e9
    assert "not written" in format_calibration(cal)


def test_unreadable_cache_file_is_recalibrated(cache: Path, fake: FakeMeasure) -> None:
    path, _ = cached_payload(cache, fake)
    path.unlink()
    path.mkdir()  # reading a folder fails, whoever runs the test
    with pytest.warns(RooflineWarning) as record:
        cal = calibrate_cpu(measure=fake)
    messages = [str(w.message) for w in record]
    assert any("cannot be read" in m for m in messages)
    assert any("cannot write" in m for m in messages)
    assert cal.cache_path is None
    assert fake.calls == 2


# -- the lock: concurrent workers calibrate once -----------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="the lock is POSIX flock")
def test_measurement_runs_under_the_lock(cache: Path) -> None:
    import fcntl

    held: list[bool] = []

    def measure() -> Ceilings:
        (lock,) = cache.glob(".cpu-*.lock")
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return FakeMeasure().ceilings

    calibrate_cpu(measure=measure)
    assert held == [True]


@pytest.mark.skipif(sys.platform == "win32", reason="the lock is POSIX flock")
def test_a_lock_held_too_long_is_given_up_with_a_warning(tmp_path: Path) -> None:
    import fcntl

    lock = tmp_path / ".cpu.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        entered = False
        with (
            pytest.warns(RooflineWarning, match=r"stayed locked for 0 s; calibrating without the lock"),
            calibrate._exclusive(lock, timeout_s=0.0),
        ):
            entered = True
        assert entered
    finally:
        os.close(fd)


def test_waiting_worker_reads_what_the_other_one_wrote(
    cache: Path, tmp_path: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch
) -> None:
    published = calibrate_cpu(cache_dir=tmp_path / "other", measure=FakeMeasure(bandwidth=42e9)).cache_path
    assert published is not None

    @contextlib.contextmanager
    def lock_won_by_another_worker(path: Path, **kwargs: Any) -> Iterator[None]:
        # while this process waited for the lock, another worker calibrated and published the file
        cache.mkdir(parents=True, exist_ok=True)
        os.replace(published, cache / published.name)
        yield

    monkeypatch.setattr(calibrate, "_exclusive", lock_won_by_another_worker)
    cal = calibrate_cpu(measure=fake)
    assert fake.calls == 0
    assert cal.from_cache
    assert cal.cache_path == cache / published.name
    assert cal.device.bandwidth.value == 42e9
