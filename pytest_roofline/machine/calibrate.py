"""Measured ceilings, cached: this machine's CPU (and, on request, a GPU).

:func:`_calibrate` reads a device's cache file, or else measures and writes it under a file lock, so
that pytest-xdist workers calibrate once: docs/architecture.md ("Files and locks").
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ..model.core import Device, Figure, MemoryLevel, Precision, Source, Unit
from ..timing.cpu import cpu_model_name
from .calibration_cache import (
    Calibration,
    Ceilings,
    CorruptCache,
    cache_file_of,
    ceilings_payload,
    figure_payload,
    keep_best,
    probes_to_json,
    read_ceilings,
    read_figure,
    warn,
    write_ceilings,
)
from .cpu_ceilings import (
    CPU_NOTE,
    measure_cpu,
    sanity_problems,
)
from .files import cache_dir, can_lock, lock, open_lock_file

if TYPE_CHECKING:
    from ..model.peaks import CpuPeak

__all__ = [
    "calibrate_cpu",
    "calibrate_cuda",
    "cpu_calibration",
    "cpu_device",
    "cpu_identity",
    "cuda_l2_roof",
    "gpu_l2_levels",
    "raise_probe_bests",
]

_LOCK_TIMEOUT_S = 60.0
#: float formats that take fp32's figure on the CPU; integers take none
_NARROW = (Precision.TF32, Precision.FP16, Precision.BF16, Precision.FP8_E4M3)


def cpu_identity() -> dict[str, str | int]:
    """What a CPU calibration is keyed by: the CPU model, the core count and the numpy version."""
    import numpy as np

    return {"cpu_model": cpu_model_name(), "cores": os.cpu_count() or 1, "numpy": np.__version__}


def _directory(given: Path | str | None) -> Path:
    """Where the cache files are: ``given``, else the plugin's cache folder."""
    return Path(given) if given is not None else cache_dir()


