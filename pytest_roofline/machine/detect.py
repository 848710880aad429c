"""Which device a spec means: ``auto`` (the first GPU CuPy sees, else this CPU), ``cpu`` (this CPU,
measured), ``cuda`` (GPU 0) or ``cuda:N`` (visible), a table key or a driver's name; keywords in any case.

:func:`parse_target` never calibrates, and imports CuPy only when the spec asks which GPUs are there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..model.core import Device, did_you_mean
from ..model.devices import DeviceError, find_device, lookup, table

__all__ = [
    "Target",
    "auto_spec",
    "detect_device",
    "get_device",
    "parse_target",
    "require_local",
    "target_device",
    "worker_device_spec",
]

TargetKind = Literal["cpu", "cuda", "table"]

_KEYWORDS = ("auto", "cpu", "cuda")
#: ``cuda`` or ``cuda:N``
CUDA_SPEC = re.compile(r"cuda(?::(?P<index>\d+))?")
#: pytest-xdist's worker ids: gw0, gw1, ...
_WORKER_ID = re.compile(r"gw(?P<index>\d+)")


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed device spec: what it names and whether this machine has it."""

    #: the spec as given (keywords lower-cased, whitespace stripped)
    spec: str
    #: "cpu" (this CPU), "cuda" (a visible GPU) or "table" (a device from the table)
    kind: TargetKind
    #: the CUDA index measurements run on: ``cuda:N``'s N, or the visible GPU a table entry names
    index: int | None
    #: whether this machine has the hardware, so it can be measured and not only estimated
    local: bool


def parse_target(spec: str) -> Target:
    """Check a device spec and say what it names; a DeviceError with the choices when it is wrong."""
    if not isinstance(spec, str):
        raise DeviceError(f"a device spec is a string such as 'auto', 'cpu' or 'cuda:0'; got {spec!r}")
    text = spec.strip()
    keyword = text.lower()
    if keyword == "auto":
        resolved = parse_target(auto_spec())
        return Target(spec="auto", kind=resolved.kind, index=resolved.index, local=True)
    if keyword == "cpu":
        return Target(spec="cpu", kind="cpu", index=None, local=True)
    match = CUDA_SPEC.fullmatch(keyword)
    if match:
        index = int(match["index"] or 0)
        count = _cuda_count()
        if index >= count:
            visible = f"{count} visible" if count else "0 visible: CuPy is not installed or sees no GPU"
            raise DeviceError(f"{keyword}: no such CUDA device ({visible})")
        return Target(spec=keyword, kind="cuda", index=index, local=True)
    device = find_device(text)
    if device is not None:
        local_index = _local_index(device)
        return Target(spec=text, kind="table", index=local_index, local=local_index is not None)
    if keyword.startswith("cuda"):
        raise DeviceError(f"bad CUDA device {text!r}: expected cuda or cuda:N, N a GPU index (0, 1, ...)")
    keys = sorted(table())
    raise DeviceError(
        f"unknown device {text!r}{did_you_mean(text, [*_KEYWORDS, *keys])}; expected auto, cpu, cuda, "
        f"cuda:N or a table key ({', '.join(keys)}; run `roofline devices`)"
    )


def auto_spec() -> str:
    """What ``auto`` means on this machine: ``"cuda:0"`` when CuPy sees a GPU, else ``"cpu"``."""
    return "cuda:0" if _cuda_count() > 0 else "cpu"


def worker_device_spec(spec: str, worker_id: str | None, cuda_count: Callable[[], int]) -> str:
    """The spec pytest-xdist worker ``worker_id`` (``gw<i>``) measures with when the run's is ``spec``:
    ``auto`` and ``cuda`` become ``cuda:<i mod n>`` where ``cuda_count()`` (called only then) sees n
    GPUs; any other spec, or no worker (``worker_id`` None), is kept."""
    worker = _WORKER_ID.fullmatch(worker_id or "")
    if worker is None or spec.strip().lower() not in ("auto", "cuda"):
        return spec
    count = cuda_count()
    return f"cuda:{int(worker['index']) % count}" if count > 0 else spec


def require_local(target: Target) -> Target:
    """``target`` when this machine has its hardware; a DeviceError for a table-only device."""
    if not target.local:
        raise DeviceError(
            f"device {target.spec!r} is a table entry with no local hardware: it can be used for "
            "estimates, not measurements; run with --roofline-device auto|cpu|cuda[:N]"
        )
    return target


def target_device(target: Target) -> Device:
    """The Device a parsed target names: the measured CPU, a visible GPU, or the table's entry."""
    if target.kind == "cpu":
        from . import calibrate

        return calibrate.cpu_device()
    if target.kind == "cuda":
        from ..timing.cuda.device import cuda_device

        return cuda_device(target.index or 0)
    return lookup(target.spec)


def detect_device(spec: str = "auto") -> Device:
    """The device ``spec`` names (see the module docstring); ``auto`` prefers the first GPU."""
    return target_device(parse_target(spec))


def get_device(name_or_key: str) -> Device:
    """A table device by key or driver name; ``"cpu"`` is this machine's measured CPU."""
    if isinstance(name_or_key, str) and name_or_key.strip().lower() == "cpu":
        from . import calibrate

        return calibrate.cpu_device()
    return lookup(name_or_key)


def _cuda_count() -> int:
    from ..timing.cuda.loading import device_count

    return device_count()


def _local_index(device: Device) -> int | None:
    """The first visible GPU that is ``device`` (same table key), or None."""
    if device.kind == "cpu":
        return None
    from ..timing.cuda.device import cuda_device

    for index in range(_cuda_count()):
        try:
            if cuda_device(index).key == device.key:
                return index
        except (DeviceError, RuntimeError):  # a GPU the table cannot describe is not this one
            continue
    return None
