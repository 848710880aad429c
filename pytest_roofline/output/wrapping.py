"""Text wrapped to a terminal's width: each line of the text wraps on its own, its continuations
indented under it, at spaces only, a number kept with the word after it (``139.0 µs``)."""

from __future__ import annotations

import re

#: the width the commands' text fits (``roofline ops``, ``llm``, ``budgets``): a CI log's, or a terminal's
TEXT_WIDTH = 100
#: a number and the unit (or word) after it: the space between them is no place to break a line
_NUMBER_AND_UNIT = re.compile(r"(?<![\w.])([±+-]?\d+(?:[.,]\d+)*) (?=[^\W\d_])")
#: stands for such a space while textwrap splits (a private-use character: no text holds it)
_GLUE = "\ue000"


def wrap(text: str, width: int, *, hang: int = 2) -> str:
    """``text`` with each line longer than ``width`` broken at spaces, its continuations indented
    ``hang`` more than it; a word longer than the width (a path, an option) is never cut."""
    import textwrap

    lines: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            lines.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + hang)
        parts = textwrap.wrap(
            _NUMBER_AND_UNIT.sub(rf"\1{_GLUE}", line), width, subsequent_indent=indent,
            break_long_words=False, break_on_hyphens=False,
        )  # fmt: skip
        lines.extend(part.replace(_GLUE, " ") for part in parts)
    return "\n".join(lines)
