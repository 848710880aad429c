"""The package's shape, checked: layers that only look down, no import cycle, modules and classes a
reader can hold in mind, one error base, and the types a user meets exported (issue 23); each op
declared once, data converted once, and the tests in folders that mirror the layers (issue 32)."""

from __future__ import annotations

import ast
import inspect
import pkgutil
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

import pytest_roofline

PACKAGE = Path(pytest_roofline.__file__).parent
#: each layer may import the layers before it, never one after it
LAYERS = ("model", "timing", "machine", "analysis", "output", "plugin")
MAX_MODULE_LINES = 750
MAX_CLASS_LINES = 250
#: a module docstring, closing quotes included
MAX_MODULE_DOCSTRING_LINES = 7


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
    # a module docstring says what the module is for; design reasoning and evidence live in docs/
    opening = tree.body[0] if tree.body else None
    assert isinstance(opening, ast.Expr), f"{name}: no docstring"
    assert isinstance(opening.value, ast.Constant), f"{name}: no docstring"
    length = (opening.end_lineno or opening.lineno) - opening.lineno + 1
    assert length <= MAX_MODULE_DOCSTRING_LINES, f"{name}'s docstring has {length} lines"
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


def _called(node: ast.AST) -> str:
    """The name a call calls (``register_op`` of ``register_op(...)`` or ``op_registry.register_op(...)``)."""
    if not isinstance(node, ast.Call):
        return ""
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")


def test_every_op_is_registered_through_register_op() -> None:
    """Each op the package defines is one ``register_op(OpSpec(...))``, every field given by keyword
    (the spec has no defaults: one left out fails at import), and no module but the registry's own
    writes the registry: a catalogue has no side table to forget."""
    from pytest_roofline.model.ops import all_ops

    declared: dict[str, str] = {}
    strays = []
    for name in sorted(ALL - {"pytest_roofline.model.op_registry"}):
        _, tree = source(name)
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
        registered = [call.args[0] for call in calls if _called(call) == "register_op" and call.args]
        for spec in (call for call in calls if _called(call) == "OpSpec"):
            if spec not in registered or spec.args:
                strays.append(f"{name}:{spec.lineno}: an OpSpec not given to register_op by keywords")
                continue
            fields = {k.arg: k.value for k in spec.keywords}
            op = fields.get("name")
            assert isinstance(op, ast.Constant), f"{name}:{spec.lineno}: the op's name is not written out"
            assert op.value not in declared, (
                f"{op.value} is declared twice: in {declared[op.value]} and {name}"
            )
            declared[op.value] = name
        for node in registered:
            if isinstance(node, ast.Constant):
                strays.append(f"{name}:{node.lineno}: register_op({node.value!r}, ...): declare an OpSpec")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and "_REGISTRY" in (
                getattr(node, "id", ""),
                getattr(node, "attr", ""),
            ):
                strays.append(f"{name}:{node.lineno}: touches the op registry's table")
    assert not strays
    ours = {spec.name: spec.cost_fn.__module__ for spec in all_ops() if spec.cost_fn.__module__ in ALL}
    assert ours == declared  # every op the package registers, each declared where its cost function is
    assert len(declared) >= 20


@pytest.mark.parametrize("name", ["Result", "Verdict", "Roofline", "RooflineError", "RooflineUsageError"])
def test_the_types_a_user_meets_are_exported(name: str) -> None:
    assert name in pytest_roofline.__all__
    assert getattr(pytest_roofline, name).__name__ == name


# - what a module holds is its own: no re-export layer (issue 32) -

#: the one module that gathers rather than defines: importing it registers every catalogue
#: (:mod:`.builtin_ops`, :mod:`.llm_ops`, the ``llm`` op, which looks the others up and so sits above
#: the registry), and a lookup must see them all; the registry below cannot import them (a cycle)
GATHERS = {"pytest_roofline.model.ops"}


