"""Frozen statistics over timing samples.

Plain Python (``sorted`` and ``math.fsum``), no numpy: the plugin may be loaded by a session that
never times anything, and the engine recomputes these after every sampling round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidValueError

#: the statistics a verdict can judge by
Stat = Literal["median", "min", "mean"]
STATS: tuple[Stat, ...] = ("median", "min", "mean")

#: two-sided 95% normal quantile used for the confidence interval of the median
Z_95 = 1.96


#: below this many samples even ``[min, max]`` covers the median less than 95% of the time
#: (1 - 2^(1-n)): their interval says less than it seems (:func:`median_ci_ranks`)
MIN_PRECISION_SAMPLES = 6


def median_ci_ranks(n: int) -> tuple[int, int]:
    """1-based ranks ``(lo, hi)`` of the order statistics bounding a distribution-free 95% interval for
    the median: ``lo = ⌊n/2 − 1.96·√n/2⌋``, ``hi = n + 1 − lo``, clamped to ``[1, n]`` (for n < 6,
    ``[min, max]``). Why: docs/verdicts.md ("Budgets and verdicts").
    """
    if n < 1:
        raise InvalidValueError(f"n must be >= 1; got {n}")
    lo = math.floor(n / 2 - Z_95 * math.sqrt(n) / 2)
    hi = n + 1 - lo
    return max(lo, 1), min(hi, n)


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of a set of samples (seconds, or any unit: nothing here assumes one): quartiles by
    :func:`quantile_of_sorted`, the median's 95% interval by :func:`median_ci_ranks`. Relative
    figures (``iqr_rel``, ``ci_rel``) divide by ``|median|``: ``inf`` when it is 0 and the spread is not.
    """

    n: int
    min: float
    max: float
    median: float
    mean: float
    #: sample standard deviation (n − 1 denominator); 0 for a single sample
    stdev: float
    q1: float
    q3: float
    #: interquartile range relative to the median
    iqr_rel: float
    #: half-width of the 95% confidence interval of the median
    ci_half: float
    #: ``ci_half`` relative to the median
    ci_rel: float

    @classmethod
    def from_samples(cls, samples: Iterable[float]) -> Stats:
        """Compute every statistic; raises ``ValueError`` on no samples or a non-finite one."""
        xs = sorted(float(x) for x in samples)
        n = len(xs)
        if n == 0:
            raise ValueError("cannot compute statistics of no samples")
        bad = next((x for x in xs if not math.isfinite(x)), None)
        if bad is not None:
            raise ValueError(f"samples must be finite; got {bad!r}")
        mean = math.fsum(xs) / n
        # two-pass variance: exact enough for timings and no catastrophic cancellation
        stdev = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        median = quantile_of_sorted(xs, 0.5)
        q1, q3 = quantile_of_sorted(xs, 0.25), quantile_of_sorted(xs, 0.75)
        lo, hi = median_ci_ranks(n)
        ci_half = (xs[hi - 1] - xs[lo - 1]) / 2
        return cls(
            n=n,
            min=xs[0],
            max=xs[-1],
            median=median,
            mean=mean,
            stdev=stdev,
            q1=q1,
            q3=q3,
            iqr_rel=_relative(q3 - q1, median),
            ci_half=ci_half,
            ci_rel=_relative(ci_half, median),
        )

    def value(self, stat: Stat) -> float:
        """The statistic a verdict uses: ``"median"``, ``"min"`` or ``"mean"``."""
        if stat not in STATS:
            raise InvalidValueError(f"stat must be one of median, min, mean; got {stat!r}")
        value: float = getattr(self, stat)
        return value


def quantile_of_sorted(xs: Sequence[float], p: float) -> float:
    """The ``p`` quantile of sorted ``xs``: linear interpolation between its order statistics."""
    pos = p * (len(xs) - 1)
    i = math.floor(pos)
    frac = pos - i
    if frac == 0:
        return xs[i]
    return xs[i] + (xs[i + 1] - xs[i]) * frac


def _relative(spread: float, center: float) -> float:
    if center == 0:
        return 0.0 if spread == 0 else math.inf
    return spread / abs(center)
