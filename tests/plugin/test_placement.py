"""A kernel's device follows its arguments under ``--roofline-device auto`` (``plugin/placement.py``):
host arrays are timed on the host even where a GPU is the session's device, GPU arrays on their GPU,
a closure on the session's device; a named device is kept, but never one the arrays are not on.

The machine is the fake CuPy's (four GPUs) with the fake PyTorch beside it.
"""

from __future__ import annotations

import json

import pytest
from conftest import fake_conftest
from fake_cupy import FakeCupy
from fake_torch import FakeTorch

from pytest_roofline.errors import InvalidValueError
from pytest_roofline.plugin.placement import place
from pytest_roofline.timing.arrays import Placement


@pytest.fixture
def four_gpus(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    world = FakeCupy(device_count=4).install(monkeypatch)
    FakeTorch(world).install(monkeypatch)
    return world


def auto(placement: Placement | None, session: str = "cuda:0") -> tuple[str, str]:
    return place(placement, keyword=None, setting="auto", origin="default", session_spec=lambda: session)


# -- the rule, one call at a time ------------------------------------------------------------------


@pytest.mark.usefixtures("four_gpus")
@pytest.mark.parametrize(
    ("placement", "session", "expected"),
    [
        (None, "cuda:0", ("cuda:0", "session")),  # an estimate runs nothing
        (Placement(), "cuda:1", ("cuda:1", "session")),  # a closure: the session's (a worker's GPU)
        (Placement(host="argument 0"), "cuda:0", ("cpu", "arguments")),
        (Placement(host="argument 0"), "auto", ("cpu", "arguments")),  # auto is the GPU here
        (Placement(gpus={2: "argument 0"}), "cuda:0", ("cuda:2", "arguments")),
        (Placement(gpus={1: "argument 0"}), "cuda:1", ("cuda:1", "arguments")),
        (Placement(host="argument 1", gpus={3: "argument 0"}), "cuda:0", ("cuda:3", "arguments")),
        (Placement(gpus={None: "argument 0"}), "cuda:2", ("cuda:2", "arguments")),  # which GPU: unsaid
        (Placement(other={"mps": "argument 0"}), "cuda:0", ("cuda:0", "session")),
    ],
)
def test_under_auto_the_arrays_choose_the_device(
    placement: Placement | None, session: str, expected: tuple[str, str]
) -> None:
    assert auto(placement, session) == expected


def test_host_arrays_on_a_machine_without_a_gpu_keep_the_sessions_spec(no_gpu: None) -> None:
    """``auto`` is this CPU already: nothing changes, down to the spec a device hook is asked for."""
    assert auto(Placement(host="argument 0"), "auto") == ("auto", "arguments")


@pytest.mark.usefixtures("four_gpus")
def test_arrays_on_two_gpus_under_auto_ask_for_device() -> None:
    with pytest.raises(InvalidValueError, match=r"live on GPU 0 \(argument 0\) and GPU 2 \(argument 1\)"):
        auto(Placement(gpus={2: "argument 1", 0: "argument 0"}))


@pytest.mark.usefixtures("four_gpus")
@pytest.mark.parametrize(
    ("keyword", "setting", "origin", "named_by"),
    [
        ("cuda:1", "auto", "default", "device='cuda:1' times GPU 1"),
        (None, "cuda:1", "--roofline-device", "--roofline-device cuda:1 times GPU 1"),
        (None, "cuda:1", "ini roofline_device", "ini roofline_device cuda:1 times GPU 1"),
    ],
)
def test_a_named_gpu_the_arrays_are_not_on_is_an_error_naming_both(
    keyword: str | None, setting: str, origin: str, named_by: str
) -> None:
    with pytest.raises(InvalidValueError) as caught:
        place(
            Placement(gpus={0: "argument 2"}), keyword=keyword, setting=setting, origin=origin,
            session_spec=lambda: setting,
        )  # fmt: skip
    message = str(caught.value)
    assert message.startswith(f"the kernel's arrays live on GPU 0 (argument 2), but {named_by}:")
    assert "make the arrays on GPU 1, or give this measurement device='cuda:0'" in message


@pytest.mark.usefixtures("four_gpus")
def test_the_host_timer_named_for_gpu_arrays_is_an_error() -> None:
    with pytest.raises(
        InvalidValueError, match=r"GPU 3 \(argument 0\), but device='cpu' times it on this CPU"
    ):
        place(
            Placement(gpus={3: "argument 0"}), keyword="cpu", setting="auto", origin="default",
            session_spec=lambda: "cuda:0",
        )  # fmt: skip


@pytest.mark.usefixtures("four_gpus")
@pytest.mark.parametrize(
    ("placement", "keyword"),
    [
        (Placement(host="argument 0"), "cuda:1"),  # a kernel may copy its inputs to the GPU itself
        (Placement(gpus={1: "argument 0", 0: "argument 1"}), "cuda:1"),  # one of them is the named GPU
        (Placement(gpus={0: "argument 0"}), "my-accelerator"),  # a device only a plugin's hook knows
        (Placement(gpus={None: "argument 0"}), "cuda:3"),
    ],
)
def test_a_named_device_is_kept_where_the_arrays_allow(placement: Placement, keyword: str) -> None:
    assert place(
        placement, keyword=keyword, setting="auto", origin="default", session_spec=lambda: "cuda:0"
    ) == (keyword, "keyword")


# -- end to end: a fake GPU machine, a NumPy kernel beside a CuPy one --------------------------------


_GPU_MACHINE = """

import dataclasses

import numpy

HOST = ScriptedBackend((DEFAULT_TIME_S,), resolution_s=1e-9, device_name="this CPU")
HOST.name = "host timer"
EVENTS = ScriptedBackend((DEFAULT_TIME_S,), resolution_s=1e-9, device_name="fake GPU")
EVENTS.name = "cuda events"


def pytest_roofline_device(config, spec):  # replaces the one above: a CPU, and a GPU per index
    if spec == "cpu":
        return dataclasses.replace(fake_device(), key="fake-cpu", name="Fake CPU")
    index = spec.rpartition(":")[2] if spec.startswith("cuda:") else "0"
    return dataclasses.replace(fake_device(), key="fake-gpu" + index, name="Fake GPU", kind="cuda")


def pytest_roofline_backend(config, device, spec):  # replaces the one above
    return HOST if device.kind == "cpu" else EVENTS
"""

_KERNELS = """
import numpy
import cupy
import torch

COPY = dict(op="copy", n=25_000_000, dtype="fp32", name={name!r})


def test_numpy(roofline):
    roofline(numpy.add, numpy.ones(4, numpy.float32), numpy.ones(4, numpy.float32), **COPY)


def test_torch_cpu(roofline):
    x = torch.randn(1024)
    roofline(lambda t: t, x, **COPY)


def test_cupy(roofline):
    with cupy.cuda.Device(1):
        x = cupy.empty((1024,), "float32")
    roofline(lambda a: None, x, **COPY)


def test_closure(roofline):
    roofline(lambda: None, **COPY)
"""


@pytest.mark.usefixtures("four_gpus")
def test_a_host_kernel_is_timed_on_the_host_where_the_session_times_a_gpu(pytester: pytest.Pytester) -> None:
    """``auto`` is GPU 0 on this machine: before the rule, the NumPy and CPU-tensor kernels were timed
    by its CUDA events around host work, and judged against the GPU."""
    pytester.makeconftest(fake_conftest(extra=_GPU_MACHINE))
    pytester.makepyfile(test_kernels=_KERNELS.format(name=""))
    result = pytester.runpytest("--roofline-json=out.json", "--roofline-mode=report")
    result.assert_outcomes(passed=4)
    data = json.loads((pytester.path / "out.json").read_text())
    got = {
        m["nodeid"].split("::")[1]: (m["device"], m["backend"], m.get("device_from"), m.get("device_index"))
        for m in data["measurements"]
    }
    assert got == {
        "test_numpy": ("fake-cpu", "host timer", "arguments", None),
        "test_torch_cpu": ("fake-cpu", "host timer", "arguments", None),
        "test_cupy": ("fake-gpu1", "cuda events", "arguments", 1),
        "test_closure": ("fake-gpu0", "cuda events", "session", 0),
    }


@pytest.mark.usefixtures("four_gpus")
def test_a_kernel_on_another_gpu_than_the_named_one_fails_its_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(fake_conftest(extra=_GPU_MACHINE))
    pytester.makepyfile(
        """
        import cupy
        import pytest
        import torch

        @pytest.mark.speed_of_light("copy", n=1024, dtype="fp32", device="cuda:2")
        def test_named(roofline):
            roofline(lambda x: None, torch.randn(1024, device="cuda:0"))

        def test_session(roofline):
            roofline(lambda x: None, cupy.zeros((1024,), "float32"), op="copy", n=1024, dtype="fp32")
        """
    )
    result = pytester.runpytest("--roofline-device=cuda:3")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_named _*",
            "roofline: the kernel's arrays live on GPU 0 (argument 0), but device='cuda:2' times GPU 2:*",
            "*_ test_session _*",
            "roofline: the kernel's arrays live on GPU 0 (argument 0), but --roofline-device cuda:3"
            " times GPU 3:*",
        ]
    )


