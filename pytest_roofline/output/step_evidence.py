"""The measurements of JSON reports as ``roofline llm --from`` reads them. No pytest here.

Each report is read as ``roofline compare`` reads one (:func:`.store.read_run`: every fault a
one-line :class:`.BaselineError`). A measurement's fraction is taken on the step's roofs: a warm
test judged against a cache level's bandwidth has its fraction scaled to DRAM's, as the step's floor
is, so that its time, not the cache's roof, carries into the step.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from ..model.core import Device
from ..model.devices import table
from ..model.llm import LlmError
from ..model.step_prediction import Evidence
from ..model.verdict import Verdict
from .comparison import disturbed, interval_rel
from .records import DeviceRecord, MeasurementRecord, machine_of
from .store import read_run


@dataclass(frozen=True, slots=True)
class Reports:
    """What the reports hold of use to a step on one device."""

    evidence: tuple[Evidence, ...]
    #: the reports' measured records, all of them (on any device)
    measured: int
    #: the whole steps they measured on the device (tests of ``op="llm"``)
    steps: tuple[MeasurementRecord, ...] = ()


def read_reports(paths: Sequence[str], device: Device, *, across_devices: bool) -> Reports:
    """Every measurement of the reports at ``paths`` usable for ``device``. A report measured only on
    other devices is an LlmError unless ``across_devices``; one that also measured on ``device``
    gives that device's measurements alone (a warning says how many it left out)."""
    here = machine_of(device.key, device.name)
    evidence: list[Evidence] = []
    steps: list[MeasurementRecord] = []
    measured = 0
    for path in paths:
        run = read_run(path, "--from")
        records = [r for r in run.records if isinstance(r, MeasurementRecord) and _timed(r)]
        measured += len(records)
        own = [r for r in records if r.machine == here]
        others = [r for r in records if r.machine != here]
        if others and not across_devices:
            if not own:
                names = sorted({r.device_name or r.device for r in others})
                raise LlmError(
                    f"--from {path}: measured on {', '.join(names)}, not on {device.name} ({device.key}); "
                    "--across-devices uses it anyway"
                )
            warnings.warn(
                f"--from {path}: {len(others)} measurement(s) on other devices left out "
                "(--across-devices uses them)",
                stacklevel=1,
            )
            records = own
        evidence += [_evidence(r, run.devices, device, own=r.machine == here) for r in records]
        steps += [r for r in own if r.op == "llm"]
    return Reports(tuple(evidence), measured, tuple(steps))


def _timed(record: MeasurementRecord) -> bool:
    """A measurement that says how fast its op ran: timed, and not faster than light (a wrong count)."""
    usable = record.verdict is not Verdict.FASTER_THAN_LIGHT
    return usable and record.attained is not None and math.isfinite(record.attained) and record.attained > 0


def _evidence(
    record: MeasurementRecord, devices: Sequence[DeviceRecord], device: Device, *, own: bool
) -> Evidence:
    return Evidence(
        test=record.test, op=record.op, dtype=record.dtype, params=dict(record.params),
        flops=record.flops, bytes=record.bytes,
        fraction=step_fraction(record, devices, device if own else table().get(record.device)),
        ci_rel=interval_rel(record), own_device=own, disturbed=disturbed(record),
    )  # fmt: skip


def step_fraction(record: MeasurementRecord, devices: Sequence[DeviceRecord], device: Device | None) -> float:
    """``record``'s fraction on the step's roofs: the floor the step gives its op and shape on ``device``
    over its time at the machine's calibrated speed (:func:`calibrated_time_s`); where the op cannot be
    estimated again, its attained fraction, a warm one's scaled to DRAM's roof. Why: docs/llm.md
    ("Predicting the step from the suite")."""
    from ..model.estimate import estimate

    if device is not None and record.time_s and record.time_s > 0:
        try:
            floor_s = estimate(record.op, dtype=record.dtype, device=device, **dict(record.params)).floor_s
        except (ValueError, TypeError):  # the op or its params are not the table's
            floor_s = 0.0
        if floor_s > 0:
            return floor_s / calibrated_time_s(record)
    attained = float(record.attained or 0.0)
    level_floor = max(record.compute_s or 0.0, record.memory_s)
    if record.memory_level == "dram" or record.bytes <= 0 or level_floor <= 0:
        return attained
    judged = next((d for d in devices if d.key == record.device and d.figures == record.device_figures), None)
    if judged is not None and judged.bandwidth > 0:
        dram = judged.bandwidth
    elif device is not None:
        dram = device.bandwidth.value
    else:
        return attained
    return attained * max(record.compute_s or 0.0, record.bytes / dram) / level_floor


def calibrated_time_s(record: MeasurementRecord) -> float:
    """``record``'s time at the machine's calibrated speed: times its probe's ``speed``; as timed with no
    probe beside it or when latency-bound (docs/llm.md, "Predicting the step from the suite")."""
    speed = record.ceiling.speed if record.ceiling is not None and not record.latency_bound else 0.0
    return record.time_s * speed if speed > 0 and math.isfinite(speed) else record.time_s
