"""One GPU per pytest-xdist worker (``--roofline-gpus``, ``plugin/gpus.py``), on a fake 4-GPU machine.

Every run is a real pytest-xdist run in a subprocess, each process with the fake CuPy and fake
PyTorch installed by its conftest (``FakeCupy(device_count=4, visible_env=True)``): the fake CUDA
reads ``CUDA_VISIBLE_DEVICES`` once, when the process first initializes it, and the conftest does
that as it is imported (``torch.cuda.is_available()``, as suites do for their skip marks), before
any plugin hook but the earliest. Each test records where its own tensors and arrays landed (the
physical GPU, whatever the worker's numbering) and what its measurements' records say.

Nothing asserts on how long anything took: the lock test compares the workers' windows with each
other only.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import fake_conftest

from pytest_roofline.plugin import gpus
from pytest_roofline.plugin.gpus import check_gpus, count_gpus, spread_workers

_MACHINE = """

import dataclasses

from fake_cupy import FakeCupy
from fake_torch import FakeTorch

_PATCH = pytest.MonkeyPatch()
WORLD = FakeCupy(device_count=4, visible_env=True).install(_PATCH)
FakeTorch(WORLD).install(_PATCH)

import torch

HAS_GPU = torch.cuda.is_available()  # CUDA initialized as the conftest is imported


def pytest_unconfigure(config):  # an in-process run leaves the real modules behind
    _PATCH.undo()


def pytest_roofline_device(config, spec):  # replaces the one above: every GPU is a fake one
    return dataclasses.replace(fake_device(), key="fake-gpu", name="Fake GPU", kind="cuda")
"""

#: one test file per worker (``--dist loadfile`` gives each worker one when there are as many)
_TEST = """
import json
import os

import cupy
import torch

AT_COLLECTION = torch.randn(8, device="cuda")  # made as the module is imported


def test_where(roofline, request):
    x = torch.randn(1024, device="cuda")
    a = cupy.empty((1024,), "float32")
    roofline(lambda t: None, x, op="copy", n=1024, dtype="fp32", name="tensor")
    roofline(lambda: None, op="copy", n=1024, dtype="fp32", name="closure")
    with open({log!r}, "a") as out:
        out.write(json.dumps({{
            "nodeid": request.node.nodeid,
            "worker": os.environ["PYTEST_XDIST_WORKER"],
            "seen": torch.cuda.device_count(),
            "collection": AT_COLLECTION.physical_device,
            "torch": x.physical_device,
            "cupy": a.physical_device,
        }}) + "\\n")
"""


@dataclass
class Worker:
    """What one worker's test saw: the GPUs it could see, the physical GPU of each of its arrays, and
    the ``device_index`` of its two measurements (its tensor's kernel, and a closure)."""

    seen: int
    physical: tuple[int, int, int]
    tensor_index: int | None
    closure_index: int | None


def run_workers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: int, *args: str
) -> tuple[pytest.RunResult, dict[str, Worker]]:
    """A run of ``workers`` workers, one test file each: the result, and what each worker saw."""
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makeconftest(fake_conftest(extra=_MACHINE))
    log = pytester.path / "where.log"
    pytester.makepyfile(**{f"test_{i}": _TEST.format(log=str(log)) for i in range(workers)})
    result = pytester.runpytest_subprocess(
        "-p",
        "xdist",
        "-n",
        str(workers),
        "--dist=loadfile",
        "--roofline-json=out.json",
        "--roofline-mode=report",
        *args,
    )
    data = json.loads((pytester.path / "out.json").read_text())
    index = {(m["nodeid"], m["name"]): m.get("device_index") for m in data["measurements"]}
    seen = {}
    for entry in map(json.loads, log.read_text().splitlines()):
        nodeid = entry["nodeid"]
        seen[entry["worker"]] = Worker(
            seen=entry["seen"],
            physical=(entry["collection"], entry["torch"], entry["cupy"]),
            tensor_index=index.get((nodeid, "tensor")),
            closure_index=index.get((nodeid, "closure")),
        )
    return result, seen


