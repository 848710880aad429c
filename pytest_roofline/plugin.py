"""The pytest11 entry point: options, the ``speed_of_light`` marker and the ``roofline`` fixture.

Installed but unused, this module costs a test run almost nothing: it imports no numpy, no CuPy, no
tabulate and no timing code until a test asks for a measurement. Runtime state lives in
:class:`RooflineSession`, registered as a plugin in ``pytest_configure`` and stashed on the config.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import warnings
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from .model import Device, Estimate
    from .ops import OpSpec
    from .report import Record
    from .timing.base import Backend, Policy
    from .timing.engine import Measurement
    from .verdict import Result

MARKER = "speed_of_light"
FIXTURE = "roofline"
MODES = ("enforce", "report", "off")
PEAK_SOURCES = ("datasheet", "measured")
DEFAULT_MIN_FRACTION = 0.5
DEFAULT_MAX_TIME = 1.0


# -- option values: each parser raises ArgumentTypeError, which pytest turns into a usage error ----


def parse_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in choices:
            from .model import did_you_mean

            raise argparse.ArgumentTypeError(
                f"expected one of {', '.join(choices)}, got {text!r}{did_you_mean(text, choices)}"
            )
        return text

    return parse


parse_mode = _choice(MODES)


def parse_stat(text: str) -> str:
    from .timing.base import STATS  # imported when used: the plugin loads nothing it may not need

    return _choice(STATS)(text)


def parse_device(text: str) -> str:
    """Only the spelling here: devices registered by conftest hooks exist from ``pytest_configure`` on,
    where the spec is resolved (:func:`_check_session_device`)."""
    spec = text.strip()
    if not spec:
        raise argparse.ArgumentTypeError("expected auto, cpu, cuda, cuda:N or a table key, got ''")
    from .detect import CUDA_SPEC

    if spec.lower().startswith("cuda") and spec.lower() != "cuda" and not CUDA_SPEC.fullmatch(spec.lower()):
        raise argparse.ArgumentTypeError(f"expected cuda or cuda:N (N a GPU index), got {text!r}")
    return spec


def parse_peaks(text: str) -> str:
    """``datasheet``, ``measured``, or a JSON file of the user's own ceilings (read and checked now).

    The file is applied over the session's device, so it need not be complete: it is checked here
    over a stand-in device, which makes every mistake in it a usage error before any test runs.
    """
    if text in PEAK_SOURCES:
        return text
    from .model import Device, Figure, Precision, Source, Unit, did_you_mean
    from .peaks import load_peaks_file

    hint = did_you_mean(text, PEAK_SOURCES)
    if hint and not Path(text).exists():  # "datashet": a misspelling, not a missing file
        raise argparse.ArgumentTypeError(f"expected datasheet, measured or a peaks file, got {text!r}{hint}")

    stand_in = Figure(1.0, Source.DATASHEET)
    base = Device("base", "base", "cpu", {(Precision.FP32, Unit.VECTOR): stand_in}, stand_in)
    try:
        load_peaks_file(text, base=base)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc} (expected datasheet, measured or a JSON file of ceilings)"
        ) from None
    return text


def parse_json_path(text: str) -> str:
    """A file we will be able to write: its directory exists and is writable, it is not a directory."""
    target = Path(text).expanduser()
    directory = target.resolve().parent
    problem = ""
    if target.is_dir():
        problem = "it is a directory"
    elif not directory.is_dir():
        problem = f"directory {str(directory)!r} does not exist"
    elif not os.access(directory, os.W_OK):
        problem = f"directory {str(directory)!r} is read-only"
    if problem:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {problem}")
    return text


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its command-line option, its ini twin, its parser and its default."""

    name: str
    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    metavar: str | None = None  # None: a flag that takes no value
    #: an ini value naming a file is relative to the ini file's directory
    path: bool = False

    @property
    def dest(self) -> str:
        return f"roofline_{self.name}"


