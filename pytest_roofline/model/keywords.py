"""The keywords a ``speed_of_light`` marker and a ``roofline(...)`` call take beside an op's
parameters, declared once: the marker, the fixture and the stub read them, and the op registry
reserves them, so that no op can take a parameter one of them would swallow."""

from __future__ import annotations

#: the marker's keywords (a call to the fixture takes them too); any other keyword is an op parameter
CALL_KEYWORDS = (
    "min_fraction", "dtype", "device", "math", "stat", "max_time", "cache", "stream", "block"
)  # fmt: skip
#: what a call to the fixture takes beside them: the op, the measurement's name, the kernel's own
#: keywords and its setup
FIXTURE_NAMES = ("op", "name", "kwargs", "setup")
#: what ``cache=`` (and ``--roofline-cache``) takes (:mod:`pytest_roofline.timing.cache`)
CACHE_STATES = ("cold", "warm")
#: what ``block=`` (and ``--roofline-cuda-block``) takes: ``auto`` holds what is safe to hold, ``on``
#: holds every sampling window after a kernel's first call, ``off`` holds nothing
#: (:mod:`pytest_roofline.timing.cuda.blocking`)
BLOCK_SETTINGS = ("auto", "on", "off")