@pytest.mark.usefixtures("no_gpu")  # the plugin (through CuPy) sees no GPU ...
def test_gpu_arrays_where_no_gpu_is_visible_skip_saying_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyTorch on a GPU, and no CuPy to time it with: skipped, never timed by the host timer."""
    FakeTorch(FakeCupy(device_count=1)).install(monkeypatch)  # ... and PyTorch sees one
    pytester.makeconftest(fake_conftest())
    pytester.makepyfile(
        """
        import torch

        def test_gpu_tensor(roofline):
            roofline(lambda x: None, torch.randn(8, device="cuda"), op="copy", n=8, dtype="fp32")
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*needs CUDA device 0 (the kernel's arrays live there); 0 visible here (CuPy missing or no GPU)*"]
    )


def test_the_device_rule_is_said_in_each_record_read_back() -> None:
    from pytest_roofline.output.records import MeasurementRecord

    old = MeasurementRecord.from_json({"nodeid": "t", "device": "h100-sxm"})
    assert (old.device_index, old.device_from) == (None, None)  # a file from before the fields
    new = MeasurementRecord.from_json({"nodeid": "t", "device_index": 3, "device_from": "arguments"})
    assert (new.device_index, new.device_from) == (3, "arguments")
    assert new.to_json()["device_index"] == 3
    bad = MeasurementRecord.from_json({"nodeid": "t", "device_index": -1, "device_from": 7})
    assert (bad.device_index, bad.device_from) == (None, None)


def test_the_report_names_the_gpu_each_row_ran_on() -> None:
    from pytest_roofline.output.records import record_from_json
    from pytest_roofline.output.table import COLUMNS, table_rows

    base = {"nodeid": "t.py::t", "time_s": 1e-3, "ceiling": {"share_of_best": 0.62}}
    rows = table_rows(
        [record_from_json({**base, "device_index": 3}), record_from_json({**base, "name": "cpu"})]
    )
    machine = list(COLUMNS).index("machine")
    assert [row[machine] for row in rows] == ["GPU 3, 62.0% of best", "62.0% of best"]
