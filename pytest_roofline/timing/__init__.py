"""Timing: a backend-neutral engine (:mod:`.engine`) over timer backends (:mod:`.cpu`, :mod:`.cuda`)."""

from __future__ import annotations

from pytest_roofline.model.measurement import Measurement, StopReason
from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.base import Backend
from pytest_roofline.timing.cache import FLUSHED, WARM, CachePlan
from pytest_roofline.timing.engine import measure

__all__ = ["FLUSHED", "WARM", "Backend", "CachePlan", "Measurement", "Policy", "StopReason", "measure"]
