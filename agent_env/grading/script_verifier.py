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
4. **The verifier's reward files are known.** The verifier runs once on the pristine
   workspace (the control, cached per task): a reward file it does not write there (a
   `reward.json` beside its `reward.txt`: Harbor reads reward.json first) is `reward_forged`.
5. **Canary twins must score lower, and a moved reward must not appear.** When the verifier
   pays, twins of its tests folder run the same way, in parallel: for each test function of
   each Python test file, one where that test raises after its body (tail) and one where its
   equalities expect other values (expectation; `agent_env.grading.canaries`). A genuine
   change scores lower on each; a twin that scores as high is reward 0 (`canary_passed`):
   a skipped body, a rewritten outcome, an early exit, an object equal to anything, a forged
   reward. One more twin moves every mention of `/logs/verifier` in the folder to another
   folder: the verifier's own writes follow it, so a reward file that still appears in
   `/logs/verifier` was written by the agent's code (`reward_forged`); this guards
   shell-only verifiers too, which have no test twin (the result says so in `notes`).
   Test twins run only for a full score (1): on a partial one, a twin of a test that failed
   anyway scores the same, so only the moved-path twin runs. **Known limits:** a partial
   score is guarded against forged reward files, not against tests faked one by one; code
   that reads the verifier's files to learn where the reward goes
   writes it there in every run, so the moved-path twin cannot tell; a shell-only verifier
   that runs the agent's code then has no guard of ours against a forged reward
   (`agent_env validate` warns of a task without test twins). The marks
   (`tail_not_reached` in `verdict`) are not asked for here: a verifier script need not run
   every test function its folder holds, so a missing mark would not mean a failed body.
6. **Blame is decided, not guessed.** No reward file (or an unreadable one), a timeout or a
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_env.grading import pysource
from agent_env.grading.applying import apply_agent_patch
from agent_env.grading.canaries import expectation_twin, tail_twin
from agent_env.grading.once import OncePerKey
from agent_env.grading.parallel import parallel_runs
from agent_env.grading.protected import BLOCK_OF_REASON
from agent_env.grading.result import GradeResult, GradingError
from agent_env.grading.runs import PARALLEL_RUNS, grading_spec_for
from sandboxes import ExecResult, Mount, Sandbox, SandboxError, SandboxSpec
from tasks import Task

TESTS_TARGET = "/tests"
REWARD_DIR = "/logs/verifier"
MAX_REWARD_BYTES = 64 * 1024
"""A reward file larger than this is not read (a reward is a number or a few)."""


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


def find_test_functions(source: str) -> list[str]:
    """Qualified names of the test functions of a pytest/unittest file: top-level `test*`
    functions and `test*` methods of top-level classes."""
    try:
        tree = pysource.parse(source)
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


@dataclass(frozen=True)
class FolderTwin:
    """A twin of the verifier's tests folder: `kind` (tail, expectation: one test changed to
    fail; `reward_path`: the reward written elsewhere), the test it changes, its files (a
    path relative to the folder -> new text) and where its verifier writes the reward."""

    kind: str
    test: str
    files: dict[str, str]
    reward_dir: str = REWARD_DIR


def build_test_twins(tests_dir: Path, rng: random.Random) -> tuple[list[FolderTwin], list[str]]:
    """A tail and an expectation twin of each test function of each Python test file in
    `tests_dir` (one test changed per twin), and notes on the twins that cannot be built."""
    files = sorted(p for p in tests_dir.rglob("*.py") if p.name.startswith("test") or p.name.endswith("_test.py"))
    twins: list[FolderTwin] = []
    notes: list[str] = []
    for path in files:
        source, rel = path.read_text(errors="replace"), str(path.relative_to(tests_dir))
        for name in find_test_functions(source):
            for build in (tail_twin, expectation_twin):
                twin = build(source, rel, f"{rel}::{name}", name, rng)
                if twin.source is None:
                    notes.append(f"{rel}::{name}: no {twin.kind} canary: {twin.reason}")
                else:
                    twins.append(FolderTwin(twin.kind, f"{rel}::{name}", {rel: twin.source}))
    if not twins:
        notes.insert(0, "no test canary: the verifier has no Python test function to build a twin of")
    return twins, notes


