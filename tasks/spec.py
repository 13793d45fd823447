"""Task definitions: the YAML schema, its validation, and the `Task` it builds.

A task is a repository with a bug (the workspace), an issue text (the problem statement),
hidden tests (a test patch applied only at grading) and the tests that decide the reward:
FAIL_TO_PASS (broken by the bug, fixed by a correct patch) and PASS_TO_PASS (must keep
passing). This is SWE-bench's grading contract, so built-in tasks and SWE-bench rows are
graded the same way. `tasks/README.md` documents the format for users.

This package is plain data: of the layers it stands on only `sandboxes.yaml_files` (the
one YAML loader and error format for every user-written file), and nothing above it;
`agent_env` turns a task into a sandbox.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sandboxes.yaml_files import field_problems, load_mapping

TOOLS = ("execute_bash", "str_replace_editor", "finish")
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
# Fixed identity and dates make a task's base commit hash the same on every machine.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "agentic-rl",
    "GIT_AUTHOR_EMAIL": "tasks@agentic-rl.invalid",
    "GIT_COMMITTER_NAME": "agentic-rl",
    "GIT_COMMITTER_EMAIL": "tasks@agentic-rl.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}
IGNORED_IN_WORKSPACE = "__pycache__/\n*.pyc\n.pytest_cache/\n"
# Config for every git command that builds a workspace: git's automatic gc (and the
# maintenance that runs it) would otherwise detach after `git commit` of a large tree and
# repack `.git/objects` while the published workspace is already being copied.
NO_AUTO_GC = ("-c", "gc.auto=0", "-c", "gc.autoDetach=false", "-c", "maintenance.auto=false")


class TaskError(ValueError):
    """A task definition is invalid; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GradingSpec(_Strict):
    test_command: str = Field(min_length=1)
    """Shell command run in the workspace after the test patch is applied."""
    log_parser: Literal["unittest", "pytest", "swebench"] = "unittest"
    """How test results are read from the command's output (see `tasks.log_parsers`);
    `swebench` uses the official harness's parser for the task's repository."""
    fail_to_pass: list[str] = Field(min_length=1)
    """Tests the bug breaks; every one must pass for the task to count as resolved."""
    pass_to_pass: list[str] = Field(default_factory=list)
    """Tests that pass before and after; every one must still pass."""
    protect: list[str] = Field(default_factory=list)
    """Extra glob patterns (fnmatch, relative to the repository root) of paths whose changes
    never reach the grader, beside the default rule (tests, runner configuration, start-up
    hooks, modules shadowing the standard library or the runner: `agent_env.grading.protected`)."""
    unprotect: list[str] = Field(default_factory=list)
    """Glob patterns exempted from the default rule's test-path and configuration checks,
    for source that the rule would take for tests (Django's `django/test/**`). Paths the test
    patch touches stay protected whatever this says."""


class LimitsSpec(_Strict):
    max_turns: int = Field(default=30, gt=0)
    """Agent turns before the episode is truncated."""
    command_timeout_s: float = Field(default=30.0, gt=0)
    """Wall-clock limit of one agent command."""
    grading_timeout_s: float = Field(default=120.0, gt=0)
    """Wall-clock limit of the test run at grading."""


class TaskDefinition(_Strict):
    """The YAML file of one task."""

    id: str
    family: str = "default"
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    problem_statement: str = Field(min_length=1)
    workspace: str
    """Folder beside the YAML file holding the repository as the agent first sees it."""
    gold_patch: str | None = None
    """File beside the YAML file with a diff that resolves the task (never shown to agents)."""
    test_patch: str | None = None
    """File beside the YAML file with the hidden tests, applied only at grading."""
    grading: GradingSpec
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    tools: list[str] = Field(default_factory=lambda: list(TOOLS))
    sandbox: dict | None = None
    """A sandbox definition (the format of `sandboxes/images.py`: image or build recipe, workdir,
    env, network, limits) without `workspace`, which is this task's. Default: the base image."""

    @field_validator("sandbox")
    @classmethod
    def _sandbox_has_no_workspace(cls, value: dict | None) -> dict | None:
        if value is not None and "workspace" in value:
            raise ValueError("'workspace' belongs to the task (the top-level field), not to its sandbox")
        return value

    @field_validator("id")
    @classmethod
    def _id_is_a_name(cls, value: str) -> str:
        if not TASK_ID.match(value):
            raise ValueError("must be letters, digits, '-', '_' or '.'")
        return value

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(TOOLS))
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {list(TOOLS)}")
        if "finish" not in value:
            raise ValueError("'finish' is required: it is how an agent submits")
        return value


@dataclass(frozen=True)
class ScriptVerifier:
    """A verifier that is a script: `tests_dir` is shown read-only at `/tests` in a fresh
    grading sandbox once the agent has finished, `/tests/<script>` runs there (cwd: the
    workdir; `env` set), and its reward file in `/logs/verifier` decides the reward."""

    tests_dir: Path
    script: str = "test.sh"
    timeout_s: float = 600.0
    env: dict[str, str] = field(default_factory=dict)
    solution_dir: Path | None = None
    """The oracle's folder (`solution/`, shown at `/solution`), when the task has one."""


