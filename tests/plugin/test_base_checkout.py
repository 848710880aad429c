"""The base of an A/B comparison (``--roofline-against``): checked out, set up and removed, with real git."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from pytest_roofline.errors import RooflineUsageError
from pytest_roofline.plugin.base_checkout import (
    BaseCheckout,
    BaseCheckoutError,
    git_toplevel,
    prepare_base,
    prune_stale,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a test identity; its stdout, stripped."""
    result = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return result.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on branch main with two commits: module.py says 1, then 2."""
    root = tmp_path / "head"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "t")
    git(root, "config", "user.email", "t@example.com")
    (root / "module.py").write_text("VERSION = 1\n")
    git(root, "add", "module.py")
    git(root, "commit", "-q", "-m", "one")
    (root / "module.py").write_text("VERSION = 2\n")
    git(root, "commit", "-q", "-am", "two")
    return root.resolve()


def worktrees(repo: Path) -> str:
    return git(repo, "worktree", "list")


def test_commit_is_checked_out_in_a_temporary_worktree_and_removed(repo: Path) -> None:
    base = prepare_base("HEAD~1", head_root=repo)
    try:
        assert base.temporary
        assert base.commit == git(repo, "rev-parse", "HEAD~1")
        assert base.ref == "HEAD~1"
        assert (base.root / "module.py").read_text() == "VERSION = 1\n"
        assert git_toplevel(base.root) == base.root
        assert str(base.root) in worktrees(repo)
        assert base.site is None
        assert base.path_entries() == []
    finally:
        base.remove()
    assert not base.root.exists()
    assert not base.root.parent.exists()  # the temporary folder too
    assert str(base.root) not in worktrees(repo)
    base.remove()  # a second call does nothing


def test_unknown_ref_suggests_a_branch(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.parent)
    with pytest.raises(BaseCheckoutError) as info:
        prepare_base("mian", head_root=repo)
    assert str(info.value) == (
        f"--roofline-against: 'mian' is not a commit of the repository at {repo} (git rev-parse found "
        "nothing); give a branch, tag, commit or a directory (did you mean 'main'?)"
    )
    assert isinstance(info.value, RooflineUsageError)
    assert "\n" not in str(info.value)


def test_option_like_ref_is_not_passed_to_git(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.parent)
    with pytest.raises(BaseCheckoutError, match="'--all' is not a commit"):
        prepare_base("--all", head_root=repo)


def test_outside_a_repository_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    with pytest.raises(BaseCheckoutError, match=r"'main' is not a directory, and .* is not in a git repo"):
        prepare_base("main", head_root=tmp_path)


def test_without_git_is_a_clear_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.parent)

    def no_git(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError("git")

    with pytest.raises(BaseCheckoutError, match=r"'main' is not a directory, and git, .* is not installed"):
        prepare_base("main", head_root=repo, run=no_git)


def test_directory_is_used_as_is(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    git(repo.parent, "clone", "-q", str(repo), str(other))
    monkeypatch.chdir(tmp_path)
    base = prepare_base("other", head_root=repo)  # relative to the cwd
    assert base == BaseCheckout(ref="other", root=other.resolve(), commit=None, temporary=False, site=None)
    base.remove()
    assert other.exists()


def test_plain_directory_is_used_as_is(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "copy"
    plain.mkdir()
    (plain / "module.py").write_text("VERSION = 0\n")
    base = prepare_base(str(plain), head_root=repo)
    assert base.root == plain.resolve()
    assert not base.temporary


def test_dirty_directory_is_an_error(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(repo.parent, "clone", "-q", str(repo), str(other))
    (other / "module.py").write_text("VERSION = 3\n")
    with pytest.raises(BaseCheckoutError) as info:
        prepare_base(str(other), head_root=repo)
    assert str(info.value) == (
        f"--roofline-against: '{other}' has uncommitted changes: a base must be a commit's tree; "
        "commit them or give the commit"
    )


def test_untracked_files_do_not_make_a_directory_dirty(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(repo.parent, "clone", "-q", str(repo), str(other))
    (other / "build.log").write_text("untracked\n")
    assert prepare_base(str(other), head_root=repo).root == other.resolve()


def test_head_tree_by_path_is_an_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    with pytest.raises(BaseCheckoutError) as info:
        prepare_base(".", head_root=repo)
    assert str(info.value) == (
        f"--roofline-against: '.' is the head's own tree ({repo}), not a base; give the base's commit or "
        "another checkout (--roofline-against HEAD compares the last commit with itself, an A/A check)"
    )


def test_setup_fills_the_site(repo: Path) -> None:
    setup = 'mkdir -p "$ROOFLINE_BASE_SITE" && cp module.py "$ROOFLINE_BASE_SITE/"'
    base = prepare_base("HEAD~1", head_root=repo, setup=setup)
    try:
        assert base.site == base.root / ".roofline-base-site"
        assert (base.site / "module.py").read_text() == "VERSION = 1\n"
        assert base.path_entries() == [str(base.site)]
    finally:
        base.remove()
    assert not base.root.parent.exists()


def test_setup_without_a_site_leaves_none(repo: Path) -> None:
    base = prepare_base("HEAD", head_root=repo, setup="touch built")
    try:
        assert (base.root / "built").exists()
        assert base.site is None
        assert base.path_entries() == []
    finally:
        base.remove()


def test_failing_setup_is_an_error_and_leaves_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where mkdtemp makes the base's folder
    setup = "echo one; echo two; echo three >&2; echo four; exit 3"
    with pytest.raises(BaseCheckoutError) as info:
        prepare_base("HEAD~1", head_root=repo, setup=setup)
    message = str(info.value)
    assert message.startswith(
        f"--roofline-against: the base's setup command {setup!r} exited with status 3 in {temp.resolve()}"
    )
    assert message.endswith("/base; its last output: two | three | four")
    assert list(temp.iterdir()) == []
    assert worktrees(repo).count("\n") == 0  # only the head's own


def test_directory_site_is_removed_but_not_the_directory(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "copy"
    plain.mkdir()
    base = prepare_base(str(plain), head_root=repo, setup='mkdir "$ROOFLINE_BASE_SITE"')
    assert base.site == plain.resolve() / ".roofline-base-site"
    base.remove()
    assert plain.exists()
    assert not base.site.exists()


def test_prune_stale_forgets_a_worktree_deleted_by_hand(repo: Path) -> None:
    base = prepare_base("HEAD~1", head_root=repo)
    shutil.rmtree(base.root.parent)
    assert "prunable" in git(repo, "worktree", "list", "--porcelain")
    prune_stale(repo)
    assert str(base.root) not in worktrees(repo)
    base.remove()  # nothing left to remove: no error, no warning


def test_git_toplevel(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "sub").mkdir()
    assert git_toplevel(repo / "sub") == repo
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert git_toplevel(outside) is None


def test_a_run_that_forgets_remove_leaves_nothing_at_exit(repo: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        from pathlib import Path
        from pytest_roofline.plugin.base_checkout import prepare_base
        base = prepare_base("HEAD~1", head_root=Path({str(repo)!r}))
        print(base.root)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    root = Path(result.stdout.strip())
    assert root.name == "base"
    assert not root.exists()
    assert not root.parent.exists()
    assert str(root) not in worktrees(repo)