SETTINGS: tuple[Setting, ...] = (
    Setting("report", "--roofline-report", parse_bool, False,
            "print a table of every measurement after the tests (default: off)"),
    Setting("json", "--roofline-json", parse_json_path, None,
            "write every measurement, with raw samples and environment, to PATH as JSON "
            "(default: none)", "PATH", path=True),
    Setting("device", "--roofline-device", parse_device, "auto",
            "device to measure on and judge against: auto, cpu, cuda, cuda:N or a table key "
            "(default: auto = the first CUDA device, else this CPU)", "DEVICE"),
    Setting("min_fraction", "--roofline-min-fraction", parse_fraction, DEFAULT_MIN_FRACTION,
            "budget for tests whose marker sets none: fail below this fraction of speed of light "
            f"(default: {DEFAULT_MIN_FRACTION})", "FRACTION"),
    Setting("mode", "--roofline-mode", parse_mode, "enforce",
            "enforce: fail tests below budget; report: measure and report only; off: call each kernel "
            "once, no timing (default: enforce)", "MODE"),
    Setting("stat", "--roofline-stat", parse_stat, "median",
            "statistic the verdict uses: median, min or mean (default: median)", "STAT"),
    Setting("max_time", "--roofline-max-time", parse_seconds, DEFAULT_MAX_TIME,
            "wall-time budget per measurement in seconds, warm-up and flushes included; the first "
            f"10 samples are always taken (default: {DEFAULT_MAX_TIME})", "SECONDS"),
    Setting("no_flush", "--roofline-no-flush", parse_bool, False,
            "do not flush caches before each sample: warm-cache times, reported as such "
            "(default: flush)"),
    Setting("peaks", "--roofline-peaks", parse_peaks, "datasheet",
            "ceilings to judge against: datasheet, measured, or a JSON file of your own "
            "(default: datasheet; CPU ceilings are always measured)", "SOURCE", path=True),
)  # fmt: skip

_SETTINGS_BY_NAME = {s.name: s for s in SETTINGS}


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


def resolve_setting(config: pytest.Config, name: str) -> tuple[Any, str]:
    """One precedence chain for session settings: command line > ini > default.

    Returns the value and where it came from (``--roofline-device``, ``ini roofline_device`` or
    ``default``), for messages. A bad ini value is a usage error naming the key and the value.
    """
    s = _SETTINGS_BY_NAME[name]
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
        return s.parse(text), f"ini {s.dest}"
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {s.dest} = {raw!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class SessionSettings:
    report: bool
    json: str | None
    device: str
    min_fraction: float
    mode: str
    stat: str
    max_time: float
    flush: bool
    peaks: str
    #: where each setting came from, by name: a flag, ``ini <key>`` or ``default``
    origins: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: pytest.Config) -> SessionSettings:
        resolved = {s.name: resolve_setting(config, s.name) for s in SETTINGS}
        values = {name: value for name, (value, _) in resolved.items()}
        origins = {name: origin for name, (_, origin) in resolved.items()}
        flush = not values.pop("no_flush")
        return cls(flush=flush, origins=origins, **values)


# -- the marker ----------------------------------------------------------------------------------

MARKER_DOC = (
    f"{MARKER}(op, *, min_fraction=None, dtype=None, device=None, math=None, stat=None, "
    "max_time=None, flush=None, **params): this test's kernel must reach min_fraction of the "
    "speed-of-light floor of op(**params) in dtype on device (pytest-roofline). Parameters not given "
    "are taken from the test's parametrize values; without the roofline fixture the test body is "
    "the kernel. See `roofline ops`."
)


def _marker_signature(
    op: str | None = None,
    *,
    min_fraction: float | None = None,
    dtype: object = None,
    device: str | None = None,
    math: str | None = None,
    stat: str | None = None,
    max_time: float | None = None,
    flush: bool | None = None,
    **params: Any,
) -> None:
    """The speed_of_light marker's real signature: binding to it catches typos and extra arguments."""


_KEYWORDS = ("min_fraction", "dtype", "device", "math", "stat", "max_time", "flush")


@dataclass(frozen=True, slots=True)
class MarkerArgs:
    """The speed_of_light markers on a test, merged (function over class over module) and checked."""

    op: str | None = None
    keywords: Mapping[str, Any] = field(default_factory=dict)  # min_fraction, dtype, ... when given
    params: Mapping[str, Any] = field(default_factory=dict)  # op parameters


