"""What a measured result means for its test: recorded, then passed, failed, skipped or warned about,
and in enforce mode checked against the baseline.

:func:`settle` runs inside the test's own call, so a failure it raises is the test's, shown at the
test's line (``__tracebackhide__`` hides the plugin's frames).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..errors import RooflineWarning
from .failing import fail_test, fitted

if TYPE_CHECKING:
    from ..analysis.diagnosis import Diagnosis
    from ..model.verdict import Result
    from ..output.records import MeasurementRecord
    from ..timing.calls import KernelCall
    from .request import Request
    from .run_state import RunState
    from .transport import RecordTransport


def settle(
    item: pytest.Item,
    result: Result,
    record: MeasurementRecord,
    *,
    request: Request,
    kernel: KernelCall,
    can_fail: bool,
    state: RunState,
    transport: RecordTransport,
) -> None:
    """Send ``record`` (``result``'s), give ``result`` to ``pytest_roofline_result``, and in enforce
    mode fail the test below budget (``can_fail=False``, ``roofline.measure``: never)."""
    __tracebackhide__ = True
    from ..model.verdict import Verdict

    settings = state.settings
    diagnosis = _diagnosis(kernel, result, when=settings.diagnose)
    message = result.message()
    if diagnosis is not None:
        import dataclasses

        from ..analysis.diagnosis import format_diagnosis

        record = dataclasses.replace(record, diagnosis=diagnosis.to_record())
        message += "\n" + format_diagnosis(diagnosis)
    transport.send(record)
    prefix = f"roofline[{request.name}]" if request.name else "roofline"
    item.user_properties.extend(
        [
            (f"{prefix}_attained", round(result.attained, 6)),
            (f"{prefix}_floor_s", result.floor_s),
            (f"{prefix}_time_s", result.time_s),
            (f"{prefix}_min_fraction", result.min_fraction),
            (f"{prefix}_verdict", str(result.verdict)),
        ]
    )
    item.config.hook.pytest_roofline_result(item=item, result=result)
    if can_fail and settings.mode == "enforce" and result.verdict is not Verdict.PASS:
        # with the FLOPs unknown, attained is a lower bound: an inconclusive result never fails
        fails = settings.inconclusive == "fail" and not result.flops_unknown
        if result.verdict is not Verdict.INCONCLUSIVE or fails:
            fail_test(fitted(message, item.config))
        if settings.inconclusive == "skip":
            pytest.skip(fitted(message, item.config))
        item.warn(RooflineWarning(fitted(message, item.config, warning=True)))
    if record.mode == "enforce":  # within budget, but perhaps well below where the baseline stood
        state.gate.check(record)
        slower = slower_than_base(result, against=settings.against, threshold=settings.regression)
        if slower:
            fail_test(fitted(slower, item.config))


def slower_than_base(result: Result, *, against: str | None, threshold: float) -> str:
    """The failure message of a measurement its base's version beat (``--roofline-against``), or ""."""
    from ..model.pairing import Pairing

    pairing = result.vs_base
    if not isinstance(pairing, Pairing) or pairing.verdict != "slower":
        return ""
    from ..model import units

    return (
        f"{result.estimate.label} is slower than in {against}:"
        f" attained {units.percent(pairing.head_attained)}"
        f" against {units.percent(pairing.base_attained)} ({units.seconds(pairing.head_time_s)} against"
        f" {units.seconds(pairing.base_time_s)} a call), ratio {pairing.ratio:.3f}"
        f" [{pairing.lo:.3f}, {pairing.hi:.3f}] over {pairing.pairs} paired rounds, a drop beyond the"
        f" {units.percent(threshold)} threshold and the {units.percent(pairing.aa_floor)}"
        " that identical code moved (A/A)"
    )


def _diagnosis(kernel: KernelCall, result: Result, *, when: str) -> Diagnosis | None:
    """The bottleneck procedure's likely causes (:mod:`.diagnosis`), when ``--roofline-diagnose``
    asks for them: for a GPU measurement (the procedure is a GPU one), with what the compiler says
    of a CUDA C++ or Triton kernel the test passed (:func:`.kernelfacts.facts_for`)."""
    from ..model.verdict import Verdict

    if when == "off" or result.estimate.device.kind == "cpu":
        return None
    if when == "miss" and result.verdict is not Verdict.MISS:
        return None
    from ..analysis.diagnosis import diagnose
    from ..analysis.kernelfacts import facts_for
    from ..analysis.occupancy import DEVICE_ARCH

    arch = DEVICE_ARCH.get(result.estimate.device.key)
    facts = facts_for(kernel.fn, arch=arch) if arch else None
    return diagnose(result, facts)
