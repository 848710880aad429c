"""A paired A/B comparison: base and head measured in turns, rounds turned into a verdict.

``--roofline-against REF`` measures them in ABBA blocks, each turn a *round* giving the kernel's
median time per call; this module times nothing, and judges the rounds by :data:`RULES`, tried in
turn. Why the rules are what they are: docs/ci.md ("How the rounds become a verdict").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidValueError

__all__ = [
    "MIN_BLOCKS",
    "MIN_PAIRS",
    "PairVerdict",
    "Pairing",
    "Round",
    "Side",
    "Unpaired",
    "abba",
    "decided",
    "judge_pairs",
]

Side = Literal["base", "head"]
PairVerdict = Literal["slower", "faster", "same", "undecided"]

#: one ABBA block: the sides of its four rounds, in order
BLOCK: tuple[Side, ...] = ("base", "head", "head", "base")
#: whole ABBA blocks before any decision: 6 pairs, so the t interval (t = 2.57 at 5 degrees of
#: freedom) is not mostly the quantile's width, and the A/A floor rests on 6 differences
MIN_BLOCKS = 3
#: pairs free of heavy contention needed to judge a change where some round ran under it
MIN_PAIRS = 2 * MIN_BLOCKS


#: whole blocks before the A/A floor is known (one block's two differences have no spread)
AA_MIN_BLOCKS = 2

#: Student's t quantile at 0.975 for 1..30 degrees of freedom (beyond: a Cornish-Fisher expansion)
_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z_975 = 1.959964


def t_975(df: int) -> float:
    """Student's t quantile at 0.975 for ``df`` >= 1 degrees of freedom (to 3 decimals)."""
    if df <= len(_T_975):
        return _T_975[df - 1]
    z = _Z_975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def abba(rounds: int) -> list[Side]:
    """The order of `rounds` turns: base, head, head, base, base, head, head, base, ... (starts with base)."""
    if rounds < 0:
        raise InvalidValueError(f"rounds must be >= 0; got {rounds}")
    return [BLOCK[i % len(BLOCK)] for i in range(rounds)]


@dataclass(frozen=True, slots=True)
class Round:
    """One turn of one side: its median time per call and the floor it is judged against."""

    side: Side
    #: the round's median time per call (> 0)
    time_s: float
    #: the floor this side's kernel is judged against (its estimate's, > 0): attained = floor_s / time_s
    floor_s: float
    #: the OS saw heavy contention during the round
    heavy: bool = False

    def __post_init__(self) -> None:
        if self.side not in ("base", "head"):
            raise InvalidValueError(f"a round's side must be 'base' or 'head'; got {self.side!r}")
        for name, value in (("time_s", self.time_s), ("floor_s", self.floor_s)):
            if not (math.isfinite(value) and value > 0):
                raise InvalidValueError(f"a round's {name} must be a positive number; got {value!r}")

    @property
    def attained(self) -> float:
        """The fraction of the floor this round attained."""
        return self.floor_s / self.time_s


@dataclass(frozen=True, slots=True)
class Pairing:
    """What the rounds of one A/B comparison say: the ratio of attained, its interval, the verdict."""

    #: head attained / base attained (geometric mean over the pairs); < 1: head is slower
    ratio: float
    #: 95% interval of ratio
    lo: float
    hi: float
    #: paired (base, head) differences used
    pairs: int
    #: the A/A floor, relative: the change identical code showed in this comparison (0.03 = 3%)
    aa_floor: float
    verdict: PairVerdict
    #: one line saying why
    reason: str
    #: the rounds judged, in ABBA order (both sides; the JSON's raw data, for a reader to check)
    rounds: tuple[Round, ...]

    @property
    def base_time_s(self) -> float:
        """The median of the base rounds' times; :attr:`head_time_s` the head's."""
        return statistics.median(r.time_s for r in self.rounds if r.side == "base")

    @property
    def head_time_s(self) -> float:
        return statistics.median(r.time_s for r in self.rounds if r.side == "head")

    @property
    def base_attained(self) -> float:
        """The median attained of the base rounds; :attr:`head_attained` the head's."""
        return statistics.median(r.attained for r in self.rounds if r.side == "base")

    @property
    def head_attained(self) -> float:
        return statistics.median(r.attained for r in self.rounds if r.side == "head")

    @property
    def heavy(self) -> bool:
        """Some round ran under heavy contention."""
        return any(r.heavy for r in self.rounds)

    def describe(self) -> str:
        """For the report column: ``-18% slower (±4%)``, ``+2% same (±1%)``, ``undecided (±9%)``."""
        spread = "no interval"
        if self.lo > 0 and math.isfinite(self.hi):  # the interval's relative half-width
            spread = f"±{_percent(max(self.hi / self.ratio - 1, 1 - self.lo / self.ratio))}%"
        if self.verdict == "undecided":
            return f"undecided ({spread})"
        return f"{_signed_percent(self.ratio - 1)} {self.verdict} ({spread})"

    def to_record(self) -> dict[str, object]:
        """The JSON record's ``vs_base``: every figure, the verdict, and the report's ``summary``."""
        return {
            "verdict": self.verdict, "summary": self.describe(), "reason": self.reason,
            "ratio": self.ratio, "lo": _finite(self.lo), "hi": _finite(self.hi), "pairs": self.pairs,
            "aa_floor": _finite(self.aa_floor), "base_time_s": self.base_time_s,
            "head_time_s": self.head_time_s, "base_attained": self.base_attained,
            "head_attained": self.head_attained, "heavy": self.heavy,
            "rounds": [
                {"side": r.side, "time_s": r.time_s, "heavy": r.heavy}
                for r in self.rounds
            ],
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class Unpaired:
    """A measurement with no counterpart on the other side: ``new`` (the head's alone; ``gone``, the
    base's alone, is said of whole tests) or a base whose round failed."""

    status: Literal["new", "gone"]
    reason: str

    def describe(self) -> str:
        return self.status

    def to_record(self) -> dict[str, object]:
        return {"verdict": self.status, "summary": self.status, "reason": self.reason}


def _finite(x: float) -> float | None:
    """``x``, or None for an infinity (JSON has none)."""
    return x if math.isfinite(x) else None


def _percent(x: float) -> int:
    return round(x * 100)


def _signed_percent(x: float) -> str:
    return f"{_percent(x):+d}%"


def _mean_half(diffs: Sequence[float]) -> tuple[float, float]:
    """The mean of ``diffs`` and its 95% t half-width (inf with fewer than two)."""
    mean = math.fsum(diffs) / len(diffs) if diffs else 0.0
    if len(diffs) < 2:
        return mean, math.inf
    return mean, t_975(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))