def read_marker(item: pytest.Item) -> MarkerArgs | None:
    """Bind and check every speed_of_light marker on ``item``; ValueError on the first mistake."""
    marks = list(item.iter_markers(MARKER))
    if not marks:
        return None
    signature = inspect.signature(_marker_signature)
    op: str | None = None
    keywords: dict[str, Any] = {}
    params: dict[str, Any] = {}
    for mark in reversed(marks):  # farthest first, so the closest marker wins
        if len(mark.args) > 1:
            raise ValueError(
                f"@pytest.mark.{MARKER} takes the op as its only positional argument; got "
                f"{', '.join(map(repr, mark.args))} (write the others as keywords, e.g. dtype=...)"
            )
        try:
            bound = signature.bind(*mark.args, **mark.kwargs)
        except TypeError as exc:
            raise ValueError(f"@pytest.mark.{MARKER}: {exc}") from None
        arguments = dict(bound.arguments)
        if arguments.get("op") is not None:
            if op is not None and arguments["op"] != op:
                params = {}  # a closer marker naming another op starts afresh
            op = arguments["op"]
        keywords.update({k: arguments[k] for k in _KEYWORDS if arguments.get(k) is not None})
        params.update(arguments.get("params", {}))
    args = MarkerArgs(op=op, keywords=keywords, params=params)
    if op is None and params:
        raise ValueError(f"@pytest.mark.{MARKER}: parameters {sorted(params)} given without an op")
    if op is not None:
        _check_params(op, params, complete=False)
    _check_keywords(keywords)
    return args


def _check_params(op: str, params: Mapping[str, Any], *, complete: bool) -> OpSpec:
    """Each given parameter against the op's real ones; with ``complete``, all of them together.

    Raises an OpError (a ValueError) naming the op, the parameter and the value.
    """
    from .model import did_you_mean
    from .ops import OpError, check_params, get_op

    spec = get_op(op)
    for name in params:
        if name not in spec.param_names:  # a misspelled keyword (min_fracton) is as likely as a parameter
            raise OpError(
                f"{spec.name} has no parameter {name!r}"
                f"{did_you_mean(name, [*spec.param_names, *_KEYWORDS])}; "
                f"it takes {spec.signature()} and the keywords {', '.join(_KEYWORDS)}"
            )
    if complete:
        check_params(spec, params)  # required ones present, cross-parameter rules (custom has work)
        return spec
    by_name = {p.name: p for p in spec.params}
    for name, value in params.items():
        by_name[name].check(spec.name, value)
    return spec


def _check_keywords(kw: Mapping[str, Any]) -> None:
    """The marker's (or a call's) keywords; the device only for its spelling (see _device_skip_reason)."""
    from .floor import check_math
    from .model import parse_dtype
    from .verdict import check_fraction

    if "dtype" in kw:
        parse_dtype(kw["dtype"])
    if "min_fraction" in kw:
        check_fraction(kw["min_fraction"])
    if "math" in kw:
        check_math(kw["math"])
    from .timing.base import STATS

    if "stat" in kw and kw["stat"] not in STATS:
        raise ValueError(f"stat must be one of {', '.join(STATS)}; got {kw['stat']!r}")
    if "max_time" in kw:
        from .timing.base import check_positive

        check_positive("max_time", kw["max_time"])
    if "flush" in kw and not isinstance(kw["flush"], bool):
        raise ValueError(f"flush must be True or False; got {kw['flush']!r}")
    if "device" in kw and not isinstance(kw["device"], str):
        raise ValueError(f"device must be a string such as 'cuda' or 'cpu'; got {kw['device']!r}")


def _dtype_of_arguments(op: str, args: tuple[object, ...]) -> object:
    """The dtype of the first argument that has one, when neither the marker nor the call gives it."""
    from .model import parse_dtype

    for index, arg in enumerate(args):
        dtype = getattr(arg, "dtype", None)
        if dtype is not None:
            try:
                return parse_dtype(dtype)
            except ValueError as exc:
                raise ValueError(
                    f"{op}: no dtype was given, and argument {index}'s ({dtype}) is not one: {exc}; "
                    "pass dtype=... to the marker or the call"
                ) from None
    raise ValueError(f"{op} needs dtype: pass dtype=... to the marker or the call")


def _parametrized(item: pytest.Item) -> dict[str, Any]:
    """The test's parametrize values by name (an indirect one as its fixture's value, once set up)."""
    callspec = getattr(item, "callspec", None)
    params: Mapping[str, Any] = getattr(callspec, "params", {})
    funcargs: Mapping[str, Any] = getattr(item, "funcargs", {})
    return {name: funcargs.get(name, value) for name, value in params.items()}


def _names_a_table_device(spec: str) -> bool:
    keyword = spec.strip().lower()
    from .detect import CUDA_SPEC

    return keyword not in ("auto", "cpu") and not CUDA_SPEC.fullmatch(keyword)


