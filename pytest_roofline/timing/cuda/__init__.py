"""The CUDA timer backend, device properties and measured ceilings, through CuPy.

A package of one concern per module: :mod:`.loading` (CuPy, imported on first CUDA use, and the
device checks), :mod:`.device` (what the driver reports), :mod:`.backend` (:class:`CudaBackend`),
:mod:`.streams` (PyTorch's streams too), :mod:`.blocking`, :mod:`.graphs` and :mod:`.flush` (what the
backend does around a window), :mod:`.kernels` (the CUDA C it launches), :mod:`.memory` (CuPy's pool
given back), :mod:`.measured_ceilings` (measured bandwidth and matmul FLOP/s) and
:mod:`.launch_latency` (the latency floor). No module here imports :mod:`cupy` at import time:
importing the package, or calling :func:`.loading.device_count` without CuPy, costs nothing and
raises nothing.

Every CuPy call here is written against CuPy's documented API and its source; the calls, and
where each is defined, are listed in docs/development.md ("The CuPy API the CUDA code uses"), which
``tests/fake_cupy.py`` mirrors.
"""

from __future__ import annotations