@contextlib.contextmanager
def _exclusive(path: Path, *, timeout_s: float = _LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (best effort: POSIX only, skipped when it cannot be made)."""
    if not can_lock():
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_lock_file(path)
    except OSError:
        yield  # an unwritable folder: the write will warn
        return
    try:
        with contextlib.suppress(OSError):  # a file system that cannot lock: unlocked, as without fcntl
            if not lock(fd, timeout_s=timeout_s):
                warn(f"{path} stayed locked for {timeout_s:.0f} s; calibrating without the lock")
        yield
    finally:
        os.close(fd)  # releases the lock


def _calibrate(
    kind: str,
    key: Mapping[str, object],
    *,
    directory: Path,
    force: bool,
    measure: Callable[[], Ceilings],
    build: Callable[[Ceilings], Device],
    reset: bool = False,
) -> Calibration:
    """Load or measure, then cache, for the CPU and a GPU alike: ``force`` keeps the better of each
    cached and new figure, ``reset`` forgets what was cached (docs/measurement.md, "Calibration")."""
    start = time.perf_counter()
    path = cache_file_of(directory, kind, key)
    if not force and not reset:
        try:
            cached = read_ceilings(path, kind, key)
        except CorruptCache as exc:
            warn(f"calibration cache {path} {exc}; recalibrating and replacing it")
            cached = None
        if cached is not None:
            return Calibration(build(cached), path, True, time.perf_counter() - start, cached.probes)
    with _exclusive(path.with_name(f".{path.stem}.lock")):
        previous = None
        with contextlib.suppress(CorruptCache):
            previous = None if reset else read_ceilings(path, kind, key)
        if previous is not None and not force:
            # another process (an xdist worker) calibrated while this one waited
            return Calibration(build(previous), path, True, time.perf_counter() - start, previous.probes)
        ceilings = measure()
        if previous is not None:
            ceilings = keep_best(previous, ceilings, where=str(path))
        seconds = time.perf_counter() - start
        written = write_ceilings(path, ceilings_payload(kind, key, ceilings, seconds))
    return Calibration(build(ceilings), path if written else None, False, seconds, ceilings.probes)


# -- the CPU -----------------------------------------------------------------------------------


def calibrate_cpu(
    *,
    force: bool = False,
    reset: bool = False,
    cache_dir: Path | str | None = None,
    measure: Callable[[], Ceilings] | None = None,
    peak: CpuPeak | Literal["auto"] | None = "auto",
) -> Calibration:
    """This CPU's measured ceilings, from the cache when it has them; ``force`` and ``reset`` as in
    :func:`_calibrate`; a measurement breaking a sanity rule is taken once more, with a warning.
    ``measure`` and ``peak`` replace :func:`measure_cpu` and the CPU's theoretical peak."""
    if peak == "auto":
        from .cpupeak import cpu_peak

        peak = cpu_peak()
    return _calibrate(
        "cpu",
        cpu_identity(),
        directory=_directory(cache_dir),
        force=force,
        reset=reset,
        measure=_sane(measure or measure_cpu, peak),
        build=_cpu_device,
    )


def _sane(measure: Callable[[], Ceilings], peak: CpuPeak | None) -> Callable[[], Ceilings]:
    """``measure``, taken once more (with a warning) when its result breaks a sanity rule."""

    def checked() -> Ceilings:
        ceilings = measure()
        problems = sanity_problems(ceilings, peak)
        if not problems:
            return ceilings
        warn(f"CPU calibration rejected ({'; '.join(problems)}); measuring again")
        again = measure()
        problems = sanity_problems(again, peak)
        if problems:
            warn(f"CPU calibration still fails its checks ({'; '.join(problems)}); its figures are suspect")
        return again

    return checked


def raise_probe_bests(rates: Mapping[str, float], *, cache_dir: Path | str | None = None) -> bool:
    """Raise the cached CPU calibration's best probe rates to ``rates`` (per resource) where higher,
    under the cache's lock, touching nothing else; whether the file changed (a missing or unusable
    cache is left alone)."""
    key = cpu_identity()
    path = cache_file_of(_directory(cache_dir), "cpu", key)
    with _exclusive(path.with_name(f".{path.stem}.lock")):
        try:
            cached = read_ceilings(path, "cpu", key)
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (CorruptCache, OSError, ValueError):
            return False
        if cached is None:
            return False
        today = datetime.now(timezone.utc).date().isoformat()
        raised = {
            resource: dataclasses.replace(probe, best_rate=rates[resource], best_seen=today)
            for resource, probe in cached.probes.items()
            if rates.get(resource, 0.0) > probe.best_rate
        }
        if not raised:
            return False
        payload["probes"] = probes_to_json({**cached.probes, **raised})
        return write_ceilings(path, payload)


_cpu_memo: dict[str, Calibration] = {}


def cpu_calibration() -> Calibration:
    """This CPU's calibration, once per process (from the cache when it can be)."""
    if "cpu" not in _cpu_memo:
        _cpu_memo["cpu"] = calibrate_cpu()
    return _cpu_memo["cpu"]


def cpu_device() -> Device:
    """This CPU as a Device: calibrated once per process (from the cache when it can be)."""
    return cpu_calibration().device


def cached_cpu_device(*, cache_dir: Path | str | None = None) -> Device | None:
    """This CPU as a Device when its ceilings are known without measuring (calibrated earlier in this
    process, or in the cache file), else None."""
    if "cpu" in _cpu_memo:
        return _cpu_memo["cpu"].device
    key = cpu_identity()
    try:
        cached = read_ceilings(cache_file_of(_directory(cache_dir), "cpu", key), "cpu", key)
    except CorruptCache:  # calibrating replaces it, with a warning: not an estimate's business
        return None
    return None if cached is None else _cpu_device(cached)


def _cpu_device(ceilings: Ceilings) -> Device:
    from ..timing.cpu import last_level_cache_bytes

    peaks = dict(ceilings.peaks)
    fp32 = peaks.get((Precision.FP32, Unit.VECTOR))
    if fp32 is not None:
        note = "fp32's matmul figure, not measured (numpy has no faster path for narrower formats)"
        for precision in _NARROW:
            peaks.setdefault((precision, Unit.VECTOR), Figure(fp32.value, Source.DERIVED, note))
    from ..timing.host_caches import cpu_caches
    from .cachelevels import levels_of, rates_from_details
    from .capacity import capacities_from_details, usable_caches

    name = cpu_model_name()
    rates = rates_from_details(ceilings.details)
    caches = capacities_from_details(ceilings.details)
    # sysfs's sizes where the calibration has no sweep
    served_by = usable_caches(caches) if caches else cpu_caches()
    levels = levels_of(served_by, rates, dram=ceilings.bandwidth.value)
    return Device(
        key="cpu",
        name=name,
        kind="cpu",
        peaks=peaks,
        bandwidth=ceilings.bandwidth,
        # what rotation, the past-cache threshold and the flush are sized by: the sweep's figure
        llc_bytes=caches[-1].sizing_bytes if caches else last_level_cache_bytes(),
        cores=os.cpu_count(),
        names=(name,),
        notes=(CPU_NOTE,),
        levels=levels,
        caches=caches,
    )


# -- a GPU -------------------------------------------------------------------------------------


def calibrate_cuda(
    index: int = 0,
    *,
    force: bool = False,
    reset: bool = False,
    cache_dir: Path | str | None = None,
    measure: Callable[[int], tuple[Figure, Mapping[tuple[Precision, Unit], Figure]]] | None = None,
    l2: Callable[[int], Figure] | None = None,
    l2_capacity: Callable[[int], Callable[[int], float]] | None = None,
) -> Calibration:
    """GPU ``index`` with measured ceilings replacing its datasheet (or derived) ones, and its L2's roof
    (:func:`cuda_l2_roof`), cached per GPU model (docs/architecture.md, "Files and locks"). ``measure``,
    ``l2`` and ``l2_capacity`` replace ``measure_ceilings``, ``measure_l2_roof`` and ``l2_rate_at`` (the
    last two, by default, only with the default ``measure``)."""
    from ..timing.cuda.device import cuda_device
    from ..timing.cuda.measured_ceilings import CEILINGS_METHOD, measure_ceilings, tf32_requested
    from ..timing.host_caches import CacheInfo
    from ..timing.l2 import L2_METHOD, l2_rate_at, measure_l2_roof
    from .capacity import capacities_from_details, sweep_details

    base = cuda_device(index)
    key: dict[str, object] = {
        **_gpu_identity(base),
        "tf32": tf32_requested(),  # CUPY_TF32 turns the fp32 matmul into a TF32 one
        # a calibration measured another way is measured again, not reused
        "method": CEILINGS_METHOD,
        "l2_method": L2_METHOD,
    }
    measure_fn = measure or measure_ceilings
    l2_fn = l2 if l2 is not None or measure is not None else measure_l2_roof
    sweep_fn = l2_capacity if l2_capacity is not None or measure is not None else l2_rate_at

    def run() -> Ceilings:
        bandwidth, peaks = measure_fn(index)
        # the L2's capacity as this GPU sees it (a MIG slice's share)
        details = {}
        if sweep_fn is not None and base.llc_bytes:
            l2_guess = CacheInfo(2, base.llc_bytes, per_core=False)
            details = sweep_details(l2_guess, sweep_fn(index), kernel="ld.global.cg")
        return Ceilings(bandwidth=bandwidth, peaks=dict(peaks), details=details)

    def build(ceilings: Ceilings) -> Device:
        device = base.with_figures(peaks={**base.peaks, **ceilings.peaks}, bandwidth=ceilings.bandwidth)
        caches = capacities_from_details(ceilings.details)
        return dataclasses.replace(
            device, notes=(*base.notes, "ceilings measured on this GPU"), caches=caches,
            llc_bytes=caches[-1].sizing_bytes if caches else base.llc_bytes,
        )  # fmt: skip

    directory = _directory(cache_dir)
    calibration = _calibrate(
        base.kind, key, directory=directory, force=force, reset=reset, measure=run, build=build
    )
    roof = cuda_l2_roof(index, cache_dir=directory, measure=l2_fn, force=force, reset=reset, device=base)
    levels = gpu_l2_levels(calibration.device, roof)
    return dataclasses.replace(calibration, device=dataclasses.replace(calibration.device, levels=levels))


def cuda_l2_roof(
    index: int = 0,
    *,
    cache_dir: Path | str | None = None,
    measure: Callable[[int], Figure] | None = None,
    force: bool = False,
    reset: bool = False,
    device: Device | None = None,
) -> Figure | None:
    """The L2 roof of GPU ``index`` (bytes/s), cached in a file of its own (per GPU model, CuPy version
    and method); measured with ``measure`` when that has none, or on ``force`` (the better kept) or
    ``reset``. None where the L2 size is unknown, or nothing is cached and ``measure`` is None.
    ``device``: what the driver says of GPU ``index``, where the caller asked it already."""
    from ..timing.cuda.device import cuda_device
    from ..timing.l2 import L2_METHOD

    base = device if device is not None else cuda_device(index)
    if not base.llc_bytes:
        return None
    key: dict[str, object] = {**_gpu_identity(base), "method": L2_METHOD}
    path = cache_file_of(_directory(cache_dir), "cuda-l2", key)
    start = time.perf_counter()
    cached = None if reset else _cached_figure(path, "cuda-l2", key)
    if measure is None or (cached is not None and not force):
        return cached
    with _exclusive(path.with_name(f".{path.stem}.lock")):
        if not force and not reset and (waited := _cached_figure(path, "cuda-l2", key)) is not None:
            return waited  # another process measured it while this one waited
        figure = measure(index)
        if cached is not None and cached.value > figure.value:  # force never makes a roof worse
            figure = cached
        write_ceilings(path, figure_payload("cuda-l2", key, figure, time.perf_counter() - start))
    return figure


def _cached_figure(path: Path, kind: str, key: Mapping[str, object]) -> Figure | None:
    try:
        return read_figure(path, kind, key)
    except CorruptCache as exc:
        warn(f"calibration cache {path} {exc}; measuring again and replacing it")
        return None


def gpu_l2_levels(device: Device, roof: Figure | None) -> tuple[MemoryLevel, ...]:
    """``device``'s L2 as a memory level with ``roof`` (none without a roof or an L2 size, or where
    the capacity sweep saw no L2: said so in its caches, not used), at the capacity this process
    sees: at least DRAM's bandwidth, as no smaller level serves bytes slower."""
    from .capacity import usable_caches

    if roof is None or not device.llc_bytes or (device.caches and not usable_caches(device.caches)):
        return ()
    if roof.value < device.bandwidth.value:
        note = f"{roof.value / 1e9:.1f} GB/s measured ({roof.note}), raised to DRAM's"
        roof = Figure(device.bandwidth.value, Source.MEASURED, note)
    return (MemoryLevel("l2", device.llc_bytes, roof, per_core=False),)


def _gpu_identity(base: Device) -> dict[str, object]:
    """What a GPU's cache files are keyed by: the model, not the slot (identical GPUs share them)."""
    return {
        "name": base.name,
        "key": base.key,
        "sms": base.cores,
        "llc_bytes": base.llc_bytes,
        # timing.cuda imported it to find the device
        "cupy": str(getattr(sys.modules.get("cupy"), "__version__", "unknown")),
    }