def _device_skip_reason(spec: str) -> str:
    """Why a marker's device is not on this machine ("" when it is); ValueError for a wrong spec."""
    from .detect import CUDA_SPEC

    cuda = CUDA_SPEC.fullmatch(spec.strip().lower())
    if cuda:
        from .timing.cuda import device_count

        index, count = int(cuda["index"] or 0), device_count()
        if index < count:
            return ""
        return f"needs CUDA device {index} (device={spec!r}); {count} visible here (CuPy missing or no GPU)"
    from .detect import parse_target

    target = parse_target(spec)  # an unknown name is a mistake, not a missing device
    if target.local:
        return ""
    return f"needs {spec!r} (device={spec!r}): a table device that is not on this machine"


# -- the session -----------------------------------------------------------------------------------

SESSION_KEY = pytest.StashKey["RooflineSession"]()
MARKER_KEY = pytest.StashKey["MarkerArgs | None"]()


@dataclass(frozen=True, slots=True)
class Request:
    """Everything one measurement needs, resolved through the precedence chain."""

    op: str
    params: dict[str, Any]
    dtype: object
    math: str | None
    min_fraction: float
    device_spec: str
    policy: Policy
    name: str


class RooflineSession:
    """Session state and the runtime hooks; registered as a plugin for the length of the run."""

    def __init__(self, config: pytest.Config, settings: SessionSettings) -> None:
        self.config = config
        self.settings = settings
        self.records: list[Record] = []
        self.device_records: dict[str, Record] = {}
        self._devices: dict[str, Device] = {}
        self._backends: dict[str, Backend] = {}
        self._cpu_backend: Backend | None = None
        #: what the register hooks added, and what they replaced (restored at unconfigure)
        self.registered_ops: dict[str, OpSpec | None] = {}
        self.registered_devices: dict[str, Device | None] = {}
        self.json_error: str | None = None
        #: warnings raised while resolving devices (calibration), shown with the terminal summary
        self.notes: list[str] = []
        #: node ids of the tests that failed as expected (xfail)
        self.xfailed: set[str] = set()
        #: tests skipped at collection because their marker's device is absent: node id -> (op, reason)
        self.absent: dict[str, tuple[str, str]] = {}

    # - registrations (the historic register hooks) -

    def add_op(self, *args: Any, **kwargs: Any) -> OpSpec:
        from .ops import OpError, op_names, register_op

        name = args[0] if args else kwargs.get("name")
        previous = None
        if isinstance(name, str) and name in op_names():
            from .ops import get_op

            previous = get_op(name)
        try:
            spec = register_op(*args, **kwargs)
        except (OpError, TypeError) as exc:
            raise pytest.UsageError(f"pytest_roofline_register_ops: {exc}") from None
        self.registered_ops.setdefault(spec.name, previous)
        return spec

    def add_device(self, device: Device) -> Device:
        from .devices import DeviceError, find_device, register_device

        key = getattr(device, "key", None)
        previous = find_device(key) if isinstance(key, str) else None
        if previous is not None and previous.key != key:
            previous = None  # found by another device's name, not this key
        try:
            register_device(device, replace=True)
        except DeviceError as exc:
            raise pytest.UsageError(f"pytest_roofline_register_devices: {exc}") from None
        self.registered_devices.setdefault(device.key, previous)
        return device

    def undo_registrations(self) -> None:
        from .devices import register_device, unregister_device
        from .ops import register_op, unregister_op

        for name, op in self.registered_ops.items():
            if op is None:
                unregister_op(name)
            else:  # a built-in (or earlier) op a conftest replaced for this session
                register_op(
                    op.name, op.params, op.cost_fn, matrix=op.matrix, flops=op.flops_formula,
                    bytes=op.bytes_formula, replace=True,
                )  # fmt: skip
        for key, device in self.registered_devices.items():
            if device is None:
                unregister_device(key)
            else:
                register_device(device, replace=True)
        self.registered_ops.clear()
        self.registered_devices.clear()

    # - devices and backends -

    def device(self, spec: str) -> Device:
        """The device that judges measurements made with ``spec``: the hooks first, then detection.

        A peaks file (``--roofline-peaks FILE``) overrides figures of whichever device that is.
        """
        if spec not in self._devices:
            # Calibration may warn (a corrupt cache replaced). Inside a test, a suite's
            # filterwarnings=error would turn that into the test's failure, so the warnings
            # are kept and printed with the terminal summary instead.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                device = self.config.hook.pytest_roofline_device(config=self.config, spec=spec)
            self.notes.extend(f"{w.category.__name__}: {w.message}" for w in caught)
            if device is None:  # every implementation declined, ours included: cannot happen
                raise RuntimeError(f"no device for {spec!r}")
            peaks = self.settings.peaks
            if peaks not in PEAK_SOURCES:
                from .devices import DeviceError
                from .peaks import load_peaks_file

                base, device = device, load_peaks_file(peaks, base=device)
                if device.kind != base.kind:
                    raise DeviceError(
                        f"--roofline-peaks {peaks}: its kind {device.kind!r} does not match the device it "
                        f"refines, {base.name!r} ({base.kind}); give kind {base.kind!r} or leave it out"
                    )
            from .report import device_record

            self._devices[spec] = device
            self.device_records.setdefault(device.key, device_record(device))
        return self._devices[spec]

    def builtin_device(self, spec: str) -> Device:
        from .detect import auto_spec, parse_target, require_local

        target = parse_target(auto_spec() if spec == "auto" else spec)
        if target.kind == "cpu":
            from .calibrate import cpu_device

            return cpu_device()
        require_local(target)
        index = target.index or 0
        if self.settings.peaks == "measured":  # a visible GPU, or the table entry of one
            from .calibrate import calibrate_cuda

            return calibrate_cuda(index).device
        if target.kind == "table":
            from .devices import lookup

            return lookup(target.spec)
        from .timing.cuda import cuda_device

        return cuda_device(index)

    def backend(self, spec: str, device: Device) -> Backend:
        key = f"{spec}|{device.key}"
        if key not in self._backends:
            backend = self.config.hook.pytest_roofline_backend(config=self.config, device=device, spec=spec)
            if backend is None:
                raise RuntimeError(f"no timer backend for {spec!r}")
            self._backends[key] = backend
        return self._backends[key]

    def builtin_backend(self, spec: str, device: Device) -> Backend:
        """The host timer for the CPU, CUDA events for a GPU: chosen by where ``spec`` measures,
        not by the device's figures (a peaks file may describe any device)."""
        from .detect import auto_spec, parse_target

        target = parse_target(auto_spec() if spec == "auto" else spec)
        if target.kind == "cpu":
            if self._cpu_backend is None:  # one per session: its flush buffer is 2x the LLC
                from .timing.cpu import CpuBackend

                self._cpu_backend = CpuBackend()
            return self._cpu_backend
        from .timing.cuda import CudaBackend

        return CudaBackend(target.index or 0)

    # - per-test resolution -

    def policy(self, keywords: Mapping[str, Any]) -> Policy:
        from .timing.base import Policy

        s = self.settings
        return Policy(
            stat=keywords.get("stat", s.stat),
            max_time_s=float(keywords.get("max_time", s.max_time)),
            flush=keywords.get("flush", s.flush),
        )

    def resolve(self, item: pytest.Item, args: tuple[object, ...], call: Mapping[str, Any]) -> Request:
        """Call keywords over the marker over parametrize values over session settings.

        Raises ValueError (OpError, DeviceError) naming the parameter and the value.
        """
        marker = item.stash.get(MARKER_KEY, None) or MarkerArgs()
        call = dict(call)
        op = call.pop("op", None) or marker.op
        name = call.pop("name", None) or ""
        if op is None:
            raise ValueError(
                f"no op: pass op=... to {FIXTURE}(...) or mark the test with "
                f"@pytest.mark.{MARKER}(op, ...) (`roofline ops` lists them)"
            )
        from .ops import get_op
        from .verdict import check_fraction

        spec = get_op(op)
        parametrized = _parametrized(item)
        # parametrize values of the same name feed the op's parameters, below marker and call
        params = {p.name: parametrized[p.name] for p in spec.params if p.name in parametrized}
        if op == marker.op:
            params.update(marker.params)
        keywords = dict(marker.keywords)
        keywords.update({k: call.pop(k) for k in _KEYWORDS if k in call})
        params.update(call)
        dtype = keywords.get("dtype", parametrized.get("dtype"))
        if dtype is None:
            dtype = _dtype_of_arguments(op, args)
        _check_params(op, params, complete=True)  # here too for mode off, which estimates nothing
        _check_keywords({**keywords, "dtype": dtype})
        min_fraction = check_fraction(keywords.get("min_fraction", self.settings.min_fraction))
        return Request(
            op=op,
            params=params,
            dtype=dtype,
            math=keywords.get("math"),
            min_fraction=min_fraction,
            device_spec=keywords.get("device", self.settings.device),
            policy=self.policy(keywords),
            name=str(name),
        )

    def estimate(self, request: Request, *, measuring: bool = True) -> Estimate:
        """The floor of ``request``; a table device needs no local hardware unless it is measured on."""
        from .floor import estimate

        spec = request.device_spec
        if not measuring and _names_a_table_device(spec):
            from .devices import lookup

            device = lookup(spec)
        else:
            device = self.device(spec)
        return estimate(request.op, dtype=request.dtype, device=device, math=request.math, **request.params)

    def run(
        self,
        item: pytest.Item,
        fn: object,
        args: tuple[object, ...],
        call: Mapping[str, Any],
        *,
        can_fail: bool,
    ) -> Result | None:
        """Measure ``fn(*args)``, record the result, and in enforce mode fail the test below budget.

        ``can_fail=False`` (``roofline.measure``) records the result but never fails the test on it.
        """
        __tracebackhide__ = True
        if not callable(fn):
            _fail(f"{FIXTURE}: the kernel must be callable; got {fn!r} ({type(fn).__name__})")
        try:
            request = self.resolve(item, args, call)
        except ValueError as exc:
            _fail(f"{FIXTURE}: {exc}")
        if request.device_spec != self.settings.device:
            self._skip_if_absent(item, request.op, request.device_spec)
        if self.settings.mode == "off":
            fn(*args)
            return None
        try:
            est = self.estimate(request)
            device = self.device(request.device_spec)
            backend = self.backend(request.device_spec, device)
        except (ValueError, RuntimeError) as exc:
            _fail(f"{FIXTURE}: {exc}")
        from .report import result_record
        from .timing.engine import measure
        from .verdict import Result, Verdict, decide, judge

        def measure_once() -> Measurement:
            __tracebackhide__ = True
            return measure(fn, *args, policy=request.policy, backend=backend)

        if can_fail:
            result = decide(est, measure_once, request.min_fraction, name=request.name, nodeid=item.nodeid)
        else:
            m = measure_once()
            attained, verdict = judge(est, m, request.min_fraction)
            result = Result(request.name, est, m, request.min_fraction, attained, verdict, nodeid=item.nodeid)
        mode = self.settings.mode if can_fail else "measure"
        self.records.append(result_record(result, nodeid=item.nodeid, mode=mode))
        prefix = f"roofline[{request.name}]" if request.name else "roofline"
        item.user_properties.extend(
            [
                (f"{prefix}_attained", round(result.attained, 6)),
                (f"{prefix}_floor_s", result.floor_s),
                (f"{prefix}_time_s", result.time_s),
                (f"{prefix}_min_fraction", result.min_fraction),
                (f"{prefix}_verdict", str(result.verdict)),
            ]
        )
        self.config.hook.pytest_roofline_result(item=item, result=result)
        if can_fail and self.settings.mode == "enforce" and result.verdict is not Verdict.PASS:
            _fail(result.message())
        return result

    # - hooks -

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_device(self, config: pytest.Config, spec: str) -> Device | None:
        return self.builtin_device(spec)

    @pytest.hookimpl(trylast=True)
    def pytest_roofline_backend(self, config: pytest.Config, device: Device, spec: str) -> Backend | None:
        return self.builtin_backend(spec, device)

    @pytest.hookimpl(trylast=True)  # after -k and -m have deselected what they will
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A test whose marker names a device that is not on this machine is skipped, with the reason.

        Skipped through a mark, so pytest reports the test's own location; a marker with a mistake
        is left to :meth:`pytest_runtest_setup`, which fails the test with the message.
        """
        for item in items:
            try:
                marker = read_marker(item)
                spec = marker.keywords.get("device") if marker is not None else None
                reason = _device_skip_reason(spec) if spec is not None else ""
            except ValueError:
                continue
            if marker is not None and reason:
                item.add_marker(pytest.mark.skip(reason=reason))
                self.absent[item.nodeid] = (marker.op or "?", reason)

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Check the marker before the test runs (a test skipped for its device never gets here)."""
        __tracebackhide__ = True
        try:
            marker = read_marker(item)
            item.stash[MARKER_KEY] = marker
            if marker is not None and "device" in marker.keywords:
                _device_skip_reason(marker.keywords["device"])  # a misspelled device is a mistake
            if marker is not None and FIXTURE not in getattr(item, "fixturenames", ()):
                self._check_fixtureless(item, marker)
        except ValueError as exc:
            _fail(f"{FIXTURE}: {exc}")

    def _skip_if_absent(self, item: pytest.Item, op: str, spec: str) -> None:
        """A call's ``device=`` that is not on this machine skips the test, as the marker's does."""
        try:
            reason = _device_skip_reason(spec)
        except ValueError as exc:
            _fail(f"{FIXTURE}: {exc}")
        if reason:
            self._skip(item, op, reason)

    def _skip(self, item: pytest.Item, op: str, reason: str) -> NoReturn:
        from .report import skipped_record

        self.records.append(skipped_record(nodeid=item.nodeid, label=op, reason=reason))
        pytest.skip(reason)

    def _check_fixtureless(self, item: pytest.Item, marker: MarkerArgs) -> None:
        """A test whose body is the kernel: marker and parametrize values must say everything."""
        if marker.op is None:
            raise ValueError(
                f"@pytest.mark.{MARKER} needs an op when the test does not use the {FIXTURE} fixture"
            )
        from .model import parse_dtype

        parametrized = _parametrized(item)
        spec = _check_params(marker.op, {}, complete=False)
        params = {p.name: parametrized[p.name] for p in spec.params if p.name in parametrized}
        _check_params(marker.op, {**params, **marker.params}, complete=True)
        dtype = marker.keywords.get("dtype", parametrized.get("dtype"))
        if dtype is None:
            raise ValueError(f"{marker.op} needs dtype: pass dtype=... to the marker or parametrize dtype")
        parse_dtype(dtype)

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        """A marked test without the fixture runs once normally, then its body is timed as the kernel."""
        outcome = yield
        marker = pyfuncitem.stash.get(MARKER_KEY, None)
        if marker is None or FIXTURE in pyfuncitem.fixturenames or self.settings.mode == "off":
            return outcome
        names = inspect.signature(pyfuncitem.obj).parameters
        kwargs = {n: pyfuncitem.funcargs[n] for n in names if n in pyfuncitem.funcargs}
        self.run(pyfuncitem, functools.partial(pyfuncitem.obj, **kwargs), (), {}, can_fail=True)
        return outcome

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist: a worker's measurements join the controller's report."""
        output = getattr(node, "workeroutput", None) or {}
        self.records.extend(json.loads(output.get("roofline_records", "[]")))
        for record in json.loads(output.get("roofline_devices", "[]")):
            self.device_records.setdefault(record["key"], record)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Record tests skipped for an absent device; remember the tests that failed as expected
        (their misses are what a suite of bad variants shows off)."""
        if report.when == "setup" and report.skipped and report.nodeid in self.absent:
            from .report import skipped_record

            op, reason = self.absent.pop(report.nodeid)
            self.records.append(skipped_record(nodeid=report.nodeid, label=op, reason=reason))
        if report.when == "call" and hasattr(report, "wasxfail"):
            self.xfailed.add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: hand everything to the controller
            workeroutput["roofline_records"] = json.dumps(self.records)
            workeroutput["roofline_devices"] = json.dumps(list(self.device_records.values()))
            return
        for record in self.records:  # xdist sends the workers' reports here, so every node is known
            record["xfailed"] = record["nodeid"] in self.xfailed
        if self.settings.json:
            from .report import payload, write_json_atomic

            try:
                write_json_atomic(self.settings.json, payload(self.records, self.device_records.values()))
            except (OSError, ValueError) as exc:
                self.json_error = f"roofline: could not write --roofline-json {self.settings.json!r}: {exc}"
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if hasattr(self.config, "workeroutput"):
            return
        tr = terminalreporter
        for note in dict.fromkeys(self.notes):
            tr.write_line(f"roofline: {note}", yellow=True)
        if self.settings.report:
            from .report import format_device_header, format_table, ordered, summary_counts

            tr.write_sep("=", "roofline report")
            for device in self.device_records.values():
                for line in format_device_header(device):
                    tr.write_line(line)
            if self.records:
                lines = format_table(self.records)
                for line in lines[:2]:
                    tr.write_line(line, bold=True)
                for line, record in zip(lines[2:], ordered(self.records), strict=True):
                    verdict = record["verdict"]
                    tr.write_line(
                        line,
                        red=verdict in ("MISS", "faster-than-light"),
                        bold=verdict in ("MISS", "faster-than-light"),
                        green=verdict == "pass",
                        yellow=verdict == "skipped",
                    )
            tr.write_line(f"{summary_counts(self.records)}; mode {self.settings.mode}")
        if self.json_error:
            tr.write_line(self.json_error, red=True, bold=True)
        elif self.settings.json:
            tr.write_line(f"roofline: wrote {len(self.records)} measurement(s) to {self.settings.json}")