def top_level(tree: ast.Module) -> tuple[set[str], set[str], list[str]]:
    """The public names a module defines, the names it imports, and its ``__all__`` (empty if none),
    at module level (under ``if`` and ``try`` too)."""
    defined: set[str] = set()
    imports: set[str] = set()
    exported: list[str] = []
    for statement in tree.body:
        nodes = list(ast.walk(statement)) if isinstance(statement, (ast.If, ast.Try)) else [statement]
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    defined.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value:
                    exported = [e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)]
            elif isinstance(node, ast.ImportFrom | ast.Import):
                imports.update(a.asname or a.name.partition(".")[0] for a in node.names)
    return {n for n in defined if not n.startswith("_")}, imports, exported


@pytest.mark.parametrize("name", sorted(ALL - {"pytest_roofline"} - GATHERS))
def test_a_module_exports_only_what_it_defines(name: str) -> None:
    """No ``from x import Name as Name``, no ``__all__`` entry defined elsewhere, no module-level
    ``__getattr__`` forwarding names (only the package's own: the public API, each name from the module
    that defines it), and no module that only imports: a name is imported from where it lives."""
    _, tree = source(name)
    defined, imports, exported = top_level(tree)
    aliases = [
        a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for a in node.names
        if a.asname is not None and a.asname == a.name
    ]
    assert not aliases, f"{name} re-exports {aliases} (`from ... import X as X`)"
    foreign = [n for n in exported if n not in defined]
    assert not foreign, f"{name}'s __all__ names what it does not define: {foreign}"
    forwards = any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body)
    assert not forwards, f"{name} forwards attributes to other modules (a module-level __getattr__)"
    only_imports = all(
        isinstance(node, ast.Import | ast.ImportFrom)
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))  # the docstring
        or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__")
        for node in tree.body
    )
    public_imports = {n for n in imports if not n.startswith("_") and n != "annotations"}
    assert not (only_imports and public_imports), f"{name} only imports names that live elsewhere"


