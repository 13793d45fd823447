"""Grading by a task's own verifier script (Harbor's `tests/test.sh`): the reward file it leaves.

A Harbor task's verifier is a script that writes `/logs/verifier/reward.txt` (one number) or
`reward.json` (named numbers). The script runs the agent's code, so anything that code can
reach it can also forge; the rules of `agent_env.grading.verdict` carry over as far as a
script allows:

1. **Only the agent's change to the workspace counts**, judged as in `verdict` (size bound,
   protected paths, `git apply`, the tree judged after it), except that a new file may be
   anywhere in the workspace (a terminal task's output is a file), still not a dotfile or a
   symlink.
2. **The verifier's files arrive last, read-only.** `tests/` is bound at `/tests` (read-only)
   into a fresh sandbox of the task only after the agent has finished, and `/logs/verifier`
   is a new empty host folder bound in; the script runs as a fresh process in the workdir.
3. **The reward is read from outside, after every process is gone.** The sandbox is closed
   (all its processes killed) before the host reads the reward file, so nothing left running
   writes it late; it must be a regular file (no symlink, FIFO or device) of at most
   `MAX_REWARD_BYTES`, read as Harbor reads it: `reward.json` first (a flat object of finite
   numbers), else `reward.txt` (one finite number). The scalar reward is the `reward` key,
   else the mean of the keys.
4. **Canary twins must score lower.** Where `tests/` holds Python test files, two twins of the
   folder run the same way: every test function raises after its body (tail), and every
   equality expects another value (expectation; `agent_env.grading.canaries`). A genuine
   change scores lower on each twin than on the verifier itself; a twin that scores as high
   is reward 0 (`canary_passed`): a forged reward file, an outcome rewritten for every test,
   skipped bodies or objects equal to anything. A verifier with no Python test file gets no
   twin, and the result says so (`notes`). **Known limit:** the twins change every test at
   once, so a mechanism confined to one test of several passes them (the per-test twins of
   `verdict` need test ids, which a script verifier does not name).
5. **Blame is decided, not guessed.** No reward file (or an unreadable one), a timeout or a
   dead sandbox after the agent's change is compared with a run of the pristine workspace:
   when that one leaves a reward, the agent's change is to blame (reward 0,
   `reward_missing` / `grading_crashed_by_patch`); when it does not either, the task is broken
   (`GradingError`).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import os
import random
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_env.grading.canaries import expectation_twin, tail_twin
from agent_env.grading.protected import BLOCK_OF_REASON
from agent_env.grading.result import GradeResult, GradingError
from agent_env.grading.runs import AGENT_PATCH, _apply, _judge_tree, _touched, patch_bytes, sandbox_spec_for
from sandboxes import ExecResult, Mount, Sandbox, SandboxError, SandboxSpec
from tasks import Task

TESTS_TARGET = "/tests"
REWARD_DIR = "/logs/verifier"
MAX_REWARD_BYTES = 64 * 1024
"""A reward file larger than this is not read (a reward is a number or a few)."""


@dataclass(frozen=True)
class ScriptRun:
    """One run of the verifier script over the agent's change."""

    dropped: tuple[tuple[str, str], ...]
    rejected: str | None
    """git's words when it refused the patch (then nothing ran)."""
    result: ExecResult | None
    rewards: dict[str, float] | str
    """The reward file's numbers, or why there are none."""


def scalar(rewards: dict[str, float]) -> float:
    """The one number RL optimises: the `reward` key, else the mean of every key."""
    if "reward" in rewards:
        return float(rewards["reward"])
    return sum(rewards.values()) / len(rewards) if rewards else 0.0


def parse_reward_json(text: str) -> dict[str, float] | str:
    try:
        data = json.loads(text)
    except ValueError as exc:
        return f"reward.json is not JSON ({exc})"
    if not isinstance(data, dict) or not data:
        return "reward.json must be a non-empty object of names to numbers"
    rewards: dict[str, float] = {}
    for key, value in data.items():
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"reward.json: {key!r} is not a finite number"
        rewards[str(key)] = float(value)
    return rewards


def parse_reward_txt(text: str) -> dict[str, float] | str:
    try:
        value = float(text.strip())
    except ValueError:
        return f"reward.txt does not hold one number ({text.strip()[:60]!r})"
    if not math.isfinite(value):
        return "reward.txt is not a finite number"
    return {"reward": value}


