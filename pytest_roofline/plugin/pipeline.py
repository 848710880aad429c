"""The measurement of one call, without pytest: the request's estimate, the cache plan, the engine over a
backend, the verdict. :func:`measure_call` gives the frozen :class:`~..model.verdict.Result`; what it
means for a test is :mod:`.outcome`'s. Importing no pytest, the path can be driven, and tested, from
outside a test run. docs/architecture.md ("One measurement, hop by hop").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ..errors import RooflineError

if TYPE_CHECKING:
    from ..model.core import Device, Estimate
    from ..model.measurement import Measurement
    from ..model.paired_ceilings import ProbeReference
    from ..model.pairing import Round, Side
    from ..model.verdict import Result
    from ..timing.base import Backend
    from ..timing.cache import CachePlan
    from ..timing.calls import KernelCall
    from .against import Against
    from .request import Request
    from .run_devices import Devices
    from .run_state import RunState

#: how a step's errors reach the caller, given the errors it may raise: the plugin passes
#: :class:`.failing.failing_the_test`, so they fail the test with their message alone
Failing = Callable[..., AbstractContextManager[object]]

#: a probe this much faster than at calibration means the calibration was taken under load
_STALE_SPEED = 1.3


def _propagating(*errors: type[Exception]) -> AbstractContextManager[object]:
    """Outside pytest a step's error propagates as it was raised."""
    return contextlib.nullcontext()


def estimate_of(request: Request, device: Device) -> Estimate:
    """The floor of ``request`` on ``device``."""
    from ..model.estimate import estimate

    est = estimate(request.op, dtype=request.dtype, device=device, math=request.math, **request.params)
    if request.inference is not None:  # the report names what was inferred: "auto: gemm M=... bf16"
        est = dataclasses.replace(est, label=request.inference.label)
    return est