def reward_path_twin(tests_dir: Path, rng: random.Random) -> FolderTwin | None:
    """The verifier's files with every mention of `/logs/verifier` moved to another folder, so
    that its own writes go there: a reward file that still appears in `/logs/verifier` was
    written by something else, the agent's code (`reward_forged`). None when no text file of
    the folder names `/logs/verifier` (the twin would change nothing)."""
    moved = f"/logs/{rng.choice(['verify', 'results', 'grading', 'check', 'scores'])}-{rng.randrange(16**6):06x}"
    files = {}
    for path in sorted(p for p in tests_dir.rglob("*") if p.is_file()):
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if REWARD_DIR in text:
            files[str(path.relative_to(tests_dir))] = text.replace(REWARD_DIR, moved)
    return FolderTwin("reward_path", "verifier", files, moved) if files else None


# -- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptRun:
    """One run of the verifier script over the agent's change."""

    dropped: tuple[tuple[str, str], ...]
    rejected: str | None
    """git's words when it refused the patch (then nothing ran)."""
    result: ExecResult | None
    rewards: dict[str, float] | str
    """The reward file's numbers (where this run's verifier writes them), or why there are none."""
    names: frozenset[str] = frozenset()
    """The reward files that were there (reward.txt, reward.json)."""
    planted: tuple[str, ...] = ()
    """What appeared in /logs/verifier while the verifier wrote its reward elsewhere."""


def _readable_copy(source: Path, into: Path, changed: dict[str, str], script: str) -> Path:
    """`source` copied to `into` with `changed` files replaced, readable by every user and its
    scripts (`*.sh` and the verifier `script`) executable: the sandbox's user is not the host's."""
    shutil.copytree(source, into, dirs_exist_ok=True)
    for rel, text in changed.items():
        (into / rel).write_text(text)
    for path in [into, *into.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or path.suffix == ".sh" or path.name == script else 0o644)
    return into


PARTIAL_NOTE = "no test canary: the score is partial (a test's twin may fail on a test that failed anyway)"


def _folder(path: Path) -> Path:
    path.mkdir()
    path.chmod(0o777)  # the sandbox's user writes there
    return path


def run_script(
    task: Task, patch: str, factory: Callable[[SandboxSpec], Sandbox], twin: FolderTwin | None = None
) -> ScriptRun:
    """Apply `patch` in a fresh sandbox of the task, judge the tree, run the verifier (the
    task's tests, or `twin`'s) with the tests at /tests, close the sandbox, then read the
    reward from the host. Raises `SandboxError` when the sandbox fails."""
    assert task.verifier is not None
    with tempfile.TemporaryDirectory(prefix="verifier-") as scratch:
        root = Path(scratch)
        logs = _folder(root / "verifier")
        shown = _readable_copy(
            task.verifier.tests_dir, root / "tests", twin.files if twin else {}, task.verifier.script
        )
        mounts = [Mount(shown, TESTS_TARGET), Mount(logs, REWARD_DIR, writable=True)]
        reward_dir = twin.reward_dir if twin else REWARD_DIR
        moved = _folder(root / "moved") if reward_dir != REWARD_DIR else logs
        if reward_dir != REWARD_DIR:
            mounts.append(Mount(moved, reward_dir, writable=True))
        spec = grading_spec_for(task)
        spec = dataclasses.replace(spec, mounts=(*spec.mounts, *mounts), env={**spec.env, **task.verifier.env})
        with factory(spec) as sandbox:
            dropped = apply_agent_patch(task, patch, sandbox)
            if isinstance(dropped, str):
                return ScriptRun((), dropped, None, "nothing ran")
            result = sandbox.exec(f"{TESTS_TARGET}/{task.verifier.script}", timeout=task.verifier.timeout_s, fresh=True)
        # Closed: every process it held is gone, so the folders hold what the run left.
        names = frozenset(n for n in ("reward.txt", "reward.json") if os.path.lexists(moved / n))
        planted = tuple(sorted(os.listdir(logs))) if moved is not logs else ()
        return ScriptRun(dropped, None, result, read_reward(moved), names, planted)


def _crash(result: ExecResult | None) -> str | None:
    if result is None:
        return None
    if result.timed_out:
        return f"the verifier timed out after {result.seconds:.0f} s"
    if result.cause in ("disk", "pids", "memory"):
        return f"the verifier hit the sandbox's {result.cause} limit"
    return None


@dataclass(frozen=True)
class Control:
    """The verifier on the pristine workspace: why it leaves no reward (None: it does), and
    which reward files it writes."""

    problem: str | None
    names: frozenset[str]


_controls: OncePerKey[Control] = OncePerKey()


