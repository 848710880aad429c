"""The paired A/B comparison on hand-made rounds: the ABBA order, the pairs and A/A differences, the
verdicts (slower, same, contention, the A/A floor), and a drifting fake machine on which interleaved
rounds stay right where two sequential passes raise false alarms. No real time anywhere."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence

import pytest

from pytest_roofline.errors import InvalidValueError
from pytest_roofline.model.pairing import (
    MIN_BLOCKS,
    MIN_PAIRS,
    Pairing,
    Round,
    Side,
    aa_differences,
    abba,
    decided,
    judge_pairs,
    pair_differences,
)

FLOOR = 1e-3
BASE_S = 1e-3


def rounds_on(clock: Callable[[int], float], *, slow: float, blocks: int) -> list[Round]:
    """ABBA rounds of a head ``slow`` times the base's time, each round's time scaled by ``clock(i)``."""
    time = {"base": BASE_S, "head": BASE_S * slow}
    return [Round(side, time[side] * clock(i), FLOOR) for i, side in enumerate(abba(4 * blocks))]


def noisy(seed: int, sd: float = 0.02) -> Callable[[int], float]:
    """A quiet machine: each round's time off by a seeded log-normal factor of ``sd``."""
    rng = random.Random(seed)
    return lambda i: math.exp(rng.gauss(0.0, sd))


def test_abba_order() -> None:
    assert abba(0) == []
    assert abba(3) == ["base", "head", "head"]
    assert abba(8) == ["base", "head", "head", "base"] * 2
    with pytest.raises(InvalidValueError, match="-1"):
        abba(-1)


def test_pairs_and_aa_differences_by_hand() -> None:
    # one floor: the differences are ratios of times; b1 h1 h2 b2 = 1.0 2.0 4.0 8.0 ms
    times = [1.0, 2.0, 4.0, 8.0, 1.0, 1.0, 1.0, 1.0]
    rounds = [Round(s, t * 1e-3, FLOOR) for s, t in zip(abba(8), times, strict=True)]
    assert pair_differences(rounds) == pytest.approx([math.log(1.0 / 2.0), math.log(8.0 / 4.0), 0.0, 0.0])
    # A/A: log(h1/h2) and log(b2/b1) of attained, that is of time h2/h1 and b1/b2
    assert aa_differences(rounds) == pytest.approx([math.log(4.0 / 2.0), math.log(1.0 / 8.0), 0.0, 0.0])
    # a trailing partial block gives no pair
    assert len(pair_differences([*rounds, Round("base", 1e-3, FLOOR)])) == 4


def test_equal_floors_reduce_to_time_ratios() -> None:
    rounds = [Round(s, t, 2e-3) for s, t in zip(abba(12), [2.0, 2.5, 2.5, 2.0] * 3, strict=True)]
    p = judge_pairs(rounds, threshold=0.10)
    assert p.ratio == pytest.approx(2.0 / 2.5)
    assert (p.lo, p.hi) == pytest.approx((0.8, 0.8))
    assert (p.base_time_s, p.head_time_s) == (2.0, 2.5)
    assert (p.base_attained, p.head_attained) == pytest.approx((1e-3, 0.8e-3))
    assert (p.pairs, p.aa_floor) == (6, 0.0)
    assert p.verdict == "slower"


def test_different_floors_compare_attained_not_times() -> None:
    # the head does twice the work (its floor doubled) in 1.6x the time: its attained rose by 1.25
    sides = abba(12)
    rounds = [Round(s, 1.6e-3 if s == "head" else 1e-3, 2e-3 if s == "head" else 1e-3) for s in sides]
    p = judge_pairs(rounds, threshold=0.10)
    assert p.ratio == pytest.approx(1.25)
    assert p.verdict == "faster"
    assert (p.base_attained, p.head_attained) == pytest.approx((1.0, 1.25))


def test_slower_head_is_slower() -> None:
    p = judge_pairs(rounds_on(noisy(1), slow=1.2, blocks=4), threshold=0.10)
    assert p.verdict == "slower"
    assert p.ratio == pytest.approx(1 / 1.2, rel=0.02)
    assert p.lo < p.ratio < p.hi < 1
    assert p.pairs == 8
    assert 0 < p.aa_floor < 0.10
    assert "threshold" in p.reason
    assert p.describe().endswith("slower (±2%)")


def test_identical_code_is_never_slower() -> None:
    verdicts = [
        judge_pairs(rounds_on(noisy(seed), slow=1.0, blocks=4), threshold=0.10).verdict for seed in range(50)
    ]
    assert "slower" not in verdicts
    assert verdicts.count("same") >= 45


def test_small_change_within_threshold_is_same() -> None:
    p = judge_pairs(rounds_on(noisy(2), slow=1.02, blocks=4), threshold=0.10)
    assert p.verdict == "same"
    assert 1 / 1.1 <= p.lo <= p.hi <= 1.1
    assert "inside ±10%" in p.reason


