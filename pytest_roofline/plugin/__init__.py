"""The pytest11 entry point: options, the ``speed_of_light`` marker and the ``roofline`` fixture.

Typed hooks only; the runtime hooks are :class:`~.session.RooflineSession`'s, a plugin made only once
the run needs it (:func:`session_of`, :func:`_needs_session_now`), so that the plugin installed but
unused costs almost nothing: docs/options.md ("Options").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .marker import FIXTURE, MARKER_DOC, has_marker
from .options import FOLLOW_FD, POOL_FD, SETTINGS, SessionSettings, check_peaks_kind

if TYPE_CHECKING:
    from ..model.core import Device
    from ..model.op_registry import OpSpec
    from .fixture import Roofline
    from .session import RooflineSession


SETTINGS_KEY = pytest.StashKey[SessionSettings]()
#: set once the run needs a session (:func:`session_of`)
SESSION_KEY = pytest.StashKey["RooflineSession"]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roofline", "speed-of-light performance budgets")
    for s in SETTINGS:
        if s.metavar is None:
            group.addoption(s.flag, action="store_true", default=None, dest=s.dest, help=s.help)
        else:
            group.addoption(s.flag, type=s.parse, default=None, dest=s.dest, metavar=s.metavar, help=s.help)
        twin = f"{s.flag}; true or false" if s.metavar is None else s.flag
        parser.addini(s.dest, f"{s.help} [{twin}]", type="string", default=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    settings = SessionSettings.from_config(config)  # a bad value is a usage error, used or not
    config.stash[SETTINGS_KEY] = settings

    # historic: a conftest.py found later, during collection, registers too
    def add_op(*args: Any, **kwargs: Any) -> OpSpec:
        return session_of(config).registrations.add_op(*args, **kwargs)

    def add_device(device: Device) -> Device:
        return session_of(config).registrations.add_device(device)

    hook = config.hook
    hook.pytest_roofline_register_ops.call_historic(kwargs={"config": config, "register": add_op})
    hook.pytest_roofline_register_devices.call_historic(kwargs={"config": config, "register": add_device})
    ours = config.stash.get(SESSION_KEY, None)
    served = any(impl.plugin is not ours for impl in hook.pytest_roofline_device.get_hookimpls())
    check_peaks_kind(settings, device_hooks=served)
    # a LIST against the GPUs seen; not in a worker, which sees only its own: the controller checked
    if isinstance(settings.gpus, tuple) and not hasattr(config, "workerinput"):
        from .gpus import check_gpus

        check_gpus(settings.gpus, origin=settings.origins.get("gpus", "--roofline-gpus"))
    if settings.accept and not settings.save and not hasattr(config, "workerinput"):  # said once
        from ..errors import RooflineWarning

        config.issue_config_time_warning(
            RooflineWarning(
                f"{settings.said('accept')} has no effect without --roofline-save: it lets a save"
                " replace a regressed test's baseline, and nothing is saved"
            ),
            stacklevel=2,
        )
    if _needs_session_now(config, settings):
        session_of(config).devices.check_session_device()
    _start_against(config, settings)


def _start_against(config: pytest.Config, settings: SessionSettings) -> None:
    """The A/B comparison's side of this process (:mod:`.against`): the follower a head started, or the
    head of one that ``--roofline-against`` asks for (serial runs only)."""
    import os

    fd = os.environ.get(FOLLOW_FD, "")
    if fd.isdigit():  # the base's process: it runs what the head asks, and never compares itself
        from .against import Follower

        pool_fd = os.environ.get(POOL_FD, "")
        follower = Follower(int(fd), int(pool_fd) if pool_fd.isdigit() else None)
        config.pluginmanager.register(follower, "roofline-follower")
        session_of(config).state.against = follower
        return
    if not settings.against or hasattr(config, "workerinput"):
        return
    if getattr(config.option, "dist", "no") != "no" or getattr(config.option, "numprocesses", None):
        raise pytest.UsageError(
            f"{settings.said('against')}: the comparison needs a serial run (each test's base runs in"
            " one second process, in turns with it); leave out -n, or give -n 0"
        )
    if settings.mode == "off":
        return  # nothing is measured, so nothing is compared: the summary says so
    from .against import Against, BaseUnavailable
    from .base_checkout import BaseCheckoutError

    try:
        session_of(config).state.against = Against.start(config, settings)
    except BaseCheckoutError as exc:  # a REF that names no base, a setup that failed: a mistake
        raise pytest.UsageError(str(exc)) from None
    except BaseUnavailable as exc:
        session_of(config).without_base(str(exc))


def _needs_session_now(config: pytest.Config, settings: SessionSettings) -> bool:
    """What only a session made before collection can give: a report or a JSON file even when nothing
    is measured, a named device checked as a usage error, and on a pytest-xdist controller (which
    collects nothing) the records its workers' reports carry."""
    if settings.report or settings.json or settings.device.lower() not in ("auto", "cpu"):
        return True
    if settings.save or settings.compare or settings.markdown or settings.plot or settings.against:
        return True  # a baseline's vanished tests, an empty run's files: said even when nothing ran
    controller = not hasattr(config, "workerinput")
    return controller and getattr(config.option, "dist", "no") != "no"


def session_of(config: pytest.Config) -> RooflineSession:
    """This run's session, made and registered as a plugin on first need."""
    from .session import RooflineSession

    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        session = RooflineSession(config, config.stash[SETTINGS_KEY])
        config.stash[SESSION_KEY] = session
        config.pluginmanager.register(session, "roofline-session")
    return session


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they will
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make the session if a collected test measures (most suites' tests never do), and let it skip
    the tests whose marker names a device this machine lacks."""
    measures = (FIXTURE in getattr(item, "fixturenames", ()) or has_marker(item) for item in items)
    if SESSION_KEY in config.stash or any(measures):
        session_of(config).skip_absent_devices(items)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    partner = session.state.partner()
    session.state.against = None
    if partner is not None:  # the follower ends, the base's checkout goes
        partner.close()
    session.registrations.undo()
    session.unregister()
    del config.stash[SESSION_KEY]


def roofline_mode(config: pytest.Config) -> str:
    """This session's mode, ``enforce``, ``report`` or ``off``, for conftest.py files (docs/usage.md)."""
    settings = config.stash.get(SETTINGS_KEY, None)
    return "off" if settings is None else settings.mode  # -p no:roofline enforces nothing


@pytest.fixture
def roofline(request: pytest.FixtureRequest) -> Roofline:
    """Time a kernel and judge it against its speed-of-light floor.

    ``roofline(fn, *args, op=None, dtype=None, min_fraction=None, name=None, kwargs=None, setup=None,
    **params)``: ``kwargs`` go to the kernel, ``setup()`` runs before every call, untimed; values of
    a ``speed_of_light`` marker are defaults. Also ``roofline.measure``, ``roofline.estimate`` and
    ``roofline.device``.
    """
    from .fixture import Roofline

    return Roofline(request.node, session_of(request.config).measurer)
