"""The CUDA timer backend, device properties and measured ceilings, through CuPy.

A package of one concern per module: :mod:`.loading` (CuPy, imported on first CUDA use, and the
device checks), :mod:`.device` (what the driver reports), :mod:`.backend` (:class:`CudaBackend`),
:mod:`.streams` (PyTorch's streams too), :mod:`.blocking`, :mod:`.graphs` and :mod:`.flush` (what the
backend does around a window), :mod:`.kernels` (the CUDA C it launches), :mod:`.memory` (CuPy's pool
given back), :mod:`.measured_ceilings` (measured bandwidth and matmul FLOP/s) and
:mod:`.launch_latency` (the latency floor). No module here imports :mod:`cupy` at import time:
importing the package, or calling :func:`.loading.device_count` without CuPy, costs nothing and
raises nothing.

Every CuPy call in this package is written against CuPy's documented API (docs.cupy.dev) and its source
(github.com/cupy/cupy); ``tests/fake_cupy.py`` mirrors exactly these, with their signatures:

- ``cupy.cuda.Device(index)`` as a context manager; ``cupy.cuda.runtime.getDeviceCount()``,
  ``getDeviceProperties(dev)`` (a dict; ``name`` and ROCm's ``gcnArchName`` are bytes),
  ``deviceGetAttribute(attr, dev)`` with the symbolic ``cudaDevAttr*`` names (HIP's values
  differ), ``is_hip``, ``memsetAsync(ptr, value, size, stream)``
  (``cupy_backends/cuda/api/runtime.pyx``, ``_runtime_enum.pxd``).
- ``cupy.cuda.Event()``, ``Event.record(stream)``, ``Event.synchronize()``,
  ``cupy.cuda.get_elapsed_time(start, end)`` in milliseconds, ``cupy.cuda.get_current_stream()``,
  ``cupy.cuda.Stream(non_blocking=True)``, ``Stream.record()``, ``Stream.wait_event(event)``,
  ``with stream:``, ``cupy.cuda.ExternalStream(ptr, device_id)`` and, from CuPy 14 (which
  deprecates ``ExternalStream``), ``cupy.cuda.Stream.from_external(obj)`` for objects with
  ``__cuda_stream__`` (``cupy/cuda/stream.pyx``).
- Graph mode: ``Stream.begin_capture()``, ``Stream.end_capture()`` -> ``cupy.cuda.Graph``,
  ``Graph.launch(stream)`` (``cupy/cuda/stream.pyx``, ``cupy/cuda/graph.pyx``; stream capture
  came with cupy/cupy#4567, CuPy v10; not supported on HIP; cuBLAS and most CUDA libraries are
  refused during capture, cupy/cupy#6290, so graph mode suits CuPy elementwise/raw kernels).
- Ceilings: ``cupy.empty``, ``cupy.copyto`` (a cudaMemcpyAsync for equal, contiguous arrays),
  ``cupy.random.random(size, dtype)``, ``ndarray.astype(dtype)`` and ``cupy.matmul(a, b, out=c)``;
  ``cupy.get_default_memory_pool().free_all_blocks()`` after them (``cupy/cuda/memory.pyx``).
- Blocking rules: ``Event.done`` (``cudaEventQuery``, ``cupy/cuda/stream.pyx``) after the delay
  kernel proves a kernel asynchronous; ``Stream.synchronize()``; ``Graph.debug_dot_str()``
  (``cupy/cuda/graph.pyx``, ``cudaGraphDebugDotPrint``) counts a captured graph's nodes.
- The blocking kernel and the latency floor: ``cupy.RawKernel(code, name)`` called as
  ``kernel(grid, block, args, stream=stream)`` (``cupy/_core/raw.pyx``, ``cupy/cuda/function.pyx``),
  ``cupy.cuda.PinnedMemory(size, flags)`` with ``cupy.cuda.runtime.hostAllocMapped``
  (``cupy/cuda/pinned_memory.pyx``, ``cupy_backends/cuda/api/runtime.pxd``). Under unified
  addressing (every 64-bit CUDA platform) a mapped pinned pointer is valid in device code as is.
"""

from __future__ import annotations