#: the median absolute deviation of a normal sample, over its standard deviation
_MAD_PER_SD = 0.6745
#: for n differences (n >= 4, even: two a block), the multiple of ``sd / sqrt(n)`` (sd the MAD's
#: estimate) that the median of n normal differences stays within 95% of the time, as Student's t
#: for the mean (200,000 simulated samples per n; beyond the table, its last entry, a little wide)
_MEDIAN_975 = {4: 6.49, 6: 4.39, 8: 3.67, 10: 3.35, 12: 3.13, 14: 3.02, 16: 2.94, 18: 2.88, 20: 2.81,
               24: 2.76, 28: 2.71, 32: 2.67, 40: 2.61}  # fmt: skip


def _robust_mean_half(diffs: Sequence[float]) -> tuple[float, float]:
    """:func:`_mean_half` from the median and the median absolute deviation, at the same 95%, so
    that one round slowed by a one-off moves neither (why: docs/ci.md)."""
    n = len(diffs)
    if n < min(_MEDIAN_975):
        return _mean_half(diffs)
    centre = statistics.median(diffs)
    sd = statistics.median(abs(d - centre) for d in diffs) / _MAD_PER_SD
    if sd == 0:  # half of them alike (a coarse clock's times): no spread to read from them
        return _mean_half(diffs)
    multiple = _MEDIAN_975[max(k for k in _MEDIAN_975 if k <= n)]
    return centre, multiple * sd / math.sqrt(n)


def _check_order(rounds: Sequence[Round]) -> None:
    if not rounds:
        raise InvalidValueError("a paired comparison needs rounds; got none")
    for i, (r, side) in enumerate(zip(rounds, abba(len(rounds)), strict=True)):
        if r.side != side:
            raise InvalidValueError(f"round {i} must be {side} in ABBA order; got {r.side!r}")
    if len(rounds) < 2:
        raise InvalidValueError(f"a paired comparison needs both sides; got only {rounds[0].side!r}")


def _block_starts(rounds: Sequence[Round]) -> range:
    """Where each whole ABBA block ``(b1, h1, h2, b2)`` of ``rounds`` starts."""
    return range(0, len(rounds) - 3, 4)


def pair_differences(rounds: Sequence[Round], *, clean: bool = True) -> list[float]:
    """The A/B differences ``log(head attained / base attained)`` of each whole block's two pairs;
    ``clean``: but those with a round under heavy contention."""
    return [math.log(rounds[i + h].attained / rounds[i + b].attained)
            for i in _block_starts(rounds) for b, h in ((0, 1), (3, 2))
            if not (clean and (rounds[i + b].heavy or rounds[i + h].heavy))]  # fmt: skip


def aa_differences(rounds: Sequence[Round]) -> list[float]:
    """The A/A differences ``log(h1/h2)`` and ``log(b2/b1)`` of attained in each whole block."""
    scores = [r.attained for r in rounds]
    return [math.log(scores[i + x] / scores[i + y]) for i in _block_starts(rounds)
            for x, y in ((1, 2), (3, 0))]  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the rules read: the log ratio, its interval's half-width, the A/A floor in log, the load."""

    log_ratio: float
    half: float
    log_floor: float
    heavy: int
    rounds: int
    threshold: float
    #: the pairs judged, and those left out (a round under heavy contention)
    pairs: int = 0
    left_out: int = 0


