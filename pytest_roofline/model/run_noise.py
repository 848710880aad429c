"""How far a measurement moves between runs of unchanged code, beyond the interval one run reports: a
prior (the standard deviation of log(attained) between runs, measured on a reference machine of each
kind) stated with every record (the JSON's ``between_runs``), which a baseline comparison pools with a
history's own spread (:func:`pytest_roofline.output.comparison.run_noise`). The figures' evidence:
docs/methodology.md ("The regression gate across runs"), docs/gpu.md ("What the second round showed").
"""

from __future__ import annotations

import math

__all__ = ["GPU_COMPUTE_RUN_NOISE", "GPU_RUN_NOISE", "RUN_NOISE", "between_runs_rel", "prior", "why"]

RUN_NOISE = 0.08
GPU_RUN_NOISE = 0.025
GPU_COMPUTE_RUN_NOISE = 0.08
_Z95 = 1.959964


def prior(backend: str | None, bound: str | None) -> float:
    """The run-to-run noise (sd of log attained) of a measurement timed by ``backend``, ``bound`` by
    ``compute``, ``memory`` or ``latency``: a GPU's by its bound, any other the CPU's."""
    if backend == "cuda":
        return GPU_COMPUTE_RUN_NOISE if bound == "compute" else GPU_RUN_NOISE
    return RUN_NOISE


def why(backend: str | None, bound: str | None) -> str:
    """Where :func:`prior`'s figure for such a measurement comes from, in a few words."""
    if backend == "cuda" and bound == "compute":
        return "a compute-bound GPU kernel: its time follows the SM clock, which the power cap moves"
    if backend == "cuda":
        return "a GPU kernel: medians of one kernel between processes on an H200"
    return "the CPU: the 2-core reference VM's runs of unchanged code"


def between_runs_rel(sd: float) -> float:
    """The 95% half-width, relative, of a figure whose log moves by ``sd`` between runs (upward)."""
    return math.exp(_Z95 * sd) - 1