def test_every_import_in_the_package_names_the_module_that_defines_the_name() -> None:
    """``from pytest_roofline.x import Name`` where ``x`` merely imported ``Name`` would keep a layer of
    re-exports alive unseen: every import names the defining module (or a submodule)."""
    strays = []
    for name in sorted(ALL - {"pytest_roofline"}):
        path, tree = source(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.split(".")
            target = (
                ".".join([*base[: len(base) - node.level + 1], *([node.module] if node.module else [])])
                if node.level
                else node.module or ""
            )
            if target not in ALL or target in GATHERS or target == "pytest_roofline":
                continue
            defined = top_level(source(target)[1])[0]
            strays.extend(
                f"{name}: {a.name} from {target}"
                for a in node.names
                if f"{target}.{a.name}" not in ALL and a.name not in defined
            )
    assert not strays, "imported from a module that does not define them:\n" + "\n".join(strays)


def test_the_public_api_names_the_module_that_defines_each_name() -> None:
    from importlib import import_module as load

    lazy = pytest_roofline._LAZY  # type: ignore[attr-defined]
    for public, module in lazy.items():
        value = getattr(load(f"pytest_roofline.{module}"), public)
        home = getattr(value, "__module__", None)
        if f"pytest_roofline.{module}" in GATHERS:  # the catalogue's lookups, with the catalogue loaded
            assert home == "pytest_roofline.model.op_registry", f"{public}: defined in {home}"
        else:
            assert home == f"pytest_roofline.{module}", f"{public}: _LAZY says {module}, defined in {home}"


def test_importing_the_package_installs_no_import_hook() -> None:
    """Every pytest run imports the package (its entry points): it leaves ``sys.meta_path`` and
    ``sys.path_hooks`` as it found them."""
    code = (
        "import sys\n"
        "finders, hooks = list(sys.meta_path), list(sys.path_hooks)\n"
        "import pytest_roofline, pytest_roofline.plugin, pytest_roofline.stub\n"
        "print(sys.meta_path == finders and sys.path_hooks == hooks)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "True", f"import hooks added: {done.stdout}"


def test_no_two_modules_share_a_name() -> None:
    """A module's name says what it holds, once: two ``estimate.py`` (or ``ceilings.py``) make a reader
    (and a traceback) guess which one is meant."""
    by_name: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name != "__init__.py":
            by_name.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, f"modules of one name: {shared}"


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
    assert calls_of("MeasurementRecord.from_result") == [("pytest_roofline.plugin.measurer", "of")]


def test_one_record_type_is_read_by_every_output() -> None:
    """A measurement is one record: this run's come from its results, a file's rows (a report, a
    baseline, a shard to merge) through one reader; no output keeps a record type of its own."""
    assert calls_of("MeasurementRecord.from_json") == [("pytest_roofline.output.records", "record_from_json")]
    # the one loop over a report file's rows: baselines and every other report read through it
    assert calls_of("record_from_json") == [("pytest_roofline.output.baseline", "read_records")]
    records = [
        (module, node.name)
        for module in sorted(ALL)
        for node in ast.walk(source(module)[1])
        if isinstance(node, ast.ClassDef)
        and {"nodeid", "attained"} <= {
            ast.unparse(item.target) for item in node.body if isinstance(item, ast.AnnAssign)
        }
    ]  # fmt: skip
    assert records == [("pytest_roofline.output.records", "MeasurementRecord")]


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


# -- the tests mirror the layers (issue 32) -----------------------------------------------------------

TESTS = Path(__file__).resolve().parents[1]
#: a folder per layer (``timing/cuda`` for the CUDA backend), ``cli`` for the ``roofline`` command and
#: ``project`` for what spans the package: its structure, its docs, its error base, the benchmarks'
#: scripts and the fakes checked against the real libraries
TEST_FOLDERS = (*LAYERS, "timing/cuda", "cli", "project")


def folder(path: Path) -> str:
    return path.parent.relative_to(TESTS).as_posix()


def all_test_files() -> list[Path]:
    files = sorted(TESTS.rglob("test_*.py"))
    assert files, f"no test files below {TESTS}"
    return files


def test_every_test_file_is_in_a_layer_folder() -> None:
    misplaced = [p.relative_to(TESTS).as_posix() for p in all_test_files() if folder(p) not in TEST_FOLDERS]
    assert not misplaced, f"test files outside {TEST_FOLDERS}: {misplaced}"
    assert {folder(p) for p in all_test_files()} == set(TEST_FOLDERS)


def test_no_two_modules_of_the_tests_share_a_name() -> None:
    """The folders are not packages (a test imports ``conftest`` and the fakes by name), so pytest
    imports each test file, and a test each support module, by its bare name: two of one name would
    clash. (``conftest.py`` is the one exception: there is one, at the top.)"""
    by_name: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        by_name.setdefault(path.name, []).append(path.relative_to(TESTS).as_posix())
    assert by_name["conftest.py"] == ["conftest.py"]
    assert not {name: paths for name, paths in by_name.items() if len(paths) > 1 and name != "conftest.py"}


def test_a_test_imports_only_the_modules_of_its_own_folder_or_the_top() -> None:
    """A module of the tests is on the import path only while its own folder's tests are collected
    (and the top folder's always): one imported from another folder works in a whole run, collected
    in that order, and fails when a folder runs alone."""
    modules = {path.stem: path.parent for path in TESTS.rglob("*.py")}
    wrong = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                home = modules.get(name.partition(".")[0])
                if home is not None and home not in (path.parent, TESTS):
                    wrong.append(f"{path.relative_to(TESTS).as_posix()} imports {name}")
    assert not wrong


def test_a_test_file_is_short_enough_to_read() -> None:
    long = {
        p.relative_to(TESTS).as_posix(): n
        for p in all_test_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"test files over {MAX_MODULE_LINES} lines (split them by concern): {long}"


def test_every_name_a_benchmark_imports_from_the_package_is_there() -> None:
    """The benchmarks run by hand, not in this suite: a name moved or gone would surface only when
    someone next measures with them."""
    missing = []
    for path in sorted((TESTS.parent / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and not node.level
                and (node.module or "").startswith(PACKAGE.name)
            ):
                module = import_module(node.module or "")
                missing += [
                    f"{path.name}: {node.module}.{alias.name}"
                    for alias in node.names
                    if not hasattr(module, alias.name) and f"{node.module}.{alias.name}" not in ALL
                ]
    assert not missing


def test_the_call_keywords_are_declared_once() -> None:
    # the marker's signature and doc and the fixture's arguments, against the one declaration the
    # op registry reserves (register_op once took a parameter named stream, which the fixture then
    # took as the CUDA stream)
    from pytest_roofline.model.keywords import CALL_KEYWORDS, FIXTURE_NAMES
    from pytest_roofline.model.op_registry import RESERVED_NAMES
    from pytest_roofline.plugin import marker
    from pytest_roofline.plugin.fixture import Roofline

    assert {*CALL_KEYWORDS, *FIXTURE_NAMES} == RESERVED_NAMES
    signature = inspect.signature(marker._marker_signature).parameters.values()
    assert {p.name for p in signature if p.kind is p.KEYWORD_ONLY} == set(CALL_KEYWORDS)
    assert all(f"{k}=None" in marker.MARKER_DOC for k in CALL_KEYWORDS)
    takes = {p.name for p in inspect.signature(Roofline.__call__).parameters.values()}
    assert takes - {"self", "fn", "args", "params"} <= RESERVED_NAMES


def test_a_keyword_s_accepted_values_are_declared_once() -> None:
    # cache= and block= (and their options) once each declared their values twice, "kept in step"
    declared: dict[str, list[str]] = {}
    for name in sorted(ALL):
        _, tree = source(name)
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in ("CACHE_STATES", "BLOCK_SETTINGS"):
                        declared.setdefault(target.id, []).append(name)
    assert declared == {
        "CACHE_STATES": ["pytest_roofline.model.keywords"],
        "BLOCK_SETTINGS": ["pytest_roofline.model.keywords"],
    }


def test_no_protocol_has_fewer_than_two_implementations_in_the_package() -> None:
    """A protocol with one implementation is a class with a second name (issue 44: the ten backend
    capabilities became one base class's members); one with two or more earns its place."""
    import typing

    classes = [
        obj
        for name in modules()
        for obj in vars(import_module(name)).values()
        if inspect.isclass(obj) and obj.__module__ == name
    ]
    protocols = [c for c in classes if getattr(c, "_is_protocol", False)]

    def members(cls: type) -> set[str]:
        return set(dir(cls)) | {a for k in cls.__mro__ for a in getattr(k, "__annotations__", {})}

    lonely = []
    for protocol in protocols:
        # Python 3.12 keeps them on the class; before, typing works them out
        wanted = getattr(protocol, "__protocol_attrs__", None) or typing._get_protocol_attrs(protocol)  # type: ignore[attr-defined]
        implementations = [c for c in classes if c not in protocols and wanted <= members(c)]
        if len(implementations) < 2:
            lonely.append(f"{protocol.__module__}.{protocol.__qualname__}: {len(implementations)}")
    assert not lonely, "protocols with fewer than two implementations:\n" + "\n".join(lonely)


def test_a_session_setting_is_declared_once_with_its_option() -> None:
    """Each field of SessionSettings declares its option, ini twin, parser and default (issue 44,
    item 2): the option table is read from the fields, never written beside them."""
    import dataclasses

    from pytest_roofline.plugin.options import SETTINGS, SessionSettings

    declared = [f.name for f in dataclasses.fields(SessionSettings) if "setting" in f.metadata]
    undeclared = [f.name for f in dataclasses.fields(SessionSettings) if "setting" not in f.metadata]
    assert undeclared == ["origins"]  # where each came from, not a setting
    assert [s.name for s in SETTINGS] == declared
    path, tree = source("pytest_roofline.plugin.options")
    made = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Setting"]
    assert len(made) == 1, f"{path}: a Setting is made in setting() alone"
