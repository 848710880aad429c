"""The session settings: each ``--roofline-*`` option, its ini twin, its parser and its default.

Every parser raises :class:`argparse.ArgumentTypeError`, a usage error (exit 4) naming the option.
:func:`_resolve` is the one precedence chain, command line > ini > default, under a marker's
keywords (``request.py``). No hooks: the plugin's ``__init__.py`` declares the options from :data:`SETTINGS`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..model.keywords import BLOCK_SETTINGS, CACHE_STATES

if TYPE_CHECKING:
    from ..output.baseline import Baseline

PEAK_SOURCES = ("datasheet", "measured")
DEFAULT_MIN_FRACTION = 0.5
DEFAULT_MAX_TIME = 1.0
DEFAULT_REGRESSION = 0.10
#: the environment variable that makes a pytest process the follower of a ``--roofline-against``
#: comparison (:mod:`.against`): the file descriptor of its socket to the head
FOLLOW_FD = "ROOFLINE_FOLLOW_FD"
#: ... and the file descriptor of the memory both sides' copies are carved from
POOL_FD = "ROOFLINE_POOL_FD"


# -- option values ---------------------------------------------------------------------------------


def _number(text: str, expected: str, within: Callable[[float], bool]) -> float:
    """``text`` as a number for which ``within`` holds, else "expected EXPECTED, got TEXT"."""
    try:
        value: float | None = float(text)
    except ValueError:
        value = None
    if value is None or not within(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def parse_fraction(text: str) -> float:
    return _number(text, "a number in (0, 1]", lambda value: 0 < value <= 1)


#: the longest a measurement's time budget may be (a day): past it, clock arithmetic overflows
MAX_TIME_S = 86400.0


def parse_seconds(text: str) -> float:
    return _number(
        text, f"a positive number of seconds, at most {MAX_TIME_S:g}", lambda value: 0 < value <= MAX_TIME_S
    )


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            from ..model.core import did_you_mean

            raise argparse.ArgumentTypeError(
                f"expected one of {', '.join(choices)}, got {text!r}{did_you_mean(text, choices)}"
            )
        return text

    return parse


def parse_stat(text: str) -> str:
    from ..model.stats import STATS  # imported when used: the plugin loads nothing it may not need

    return _choice(STATS)(text)


def parse_device(text: str) -> str:
    """Only the spelling here: devices registered by conftest hooks exist from ``pytest_configure`` on,
    where the spec is resolved (:meth:`.session.RooflineSession.check_session_device`)."""
    spec = text.strip()
    if not spec:
        raise argparse.ArgumentTypeError("expected auto, cpu, cuda, cuda:N or a table key, got ''")
    from ..machine.detect import CUDA_SPEC

    if spec.lower().startswith("cuda") and spec.lower() != "cuda" and not CUDA_SPEC.fullmatch(spec.lower()):
        raise argparse.ArgumentTypeError(f"expected cuda or cuda:N (N a GPU index), got {text!r}")
    return spec


def parse_gpus(text: str) -> str | tuple[int, ...]:
    """``all``, ``none``, or GPU indices separated by commas (``0,2,3``), each once. Whether those
    GPUs exist is checked when the session starts (:func:`.gpus.check_gpus`)."""
    keyword = text.strip().lower()
    if keyword in ("all", "none"):
        return keyword
    parts = [part.strip() for part in keyword.split(",")]
    if not all(part.isdigit() and part.isascii() for part in parts):
        raise argparse.ArgumentTypeError(
            f"expected all, none or GPU indices separated by commas (such as 0,2,3), got {text!r}"
        )
    indices = tuple(int(part) for part in parts)
    twice = sorted({i for i in indices if indices.count(i) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"GPU {twice[0]} is named twice in {text!r}; name each GPU once")
    return indices


def parse_peaks(text: str) -> str:
    """``datasheet``, ``measured``, or a JSON file of the user's own peaks, read and checked now over
    a stand-in device (it need not be complete): docs/options.md ("Your own peaks")."""
    if text in PEAK_SOURCES:
        return text
    from ..model.core import Device, Figure, Precision, Source, Unit, did_you_mean
    from ..model.peaks import load_peaks_file

    path = str(Path(text).expanduser())  # expanded once, here: the session reads this path again
    hint = did_you_mean(text, PEAK_SOURCES)
    if hint and not Path(path).exists():  # "datashet": a misspelling, not a missing file
        raise argparse.ArgumentTypeError(f"expected datasheet, measured or a peaks file, got {text!r}{hint}")

    stand_in = Figure(1.0, Source.DATASHEET)
    base = Device("base", "base", "cpu", {(Precision.FP32, Unit.VECTOR): stand_in}, stand_in)
    try:
        load_peaks_file(path, base=base)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (expected datasheet, measured or a JSON file of peaks)"
        ) from None
    return path


def parse_json_path(text: str) -> str:
    """A file we will be able to write, as the path to write (``~`` expanded here, once): a new or
    regular file in a writable directory, a character device, or a pipe this process holds
    (``/dev/stdout`` piped on), written in place: ``files.write``."""
    from ..machine.files import problem

    target = Path(text).expanduser()
    reason = problem(target)
    if reason:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {reason}")
    return str(target)


class BaselinePath(str):
    """A ``--roofline-compare`` path, with the baseline read from it when the option was checked: the
    gate compares with that one, so the file is read once."""

    baseline: Baseline


def parse_baseline_path(text: str) -> BaselinePath:
    """A baseline we can read: the file exists and is a pytest-roofline JSON report (checked now, so a
    bad baseline is a usage error before any test runs)."""
    from ..output.baseline import BaselineError, load_baseline

    path = BaselinePath(text)
    try:
        path.baseline = load_baseline(Path(text).expanduser())
    except BaselineError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path


def parse_regression(text: str) -> float:
    from ..output.comparison import parse_threshold

    try:
        return parse_threshold(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_plot_path(text: str) -> str:
    """A .svg or .png we can write, with matplotlib (the ``plot`` extra) installed."""
    from ..output.plot import PlotError, check_path, require_matplotlib

    try:
        check_path(text)
        require_matplotlib()
    except PlotError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return parse_json_path(text)


def parse_columns(text: str) -> tuple[str, ...]:
    from ..output.table import parse_columns as columns

    try:
        return columns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_text(text: str) -> str:
    """A value that must say something: a base to compare against, a command to run."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a value, got ''")
    return text.strip()


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# -- the settings ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its command-line option, its ini twin, its parser and its default."""

    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None  # None: a flag that takes no value
    #: an ini value naming a file is relative to the ini file's directory
    path: bool = False

    @property
    def name(self) -> str:
        """The :class:`SessionSettings` field: ``--roofline-max-time`` is ``max_time``."""
        return self.flag.removeprefix("--roofline-").replace("-", "_")

    @property
    def dest(self) -> str:
        return f"roofline_{self.name}"


