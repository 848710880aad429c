"""How far a measurement moves between runs of unchanged code, beyond the interval one run reports: a
run cannot see it (its samples share the run's machine state), so it is a prior, measured on a
reference machine of each kind and stated with every record (the JSON's ``between_runs``). A
baseline comparison starts from it and pools it with a history's own spread
(:func:`pytest_roofline.output.comparison.run_noise`).

Each figure is the standard deviation of log(attained) between runs:

- the CPU's (:data:`RUN_NOISE`): the 2-core reference VM, ``benchmarks/gate_noise.py``
  (docs/methodology.md);
- a GPU's memory- or latency-bound kernel (:data:`GPU_RUN_NOISE`): an H200, six processes in two
  leases (``benchmarks/gpu_runs/2026-11-28-h200``, ``between_runs.py``): the medians of one kernel
  spread by up to 4.8% (a warm GEMV; a copy 0.1%, decode attention 2.1%) where each run reported
  ±0.05-0.6%;
- a GPU's compute-bound kernel (:data:`GPU_COMPUTE_RUN_NOISE`): the same runs' bf16 and fp8 GEMMs
  spread by 11-15%: their time follows the SM clock, which the power cap takes down to 75-78% in
  some runs and not in others (at an NVML-reported clock of 1980 MHz in most of them).
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
