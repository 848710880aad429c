"""``--roofline-cuda-block`` (ini ``roofline_cuda_block``) and the marker's and fixture's ``block=``:
the one precedence chain, from the command line to the CUDA backend's blocking kernel."""

from __future__ import annotations

import pytest
from conftest import fake_conftest
from fake_cupy import FakeCupy

from pytest_roofline.timing.cuda import blocking

COPY_TEST = """
import pytest

@pytest.mark.speed_of_light("copy", n=1 << 20, dtype="fp32"{marker})
def test_copy(roofline):
    import cupy
    a, b = cupy.empty(1 << 20, dtype=cupy.float32), cupy.empty(1 << 20, dtype=cupy.float32)
    roofline(cupy.copyto, b, a{call})
"""

#: a backend that records the block= each measurement asked for (None: the session's)
RECORDING = """

class Recording(type(BACKEND)):
    def __init__(self):
        super().__init__((1e-3,), resolution_s=1e-9, device_name="fake accelerator")
        self.blocks = []
        self.mode = None

    @contextlib.contextmanager
    def blocking(self, setting):
        self.blocks.append(setting)
        yield self


RECORDER = Recording()


def pytest_roofline_backend(config, device, spec):
    return RECORDER


def pytest_sessionfinish(session):
    import json, pathlib
    pathlib.Path("blocks.json").write_text(json.dumps(RECORDER.blocks))
"""

SCRIPTED_TEST = """
import pytest

@pytest.mark.speed_of_light("copy", n=1 << 20, dtype="fp32"{marker})
def test_copy(roofline):
    roofline(lambda: None, dtype="fp32"{call})
"""


@pytest.fixture
def recorded(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest("import contextlib\n" + fake_conftest(extra=RECORDING))
    return pytester


def blocks(pytester: pytest.Pytester) -> list[str | None]:
    import json

    return list(json.loads((pytester.path / "blocks.json").read_text()))


def test_help_shows_the_option_its_choices_and_its_default(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")

    text = " ".join(result.stdout.str().split())
    assert "--roofline-cuda-block=auto|on|off" in text
    assert "marker's or roofline(...) call's block= overrides it (default: auto)" in text
    assert "roofline_cuda_block (string):" in text


@pytest.mark.parametrize(
    ("marker", "call", "expected"),
    [
        ("", "", [None]),  # the session's setting: the backend was built with it, None changes nothing
        (', block="off"', "", ["off"]),
        (', block="off"', ', block="on"', ["on"]),  # the call over the marker
        ("", ', block="auto"', ["auto"]),
    ],
)
def test_the_marker_and_the_call_choose_the_blocker_for_their_measurement(
    recorded: pytest.Pytester, marker: str, call: str, expected: list[str | None]
) -> None:
    recorded.makepyfile(SCRIPTED_TEST.format(marker=marker, call=call))

    recorded.runpytest("--roofline-mode=report").assert_outcomes(passed=1)

    assert blocks(recorded) == expected


@pytest.mark.parametrize(("marker", "call"), [(', block="yes"', ""), ("", ", block=True")])
def test_a_bad_block_keyword_is_an_error_naming_it(recorded: pytest.Pytester, marker: str, call: str) -> None:
    recorded.makepyfile(SCRIPTED_TEST.format(marker=marker, call=call))

    result = recorded.runpytest("--roofline-mode=report")

    assert result.ret != 0
    result.stdout.fnmatch_lines(["*block must be one of 'auto', 'on', 'off'*--roofline-cuda-block*got*"])


@pytest.mark.parametrize(
    ("args", "ini", "held"),
    [
        ((), "", True),
        (("--roofline-cuda-block=off",), "", False),
        ((), "roofline_cuda_block = off", False),
        (("--roofline-cuda-block=on",), "roofline_cuda_block = off", True),
    ],
)
def test_the_session_setting_reaches_the_cuda_backend(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], ini: str, held: bool
) -> None:
    for name in (*blocking.PROFILER_ENVIRONMENT, "CUDA_LAUNCH_BLOCKING"):
        monkeypatch.delenv(name, raising=False)
    fake = FakeCupy().install(monkeypatch)
    pytester.makepyfile(COPY_TEST.format(marker="", call=""))
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")

    reprec = pytester.inline_run(
        "--roofline-device=cuda", "--roofline-mode=report", "--roofline-latency-floor=off", *args
    )

    reprec.assertoutcome(passed=1)
    tickets = [entry[2] for entry in fake.entries("block")]
    assert (max(tickets, default=0) > 0) is held
    assert fake.entries("block_timeout") == []
