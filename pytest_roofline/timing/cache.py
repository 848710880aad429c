"""Where a measurement's bytes come from: cold (DRAM, the floor's assumption) or warm, and how.

A **cold** measurement (the default) keeps every timed call's data out of the cache, by the first
of these that applies:

1. ``past-cache``: the op moves at least :data:`~.flushing.NO_FLUSH_MULTIPLE` x the last-level
   cache, so it evicts its own data (:func:`~.flushing.choose_flush`);
2. ``rotation``: each call takes the next of several copies of its arrays (:mod:`.rotation`), so a
   batch of short calls is still cold;
3. ``flush``: a pass over twice the cache before every call, one call per sample; for a kernel whose
   arrays cannot be rotated (a closure, ``setup=``, a strided view, too little memory), and said so.

A **warm** measurement (``cache="warm"``, ``--roofline-cache=warm``) neither flushes nor rotates;
its bytes are served by the smallest cache level that holds them, whose bandwidth it is judged
against (:meth:`~pytest_roofline.model.core.Device.level_for`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_roofline.timing.base import Kernel, Policy
from pytest_roofline.timing.flushing import choose_flush
from pytest_roofline.timing.rotation import NoRotation, Rotation, plan_rotation

from ..errors import InvalidValueError

CACHE_STATES = ("cold", "warm")


def check_cache_state(value: object) -> str:
    """``cold`` or ``warm``, or a ValueError naming ``cache`` and the value."""
    if value not in CACHE_STATES:
        from pytest_roofline.model.core import did_you_mean

        hint = did_you_mean(value, CACHE_STATES) if isinstance(value, str) else ""
        raise InvalidValueError(f"cache must be 'cold' or 'warm'; got {value!r}{hint}")
    return str(value)


@dataclass(frozen=True, slots=True)
class CachePlan:
    """How one measurement keeps its cache: the policy's flush fields and the copies to rotate."""

    state: str
    #: the policy with ``flush``, ``flush_note``, ``past_cache`` and ``rewarm`` set for this plan
    policy: Policy
    rotation: Rotation | None = None
    #: why a cold measurement flushes instead of rotating ("" when it does not flush)
    no_rotation: str = ""


def plan_cache(
    state: str,
    policy: Policy,
    *,
    op_bytes: float,
    llc_bytes: int | None,
    fn: Kernel,
    args: Sequence[object],
    kwargs: Mapping[str, object] | None,
    setup: Callable[[], object] | None,
    free_bytes: Callable[[bool], int | None] | None = None,
    clock: Callable[[], float] | None = None,
    asked: str = "cache='warm'",
) -> CachePlan:
    """The plan for measuring ``fn(*args, **kwargs)`` ``state`` (``cold`` or ``warm``); rotation's
    copies are made here, before the measurement's clock starts. ``asked`` says who asked for a warm
    measurement (``flush=False``, ``--roofline-cache=warm``), as its note will."""
    if check_cache_state(state) == "warm":
        warm = dataclasses.replace(
            policy, flush=False, flush_note=f"warm on request ({asked})", past_cache=False, rewarm=True
        )
        return CachePlan("warm", warm)
    choice = choose_flush(op_bytes, llc_bytes, requested=True)
    if choice.past_cache:
        past = dataclasses.replace(policy, flush=False, flush_note=choice.note, past_cache=True, rewarm=False)
        return CachePlan("cold", past)
    if setup is not None:
        planned: Rotation | NoRotation = NoRotation("setup= makes each call's arguments")
    else:
        planned = plan_rotation(
            fn, args, kwargs, op_bytes=op_bytes, llc_bytes=llc_bytes, free_bytes=free_bytes, clock=clock
        )
    why = f"not rotated: {planned.reason}" if isinstance(planned, NoRotation) else ""
    cold = dataclasses.replace(policy, flush=True, flush_note=why, past_cache=False, rewarm=False)
    if isinstance(planned, NoRotation):
        return CachePlan("cold", cold, no_rotation=planned.reason)
    return CachePlan("cold", cold, rotation=planned)
