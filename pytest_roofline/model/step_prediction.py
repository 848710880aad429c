"""A step's time predicted from measurements of its ops: each op of the step matched to the suite's
measurements of its kind (:func:`match_op`), its floor divided by the fraction of the floor they
attained (:func:`predict`). docs/llm.md says why the rule is what it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: how a row's fraction was found: its own shape measured, the nearest shape, two shapes either side
#: of it, or none of its kind (the fraction assumed)
How = Literal["exact", "nearest", "interpolated", "assumed"]
#: the fraction of its floor an op with no measurement of its kind is taken to attain: the plugin's
#: default budget (``--roofline-min-fraction``), the fraction a suite asks of a kernel it has not tuned
ASSUMED_FRACTION = 0.5
#: two byte or FLOP counts this close are one count written twice (a float's rounding, not a shape)
SAME = 1e-9


@dataclass(frozen=True, slots=True)
class Evidence:
    """One measurement of a report, as a prediction reads it."""

    #: the test's node id, with ``[name]`` for a test that measures several
    test: str
    op: str
    dtype: str
    params: Mapping[str, Any]
    flops: float
    bytes: float
    #: the time the op's floor on the step's roofs (DRAM for its bytes) takes, over its measured time
    fraction: float
    #: the relative half-width of the fraction's 95% interval (multiplicative: lo = f/(1+ci))
    ci_rel: float
    #: measured on the device the step is predicted for (another's is used only when none is)
    own_device: bool = True
    #: the machine's load could have slowed it (:func:`~..output.comparison.disturbed`): the
    #: prediction says so where it uses it
    disturbed: bool = False

    @property
    def fraction_lo(self) -> float:
        return self.fraction / (1 + self.ci_rel)

    @property
    def fraction_hi(self) -> float:
        return self.fraction * (1 + self.ci_rel)


@dataclass(frozen=True, slots=True)
class Match:
    """The fraction of its floor one op of the step is predicted to attain, and what says so."""

    how: How
    #: the tests whose measurements gave it (none when assumed)
    tests: tuple[str, ...]
    fraction: float
    fraction_lo: float
    fraction_hi: float

    @property
    def measured(self) -> bool:
        return self.how != "assumed"


@dataclass(frozen=True, slots=True)
class RowPrediction:
    """One op of the step: its floor (one call) and count, and its match."""

    floor_s: float
    count: int
    match: Match

    @property
    def predicted_s(self) -> float:
        """The op's time in the step: its floor over its fraction, times its count."""
        return self.floor_s * self.count / self.match.fraction

    @property
    def predicted_lo_s(self) -> float:
        return self.floor_s * self.count / self.match.fraction_hi

    @property
    def predicted_hi_s(self) -> float:
        return self.floor_s * self.count / self.match.fraction_lo


@dataclass(frozen=True, slots=True)
class StepPrediction:
    rows: tuple[RowPrediction, ...]

    @property
    def total_s(self) -> float:
        return sum(r.predicted_s for r in self.rows)

    @property
    def lo_s(self) -> float:
        """The rows' low ends summed: as if every row's error went the same way (conservative)."""
        return sum(r.predicted_lo_s for r in self.rows)

    @property
    def hi_s(self) -> float:
        return sum(r.predicted_hi_s for r in self.rows)

    @property
    def measured_share(self) -> float:
        """The share of the predicted step that measurements back (the rest is assumed)."""
        measured = sum(r.predicted_s for r in self.rows if r.match.measured)
        return measured / self.total_s if self.total_s > 0 else 0.0

    @property
    def largest(self) -> int:
        """The index of the row that takes the most of the predicted step."""
        return max(range(len(self.rows)), key=lambda i: self.rows[i].predicted_s)


def match_op(
    op: str,
    dtype: str,
    params: Mapping[str, Any],
    flops: float,
    nbytes: float,
    evidence: Sequence[Evidence],
) -> Match | None:
    """The fraction an op of the step attains, from ``evidence`` of the same op and dtype (the step's
    device's own when it has any, else another's), matched exact, interpolated or nearest (by
    :func:`distance`) as docs/llm.md ("Predicting the step from the suite") says; None when there is
    none of its kind.
    """
    kind = [e for e in evidence if e.op == op and e.dtype == dtype]
    kind = [e for e in kind if e.own_device] or kind
    exact = [
        e
        for e in kind
        if dict(e.params) == dict(params) or (_same(e.bytes, nbytes) and _same(e.flops, flops))
    ]
    if exact:
        best = min(exact, key=lambda e: (e.ci_rel, e.test))
        return Match("exact", (best.test,), best.fraction, best.fraction_lo, best.fraction_hi)
    sized = [e for e in kind if e.bytes > 0]
    if nbytes <= 0 or not sized:  # no bytes axis to place it on
        return None

    def far(e: Evidence) -> tuple[float, float, str]:
        return (distance(e.bytes, e.flops, nbytes, flops), e.ci_rel, e.test)

    # its bytes measured at another intensity: nothing to interpolate across, the nearest decides
    measured_at_its_bytes = any(_same(e.bytes, nbytes) for e in sized)
    below = [e for e in sized if e.bytes < nbytes]
    above = [e for e in sized if e.bytes > nbytes]
    if below and above and not measured_at_its_bytes:
        low, high = min(below, key=far), min(above, key=far)
        t = math.log(nbytes / low.bytes) / math.log(high.bytes / low.bytes)
        return Match(
            "interpolated",
            (low.test, high.test),
            _between(low.fraction, high.fraction, t),
            _between(low.fraction_lo, high.fraction_lo, t),
            _between(low.fraction_hi, high.fraction_hi, t),
        )
    near = min(sized, key=far)
    return Match("nearest", (near.test,), near.fraction, near.fraction_lo, near.fraction_hi)


def distance(bytes_m: float, flops_m: float, bytes_row: float, flops_row: float) -> float:
    """How far a measured shape is from the row's in what sets efficiency: |ln(bytes_m/bytes_row)| +
    |ln(I_m/I_row)| with I = FLOPs/bytes (the intensity term left out when either has no FLOPs)."""
    far = abs(math.log(bytes_m / bytes_row))
    if flops_m > 0 and flops_row > 0:
        far += abs(math.log((flops_m / bytes_m) / (flops_row / bytes_row)))
    return far


def predict(rows: Sequence[tuple[float, int, Match | None]], assume: float) -> StepPrediction:
    """Each row's (floor of one call, count, match) predicted; a row with no match at ``assume``, with
    no interval of its own."""
    assumed = Match("assumed", (), assume, assume, assume)
    return StepPrediction(
        tuple(RowPrediction(floor_s, count, match or assumed) for floor_s, count, match in rows)
    )


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=SAME, abs_tol=0.0) if a or b else True


def _between(a: float, b: float, t: float) -> float:
    return a + (b - a) * t
