"""Where a kernel's arrays live (``timing/arrays.py``): found where rotation finds them, and placed by
what each framework says of its arrays, against the fake CuPy and fake PyTorch of a 4-GPU machine."""

from __future__ import annotations

import array
import functools
from collections import namedtuple
from typing import Any

import numpy as np
import pytest
from fake_cupy import FakeCupy
from fake_torch import FakeTorch

from pytest_roofline.timing.arrays import Home, Placement, arguments_of_call, home_of, placement_of


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeCupy, Any]:
    """Four GPUs, with CuPy and PyTorch on them; the torch module is returned beside the fake CuPy."""
    world = FakeCupy(device_count=4).install(monkeypatch)
    torch = FakeTorch(world).install(monkeypatch).torch
    return world, torch


def cupy_array_on(world: FakeCupy, index: int) -> Any:
    with world.cupy.cuda.Device(index):
        return world.cupy.empty((8,), np.float32)


# -- where one array lives -------------------------------------------------------------------------


def test_host_arrays_are_the_host(machine: tuple[FakeCupy, Any]) -> None:
    _, torch = machine
    host = Home("host")
    assert home_of(np.ones(4)) == host
    assert home_of(np.ones((2, 2)).T) == host  # a view too
    assert home_of(torch.randn(4)) == host  # a CPU tensor
    for buffer in (b"abcd", bytearray(4), memoryview(b"abcd"), array.array("f", [1.0, 2.0])):
        assert home_of(buffer) == host, buffer


def test_gpu_arrays_say_which_gpu(machine: tuple[FakeCupy, Any]) -> None:
    world, torch = machine
    assert home_of(cupy_array_on(world, 2)) == Home("gpu", 2)
    assert home_of(torch.randn(4, device="cuda:3")) == Home("gpu", 3)
    world.cupy.cuda.runtime.setDevice(1)
    assert home_of(torch.randn(4, device="cuda")) == Home("gpu", 1)  # made on the current device


def test_a_tensor_that_requires_grad_is_placed_without_touching_its_cuda_array_interface(
    machine: tuple[FakeCupy, Any],
) -> None:
    """PyTorch raises RuntimeError from ``__cuda_array_interface__`` for it (an ``nn.Parameter``)."""
    _, torch = machine
    weight = torch.randn(4, 4, device="cuda:1", requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        _ = weight.__cuda_array_interface__
    assert home_of(weight) == Home("gpu", 1)


def test_values_that_are_no_data_say_nothing(machine: tuple[FakeCupy, Any]) -> None:
    """Scalars are parameters, wherever the kernel runs; a meta tensor has no data at all."""
    _, torch = machine
    for value in (1, 2.5, "cuda", None, np.float32(1.0), np.array(3.0), torch.randn(), int, object()):
        assert home_of(value) is None, value
    assert home_of(torch.randn(4, device="meta")) is None
    assert home_of(torch.randn(device="cuda:2")) == Home("gpu", 2)  # a GPU scalar is on the GPU


METAL = Home("other", 0, "DLPack device type 8")


class _Protocols:
    """An array known only by the protocols it speaks."""

    def __init__(self, **attributes: Any) -> None:
        for name, value in attributes.items():
            setattr(self, name, value)


@pytest.mark.parametrize(
    ("attributes", "home"),
    [
        ({"__dlpack__": print, "__dlpack_device__": lambda: (1, 0)}, Home("host")),
        ({"__dlpack__": print, "__dlpack_device__": lambda: (3, 0)}, Home("host")),  # pinned
        ({"__dlpack__": print, "__dlpack_device__": lambda: (2, 3)}, Home("gpu", 3)),
        ({"__dlpack__": print, "__dlpack_device__": lambda: (10, 1)}, Home("gpu", 1)),  # ROCm
        ({"__dlpack__": print, "__dlpack_device__": lambda: (13, 0)}, Home("gpu", 0)),  # managed
        (
            {"__dlpack__": print, "__dlpack_device__": lambda: (8, 0)},
            Home("other", 0, "DLPack device type 8"),
        ),
        ({"__cuda_array_interface__": {"shape": (4,)}}, Home("gpu")),  # no index in the protocol
        ({"__array_interface__": {"shape": (4,)}}, Home("host")),
        ({"__dlpack__": print, "device": "cpu"}, Home("host")),  # NumPy 2's array API name
        ({"__dlpack__": print, "device": _Protocols(type="mps", index=None)}, Home("other", None, "mps")),
        ({"__dlpack__": print, "__dlpack_device__": lambda: 1 / 0}, None),  # it raised: it says nothing
        ({"device": _Protocols(type="cuda", index=0)}, None),  # no array protocol: not an array
    ],
)
def test_each_protocol_says_where_its_array_lives(attributes: dict[str, Any], home: Home | None) -> None:
    assert home_of(_Protocols(**attributes)) == home


# -- finding the arrays of a call ------------------------------------------------------------------


def test_the_arrays_are_found_where_rotation_finds_them() -> None:
    Pair = namedtuple("Pair", "a b")
    a, b, c, d, e, f = (np.full(2, i) for i in range(6))

    def kernel(*args: object, **kwargs: object) -> None: ...

    found = list(
        arguments_of_call(functools.partial(kernel, a, w=b), [[c, (d,)], Pair(e, 1)], {"x": {"k": f}, "n": 3})
    )
    assert [(where, value) for where, value in found if isinstance(value, np.ndarray)] == [
        ("argument 0 of the functools.partial", a),
        ("keyword 'w' of the functools.partial", b),
        ("argument 0[0]", c),
        ("argument 0[1][0]", d),
        ("argument 1[0]", e),
        ("kwargs['x']['k']", f),
    ]
    assert ("kwargs['n']", 3) in found


def test_a_bound_methods_object_is_an_argument(machine: tuple[FakeCupy, Any]) -> None:
    """``roofline(x.sum)``: ``x`` is where the kernel runs."""
    _, torch = machine
    x = torch.randn(4, device="cuda:2")
    assert placement_of(x.clone, (), None) == Placement(gpus={2: "the kernel's object"})
    assert placement_of(np.ones(4).sum, (), None) == Placement(host="the kernel's object")


def test_placement_of_a_call_names_each_place_and_its_first_array(machine: tuple[FakeCupy, Any]) -> None:
    world, torch = machine
    x, w = torch.randn(8, device="cuda:1"), cupy_array_on(world, 1)
    alpha = torch.randn(1)  # a parameter left on the host
    placement = placement_of(lambda *a: None, (np.float32(2.0), alpha, x), {"w": w})
    assert placement == Placement(host="argument 1", gpus={1: "argument 2"})
    assert placement_of(lambda: None, (), None) == Placement()  # no arrays: a closure keeps its own


def test_a_list_that_holds_itself_ends_the_walk() -> None:
    """Every walk of a call's arguments stops at the same depth (placement recursed until it crashed)."""
    x = np.ones(4)
    nest: list[object] = [x]
    nest.append(nest)
    assert placement_of(print, (nest,), None) == Placement(host="argument 0[0]")
