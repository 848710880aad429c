"""The base of an A/B comparison (``--roofline-against REF``): the tree its pytest process runs in.

A directory REF as it is, a commit-ish as a detached git worktree in a temporary folder, and an
optional setup command run there once. Imports no pytest. docs/ci.md ("Gate a pull request against
its base").
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_roofline.errors import RooflineUsageError, RooflineWarning
from pytest_roofline.model.core import did_you_mean

__all__ = ["SITE_DIRNAME", "BaseCheckout", "BaseCheckoutError", "git_toplevel", "prepare_base", "prune_stale"]

SITE_DIRNAME = ".roofline-base-site"
OPTION = "--roofline-against"
SETUP_OUTPUT_LINES = 3  # of a failing setup command's output, in the error

Run = Callable[..., "subprocess.CompletedProcess[str]"]


class BaseCheckoutError(RooflineUsageError):
    """A base that cannot be prepared: a REF that is neither a directory nor a commit, a dirty tree,
    a git worktree git would not add, a setup command that failed."""


@dataclass
class BaseCheckout:
    """The base's tree, ready for its pytest process; :meth:`remove` undoes what was made."""

    ref: str  # what the user gave
    root: Path  # the folder that corresponds to the head's git top-level folder
    commit: str | None  # the full commit id, for a commit-ish (None for a directory)
    temporary: bool  # a git worktree in a temporary folder we made: remove() deletes it
    site: Path | None  # the folder the setup command filled (ROOFLINE_BASE_SITE), else None
    _removed: bool = field(default=False, init=False, repr=False, compare=False)

    def path_entries(self) -> list[str]:
        """What the base process puts first on ``PYTHONPATH``: the site folder, if any."""
        return [str(self.site)] if self.site is not None else []

    def remove(self) -> None:
        """Delete a temporary checkout (``git worktree remove --force``, then its temporary folder) and a
        site folder the setup command made in a directory REF; a second call does nothing. Never raises:
        what cannot be removed is a :class:`RooflineWarning`."""
        if self._removed:
            return
        self._removed = True
        atexit.unregister(self.remove)
        if not self.temporary:
            if self.site is not None:
                _rmtree(self.site)
            return
        if self.root.exists():
            # run from inside the worktree: git finds its repository from there, and may remove it
            removing = ["worktree", "remove", "--force", str(self.root)]
            result = _git(removing, cwd=self.root, run=subprocess.run)
            if result is None or result.returncode != 0:
                why = "git is not installed" if result is None else _last_line(result.stderr)
                warnings.warn(
                    f"roofline: git could not remove the base's worktree {self.root} ({why}); "
                    "deleting the folder, and `git worktree prune` forgets it",
                    RooflineWarning,
                    stacklevel=2,
                )
        _rmtree(self.root.parent)


def git_toplevel(path: Path, *, run: Run = subprocess.run) -> Path | None:
    """The top-level folder of the git worktree holding ``path``; None outside one or without git."""
    result = _git(["rev-parse", "--show-toplevel"], cwd=path, run=run)
    if result is None or result.returncode != 0 or not result.stdout.strip():
        return None
    return Path(result.stdout.strip()).resolve()


def prune_stale(head_root: Path, *, run: Run = subprocess.run) -> None:
    """Have git forget worktrees whose folders went without it knowing (``git worktree prune``); never
    raises."""
    _git(["worktree", "prune"], cwd=head_root, run=run)


def prepare_base(
    ref: str, *, head_root: Path, setup: str | None = None, run: Run = subprocess.run
) -> BaseCheckout:
    """The base's tree for REF (a directory, else a commit-ish of the repository at ``head_root``), with
    ``setup`` run in it once. Raises :class:`BaseCheckoutError` with one line saying what is wrong."""
    if not ref:
        raise BaseCheckoutError(
            f"{OPTION}: '' is neither a directory nor a commit; give a branch, tag, commit or a directory"
        )
    head_root = head_root.resolve()
    given = Path(ref).expanduser()
    checkout = (
        _directory_base(ref, given.resolve(), head_root, run)
        if given.is_dir()
        else _worktree_base(ref, head_root, run)
    )
    atexit.register(checkout.remove)  # a run that ends before its caller's remove() leaves nothing behind
    if setup is not None:
        try:
            checkout.site = _run_setup(setup, checkout.root, run)
        except BaseException:
            checkout.remove()
            raise
    return checkout


