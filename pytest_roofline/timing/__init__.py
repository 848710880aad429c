"""Timing: a backend-neutral engine (:mod:`.engine`) over timer backends (:mod:`.cpu`, :mod:`.cuda`)."""

from __future__ import annotations

from pytest_roofline.timing.base import Backend, Policy
from pytest_roofline.timing.engine import Measurement, StopReason, measure

__all__ = ["Backend", "Measurement", "Policy", "StopReason", "measure"]
