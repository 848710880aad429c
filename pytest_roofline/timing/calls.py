"""The kernel as the engine calls it: its arguments checked, ``setup`` before every call, and a
backend's windows of it, with which of them the backend saw preempted."""

from __future__ import annotations

import functools
import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pytest_roofline.errors import InvalidTypeError, RooflineUsageError
from pytest_roofline.timing.base import Backend, Kernel


class SetupError(RooflineUsageError, TypeError):
    """``setup`` returned neither None nor ``(args, kwargs)``, or arguments the call gave too."""


def call_once(
    fn: Kernel,
    args: Sequence[object] = (),
    kwargs: Mapping[str, object] | None = None,
    setup: Callable[[], object] | None = None,
) -> object:
    """One untimed call, ``setup`` first: what a run that times nothing does with a kernel (its
    ``kwargs`` and ``setup`` checked by the caller, :func:`check_call`)."""
    __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
    kernel, call_args = KernelCall(fn, tuple(args), kwargs, setup).prepare()
    return kernel(*call_args)


def check_call(kwargs: object, setup: object) -> None:
    """A TypeError naming ``kwargs`` or ``setup`` and the value, unless both are usable."""
    if kwargs is not None:
        if not isinstance(kwargs, Mapping):
            raise InvalidTypeError(
                "kwargs must be a mapping of the kernel's keyword arguments, such as kwargs={'out': out};"
                f" got {reprlib.repr(kwargs)} ({type(kwargs).__name__})"
            )
        _check_keys("kwargs", kwargs)
    if setup is not None and not callable(setup):
        raise InvalidTypeError(
            f"setup must be callable (it runs before every timed call); got {reprlib.repr(setup)}"
            f" ({type(setup).__name__})"
        )


def _check_keys(what: str, kwargs: Mapping[object, object]) -> None:
    for key in kwargs:
        if not isinstance(key, str):
            raise InvalidTypeError(
                f"{what} keys are the kernel's keyword names, strings; got {key!r} ({type(key).__name__})"
            )


def checked_windows(backend: Backend, windows: list[float], samples: int) -> tuple[list[float], list[bool]]:
    """The windows a backend's run returned, and which of them it saw preempted (none, if it cannot
    tell). Called after the run, not around it: the frames from the fixture to the timer stay few."""
    if len(windows) != samples:
        raise RuntimeError(f"backend {backend.name!r} returned {len(windows)} windows for {samples} samples")
    preempted = backend.last_preempted
    return windows, list(preempted) if len(preempted) == samples else [False] * samples


@dataclass(frozen=True, slots=True)
class KernelCall:
    """A kernel's call (what a ``roofline(...)`` call asks to run): the kernel, its arguments and
    keywords, and ``setup`` before every call. Without setup, a round is one backend run of
    back-to-back calls; with setup, each call is a backend run of its own, setup first, so setup
    (host code) is never timed, on a CUDA stream either; a window of several calls is their sum.
    """

    fn: Kernel
    args: tuple[object, ...] = ()
    kwargs: Mapping[str, object] | None = None
    setup: Callable[[], object] | None = None
    #: the ``roofline(...)`` call's keywords that went to the kernel, being neither the op's nor the
    #: fixture's
    forwarded: tuple[str, ...] = ()
    #: ``fn`` with ``kwargs`` bound, once: the backends call ``bound(*args)``, and a partial costs a
    #: C-level call, not a Python frame
    bound: Kernel = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bound = functools.partial(self.fn, **self.kwargs) if self.kwargs else self.fn
        object.__setattr__(self, "bound", bound)

    def run(
        self,
        backend: Backend,
        *,
        calls: int,
        samples: int,
        flush: bool,
        after: Callable[[], None] | None = None,
    ) -> tuple[list[float], list[bool]]:
        """``samples`` windows of ``calls`` calls, and which were preempted; ``after()`` follows every
        backend run (the sampler reads the backend's view of the round there)."""
        __tracebackhide__ = True  # a failing kernel shows its own frames, not ours
        if self.setup is None:
            timed = backend.run(self.bound, self.args, calls=calls, samples=samples, flush=flush)
            if after is not None:
                after()
            return checked_windows(backend, timed, samples)
        windows: list[float] = []
        flags: list[bool] = []
        for _ in range(samples):
            window, preempted = 0.0, False
            for _ in range(calls):
                fn, args = self.prepare()
                (one,), (hit,) = checked_windows(
                    backend, backend.run(fn, args, calls=1, samples=1, flush=flush), 1
                )
                if after is not None:
                    after()
                window += one
                preempted = preempted or hit
            windows.append(window)
            flags.append(preempted)
        return windows, flags

    def prepare(self) -> tuple[Kernel, tuple[object, ...]]:
        """Run ``setup`` (if any) and return what to call next: the kernel and its positional arguments."""
        __tracebackhide__ = True  # a failing setup shows its own frames, not ours
        if self.setup is None:
            return self.bound, self.args
        made = self.setup()
        if made is None:
            return self.bound, self.args
        args, kwargs = self._arguments(made)
        return (functools.partial(self.fn, **kwargs) if kwargs else self.fn), args

    def _arguments(self, made: object) -> tuple[tuple[object, ...], Mapping[str, object]]:
        if not (
            isinstance(made, tuple)
            and len(made) == 2
            and isinstance(made[0], (tuple, list))
            and isinstance(made[1], Mapping)
        ):
            raise SetupError(
                "setup must return None, or (args, kwargs) for the kernel's next call (a tuple or list"
                f" and a dict); got {reprlib.repr(made)} ({type(made).__name__})"
            )
        if self.args or self.kwargs:
            raise SetupError(
                "setup returned the kernel's arguments, and the call gave arguments too:"
                " give them in one place (the call's, with a setup that returns None, or setup's)"
            )
        from pytest_roofline.timing.arguments import check_has_data

        try:
            _check_keys("setup's kwargs", made[1])
            check_has_data(None, made[0], made[1], given_by="setup's ")
        except (TypeError, ValueError) as exc:
            raise SetupError(str(exc)) from None
        return tuple(made[0]), made[1]