def test_a_pair_with_a_contended_round_is_left_out_and_the_rest_judge() -> None:
    rounds = rounds_on(noisy(3), slow=1.5, blocks=4)
    rounds[5] = Round("head", rounds[5].time_s, FLOOR, heavy=True)
    p = judge_pairs(rounds, threshold=0.10)
    assert p.verdict == "slower"
    assert p.pairs == 7
    assert p.heavy
    assert "1 of 16 rounds ran under heavy contention: their 1 pairs left out, 7 judged" in p.reason


def test_contention_on_one_side_only_never_makes_slower() -> None:
    # identical code; every head round contended and 1.5x slow for it: no pair is free of the load
    rounds = [
        Round(r.side, r.time_s * 1.5, FLOOR, heavy=True) if r.side == "head" else r
        for r in rounds_on(noisy(5), slow=1.0, blocks=6)
    ]
    p = judge_pairs(rounds, threshold=0.10)
    assert p.verdict == "undecided"
    assert p.ratio == pytest.approx(1 / 1.5, rel=0.03)  # what the pairs showed, not judged
    assert "12 of 24 rounds ran under heavy contention, which confirms nothing: 0 pairs" in p.reason


def test_heavy_contention_throughout_is_undecided_never_slower() -> None:
    # a neighbour loading every round: however clear the drop, nothing free of the load confirms it
    rounds = [Round(r.side, r.time_s, FLOOR, heavy=True) for r in rounds_on(noisy(6), slow=1.5, blocks=5)]
    p = judge_pairs(rounds, threshold=0.10)
    assert p.verdict == "undecided"
    assert f"(at least {MIN_PAIRS} judge)" in p.reason


def test_few_pairs_free_of_contention_withhold_the_verdict() -> None:
    rounds = rounds_on(noisy(3), slow=1.5, blocks=4)
    for i in (1, 5, 9, 13, 14):  # five pairs with a contended round: three are left
        rounds[i] = Round("head", rounds[i].time_s, FLOOR, heavy=True)
    p = judge_pairs(rounds, threshold=0.10)
    assert p.verdict == "undecided"
    assert "3 pairs ran free of it" in p.reason


def test_change_within_aa_floor_is_undecided() -> None:
    # a machine that runs 20% slower in the second half of each block: the head's two rounds (and the
    # base's) differ by 20% every block, while the pairs themselves see a clean 15% drop
    step = noisy(4, sd=0.005)

    def clock(i: int) -> float:
        return step(i) * (1.2 if i % 4 >= 2 else 1.0)

    p = judge_pairs(rounds_on(clock, slow=1 / 0.85, blocks=MIN_BLOCKS), threshold=0.10)
    assert p.ratio == pytest.approx(0.85, rel=0.01)
    assert p.hi < 0.9
    assert p.aa_floor > 0.2
    assert p.verdict == "undecided"
    assert "A/A floor" in p.reason
    assert f"identical code changed up to {round(p.aa_floor * 100)}%" in p.reason


def test_one_round_slowed_alone_does_not_raise_the_aa_floor_over_a_clear_drop() -> None:
    # a head 1.2x slower, and one base round of 7 blocks slowed 2x by a one-off: the drop stands,
    # where a t half-width of the A/A differences read a floor of 18% (``undecided``)
    rounds = rounds_on(noisy(6, sd=0.02), slow=1.2, blocks=7)
    rounds[4] = Round("base", rounds[4].time_s * 2, FLOOR)
    p = judge_pairs(rounds, threshold=0.10)
    assert p.aa_floor < 0.05
    assert p.verdict == "slower"


@pytest.mark.parametrize("n", [4, 6, 14])
def test_the_aa_floor_from_the_median_holds_identical_code_95_percent_of_the_time(n: int) -> None:
    from pytest_roofline.model.pairing import _robust_mean_half

    rng = random.Random(n)
    trials = 4000
    held = 0
    for _ in range(trials):
        centre, half = _robust_mean_half([rng.gauss(0.0, 0.05) for _ in range(n)])
        held += abs(centre) <= half
    assert 0.93 <= held / trials <= 0.97


def test_aa_floor_unknown_before_two_blocks() -> None:
    p = judge_pairs(rounds_on(noisy(5), slow=1.5, blocks=1), threshold=0.10)
    assert math.isinf(p.aa_floor)
    assert p.verdict == "undecided"
    assert "not known" in p.reason


def drifting(seed: int, rounds: int) -> Callable[[int], float]:
    """A shared machine's speed as a multiplier of each round's time: a slow wander of ±15% (a sine
    whose period is 1-2 runs, at a random phase), bursts in 3% of rounds (x1.1-1.5, unseen by the OS)
    and 2% log-normal noise per round. Called once per round index, in order."""
    rng = random.Random(seed)
    phase, period = rng.uniform(0, 2 * math.pi), rng.uniform(1.0, 2.0) * rounds

    def clock(i: int) -> float:
        burst = rng.uniform(1.1, 1.5) if rng.random() < 0.03 else 1.0
        return math.exp(0.15 * math.sin(2 * math.pi * i / period + phase) + rng.gauss(0.0, 0.02)) * burst

    return clock