def measure_call(
    request: Request,
    kernel: KernelCall,
    *,
    devices: Devices,
    state: RunState,
    nodeid: str,
    remeasure: bool,
    suspect: Callable[[Result], bool] | None = None,
    failing_the_test: Failing = _propagating,
) -> Result:
    """Time ``kernel`` as ``request`` asks, on the device and backend its spec means, and judge it.

    ``remeasure``: measure once more before a miss is final (enforce mode); ``suspect(result)``: a
    result worth a second measurement too (one beyond the baseline's threshold). The notes this
    measurement has for the summary (threads that waited, a calibration taken under load, clocks
    nobody watched) go to ``state``.
    """
    __tracebackhide__ = True
    settings = state.settings
    from ..timing.calls import SetupError

    with failing_the_test(RooflineError):
        device = devices.device(request.device_spec)
        est = estimate_of(request, device)
        backend = devices.backend(request.device_spec, device)
    from ..machine.cpupeak import cpu_peak
    from ..model.verdict import first_budget_s, result_of, second_look
    from ..timing import backend_latency
    from ..timing.cache import plan_cache
    from ..timing.engine import measuring_alone

    # one measurement at a time in this process, from its copies to its re-measure: two threads
    # timing at once would each slow the other's kernel, and a rotation's copies must outlive it
    with measuring_alone() as waited:
        if request.cache == "warm":
            with failing_the_test(RooflineError):
                est = warm_floor(est, devices.with_cache_levels(request.device_spec))
        on_cpu = backend.times_host  # it times host code: the host's load matters
        partner = state.partner()
        # the base's side of an A/B comparison times rounds alone, which take no probe
        following = state.against is not None and state.against.follows
        reference = _probe_reference(est, devices, state) if on_cpu and not following else None
        peak = cpu_peak() if on_cpu and est.device.kind == "cpu" else None
        # the copies, warm-up, probes, sampling, a re-measure: one window of the device's, so that
        # copies made for one worker's kernel never run beside another's timing
        with devices.measuring(request.device_spec):
            budget_s = request.policy.max_time_s
            plan = plan_cache(
                request.cache, op_bytes=est.bytes, llc_bytes=est.device.llc_bytes, fn=kernel.fn,
                args=kernel.args, kwargs=kernel.kwargs, setup=kernel.setup,
                budget_s=budget_s, clock=backend.clock, asked=request.cache_asked,
                paired=state.against is not None and on_cpu,
            )  # fmt: skip
            try:
                # what the process makes once for all its measurements is no one measurement's: the
                # copies' pool (made_s leaves it out), the flush buffer, the probe's arrays, and the
                # latency floor, bounded apart (a quarter of the budget of the test that measures it)
                if plan.state == "cold":
                    _prepare_flush(backend, est.bandwidth)
                with failing_the_test(RooflineError):  # a stream= the backend cannot take
                    measure_once = _measurer(kernel, request, plan, backend, reference, state, on_cpu=on_cpu)
                rounds = None
                if state.against is not None:  # rounds take no probe: the measurer without one
                    unprobed = (
                        measure_once
                        if reference is None
                        else _measurer(kernel, request, plan, backend, None, state, on_cpu=on_cpu)
                    )
                    rounds = _Rounds(unprobed, est, state)
                if partner is not None:
                    # at a test's later call the base's test goes on to its own meanwhile, copies
                    # and all: nothing of this side's is timed until it is ready there
                    partner.wait_ready()
                with failing_the_test(SetupError), backend.blocking(request.block):
                    latency_floor_s = 0.0
                    if settings.latency_floor == "on":
                        latency_floor_s = backend_latency.latency_floor_s(
                            backend, flushed=plan.flush, budget_s=budget_s
                        )
                    if rounds is not None and following:
                        result = _follow(state, est, request, rounds, nodeid=nodeid)
                    else:  # measured here, not in a callee: the frames from the fixture to the timer stay few
                        judged = functools.partial(
                            result_of, est, min_fraction=request.min_fraction, name=request.name,
                            nodeid=nodeid, reference=reference, peak=peak, latency_floor_s=latency_floor_s,
                            inference=request.inference, spent_s=plan.made_s,
                        )  # fmt: skip
                        measurements = [measure_once(first_budget_s(budget_s, plan.made_s))]
                        result = judged(measurements)
                        if remeasure and second_look(result, suspect):
                            measurements.append(measure_once(budget_s))
                            result = judged(measurements)
                        if partner is not None and rounds is not None:
                            result = _beside_the_base(result, rounds, partner, request, nodeid, budget_s)
            finally:
                plan.release()  # the copies, and what they took on a GPU
                if plan.flush:  # the flush buffer is not needed until the next flushed measurement
                    backend.release_memory()
    if waited:
        state.say_once(
            "waited",
            "measurements on two threads at once waited for each other: one is timed at a time in a"
            " process, as two at once would slow each other's kernels",
        )
    if result.ceiling is not None and result.ceiling.speed > _STALE_SPEED:
        state.say_once(
            "stale",
            f"this CPU ran {result.ceiling.speed:.1f}x faster than when it was calibrated (probe"
            f" {result.ceiling.probe}): the calibration was taken under load; paired ceilings make"
            " up for it, and `roofline calibrate --force` measures it again",
        )
    return result


def _beside_the_base(
    result: Result, head: _Rounds, partner: Against, request: Request, nodeid: str, budget_s: float
) -> Result:
    """With ``--roofline-against``: the head's result, with the base's version of the same
    measurement beside it (:meth:`.against.Against.pair`, in turns)."""
    from ..model.verdict import MULTITHREADED

    parallelism = result.measurement.parallelism  # known on the host only
    one_cpu = parallelism is not None and parallelism < MULTITHREADED
    vs_base = partner.pair(nodeid, request.name, lambda s: head(s)[1], max_time_s=budget_s, one_cpu=one_cpu)
    return dataclasses.replace(result, vs_base=vs_base)


class _Rounds:
    """The rounds of an A/B comparison on this side (:mod:`.against`): each a short measurement of the
    kernel, as its :class:`~..model.pairing.Round`, timing no probe (each side's time is judged against
    its own floor). On the host, both sides' kernels run on copies in the pool the two processes share
    (:class:`~..timing.copies.SharedPool`, planned with ``paired``). Why, with the runs that showed it:
    docs/ci.md ("Gate a pull request against its base").
    """

    def __init__(self, measure_once: Callable[[float], Measurement], est: Estimate, state: RunState) -> None:
        self.est = est
        self._measure = measure_once  # the measurement's cache plan and OS readings, no probe
        self.side: Side = "base" if state.against is not None and state.against.follows else "head"

    def __call__(self, budget_s: float) -> tuple[Measurement, Round]:
        from ..model.pairing import Round

        m = self._measure(budget_s)
        heavy = m.contention is not None and m.contention.level == "heavy"
        return m, Round(self.side, m.time_s, self.est.floor_s, heavy)