def setting(
    flag: str,
    parse: Callable[[str], Any],
    default: Any,
    help: str,
    metavar: str | None = None,
    *,
    path: bool = False,
) -> Any:
    """A field of :class:`SessionSettings` declared with its option: the one place a setting is named."""
    return field(default=default, metadata={"setting": Setting(flag, parse, default, help, metavar, path)})


def _resolve(config: pytest.Config, s: Setting) -> tuple[Any, str]:
    """The setting's value and where it came from (``--roofline-device``, ``ini roofline_device`` or
    ``default``, for messages); a bad ini value is a usage error naming the key and the value."""
    value = config.getoption(s.dest)
    if value is not None:
        return value, s.flag
    raw = config.getini(s.dest)
    if raw is None or not str(raw).strip():
        return s.default, "default"
    text = str(raw).strip()
    if s.path and text not in PEAK_SOURCES and not Path(text).expanduser().is_absolute():
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        text = str(base / text)
    try:
        value = s.parse(text)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {s.dest} = {raw!r}: {exc}") from None
    return value, f"ini {s.dest}"


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """Every setting of this session, resolved; each field declares its option and ini twin
    (:func:`setting`), in the order ``--help`` lists them."""

    # fmt: off
    report: bool = setting(
        "--roofline-report", parse_bool, False,
        "print a table of every measurement after the tests (default: off)")
    json: str | None = setting(
        "--roofline-json", parse_json_path, None,
        "write every measurement, with raw samples and environment, to PATH as JSON (default: none)",
        "PATH", path=True)
    device: str = setting(
        "--roofline-device", parse_device, "auto",
        "device to measure on and judge against: auto, cpu, cuda, cuda:N or a table key "
        "(default: auto = where the kernel's arrays live, else the first CUDA device, else this "
        "CPU)",
        "DEVICE")
    #: the GPUs pytest-xdist workers spread over: "all", "none" or their indices (:mod:`.gpus`)
    gpus: str | tuple[int, ...] = setting(
        "--roofline-gpus", parse_gpus, "all",
        "the GPUs pytest-xdist workers spread over, one GPU per worker for everything it does (its "
        "tests' own CUDA work and its measurements): all, none (no spreading: the workers' own CUDA "
        "work all lands on the first GPU), or indices such as 0,2,3 (default: all)",
        "all|none|LIST")
    min_fraction: float = setting(
        "--roofline-min-fraction", parse_fraction, DEFAULT_MIN_FRACTION,
        "budget for tests whose marker sets none: fail below this fraction of speed of light "
        f"(default: {DEFAULT_MIN_FRACTION})",
        "FRACTION")
    mode: str = setting(
        "--roofline-mode", _choice(("enforce", "report", "off")), "enforce",
        "enforce: fail tests below budget; report: measure and report only; off: call each kernel "
        "once, no timing (default: enforce)",
        "MODE")
    stat: str = setting(
        "--roofline-stat", parse_stat, "median",
        "statistic the verdict uses: median, min or mean (default: median)",
        "STAT")
    max_time: float = setting(
        "--roofline-max-time", parse_seconds, DEFAULT_MAX_TIME,
        "wall-time budget per measurement in seconds: copies, warm-up, flushes and probes "
        "included; a re-measure (enforce mode) has one of its own; a kernel too slow for it "
        f"gets one warm-up call and one sample (default: {DEFAULT_MAX_TIME})",
        "SECONDS")
    cache: str = setting(
        "--roofline-cache", _choice(CACHE_STATES), "cold",
        "cold: every call finds its data out of the cache, as the floor assumes (copies of the "
        "arguments rotated, else a flush before every call); warm: the data stay in the cache, "
        "judged against the bandwidth of the cache level that holds them (default: cold)",
        "STATE")
    inconclusive: str = setting(
        "--roofline-inconclusive", _choice(("warn", "fail", "skip")), "warn",
        "what an inconclusive verdict (noise straddling the budget, or heavy contention) does to "
        "its test: warn, fail or skip (default: warn)",
        "ACTION")
    ceilings: str = setting(
        "--roofline-ceilings", _choice(("paired", "cached")), "paired",
        "CPU ceilings to judge against: paired = scaled by a probe timed beside each kernel, "
        "so a busy machine slows both alike; cached = the calibration's figures (default: paired)",
        "CEILINGS")
    peaks: str = setting(
        "--roofline-peaks", parse_peaks, "datasheet",
        "peaks to judge against: datasheet, measured, or a JSON file of your own "
        "(default: datasheet; a CPU's are always measured)",
        "SOURCE", path=True)
    diagnose: str = setting(
        "--roofline-diagnose", _choice(("off", "miss", "all")), "miss",
        "when to diagnose a GPU measurement (the bottleneck procedure: the regime, and for CUDA C++ "
        "and Triton kernels what the compiler says of them, which costs a compile): off, miss or "
        "all (default: miss)",
        "WHEN")
    latency_floor: str = setting(
        "--roofline-latency-floor", _choice(("on", "off")), "on",
        "judge a kernel against max(roofline floor, latency floor), where the latency floor is "
        "what an empty call costs on the timer (an empty kernel launch on a GPU, an empty Python "
        "call on the CPU): on, or off to judge against the roofline floor alone (default: on)",
        "ON|OFF")
    cuda_block: str = setting(
        "--roofline-cuda-block", _choice(BLOCK_SETTINGS), "auto",
        "hold the CUDA stream with a blocking kernel while a sampling window's calls are queued, so "
        "that it times the GPU, not the launch rate: auto (not under CUDA_LAUNCH_BLOCKING=1, a "
        "profiler or a sanitizer, nor for a kernel seen to wait for the GPU), on, or off; a "
        "marker's or roofline(...) call's block= overrides it (default: auto)",
        "auto|on|off")
    columns: tuple[str, ...] | None = setting(
        "--roofline-columns", parse_columns, None,
        "the report's columns, separated by commas, or all: test, op, dtype, bound, intensity, "
        "floor, time, achieved, ceiling, attained, budget, machine, verdict (default: those that "
        "fit the terminal; the JSON has every field)",
        "LIST")
    report_clocks: bool = setting(
        "--roofline-report-clocks", parse_bool, False,
        "add a GPU's clock columns to the --roofline-report table: the SM and memory clocks held "
        "(median and lowest), the power drawn, the clock events seen and the samples left out, "
        "and attained at the clock held (default: off; the JSON always has them)")
    save: str | None = setting(
        "--roofline-save", parse_json_path, None,
        "save this run's measurements into the baseline at PATH, for --roofline-compare (the JSON "
        "report's schema): merged per test and device, each test keeping its last 8 runs; tests not "
        "measured now keep theirs, and a measurement that regressed replaces nothing (default: none)",
        "PATH", path=True)
    accept: bool = setting(
        "--roofline-accept", parse_bool, False,
        "let --roofline-save replace a test's baseline with a measurement that regressed (the "
        "change is accepted; default: refused)")
    compare: str | None = setting(
        "--roofline-compare", parse_baseline_path, None,
        "compare each measurement's attained fraction with the baseline's record of the same test "
        "(a --roofline-save or --roofline-json file); a regression fails its test (default: none)",
        "PATH", path=True)
    regression: float = setting(
        "--roofline-regression", parse_regression, DEFAULT_REGRESSION,
        "the least drop of attained fraction against the baseline that fails a test, when it is "
        "beyond the run-to-run noise too, as a fraction or in percent: 0.1 or 10 percent written "
        "with a percent sign (default: 0.1)",
        "DROP")
    #: the base of an A/B comparison (:mod:`.against`), and the command that prepares it
    against: str | None = setting(
        "--roofline-against", parse_text, None,
        "measure every test beside its version in REF, a git commit-ish of the repository under test "
        "(origin/main, HEAD~1, a tag) or a directory holding a checkout of the base: both sides in "
        "turns, in one job, and a test whose attained fraction dropped beyond the noise fails "
        "(default: none)",
        "REF")
    against_setup: str | None = setting(
        "--roofline-against-setup", parse_text, None,
        "a shell command run once in the base's tree before its tests (installing or building "
        'it: pip install --no-deps --target "$ROOFLINE_BASE_SITE" . puts what it installs '
        "first on the base's path; default: none)",
        "CMD")
    compare_across_devices: bool = setting(
        "--roofline-compare-across-devices", parse_bool, False,
        "compare with baseline records measured on another device too (default: refused)")
    compare_interrupted: bool = setting(
        "--roofline-compare-interrupted", parse_bool, False,
        "compare with a baseline saved from a run that was cut short (-x, ^C, a worker that went "
        "down), whose missing tests go unchecked (default: refused)")
    markdown: str | None = setting(
        "--roofline-markdown", parse_json_path, None,
        "append a Markdown summary of the run to PATH (default: $GITHUB_STEP_SUMMARY when set and "
        "something was measured)",
        "PATH", path=True)
    plot: str | None = setting(
        "--roofline-plot", parse_plot_path, None,
        "draw the roofline plot of the run to PATH, .svg or .png (needs the plot extra: "
        "matplotlib; default: none)",
        "PATH", path=True)
    require_measurement: bool = setting(
        "--roofline-require-measurement", parse_bool, False,
        "fail a marked test that takes the roofline fixture but measures nothing (default: warn)")
    suggest: bool = setting(
        "--roofline-suggest", parse_bool, False,
        "print, for each measurement whose op was inferred (a budget with no op), the explicit "
        "marker that gives the same floor, ready to paste over its test (default: off)")
    # fmt: on
    #: where each setting came from, by name: a flag, ``ini <key>`` or ``default``
    origins: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: pytest.Config) -> SessionSettings:
        resolved = {s.name: _resolve(config, s) for s in SETTINGS}
        values = {name: value for name, (value, _) in resolved.items()}
        origins = {name: origin for name, (_, origin) in resolved.items()}
        _check_distinct_outputs(values, origins)
        return cls(origins=origins, **values)

    def said(self, name: str) -> str:
        """How this session's setting ``name`` was asked for, as a message says it:
        ``--roofline-cache=warm``, ``ini roofline_cache = warm``, ``the default``."""
        origin = self.origins.get(name, "default")
        setting = next((s for s in SETTINGS if origin in (s.flag, f"ini {s.dest}")), None)
        if setting is None:
            return "the default"
        if setting.metavar is None:  # a flag: it says its value by its name
            return origin
        value = getattr(self, name)
        return f"{origin}={value}" if origin == setting.flag else f"{origin} = {value}"


