"""The package's errors and its warning, all :class:`RooflineError`s (a user's mistake a
:class:`RooflineUsageError`), so that a caller can tell an error raised on purpose from a bug; each
keeps its fault's built-in base (``ValueError``, ...). Imports nothing: every layer may use it.
What a test shows for each: docs/usage.md ("The fixture").
"""

from __future__ import annotations


class RooflineError(Exception):
    """An error pytest-roofline raises on purpose, with a message meant for the user."""


class RooflineUsageError(RooflineError):
    """A mistake in what the user gave: an argument, a marker, an option, an op, a device, a file."""


class InvalidValueError(RooflineUsageError, ValueError):
    """A value the user gave that the plugin cannot use; the message says what it expected."""


class InvalidTypeError(RooflineUsageError, TypeError):
    """An object of the wrong kind where the user passes one (a kernel that is not callable, say)."""


class UnavailableError(RooflineError, RuntimeError):
    """Something the measurement needs that this machine lacks: a device, a driver, CuPy, a compiler."""


class MeasurementError(RooflineError, RuntimeError):
    """A kernel that cannot be measured as asked (one a CUDA graph cannot capture, one that never ends)."""


class RooflineWarning(UserWarning):
    """Something pytest-roofline worked around: a corrupt or unwritable cache, a missing lock."""