def _follow(
    state: RunState,
    est: Estimate,
    request: Request,
    rounds: Callable[[float], tuple[Measurement, Round]],
    *,
    nodeid: str,
) -> Result:
    """The base's side of a measurement: the rounds the head asks for; its result is the last round's
    (the base's process reports nothing a user reads)."""
    from ..model.verdict import MIN_FIRST_BUDGET_S, result_of
    from .against import Follower

    follower = state.against
    assert isinstance(follower, Follower)
    taken: list[Measurement] = []

    def one(budget_s: float) -> Round:
        m, r = rounds(budget_s)
        taken.append(m)
        return r

    follower.serve(request.name, one)
    if not taken:  # the head made no such call: one warm-up call and one sample, for the record
        taken.append(rounds(MIN_FIRST_BUDGET_S)[0])
    return result_of(est, taken[-1:], request.min_fraction, name=request.name, nodeid=nodeid)


def warm_floor(est: Estimate, device: Device) -> Estimate:
    """The cache-aware roofline: a warm op's bytes at the bandwidth of the cache level of ``device``
    that holds them (DRAM's, when none does or the device names no level)."""
    from ..model.core import at_level

    if device is not est.device and device.levels and not est.device.levels:
        est = dataclasses.replace(est, device=dataclasses.replace(est.device, levels=device.levels))
    level = est.device.level_for(est.bytes)
    return est if level is None else at_level(est, level)


def _measurer(
    kernel: KernelCall,
    request: Request,
    plan: CachePlan,
    backend: Backend,
    reference: ProbeReference | None,
    state: RunState,
    *,
    on_cpu: bool,
) -> Callable[[float], Measurement]:
    """``measure_once(budget_s)``: the engine, with this kernel's cache plan, probe and OS readings."""
    from ..timing.clocks import ClockWatcher, unwatched_note
    from ..timing.engine import measure

    policy = request.policy
    snapshot = None
    if on_cpu:
        from ..timing.contention import take_snapshot

        snapshot = take_snapshot

    # a stream= given to a backend that times none (the base class's on_stream) is refused here, before
    # any timing; a backend that takes streams enters it around each measurement
    backend.on_stream(request.stream)
    probe = None
    if reference is not None:  # built inside the device lock, in the budget: it allocates its arrays
        from ..timing.probes import probe_for

        probe = probe_for(reference)

    def measure_once(budget_s: float) -> Measurement:
        __tracebackhide__ = True
        budgeted = dataclasses.replace(policy, max_time_s=budget_s)
        with backend.on_stream(request.stream), backend.watch_clocks() as watcher:
            # a watcher that can say which samples ran at slowed clocks has them left out
            throttle = watcher if isinstance(watcher, ClockWatcher) else None
            m = measure(
                kernel.fn, *kernel.args, kwargs=kernel.kwargs, setup=kernel.setup, policy=budgeted,
                backend=backend, probe=probe, snapshot=snapshot, cache=plan, throttle=throttle,
            )  # fmt: skip
        if watcher is None:
            return m
        if not watcher.log.watched and (note := unwatched_note()):
            state.notes.append(f"GPU clocks are not watched: {note}")
        return dataclasses.replace(m, clocks=watcher.log)

    return measure_once


def _probe_reference(est: Estimate, devices: Devices, state: RunState) -> ProbeReference | None:
    """The calibration's probe for the resource bounding ``est``, when its ceilings are this CPU's
    measured ones and paired ceilings are on."""
    if state.settings.ceilings != "paired" or not devices.measured_cpu or est.device.kind != "cpu":
        return None
    from ..machine.calibrate import cpu_calibration
    from ..model.core import Source
    from ..model.paired_ceilings import resource_of

    # a peaks file's figure is the user's, not the probe's
    if est.bounding_figure.source is not Source.MEASURED:
        return None
    if est.bound == "memory" and est.memory_level != "dram":  # the probe streams from DRAM
        return None

    return cpu_calibration().probes.get(resource_of(est))


def _prepare_flush(backend: Backend, bandwidth: float) -> None:
    """Before a cold measurement: the backend's flush buffer made (once a process, outside any budget),
    and what a flush should cost before the engine has seen one: the buffer it reads, at the device's
    bandwidth (:func:`..timing.budget.expect_flush`)."""
    from ..timing.budget import expect_flush

    backend.prepare_flush()
    if backend.flush_bytes is not None and bandwidth > 0:
        expect_flush(backend, backend.flush_bytes / bandwidth)
