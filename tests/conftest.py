"""Shared setup for the plugin's tests: pytester, and a fake device and timer for its runs.

Every pytester run of the plugin goes through the plugin's own hooks: ``pytest_roofline_device``
serves a small fake device for ``auto`` and ``cpu`` (so nothing calibrates) and
``pytest_roofline_backend`` a :class:`fakes.ScriptedBackend` (so nothing is timed for real; the
kernel is still called, so its assertions still run).

The fake device: DRAM bandwidth 100 GB/s, fp32 and fp64 vector peaks 1 TFLOP/s, so the two
standard shapes below both have a floor of 2 ms, and the default of 2.5 ms a call attains 80%:

- ``gemm`` M = N = K = 1000 fp32: 2e9 FLOP, compute-bound (intensity 167 FLOP/B, ridge 10);
- ``copy`` n = 25,000,000 fp32: 2e8 bytes, memory-bound.

A test sets its per-call times with ``@pytest.mark.fake_time(first, second, ...)``: one duration
per measurement, the last repeating (``fake_time(8e-3, 2.5e-3)``: a miss, then a pass on the
re-measure). ``FAKE_ROOFLINE_SOURCE=measured`` makes the device's figures measured ones.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# Imported here, before any in-process pytester run: pytester drops the modules a run imported
# when it ends, so a module first imported inside a run would be imported afresh by the next,
# and a monkeypatch applied to it from a test would miss the copy the plugin uses.
import numpy  # noqa: F401  # (numpy, above all, refuses to be imported twice in one process)
import pytest

import pytest_roofline.machine.calibrate
import pytest_roofline.model.ops  # (its catalogues register into the registry once)
import pytest_roofline.output.jsonfile
import pytest_roofline.timing.cuda.backend
import pytest_roofline.timing.cuda.blocking
import pytest_roofline.timing.cuda.device
import pytest_roofline.timing.cuda.launch_latency
import pytest_roofline.timing.cuda.loading
import pytest_roofline.timing.cuda.measured_ceilings
from pytest_roofline.model.verdict import Result

# matplotlib likewise, where the plot extra is installed: a run that draws imports its backends, and a
# second import of them makes a second GridSpec class that the first Figure's checks do not know
with contextlib.suppress(ImportError):
    import matplotlib.backends.backend_agg
    import matplotlib.backends.backend_svg
    import matplotlib.figure  # noqa: F401

pytest_plugins = ["pytester"]

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent  # a test file finds the checkout through this, wherever its folder is

GEMM = "M=1000, N=1000, K=1000"
COPY = "n=25_000_000"
FLOOR_S = 2e-3
DEFAULT_TIME_S = 2.5e-3
#: an in-process run inherits this suite's filterwarnings = error: these arguments let the
#: RooflineWarning of a marked test that measures nothing (an estimate alone, say) stay a warning
NO_MEASUREMENT_WARNS = ("-W", "default::pytest_roofline.errors.RooflineWarning")

_HEADER = f"""
import os
import sys

import pytest

if {str(TESTS_DIR)!r} not in sys.path:  # tests/fakes.py, in a subprocess too
    sys.path.insert(0, {str(TESTS_DIR)!r})

from fakes import ScriptedBackend

from pytest_roofline import Device, Figure, Precision, Source, Unit
"""

_DEVICE = """

def fake_device():
    source = Source(os.environ.get("FAKE_ROOFLINE_SOURCE", "datasheet"))
    peak = Figure(1e12, source)
    return Device(
        key="fake",
        name="Fake Accelerator",
        kind="cpu",
        peaks={(Precision.FP32, Unit.VECTOR): peak, (Precision.FP64, Unit.VECTOR): peak},
        bandwidth=Figure(1e11, source),
        llc_bytes=32 * 2**20,
        cores=4,
    )


def pytest_roofline_device(config, spec):
    return fake_device() if spec in ("auto", "cpu") else None
"""

_BACKEND = f"""

DEFAULT_TIME_S = {DEFAULT_TIME_S!r}
BACKEND = ScriptedBackend((DEFAULT_TIME_S,), resolution_s=1e-9, device_name="fake accelerator")


def pytest_configure(config):
    config.addinivalue_line("markers", "fake_time(*seconds): per-call seconds of each measurement")


def pytest_runtest_setup(item):
    mark = item.get_closest_marker("fake_time")
    BACKEND.reset(mark.args if mark else (DEFAULT_TIME_S,))


def pytest_roofline_backend(config, device, spec):
    return BACKEND
"""


def fake_conftest(*, device: bool = True, backend: bool = True, extra: str = "") -> str:
    """The text of a conftest.py with the fake device and/or the scripted backend, plus ``extra``."""
    return _HEADER + (_DEVICE if device else "") + (_BACKEND if backend else "") + extra


@pytest.fixture
def rl(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester directory whose conftest.py serves the fake device and the scripted backend.

    Its terminal is wide enough for every column of the report (the tests of a narrow one set
    COLUMNS themselves).
    """
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makeconftest(fake_conftest())
    return pytester


@pytest.fixture
def no_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """No profiler, sanitizer or CUDA_LAUNCH_BLOCKING in the environment, whatever the machine's (the
    blocking kernel and CUPTI would step aside for them)."""
    from pytest_roofline.timing.cuda.blocking import PROFILER_ENVIRONMENT

    for name in (*PROFILER_ENVIRONMENT, "CUDA_LAUNCH_BLOCKING"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no CUDA device, whatever machine runs the tests."""
    monkeypatch.setattr(pytest_roofline.timing.cuda.loading, "device_count", lambda: 0)


def results(reprec: pytest.HookRecorder) -> list[Result]:
    """Every Result an inner run handed to ``pytest_roofline_result``, in order."""
    return [call.result for call in reprec.getcalls("pytest_roofline_result")]


def one_result(reprec: pytest.HookRecorder) -> Result:
    (result,) = results(reprec)
    return result


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Set this process's umask for the test; the old one comes back after (tests of file modes)."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


@pytest.fixture
def quiet_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The self-check's GPU path on the fakes, undisturbed and silent: no profiler, sanitizer or
    CUDA_LAUNCH_BLOCKING in the environment, no progress lines."""
    for name in ("CUDA_LAUNCH_BLOCKING", "CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("pytest_roofline.machine.selfcheck.gpu_run._stderr", lambda line: None)


def records_by_test(path: Path) -> dict[str, dict[str, Any]]:
    """A ``--roofline-json`` report's measurements, by test name (the node id past its file)."""
    data = json.loads(path.read_text())
    return {m["nodeid"].split("::")[1]: m for m in data["measurements"]}


def assert_same_floors(inferred: Path, pinned: Path, tests: Iterable[str]) -> None:
    """The markers ``--roofline-suggest`` printed, pasted back (the ``pinned`` run), infer nothing
    and give the floors the ``inferred`` run found."""
    found, given = records_by_test(inferred), records_by_test(pinned)
    for test in tests:
        assert given[test]["inferred"] is None
        for field in ("floor_s", "flops", "bytes", "bound"):
            assert given[test][field] == found[test][field], (test, field)
