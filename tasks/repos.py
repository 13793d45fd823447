"""Workspaces from local clones: a repository at one commit, with nothing after it.

A repository cache is a folder of git clones (bare or not, any depth of history, as long
as it holds the commits wanted), laid out as either

    DIR/<owner>__<name>     e.g. DIR/django__django  (SWE-bench's own spelling)
    DIR/<owner>/<name>      e.g. DIR/django/django   (as `git clone` into DIR/<owner> makes)

(`.git` may end either name). Commits are content-addressed, so any clone that holds the
commit will do: a mirror, a fork, a clone of a partial history.

A workspace is a fresh git repository with one commit whose tree is the tree at that commit
(its files checked out straight from the clone's object store, ignored ones included), so
`git log --all` shows one commit: no later commits, tags, remotes, reflog or other refs,
and no objects of other commits to dig up. Optional edits (shell steps run in the checkout
before that commit, e.g. the harness's `sed` on `tox.ini`) become part of it. Workspaces are
cached under `$AGENTIC_RL_CACHE/workspaces/git` by (repository, commit, edits).

A cached workspace is complete and never changes once it is there, since sandboxes copy
it at any time: it is built in a staging folder with git's automatic gc off (`NO_AUTO_GC`:
a detached `git gc --auto` after the commit would still be repacking it when it is
copied) and published by one rename. Processes sharing a cache take a file lock per
workspace, so that one builds it and the others wait and reuse it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from sandboxes.pyenv import exclusive_lock
from tasks.spec import GIT_ENV, IGNORED_IN_WORKSPACE, NO_AUTO_GC, TaskError, workspace_cache_dir

# Build outputs an install leaves in a checkout; ignored in workspaces (through
# .git/info/exclude, not the tree) so that they never show in an agent's diff.
BUILD_OUTPUTS = "*.egg-info/\n.eggs/\nbuild/\n*.so\n*.egg-link\n.tox/\n"
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def clone_candidates(cache: Path, repo: str) -> list[Path]:
    """Where a clone of `repo` ("owner/name") may be in the cache, in the order looked at."""
    owner, _, name = repo.partition("/")
    return [
        cache / f"{owner}__{name}",
        cache / f"{owner}__{name}.git",
        cache / owner / name,
        cache / owner / f"{name}.git",
    ]


def _git(args: list[str], *, cwd: Path | None = None, env: dict | None = None, check_what: str = "") -> str:
    result = subprocess.run(["git", *NO_AUTO_GC, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0 and check_what:
        raise TaskError(f"{check_what}: git {args[0]} failed: {result.stderr.strip()}")
    return result.stdout if result.returncode == 0 else ""


def is_clone(path: Path) -> bool:
    return path.is_dir() and bool(_git(["-C", str(path), "rev-parse", "--git-dir"]))


def has_commit(clone: Path, commit: str) -> bool:
    probe = ["git", "-C", str(clone), "cat-file", "-e", f"{commit}^{{commit}}"]
    return subprocess.run(probe, capture_output=True).returncode == 0


def find_clone(cache: Path, repo: str, commit: str, where: str) -> Path:
    """The clone of `repo` in `cache` that holds `commit`; errors name `where` (the row) and
    the paths looked at."""
    candidates = clone_candidates(cache, repo)
    clones = [path for path in candidates if is_clone(path)]
    if not clones:
        looked = ", ".join(str(p) for p in candidates)
        raise TaskError(
            f"{where}: no clone of {repo} in the repository cache (looked for {looked}); "
            f"make one with `git clone https://github.com/{repo} {candidates[0]}`"
        )
    for clone in clones:
        if has_commit(clone, commit):
            return clone
    raise TaskError(
        f"{where}: the clone(s) of {repo} at {', '.join(map(str, clones))} lack commit {commit}; "
        f"fetch it (`git -C {clones[0]} fetch origin`) or use a clone that has it"
    )


def file_at(clone: Path, commit: str, path: str) -> str | None:
    """A file's text at `commit`, or None when the commit or the file is absent."""
    result = subprocess.run(["git", "-C", str(clone), "show", f"{commit}:{path}"], capture_output=True)
    return result.stdout.decode("utf-8", errors="replace") if result.returncode == 0 else None


def describe(clone: Path, commit: str) -> tuple[str, int, str] | None:
    """(nearest tag, commits since it, abbreviated commit) of `commit`, from the clone's
    tags; None without a tag before it."""
    text = _git(["-C", str(clone), "describe", "--tags", "--long", "--abbrev=7", commit]).strip()
    match = re.match(r"^(?P<tag>.+)-(?P<distance>\d+)-g(?P<node>[0-9a-f]+)$", text)
    return (match["tag"], int(match["distance"]), match["node"]) if match else None


def checkout_workspace(
    clone: Path, commit: str, *, name: str, edits: tuple[str, ...] = (), where: str = "workspace", make: bool = True
) -> Path:
    """`commit` of `clone` as a one-commit repository (see the module docstring), built once
    and cached; `edits` are shell steps run in the checkout first. Errors name `where`.
    `make=False`: only the path it has once made (a resumable run's finished rows need no
    checkout, which costs seconds and up to a few hundred MB each)."""
    if not COMMIT.match(commit):
        raise TaskError(f"{where}: {commit!r} is not a commit id")
    digest = hashlib.sha256("\0".join(edits).encode()).hexdigest()[:8]
    target = workspace_cache_dir() / "git" / f"{name}-{commit[:12]}-{digest}"
    if not make or (target / ".git").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(target.parent / f".{target.name}.lock"):
        if not (target / ".git").is_dir():  # not built by whoever held the lock before
            _build_workspace(clone, commit, target, edits, where)
    return target


def _build_workspace(clone: Path, commit: str, target: Path, edits: tuple[str, ...], where: str) -> None:
    """Build the workspace in a staging folder beside `target` and rename it into place."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        git_dir = _git(["-C", str(clone), "rev-parse", "--absolute-git-dir"], check_what=f"{where}: {clone}").strip()
        # A private index: the clone's own index, HEAD and work tree are left alone.
        index = staging / ".checkout-index"
        env = {**os.environ, "GIT_INDEX_FILE": str(index), "GIT_DIR": git_dir, "GIT_WORK_TREE": str(staging)}
        _git(["read-tree", commit], env=env, check_what=f"{where}: {clone} at {commit}")
        _git(["checkout-index", "--all", "--force"], cwd=staging, env=env, check_what=f"{where}: {clone} at {commit}")
        index.unlink()
        for step in edits:
            result = subprocess.run(["bash", "-c", step], cwd=staging, capture_output=True, text=True)
            if result.returncode != 0:
                raise TaskError(f"{where}: editing the checkout with {step!r} failed: {result.stderr.strip()}")
        env = {**os.environ, **GIT_ENV}
        for args in (
            ["init", "-q", "-b", "main"],
            ["add", "--all", "--force"],  # files the tree ignores but tracks are part of it
            ["commit", "-q", "--no-gpg-sign", "--no-verify", "-m", f"base commit {commit}"],
            ["reflog", "expire", "--expire=now", "--all"],  # not even the commit's own entry
        ):
            _git(args, cwd=staging, env=env, check_what=f"{where}: making the workspace")
        (staging / ".git" / "info" / "exclude").write_text(IGNORED_IN_WORKSPACE + BUILD_OUTPUTS)
        with contextlib.suppress(OSError):  # made by a process that took no lock
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
