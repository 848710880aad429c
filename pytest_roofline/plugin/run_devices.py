"""Which device and which timer a spec means, for one run: the device hooks first, then detection,
refined by a peaks file; each spec resolved once, a backend made once per spec and device, the CPU
calibrated on first use. A pytest-xdist worker on ``auto`` or ``cuda`` takes GPU i mod n (its one GPU
when spread: :mod:`.gpus`), one worker at a time measuring on a device (:mod:`.devicelock`):
docs/gpu.md ("Several GPUs: one per worker"), docs/options.md ("pytest-xdist and reruns").
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from .options import PEAK_SOURCES, SessionSettings

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..machine.detect import Target
    from ..machine.devicelock import DeviceLocks
    from ..model.core import Device, Figure
    from ..output.records import DeviceRecord
    from ..timing.base import Backend


class Devices:
    """The run's devices and timer backends, resolved on first use and kept."""

    def __init__(
        self,
        config: pytest.Config,
        settings: SessionSettings,
        *,
        notes: list[str],
        device_records: dict[str, DeviceRecord],
    ) -> None:
        self.config = config
        self.settings = settings
        #: the session's: warnings raised while resolving (calibration), and every device record
        self.notes = notes
        self.device_records = device_records
        workerinput: Mapping[str, Any] | None = getattr(config, "workerinput", None)
        #: pytest-xdist's worker id (gw0, ...) and run id, None outside a worker
        self._worker_id: str | None = workerinput.get("workerid") if workerinput else None
        self._run_id: str | None = workerinput.get("testrunuid") if workerinput else None
        from .gpus import WORKER_GPU

        #: the controller's index of the one GPU this worker sees (:mod:`.gpus`), None when not spread
        self._worker_gpu: int | None = workerinput.get(WORKER_GPU) if workerinput else None
        self._locks: DeviceLocks | None = None
        self._lock_keys: dict[str, str] = {}
        self._session_spec: str | None = None
        self._devices: dict[str, Device] = {}
        self._backends: dict[str, Backend] = {}
        self._cpu_backend: Backend | None = None
        #: whether this run judges against the CPU ceilings calibrate.py measured (and so may pair
        #: them with probes timed beside each kernel)
        self.measured_cpu = False

    def check_session_device(self) -> None:
        """A ``--roofline-device`` other than ``auto`` and ``cpu`` (always there) that is not there is
        a usage error naming it: resolved now, through the device hooks, after the register hooks."""
        settings = self.settings
        spec = settings.device
        if settings.mode == "off" or spec.lower() in ("auto", "cpu"):
            return
        try:
            self.device(self.session_spec())  # a pytest-xdist worker's own GPU
        except (ValueError, RuntimeError) as exc:
            where = settings.origins.get("device", "--roofline-device")
            raise pytest.UsageError(
                f"{where} {spec}: {exc}; use auto or cpu, or --roofline-mode off to run kernels untimed"
            ) from None

    def device(self, spec: str) -> Device:
        """The device that judges measurements made with ``spec``: the hooks first, then detection; a
        ``--roofline-peaks`` file overrides its figures."""
        if spec not in self._devices:
            # calibration's warnings (a corrupt cache replaced) go to the summary, not to fail the test
            # under filterwarnings=error; calibrating measures too, so it holds the device's lock
            with self.measuring(spec), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                from .hookcalls import first_result, is_device

                hook = self.config.hook.pytest_roofline_device
                device = first_result(hook, is_device, config=self.config, spec=spec)
            self.notes.extend(f"{w.category.__name__}: {w.message}" for w in caught)
            peaks = self.settings.peaks
            if peaks not in PEAK_SOURCES:
                from ..model.devices import DeviceError
                from ..model.peaks import load_peaks_file

                base, device = device, load_peaks_file(peaks, base=device)
                if device.kind != base.kind:
                    raise DeviceError(
                        f"{self.settings.origins.get('peaks', '--roofline-peaks')} {peaks}: its kind "
                        f"{device.kind!r} does not match the device it "
                        f"refines, {base.name!r} ({base.kind}); give kind {base.kind!r} or leave it out"
                    )
            from ..output.records import DeviceRecord

            self._devices[spec] = device
            record = DeviceRecord.of(device)
            self.device_records.setdefault(record.version, record)
        return self._devices[spec]

    def with_cache_levels(self, spec: str) -> Device:
        """The device of ``spec`` with the roofs of its cache levels, for a warm measurement: a
        measured CPU's come with its calibration; a GPU of this machine measures its L2's now (once,
        then cached), whatever its peaks' source."""
        device = self.device(spec)
        gpu = local_gpu(spec) if device.kind != "cpu" else None
        if device.levels or gpu is None:
            return device
        with self.measuring(spec), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from ..machine.calibrate import cuda_l2_roof, gpu_l2_levels

            levels = gpu_l2_levels(device, cuda_l2_roof(gpu, measure=self._l2_roof))
        self.notes.extend(f"{w.category.__name__}: {w.message}" for w in caught)
        self._devices[spec] = device = dataclasses.replace(device, levels=levels)
        from ..output.records import DeviceRecord

        record = DeviceRecord.of(device)
        self.device_records[record.version] = record  # the same figures, now with the levels
        return device

    def session_spec(self) -> str:
        """The run's device spec as this process measures with it: under pytest-xdist, worker
        ``gw<i>`` of a run on ``auto`` or ``cuda`` takes GPU i mod n (:func:`.detect.worker_device_spec`)."""
        if self._session_spec is None:
            from ..machine.detect import worker_device_spec

            def cuda_count() -> int:
                from ..timing.cuda.loading import device_count

                return device_count()

            self._session_spec = worker_device_spec(self.settings.device, self._worker_id, cuda_count)
        return self._session_spec

    def measuring(self, spec: str) -> AbstractContextManager[bool]:
        """Hold the lock of the device ``spec`` measures on, this process's lock first: one thread of
        this process times it, and under pytest-xdist one worker at a time (never a test's own code)."""
        from ..timing.engine import measuring_alone

        if self._run_id is None:
            return measuring_alone()
        if self._locks is None:
            from ..machine.devicelock import DeviceLocks

            self._locks = DeviceLocks(self._run_id, note=self.notes.append)
        if spec not in self._lock_keys:  # by the controller's index: workers that see one GPU all call it 0
            self._lock_keys[spec] = lock_key(spec, self.gpu_index(spec))
        return measuring_alone(self._locks.hold(self._lock_keys[spec]))

    def gpu_index(self, spec: str) -> int | None:
        """The index of the GPU ``spec`` measures on, as the run numbers its GPUs (a spread worker's
        one GPU by the controller's index); None for the CPU and for a device only a hook knows."""
        index = local_gpu(spec)
        return self._worker_gpu if index == 0 and self._worker_gpu is not None else index

    def builtin_device(self, spec: str) -> Device:
        target = target_of(spec)
        if target.kind == "cpu":
            from ..machine.calibrate import cpu_device

            self.measured_cpu = True
            return cpu_device()
        from ..machine.detect import require_local

        require_local(target)
        index = target.index or 0
        if self.settings.peaks == "measured":  # a visible GPU, or the table entry of one
            from ..machine.calibrate import calibrate_cuda
            from ..timing.cuda.measured_ceilings import measure_ceilings

            # calibration's matmuls are held as the kernels are
            measure = functools.partial(measure_ceilings, block=self.settings.cuda_block)
            return calibrate_cuda(index, measure=measure, l2=self._l2_roof).device
        if target.kind == "table":
            from ..model.devices import lookup

            return lookup(target.spec)
        from ..timing.cuda.device import cuda_device

        return cuda_device(index)

    def _l2_roof(self, index: int) -> Figure:
        """GPU ``index``'s L2 roof, measured with the session's blocking setting."""
        from ..timing.l2 import measure_l2_roof

        return measure_l2_roof(index, block=self.settings.cuda_block)

    def backend(self, spec: str, device: Device) -> Backend:
        key = f"{spec}|{device.key}"
        if key not in self._backends:
            from .hookcalls import first_result, is_backend

            hook = self.config.hook.pytest_roofline_backend
            # the session's trylast implementation always answers
            self._backends[key] = first_result(hook, is_backend, config=self.config, device=device, spec=spec)
        return self._backends[key]

    def builtin_backend(self, spec: str, device: Device) -> Backend:
        """The host timer for the CPU, CUDA events for a GPU: chosen by where ``spec`` measures,
        not by the device's figures (a peaks file may describe any device)."""
        target = target_of(spec)
        if target.kind == "cpu":
            if self._cpu_backend is None:  # one per session: its flush buffer is 2x the LLC
                self._cpu_backend = cpu_backend_for(device)
            return self._cpu_backend
        from ..timing.cuda.backend import CudaBackend

        # the flush exceeds the device's last-level cache where the driver reports only its L2
        return CudaBackend(target.index or 0, llc_bytes=device.llc_bytes, block=self.settings.cuda_block)


