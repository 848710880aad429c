"""What the driver reports about a GPU (``cupy.cuda.runtime``), and the roofline device made of it."""

from __future__ import annotations

from pytest_roofline.model.core import Device
from pytest_roofline.model.devices import DeviceProperties, from_properties
from pytest_roofline.timing.cuda.loading import require_device, using_device


def device_properties(index: int = 0) -> DeviceProperties:
    """What the driver reports about GPU ``index``, through ``cupy.cuda.runtime``."""
    cupy = require_device(index)
    runtime = cupy.cuda.runtime
    with using_device(index):
        props = runtime.getDeviceProperties(index)

        def read(key: str, attribute: str) -> int:
            value = props.get(key)
            if value:
                return int(value)
            # CUDA 13 removed clockRate/memoryClockRate from cudaDeviceProp and some CuPy builds drop
            # the keys; the attribute query is the robust path. Symbolic names: HIP's values differ.
            enum = getattr(runtime, attribute, None)
            if enum is None:
                return 0
            try:
                return int(runtime.deviceGetAttribute(enum, index))
            except RuntimeError:  # CUDARuntimeError: attribute unsupported on this device
                return 0

        is_hip = bool(getattr(runtime, "is_hip", False))
        return DeviceProperties(
            name=_text(props.get("name", b"")),
            kind="rocm" if is_hip else "cuda",
            major=int(props.get("major", 0)),
            minor=int(props.get("minor", 0)),
            multiprocessors=read("multiProcessorCount", "cudaDevAttrMultiProcessorCount"),
            clock_khz=read("clockRate", "cudaDevAttrClockRate"),
            memory_clock_khz=read("memoryClockRate", "cudaDevAttrMemoryClockRate"),
            bus_width_bits=read("memoryBusWidth", "cudaDevAttrGlobalMemoryBusWidth"),
            l2_bytes=read("l2CacheSize", "cudaDevAttrL2CacheSize"),
            arch_name=_text(props.get("gcnArchName", b"")) if is_hip else "",
        )


def cuda_device(index: int = 0) -> Device:
    """The roofline :class:`Device` for GPU ``index``: the table's entry, or derived from its properties."""
    return from_properties(device_properties(index))


def _text(value: object) -> str:
    """The driver's C strings arrive as NUL-padded bytes."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value).strip("\x00").strip()
