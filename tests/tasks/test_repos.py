"""Workspaces built from clones (`tasks.repos`) are complete and immutable once published.

Git's automatic gc is what broke them: committing a large tree starts `git gc --auto`,
which detaches and repacks `.git/objects` after the commit returned, while the workspace
is already copied into sandboxes. These tests make gc due on every commit (a global config
with `gc.auto=1` and blobs that land in the object folder `17/` gc counts), so a build that
lets git gc at all leaves a repacking process or its pack behind.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import subprocess
from pathlib import Path

import pytest

from sandboxes.base import copy_problem
from tasks.repos import checkout_workspace
from tests.tasks import swebench_repo as repo


def _blob_in_folder_17(seed: str) -> str:
    """File content whose git blob id starts with 17: `git gc --auto` estimates the loose
    objects from that one folder (more than (gc.auto + 255) // 256 of them makes gc due)."""
    for n in range(1_000_000):
        text = f"{seed} {n}\n"
        if hashlib.sha1(f"blob {len(text)}\0{text}".encode()).hexdigest().startswith("17"):
            return text
    raise AssertionError("no content found")


@pytest.fixture
def gc_due(tmp_path, monkeypatch):
    """A clone whose base commit's tree has three blobs in folder 17, and a git config that
    makes `git gc --auto` due (and detached, git's default) after any commit."""
    config = tmp_path / "gitconfig"
    config.write_text("[gc]\n\tauto = 1\n\tautoDetach = true\n[maintenance]\n\tauto = true\n")
    clone = tmp_path / "clone"
    repo.make_clone(clone)
    for i in range(3):
        (clone / f"data{i}.txt").write_text(_blob_in_folder_17(f"data {i}"))
    repo._git(clone, "add", "-A")
    repo._git(clone, "commit", "-q", "-m", "data")
    commit = repo._git(clone, "rev-parse", "HEAD").strip()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("AGENTIC_RL_CACHE", str(tmp_path / "cache"))
    return clone, commit


def _processes_in(folder: Path) -> list[str]:
    """Host processes whose working directory is inside `folder` (a detached gc keeps the
    workspace it repacks as its working directory)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if cwd == str(folder) or cwd.startswith(f"{folder}/"):
            found.append(f"{pid}: {command}")
    return found


def _assert_untouched_by_gc(workspace: Path) -> None:
    assert _processes_in(workspace.parent) == []
    assert not (workspace / ".git" / "gc.pid").exists()
    assert sorted(p.name for p in (workspace / ".git" / "objects" / "pack").iterdir()) == []


def test_no_gc_runs_on_a_workspace_being_built(gc_due):
    clone, commit = gc_due
    workspace = checkout_workspace(clone, commit, name="psf__requests")
    _assert_untouched_by_gc(workspace)
    assert subprocess.run(["git", "fsck", "--no-progress"], cwd=workspace, capture_output=True).returncode == 0


def _build(clone: Path, commit: str, start, results) -> None:
    start.wait()  # every process builds at once
    try:
        results.put(str(checkout_workspace(clone, commit, name="psf__requests")))
    except Exception as exc:  # reported to the test, which names it
        results.put(f"error: {exc}")


def test_parallel_builds_of_one_row_share_one_complete_workspace(gc_due):
    clone, commit = gc_due
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(4), context.Queue()
    workers = [context.Process(target=_build, args=(clone, commit, start, results)) for _ in range(4)]
    for worker in workers:
        worker.start()
    paths = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert len(set(paths)) == 1, paths
    workspace = Path(paths[0])
    # One workspace and its lock; no staging folder of a loser left behind.
    assert sorted(p.name for p in workspace.parent.iterdir()) == [f".{workspace.name}.lock", workspace.name]
    _assert_untouched_by_gc(workspace)
    assert subprocess.run(["git", "status", "--porcelain"], cwd=workspace, capture_output=True, text=True).stdout == ""
    tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=workspace, capture_output=True, text=True).stdout
    assert tree == repo._git(clone, "rev-parse", f"{commit}^{{tree}}")


def test_a_failed_copy_is_one_line_naming_the_workspace_and_what_to_do(tmp_path):
    stderr = "".join(f"cp: cannot stat '/w/.git/objects/{i:02x}': No such file or directory\n" for i in range(40))
    message = copy_problem(Path("/cache/ws"), Path("/env/workspace"), stderr)
    assert "\n" not in message
    assert message == (
        "could not copy /cache/ws to /env/workspace (cp: cannot stat '/w/.git/objects/00': No such file or "
        "directory; 39 more line(s)): was it changing while copied? Delete /cache/ws to have it rebuilt, and run again"
    )