def cpu_backend_for(device: Device) -> Backend:
    """The host timer, its flush sized by the last-level cache ``device`` says this process sees (a
    CPU calibrated with the capacity sweep: on a VM, a tenth of what sysfs says); sysfs's otherwise."""
    from ..timing.cpu import CpuBackend, last_level_cache_bytes

    llc = device.llc_bytes if device.kind == "cpu" else None
    return CpuBackend(llc_bytes=(lambda: llc) if llc else last_level_cache_bytes)


def target_of(spec: str) -> Target:
    """Where measurements made with ``spec`` run (``auto`` is what it means on this machine)."""
    from ..machine.detect import auto_spec, parse_target

    return parse_target(auto_spec() if spec == "auto" else spec)


def local_gpu(spec: str) -> int | None:
    """The index of the GPU of this machine ``spec`` measures on, None for the CPU or a device only
    a hook or the table knows."""
    from ..model.devices import DeviceError

    try:
        target = target_of(spec)
    except DeviceError:
        return None
    return target.index if target.kind != "cpu" and target.local else None


def lock_key(spec: str, gpu: int | None) -> str:
    """What ``spec`` measures on, as a device lock's name: ``cuda<gpu>`` (``gpu`` as the run numbers
    its GPUs), ``cpu``, or the spec itself."""
    from ..model.devices import DeviceError

    if gpu is not None:
        return f"cuda{gpu}"
    try:
        target = target_of(spec)
    except DeviceError:  # a device only a plugin's hook knows
        return spec.strip().lower()
    return "cpu" if target.kind == "cpu" else target.spec


def names_a_table_device(spec: str) -> bool:
    keyword = spec.strip().lower()
    from ..machine.detect import CUDA_SPEC

    return keyword not in ("auto", "cpu") and not CUDA_SPEC.fullmatch(keyword)


def device_skip_reason(spec: str, *, why: str = "") -> str:
    """Why a marker's device is not on this machine ("" when it is); ValueError for a wrong spec.
    ``why`` says what asked for it (default: ``device=SPEC``)."""
    from ..machine.detect import CUDA_SPEC

    cuda = CUDA_SPEC.fullmatch(spec.strip().lower())
    if cuda:
        from ..timing.cuda.loading import device_count

        index, count = int(cuda["index"] or 0), device_count()
        if index < count:
            return ""
        why = why or f"device={spec!r}"
        return f"needs CUDA device {index} ({why}); {count} visible here (CuPy missing or no GPU)"
    from ..machine.detect import parse_target

    target = parse_target(spec)  # an unknown name is a mistake, not a missing device
    if target.local:
        return ""
    return f"needs {spec!r} (device={spec!r}): a table device that is not on this machine"
