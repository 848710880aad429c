"""Graph mode: a run's calls captured into one CUDA graph, whose replays are timed.

Stream capture came with cupy/cupy#4567 (CuPy v10; not on HIP). cuBLAS and most CUDA libraries
are refused during capture (cupy/cupy#6290), so graph mode suits CuPy elementwise and raw kernels;
what cannot be captured is a RuntimeError that says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import suppress
from typing import Any

from pytest_roofline.model.devices import DeviceProperties
from pytest_roofline.timing.base import Kernel

from ...errors import MeasurementError, UnavailableError


def check_graph_support(cupy: Any, props: DeviceProperties) -> None:
    """A RuntimeError where this CuPy or device cannot capture a stream."""
    if props.kind == "rocm":
        raise UnavailableError("graph mode needs CUDA stream capture, which CuPy does not support on ROCm")
    if not hasattr(cupy.cuda.Stream, "begin_capture"):
        raise UnavailableError("graph mode needs CuPy >= 10 (cupy.cuda.Stream.begin_capture)")


def capture_graph(
    cupy: Any, fn: Kernel, args: Sequence[object], calls: int, stream: Any, activity: Any
) -> tuple[Any, int | None, int | None]:
    """``calls`` calls of ``fn(*args)`` captured on ``stream`` and launched once, untimed (the first
    launch uploads the graph); the graph, and its kernel nodes and all nodes (None when unreadable).
    A RuntimeError when launches escaped the capture: the graph holds nothing, or fewer kernels than
    ``calls`` eager calls ran (counted by CUPTI's ``activity``; not checked without it)."""
    # one eager call first: kernel compilation, module loading and memory-pool growth belong
    # outside the capture (older drivers refuse module loading while capturing)
    fn(*args)
    eager = _eager_kernels(fn, args, stream, activity)
    stream.begin_capture()
    try:
        for _ in range(calls):
            fn(*args)
    except BaseException as exc:
        with suppress(Exception):  # leave capture mode; the kernel's error is the one to see
            stream.end_capture()
        # the CUDA runtime's stream-capture errors (cudaErrorStreamCapture*), as CuPy and PyTorch word them
        if isinstance(exc, Exception) and re.search(r"captur", str(exc), re.IGNORECASE):
            raise MeasurementError(_capture_message(fn, exc)) from exc
        raise
    try:
        graph = stream.end_capture()
    except Exception as exc:
        raise MeasurementError(_capture_message(fn, exc)) from exc
    verbose = getattr(cupy.cuda.runtime, "cudaGraphDebugDotFlagsVerbose", DOT_VERBOSE)
    kernels, nodes = graph_nodes(graph, verbose)
    if nodes == 0:
        raise MeasurementError(_escape_message(fn, calls))
    if eager is not None and kernels is not None and kernels < eager * calls:
        raise MeasurementError(_escape_message(fn, calls, eager=eager, captured=kernels))
    graph.launch(stream)
    return graph, kernels, nodes


def _eager_kernels(fn: Kernel, args: Sequence[object], stream: Any, activity: Any) -> int | None:
    """How many kernels one eager call runs, counted by CUPTI (None without it): what the graph
    of ``calls`` calls must hold, or some escaped the capture."""
    if activity is None:
        return None
    activity.start()
    try:
        fn(*args)
        stream.synchronize()
    finally:
        records = activity.stop()
    return len(records)


#: ``cudaGraphDebugDotFlagsVerbose``: every node's type heads its label, ``label="{KERNEL``
DOT_VERBOSE = 1
#: a node statement's first line: a node id at the start of a line, then ``[`` (an edge has ``->``)
_NODE = re.compile(r'^"graph_\d+_node_\d+"\[([^\n]*)', re.MULTILINE)


def graph_nodes(graph: Any, verbose: int = DOT_VERBOSE) -> tuple[int | None, int | None]:
    """Kernel nodes and all nodes of a captured graph, from CUDA's DOT print of it at ``verbose``
    flags (``Graph.debug_dot_str``); (None, None) where it cannot be read."""
    dump = getattr(graph, "debug_dot_str", None)
    if dump is None:
        return None, None
    try:
        text = str(dump(verbose))
    except Exception:  # an old CuPy or driver without cudaGraphDebugDotPrint
        return None, None
    heads = _NODE.findall(text)
    # the default print (flags 0) marks a kernel node as an octagon
    kernels = sum(1 for head in heads if 'label="{KERNEL' in head or 'shape="octagon"' in head)
    return kernels, len(heads)


def _escape_message(fn: Kernel, calls: int, *, eager: int | None = None, captured: int = 0) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    what = (
        f"an eager call of {name} ran {eager} kernel(s) (CUPTI), but the graph of {calls} call(s) holds"
        f" {captured}: {eager * calls - captured} launch(es) escaped the capture"
        if eager is not None
        else f"graph mode captured no GPU work from {calls} call(s) of {name}: its launches escaped the"
        " capture"
    )
    return (
        f"{what}"
        " (they ran on another stream: on the legacy default stream beside a non-blocking capture"
        " stream, a launch runs at once and is missing from the graph), so a replay would time"
        " nothing; launch on the current stream (the one given as stream=), or time it without graph=True"
    )


def _capture_message(fn: Kernel, exc: BaseException) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return (
        f"graph mode cannot capture {name}: {exc}. A kernel that synchronizes with the host, allocates"
        " with cudaMalloc, launches on another stream, or calls a library that refuses capture (cuBLAS"
        " through CuPy, cupy/cupy#6290) cannot be timed as a CUDA graph; time it without graph=True"
    )