def control_run(task: Task, factory: Callable[[SandboxSpec], Sandbox]) -> Control:
    """The verifier run on the pristine workspace, once per task for the process
    (concurrent gradings of one task wait for one run)."""
    assert task.verifier is not None

    def run() -> Control:
        try:
            run = run_script(task, "", factory)
        except SandboxError as exc:
            return Control(f"the sandbox failed: {exc}", frozenset())
        return Control(_crash(run.result) or (run.rewards if isinstance(run.rewards, str) else None), run.names)

    return _controls.get((task.id, task.workspace, task.verifier.tests_dir), run)


def _twin_verdicts(
    task: Task, patch: str, factory: Callable[[SandboxSpec], Sandbox], twins: list[FolderTwin], reward: float
) -> tuple[list[tuple[str, str, int | None]], list[str]]:
    """Run each twin (`PARALLEL_RUNS` at once); (test, kind, exit status) of each, and the
    problems: a test twin that scores as high as the verifier, a reward that appears where
    the moved verifier did not write it."""

    with parallel_runs(PARALLEL_RUNS) as (pool, group):

        def one(twin: FolderTwin) -> ScriptRun | None:
            try:  # each twin's sandbox closed at once if the grading is stopped (`parallel`)
                return run_script(task, patch, lambda spec: group.track(factory(spec)), twin)
            except SandboxError:
                return None  # a sandbox that failed scores nothing: the canary failed, as it must

        runs = list(pool.map(one, twins))
    ended, problems = [], []
    for twin, run in zip(twins, runs, strict=True):
        ended.append((twin.test, twin.kind, run.result.exit_code if run is not None and run.result else None))
        if run is None:
            continue
        if twin.kind == "reward_path":
            if run.planted:
                problems.append(
                    f"reward_forged: with the verifier writing its reward elsewhere, {', '.join(run.planted)} "
                    f"still appeared in {REWARD_DIR}: the agent's code wrote it"
                )
            continue
        score = scalar(run.rewards) if isinstance(run.rewards, dict) else None
        if score is not None and score >= reward:
            problems.append(
                f"canary_passed: {twin.test}: its {twin.kind} twin, built to fail, scored {score:g} "
                f"(the verifier: {reward:g})"
            )
    return ended, problems


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
        run = run_script(task, patch, factory)
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
    control = control_run(task, factory) if patch.strip() else Control(trouble, run.names)
    if trouble is not None:
        if control.problem is not None or not patch.strip():
            raise GradingError(
                f"task {task.id}: {trouble}; on the pristine workspace too ({control.problem or trouble})"
            )
        rule = "grading_crashed_by_patch" if crashed else "reward_missing"
        return GradeResult(
            resolved=False, patch_applied=True, log=log, blocked=(*blocked, rule), dropped=dropped,
            exit_code=exit_code, problems=(f"{rule}: {trouble}, where the pristine workspace leaves a reward",),
            command=command, reward=0.0,
        )  # fmt: skip
    assert isinstance(run.rewards, dict)
    reward = scalar(run.rewards)
    problems: list[str] = []
    if unexpected := sorted(run.names - control.names):
        problems.append(
            f"reward_forged: {', '.join(unexpected)} appeared, which the verifier does not write on the pristine "
            f"workspace (it writes {', '.join(sorted(control.names))})"
        )
    canaries: list[tuple[str, str, int | None]] = []
    notes: list[str] = []
    if reward > 0 and not problems:
        # A test twin of a partial score proves nothing: its test may have failed anyway.
        twins, notes = build_test_twins(task.verifier.tests_dir, rng) if reward >= 1.0 else ([], [PARTIAL_NOTE])
        if (moved := reward_path_twin(task.verifier.tests_dir, rng)) is not None:
            twins.append(moved)
        else:
            notes.append(f"no reward-path canary: no file of the verifier names {REWARD_DIR}")
        rng.shuffle(twins)
        canaries, problems = _twin_verdicts(task, patch, factory, twins, reward)
    rules = list(dict.fromkeys(text.split(":", 1)[0] for text in problems))
    return GradeResult(
        resolved=not problems and reward >= 1.0,
        patch_applied=True,
        log=log,
        blocked=(*blocked, *rules),
        exit_code=exit_code,
        problems=tuple(problems),
        canaries=tuple(canaries),
        notes=tuple(notes),
        reward=0.0 if problems else reward,
        rewards=run.rewards,
        dropped=dropped,
        command=command,
    )