@dataclass(frozen=True)
class Task:
    """A loaded task. `unavailable` says why it cannot run here (a SWE-bench row without a
    local clone, or whose environment cannot be built); `workspace` is then None when its
    repository itself is missing."""

    id: str
    problem_statement: str
    grading: GradingSpec
    limits: LimitsSpec = field(default_factory=LimitsSpec)
    family: str = "default"
    difficulty: str = "medium"
    workspace: Path | None = None
    gold_patch: str = ""
    test_patch: str = ""
    tools: tuple[str, ...] = TOOLS
    source: str = ""
    repo: str = ""
    unavailable: str = ""
    sandbox: dict = field(default_factory=dict)
    """The task's sandbox definition (raw; `agent_env` turns it into a `SandboxSpec`). A
    `python:` section is an environment to build per backend first
    (`agent_env.prepare_environment`)."""
    workspace_is_repo: bool = False
    """`workspace` already is a one-commit git repository (SWE-bench rows, made from a
    clone by `tasks.repos`): used as it is, not copied into a new one."""
    harness_spec: dict = field(default_factory=dict)
    """SWE-bench rows: the harness specification the task was made from (`repo`, `version`,
    `python`, `install`, `test_cmd`, and its `source`); reports name it."""
    dockerfile: Path | None = None
    """A Dockerfile the task's sandbox is built from first, per backend
    (`agent_env.prepare_environment`): an image on docker; on the local backend, the host's
    toolchain when the Dockerfile only copies files and sets variables (Harbor tasks)."""
    verifier: ScriptVerifier | None = None
    """A verifier script that decides the reward (Harbor tasks, `tasks.harbor`) instead of
    `grading`'s test lists; `grading.test_command` then names the script."""

    def test_files(self) -> list[str]:
        """Paths the test patch touches (restored from the pristine copy before it is applied)."""
        return patch_files(self.test_patch)


def patch_files(patch: str) -> list[str]:
    """Files a unified git diff touches, in order."""
    files: list[str] = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1]
            if path not in files:
                files.append(path)
    return files


def _read_beside(yaml_path: Path, name: str | None, field_name: str) -> str:
    if not name:
        return ""
    path = yaml_path.parent / name
    if not path.is_file():
        raise TaskError(f"{yaml_path}: field '{field_name}': file {path} does not exist")
    return path.read_text()


def load_task(path: str | Path) -> Task:
    """Load and validate one task YAML; errors name the file and the field."""
    path = Path(path)
    if path.is_dir():
        path = path / "task.yaml"
    try:
        definition = TaskDefinition.model_validate(load_mapping(path, TaskError))
    except ValidationError as exc:
        raise TaskError(f"{path}: {field_problems(exc)}") from None
    workspace = path.parent / definition.workspace
    if not workspace.is_dir():
        raise TaskError(f"{path}: field 'workspace': folder {workspace} does not exist")
    return Task(
        id=definition.id,
        problem_statement=definition.problem_statement.strip(),
        grading=definition.grading,
        limits=definition.limits,
        family=definition.family,
        difficulty=definition.difficulty,
        workspace=workspace.resolve(),
        gold_patch=_read_beside(path, definition.gold_patch, "gold_patch"),
        test_patch=_read_beside(path, definition.test_patch, "test_patch"),
        tools=tuple(definition.tools),
        source=str(path),
        sandbox=definition.sandbox or {},
    )


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def workspace_cache_dir() -> Path:
    return Path(os.environ.get("AGENTIC_RL_CACHE", Path(tempfile.gettempdir()) / "agentic-rl")) / "workspaces"


def prepare_workspace(task: Task) -> Path:
    """The task's repository as a one-commit git repo, built once and cached by content.

    A single commit means no history, tags, remotes or reflog beyond the base state can
    leak a solution to the agent.
    """
    if task.workspace is None:
        raise TaskError(f"task {task.id}: workspace unavailable: {task.unavailable or 'no repository'}")
    if task.workspace_is_repo:
        return task.workspace
    target = workspace_cache_dir() / f"{task.id}-{_tree_digest(task.workspace)}"
    if (target / ".git").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{task.id}-", dir=target.parent))
    shutil.copytree(task.workspace, staging, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "--no-gpg-sign", "-m", "base"]):
        result = subprocess.run(["git", *NO_AUTO_GC, *args], cwd=staging, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise TaskError(f"task {task.id}: git {args[0]} failed: {result.stderr.strip()}")
    (staging / ".git" / "info" / "exclude").write_text(IGNORED_IN_WORKSPACE)
    try:
        staging.rename(target)
    except OSError:  # another process prepared it first
        shutil.rmtree(staging, ignore_errors=True)
    return target
