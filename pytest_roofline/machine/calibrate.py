"""Measured ceilings, cached: this machine's CPU (and, on request, a GPU).

**CPU.** A CPU has no datasheet we can trust here, so its ceilings are measured with numpy:

- *Bandwidth* is the best of five kernels over float64 arrays of at least 4× the last-level cache
  (STREAM's rule), each counted as the bytes it reads plus the bytes it writes (STREAM's
  convention: write-allocate reads are not counted):

  ============  ===================================================  =========================
  kernel        numpy                                                arrays of traffic counted
  ============  ===================================================  =========================
  copy          ``np.copyto(c, a)``                                  2
  scale         ``np.multiply(b, s, out=c)``                         2
  add           ``np.add(a, b, out=c)``                              3
  triad         ``np.multiply(b, s, out=c); np.add(c, a, out=c)``    5 (numpy makes two passes)
  dot           ``np.dot(a, b)`` (BLAS, read only)                   2
  ============  ===================================================  =========================

  numpy cannot fuse STREAM's triad, so it runs as the two passes it really is and both passes'
  bytes are counted; counting STREAM's 3 arrays would overstate bandwidth by 5/3. The read-only
  BLAS ``dot`` is there because a floor must never be above the true best time: it pays no
  write-allocate and BLAS runs it on every core, so it outruns every single-threaded STREAM
  kernel (on the reference 2-core Xeon: about 24 GB/s against copy's 18), and a numpy kernel
  under test can do the same. Arrays are touched once, untimed, before any kernel is timed (page
  faults); the best rate over all runs is kept.
- *Compute* is ``np.matmul`` FLOP/s (2·n³ per call) for fp64 and fp32, with n chosen from a small
  probe so that one call takes about :data:`MATMUL_TARGET_S`; best of a few calls. Narrower
  float formats (tf32, fp16, bf16, fp8) take fp32's figure, marked :attr:`Source.DERIVED`:
  nothing measured them, and numpy has no path for them that is faster than fp32 BLAS, so fp32's
  rate is an upper bound and keeps their floors honest. Integers take none: no float rate bounds
  integer work, whose compute side stays unknown. Every CPU peak is :attr:`Unit.VECTOR`.

Calibration runs within a time budget (:data:`CPU_BUDGET_S`): every kernel runs at least once,
and more runs are added, fastest kernel first, only while the budget allows; array sizes are never
reduced to save time. On a 2-core Xeon with a 300 MiB L3 (1.2 GiB arrays, 3.6 GiB in all, freed on
return) the obligatory part takes about 3.4 s and the whole about 3.5 s; a slower or busier
machine can overrun the budget by its obligatory part.

**Cache.** A calibration is stored as JSON in :func:`cache_dir` (``$XDG_CACHE_HOME/pytest-roofline``
or ``~/.cache/pytest-roofline``), in a file named after a hash of its key: for the CPU the model
name, the core count and the numpy version; for a GPU its name, table key, SM count, cache size
and the CuPy version. The key is stored in the file too and checked on load. Files are written
atomically (a temporary file in the same folder, then :func:`os.replace`), and a calibration runs
under a file lock, so pytest-xdist workers starting together calibrate once. A file that is not
valid JSON, not of this schema (a figure that is not a positive number, no vector peak) or keyed
for another machine is recalibrated and replaced, with a :class:`RooflineWarning` naming it; a
cache folder that cannot be written to costs a warning, not the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidValueError, RooflineError, RooflineWarning
from ..model.ceilings import BANDWIDTH, RESOURCES, ProbeReference
from ..model.core import Device, Figure, PeakTable, Precision, Source, Unit
from ..model.devices import GB, MiB, describe_peaks, slug
from ..model.peaks import parse_peak_key, peak_key
from ..timing.cpu import cpu_model_name

if TYPE_CHECKING:
    import numpy as np

    from .cpupeak import CpuPeak

__all__ = [
    "CPU_BUDGET_S",
    "MATMUL_TARGET_S",
    "Calibration",
    "Ceilings",
    "RooflineWarning",
    "cache_dir",
    "calibrate_cpu",
    "calibrate_cuda",
    "cpu_device",
    "cpu_identity",
    "cpu_model_name",
    "format_calibration",
    "measure_cpu",
]

#: wall-time budget of a CPU calibration, in seconds; the first run of every kernel is always taken
CPU_BUDGET_S = 3.5
#: how long one ``np.matmul`` call should take when measuring FLOP/s
MATMUL_TARGET_S = 0.06
#: bandwidth arrays are this many times the last-level cache (STREAM's rule)
LLC_MULTIPLE = 4
#: the most timed runs of any one bandwidth kernel
MAX_KERNEL_RUNS = 5

CPU_NOTE = "measured with numpy (single-threaded elementwise; BLAS dot and matmul)"

_SCHEMA = 2
#: a re-measure that comes out below this share of a cached figure is worth a warning
_MUCH_LOWER = 0.8
#: two rounds of one calibration kernel further apart than this are not a measurement
_DISAGREE = 2.0
#: a figure / probe ratio outside this range means the two did not run under one load (the probe
#: is the same kind of kernel, a little smaller: quietly the ratio is 1 to 3)
PROBE_RATIO_RANGE = (0.5, 10.0)
_LOCK_TIMEOUT_S = 60.0
#: float formats that take fp32's figure on the CPU; integers take none (no float rate bounds
#: integer work: their compute side stays unknown unless a peaks file gives it)
_NARROW = (Precision.TF32, Precision.FP16, Precision.BF16, Precision.FP8_E4M3)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Ceilings:
    """What a calibration measures: DRAM bandwidth (bytes/s), peak FLOP/s, and how they were found."""

    bandwidth: Figure
    peaks: PeakTable
    #: raw numbers behind the figures (per-kernel rates, sizes, run counts), for the cache file
    details: Mapping[str, float | int | str] = field(default_factory=dict)
    #: per resource (bandwidth, fp64, fp32), the probe measured beside its figure (CPU only)
    probes: Mapping[str, ProbeReference] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Calibration:
    """A device with measured ceilings, where they are cached and how this call got them."""

    device: Device
    #: the cache file, or None when it could not be written
    cache_path: Path | None
    #: True when the ceilings were read from the cache rather than measured now
    from_cache: bool
    #: wall time of this call: the measurement, or reading the cache
    seconds: float
    #: per resource, the probe that pairs a measurement's ceiling with its calibrated figure
    probes: Mapping[str, ProbeReference] = field(default_factory=dict)


# -- the cache ---------------------------------------------------------------------------------


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


_default_cache_dir = cache_dir  # the calibrate functions take a parameter of that name


def cpu_identity() -> dict[str, str | int]:
    """What a CPU calibration is keyed by: the CPU model, the core count and the numpy version."""
    import numpy as np

    return {"cpu_model": cpu_model_name(), "cores": os.cpu_count() or 1, "numpy": np.__version__}


def _cache_file(directory: Path, kind: str, key: Mapping[str, object]) -> Path:
    canonical = json.dumps({"schema": _SCHEMA, "kind": kind, "key": key}, sort_keys=True)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    label = str(key.get("cpu_model") or key.get("name") or kind)
    name = slug(label)[:40].strip("-")
    return directory / f"{kind}-{name}-{digest}.json" if name else directory / f"{kind}-{digest}.json"


class _CorruptCache(RooflineError):
    """A cache file that exists but cannot be used; the message says why."""


def _load(path: Path, kind: str, key: Mapping[str, object]) -> Ceilings | None:
    """The cached ceilings, None when there is no file, _CorruptCache when it cannot be used."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # none yet, or no folder to hold one
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _CorruptCache(f"cannot be read ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _CorruptCache(f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _CorruptCache("is not a JSON object")
    if data.get("schema") != _SCHEMA or data.get("kind") != kind:
        raise _CorruptCache(
            f"has schema {data.get('schema')!r} and kind {data.get('kind')!r}; "
            f"expected {_SCHEMA} and {kind!r}"
        )
    if data.get("key") != dict(key):
        raise _CorruptCache(f"was written for {data.get('key')!r}, not for {dict(key)!r}")
    try:
        bandwidth = _figure_from_json(data["bandwidth"])
        raw_peaks = data["peaks"]
        if not isinstance(raw_peaks, dict):
            raise TypeError("'peaks' is not an object")
        peaks = {parse_peak_key(name): _figure_from_json(value) for name, value in raw_peaks.items()}
        if not any(unit is Unit.VECTOR for _, unit in peaks):  # every kernel falls back to one
            raise ValueError(f"'peaks' has no vector peak: {sorted(raw_peaks) or 'none at all'}")
        details = data.get("details", {})
        if not isinstance(details, dict) or not all(
            isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in details.values()
        ):
            raise TypeError("'details' is not an object of numbers and strings")
        probes = _probes_from_json(data.get("probes", {}))
        for resource, probe in probes.items():
            figure = bandwidth if resource == BANDWIDTH else peaks.get(parse_peak_key(f"{resource}:vector"))
            if figure is None or not math.isclose(figure.value, probe.figure, rel_tol=1e-9):
                raise ValueError(f"probe {resource!r} was measured beside another figure ({probe.figure})")
    except (KeyError, TypeError, ValueError) as exc:
        raise _CorruptCache(f"does not match the cache schema ({type(exc).__name__}: {exc})") from None
    return Ceilings(bandwidth=bandwidth, peaks=peaks, details=details, probes=probes)


_PROBE_FIELDS = ("kind", "size", "figure", "rate", "best_rate", "best_seen")
#: the sizes a probe may have: bytes per copy array, n of a matmul
_PROBE_SIZES = {"copy": (8, 256 * MiB), "matmul": (16, 4096)}


def _probes_from_json(data: object) -> dict[str, ProbeReference]:
    if not isinstance(data, dict):
        raise TypeError("'probes' is not an object")
    probes = {}
    for resource, entry in data.items():
        if not isinstance(entry, dict) or set(entry) != set(_PROBE_FIELDS):
            raise TypeError(f"probe {resource!r} must be {{{', '.join(_PROBE_FIELDS)}}}; got {entry!r}")
        kind, size = entry["kind"], entry["size"]
        lo, hi = _PROBE_SIZES.get(kind, (1, 0))
        if isinstance(size, bool) or not isinstance(size, int) or not lo <= size <= hi:
            raise TypeError(f"probe {resource!r} has a bad kind or size: {entry!r}")
        probes[resource] = ProbeReference(resource=resource, **entry)
    return probes


def _probes_to_json(probes: Mapping[str, ProbeReference]) -> dict[str, dict[str, object]]:
    return {r: {name: getattr(p, name) for name in _PROBE_FIELDS} for r, p in probes.items()}


def _figure_to_json(figure: Figure) -> dict[str, object]:
    return {"value": figure.value, "source": figure.source.value, "note": figure.note}


def _figure_from_json(data: object) -> Figure:
    if not isinstance(data, dict) or set(data) != {"value", "source", "note"}:
        raise TypeError(f"a figure must be {{value, source, note}}; got {data!r}")
    value, source, note = data["value"], data["source"], data["note"]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not isinstance(note, str):
        raise TypeError(f"bad figure {data!r}")
    return Figure(float(value), Source(source), note)


def _store(path: Path, payload: Mapping[str, object]) -> bool:
    """Write ``payload`` atomically; on failure warn, leave any old file untouched and return False."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(payload, out, indent=2, sort_keys=True)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        _warn(
            f"cannot write the calibration cache {path} ({exc}); the measured ceilings are used but not kept"
        )
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return True


@contextlib.contextmanager
def _exclusive(path: Path, *, timeout_s: float = _LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (best effort: POSIX only, skipped when it cannot be made)."""
    if sys.platform == "win32":
        yield
        return
    import fcntl

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield  # an unwritable folder: the write will warn
        return
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    _warn(f"{path} stayed locked for {timeout_s:.0f} s; calibrating without the lock")
                    break
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _warn(message: str) -> None:
    warnings.warn(message, RooflineWarning, stacklevel=3)


def _calibrate(
    kind: str,
    key: Mapping[str, object],
    *,
    directory: Path,
    force: bool,
    measure: Callable[[], Ceilings],
    build: Callable[[Ceilings], Device],
    reset: bool = False,
    complete: Callable[[Ceilings], Ceilings] | None = None,
) -> Calibration:
    """Load or measure, then cache: the one path both CPU and GPU calibrations take.

    ``complete`` adds to cached ceilings what an older release did not measure (the CPU's cache
    levels); what it returns, when it added something, is cached in their place.

    A re-measure (``force``) never makes the cache worse: each figure keeps the better of the
    cached and the new value, with a warning naming the figures that came out much lower. Only
    ``reset`` forgets what was cached (a machine that really became slower).
    """
    start = time.perf_counter()
    path = _cache_file(directory, kind, key)
    if not force and not reset:
        try:
            cached = _load(path, kind, key)
        except _CorruptCache as exc:
            _warn(f"calibration cache {path} {exc}; recalibrating and replacing it")
            cached = None
        if cached is not None and complete is not None and (completed := complete(cached)) is not cached:
            written = _store(path, _payload(kind, key, completed, time.perf_counter() - start))
            return Calibration(
                build(completed), path if written else None, True, time.perf_counter() - start, cached.probes
            )
        if cached is not None:
            return Calibration(build(cached), path, True, time.perf_counter() - start, cached.probes)
    with _exclusive(path.with_name(f".{path.stem}.lock")):
        previous = None
        with contextlib.suppress(_CorruptCache):
            previous = None if reset else _load(path, kind, key)
        if previous is not None and not force:
            # another process (an xdist worker) calibrated while this one waited
            return Calibration(build(previous), path, True, time.perf_counter() - start, previous.probes)
        ceilings = measure()
        if previous is not None:
            ceilings = keep_best(previous, ceilings, where=str(path))
        seconds = time.perf_counter() - start
        written = _store(path, _payload(kind, key, ceilings, seconds))
    return Calibration(build(ceilings), path if written else None, False, seconds, ceilings.probes)


def _payload(kind: str, key: Mapping[str, object], ceilings: Ceilings, seconds: float) -> dict[str, object]:
    return {
        "schema": _SCHEMA,
        "kind": kind,
        "key": dict(key),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(seconds, 4),
        "bandwidth": _figure_to_json(ceilings.bandwidth),
        "peaks": {peak_key(p, u): _figure_to_json(f) for (p, u), f in ceilings.peaks.items()},
        "details": dict(ceilings.details),
        "probes": _probes_to_json(ceilings.probes),
    }


def keep_best(old: Ceilings, new: Ceilings, *, where: str = "the cache") -> Ceilings:
    """Per figure, the better of ``old`` and ``new``, kept together with the probe measured beside it.

    Warns, naming each figure, where ``new`` came out below :data:`_MUCH_LOWER` of ``old``: a busy
    moment, most likely, which must not become the machine's figure.
    """
    peaks = dict(new.peaks)
    probes = dict(new.probes)
    bandwidth = new.bandwidth
    lower: list[str] = []
    figures: list[tuple[str, Figure, Figure]] = [(BANDWIDTH, old.bandwidth, new.bandwidth)]
    for (precision, unit), figure in new.peaks.items():
        cached = old.peaks.get((precision, unit))
        if cached is not None and figure.source is Source.MEASURED:
            figures.append((peak_key(precision, unit), cached, figure))
    for name, cached, fresh in figures:
        if fresh.value >= cached.value:
            continue
        if fresh.value < _MUCH_LOWER * cached.value:
            lower.append(f"{name} {_plain(fresh.value, name)} (cached {_plain(cached.value, name)})")
        resource = BANDWIDTH if name == BANDWIDTH else name.split(":")[0]
        if name == BANDWIDTH:
            bandwidth = cached
        else:
            peaks[parse_peak_key(name)] = cached
        if resource in old.probes:
            probes[resource] = old.probes[resource]
        else:  # the new probe was measured beside the new figure, not the kept one
            probes.pop(resource, None)
    for resource, probe in probes.items():  # the best probe rate ever seen survives either way
        seen = old.probes.get(resource)
        if seen is not None and seen.best_rate > probe.best_rate:
            probes[resource] = dataclasses.replace(probe, best_rate=seen.best_rate, best_seen=seen.best_seen)
    if lower:
        _warn(
            f"the new calibration came out much lower than {where} for {'; '.join(lower)}: the machine is "
            "busy or slower; the cached figures are kept (`roofline calibrate --reset` forgets them)"
        )
    return dataclasses.replace(
        new, bandwidth=bandwidth, peaks=peaks, probes=probes, details=_best_levels(old.details, new.details)
    )


def _best_levels(
    old: Mapping[str, float | int | str], new: Mapping[str, float | int | str]
) -> dict[str, float | int | str]:
    """``new``'s details with each cache level's roof the better of the two calibrations' (a roof
    measured at a busy moment must not lower it, as no figure is lowered)."""
    from .cachelevels import level_details, rates_from_details

    best = rates_from_details(new)
    for name, (rate, how) in rates_from_details(old).items():
        if rate > best.get(name, (0.0, ""))[0]:
            best[name] = (rate, how)
    return {**new, **level_details(best)}


def _plain(value: float, name: str) -> str:
    return f"{value / GB:.1f} GB/s" if name == BANDWIDTH else f"{value / 1e9:.1f} GFLOP/s"


# -- the CPU -----------------------------------------------------------------------------------


def calibrate_cpu(
    *,
    force: bool = False,
    reset: bool = False,
    cache_dir: Path | str | None = None,
    measure: Callable[[], Ceilings] | None = None,
    peak: CpuPeak | Literal["auto"] | None = "auto",
) -> Calibration:
    """This CPU's measured ceilings, from the cache when it has them.

    ``force=True`` measures again, keeping the better of each cached and new figure; ``reset=True``
    measures again and forgets what was cached. A measurement that breaks a sanity rule
    (:func:`sanity_problems`) is taken once more, with a warning. ``measure`` replaces
    :func:`measure_cpu` and ``peak`` the CPU's theoretical peak (tests inject both).
    """
    directory = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    if peak == "auto":
        from .cpupeak import cpu_peak

        peak = cpu_peak()
    return _calibrate(
        "cpu",
        cpu_identity(),
        directory=directory,
        force=force,
        reset=reset,
        measure=_sane(measure or measure_cpu, peak),
        build=_cpu_device,
    )


def cpu_device_with_levels(*, cache_dir: Path | str | None = None) -> Device:
    """This CPU as a Device with its cache levels' roofs, measured now (and cached) when the cached
    calibration predates them: what a warm measurement is judged against."""
    device = cpu_device()
    if device.levels:
        return device
    directory = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    calibration = _calibrate(
        "cpu", cpu_identity(), directory=directory, force=False, measure=measure_cpu, build=_cpu_device,
        complete=_with_cache_levels,
    )  # fmt: skip
    _cpu_memo["cpu"] = calibration
    return calibration.device


def _with_cache_levels(ceilings: Ceilings) -> Ceilings:
    """Cached ceilings with this CPU's cache-level roofs: measured now when a release before them
    wrote the cache (the same ceilings, unchanged, when they are there or the OS names no level)."""
    from .cachelevels import cpu_caches, level_details, measure_level_rates, rates_from_details

    caches = cpu_caches()
    if not caches or rates_from_details(ceilings.details):
        return ceilings
    details = {**ceilings.details, **level_details(measure_level_rates(caches))}
    return dataclasses.replace(ceilings, details=details)


def sanity_problems(ceilings: Ceilings, peak: CpuPeak | None) -> list[str]:
    """What makes a CPU calibration impossible: fp32 below fp64, a rate above the CPU's theoretical
    peak, two rounds of one kernel further apart than :data:`_DISAGREE`, a figure and its probe
    whose ratio is outside :data:`PROBE_RATIO_RANGE`."""
    from .cpupeak import check_rate

    problems = []
    fp64 = ceilings.peaks.get((Precision.FP64, Unit.VECTOR))
    fp32 = ceilings.peaks.get((Precision.FP32, Unit.VECTOR))
    if fp64 is not None and fp32 is not None and fp32.value < fp64.value:
        problems.append(f"fp32 {_plain(fp32.value, 'fp32')} below fp64 {_plain(fp64.value, 'fp64')}")
    for precision, figure in ((Precision.FP64, fp64), (Precision.FP32, fp32)):
        message = None if figure is None else check_rate(figure.value, precision, peak)
        if message:
            problems.append(message)
    lo, hi = PROBE_RATIO_RANGE
    for resource in RESOURCES:
        ratio = ceilings.details.get(f"probe_ratio_{resource}")
        if isinstance(ratio, (int, float)) and not lo <= ratio <= hi:
            problems.append(f"{resource} figure / probe ratio {ratio:.2f} is outside {lo:g}-{hi:g}")
    for precision in (Precision.FP64, Precision.FP32):
        rounds = [ceilings.details.get(f"matmul_round{i}_{precision}") for i in (1, 2)]
        if all(isinstance(r, (int, float)) and r > 0 for r in rounds):
            lo, hi = sorted(float(r) for r in rounds)  # type: ignore[arg-type]
            if hi > _DISAGREE * lo:
                problems.append(
                    f"{precision} matmul rounds disagree ({lo / 1e9:.1f} vs {hi / 1e9:.1f} GFLOP/s)"
                )
    return problems


def _sane(measure: Callable[[], Ceilings], peak: CpuPeak | None) -> Callable[[], Ceilings]:
    """``measure``, taken once more (with a warning) when its result breaks a sanity rule."""

    def checked() -> Ceilings:
        ceilings = measure()
        problems = sanity_problems(ceilings, peak)
        if not problems:
            return ceilings
        _warn(f"CPU calibration rejected ({'; '.join(problems)}); measuring again")
        again = measure()
        problems = sanity_problems(again, peak)
        if problems:
            _warn(f"CPU calibration still fails its checks ({'; '.join(problems)}); its figures are suspect")
        return again

    return checked


def raise_probe_bests(rates: Mapping[str, float], *, cache_dir: Path | str | None = None) -> bool:
    """Raise the cached CPU calibration's best probe rates to ``rates`` (per resource) where higher.

    Only ever raises, under the cache's lock; the figures and their probes are left as they are.
    Returns whether the file changed. A missing or unusable cache is left alone.
    """
    directory = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    key = cpu_identity()
    path = _cache_file(directory, "cpu", key)
    with _exclusive(path.with_name(f".{path.stem}.lock")):
        try:
            cached = _load(path, "cpu", key)
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (_CorruptCache, OSError, ValueError):
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
        payload["probes"] = _probes_to_json({**cached.probes, **raised})
        return _store(path, payload)


_cpu_memo: dict[str, Calibration] = {}


def cpu_calibration() -> Calibration:
    """This CPU's calibration, once per process (from the cache when it can be)."""
    if "cpu" not in _cpu_memo:
        _cpu_memo["cpu"] = calibrate_cpu()
    return _cpu_memo["cpu"]


def cpu_device() -> Device:
    """This CPU as a Device: calibrated once per process (from the cache when it can be)."""
    return cpu_calibration().device


def _cpu_device(ceilings: Ceilings) -> Device:
    from ..timing.cpu import last_level_cache_bytes

    peaks = dict(ceilings.peaks)
    fp32 = peaks.get((Precision.FP32, Unit.VECTOR))
    if fp32 is not None:
        note = "fp32's matmul figure, not measured (numpy has no faster path for narrower formats)"
        for precision in _NARROW:
            peaks.setdefault((precision, Unit.VECTOR), Figure(fp32.value, Source.DERIVED, note))
    from .cachelevels import cpu_caches, levels_of, rates_from_details

    name = cpu_model_name()
    levels = levels_of(cpu_caches(), rates_from_details(ceilings.details), dram=ceilings.bandwidth.value)
    return Device(
        key="cpu",
        name=name,
        kind="cpu",
        peaks=peaks,
        bandwidth=ceilings.bandwidth,
        llc_bytes=last_level_cache_bytes(),
        cores=os.cpu_count(),
        names=(name,),
        notes=(CPU_NOTE,),
        levels=levels,
    )


def measure_cpu(
    *,
    array_bytes: int | None = None,
    budget_s: float = CPU_BUDGET_S,
    matmul_target_s: float = MATMUL_TARGET_S,
    matmul_n: int | None = None,
    matmul_runs: int = 3,
    clock: Clock = time.perf_counter,
) -> Ceilings:
    """Measure this CPU's bandwidth and fp64/fp32 matmul FLOP/s with numpy (see the module docstring).

    ``array_bytes`` defaults to 4× the last-level cache; ``matmul_n`` to a size chosen so one call
    takes about ``matmul_target_s``. Matmul runs first, then the bandwidth kernels get what is left
    of ``budget_s`` (each runs at least once, at most :data:`MAX_KERNEL_RUNS` times), then matmul
    runs again and the better round counts. ``clock`` times every call.
    """
    import numpy as np

    if array_bytes is None:
        from ..timing.cpu import last_level_cache_bytes

        array_bytes = LLC_MULTIPLE * last_level_cache_bytes()
    if not isinstance(array_bytes, int) or array_bytes < 8:
        raise InvalidValueError(f"array_bytes must be an integer >= 8; got {array_bytes!r}")
    if not (math.isfinite(budget_s) and budget_s > 0):
        raise InvalidValueError(f"budget_s must be a positive number; got {budget_s!r}")
    if matmul_n is not None and (not isinstance(matmul_n, int) or matmul_n < 1):
        raise InvalidValueError(f"matmul_n must be a positive integer; got {matmul_n!r}")
    if not isinstance(matmul_runs, int) or matmul_runs < 1:
        raise InvalidValueError(f"matmul_runs must be a positive integer; got {matmul_runs!r}")

    from ..timing import probes as probe_kernels

    start = clock()
    today = datetime.now(timezone.utc).date().isoformat()
    details: dict[str, float | int | str] = {}
    matmuls = ((Precision.FP64, np.float64), (Precision.FP32, np.float32))
    sizes = {p: matmul_n or _matmul_size(dtype, matmul_target_s, clock) for p, dtype in matmuls}
    probe_n = {p: probe_kernels.matmul_probe_n(_matmul_rate(dtype, 256, 2, clock)) for p, dtype in matmuls}
    # Each figure's probe runs right after it, run by run, so each figure/probe ratio is taken under
    # one load; their median is what a probe rate measured later is scaled by.
    first = {p: _paired_matmul(dtype, sizes[p], probe_n[p], matmul_runs, clock) for p, dtype in matmuls}

    copy_bytes = probe_kernels.copy_probe_bytes(array_bytes // LLC_MULTIPLE)
    copy_probe = probe_kernels.kernel(BANDWIDTH, "copy", copy_bytes)
    deadline = start + budget_s
    rates, runs, passes = _stream(array_bytes // 8, deadline=deadline, clock=clock, probe=copy_probe)
    rescale = copy_bytes / (array_bytes // 8 * 8)  # _stream counted the probe as moving its own arrays
    rates.pop("probe")
    runs.pop("probe")

    # Matmul runs again seconds later: a ceiling caught in a moment when the host slowed this VM
    # down would make every later kernel look faster than light, so the better of the two counts.
    peaks: dict[tuple[Precision, Unit], Figure] = {}
    found: dict[str, ProbeReference] = {}
    for precision, dtype in matmuls:
        n = sizes[precision]
        second = _paired_matmul(dtype, n, probe_n[precision], matmul_runs, clock)
        pairs = first[precision] + second
        rate = max(figure for figure, _ in pairs)
        ratio = statistics.median(figure / probe for figure, probe in pairs)
        details[f"matmul_n_{precision}"] = n
        details[f"matmul_flops_{precision}"] = rate
        details[f"matmul_round1_{precision}"] = max(figure for figure, _ in first[precision])
        details[f"matmul_round2_{precision}"] = max(figure for figure, _ in second)
        details[f"probe_ratio_{precision}"] = ratio
        note = f"np.matmul n={n}, best of {2 * matmul_runs} in two rounds"
        peaks[(precision, Unit.VECTOR)] = Figure(rate, Source.MEASURED, note)
        probe_rate = rate / ratio
        found[precision.label] = ProbeReference(
            precision.label, "matmul", probe_n[precision], rate, probe_rate, probe_rate, today
        )

    from .cachelevels import cpu_caches, level_details, measure_level_rates

    details.update(level_details(measure_level_rates(cpu_caches(), clock=clock)))
    best = max(rates, key=lambda name: rates[name])
    ratio = statistics.median(kernels / (probe * rescale) for kernels, probe in passes)
    details[f"probe_ratio_{BANDWIDTH}"] = ratio
    copy_rate = rates[best] / ratio
    found[BANDWIDTH] = ProbeReference(BANDWIDTH, "copy", copy_bytes, rates[best], copy_rate, copy_rate, today)
    details.update({f"bandwidth_{name}": rate for name, rate in rates.items()})
    details.update({f"runs_{name}": count for name, count in runs.items()})
    details["array_bytes"] = array_bytes // 8 * 8
    details["bandwidth_kernel"] = best
    listed = ", ".join(f"{name} {rate / GB:.1f}" for name, rate in rates.items())
    note = f"{best} kernel; all: {listed} GB/s over {_size(array_bytes // 8 * 8)} float64 arrays"
    return Ceilings(
        bandwidth=Figure(rates[best], Source.MEASURED, note), peaks=peaks, details=details, probes=found
    )


def _matmul_size(dtype: type[np.floating[Any]], target_s: float, clock: Clock, probe: int = 512) -> int:
    """The n (a multiple of 64, 256..8192) for which one n×n matmul takes about ``target_s``."""
    rate = _matmul_rate(dtype, probe, 2, clock)  # the first call also wakes BLAS's threads
    n = int((rate * target_s / 2) ** (1 / 3)) // 64 * 64
    return min(max(n, 256), 8192)


def _paired_matmul(
    dtype: type[np.floating[Any]], n: int, probe_n: int, runs: int, clock: Clock
) -> list[tuple[float, float]]:
    """``runs`` pairs of FLOP/s: an n×n matmul, then right after it the probe's ``probe_n`` one."""
    import numpy as np

    def operands(size: int) -> tuple[Any, Any, Any]:
        return (np.full((size, size), 1.0, dtype=dtype), np.full((size, size), 0.5, dtype=dtype),
                np.empty((size, size), dtype=dtype))  # fmt: skip

    big, small = operands(n), operands(probe_n)
    np.matmul(small[0], small[1], out=small[2])  # untimed: the probe's first call pays for its pages
    pairs = []
    for _ in range(runs):
        rates = []
        for (x, y, out), size in ((big, n), (small, probe_n)):
            t0 = clock()
            np.matmul(x, y, out=out)
            rates.append(2.0 * size**3 / _elapsed(t0, clock()))
        pairs.append((rates[0], rates[1]))
    return pairs


def _matmul_rate(dtype: type[np.floating[Any]], n: int, runs: int, clock: Clock) -> float:
    import numpy as np

    x = np.full((n, n), 1.0, dtype=dtype)
    y = np.full((n, n), 0.5, dtype=dtype)
    out = np.empty((n, n), dtype=dtype)
    best = 0.0
    for _ in range(runs):
        t0 = clock()
        np.matmul(x, y, out=out)
        best = max(best, 2.0 * n**3 / _elapsed(t0, clock()))
    return best


def _stream(
    n: int, *, deadline: float, clock: Clock, probe: Callable[[], object] | None = None
) -> tuple[dict[str, float], dict[str, int], list[tuple[float, float]]]:
    """Best bytes/s of each bandwidth kernel over ``n``-element float64 arrays, how often each ran,
    and per pass over the kernels that included the probe, (the pass's best kernel, the probe).

    ``probe``, when given, runs in every pass as one more kernel named ``probe``, its rate counted
    as a 2-array kernel over ``n`` elements (the caller rescales it to the probe's own arrays).
    """
    import numpy as np

    a = np.full(n, 1.0)
    b = np.full(n, 2.0)
    c = np.empty(n)
    np.copyto(c, a)  # first touch of c, untimed: page faults are not bandwidth
    nbytes = n * 8
    scalar = 3.0

    def triad() -> None:
        np.multiply(b, scalar, out=c)
        np.add(c, a, out=c)

    kernels: tuple[tuple[str, int, Callable[[], object]], ...] = (
        ("copy", 2, lambda: np.copyto(c, a)),
        ("scale", 2, lambda: np.multiply(b, scalar, out=c)),
        ("add", 3, lambda: np.add(a, b, out=c)),
        ("triad", 5, triad),
        ("dot", 2, lambda: np.dot(a, b)),
    )
    if probe is not None:
        kernels = (*kernels, ("probe", 2, probe))
    rates: dict[str, float] = {}
    runs: dict[str, int] = {}
    last: dict[str, float] = {}
    passes: list[tuple[float, float]] = []
    this_pass: dict[str, float] = {}

    def run(name: str, arrays: int, kernel: Callable[[], object]) -> None:
        t0 = clock()
        kernel()
        seconds = _elapsed(t0, clock())
        rate = arrays * nbytes / seconds
        rates[name] = max(rates.get(name, 0.0), rate)
        runs[name] = runs.get(name, 0) + 1
        last[name] = seconds
        this_pass[name] = rate

    def end_pass() -> None:
        others = [rate for name, rate in this_pass.items() if name != "probe"]
        if "probe" in this_pass and others:
            passes.append((max(others), this_pass["probe"]))
        this_pass.clear()

    for kernel in kernels:  # every kernel once, whatever the budget
        run(*kernel)
    end_pass()
    more = True
    while more:  # then more passes while the budget allows, the fastest kernels first: they set the figure
        more = False
        for name, arrays, fn in sorted(kernels, key=lambda kernel: -rates[kernel[0]]):
            if runs[name] < MAX_KERNEL_RUNS and clock() + last[name] <= deadline:
                run(name, arrays, fn)
                more = True
        end_pass()
    return rates, runs, passes  # a, b and c are freed here


def _elapsed(t0: float, t1: float) -> float:
    return max(t1 - t0, 1e-9)


# -- a GPU -------------------------------------------------------------------------------------


def calibrate_cuda(
    index: int = 0,
    *,
    force: bool = False,
    reset: bool = False,
    cache_dir: Path | str | None = None,
    measure: Callable[[int], tuple[Figure, Mapping[tuple[Precision, Unit], Figure]]] | None = None,
    l2: Callable[[int], Figure] | None = None,
) -> Calibration:
    """GPU ``index`` with measured ceilings replacing its datasheet (or derived) ones, and its L2's
    roof (what a warm measurement whose bytes the L2 holds is judged against).

    Keyed by what identifies the model, not the slot: name, table key, SM count, L2 size and the
    CuPy version, so identical GPUs share one calibration. ``measure`` replaces
    ``timing.cuda.measure_ceilings``; ``l2`` replaces ``timing.l2.measure_l2_roof`` (by default
    only when ``measure`` is not replaced).
    """
    from ..timing import cuda
    from ..timing.l2 import L2_METHOD, measure_l2_roof
    from .cachelevels import CacheInfo, level_details, levels_of, rates_from_details

    base = cuda.cuda_device(index)
    key: dict[str, object] = {
        "name": base.name,
        "key": base.key,
        "sms": base.cores,
        "llc_bytes": base.llc_bytes,
        "cupy": _cupy_version(),
        "tf32": cuda.tf32_requested(),  # CUPY_TF32 turns the fp32 matmul into a TF32 one
        # how the ceilings are measured: a calibration taken another way (constant 4096² inputs, fp64
        # keyed vector though cuBLAS ran it on tensor cores) is measured again, not reused
        "method": cuda.CEILINGS_METHOD,
        "l2_method": L2_METHOD,
    }
    measure_fn = measure or cuda.measure_ceilings
    l2_fn = l2 if l2 is not None or measure is not None else measure_l2_roof
    l2_cache = (CacheInfo(2, base.llc_bytes, per_core=False),) if base.llc_bytes else ()

    def run() -> Ceilings:
        bandwidth, peaks = measure_fn(index)
        details: dict[str, float | int | str] = {}
        if l2_fn is not None and l2_cache:
            figure = l2_fn(index)
            details.update(level_details({"l2": (figure.value, figure.note)}))
        return Ceilings(bandwidth=bandwidth, peaks=dict(peaks), details=details)

    def build(ceilings: Ceilings) -> Device:
        device = base.with_figures(peaks={**base.peaks, **ceilings.peaks}, bandwidth=ceilings.bandwidth)
        levels = levels_of(l2_cache, rates_from_details(ceilings.details), dram=ceilings.bandwidth.value)
        return dataclasses.replace(
            device, notes=(*base.notes, "ceilings measured on this GPU"), levels=levels
        )

    directory = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    return _calibrate(base.kind, key, directory=directory, force=force, reset=reset, measure=run, build=build)


def _cupy_version() -> str:
    module = sys.modules.get("cupy")  # timing.cuda imported it to find the device
    return str(getattr(module, "__version__", "unknown"))


# -- reporting ---------------------------------------------------------------------------------


def format_calibration(cal: Calibration, *, theoretical: CpuPeak | str | None = None) -> str:
    """A few lines for ``roofline calibrate``: the device, its ceilings, the cache and the time taken.

    Precisions whose peaks are the same figure share a line (the CPU's narrow formats take fp32's).
    A CPU also gets its ``theoretical`` peak, the hard limit of its ceilings: a :class:`CpuPeak`,
    or the reason it is unknown; None (the default) reads this machine's
    (:func:`cpupeak.system_peak`).
    """
    device = cal.device
    facts: list[str] = [device.kind]
    if device.cores:
        facts.append(f"{device.cores} {'cores' if device.kind == 'cpu' else 'SMs'}")
    if device.llc_bytes:
        facts.append(f"{_size(device.llc_bytes)} last-level cache")
    bw = device.bandwidth
    rows = [
        ("device", f"{device.name} [{', '.join(facts)}]"),
        ("bandwidth", f"{bw.value / GB:,.1f} GB/s  {_source(bw)}"),
    ]
    groups: dict[tuple[Figure, Unit, bool], list[Precision]] = {}
    for precision, unit, figure in describe_peaks(device):
        groups.setdefault((figure, unit, precision.integral), []).append(precision)
    for (figure, unit, integer), precisions in groups.items():
        rate = _rate(figure.value, "OPS" if integer else "FLOP/s")
        rows.append((", ".join(p.label for p in precisions), f"{rate} {unit}  {_source(figure)}"))
    for level in device.levels:
        where = "per core" if level.per_core else "shared"
        rows.append(
            (
                f"{level.name} ({_size(level.capacity_bytes)}, {where})",
                f"{level.bandwidth.value / GB:,.1f} GB/s  {_source(level.bandwidth)}",
            )
        )
    if device.kind == "cpu":
        rows.append(("theoretical", _theoretical(theoretical)))
    rows.append(("cache", "not written (see the warning)" if cal.cache_path is None else str(cal.cache_path)))
    how = "read from the cache" if cal.from_cache else "calibrated"
    rows.append(("", f"{how} in {_duration(cal.seconds)}"))
    width = max(len(label) for label, _ in rows if len(label) <= 16)  # a long group just sticks out
    return "\n".join(f"{label:<{width}}  {text}" for label, text in rows)


def _theoretical(peak: CpuPeak | str | None) -> str:
    if peak is None:
        from . import cpupeak

        peak = cpupeak.system_peak()
    if isinstance(peak, str):
        return f"unknown ({peak})"
    return f"{peak.rates()}  ({peak.formula()})"


def _source(figure: Figure) -> str:
    return f"({figure.source}: {figure.note})" if figure.note else f"({figure.source})"


def _rate(value: float, unit: str) -> str:
    if unit == "OPS":
        return f"{value / 1e12:,.1f} TOPS" if value >= 1e12 else f"{value / 1e9:,.1f} GOPS"
    return f"{value / 1e12:,.1f} TFLOP/s" if value >= 1e12 else f"{value / 1e9:,.1f} GFLOP/s"


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


def _size(nbytes: int) -> str:
    if nbytes >= 1 << 30:
        return f"{nbytes / (1 << 30):.1f} GiB"
    return f"{nbytes / MiB:.0f} MiB" if nbytes >= MiB else f"{nbytes / 1024:.0f} KiB"