def _fail(message: str) -> NoReturn:
    """Fail the current test with ``message`` only: no traceback, no chained exception above it."""
    __tracebackhide__ = True
    raise pytest.fail.Exception(message, pytrace=False) from None


# -- configure / fixture ---------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_DOC)
    settings = SessionSettings.from_config(config)
    session = RooflineSession(config, settings)
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "roofline-session")
    # historic: a conftest.py found later, during collection, registers too
    ops = {"config": config, "register": session.add_op}
    devices = {"config": config, "register": session.add_device}
    config.hook.pytest_roofline_register_ops.call_historic(kwargs=ops)
    config.hook.pytest_roofline_register_devices.call_historic(kwargs=devices)
    _check_session_device(session)


def _check_session_device(session: RooflineSession) -> None:
    """Explicitly asking for a device that is not there is a usage error naming it.

    ``auto`` is always there; ``cpu`` too (its calibration waits for the first measurement). Any
    other spec is resolved now, through the device hooks, after the register hooks have run.
    """
    settings = session.settings
    spec = settings.device
    if settings.mode == "off" or spec.lower() in ("auto", "cpu"):
        return
    try:
        session.device(spec)
    except (ValueError, RuntimeError) as exc:
        where = settings.origins.get("device", "--roofline-device")
        raise pytest.UsageError(
            f"{where} {spec}: {exc}; use auto or cpu, or --roofline-mode off to run kernels untimed"
        ) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return
    session.undo_registrations()
    config.pluginmanager.unregister(session)
    del config.stash[SESSION_KEY]


