"""Timing: a backend-neutral engine (:mod:`.engine`) over timer backends (:mod:`.cpu`, :mod:`.cuda`)."""

from __future__ import annotations
