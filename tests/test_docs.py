"""The README is a front page, and every relative link in it and in docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
