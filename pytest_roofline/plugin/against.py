"""``--roofline-against REF``: every measuring test beside its base's version, in the same job.

The head (the run the user started) runs a second pytest process in the base's tree, the follower,
and the two take turns on the device, one message at a time over a socket pair. The messages and
their order: docs/ci.md ("How the two processes take turns").
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pytest

from ..errors import RooflineUsageError
from ..model.pairing import Unpaired
from .options import FOLLOW_FD, POOL_FD

if TYPE_CHECKING:
    from ..model.pairing import Pairing, Round
    from .base_checkout import BaseCheckout
    from .options import SessionSettings

#: how long the follower may take to start and collect (seconds)
COLLECT_TIMEOUT_S = 300.0
#: how long one message may take to come back (a base kernel's round, its test's setup)
REPLY_TIMEOUT_S = 600.0
#: a test's rounds, both sides together, may spend this many times ``--roofline-max-time``
ROUNDS_BUDGET = 2.0
#: each round's own budget is ``--roofline-max-time`` over this, and at least MIN_ROUND_S
ROUNDS_PER_BUDGET = 12
MIN_ROUND_S = 0.03
#: at most this many ABBA blocks of four rounds
MAX_BLOCKS = 8


class BaseUnavailable(RooflineUsageError):
    """The base could not be prepared, started or collected: the comparison cannot hold."""


def _receive(connection: Connection, timeout_s: float, what: str) -> tuple[Any, ...]:
    if not connection.poll(timeout_s):
        raise BaseUnavailable(
            f"--roofline-against: the base process did not answer in {timeout_s:.0f} s ({what})"
        )
    try:
        message = connection.recv()
    except (EOFError, OSError):
        raise BaseUnavailable(f"--roofline-against: the base process ended ({what})") from None
    return tuple(message)


# -- the head's side -----------------------------------------------------------------------------


@dataclass
class Against:
    """The head's partner: the base checkout, the follower process, and the comparison of each test."""

    settings: SessionSettings
    checkout: BaseCheckout
    process: subprocess.Popen[bytes]
    connection: Connection
    log: Path
    #: the node ids the base collected
    collected: frozenset[str] = frozenset()
    #: the test the follower is running now, None between tests
    running: str | None = None
    #: the follower's message that came while the head waited for it to be ready, not yet acted on
    pending: tuple[Any, ...] | None = None
    follows: ClassVar[Literal[False]] = False

    @classmethod
    def start(cls, config: pytest.Config, settings: SessionSettings) -> Against:
        """Prepare the base and start its process (its collection goes on while the head collects)."""
        from .base_checkout import BaseCheckoutError, git_toplevel, prepare_base

        ref = settings.against or ""
        if rootdir_taken_by(config, ref):
            raise BaseCheckoutError(
                f"--roofline-against {ref}: pytest read {ref!r} as a test path when it chose the rootdir"
                f" and the ini file ({config.rootpath}), before it knew this plugin's options; write"
                f" --roofline-against={ref}, or set roofline_against in the ini file"
            )
        head_root = git_toplevel(config.rootpath) or config.rootpath
        checkout = prepare_base(ref, head_root=head_root, setup=settings.against_setup)
        try:
            return cls._spawn(config, settings, checkout, head_root)
        except BaseException:
            checkout.remove()
            raise

    @classmethod
    def _spawn(
        cls, config: pytest.Config, settings: SessionSettings, checkout: BaseCheckout, head_root: Path
    ) -> Against:
        ours, theirs = socket.socketpair()
        folder = Path(tempfile.mkdtemp(prefix="roofline-follower-"))
        # the plugin the head runs, first on the follower's path: the two must speak one protocol,
        # whichever version of it the base's tree holds
        shim = folder / "plugin"
        shim.mkdir()
        (shim / "pytest_roofline").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
        from ..timing.copies import SharedPool

        pool = SharedPool.create()  # both sides' copies: where each process's memory lands moves its times
        passed = (theirs.fileno(),) if pool is None else (theirs.fileno(), pool.fd)
        env = dict(os.environ)
        env[FOLLOW_FD] = str(theirs.fileno())
        if pool is not None:
            env[POOL_FD] = str(pool.fd)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(shim), *checkout.path_entries(), *filter(None, [env.get("PYTHONPATH")])]
        )
        where = Path(config.invocation_params.dir).resolve()
        try:
            cwd = checkout.root / where.relative_to(head_root.resolve())
        except ValueError:
            cwd = checkout.root
        log = folder / "follower.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "pytest", *follower_args(config.invocation_params.args)],
                cwd=cwd if cwd.is_dir() else checkout.root, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, pass_fds=passed,
            )  # fmt: skip
        theirs.close()
        SharedPool.active = pool
        return cls(settings, checkout, process, Connection(ours.detach()), log)

    def wait_collected(self) -> None:
        """The base's collection, or :class:`BaseUnavailable` saying in one line why there is none."""
        try:
            message = _receive(self.connection, COLLECT_TIMEOUT_S, "collecting")
        except BaseUnavailable as exc:
            raise BaseUnavailable(f"{exc}: {self._log_tail()}") from None
        if message[0] == "failed":
            raise BaseUnavailable(f"--roofline-against {self.settings.against}: the base {message[1]}")
        self.collected = frozenset(message[1])

    def _log_tail(self) -> str:
        try:
            lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "its output could not be read"
        errors = [line for line in lines if "Error" in line or line.startswith("E ")]
        return (errors or lines or ["no output"])[-1].strip()

    def pair(
        self,
        nodeid: str,
        name: str,
        head_round: Callable[[float], Round],
        *,
        max_time_s: float,
        one_cpu: bool = False,
    ) -> Pairing | Unpaired:
        """The head's ``roofline(...)`` call ``name`` of test ``nodeid`` beside the base's, in ABBA
        rounds (``head_round(budget_s)`` measures the head's kernel once). ``one_cpu``: a
        single-threaded kernel, whose rounds on both sides run on one CPU (:func:`pinned`)."""
        from ..model.pairing import abba, decided, judge_pairs

        if nodeid not in self.collected:
            return Unpaired("new", "the base has no such test")
        if self.running != nodeid:
            self._drain()
            self.connection.send(("run", nodeid))
            self.running = nodeid
        message = self._next(f"running {nodeid}")
        if message[0] == "finished":
            self.running = None
            return Unpaired("new", f"the base's test measures no kernel named {name!r}")
        if message[1] != name:
            self.connection.send(("skip",))
            said = f"the base's test measured {message[1]!r} where the head measured {name!r}"
            return Unpaired("new", said)
        round_s = max(MIN_ROUND_S, max_time_s / ROUNDS_PER_BUDGET)
        deadline = time.monotonic() + ROUNDS_BUDGET * max_time_s
        threshold = self.settings.regression
        rounds: list[Round] = []
        # one CPU of those this process may run on (None where the OS cannot pin)
        cpus = None
        if one_cpu and hasattr(os, "sched_getaffinity"):
            cpus = frozenset({min(os.sched_getaffinity(0))})
        with pinned(cpus):
            for turn in abba(4 * MAX_BLOCKS):
                if turn == "base":
                    base = self._base_round(round_s, cpus)
                    if isinstance(base, str):  # the base's kernel raised: its test has ended
                        self._drain()
                        return Unpaired("gone", f"the base's kernel raised {base}")
                    rounds.append(base)
                else:
                    rounds.append(head_round(round_s))
                block_done = len(rounds) % 4 == 0
                if block_done and (decided(rounds, threshold=threshold) or time.monotonic() > deadline):
                    break
        self.connection.send(("done",))
        return judge_pairs(rounds, threshold=threshold)

    def wait_ready(self) -> None:
        """Wait until the base's test, where it runs, is ready at its next call (or has ended): its
        preparation, copies and all, must not run while the head times anything. What it said is
        kept for :meth:`pair`."""
        if self.running is not None and self.pending is None:
            self.pending = _receive(self.connection, REPLY_TIMEOUT_S, f"running {self.running}")

    def _next(self, what: str) -> tuple[Any, ...]:
        """The follower's next message: the one :meth:`wait_ready` kept, else the next to come."""
        message, self.pending = self.pending, None
        return message if message is not None else _receive(self.connection, REPLY_TIMEOUT_S, what)

    def _base_round(self, round_s: float, cpus: frozenset[int] | None) -> Round | str:
        """The base's round (on ``cpus``, where given), or what its kernel raised."""
        from ..model.pairing import Round

        self.connection.send(("round", round_s, cpus))
        message = _receive(self.connection, REPLY_TIMEOUT_S, "a round")
        if message[0] == "error":
            return str(message[1])
        return Round("base", float(message[1]), float(message[2]), bool(message[3]))

    def end_test(self, nodeid: str) -> None:
        """The head's test ``nodeid`` ended: the follower's ends too (a call the head did not make is
        skipped)."""
        if self.running == nodeid:
            self._drain()

    def _drain(self) -> None:
        """Skip the base's calls until its test has ended."""
        while self.running is not None:
            message = self._next(f"finishing {self.running}")
            if message[0] == "finished":
                self.running = None
            elif message[0] == "ready":
                self.connection.send(("skip",))

    def close(self) -> None:
        """End the follower and remove the base's checkout: at the session's end, after ^C too."""
        try:
            if self.process.poll() is None:
                with contextlib.suppress(OSError):
                    self.connection.send(("quit",))
                try:
                    self.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            from ..timing.copies import HostPool, SharedPool

            if SharedPool.active is not None:  # its memory goes with the last copy made in it
                os.close(SharedPool.active.fd)
                SharedPool.active = None
                HostPool.release()
            self.connection.close()
            shutil.rmtree(self.log.parent, ignore_errors=True)  # the follower's log and path shim
            self.checkout.remove()