#: every setting, in the order of :class:`SessionSettings`'s fields
SETTINGS: tuple[Setting, ...] = tuple(
    f.metadata["setting"] for f in dataclasses.fields(SessionSettings) if "setting" in f.metadata
)


#: the settings that name a file this run writes
_OUTPUTS = ("json", "save", "markdown", "plot")


def _check_distinct_outputs(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """Two outputs to one file would leave one of them, or a mix of both: a usage error naming both."""
    seen: dict[str, str] = {}
    for name in _OUTPUTS:
        path = values.get(name)
        if not path:
            continue
        real = os.path.realpath(os.path.expanduser(path))
        if real in seen:
            raise pytest.UsageError(
                f"{origins.get(name, name)} and {origins.get(seen[real], seen[real])} name the same file,"
                f" {path!r}: give each output a file of its own"
            )
        seen[real] = name


def check_peaks_kind(settings: SessionSettings, *, device_hooks: bool) -> None:
    """A peaks file for another kind of device than the session's is a usage error before any test
    runs, wherever the session's kind is known without CuPy or a device hook: ``cpu``, and ``auto``
    where CuPy is not installed: docs/options.md ("Your own peaks")."""
    peaks, spec = settings.peaks, settings.device.strip().lower()
    if peaks in PEAK_SOURCES or settings.mode == "off" or device_hooks or spec not in ("auto", "cpu"):
        return
    if spec == "auto" and _cupy_installed():
        return  # auto may be a GPU: knowing would cost importing CuPy in every run
    from ..model.peaks import peaks_file_kind

    kind = peaks_file_kind(peaks)
    if kind not in (None, "cpu"):
        why = "" if spec == "cpu" else " (auto, without CuPy)"
        raise pytest.UsageError(
            f"{settings.origins.get('peaks', '--roofline-peaks')} {peaks}: its kind {kind!r} does not "
            f"match the device it refines, this CPU{why}; give kind 'cpu' or leave it out"
        )


def _cupy_installed() -> bool:
    import importlib.util
    import sys

    try:
        return "cupy" in sys.modules or importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # a broken install: it may still be there
        return True