def spread_as(mapping: dict[str, tuple[int, int]]) -> dict[str, Worker]:
    """Each worker seeing one GPU (``worker -> (the controller's index, the physical GPU)``), its
    arrays on that GPU and both its measurements named by the controller's index."""
    return {
        worker: Worker(seen=1, physical=(physical,) * 3, tensor_index=index, closure_index=index)
        for worker, (index, physical) in mapping.items()
    }


@pytest.mark.parametrize(
    ("workers", "args", "visible", "expected", "line"),
    [
        (4, (), None, {f"gw{i}": (i, i) for i in range(4)},
         "gw0 -> GPU 0, gw1 -> GPU 1, gw2 -> GPU 2, gw3 -> GPU 3"),
        (6, (), None, {f"gw{i}": (i % 4, i % 4) for i in range(6)},
         "gw0 gw4 -> GPU 0, gw1 gw5 -> GPU 1, gw2 -> GPU 2, gw3 -> GPU 3"),
        (4, ("--roofline-gpus=0,2,3",), None, {"gw0": (0, 0), "gw1": (2, 2), "gw2": (3, 3), "gw3": (0, 0)},
         "gw0 gw3 -> GPU 0, gw1 -> GPU 2, gw2 -> GPU 3"),
        (4, (), "2,3", {"gw0": (0, 2), "gw1": (1, 3), "gw2": (0, 2), "gw3": (1, 3)},
         "gw0 gw2 -> GPU 0 (CUDA_VISIBLE_DEVICES=2), gw1 gw3 -> GPU 1 (CUDA_VISIBLE_DEVICES=3)"),
    ],
    ids=["4-workers", "6-workers", "a-list", "visible-2-3"],
)  # fmt: skip
def test_each_worker_and_everything_it_does_is_on_its_own_gpu(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    workers: int,
    args: tuple[str, ...],
    visible: str | None,
    expected: dict[str, tuple[int, int]],
    line: str,
) -> None:
    """Its tensors made at collection and in the test, its CuPy arrays and its measurements, with
    ``CUDA_VISIBLE_DEVICES`` of the run honoured (its GPUs numbered 0.. in its order)."""
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    result, seen = run_workers(pytester, monkeypatch, workers, *args)
    result.assert_outcomes(passed=workers)
    assert seen == spread_as(expected)
    result.stdout.fnmatch_lines(
        [f"roofline: pytest-xdist workers spread one GPU each, seeing only it: {line}"]
    )


