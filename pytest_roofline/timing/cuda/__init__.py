"""The CUDA timer backend, device properties and measured ceilings, through CuPy (one concern per
module: docs/architecture.md, "The layers"). No module here imports :mod:`cupy` at import time, so
importing the package, or :func:`.loading.device_count` without CuPy, costs and raises nothing. The
CuPy API used: docs/development.md ("The CuPy API the CUDA code uses"), mirrored by tests/fake_cupy.py.
"""

from __future__ import annotations