class Roofline:
    """The ``roofline`` fixture: ``roofline(fn, *args, op=..., **params)`` times and judges a kernel."""

    def __init__(self, item: pytest.Item, session: RooflineSession) -> None:
        self._item = item
        self._session = session

    def __call__(
        self,
        fn: Callable[..., object],
        *args: object,
        op: str | None = None,
        dtype: object = None,
        min_fraction: float | None = None,
        name: str | None = None,
        **params: Any,
    ) -> Result | None:
        """Measure ``fn(*args)``, compute the floor, record it, and fail the test below budget.

        The marker's values are defaults; these keywords override them (``math``, ``stat``,
        ``max_time``, ``flush`` and ``device`` too). Returns the frozen result (``attained``,
        ``floor_s``, ``time_s``, ``bound``, ``passed``, ``stats``, ``estimate``, ...), or None in
        mode off, where ``fn(*args)`` is called once and not timed.
        """
        __tracebackhide__ = True
        call = _given(dict(params, op=op, dtype=dtype, min_fraction=min_fraction, name=name))
        return self._session.run(self._item, fn, args, call, can_fail=True)

    def measure(
        self, fn: Callable[..., object], *args: object, op: str | None = None, dtype: object = None,
        name: str | None = None, **params: Any,
    ) -> Result | None:  # fmt: skip
        """Like calling the fixture, but never fails the test on the result: a measurement for the report."""
        __tracebackhide__ = True
        call = _given(dict(params, op=op, dtype=dtype, name=name))
        return self._session.run(self._item, fn, args, call, can_fail=False)

    def estimate(self, op: str | None = None, *, dtype: object = None, **params: Any) -> Estimate:
        """The floor only, on this test's device: nothing runs."""
        __tracebackhide__ = True
        session = self._session
        try:
            request = session.resolve(self._item, (), _given(dict(params, op=op, dtype=dtype)))
            return session.estimate(request, measuring=False)
        except (ValueError, RuntimeError) as exc:
            _fail(f"{FIXTURE}: {exc}")

    @property
    def device(self) -> Device:
        """The session's device (resolved, and for the CPU calibrated, on first use)."""
        return self._session.device(self._session.settings.device)


def _given(call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if v is not None}


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
