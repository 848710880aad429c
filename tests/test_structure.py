"""The package's shape, checked: layers that only look down, no import cycle, modules and classes a
reader can hold in mind, one error base, and the types a user meets exported (issue 23)."""

from __future__ import annotations

import ast
import inspect
import pkgutil
from importlib import import_module
from pathlib import Path

import pytest

import pytest_roofline

PACKAGE = Path(pytest_roofline.__file__).parent
#: each layer may import the layers before it, never one after it
LAYERS = ("model", "timing", "machine", "analysis", "output", "plugin")
MAX_MODULE_LINES = 750
MAX_CLASS_LINES = 250


def modules() -> list[str]:
    return sorted(info.name for info in pkgutil.walk_packages([str(PACKAGE)], prefix="pytest_roofline."))


def source(name: str) -> tuple[Path, ast.Module]:
    origin = getattr(import_module(name).__spec__, "origin", None)
    assert origin is not None, f"{name} has no source file"
    path = Path(origin)
    return path, ast.parse(path.read_text(encoding="utf-8"))


def imported(name: str) -> set[str]:
    """Every pytest_roofline module ``name`` imports, at module level or inside a function, type-only
    imports included: a dependency is a dependency, wherever it is written."""
    path, tree = source(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("pytest_roofline"):
                continue
            for alias in node.names:  # `from . import units` imports a module
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in ALL else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pytest_roofline"))
    return {m for m in found if m in ALL and m != name}


ALL = set(modules()) | {"pytest_roofline"}


def layer(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else None


@pytest.mark.parametrize("name", sorted(m for m in ALL if layer(m)))
def test_a_layer_imports_only_the_layers_below_it(name: str) -> None:
    mine = LAYERS.index(layer(name))  # type: ignore[arg-type]
    above = sorted(m for m in imported(name) if layer(m) and LAYERS.index(layer(m)) > mine)  # type: ignore[arg-type]
    assert not above, f"{name} ({LAYERS[mine]}) imports {above}"


def test_no_module_imports_itself_through_others() -> None:
    graph = {m: imported(m) for m in ALL if m != "pytest_roofline"}
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("name", sorted(ALL))
def test_a_module_and_its_classes_are_short_enough_to_read(name: str) -> None:
    path, tree = source(name)
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= MAX_CLASS_LINES, f"{name}.{node.name} has {length} lines"


def test_every_exception_the_package_defines_is_a_roofline_error() -> None:
    from pytest_roofline import RooflineError

    strays = []
    for name in sorted(ALL):
        module = import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            ours = value.__module__ == name and issubclass(value, Exception)
            if ours and not issubclass(value, (RooflineError, Warning)):  # a warning is no error
                strays.append(f"{name}.{value.__name__}")
    assert not strays, f"not RooflineErrors: {strays}"


@pytest.mark.parametrize("name", ["Result", "Verdict", "Roofline", "RooflineError", "RooflineUsageError"])
def test_the_types_a_user_meets_are_exported(name: str) -> None:
    assert name in pytest_roofline.__all__
    assert getattr(pytest_roofline, name).__name__ == name


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("pytest_roofline.ops", "pytest_roofline.model.ops"),
        ("pytest_roofline.calibrate", "pytest_roofline.machine.calibrate"),
        ("pytest_roofline.report", "pytest_roofline.output.report"),
        ("pytest_roofline.session", "pytest_roofline.plugin.session"),
        ("pytest_roofline.floor", "pytest_roofline.model.estimate"),
    ],
)
def test_an_old_module_path_still_imports_for_a_release_and_says_where_it_went(old: str, new: str) -> None:
    import sys

    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} has moved to {new}"):
        module = import_module(old)
    assert module is import_module(new)  # the same module: a patch through either path is seen by both
    # and it keeps its own spec: with the old one, its relative imports inside functions (made at call
    # time) raise "ImportWarning: __package__ != __spec__.parent" under -W error
    assert module.__spec__.name == new


# -- data converted once (issue 32) -------------------------------------------------------------------


def calls_of(name: str) -> list[tuple[str, str]]:
    """Where the package calls ``name`` (``MeasurementRecord`` or ``MeasurementRecord.from_result``):
    each call's module and the function around it (``""`` at module level)."""
    found = []
    for module in sorted(ALL):
        _, tree = source(module)
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == name:
                around = [f.name for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
                found.append((module, around[-1] if around else ""))
    return found


def test_one_class_is_named_kernelcall() -> None:
    classes = [
        module
        for module in sorted(ALL)
        for node in ast.walk(source(module)[1])
        if isinstance(node, ast.ClassDef) and node.name == "KernelCall"
    ]
    assert classes == ["pytest_roofline.timing.calls"]


def test_a_result_becomes_a_record_in_one_place() -> None:
    assert calls_of("MeasurementRecord") == []  # made by its own class methods alone
    # (output/report.py re-exports the names from before the layers: it goes with the compatibility layer)
    shim = "pytest_roofline.output.report"
    made = [call for call in calls_of("MeasurementRecord.from_result") if call[0] != shim]
    assert made == [("pytest_roofline.plugin.measurer", "of")]


def test_a_record_becomes_comparable_once() -> None:
    """This run's records each make theirs with the record; a file's rows each become one."""
    assert calls_of("BaselineRecord") == [("pytest_roofline.output.records", "_comparable")]
    assert calls_of("BaselineRecord.from_record") == [("pytest_roofline.output.baseline", "parse_baseline")]


def test_the_regression_threshold_is_checked_in_one_place() -> None:
    """``ratio < 1 - threshold``: the rule's, which the gate and ``roofline compare`` both ask."""
    found = [
        module
        for module in sorted(ALL)
        for node in ast.walk(source(module)[1])
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Sub)
        and "threshold" in ast.unparse(node.right)
    ]
    assert found == ["pytest_roofline.output.comparison"]
    for module in ("pytest_roofline.plugin.gate", "pytest_roofline.cli"):
        assert "RegressionRule" in {n.id for n in ast.walk(source(module)[1]) if isinstance(n, ast.Name)}


def test_only_timing_arrays_reads_an_array_protocol() -> None:
    """What an array is, its bytes and where it lives, is one module's answer (timing/arrays.py)."""
    protocols = {"__array_interface__", "__cuda_array_interface__", "__dlpack__", "__dlpack_device__"}
    readers = set()
    for module in sorted(ALL):
        for node in ast.walk(source(module)[1]):
            named = isinstance(node, ast.Constant) and node.value in protocols
            read = isinstance(node, ast.Attribute) and node.attr in protocols
            if named or (read and isinstance(node.ctx, ast.Load)):
                readers.add(module)
    assert readers == {"pytest_roofline.timing.arrays"}