@contextlib.contextmanager
def pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """This thread on ``cpus`` for the block (nothing for None): a single-threaded kernel's rounds run
    on one CPU on both sides (why: docs/ci.md, "Gate a pull request against its base")."""
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    was = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:  # a CPU this process may not use: run where it is
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, was)


#: the head's options the follower leaves out: the comparison itself, and every file the run writes
_LEFT_OUT = {
    "--roofline-against": True, "--roofline-against-setup": True, "--roofline-json": True,
    "--roofline-save": True, "--roofline-compare": True, "--roofline-markdown": True,
    "--roofline-plot": True, "--junitxml": True, "--junit-xml": True, "--result-log": True,
    "--roofline-accept": False, "--roofline-report": False, "--roofline-mode": True,
    "-n": True, "--numprocesses": True, "--dist": True, "--basetemp": True,
}  # fmt: skip


def rootdir_taken_by(config: pytest.Config, ref: str) -> bool:
    """Whether a directory REF given as its own argument (``--roofline-against DIR``, unlike
    ``--roofline-against=DIR``) moved the head's rootdir: docs/ci.md ("Gate a pull request against
    its base")."""
    args = list(config.invocation_params.args)
    if not any(flag == "--roofline-against" and value == ref for flag, value in itertools.pairwise(args)):
        return False
    base = Path(ref).expanduser()
    invocation = Path(config.invocation_params.dir)
    if not (invocation / base).is_dir():
        return False
    paths = [invocation / str(arg).split("::")[0] for arg in config.args]
    found = [path.resolve() for path in paths if path.exists()] or [invocation.resolve()]
    common = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in found]))
    return not (invocation / base).resolve().is_relative_to(common)


