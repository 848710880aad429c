"""Every timer of one kernel in alternating rounds, so that a drift of the machine's speed cancels.

:data:`ROUNDS` rounds, each timer running 1/ROUNDS of its budget in each, in an order shuffled
afresh each round (seeded by the kernel's name). Why: docs/cli.md ("roofline selfcheck").
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Sequence

from ...errors import InvalidValueError
from ...model.policy import Policy
from ...model.stats import Stats
from .compare import CaseResult, Timing

#: rounds per kernel: the median's 95% interval leaves out the two most extreme rounds at each end
#: (docs/cli.md, "roofline selfcheck")
ROUNDS = 15

#: one round of one timer: a short measurement, its samples' statistics (seconds per call)
RoundTimer = Callable[[], Stats]


def share_count(total: int, rounds: int) -> int:
    """One round's part of ``total`` calls, repeats or pairs: at least one."""
    return max(1, math.ceil(total / rounds))


def round_policy(policy: Policy, rounds: int) -> Policy:
    """The engine's ``policy`` with its time (budget, warm-up, least sampling span) split over
    ``rounds``: a round's measurement."""
    return dataclasses.replace(
        policy,
        max_time_s=policy.max_time_s / rounds,
        warmup_s=policy.warmup_s / rounds,
        min_time_s=policy.min_time_s / rounds,
    )


def interleave(case: str, timers: Sequence[tuple[str, RoundTimer]], rounds: int = ROUNDS) -> CaseResult:
    """Run ``timers`` in ``rounds`` rounds, each in a freshly shuffled order; every timer's rounds,
    index by index the same rounds. A timer that raises is kept with its error and no rounds."""
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise InvalidValueError(f"rounds must be an integer >= 1; got {rounds!r}")
    order = random.Random(case)
    figures: dict[str, list[Stats]] = {name: [] for name, _ in timers}
    errors: dict[str, str] = {}
    for _ in range(rounds):
        shuffled = list(timers)
        order.shuffle(shuffled)
        for name, timer in shuffled:
            if name in errors:
                continue
            try:
                figures[name].append(timer())
            except Exception as exc:  # one timer's failure (graph capture refused, say) is shown, not fatal
                errors[name] = f"{type(exc).__name__}: {exc}"
    return CaseResult(
        case,
        tuple(
            Timing(name, (), errors[name]) if name in errors else Timing(name, tuple(figures[name]))
            for name, _ in timers
        ),
    )
