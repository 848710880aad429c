"""Diagnostic (GPU run 3): why the self-check's "engine events" timer read a 4 KiB kernel 3.9x its
"engine warm" (both events, block auto): each backend's hold decision and probe state, per call."""

import cupy

from pytest_roofline.model.policy import Policy
from pytest_roofline.timing.cache import WARM
from pytest_roofline.timing.cuda.backend import CudaBackend
from pytest_roofline.timing.engine import measure

x = cupy.ones(1024, dtype=cupy.float32)
out = cupy.empty_like(x)


def scale(x: object, out: object) -> None:
    cupy.multiply(x, 2, out=out)


for label, options in (
    ("auto", {}),
    ("events", {"timer": "events"}),
    ("auto again", {}),
    ("on", {"block": "on"}),
):
    backend = CudaBackend(0, **options)
    for i in range(4):
        policy = Policy(max_time_s=0.033)
        m = measure(scale, x, out, policy=policy, backend=backend, cache=WARM)
        probes = backend._probes
        print(
            f"{label:10} call {i}: timer {backend.timer}; block_note {backend.block_note!r};"
            f" {m.time_s * 1e6:.2f} us, {m.stats.n} samples x {m.calls_per_sample} calls;"
            f" probe states {dict(probes._kernels)}; host/call {dict(probes._host_per_call)};"
            f" queued {dict(probes._queued)}; capped {set(probes._capped)}",
            flush=True,
        )