def read_reward(folder: Path) -> dict[str, float] | str:
    """The rewards in `folder` (`reward.json` first, as Harbor reads them), or why there are
    none: read without following a symlink, from a regular file of at most
    `MAX_REWARD_BYTES`."""
    for name, parse in (("reward.json", parse_reward_json), ("reward.txt", parse_reward_txt)):
        try:
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror}; a symlink is not followed)"
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return f"{name} is not a regular file"
            data = os.read(fd, MAX_REWARD_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_REWARD_BYTES:
            return f"{name} is over {MAX_REWARD_BYTES} bytes"
        return parse(data.decode("utf-8", "replace"))
    return "the verifier left no reward file (reward.txt or reward.json in /logs/verifier)"


# -- canary twins of a tests folder -----------------------------------------------------------


def test_functions(source: str) -> list[str]:
    """Qualified names of the test functions of a pytest/unittest file: top-level `test*`
    functions and `test*` methods of top-level `Test*` (or TestCase) classes."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names += [
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
            ]
    return names


def twin_folders(tests_dir: Path, into: Path, rng: random.Random) -> tuple[list[tuple[str, Path]], list[str]]:
    """(kind, folder) of each twin of `tests_dir` made under `into` (every test function of
    every Python test file changed at once), and notes on what could not be changed."""
    files = sorted(p for p in tests_dir.rglob("*.py") if p.name.startswith("test") or p.name.endswith("_test.py"))
    sources = {p: p.read_text(errors="replace") for p in files}
    tests = {p: test_functions(text) for p, text in sources.items()}
    if not any(tests.values()):
        return [], ["no canary: the verifier has no Python test function to build a twin of"]
    twins, notes = [], []
    for kind, build in (("tail", tail_twin), ("expectation", expectation_twin)):
        folder = into / kind
        shutil.copytree(tests_dir, folder)
        changed = 0
        for path, names in tests.items():
            source, rel = sources[path], str(path.relative_to(tests_dir))
            for name in names:
                twin = build(source, rel, name, name, rng)
                if twin.source is None:
                    notes.append(f"{rel}::{name}: no {kind} canary: {twin.reason}")
                    continue
                source, changed = twin.source, changed + 1
            (folder / rel).write_text(source)
        if changed:
            twins.append((kind, folder))
    return twins, notes


# -- the runs ---------------------------------------------------------------------------------


def _spec(task: Task, tests: Path, logs: Path) -> SandboxSpec:
    assert task.verifier is not None
    spec = sandbox_spec_for(task)
    mounts = (*spec.mounts, Mount(tests, TESTS_TARGET), Mount(logs, REWARD_DIR, writable=True))
    return dataclasses.replace(spec, mounts=mounts, env={**spec.env, **task.verifier.env})


def _readable_copy(source: Path, into: Path) -> Path:
    """`source` copied to `into`, readable by every user and its scripts executable (the
    sandbox user is not the host's)."""
    shutil.copytree(source, into, dirs_exist_ok=True)
    for path in [into, *into.rglob("*")]:
        mode = 0o755 if path.is_dir() or path.suffix == ".sh" else 0o644
        path.chmod(mode)
    return into


def run_script(task: Task, patch: str, factory: Callable[[SandboxSpec], Sandbox], tests: Path) -> ScriptRun:
    """Apply `patch` in a fresh sandbox of the task, judge the tree, run the verifier with
    `tests` at /tests, close the sandbox, then read the reward. Raises `SandboxError`
    when the sandbox fails."""
    assert task.verifier is not None
    with tempfile.TemporaryDirectory(prefix="verifier-") as scratch:
        logs = Path(scratch) / "verifier"
        logs.mkdir()
        logs.chmod(0o777)  # the sandbox's user writes the reward
        shown = _readable_copy(tests, Path(scratch) / "tests")
        dropped: tuple[tuple[str, str], ...] = ()
        with factory(_spec(task, shown, logs)) as sandbox:
            if patch.strip():
                listing = sandbox.exec("git ls-tree -r -z --name-only HEAD 2>/dev/null", timeout=60, fresh=True).output
                pristine = frozenset(p for p in listing.split("\0") if p)
                sandbox.write_file(AGENT_PATCH, patch_bytes(patch))
                touched = _touched(sandbox, AGENT_PATCH)
                applied = _apply(sandbox, AGENT_PATCH) if touched is not None else None
                if applied is None or applied.exit_code != 0:
                    words = (applied.output if applied is not None else "git cannot read the patch").strip()
                    return ScriptRun((), words, None, "nothing ran")
                dropped = _judge_tree(task, sandbox, touched or [], pristine)
            result = sandbox.exec(f"{TESTS_TARGET}/{task.verifier.script}", timeout=task.verifier.timeout_s, fresh=True)
        # Closed: every process it held is gone, so the file is what the run left.
        return ScriptRun(dropped, None, result, read_reward(logs))


def _crash(result: ExecResult | None) -> str | None:
    if result is None:
        return None
    if result.timed_out:
        return f"the verifier timed out after {result.seconds:.0f} s"
    if result.cause in ("disk", "pids", "memory"):
        return f"the verifier hit the sandbox's {result.cause} limit"
    return None


_controls: dict[str, str | None] = {}
_controls_lock = threading.Lock()


def control_problem(task: Task, factory: Callable[[SandboxSpec], Sandbox]) -> str | None:
    """Why the verifier leaves no reward on the pristine workspace, or None when it does
    (cached per task for the process)."""
    assert task.verifier is not None
    key = f"{task.id}:{task.workspace}:{task.verifier.tests_dir}"
    with _controls_lock:
        if key in _controls:
            return _controls[key]
    try:
        run = run_script(task, "", factory, task.verifier.tests_dir)
        problem = _crash(run.result) or (run.rewards if isinstance(run.rewards, str) else None)
    except SandboxError as exc:
        problem = f"the sandbox failed: {exc}"
    with _controls_lock:
        _controls[key] = problem
    return problem


def grade_script(
    task: Task,
    patch: str,
    factory: Callable[[SandboxSpec], Sandbox],
    rng: random.Random,
    dropped_before: tuple[tuple[str, str], ...] = (),
) -> GradeResult:
    """Grade `patch` (already filtered by the protected-path rule, which dropped
    `dropped_before`) for a task with a `ScriptVerifier`; see the module docstring."""
    assert task.verifier is not None
    command = f"{TESTS_TARGET}/{task.verifier.script}"
    try:
        run = run_script(task, patch, factory, task.verifier.tests_dir)
    except SandboxError as exc:
        run = ScriptRun((), None, None, f"the sandbox failed: {exc}")
        crashed = True
    else:
        crashed = _crash(run.result) is not None
    dropped = (*dropped_before, *run.dropped)
    blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in dropped))
    if run.rejected is not None:
        return GradeResult(
            resolved=False, patch_applied=False, log=run.rejected[:20_000], blocked=(*blocked, "patch_rejected"),
            dropped=dropped, problems=(f"patch_rejected: git apply refused the patch: {run.rejected[:300]}",),
            command=command, reward=0.0,
        )  # fmt: skip
    log = run.result.output if run.result is not None else ""
    exit_code = run.result.exit_code if run.result is not None else None
    trouble = _crash(run.result) or (run.rewards if isinstance(run.rewards, str) else None)
    if trouble is not None:
        control = control_problem(task, factory)
        if control is not None or not patch.strip():
            raise GradingError(f"task {task.id}: {trouble}; on the pristine workspace too ({control or trouble})")
        rule = "grading_crashed_by_patch" if crashed else "reward_missing"
        return GradeResult(
            resolved=False, patch_applied=True, log=log, blocked=(*blocked, rule), dropped=dropped,
            exit_code=exit_code, problems=(f"{rule}: {trouble}, where the pristine workspace leaves a reward",),
            command=command, reward=0.0,
        )  # fmt: skip
    assert isinstance(run.rewards, dict)
    reward = scalar(run.rewards)
    canaries: list[tuple[str, str, int | None]] = []
    notes: list[str] = []
    problems: list[str] = []
    if reward > 0:
        with tempfile.TemporaryDirectory(prefix="canaries-") as scratch:
            twins, notes = twin_folders(task.verifier.tests_dir, Path(scratch), rng)
            for kind, folder in twins:
                try:
                    twin_run = run_script(task, patch, factory, folder)
                except SandboxError:
                    canaries.append(("verifier", kind, None))  # a failed sandbox scores nothing
                    continue
                twin_reward = scalar(twin_run.rewards) if isinstance(twin_run.rewards, dict) else None
                canaries.append(("verifier", kind, twin_run.result.exit_code if twin_run.result else None))
                if twin_reward is not None and twin_reward >= reward:
                    problems.append(
                        f"canary_passed: the {kind} twin of the verifier's tests, built to score lower, "
                        f"scored {twin_reward:g} (the verifier: {reward:g})"
                    )
    if problems:
        blocked.append("canary_passed")
        reward = 0.0
    return GradeResult(
        resolved=not problems and reward >= 1.0,
        patch_applied=True,
        log=log,
        blocked=tuple(blocked),
        exit_code=exit_code,
        problems=tuple(problems),
        canaries=tuple(canaries),
        notes=tuple(notes),
        reward=reward,
        rewards=run.rewards,
        dropped=dropped,
        command=command,
    )