def test_none_leaves_every_worker_every_gpu_as_before(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each worker sees the four GPUs and makes its arrays on the first; a kernel on them is timed
    there (its arrays decide), a closure on GPU i mod 4 as before."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result, seen = run_workers(pytester, monkeypatch, 2, "--roofline-gpus=none")
    result.assert_outcomes(passed=2)
    assert seen == {
        "gw0": Worker(seen=4, physical=(0, 0, 0), tensor_index=0, closure_index=0),
        "gw1": Worker(seen=4, physical=(0, 0, 0), tensor_index=0, closure_index=1),
    }
    result.stdout.fnmatch_lines(
        ["roofline: pytest-xdist workers not spread over GPUs: --roofline-gpus none*"]
    )


def test_a_worker_timing_another_gpu_than_its_arrays_fails_naming_both(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not spread, ``--roofline-device cuda`` puts gw1's measurements on GPU 1 while its tensors are
    on GPU 0: an error naming both, never a timing of GPU 1."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pytester.makeconftest(fake_conftest(extra=_MACHINE))
    test = """
        import torch

        def test_tensor(roofline):
            roofline(lambda t: None, torch.randn(1024, device="cuda"), op="copy", n=1024, dtype="fp32")
        """
    pytester.makepyfile(test_a=test, test_b=test)
    result = pytester.runpytest_subprocess(
        "-p",
        "xdist",
        "-n",
        "2",
        "--dist=loadfile",
        "--roofline-gpus=none",
        "--roofline-device=cuda",
        "--roofline-mode=report",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "roofline: the kernel's arrays live on GPU 0 (argument 0), but --roofline-device cuda times"
            " GPU 1: its CUDA events would time nothing of a kernel that runs on GPU 0; make the arrays"
            " on GPU 1, or give this measurement device='cuda:0'"
        ]
    )


# -- one lock per GPU --------------------------------------------------------------------------------


_TIMED = """
import os
import tempfile
import time
from pathlib import Path

import torch
from fakes import locked_elsewhere

LOG = {log!r}
LOCK = os.path.join(tempfile.gettempdir(), "pytest-roofline-{run}-cuda{{gpu}}.lock")
GPU_OF = {gpu_of!r}


def kernel(x):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    start = time.monotonic_ns()  # one clock for every process of this machine
    held = locked_elsewhere(Path(LOCK.format(gpu=GPU_OF[worker])))  # its own GPU's lock is held
    time.sleep(0.002)
    end = time.monotonic_ns()
    with open(LOG, "a") as log:
        log.write(f"{{worker}} {{GPU_OF[worker]}} {{held}} {{start}} {{end}}\\n")


def test_timed(roofline):
    roofline(kernel, torch.randn(1024, device="cuda"), op="copy", n=1024, dtype="fp32", cache="warm")
"""


def test_workers_on_one_gpu_never_time_at_once_and_each_gpu_has_its_own_lock(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three workers on GPUs 0 and 1: gw0 and gw2 share GPU 0, so their windows never overlap; every
    window holds the lock of its own GPU, by the controller's index (each worker calls its GPU 0)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("COLUMNS", "400")
    pytester.makeconftest(fake_conftest(extra=_MACHINE))
    log, run = pytester.path / "calls.log", f"test{uuid.uuid4().hex}"
    gpu_of = {"gw0": 0, "gw1": 1, "gw2": 0}
    test = _TIMED.format(log=str(log), run=run, gpu_of=gpu_of)
    pytester.makepyfile(test_a=test, test_b=test, test_c=test)
    result = pytester.runpytest_subprocess(
        "-p", "xdist", "-n", "3", "--dist=loadfile", f"--testrunuid={run}", "--roofline-gpus=0,1",
        "--roofline-max-time=0.05", "--roofline-mode=report",
    )  # fmt: skip
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*gw0 gw2 -> GPU 0, gw1 -> GPU 1"])
    assert list(Path(tempfile.gettempdir()).glob(f"pytest-roofline-{run}-*")) == []
    windows: dict[str, tuple[int, int]] = {}  # worker -> (first start, last end)
    for line in log.read_text().splitlines():
        worker, gpu, held, start, end = line.split()
        assert (held, int(gpu)) == ("True", gpu_of[worker]), line
        first, last = windows.get(worker, (int(start), int(end)))
        windows[worker] = (min(first, int(start)), max(last, int(end)))
    assert sorted(windows) == ["gw0", "gw1", "gw2"]
    (a_start, a_end), (b_start, b_end) = windows["gw0"], windows["gw2"]
    assert a_end <= b_start or b_end <= a_start, "gw0 and gw2 timed GPU 0 at once"


# -- the option ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (("--roofline-gpus=0,7",), "",
         "ERROR: --roofline-gpus 0,7: no GPU 7 here; GPUs seen: 0, 1, 2, 3; give indices of those, all,*"),
        (("--roofline-gpus=3",), "", "ERROR: --roofline-gpus 3: no GPU 3 here; GPUs seen: 0, 1"
         " (CUDA_VISIBLE_DEVICES=2,1); give indices of those, all, or none"),
        (("--roofline-gpus=al",), "",
         "*--roofline-gpus: expected all, none or GPU indices separated by commas (such as 0,2,3), got 'al'"),
        (("--roofline-gpus=0,1,0",), "", "*--roofline-gpus: GPU 0 is named twice in '0,1,0'; name each*"),
        ((), "roofline_gpus = 4",
         "ERROR: ini roofline_gpus 4: no GPU 4 here; GPUs seen: 0, 1, 2, 3; give indices of those, all,*"),
        ((), "roofline_gpus = -1",
         "ERROR: ini option roofline_gpus = '-1': expected all, none or GPU indices separated by commas*"),
    ],
)  # fmt: skip
def test_a_bad_list_is_a_usage_error_naming_the_value_and_the_gpus_seen(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], ini: str, message: str
) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    if "CUDA_VISIBLE_DEVICES=2,1" in message:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    pytester.makeconftest(fake_conftest(extra=_MACHINE))
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_list_on_a_machine_without_gpus_names_what_is_missing_without_blaming_cupy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the count comes from the CUDA driver when CuPy is not loaded: CuPy is not what is missing
    monkeypatch.setattr(gpus, "count_gpus", lambda: 0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(pytest.UsageError) as error:
        check_gpus((0,), origin="--roofline-gpus")
    assert str(error.value) == (
        "--roofline-gpus 0: no GPU 0 here; GPUs seen: none (no GPU, or no CUDA driver); give indices of"
        " those, all, or none"
    )


# -- the spread, one worker spec at a time ---------------------------------------------------------


def specs(*texts: str) -> list[Any]:
    """pytest-xdist's worker specs, with the ids it gives them (gw0, gw1, ...)."""
    import execnet

    made = [execnet.XSpec(text) for text in texts]
    for i, spec in enumerate(made):
        spec.id = f"gw{i}"
    return made


def test_each_local_worker_gets_its_gpus_visible_entry_and_the_line_says_so() -> None:
    workers = specs("popen", "popen", "popen//env:CUDA_VISIBLE_DEVICES=3", "ssh=elsewhere", "popen")
    spread = spread_workers(
        workers, gpus="all", count=lambda: 2, device_setting="auto", environ={"CUDA_VISIBLE_DEVICES": "5,7"}
    )
    assert [spec.env.get("CUDA_VISIBLE_DEVICES") for spec in workers] == ["5", "7", "3", None, "5"]
    assert [spread.worker_gpu(spec) for spec in workers] == [0, 1, None, None, 0]
    assert spread.line == (
        "pytest-xdist workers spread one GPU each, seeing only it: gw0 gw4 -> GPU 0"
        " (CUDA_VISIBLE_DEVICES=5), gw1 -> GPU 1 (CUDA_VISIBLE_DEVICES=7); left as they are:"
        " gw2 (CUDA_VISIBLE_DEVICES=3 from its --tx), gw3 (not a local process)"
    )


@pytest.mark.parametrize(
    ("gpus", "device", "environ", "why"),
    [
        ("none", "auto", {}, "--roofline-gpus none (each worker sees every GPU;*"),
        ("all", "cuda:1", {}, "--roofline-device cuda:1 names one device for every worker"),
        ("all", "h100-sxm", {}, "--roofline-device h100-sxm names one device for every worker"),
        ("all", "auto", {"HIP_VISIBLE_DEVICES": "1"}, "HIP_VISIBLE_DEVICES is set, and ROCm would apply*"),
    ],
)
def test_what_is_not_spread_is_left_alone_and_said(
    gpus: str, device: str, environ: dict[str, str], why: str
) -> None:
    import fnmatch

    workers = specs("popen", "popen")
    spread = spread_workers(workers, gpus=gpus, count=lambda: 4, device_setting=device, environ=environ)
    assert [spec.env for spec in workers] == [{}, {}]
    assert fnmatch.fnmatch(spread.line, f"pytest-xdist workers not spread over GPUs: {why}")


def test_a_machine_without_a_gpu_spreads_nothing_and_says_nothing() -> None:
    workers = specs("popen", "popen")
    spread = spread_workers(workers, gpus="all", count=lambda: 0, device_setting="auto", environ={})
    assert ([spec.env for spec in workers], spread.line, spread.gpu_of) == ([{}, {}], "", {})


def test_the_gpus_are_counted_through_a_cupy_already_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_cupy import FakeCupy

    FakeCupy(device_count=3).install(monkeypatch)
    assert count_gpus() == 3


@pytest.mark.parametrize(("init", "count", "expected"), [(0, 5, 5), (100, 5, 0), (0, None, 0)])
def test_else_through_the_cuda_driver_alone(
    monkeypatch: pytest.MonkeyPatch, init: int, count: int | None, expected: int
) -> None:
    """``cuInit`` then ``cuDeviceGetCount`` (CUDA_ERROR_NO_DEVICE is 100); no driver library: 0."""
    import ctypes
    import sys

    class Driver:
        def __init__(self, name: str) -> None:
            if count is None:
                raise OSError(f"{name}: cannot open shared object file")

        def cuInit(self, flags: int) -> int:
            return init

        def cuDeviceGetCount(self, out: Any) -> int:
            out._obj.value = count
            return 0

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", Driver)
    assert count_gpus() == expected
