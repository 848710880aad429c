"""Measured ceilings and their cache, with fake measurements."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import platform
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pytest_roofline.errors import RooflineWarning
from pytest_roofline.machine import calibrate, cpupeak
from pytest_roofline.machine.cachelevels import level_details
from pytest_roofline.machine.calibrate import calibrate_cpu, calibrate_cuda, cpu_device, cpu_identity
from pytest_roofline.machine.calibration_cache import Calibration, Ceilings
from pytest_roofline.machine.calibration_report import format_calibration
from pytest_roofline.machine.capacity import Sweep, capacity_details
from pytest_roofline.machine.cpu_ceilings import CPU_NOTE, MAX_KERNEL_RUNS, measure_cpu
from pytest_roofline.machine.cpupeak import CpuPeak
from pytest_roofline.machine.files import cache_dir
from pytest_roofline.model.core import CacheSize, Device, Figure, MemoryLevel, Precision, Source, Unit
from pytest_roofline.model.devices import lookup
from pytest_roofline.timing.cpu import cpu_model_name, last_level_cache_bytes
from pytest_roofline.timing.cuda import device as cuda_dev
from pytest_roofline.timing.cuda import measured_ceilings
from pytest_roofline.timing.host_caches import CacheInfo

P, V, TC = Precision, Unit.VECTOR, Unit.TENSOR


#: what a capacity sweep found on the fake CPU: an L1 it could not see, a 480 MiB L3 of which this
#: process gets 40 MiB
FAKE_CAPACITIES = (
    CacheSize(1, 48 * 2**10, None, per_core=True, found="unseen", note="no step"),
    CacheSize(3, 480 * 2**20, 40 * 2**20, found="knee", note="the rate steps from 27 to 13.5 GB/s at 40 MiB"),
)


class FakeMeasure:
    """Stands in for ``measure_cpu``: fixed ceilings (the capacities of :data:`FAKE_CAPACITIES`), and
    a count of how often it ran."""

    def __init__(self, bandwidth: float = 20e9, fp64: float = 100e9, fp32: float = 200e9) -> None:
        self.calls = 0
        swept = Sweep((), FAKE_CAPACITIES, 0.5, "past the l3's knee", "np.add")
        self.ceilings = Ceilings(
            bandwidth=Figure(bandwidth, Source.MEASURED, "copy; fake"),
            peaks={
                (P.FP64, V): Figure(fp64, Source.MEASURED, "np.matmul n=64, best of 3"),
                (P.FP32, V): Figure(fp32, Source.MEASURED, "np.matmul n=64, best of 3"),
            },
            details={
                "bandwidth_kernel": "copy",
                "runs_copy": 2,
                **capacity_details(swept),
                **level_details({"l3": (27e9, "add 20 MiB")}),
            },
        )

    def __call__(self) -> Ceilings:
        self.calls += 1
        return self.ceilings


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache folder (through XDG_CACHE_HOME), a fake HOME and a fresh per-process memo."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(calibrate, "_cpu_memo", {})
    # the sanity rules' theoretical peak is this machine's: tests that want one pass it
    monkeypatch.setattr(cpupeak, "cpu_peak", lambda: None)
    return tmp_path / "xdg" / "pytest-roofline"


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


def cached_payload(cache: Path, fake: FakeMeasure) -> tuple[Path, dict[str, Any]]:
    cal = calibrate_cpu(measure=fake)
    assert cal.cache_path is not None
    return cal.cache_path, json.loads(cal.cache_path.read_text())


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


# -- the real measurement, small and fast ------------------------------------------------------


def test_measure_cpu_for_real_with_tiny_sizes() -> None:
    ceilings = measure_cpu(array_bytes=1 << 16, matmul_n=32, matmul_runs=1, budget_s=0.05)
    assert ceilings.bandwidth.source is Source.MEASURED
    assert ceilings.bandwidth.value > 0
    assert set(ceilings.peaks) == {(P.FP64, V), (P.FP32, V)}
    assert all(f.value > 0 and f.source is Source.MEASURED for f in ceilings.peaks.values())
    for kernel in ("copy", "scale", "add", "triad", "dot"):
        assert kernel in ceilings.bandwidth.note
        assert 1 <= int(ceilings.details[f"runs_{kernel}"]) <= MAX_KERNEL_RUNS
    assert ceilings.details["array_bytes"] == 1 << 16
    assert str(ceilings.details["bandwidth_kernel"]) in ceilings.bandwidth.note


class SteppingClock:
    """Every read is one second after the last: each timed call takes exactly 1 s."""

    def __init__(self) -> None:
        self.now = -1.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_measure_cpu_counts_bytes_read_plus_written() -> None:
    nbytes = 8 * 1024
    ceilings = measure_cpu(array_bytes=nbytes, matmul_n=16, budget_s=1.0, clock=SteppingClock())
    rates = {k: ceilings.details[f"bandwidth_{k}"] for k in ("copy", "scale", "add", "triad", "dot")}
    # triad is numpy's two passes, b -> c then c + a -> c: five arrays of traffic
    assert rates == {
        "copy": 2 * nbytes,
        "scale": 2 * nbytes,
        "add": 3 * nbytes,
        "triad": 5 * nbytes,
        "dot": 2 * nbytes,
    }
    assert ceilings.bandwidth.value == 5 * nbytes
    assert ceilings.details["bandwidth_kernel"] == "triad"
    assert ceilings.peaks[(P.FP64, V)].value == 2 * 16**3
    assert ceilings.peaks[(P.FP32, V)].note == "np.matmul n=16, best of 6 in two rounds"
    # the budget was spent on the matmuls: every kernel ran once, and only once
    assert all(ceilings.details[f"runs_{k}"] == 1 for k in rates)


class ChangingClock(SteppingClock):
    """Each timed call takes ``before`` seconds for the first ``reads`` reads, then ``after``."""

    def __init__(self, reads: int, before: float, after: float) -> None:
        super().__init__()
        self.count, self.switch, self.before, self.after = 0, reads, before, after

    def __call__(self) -> float:
        self.count += 1
        self.now += self.before if self.count <= self.switch else self.after
        return self.now


# the probes' sizing (2 precisions × 2 runs × 2 clock reads), then the first matmul round (2 precisions ×
# 3 runs × a figure and its probe × 2 clock reads); the bandwidth kernels and the second round follow
FIRST_ROUND_READS = 8 + 24


@pytest.mark.parametrize(("before", "after"), [(4.0, 1.0), (1.0, 4.0)], ids=["slow-first", "slow-second"])
def test_measure_cpu_matmul_counts_the_better_of_two_rounds(before: float, after: float) -> None:
    # a host that slowed this VM down for one round must not set the ceiling
    clock = ChangingClock(FIRST_ROUND_READS, before, after)
    ceilings = measure_cpu(array_bytes=8 * 64, matmul_n=16, budget_s=1.0, clock=clock, caches=())
    assert ceilings.peaks[(P.FP64, V)].value == ceilings.peaks[(P.FP32, V)].value == 2 * 16**3  # 1 s a call


def test_measure_cpu_adds_runs_while_the_budget_allows() -> None:
    ceilings = measure_cpu(array_bytes=8 * 64, matmul_n=8, budget_s=1e6, clock=SteppingClock())
    assert all(
        ceilings.details[f"runs_{k}"] == MAX_KERNEL_RUNS for k in ("copy", "scale", "add", "triad", "dot")
    )


def test_measure_cpu_picks_the_matmul_size_from_a_probe() -> None:
    # with every call taking 1 s, the 512 probe runs at 2·512³ FLOP/s: n for a 0.06 s call is
    # 512 × 0.06^(1/3) ≈ 200, clamped to the smallest size, 256
    ceilings = measure_cpu(array_bytes=64, matmul_runs=1, budget_s=1.0, clock=SteppingClock())
    assert ceilings.details["matmul_n_fp64"] == 256
    assert ceilings.details["matmul_n_fp32"] == 256


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"array_bytes": 4}, "array_bytes"),
        ({"budget_s": 0.0}, "budget_s"),
        ({"budget_s": math.inf}, "budget_s"),
        ({"matmul_n": 0}, "matmul_n"),
        ({"matmul_runs": 0}, "matmul_runs"),
    ],
)
def test_measure_cpu_checks_its_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        measure_cpu(**kwargs)


# -- a GPU ---------------------------------------------------------------------------------------


@pytest.fixture
def h100(monkeypatch: pytest.MonkeyPatch) -> Device:
    device = lookup("h100-sxm")
    monkeypatch.setattr(cuda_dev, "cuda_device", lambda index=0: device)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(__version__="13.6.0"))
    monkeypatch.delenv("CUPY_TF32", raising=False)
    return device


class FakeCudaMeasure:
    def __init__(self) -> None:
        self.indices: list[int] = []

    def __call__(self, index: int) -> tuple[Figure, dict[tuple[Precision, Unit], Figure]]:
        self.indices.append(index)
        return Figure(3.0e12, Source.MEASURED, "cupy.copyto"), {
            (P.FP32, V): Figure(50e12, Source.MEASURED, "cupy.matmul fp32"),
            (P.FP16, TC): Figure(700e12, Source.MEASURED, "cupy.matmul fp16"),
        }


def test_calibrate_cuda_replaces_datasheet_figures(cache: Path, h100: Device) -> None:
    measure = FakeCudaMeasure()
    cal = calibrate_cuda(1, measure=measure)
    assert measure.indices == [1]
    device = cal.device
    assert device.key == "h100-sxm"
    assert device.bandwidth == Figure(3.0e12, Source.MEASURED, "cupy.copyto")
    assert device.peaks[(P.FP32, V)].value == 50e12
    assert device.peaks[(P.FP16, TC)].source is Source.MEASURED
    assert device.peaks[(P.BF16, TC)] == h100.peaks[(P.BF16, TC)]  # not measured: datasheet kept
    assert device.notes[-1] == "ceilings measured on this GPU"
    assert cal.cache_path is not None
    assert cal.cache_path.name.startswith("cuda-nvidia-h100-80gb-hbm3-")
    key = json.loads(cal.cache_path.read_text())["key"]
    assert key == {
        "name": "NVIDIA H100 80GB HBM3",
        "key": "h100-sxm",
        "sms": 132,
        "llc_bytes": h100.llc_bytes,
        "cupy": "13.6.0",
        "tf32": False,
        "method": "matmul random best of 4096,8192; fp64 tensor from cc 8.0",
        "l2_method": "ld.global.cg 0.4 of the L2 x64",
    }


def test_calibrate_cuda_is_cached_across_indices(cache: Path, h100: Device) -> None:
    measure = FakeCudaMeasure()
    first = calibrate_cuda(0, measure=measure)
    second = calibrate_cuda(3, measure=measure)  # an identical GPU in another slot
    assert measure.indices == [0]
    assert second.from_cache
    assert second.device == first.device


def test_calibrate_cuda_defaults_to_the_backend_measurement(
    cache: Path, h100: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    measure = FakeCudaMeasure()
    monkeypatch.setattr(measured_ceilings, "measure_ceilings", measure)
    l2_indices: list[int] = []

    def l2_roof(index: int) -> Figure:
        l2_indices.append(index)
        return Figure(7e12, Source.MEASURED, "fake L2 read")

    monkeypatch.setattr("pytest_roofline.timing.l2.measure_l2_roof", l2_roof)
    swept: list[int] = []

    def l2_rate_at(index: int) -> Any:  # a MIG slice: 20 of the L2's 50 MiB are this GPU's
        swept.append(index)
        return lambda footprint: 7e12 if footprint <= 20 * 2**20 else 3e12

    monkeypatch.setattr("pytest_roofline.timing.l2.l2_rate_at", l2_rate_at)
    device = calibrate_cuda(force=True).device
    assert measure.indices == [0]
    assert l2_indices == [0]
    assert swept == [0]
    (level,) = device.levels  # the L2's roof, for warm measurements, at the capacity the GPU sees
    assert (level.name, level.bandwidth.value) == ("l2", 7e12)
    # the step lies between two of the sweep's footprints, a factor of 1.41 apart
    assert 17 * 2**20 <= level.capacity_bytes <= 25 * 2**20
    assert device.llc_bytes == level.capacity_bytes  # what rotation and the past-cache threshold are sized by
    ((name, reported, effective),) = [(c.name, c.reported_bytes, c.effective_bytes) for c in device.caches]
    assert (name, reported, effective) == ("l2", 50 * 2**20, level.capacity_bytes)


def l2_roof(indices: list[int]) -> Any:
    def measure(index: int) -> Figure:
        indices.append(index)
        return Figure(7e12, Source.MEASURED, "fake L2 read")

    return measure


def test_an_l2_roof_is_measured_even_after_a_calibration_without_one(cache: Path, h100: Device) -> None:
    # the plugin used to calibrate without the L2; roofline calibrate, after it, found that entry
    # and no L2 roof: whichever ran first decided
    calibrate_cuda(measure=FakeCudaMeasure())  # ceilings only
    l2_indices: list[int] = []

    device = calibrate_cuda(measure=FakeCudaMeasure(), l2=l2_roof(l2_indices)).device

    assert l2_indices == [0]
    assert [(level.name, level.bandwidth.value) for level in device.levels] == [("l2", 7e12)]


def test_a_calibration_without_the_l2_never_shadows_one_with_it(cache: Path, h100: Device) -> None:
    l2_indices: list[int] = []
    calibrate_cuda(measure=FakeCudaMeasure(), l2=l2_roof(l2_indices))

    later = calibrate_cuda(3, measure=FakeCudaMeasure(), l2=l2_roof(l2_indices)).device  # cached, both
    forced = calibrate_cuda(measure=FakeCudaMeasure(), force=True).device  # ceilings again, no L2 now

    assert l2_indices == [0]  # measured once, found by every later calibration
    assert [level.bandwidth.value for level in later.levels] == [7e12]
    assert [level.bandwidth.value for level in forced.levels] == [7e12]


def test_an_l2_roof_below_dram_is_raised_to_it(cache: Path, h100: Device) -> None:
    from pytest_roofline.machine.calibrate import gpu_l2_levels

    (level,) = gpu_l2_levels(h100, Figure(1e9, Source.MEASURED, "a busy moment"))

    assert level.bandwidth.value == h100.bandwidth.value
    assert "raised to DRAM's" in level.bandwidth.note


def test_calibrate_cuda_keys_on_cupy_tf32(cache: Path, h100: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    measure = FakeCudaMeasure()
    calibrate_cuda(measure=measure)
    monkeypatch.setenv("CUPY_TF32", "1")
    assert not calibrate_cuda(measure=measure).from_cache
    assert len(measure.indices) == 2


# -- format_calibration ------------------------------------------------------------------------


PEAK = CpuPeak(2, 4e9, "cpufreq max", "AVX2+FMA", 16, 32)


def test_format_calibration_of_a_fresh_cpu_calibration(cache: Path, fake: FakeMeasure) -> None:
    cal = calibrate_cpu(measure=fake)
    lines = format_calibration(cal, theoretical=PEAK).splitlines()
    facts = f"cpu, {os.cpu_count()} cores, 40 MiB last-level cache (effective)"
    assert lines[0] == f"device       {cpu_model_name()} [{facts}]"
    assert lines[1] == "bandwidth    20.0 GB/s  (measured: copy; fake)"
    assert lines[2] == "fp64         100.0 GFLOP/s vector  (measured: np.matmul n=64, best of 3)"
    assert lines[3] == "fp32         200.0 GFLOP/s vector  (measured: np.matmul n=64, best of 3)"
    # the narrow float formats share fp32's figure, and one line; integers have none
    assert lines[4].startswith(
        "tf32, fp16, bf16, fp8_e4m3  200.0 GFLOP/s vector  (derived: fp32's matmul figure"
    )
    # each cache level as sysfs says and as the capacity sweep found it, with its roof
    assert lines[5].startswith(
        "l1           48 KiB per core (sysfs), not seen by the capacity sweep: not used"
    )
    assert lines[6] == (
        "l3           480 MiB (sysfs), 40 MiB effective, 27.0 GB/s  (the rate steps from 27 to 13.5 GB/s at"
        " 40 MiB; measured: add 20 MiB, numpy (best of 0.5, 0.7 of the level))"
    )
    # the hard limit of the figures above: the CPU's theoretical peak
    assert lines[7] == (
        "theoretical  128 GFLOP/s fp64, 256 GFLOP/s fp32  "
        "(2 cores × 4.00 GHz (cpufreq max) × 16 fp64 FLOP/cycle (AVX2+FMA))"
    )
    assert lines[8] == f"cache        {cal.cache_path}"
    assert lines[9].startswith("             calibrated in ")
    assert len(lines) == 10


def test_format_calibration_of_a_cpu_whose_peak_is_unknown(cache: Path, fake: FakeMeasure) -> None:
    text = format_calibration(calibrate_cpu(measure=fake), theoretical="no clock: nothing says")
    assert "\ntheoretical  unknown (no clock: nothing says)\n" in text


def test_format_calibration_reads_this_machines_peak_by_default(
    cache: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpupeak, "system_peak", lambda: PEAK)
    text = format_calibration(calibrate_cpu(measure=fake))
    assert "\ntheoretical  128 GFLOP/s fp64, 256 GFLOP/s fp32  (2 cores × 4.00 GHz" in text


def _llc() -> str:
    nbytes = last_level_cache_bytes()
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def test_format_calibration_from_the_cache(cache: Path, fake: FakeMeasure) -> None:
    calibrate_cpu(measure=fake)
    cal = calibrate_cpu(measure=fake)
    assert "read from the cache in " in format_calibration(cal)
    slow = Calibration(cal.device, cal.cache_path, False, 3.25)
    assert format_calibration(slow).endswith("calibrated in 3.25 s")


def test_format_calibration_of_a_gpu(cache: Path, h100: Device) -> None:
    text = format_calibration(calibrate_cuda(measure=FakeCudaMeasure()))
    assert "device      NVIDIA H100 80GB HBM3 [cuda, 132 SMs, 50 MiB last-level cache]" in text
    assert "theoretical" not in text  # a CPU's bound; a GPU's datasheet is its own
    assert "bandwidth   3,000.0 GB/s  (measured: cupy.copyto)" in text
    assert "fp32        50.0 TFLOP/s vector  (measured: cupy.matmul fp32)" in text
    assert "fp16        700.0 TFLOP/s tensor  (measured: cupy.matmul fp16)" in text
    assert "bf16        989.4 TFLOP/s tensor  (datasheet)" in text
    assert "int8        1,978.9 TOPS tensor  (datasheet)" in text


# -- a cache that never gets worse by accident; sanity rules; probes ------------------------------


def with_probes(fake: FakeMeasure, *, rate: float = 10e9) -> FakeMeasure:
    from pytest_roofline.model.paired_ceilings import ProbeReference

    c = fake.ceilings
    fake.ceilings = dataclasses.replace(
        c,
        probes={
            "bandwidth": ProbeReference("bandwidth", "copy", 2**26, c.bandwidth.value, rate, rate, "2026-11"),
            "fp64": ProbeReference("fp64", "matmul", 256, c.peaks[(P.FP64, V)].value, 1e9, 1e9, "2026-11-01"),
        },
    )
    return fake


def test_probes_travel_through_the_cache(cache: Path) -> None:
    first = calibrate_cpu(measure=with_probes(FakeMeasure()))
    again = calibrate_cpu(measure=FakeMeasure())
    assert again.from_cache
    assert again.probes == first.probes
    assert again.probes["bandwidth"].name == "copy 2×64 MiB"


def test_force_keeps_the_better_figure_and_warns_naming_the_lower_ones(cache: Path) -> None:
    calibrate_cpu(measure=with_probes(FakeMeasure(bandwidth=20e9, fp64=100e9, fp32=200e9)))
    busy = with_probes(FakeMeasure(bandwidth=5e9, fp64=110e9, fp32=150e9), rate=2e9)
    lower = r"much lower than .* for bandwidth 5.0 GB/s \(cached 20.0 GB/s\)"
    with pytest.warns(RooflineWarning, match=lower):
        cal = calibrate_cpu(force=True, measure=busy)
    assert cal.device.bandwidth.value == 20e9  # kept, with the probe measured beside it
    assert cal.probes["bandwidth"].rate == 10e9
    assert cal.device.peaks[(P.FP64, V)].value == 110e9  # the new, higher figure wins
    assert cal.device.peaks[(P.FP32, V)].value == 200e9  # 25% lower: kept, and named
    assert calibrate_cpu().device.bandwidth.value == 20e9  # what was written is the best


def test_a_slightly_lower_figure_is_kept_without_a_warning(
    cache: Path, recwarn: pytest.WarningsRecorder
) -> None:
    calibrate_cpu(measure=FakeMeasure(bandwidth=20e9))
    cal = calibrate_cpu(force=True, measure=FakeMeasure(bandwidth=18e9))
    assert cal.device.bandwidth.value == 20e9
    assert not [w for w in recwarn if issubclass(w.category, RooflineWarning)]


def test_reset_forgets_the_cached_figures(cache: Path) -> None:
    calibrate_cpu(measure=FakeMeasure(bandwidth=20e9))
    cal = calibrate_cpu(reset=True, measure=FakeMeasure(bandwidth=5e9))
    assert cal.device.bandwidth.value == 5e9
    assert calibrate_cpu().device.bandwidth.value == 5e9


def test_the_best_probe_rate_survives_a_new_calibration(cache: Path) -> None:
    calibrate_cpu(measure=with_probes(FakeMeasure(bandwidth=20e9), rate=12e9))
    cal = calibrate_cpu(force=True, measure=with_probes(FakeMeasure(bandwidth=30e9), rate=11e9))
    probe = cal.probes["bandwidth"]
    assert (probe.figure, probe.rate) == (30e9, 11e9)  # the new pair: its figure is higher
    assert probe.best_rate == 12e9  # but the best the probe ever ran is remembered


#: 150 GFLOP/s fp64, 300 fp32
PEAK_150 = cpupeak.CpuPeak(
    cores=2, clock_hz=3.75e9, clock_source="test", isa="AVX2+FMA", fp64_per_cycle=20, fp32_per_cycle=40
)


class Sequenced:
    """A measure_cpu that returns each of ``ceilings`` in turn (the last one repeats)."""

    def __init__(self, *fakes: FakeMeasure) -> None:
        self.fakes = list(fakes)
        self.calls = 0

    def __call__(self) -> Ceilings:
        fake = self.fakes[min(self.calls, len(self.fakes) - 1)]
        self.calls += 1
        return fake()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (FakeMeasure(fp64=100e9, fp32=90e9), r"fp32 90.0 GFLOP/s below fp64 100.0 GFLOP/s"),
        (FakeMeasure(fp64=200e9, fp32=400e9), r"above this CPU's theoretical peak"),
    ],
)
def test_an_impossible_calibration_is_measured_again_with_a_warning(
    cache: Path, bad: FakeMeasure, message: str
) -> None:
    good = FakeMeasure(fp64=100e9, fp32=200e9)
    measure = Sequenced(bad, good)
    with pytest.warns(RooflineWarning, match=rf"CPU calibration rejected \(.*{message}.*measuring again"):
        cal = calibrate_cpu(measure=measure, peak=PEAK_150)
    assert measure.calls == 2
    assert cal.device.peaks[(P.FP32, V)].value == 200e9


def test_rounds_that_disagree_widely_are_rejected_and_a_second_failure_is_said(cache: Path) -> None:
    bad = FakeMeasure()
    bad.ceilings = dataclasses.replace(
        bad.ceilings, details={"matmul_round1_fp64": 10e9, "matmul_round2_fp64": 100e9}
    )
    with pytest.warns(RooflineWarning) as caught:
        calibrate_cpu(measure=Sequenced(bad), peak=None)
    texts = [str(w.message) for w in caught]
    assert any("fp64 matmul rounds disagree (10.0 vs 100.0 GFLOP/s)" in t for t in texts)
    assert any("still fails its checks" in t and "suspect" in t for t in texts)


def test_a_schema_1_cache_is_recalibrated(cache: Path, fake: FakeMeasure) -> None:
    path, payload = cached_payload(cache, fake)
    payload["schema"] = 1
    path.write_text(json.dumps(payload))
    with pytest.warns(RooflineWarning, match="has schema 1 .* expected 2"):
        cal = calibrate_cpu(measure=fake)
    assert not cal.from_cache


def test_probe_best_rates_are_only_ever_raised(cache: Path) -> None:
    from pytest_roofline.machine.calibrate import raise_probe_bests

    calibrate_cpu(measure=with_probes(FakeMeasure(), rate=10e9))
    assert raise_probe_bests({"bandwidth": 9e9}) is False  # slower: nothing written
    assert raise_probe_bests({"bandwidth": 12e9, "fp32": 1e20}) is True  # fp32 has no probe here
    calibrate._cpu_memo.clear()
    probe = calibrate_cpu(measure=FakeMeasure()).probes["bandwidth"]
    assert probe.best_rate == 12e9
    assert probe.rate == 10e9  # the pair measured beside the figure is left as it was
    assert raise_probe_bests({"bandwidth": 1e9}, cache_dir=cache / "elsewhere") is False  # no cache


def test_a_kept_figure_never_goes_with_a_probe_measured_beside_another(cache: Path) -> None:
    calibrate_cpu(measure=FakeMeasure(bandwidth=30e9))  # an old calibration: no probes
    with pytest.warns(RooflineWarning, match="much lower"):
        cal = calibrate_cpu(force=True, measure=with_probes(FakeMeasure(bandwidth=10e9)))
    assert cal.device.bandwidth.value == 30e9
    assert "bandwidth" not in cal.probes  # so bandwidth is judged against the cached figure alone
    assert cal.probes["fp64"].figure == cal.device.peaks[(P.FP64, V)].value


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"size": 0}, "bad kind or size"),
        ({"size": -8}, "bad kind or size"),
        ({"size": True}, "bad kind or size"),
        ({"size": 2**40}, "bad kind or size"),
        ({"kind": "triad"}, "bad kind or size"),
        ({"figure": 1.0}, "measured beside another figure"),
        ({"rate": 0}, "must be a positive number"),
    ],
)
def test_a_cache_whose_probes_cannot_be_used_is_recalibrated(
    cache: Path, change: dict[str, object], why: str
) -> None:
    fake = with_probes(FakeMeasure())
    path, payload = cached_payload(cache, fake)
    payload["probes"]["bandwidth"].update(change)
    path.write_text(json.dumps(payload))
    with pytest.warns(RooflineWarning, match=f"does not match the cache schema.*{why}"):
        cal = calibrate_cpu(measure=fake)
    assert not cal.from_cache


def test_a_figure_and_probe_that_ran_under_different_loads_are_rejected(cache: Path) -> None:
    bad = FakeMeasure()
    bad.ceilings = dataclasses.replace(bad.ceilings, details={"probe_ratio_bandwidth": 14.0})
    with pytest.warns(RooflineWarning, match=r"bandwidth figure / probe ratio 14.00 is outside 0.5-10"):
        calibrate_cpu(measure=Sequenced(bad, FakeMeasure()), peak=None)


def test_measure_cpu_pairs_each_figure_with_its_probe_run_by_run() -> None:
    ceilings = measure_cpu(array_bytes=8 * 64, matmul_n=16, budget_s=1.0, clock=SteppingClock())
    for resource in ("bandwidth", "fp64", "fp32"):
        probe = ceilings.probes[resource]
        ratio = ceilings.details[f"probe_ratio_{resource}"]
        assert probe.rate == pytest.approx(probe.figure / ratio)
    assert ceilings.probes["fp64"].figure == ceilings.peaks[(P.FP64, V)].value
    assert ceilings.probes["bandwidth"].figure == ceilings.bandwidth.value


def test_format_calibration_shows_the_cache_levels_roofs(cache: Path, fake: FakeMeasure) -> None:
    cal = calibrate_cpu(measure=fake)
    l1 = MemoryLevel("l1", 48 * 2**10, Figure(2e11, Source.MEASURED, "copy 24 KiB"), per_core=True)
    l3 = MemoryLevel("l3", 32 * 2**20, Figure(6e10, Source.MEASURED, "dot 16 MiB"))
    with_levels = dataclasses.replace(cal, device=dataclasses.replace(cal.device, levels=(l1, l3), caches=()))
    text = format_calibration(with_levels, theoretical=PEAK)  # a calibration from before the sweep
    assert "l1 (48 KiB, per core)  200.0 GB/s  (measured: copy 24 KiB)" in text
    assert "l3 (32 MiB, shared)  60.0 GB/s  (measured: dot 16 MiB)" in text


def test_cached_ceilings_without_levels_gain_them_once_and_keep_them(
    cache: Path, fake: FakeMeasure, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a cache written before the cache levels: a warm measurement measures them, then they are kept
    fake.ceilings = dataclasses.replace(fake.ceilings, details={"bandwidth_kernel": "copy"})  # and no sweep
    swept = Sweep((), (CacheSize(1, 48 * 2**10, 48 * 2**10, per_core=True),), 0.1, "past the l1's knee")
    monkeypatch.setattr(calibrate, "measure_capacities", lambda caches: swept)
    monkeypatch.setattr(calibrate, "measure_cpu", fake)
    monkeypatch.setattr(
        "pytest_roofline.timing.host_caches.cpu_caches", lambda: (CacheInfo(1, 48 * 2**10, True),)
    )
    measured: list[int] = []

    def rates(caches: object, **kwargs: object) -> dict[str, tuple[float, str]]:
        measured.append(1)
        return {"l1": (3e11, "copy 24 KiB")}

    monkeypatch.setattr("pytest_roofline.machine.cachelevels.measure_level_rates", rates)
    assert cpu_device().levels == ()
    (level,) = calibrate.cpu_device_with_levels().levels
    assert (level.name, level.bandwidth.value) == ("l1", 3e11)
    calibrate._cpu_memo.clear()
    assert calibrate.cpu_device_with_levels().levels == (level,)  # from the cache file now
    assert measured == [1]


def test_a_forced_calibration_keeps_the_better_cache_level_roofs() -> None:
    from pytest_roofline.machine.cachelevels import level_details, rates_from_details

    old = Ceilings(
        Figure(2e10, Source.MEASURED), {(Precision.FP32, Unit.VECTOR): Figure(1e11, Source.MEASURED)},
        details=level_details({"l1": (2e11, "copy 24 KiB"), "l2": (1e11, "dot 1 MiB")}),
    )  # fmt: skip
    new = dataclasses.replace(
        old, details=level_details({"l1": (1.5e11, "add 24 KiB"), "l2": (1.2e11, "dot 1 MiB")})
    )
    kept = rates_from_details(calibrate.keep_best(old, new).details)
    assert kept == {"l1": (2e11, "copy 24 KiB"), "l2": (1.2e11, "dot 1 MiB")}