def _floor_text(f: _Facts) -> str:
    if math.isinf(f.log_floor):
        return "the A/A floor is not known yet"
    return f"identical code changed up to {_percent(math.expm1(f.log_floor))}% (A/A floor)"


def _change_text(f: _Facts) -> str:
    lo, hi = math.expm1(f.log_ratio - f.half), math.expm1(f.log_ratio + f.half)
    interval = "no interval" if math.isinf(f.half) else f"95% {_signed_percent(lo)}..{_signed_percent(hi)}"
    return f"{_signed_percent(math.expm1(f.log_ratio))} ({interval})"


def _rule_change(f: _Facts, sign: int, verdict: PairVerdict) -> tuple[PairVerdict, str] | None:
    """``verdict`` (slower or faster: ``sign`` -1 a drop, +1 a gain) when its change is beyond
    interval, threshold, floor and load."""
    if not (sign * f.log_ratio - f.half > 0 and sign * (math.exp(f.log_ratio) - 1) > f.threshold):
        return None
    word = "drop" if sign < 0 else "gain"
    if abs(f.log_ratio) <= f.log_floor:
        return "undecided", f"a {_change_text(f)} {word}, within what identical code showed: {_floor_text(f)}"
    beyond = f"beyond the {_percent(f.threshold)}% threshold"
    return verdict, f"{_change_text(f)}, {beyond}; {_floor_text(f)}{_load_text(f)}"


def _load_text(f: _Facts) -> str:
    """How the load entered the verdict: nothing on a quiet machine."""
    if not f.heavy:
        return ""
    return (
        f"; {f.heavy} of {f.rounds} rounds ran under heavy contention: their {f.left_out} pairs left out,"
        f" {f.pairs} judged"
    )


def _rule_load(f: _Facts) -> tuple[PairVerdict, str] | None:
    """Too few pairs ran free of heavy contention to judge anything."""
    if not f.heavy or f.pairs >= MIN_PAIRS:
        return None
    return "undecided", (
        f"{f.heavy} of {f.rounds} rounds ran under heavy contention, which confirms nothing: {f.pairs}"
        f" pairs ran free of it (at least {MIN_PAIRS} judge)"
    )


def _rule_same(f: _Facts) -> tuple[PairVerdict, str] | None:
    band = math.log1p(f.threshold)
    if abs(f.log_ratio) + f.half <= band:
        return "same", f"{_change_text(f)}, inside ±{_percent(f.threshold)}%"
    return None


#: the rules, tried in turn; the first that answers gives the verdict
RULES: tuple[Callable[[_Facts], tuple[PairVerdict, str] | None], ...] = (
    _rule_load,
    lambda f: _rule_change(f, -1, "slower"),
    lambda f: _rule_change(f, +1, "faster"),
    _rule_same,
)


def judge_pairs(rounds: Sequence[Round], *, threshold: float) -> Pairing:
    """The verdict of ``rounds`` taken in :func:`abba` order.

    threshold: the least relative drop (or gain) that counts, e.g. 0.10 (--roofline-regression).
    A trailing partial block counts in the medians only: its one order alone would not cancel a drift.
    """
    if not (math.isfinite(threshold) and 0 < threshold < 1):
        raise InvalidValueError(f"threshold must be between 0 and 1; got {threshold!r}")
    _check_order(rounds)
    clean, every = pair_differences(rounds), pair_differences(rounds, clean=False)
    # too few pairs free of heavy contention judge nothing (:func:`_rule_load`); the ratio then
    # says what every pair showed
    diffs = clean if len(clean) >= MIN_PAIRS or len(clean) == len(every) else every
    mean, half = _mean_half(diffs)
    log_floor = math.inf
    if len(rounds) // 4 >= AA_MIN_BLOCKS:
        aa_mean, aa_half = _robust_mean_half(aa_differences(rounds))
        log_floor = abs(aa_mean) + aa_half
    heavy = sum(r.heavy for r in rounds)
    facts = _Facts(
        mean, half, log_floor, heavy, len(rounds), threshold, pairs=len(clean),
        left_out=len(every) - len(clean),
    )  # fmt: skip
    verdict: PairVerdict = "undecided"
    reason = f"{_change_text(facts)}: neither beyond ±{_percent(threshold)}% nor surely inside it"
    for rule in RULES:
        answer = rule(facts)
        if answer is not None:
            verdict, reason = answer
            break
    return Pairing(
        ratio=math.exp(mean),
        lo=math.exp(mean - half),
        hi=math.exp(mean + half),
        pairs=len(diffs),
        aa_floor=math.expm1(log_floor),
        verdict=verdict,
        reason=reason,
        rounds=tuple(rounds),
    )


def decided(rounds: Sequence[Round], *, threshold: float) -> bool:
    """Whether enough rounds have been taken: at least :data:`MIN_BLOCKS` whole ABBA blocks and a
    verdict other than ``undecided``. The caller also stops on its time budget."""
    if len(rounds) // 4 < MIN_BLOCKS:
        return False
    return judge_pairs(rounds, threshold=threshold).verdict != "undecided"
