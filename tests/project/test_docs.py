"""The README is a front page, every relative link in it and in docs/ resolves, and every example
marked runnable runs as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO_ROOT

ROOT = REPO_ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: [text](target) outside code; targets with a scheme or an anchor alone are not files
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    text, links, fence = page.read_text(encoding="utf-8"), [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)  # inline code is not a link
        for target in LINK.findall(line):
            if not re.match(r"^[a-z]+:", target) and not target.startswith("#"):
                links.append(target.split("#", 1)[0])
    return links


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    missing = [t for t in relative_links(page) if not (page.parent / t).exists()]
    assert missing == []


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert sorted(p for p in pages if f"({p})" not in index) == []


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    # it starts with the two commands: the main job and the tests
    fence = lines.index("```bash")
    assert "pytest example_project --roofline-report" in lines[fence + 2]
    assert "pytest tests" in lines[fence + 5]
    assert any(line.startswith("pip install pytest-roofline") for line in lines)


# -- the op tables: the registry's ---------------------------------------------------------------------


def test_the_op_table_in_floor_md_is_the_one_the_registry_prints() -> None:
    # a fresh process: the registry as the package alone fills it, no test's op in it
    command = [sys.executable, "-m", "pytest_roofline", "ops", "--markdown"]
    printed = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    table = printed.strip()
    assert table.count("\n") >= 20, printed  # a row for each op, the LLM kernels and llm too
    page = (ROOT / "docs" / "floor.md").read_text(encoding="utf-8")
    assert table in page, "docs/floor.md's op table is stale: paste `roofline ops --markdown` over it"


#: a row of docs/llm.md's kernel table: `name(param, param=default, ...)` | `alias`, `alias` |
LLM_ROW = re.compile(r"^\| `(\w+)\(([^)]*)\)` \|([^|]*)\|")


def test_the_llm_kernel_table_names_each_ops_parameters_and_aliases() -> None:
    from pytest_roofline.model.ops import get_op

    lines = (ROOT / "docs" / "llm.md").read_text(encoding="utf-8").splitlines()
    rows = [row for row in map(LLM_ROW.match, lines) if row]
    assert len(rows) >= 8
    for row in rows:
        spec = get_op(row[1])
        assert spec.name == row[1]  # the op's own name, not an alias
        params = tuple(part.split("=")[0].strip() for part in row[2].split(","))
        assert params == spec.param_names, spec.name
        assert tuple(re.findall(r"`(\w+)`", row[3])) == spec.aliases, spec.name


# -- examples that run ---------------------------------------------------------------------------------

#: the line right before a fence whose example the test suite runs (docs/development.md)
RUNNABLE = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w*)")


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # of the opening fence
    info: str
    body: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def runnable_examples(page: Path) -> list[Example]:
    """The fenced examples of ``page`` marked :data:`RUNNABLE`; a marker that no fence follows is an
    error (a blank line between them would silently unmark the example)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for index, line in enumerate(lines):
        if line.strip() != RUNNABLE:
            continue
        opening = FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
        assert opening, f"{page.name}:{index + 1}: {RUNNABLE} must be followed by a fenced block"
        end = next(i for i in range(index + 2, len(lines)) if lines[i].startswith("```"))
        body = "\n".join(lines[index + 2 : end]) + "\n"
        found.append(Example(page, index + 2, opening.group(1), body))
    return found


EXAMPLES = [example for page in PAGES for example in runnable_examples(page)]


def test_there_are_runnable_examples_in_the_docs() -> None:
    kinds = {(e.info, ">>>" in e.body, "def test_" in e.body) for e in EXAMPLES}
    # a doctest, a test module and a console session at least: each way of running one is exercised
    assert {("python", True, False), ("python", False, True), ("console", False, False)} <= kinds


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_every_runnable_example_runs_as_written(
    example: Example, rl: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A doctest (``>>>``) runs in a Python of its own; a test module runs under pytest, on the
    suite's fake device and timer, in report mode (its budgets are the reader's machine's to meet),
    and every test in it passes; any other Python runs as a script; a console session's ``$
    roofline ...`` commands print what follows each of them, run from the repository's root (so
    that the files they read are the docs' own)."""
    if example.info == "console":
        monkeypatch.chdir(ROOT)
        _run_console(example, capsys)
    elif example.info != "python":
        pytest.fail(f"{example.id}: a runnable example is python or console; got {example.info!r}")
    elif ">>>" in example.body:
        path = rl.path / "example.txt"
        path.write_text(example.body, encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "doctest", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    elif "def test_" in example.body:
        rl.makepyfile(test_example=example.body)
        result = rl.runpytest("--roofline-mode=report", "-p", "no:cacheprovider")
        outcomes = result.parseoutcomes()
        assert set(outcomes) <= {"passed", "warnings"}, result.stdout.str()
        assert outcomes.get("passed", 0) >= 1, result.stdout.str()
    else:
        path = rl.path / "example.py"
        path.write_text(example.body, encoding="utf-8")
        done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=rl.path)
        assert done.returncode == 0, done.stdout + done.stderr


def _run_console(example: Example, capsys: pytest.CaptureFixture[str]) -> None:
    """Each ``$ roofline ARGS`` line run through the CLI, its output compared with the lines up to
    the next ``$`` (trailing spaces aside); any other command is not something this test can run."""
    from pytest_roofline import cli

    sessions: list[tuple[str, list[str]]] = []
    for line in example.body.splitlines():
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        else:
            assert sessions, f"{example.id}: output before any command"
            sessions[-1][1].append(line.rstrip())
    assert sessions, f"{example.id}: no command"
    for command, expected in sessions:
        words = shlex.split(command)
        assert words[0] == "roofline", f"{example.id}: only roofline commands run here; got {command!r}"
        capsys.readouterr()
        cli.main(words[1:])
        printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
        assert printed == expected, f"{example.id}: {command}"


def test_docs_list_the_verdict_rules_from_the_table_itself() -> None:
    # docs/verdicts.md's table is the verdict's RULES, in order, each with its verdict and its words
    from pytest_roofline.model.verdict_rules import RULES

    text = (ROOT / "docs" / "verdicts.md").read_text(encoding="utf-8")
    section = text.split("## The rules, in order", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| (.+) \|$", section, flags=re.MULTILINE)
    assert rows == [(rule.name, rule.verdict, rule.when) for rule in RULES]
    assert len({rule.name for rule in RULES}) == len(RULES)
    from pytest_roofline.model.verdict import Verdict

    assert {Verdict(rule.verdict) for rule in RULES} == set(Verdict) - {Verdict.SKIPPED}
