"""``roofline selfcheck``: does the engine's timer agree with the other timers on this machine?

Timed by :mod:`.gpu_check` or :mod:`.cpu_check`, judged by :mod:`.compare`; no CuPy, PyTorch, Triton or
NumPy is imported until a check runs. docs/cli.md ("roofline selfcheck: can the numbers be trusted here?").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InvalidValueError
from .compare import Report

if TYPE_CHECKING:
    from .gpu_check import GpuCase

__all__ = ["selfcheck"]


def selfcheck(
    device: str = "auto",
    *,
    json_path: str | None = None,
    fake: bool = False,
    progress: Callable[[str], None] | None = None,
    gpu_cases: Sequence[GpuCase] | None = None,
    ncu: bool | None = None,
) -> tuple[str, int]:
    """Run the self-check on ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``); return what to print
    and the exit status. ``json_path``: also write the report there, whole or not at all (checked
    before anything runs). ``gpu_cases``: the kernels a GPU check times (default:
    :data:`.gpu_check.CASES`). ``ncu``: time a GPU's kernels again with Nsight Compute (the second
    clock, :mod:`.ncu_clock`): True requires ``ncu`` on the PATH, None runs it where it is there, False
    never (nor with ``fake``). A bad argument is an :class:`InvalidValueError`, naming it."""
    if json_path is not None:
        from ..files import problem

        reason = problem(json_path)
        if reason is not None:
            raise InvalidValueError(f"--json {json_path}: cannot write it: {reason}")
    ncu_path = _ncu(ncu, fake)
    report = (
        _fake_report(device, progress, gpu_cases)
        if fake
        else _report(device, progress, gpu_cases, ncu_path, wanted_ncu=ncu is True)
    )
    if json_path is not None:
        _write_json(json_path, report)
    return report.text(), report.verdict.status


def _ncu(wanted: bool | None, fake: bool) -> str | None:
    """Nsight Compute's path where the second clock runs, else None."""
    if wanted is False:
        return None
    if fake:
        if wanted:
            raise InvalidValueError("--ncu: the fakes of --fake have no ncu to run; leave --ncu out")
        return None
    from .ncu_clock import find_ncu

    path = find_ncu()
    if path is None and wanted:
        raise InvalidValueError(
            "--ncu: ncu (Nsight Compute) is not on the PATH; add its folder, or leave --ncu out"
        )
    return path


def _report(
    device: str,
    progress: Callable[[str], None] | None,
    gpu_cases: Sequence[GpuCase] | None,
    ncu: str | None = None,
    wanted_ncu: bool = False,
) -> Report:
    from ..detect import parse_target

    target = parse_target(device)
    if target.kind == "cpu":
        from .cpu_check import run_cpu

        if wanted_ncu:  # _ncu found it, or refused to go on
            raise InvalidValueError(
                f"--ncu: Nsight Compute times GPU kernels; --device {device} checks this CPU"
            )
        return run_cpu(progress=progress)
    if target.index is None:  # a table device with no hardware here
        raise InvalidValueError(
            f"--device {device}: the self-check times this machine's hardware (auto, cpu, cuda, cuda:N); "
            f"{device!r} is a table entry with no GPU of its kind here"
        )
    from .gpu_run import run_gpu

    return run_gpu(target.index, gpu_cases, progress=progress, ncu=ncu)


def _fake_report(
    device: str, progress: Callable[[str], None] | None, gpu_cases: Sequence[GpuCase] | None
) -> Report:
    from ..detect import CUDA_SPEC
    from .fake import faked
    from .gpu_run import run_gpu

    spec = device.strip().lower()
    match = CUDA_SPEC.fullmatch(spec)
    if spec != "auto" and match is None:
        raise InvalidValueError(
            "--fake runs the GPU self-check on the test suite's fakes: --device auto, cuda or cuda:N;"
            f" got {device!r}"
        )
    index = int(match["index"] or 0) if match is not None else 0
    with faked(index) as (extra, scratch):
        report = run_gpu(index, gpu_cases, extra=extra, progress=progress, calibration_dir=scratch)
    note = (
        "--fake: the test suite's fake CuPy, cupyx, CUPTI, torch.cuda.Event and do_bench;"
        " no figure means anything"
    )
    details = {**report.details, "fake": True}
    return dataclasses.replace(report, header=(note, *report.header), details=details)


def _write_json(path: str, report: Report) -> None:
    import json

    from ..files import write

    data = json.dumps(report.to_json(), indent=2, default=str).encode()
    try:
        write(Path(path).expanduser(), data)
    except OSError as exc:  # exit status 2, as the check up front: 1 says a timer disagreed
        raise InvalidValueError(f"--json {path}: cannot write it: {exc.strerror or exc}") from None