def follower_args(args: Sequence[str]) -> list[str]:
    """The head's command line for the follower: the same selection and settings, less what
    :data:`_LEFT_OUT` names (an option with a value loses it too), in report mode, quiet."""
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in _LEFT_OUT:
            skip_value = _LEFT_OUT[flag] and not eq
            continue
        kept.append(arg)
    return [*kept, "--roofline-mode=report", "-p", "no:cacheprovider", "-q"]


# -- the base's side -------------------------------------------------------------------------------


class Follower:
    """The base's pytest process: it runs the tests the head asks for, and serves their rounds."""

    follows: ClassVar[Literal[True]] = True

    def __init__(self, fd: int, pool_fd: int | None = None) -> None:
        from ..timing.copies import SharedPool

        self.connection = Connection(fd)
        self._errors: list[str] = []
        if pool_fd is not None:  # the head's pool: the base's copies in its second half
            SharedPool.active = SharedPool(pool_fd, 1, allocates_both=False)

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
            errors = [line for line in lines if line.startswith("E ")]
            self._errors.append(f"{report.nodeid or 'collection'}: {(errors or lines or ['?'])[-1].strip()}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if self._errors:
            self.connection.send(("failed", f"cannot collect: {self._errors[0]}"))
            return True
        items = {item.nodeid: item for item in session.items}
        self.connection.send(("collected", list(items)))
        while True:
            message = _receive(self.connection, 86400.0, "waiting for the head")
            if message[0] == "quit":
                return True
            if message[0] == "run":
                item = items[message[1]]
                item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
                self.connection.send(("finished", message[1]))

    def serve(self, name: str, base_round: Callable[[float], Round]) -> None:
        """The base's ``roofline(...)`` call ``name``: ready, then each round the head asks for, until
        ``done`` (measured) or ``skip`` (the head made no such call)."""
        self.connection.send(("ready", name))
        while True:
            message = _receive(self.connection, 86400.0, "waiting for the head")
            if message[0] == "round":
                try:
                    with pinned(message[2]):
                        r = base_round(float(message[1]))
                except Exception as exc:  # the base's kernel raised: the head says so
                    self.connection.send(("error", f"{type(exc).__name__}: {exc}"))
                    raise
                self.connection.send(("time", r.time_s, r.floor_s, r.heavy))
            else:  # done or skip
                return
