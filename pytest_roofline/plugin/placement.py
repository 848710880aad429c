"""Which device a kernel is timed on: the device its arrays live on, under ``--roofline-device auto``.

A named device is kept, but never to time a device the kernel's arrays do not run on. The rules,
and what each record's ``device_from`` says: docs/gpu.md ("Several GPUs: one per worker", "A
kernel's device follows its arguments").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import InvalidValueError

if TYPE_CHECKING:
    from ..timing.arrays import Placement

__all__ = ["place"]


def place(
    placement: Placement | None,
    *,
    keyword: str | None,
    setting: str,
    origin: str,
    session_spec: Callable[[], str],
) -> tuple[str, str]:
    """The device spec a kernel whose arrays lie as ``placement`` says is timed with, and what chose
    it: ``arguments``, ``session``, ``option`` or ``keyword`` (``keyword``: the marker's or the call's
    ``device=``; ``setting``: ``--roofline-device`` as given, from ``origin``). ``session_spec()``: the
    session's device as this process measures with it (a pytest-xdist worker's own GPU). With
    ``placement`` None (an estimate): ``keyword``, else the session's device. An InvalidValueError
    names a kernel whose arrays live on a device other than the one named.
    """
    if placement is None:
        return (keyword, "keyword") if keyword is not None else (session_spec(), "session")
    if keyword is not None:
        check_arrays_on(keyword, placement, named_by=f"device={keyword!r}")
        return keyword, "keyword"
    if setting.strip().lower() != "auto":
        spec = session_spec()
        check_arrays_on(spec, placement, named_by=f"{origin} {setting}")
        return spec, "option"
    return _follow(placement, session_spec)


def _follow(placement: Placement, session_spec: Callable[[], str]) -> tuple[str, str]:
    """``auto``: the GPU the arrays live on, else the host when they live there, else the session's."""
    from .run_devices import target_of

    known = sorted(i for i in placement.gpus if i is not None)
    if len(known) > 1:
        on = " and ".join(f"GPU {i} ({placement.gpus[i]})" for i in known)
        raise InvalidValueError(
            f"the kernel's arrays live on {on}: one measurement times one GPU; give the marker or the"
            f" call device='cuda:N' to say which"
        )
    session = session_spec()
    if placement.gpus:
        target = target_of(session)
        on_gpu = target.kind != "cpu" and target.index is not None
        if not known:  # a GPU that did not say which (__cuda_array_interface__ alone): the session's
            return (session, "arguments") if on_gpu else ("cuda", "arguments")
        if on_gpu and target.index == known[0]:
            return session, "arguments"
        return f"cuda:{known[0]}", "arguments"
    if placement.host:
        return (session, "arguments") if target_of(session).kind == "cpu" else ("cpu", "arguments")
    return session, "session"


def check_arrays_on(spec: str, placement: Placement, *, named_by: str) -> None:
    """An InvalidValueError when the kernel's arrays live on a GPU and ``spec`` would time it on this
    CPU, or on another GPU than every one of them."""
    from ..model.devices import DeviceError
    from .run_devices import target_of

    if not placement.gpus:
        return
    try:
        target = target_of(spec)
    except DeviceError:  # a device only a plugin's hook knows, or one not here (said where it is resolved)
        return
    index, where = next(iter(placement.gpus.items()))
    on = f"GPU {index}" if index is not None else "a GPU"
    if target.kind == "cpu":
        raise InvalidValueError(
            f"the kernel's arrays live on {on} ({where}), but {named_by} times it on this CPU: a host"
            " timer sees only the kernel's launches, not its work on the GPU; measure it on its GPU"
            f" (--roofline-device auto, or device='cuda:{index or 0}')"
        )
    known = {i for i in placement.gpus if i is not None}
    if target.index is None or not known or target.index in known:
        return
    index = min(known)
    raise InvalidValueError(
        f"the kernel's arrays live on GPU {index} ({placement.gpus[index]}), but {named_by} times"
        f" GPU {target.index}: its CUDA events would time nothing of a kernel that runs on GPU"
        f" {index}; make the arrays on GPU {target.index}, or give this measurement"
        f" device='cuda:{index}'"
    )