def _directory_base(ref: str, root: Path, head_root: Path, run: Run) -> BaseCheckout:
    """A directory REF, checked: not the head's own tree, no uncommitted changes to tracked files."""
    if root == head_root:
        raise BaseCheckoutError(
            f"{OPTION}: {ref!r} is the head's own tree ({head_root}), not a base; give the base's commit "
            f"or another checkout ({OPTION} HEAD compares the last commit with itself, an A/A check)"
        )
    if git_toplevel(root, run=run) is not None:
        # "-- ." keeps it to this folder: a copy inside some other repository is not that repository
        status = _git(["status", "--porcelain", "--untracked-files=no", "--", "."], cwd=root, run=run)
        if status is not None and status.returncode == 0 and status.stdout.strip():
            raise BaseCheckoutError(
                f"{OPTION}: {ref!r} has uncommitted changes: a base must be a commit's tree; "
                "commit them or give the commit"
            )
    return BaseCheckout(ref=ref, root=root, commit=None, temporary=False, site=None)


def _worktree_base(ref: str, head_root: Path, run: Run) -> BaseCheckout:
    """A commit-ish REF, checked out as a detached git worktree in a new temporary folder."""
    if ref.startswith("-"):  # git would read it as an option; no branch or tag is called that
        raise _not_a_commit(ref, head_root, run)
    found = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=head_root, run=run)
    if found is None:
        raise BaseCheckoutError(
            f"{OPTION}: {ref!r} is not a directory, and git, needed to check out a commit, is not installed"
        )
    if found.returncode != 0:
        if found.stderr.strip():  # --quiet keeps a missing commit silent: this is git failing
            raise BaseCheckoutError(
                f"{OPTION}: {ref!r} is not a directory, and {head_root} is not in a git repository to find "
                f"a commit in ({_last_line(found.stderr)})"
            )
        raise _not_a_commit(ref, head_root, run)
    commit = found.stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="roofline-base-"))
    root = tmp / "base"
    added = _git(["worktree", "add", "--detach", str(root), commit], cwd=head_root, run=run)
    if added is None or added.returncode != 0:
        _rmtree(tmp)
        prune_stale(head_root, run=run)  # a half-made worktree git registered before failing
        why = "git is not installed" if added is None else _last_line(added.stderr)
        raise BaseCheckoutError(f"{OPTION}: git could not check out {ref!r} ({commit[:12]}) in {root}: {why}")
    return BaseCheckout(ref=ref, root=root.resolve(), commit=commit, temporary=True, site=None)


def _run_setup(setup: str, root: Path, run: Run) -> Path | None:
    """Run the setup command in ``root``; the site folder it filled, if it made one."""
    site = root / SITE_DIRNAME
    _rmtree(site)  # ours by name: a site left from an earlier run would shadow what this one builds
    env = {**os.environ, "ROOFLINE_BASE_SITE": str(site)}
    try:
        result = run(
            setup,
            shell=True,
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            check=False,
        )
    except OSError as exc:  # no shell, or the tree vanished
        raise BaseCheckoutError(
            f"{OPTION}: the base's setup command {setup!r} could not start in {root}: {exc}"
        ) from exc
    if result.returncode != 0:
        lines = [line.strip() for line in (result.stdout or "").splitlines() if line.strip()]
        said = " | ".join(lines[-SETUP_OUTPUT_LINES:]) or "no output"
        raise BaseCheckoutError(
            f"{OPTION}: the base's setup command {setup!r} exited with status {result.returncode} in {root}; "
            f"its last output: {said}"
        )
    return site.resolve() if site.exists() else None


def _not_a_commit(ref: str, head_root: Path, run: Run) -> BaseCheckoutError:
    """The error for a REF that names no directory and no commit, with the closest branch or tag names."""
    return BaseCheckoutError(
        f"{OPTION}: {ref!r} is not a commit of the repository at {head_root} (git rev-parse found "
        f"nothing); give a branch, tag, commit or a directory{did_you_mean(ref, _ref_names(head_root, run))}"
    )


def _ref_names(head_root: Path, run: Run) -> list[str]:
    """The repository's branch, tag and remote-branch names, for a did-you-mean."""
    listed = _git(
        ["for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/tags", "refs/remotes"],
        cwd=head_root,
        run=run,
    )
    return listed.stdout.split() if listed is not None and listed.returncode == 0 else []


def _git(args: Sequence[str], *, cwd: Path, run: Run) -> subprocess.CompletedProcess[str] | None:
    """``git ARGS`` in ``cwd``, output captured; None where git is not installed or ``cwd`` is missing."""
    try:
        return run(["git", *args], cwd=cwd, capture_output=True, text=True, errors="replace", check=False)
    except OSError:  # FileNotFoundError: no git on PATH, or no such cwd
        return None


def _last_line(text: str) -> str:
    """The last non-blank line of a command's output, or a placeholder."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def _rmtree(path: Path) -> None:
    """Delete a folder if it is there; a warning, never an error, where it cannot be."""
    if not path.exists():
        return
    try:
        shutil.rmtree(path)
    except OSError as exc:
        warnings.warn(f"roofline: could not delete {path}: {exc}", RooflineWarning, stacklevel=3)
