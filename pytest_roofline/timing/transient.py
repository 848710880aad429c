"""Whether a measurement's samples began before the kernel settled: the start of the series is
slower (:func:`slower_start`), and the engine leaves that first half out. Why the samples are asked,
not a fixed warm-up: docs/measurement.md ("The phases of one measurement"), docs/methodology.md
("Why a slow start is cut, and why at 5%").
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_roofline.model.stats import median_ci_ranks, quantile_of_sorted

#: the fewest samples in each half for a comparison: below six, a median's 95% interval is [min, max]
MIN_HALF = 6
#: the least gap between the halves' medians worth a cut, whatever the precision asked for: less is
#: drift (docs/methodology.md, "Why a slow start is cut, and why at 5%")
MIN_SHIFT = 0.05
#: a cut reaches no later than this into the sampling: a slower stretch later is the machine's drift
SETTLE_WITHIN_S = 0.25


def slower_start(samples: Sequence[float], *, min_shift: float = MIN_SHIFT) -> bool:
    """Whether the first half of ``samples`` ran slower than the second, beyond doubt: the halves'
    medians' 95% intervals apart, the first above, and the medians at least ``min_shift`` of the
    second's apart."""
    half = len(samples) // 2
    if half < MIN_HALF:
        return False
    first, second = sorted(samples[:half]), sorted(samples[half:])
    lo, _ = median_ci_ranks(len(first))
    _, hi = median_ci_ranks(len(second))
    later = quantile_of_sorted(second, 0.5)
    return first[lo - 1] > second[hi - 1] and quantile_of_sorted(first, 0.5) - later >= min_shift * later
