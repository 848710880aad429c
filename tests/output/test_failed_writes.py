"""A write of a run's file that cannot finish says so: a Markdown FIFO nobody reads is an error, not a
hang, and a write that fails names the file.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def test_a_markdown_fifo_nobody_reads_is_an_error_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "summary.md"
    os.mkfifo(fifo)
    code = f"from pytest_roofline.output.markdown import append_section; append_section({str(fifo)!r}, 'x')"
    run = [sys.executable, "-c", code]
    done = subprocess.run(run, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"OSError: [Errno 6] it is a FIFO that no process is reading: {str(fifo)!r}"
    )
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def _write_json(path: Path) -> None:
    from pytest_roofline.output.jsonfile import write_json_atomic

    write_json_atomic(path, {"a": 1})


def _write_plot(path: Path) -> None:
    pytest.importorskip("matplotlib")
    from test_plot import DEVICE, RECORDS

    from pytest_roofline.output.plot import draw

    draw(RECORDS, [DEVICE], path.with_suffix(".svg"))


def _write_markdown(path: Path) -> None:
    from pytest_roofline.output.markdown import append_section

    append_section(path, "x")


@pytest.mark.parametrize("write", [_write_json, _write_plot, _write_markdown])
def test_a_write_that_fails_names_the_file(tmp_path: Path, write: Any) -> None:
    target = tmp_path / "gone" / "out.json"  # a directory removed after the up-front checks
    with pytest.raises((OSError, ValueError)) as caught:
        write(target)
    assert str(target.with_suffix(".svg") if write is _write_plot else target) in str(caught.value)
