"""Where a measurement's bytes come from: cold (DRAM, the floor's assumption) by ``past-cache``,
``rotation`` or ``flush``, the first that applies, or warm, served by the smallest cache level that
holds them. The method is decided once, here, and carried as :attr:`CachePlan.method`, which the
rest only reads. Each method and when it applies: docs/cache.md ("Cold (the default)", "Warm").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_roofline.model.keywords import CACHE_STATES
from pytest_roofline.model.measurement import ColdMethod
from pytest_roofline.timing.base import Kernel
from pytest_roofline.timing.flushing import choose_flush
from pytest_roofline.timing.rotation import NoRotation, Rotation, plan_rotation

from ..errors import InvalidValueError


def check_cache_state(value: object) -> str:
    """``cold`` or ``warm``, or a ValueError naming ``cache`` and the value."""
    if value not in CACHE_STATES:
        from pytest_roofline.model.core import did_you_mean

        hint = did_you_mean(value, CACHE_STATES) if isinstance(value, str) else ""
        raise InvalidValueError(f"cache must be 'cold' or 'warm'; got {value!r}{hint}")
    return str(value)


@dataclass(frozen=True, slots=True)
class CachePlan:
    """How one measurement keeps its cache: warm, or cold by one method, with the copies to rotate."""

    #: how every timed call finds its data out of the cache; None: a warm measurement
    method: ColdMethod | None
    #: why, in words the report shows ("not rotated: a closure", "no flush needed: the op moves 3.0x
    #: the last-level cache", "warm on request")
    note: str = ""
    rotation: Rotation | None = None

    def __post_init__(self) -> None:
        if (self.method == "rotation") != (self.rotation is not None):
            raise InvalidValueError(f"a {self.method or 'warm'} plan with rotation={self.rotation!r}")

    @property
    def state(self) -> str:
        """``cold`` or ``warm``."""
        return "warm" if self.method is None else "cold"

    @property
    def flush(self) -> bool:
        """A flush before every call (one call per sample)."""
        return self.method == "flush"

    @property
    def rewarm(self) -> bool:
        """A probe streamed through the cache: call the kernel once after it. Only a warm measurement
        has anything to warm again (an op past the cache evicts its own data)."""
        return self.method is None

    @property
    def made_s(self) -> float:
        """Seconds the plan took to make (rotation's copies): paid from the measurement's budget."""
        return self.rotation.made_s if self.rotation is not None else 0.0

    def release(self) -> None:
        """Drop what the plan holds for its measurement (rotation's copies)."""
        if self.rotation is not None:
            self.rotation.release()


#: what :func:`~.engine.measure` does without a plan: a flush before every call
FLUSHED = CachePlan("flush")
#: neither a flush nor copies: the kernel's data stays where its last call left it
WARM = CachePlan(None)


def plan_cache(
    state: str,
    *,
    op_bytes: float,
    llc_bytes: int | None,
    fn: Kernel,
    args: Sequence[object],
    kwargs: Mapping[str, object] | None,
    setup: Callable[[], object] | None,
    budget_s: float | None = None,
    free_bytes: Callable[[bool], int | None] | None = None,
    clock: Callable[[], float] | None = None,
    asked: str = "cache='warm'",
    paired: bool = False,
) -> CachePlan:
    """The plan for measuring ``fn(*args, **kwargs)`` ``state`` (``cold`` or ``warm``, checked at the
    edge: :func:`check_cache_state`); rotation's copies are made here, before the measurement's clock
    starts, within ``budget_s`` (the measurement's time budget: :data:`~.rotation.MAX_COPY_SHARE` of
    it at most). ``asked`` says who asked for a warm measurement (``cache='warm'``,
    ``--roofline-cache=warm``), as its note will. ``paired``: one side of an A/B comparison on the
    host (``--roofline-against``): the kernel runs on copies only, in the pool both sides share
    (:class:`~.copies.SharedPool`), an op past the cache too (two copies) where they fit."""
    if state == "warm":
        return CachePlan(None, f"warm on request ({asked})")
    choice = choose_flush(op_bytes, llc_bytes)
    if choice.past_cache and not paired:
        return CachePlan("past-cache", choice.note)
    planned = plan_rotation(
        fn, args, kwargs, op_bytes=op_bytes, llc_bytes=llc_bytes, free_bytes=free_bytes, clock=clock,
        budget_s=budget_s, setup=setup, own_set=not paired,
    )  # fmt: skip
    if isinstance(planned, NoRotation) and choice.past_cache:
        return CachePlan("past-cache", choice.note)
    if isinstance(planned, NoRotation):
        return CachePlan("flush", f"not rotated: {planned.reason}")
    return CachePlan("rotation", rotation=planned)
