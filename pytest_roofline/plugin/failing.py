"""Failing the current test with a message of ours: no traceback, no chained exception above it."""

from __future__ import annotations

from typing import NoReturn

import pytest

from ..errors import RooflineError
from .marker import FIXTURE

#: pytest's warnings summary indents each line of a warning's message by this many spaces
WARNING_INDENT = 2


def terminal_width(config: pytest.Config) -> int:
    """The width pytest writes to: its terminal writer's (``COLUMNS``, else the terminal's, else 80,
    as pytest reads them); without pytest's terminal plugin, the same rule read directly."""
    if config.pluginmanager.get_plugin("terminalreporter") is None:  # -p no:terminal
        import shutil

        return shutil.get_terminal_size(fallback=(80, 24)).columns
    return config.get_terminal_writer().fullwidth


def fitted(message: str, config: pytest.Config, *, warning: bool = False) -> str:
    """``message`` wrapped to pytest's width, as a failure shows it or (``warning``) as the warnings
    summary does, indented; its first line (what the short summary shows) stays first."""
    from ..output.wrapping import wrap

    return wrap(message, terminal_width(config) - (WARNING_INDENT if warning else 0))


def fail_test(message: str) -> NoReturn:
    """Fail the current test with ``message`` only: no traceback, no chained exception above it."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None


class failing_the_test:  # lower case, like contextlib.suppress: it reads as a with-statement
    """Any of ``errors`` (our own :class:`RooflineError` kinds) raised inside fails the current test
    with ``roofline: <its message>`` alone; anything else (a bug of ours or of a library) keeps its
    traceback. Its own frame is hidden: a failure in a hook shows none, as without the ``with``.
    """

    def __init__(self, *errors: type[RooflineError]) -> None:
        self.errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        __tracebackhide__ = True
        if isinstance(exc, self.errors):
            fail_test(f"{FIXTURE}: {exc}")
