"""Tiers 2 and 3 of a budget with no op: one first call of the kernel shows the arrays it was given or
captured, which of them it wrote (compared before and after: on the device for device arrays), what it
returned, and for a PyTorch callable the FLOPs ``FlopCounterMode`` counts (issue 30)."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
import types
from typing import Any

import numpy as np
import pytest
from fake_cupy import FakeCupy

from pytest_roofline.model.core import Precision
from pytest_roofline.timing.footprint import first_call, infer_call

N = 1000


def uses(kernel: Any, *args: Any, **kwargs: Any) -> dict[str, tuple[int, bool | None, bool]]:
    """where -> (bytes, written, returned), for each array of one call's footprint."""
    footprint = first_call(kernel, args, kwargs)
    return {u.where: (u.nbytes, u.written, u.returned) for u in footprint.arrays}


# - NumPy: what was written -


def test_an_array_changed_in_place_is_written_and_one_only_read_is_not() -> None:
    x, y = np.ones(N, np.float32), np.full(N, 2, np.float32)

    def scale(a: Any, b: Any) -> None:
        a *= b

    assert uses(scale, x, y) == {"argument 0": (4000, True, False), "argument 1": (4000, False, False)}


def test_an_out_array_is_written() -> None:
    x, out = np.ones(N), np.zeros(N)
    found = uses(lambda a, *, out: np.multiply(a, 2.0, out=out), x, out=out)
    # the out array is returned too: counted once, as written
    assert found == {"argument 0": (8000, False, False), "kwargs['out']": (8000, True, False)}


def test_a_write_through_a_view_of_an_input_writes_the_input() -> None:
    x = np.ones(N)

    def head(a: Any) -> None:
        a[:10] = 5.0

    assert uses(head, x) == {"argument 0": (8000, True, False)}