def sequential_alarm(times: Sequence[float], sides: Sequence[Side], threshold: float) -> bool:
    """A saved-baseline gate's judgement: the head pass's median attained below 1 - threshold of the
    base pass's."""
    base = statistics.median(t for t, s in zip(times, sides, strict=True) if s == "base")
    head = statistics.median(t for t, s in zip(times, sides, strict=True) if s == "head")
    return base / head < 1 - threshold


def test_interleaved_rounds_beat_sequential_passes_on_a_drifting_machine() -> None:
    """Why ``--roofline-against`` interleaves at the level of a round, not of a whole run.

    200 seeded simulations of 6 ABBA blocks (24 rounds) on the :func:`drifting` machine, identical code on
    both sides. Two sequential passes (12 base rounds, then 12 head rounds, their medians compared at a
    10% threshold) raise a false alarm in 63 of 200 (31%): the wander between the passes is the alarm.
    The same rounds taken in ABBA order and judged by ``judge_pairs`` are never ``slower`` (0 of 200;
    168 are ``same``). A head 1.2x slower on the same machine is caught in 198 of 200.
    """
    blocks, sims = 6, 200
    n = 4 * blocks
    sequential = ["base"] * (n // 2) + ["head"] * (n // 2)
    seq_alarms = abba_alarms = same = caught = 0
    for seed in range(sims):
        clock = drifting(seed, n)
        times = [BASE_S * clock(i) for i in range(n)]
        seq_alarms += sequential_alarm(times, sequential, 0.10)
        replayed = [Round(side, t, FLOOR) for side, t in zip(abba(n), times, strict=True)]
        p = judge_pairs(replayed, threshold=0.10)
        abba_alarms += p.verdict == "slower"
        same += p.verdict == "same"
        slow = judge_pairs(rounds_on(drifting(seed, n), slow=1.2, blocks=blocks), threshold=0.10)
        caught += slow.verdict == "slower"
    assert seq_alarms > 0.2 * sims
    assert abba_alarms <= 1
    assert same > 0.7 * sims
    assert caught >= 0.9 * sims


def test_decided_needs_min_blocks_and_a_verdict() -> None:
    rounds = rounds_on(noisy(6), slow=1.2, blocks=MIN_BLOCKS)
    assert judge_pairs(rounds[:-4], threshold=0.10).verdict == "slower"
    assert not decided(rounds[:-4], threshold=0.10)
    assert not decided(rounds[:-1], threshold=0.10)
    assert decided(rounds, threshold=0.10)
    halfway = rounds_on(noisy(7, sd=0.2), slow=1.05, blocks=MIN_BLOCKS)
    assert judge_pairs(halfway, threshold=0.10).verdict == "undecided"
    assert not decided(halfway, threshold=0.10)


def pairing(verdict: str, ratio: float, lo: float, hi: float) -> Pairing:
    rounds = (Round("base", 1.0, 1.0), Round("head", 1.0, 1.0))
    return Pairing(ratio, lo, hi, 8, 0.02, verdict, "", rounds)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("p", "text"),
    [
        (pairing("slower", 0.82, 0.79, 0.85), "-18% slower (±4%)"),
        (pairing("same", 1.02, 1.01, 1.03), "+2% same (±1%)"),
        (pairing("faster", 1.3, 1.25, 1.35), "+30% faster (±4%)"),
        (pairing("same", 0.998, 0.99, 1.006), "+0% same (±1%)"),
        (pairing("undecided", 0.95, 0.87, 1.04), "undecided (±9%)"),
        (pairing("undecided", 1.0, 0.0, math.inf), "undecided (no interval)"),
    ],
)
def test_describe(p: Pairing, text: str) -> None:
    assert p.describe() == text


@pytest.mark.parametrize(
    ("rounds", "message"),
    [
        ([], "needs rounds"),
        ([Round("base", 1e-3, FLOOR)], "needs both sides"),
        ([Round("head", 1e-3, FLOOR), Round("base", 1e-3, FLOOR)], "round 0 must be base"),
    ],
)
def test_bad_rounds(rounds: list[Round], message: str) -> None:
    with pytest.raises(InvalidValueError, match=message):
        judge_pairs(rounds, threshold=0.10)


@pytest.mark.parametrize(("time_s", "floor_s"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (math.nan, 1.0)])
def test_bad_round_values(time_s: float, floor_s: float) -> None:
    with pytest.raises(InvalidValueError, match="must be a positive number; got"):
        Round("base", time_s, floor_s)


def test_bad_threshold() -> None:
    with pytest.raises(InvalidValueError, match="threshold must be between 0 and 1; got 0"):
        judge_pairs(rounds_on(noisy(8), slow=1.0, blocks=1), threshold=0)


# -- the JSON's raw data ---------------------------------------------------------------------------


def test_the_json_keeps_every_round_judged() -> None:
    rounds = rounds_on(noisy(3, 0.01), slow=1.0, blocks=3)
    kept = judge_pairs(rounds, threshold=0.10).to_record()["rounds"]
    assert isinstance(kept, list)
    said = [(r["side"], r["time_s"], r["heavy"]) for r in kept]
    assert said == [(r.side, r.time_s, r.heavy) for r in rounds]
