"""The pytest11 entry point: options, the ``speed_of_light`` marker and the ``roofline`` fixture.

Typed hooks only; the work is done elsewhere: the settings in ``options.py``, the marker in
``marker.py``, and runtime state and hooks in :class:`~.session.RooflineSession`, registered as a
plugin in ``pytest_configure`` and stashed on the config.

Installed but unused, this module costs a test run almost nothing: it imports no numpy, no CuPy, no
tabulate, no timing code and no op catalogue, device table or model until a test asks for a
measurement (or a conftest registers ops or devices), and unmarked tests take a fast path through
the per-test hooks. ``benchmarks/idle_overhead.py`` measures what is left.
"""

from __future__ import annotations

import pytest

from .marker import MARKER_DOC
from .options import SETTINGS, SessionSettings
from .session import SESSION_KEY, Roofline, RooflineSession

#: users annotate the fixture's argument with ``pytest_roofline.plugin.Roofline``
__all__ = ["Roofline", "roofline", "roofline_mode"]


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
    session = RooflineSession(config, SessionSettings.from_config(config))
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "roofline-session")
    # historic: a conftest.py found later, during collection, registers too
    ops = {"config": config, "register": session.add_op}
    devices = {"config": config, "register": session.add_device}
    config.hook.pytest_roofline_register_ops.call_historic(kwargs=ops)
    config.hook.pytest_roofline_register_devices.call_historic(kwargs=devices)
    session.check_session_device()


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    session.undo_registrations()
    session.unregister()
    del config.stash[SESSION_KEY]


def roofline_mode(config: pytest.Config) -> str:
    """This session's mode: ``enforce``, ``report`` or ``off`` (for conftest.py files).

    A suite whose bad variants are ``xfail(strict=True)`` tests can mark them so only in
    ``enforce`` mode, where a miss fails the test; see ``example_project/conftest.py``.
    """
    session = config.stash.get(SESSION_KEY, None)
    return "off" if session is None else session.settings.mode  # -p no:roofline enforces nothing


@pytest.fixture
def roofline(request: pytest.FixtureRequest) -> Roofline:
    """Time a kernel and judge it against its speed-of-light floor.

    ``roofline(fn, *args, op=None, dtype=None, min_fraction=None, name=None, **params)``; values of a
    ``speed_of_light`` marker are defaults. Also ``roofline.measure``, ``roofline.estimate`` and
    ``roofline.device``.
    """
    return Roofline(request.node, request.config.stash[SESSION_KEY])