def test_a_view_passed_beside_its_array_is_counted_through_it() -> None:
    x = np.ones(N)

    def shift(whole: Any, tail: Any) -> None:
        tail[:] = 3.0

    # the tail lies inside x: x is counted once, and written
    assert uses(shift, x, x[N // 2 :]) == {"argument 0": (8000, True, False)}
    # a view passed alone is an array of its own size
    x = np.ones(N)
    assert uses(shift, np.ones(4), x[N // 2 :]) == {
        "argument 0": (32, False, False),
        "argument 1": (4000, True, False),
    }


def test_writing_the_same_values_is_no_write() -> None:
    x = np.zeros(N)
    assert uses(lambda a: a.fill(0.0), x) == {"argument 0": (8000, False, False)}


# - where arrays are found -


def test_closure_cells_partials_and_nested_functions_are_searched() -> None:
    table, rows, out = np.ones((100, 8)), np.arange(4), np.empty((4, 8))

    def gather() -> None:
        np.take(table, rows, axis=0, out=out)

    def kernel() -> None:
        gather()

    found = uses(kernel)  # gather's arrays, two closures down
    assert found == {
        "captured 'table'": (6400, False, False),
        "captured 'rows'": (32, False, False),
        "captured 'out'": (256, True, False),
    }
    partial = uses(functools.partial(np.add, np.ones(3), out=np.empty(3)), np.ones(3))
    assert partial == {
        "argument 0": (24, False, False),
        "argument 0 of the functools.partial": (24, False, False),
        "keyword 'out' of the functools.partial": (24, True, False),
    }


def test_what_the_call_returns_is_written_unless_it_is_an_input_or_a_view_of_one() -> None:
    x = np.ones((10, 10))
    assert uses(lambda a: a * 2, x)["the return value"] == (800, True, True)
    assert "the return value" not in uses(lambda a: a.T, x)  # a view: nothing new was written
    assert uses(lambda a: (a[0], a + 1), x) == {
        "argument 0": (800, False, False),
        "the return value[1]": (800, True, True),
    }


def test_setup_gives_the_arguments_and_both_halves_given_run_nothing() -> None:
    x = np.ones(N, np.float32)
    calls: list[int] = []

    def kernel(a: Any) -> None:
        calls.append(1)

    inferred = infer_call(kernel, (), None, setup=lambda: ((x,), {}))
    assert (inferred.tier, inferred.params["bytes"], len(calls)) == ("arguments", 4000, 1)
    given = infer_call(kernel, (x,), None, flops=10.0, nbytes=20.0)
    assert (given.params, len(calls)) == ({"flops": 10.0, "bytes": 20.0, "unit": "tensor"}, 1)
    assert given.dtype == "fp32"  # from the arguments, which were read and not run


def test_the_dtype_is_the_first_floating_arrays() -> None:
    indices, table = np.arange(8), np.ones((100, 4), np.float16)
    assert first_call(lambda i, t: t[i], (indices, table), {}).precision is Precision.FP16
    with pytest.raises(ValueError, match="argument 0 has dtype <U1, which is not one"):
        first_call(lambda s: None, (np.array(["a"]),), {})


def test_a_cuda_tensor_that_requires_grad_is_read_without_touching_its_cuda_array_interface() -> None:
    """PyTorch raises RuntimeError from it (an ``nn.Parameter``): the inference read it, and raised too."""
    from fake_torch import FakeParameter, FakeTensor

    weight = FakeParameter(FakeTensor((64, 64), device="cuda", index=1))
    inferred = infer_call(lambda w: None, (weight,), None, flops=1.0, nbytes=4.0)
    assert inferred.dtype == "fp32"


# - device arrays: compared on the device -


def test_device_arrays_are_compared_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(lazy_loading=False, pool_syncs=False).install(monkeypatch)
    cupy = fake.cupy
    x, z = cupy.empty(1 << 20, cupy.float32), cupy.empty(1 << 20, cupy.float32)

    def scale() -> None:
        cupy.multiply(x, 2, out=z)

    fake.log.clear()
    found = uses(scale)
    assert found == {"captured 'x'": (4 << 20, False, False), "captured 'z'": (4 << 20, True, False)}
    # one copy of each array before the call and one comparison after it, all on the device;
    # only the comparisons' one-byte answers come back to the host
    assert fake.log.count(("kernel", "null")) == 2 + 1 + 2
    transfers = fake.entries("to_host")
    assert transfers == [("to_host", 1), ("to_host", 1)]
    kinds = [entry[0] for entry in fake.log]
    assert kinds.index("synchronize") < kinds.index("to_host")  # the call's work done before the comparison


def test_a_view_of_a_device_array_is_counted_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCupy(lazy_loading=False, pool_syncs=False).install(monkeypatch)
    cupy = fake.cupy
    x = cupy.empty(1024, cupy.float32)
    head = x[:256]

    def write_head(a: Any, v: Any) -> None:
        cupy.copyto(v, 1.0)

    assert uses(write_head, x, head) == {"argument 0": (4096, True, False)}


# - PyTorch: FlopCounterMode, and only for PyTorch callables -


def test_flop_counter_mode_counts_a_small_mlp_as_by_hand() -> None:
    torch = pytest.importorskip("torch")
    batch, d_in, hidden, d_out = 4, 16, 32, 8
    mlp = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, d_out))
    x = torch.ones(batch, d_in)
    inferred = infer_call(mlp, (x,), None)
    # two GEMMs; the bias adds and the ReLU are elementwise work FlopCounterMode does not count
    assert inferred.params["flops"] == 2 * batch * (d_in * hidden + hidden * d_out)
    weights = d_in * hidden + hidden + hidden * d_out + d_out
    assert inferred.params["bytes"] == 4 * (batch * d_in + weights + batch * d_out)
    assert inferred.tier == "flop_counter"
    assert inferred.summary.startswith("bytes from 6 arrays, FLOPs from FlopCounterMode")
    assert {u.where for u in inferred.arrays} >= {
        "parameter '0.weight'",
        "parameter '2.bias'",
        "the return value",
    }


class _Recorder:
    """A FlopCounterMode stand-in that counts its entries (and a fixed number of FLOPs)."""

    entered = 0

    def __init__(self, display: bool = True) -> None:
        self.display = display

    def __enter__(self) -> _Recorder:
        type(self).entered += 1
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def get_total_flops(self) -> int:
        return 1234


def _fake_torch_with_counter(monkeypatch: pytest.MonkeyPatch) -> Any:
    torch = types.ModuleType("torch")
    torch.Tensor = type("Tensor", (), {})
    torch.nn = types.ModuleType("torch.nn")

    class Module:
        def named_parameters(self) -> list[tuple[str, object]]:
            return []

        def named_buffers(self) -> list[tuple[str, object]]:
            return []

        def __call__(self, *args: object) -> None:
            pass

    torch.nn.Module = Module
    counter = types.ModuleType("torch.utils.flop_counter")
    counter.FlopCounterMode = _Recorder
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.utils", types.ModuleType("torch.utils"))
    monkeypatch.setitem(sys.modules, "torch.utils.flop_counter", counter)
    monkeypatch.setattr(_Recorder, "entered", 0)
    return torch


def test_flop_counter_mode_is_entered_for_torch_callables_only(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = _fake_torch_with_counter(monkeypatch)
    x = np.ones(N)
    numpy_kernel = infer_call(lambda a: a * 2, (x,), None)
    assert _Recorder.entered == 0
    assert numpy_kernel.counter == "NumPy"  # its NumPy calls counted instead
    module_kernel = infer_call(torch.nn.Module(), (x,), None)
    assert _Recorder.entered == 1
    assert module_kernel.params["flops"] == 1234
    given = infer_call(torch.nn.Module(), (x,), None, flops=5.0)  # nothing to count
    assert _Recorder.entered == 1
    assert given.params["flops"] == 5.0


def test_with_real_torch_a_numpy_kernel_never_enters_flop_counter_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils import flop_counter

    entered: list[str] = []
    original = flop_counter.FlopCounterMode.__enter__

    def enter(self: Any) -> Any:
        entered.append("entered")
        return original(self)

    monkeypatch.setattr(flop_counter.FlopCounterMode, "__enter__", enter)
    x = np.ones(N)
    infer_call(lambda a: a * 2, (x,), None)
    infer_call(np.add, (x, x), None)
    assert entered == []
    infer_call(lambda t: t @ t, (torch.ones(8, 8),), None)
    assert entered == ["entered"]


def test_without_torch_nothing_imports_it(tmp_path: Any) -> None:
    """In a process where importing torch fails loudly, every tier runs on NumPy kernels."""
    script = textwrap.dedent(
        """
        import functools, sys
        import numpy as np

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch":
                    raise AssertionError(f"imported {name}")
                return None

        sys.meta_path.insert(0, NoTorch())
        from pytest_roofline.timing.footprint import infer_call

        x, y = np.ones(100), np.ones(100)
        assert infer_call(np.add, (x, y), None).tier == "catalogue"
        assert infer_call(lambda a: a * 2, (x,), None).tier == "flop_counter"
        assert infer_call(lambda a: np.asarray(a) * 2, (x,), None).tier == "arguments"
        assert infer_call(functools.partial(np.multiply, x), (y,), None).tier == "catalogue"
        assert "torch" not in sys.modules
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr
