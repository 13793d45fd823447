"""`ToolEnv`: a Gymnasium-shaped, text-native environment over a sandboxed repository.

`reset()` starts a sandbox over the task's workspace and returns the issue as the first
observation; `step(text)` parses the model's tool call(s) from `text`, runs them, and
returns what the agent sees next. The episode ends with `terminated=True` when the agent
calls `finish`, or `truncated=True` when the turn or time limit is hit, or (when
`max_format_errors` is set) after that many malformed replies in a row; either way the
final diff is graded in a fresh sandbox and the reward is 1.0 when the task is resolved.
The rollout layer ends episodes on token limits with `truncate()`.
"""

from __future__ import annotations

import copy
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_env.editor import ToolRunner
from agent_env.grading import GradeMemo, GradeResult, GradingError, grade_patch, sandbox_spec_for
from agent_env.tools import ToolCallError, parse_tool_calls, tool_schemas
from sandboxes import Sandbox, SandboxError, SandboxSpec, make_sandbox, prefork, started_warm
from tasks import Task
from tasks.spec import IGNORED_IN_WORKSPACE

SYSTEM_PROMPT = (
    "You are a careful software engineer. A repository is checked out at /workspace. "
    "Investigate the issue, make the smallest change to the non-test source files that "
    "resolves it, check your change, then call `finish`. Use exactly one tool call per reply."
)
USER_TEMPLATE = "<issue>\n{problem}\n</issue>\n\nThe repository is at {workdir}. Resolve the issue, then call finish."
# The agent's diff, taken so that nothing the agent set up can shape it: a fresh shell (not
# the agent's: its functions, aliases and PATH do not apply), a throwaway git directory of
# our own (the agent's .git/config, hooks, info/ and index are never read; its objects are,
# through the alternates, and they are content-addressed), no system or global config, and
# no external diff or textconv.
DIFF_COMMAND = (
    "set -e; cd {workdir}; g=$(mktemp -d); trap 'rm -rf \"$g\"' EXIT; "
    "export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=$g XDG_CONFIG_HOME=$g GIT_ATTR_NOSYSTEM=1 "
    "GIT_OPTIONAL_LOCKS=0 GIT_TERMINAL_PROMPT=0; "
    'git init -q --bare "$g/git"; printf \'%s\' {ignored} > "$g/git/info/exclude"; '
    "export GIT_DIR=$g/git GIT_WORK_TREE=$PWD GIT_INDEX_FILE=$g/index GIT_ALTERNATE_OBJECT_DIRECTORIES=$PWD/.git/objects; "
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false read-tree {base}; "
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.autocrlf=false add -A; "
    "git -c core.hooksPath=/dev/null -c core.quotePath=true diff --cached --no-color --no-ext-diff --no-textconv "
    "--binary --no-renames --src-prefix=a/ --dst-prefix=b/ {base}"
)


@dataclass
class EpisodeStats:
    turns: int = 0
    format_errors: int = 0
    format_error_streak: int = 0
    """Malformed replies in a row (0 after any reply with a well-formed tool call)."""
    tool_errors: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass
class SandboxCost:
    """Where an episode's time went on the sandbox's side, in seconds of the env's clock.

    Summed over a step's episodes (`trainer.inference.cost`) these are the run's sandbox
    cost; a forked env (a PATR branch) starts a cost of its own, so a tree's branches add
    up to the tree's."""

    start: str = ""
    """How the agent's sandbox started: `cold` (started for this episode), `warm` (ready
    from a `sandboxes.pool.SandboxPool`) or `fork` (forked from its parent branch)."""
    start_seconds: float = 0.0
    """From asking for the sandbox until the episode could begin (its base commit read)."""
    tool_seconds: float = 0.0
    """In the agent's tool calls (commands and file edits in the sandbox)."""
    grading_seconds: float = 0.0
    """Taking the final diff and grading it (hidden tests in a sandbox of their own), or
    the control run that tells who broke a dead sandbox."""
    lifetime_seconds: float = 0.0
    """The agent's sandbox from asking for it to its close (final once the env is closed)."""
    grading_setup_seconds: float = 0.0
    """Of `grading_seconds`: taking the diff, starting the grading sandbox, applying the
    patches and judging the tree (and the control run, when one was needed)."""
    test_run_seconds: float = 0.0
    """Of `grading_seconds`: the verdict run of the required tests (and its fork, where the
    task has canary twins)."""
    canary_seconds: float = 0.0
    """Of `grading_seconds`: the canary twins (their forks and runs)."""
    grading_teardown_seconds: float = 0.0
    """Of `grading_seconds`: closing the grading sandboxes."""
    close_seconds: float = 0.0
    """Closing the agent's sandbox (the end of `lifetime_seconds`)."""
    graded_from_memo: bool = False
    """The verdict was one given before to the same diff (`agent_env.grading.memo`): its
    grading seconds are the diff's alone."""

    @property
    def sandbox_seconds(self) -> float:
        """Sandbox time used: the agent's sandbox's lifetime plus the grading time (the
        grading sandboxes live within it, beside the agent's)."""
        return self.lifetime_seconds + self.grading_seconds


class ToolEnv:
    """One task's episode. Not thread-safe; fork it for branches."""

    def __init__(
        self,
        task: Task,
        *,
        sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None,
        max_turns: int | None = None,
        time_limit_s: float | None = None,
        max_output_chars: int = 4000,
        max_format_errors: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        grade_memo: GradeMemo | None = None,
    ) -> None:
        """`max_format_errors`: end the episode (graded as it stands, `end="format_errors"`)
        after this many malformed replies in a row; None lets the agent retry until its
        turns run out, as OpenHands and mini-swe-agent do. `clock` times the episode's
        `cost` (and the rollout's timings of it): seconds, monotonic. `grade_memo`: verdicts
        shared by the envs of one process, so that a diff graded before is not graded again
        (`agent_env.grading.memo`; forks share it)."""
        self.task = task
        self.grade_memo = grade_memo
        self.clock = clock
        self.max_format_errors = max_format_errors
        self.sandbox_factory = sandbox_factory or make_sandbox
        self.max_turns = max_turns or task.limits.max_turns
        self.time_limit_s = time_limit_s
        self.max_output_chars = max_output_chars
        self.tools = tool_schemas(task.tools)
        self.system_prompt = SYSTEM_PROMPT
        self.sandbox: Sandbox | None = None
        self._runner: ToolRunner | None = None
        self._base = ""
        self.stats = EpisodeStats()
        self.cost = SandboxCost()
        """This episode's sandbox time (`SandboxCost`); reset by `reset()`."""
        self._opened: float | None = None  # when the agent's sandbox was asked for
        self.done = False
        self.transcript: list[dict[str, Any]] = []
        """Everything the agent saw and sent, as chat messages (observations as the agent saw them)."""

    # -- Gymnasium API ------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict[str, Any]]:
        """Start the episode in a fresh sandbox. `seed` is recorded; the env is deterministic."""
        self.close()
        spec = sandbox_spec_for(self.task)
        self.cost = SandboxCost()
        self._opened = asked = self.clock()
        self.sandbox = self.sandbox_factory(spec)
        self.cost.start = "warm" if started_warm(self.sandbox) else "cold"
        self._runner = ToolRunner(
            self.sandbox, command_timeout=self.task.limits.command_timeout_s, max_output_chars=self.max_output_chars
        )
        head = self.sandbox.exec("git rev-parse --verify HEAD", fresh=True)
        self.cost.start_seconds = self.clock() - asked
        self._base = head.output.strip()
        if head.exit_code != 0 or not self._base:
            raise SandboxError(f"task {self.task.id}: the workspace has no base commit: {head.output.strip()[:200]}")
        self.stats = EpisodeStats()
        self.done = False
        workdir = self.task.sandbox.get("workdir", SandboxSpec().workdir)
        observation = USER_TEMPLATE.format(problem=self.task.problem_statement, workdir=workdir)
        self.transcript = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": observation},
        ]
        return observation, {
            "task_id": self.task.id,
            "system_prompt": self.system_prompt,
            "tools": self.tools,
            "seed": seed,
        }

    def step(self, action: str | dict) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """One agent turn. `action` is the model's text (Hermes `<tool_call>` form) or an
        OpenAI-style assistant message with `tool_calls`."""
        if self.done or self._runner is None:
            raise RuntimeError(f"task {self.task.id}: step() called on a finished episode; call reset()")
        self.stats.turns += 1
        self.transcript.append({"role": "assistant", "content": action})
        info: dict[str, Any] = {"turn": self.stats.turns}
        try:
            calls = parse_tool_calls(action, self.task.tools)
        except ToolCallError as exc:
            self.stats.format_errors += 1
            self.stats.format_error_streak += 1
            info["format_error"] = str(exc)
            observation, finished = f"ERROR: {exc}", False
        else:
            self.stats.format_error_streak = 0
            parts, finished = [], False
            for call in calls:
                if call.name == "finish":
                    finished = True
                    break
                began = self.clock()
                try:
                    parts.append(self._runner.run(call))
                except ToolCallError as exc:
                    self.stats.tool_errors += 1
                    parts.append(f"ERROR: {exc}")
                except SandboxError as exc:
                    self.cost.tool_seconds += self.clock() - began
                    return self._sandbox_died(info, exc)
                self.cost.tool_seconds += self.clock() - began
            observation = "\n\n".join(parts)
        self.transcript.append({"role": "tool", "content": observation})
        if finished:
            reward, grade_info = self._finish()
            return observation, reward, True, False, {**info, **grade_info, "end": "finish"}
        out_of_turns = self.stats.turns >= self.max_turns
        out_of_time = self.time_limit_s is not None and time.monotonic() - self.stats.started > self.time_limit_s
        out_of_format = self.max_format_errors is not None and self.stats.format_error_streak >= self.max_format_errors
        if out_of_turns or out_of_time or out_of_format:
            reward, grade_info = self._finish()
            end = "format_errors" if out_of_format else "max_turns" if out_of_turns else "time_limit"
            return observation, reward, False, True, {**info, **grade_info, "end": end}
        return observation, 0.0, False, False, info

    def truncate(self, reason: str = "token_limit") -> tuple[float, dict[str, Any]]:
        """End the episode from outside (e.g. the rollout's token budget) and grade it."""
        reward, info = self._finish()
        return reward, {**info, "end": reason}

    def prefork(self, count: int) -> None:
        """Start sandboxes ahead of this episode's next `count` forks where the backend can
        (`sandboxes.prefork`): they start side by side, and each fork then costs a copy of
        what changed, not a start of its own."""
        if self.sandbox is not None:
            prefork(self.sandbox, count)

    def fork(self) -> ToolEnv:
        """An independent copy of this episode: forked sandbox, same turn count and undo history."""
        if self.sandbox is None or self._runner is None:
            raise RuntimeError(f"task {self.task.id}: fork() needs a started episode")
        child = copy.copy(self)
        asked = self.clock()
        child.sandbox = self.sandbox.fork()
        child.cost = SandboxCost(start="fork", start_seconds=self.clock() - asked)
        child._opened = asked
        child._runner = copy.copy(self._runner)
        child._runner.sandbox = child.sandbox
        child._runner._history = copy.deepcopy(self._runner._history)
        child.stats = copy.copy(self.stats)
        child.transcript = copy.deepcopy(self.transcript)
        return child

    def close(self) -> None:
        self._close_sandbox()

    def _close_sandbox(self) -> None:
        """Close the agent's sandbox (if open) and book its lifetime in `cost`."""
        if self.sandbox is not None:
            closing = self.clock()
            try:
                self.sandbox.close()
            finally:
                self.cost.close_seconds += self.clock() - closing
                self.sandbox = None
                self._runner = None
                if self._opened is not None:
                    self.cost.lifetime_seconds += self.clock() - self._opened
                    self._opened = None

    def __enter__(self) -> ToolEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the submission -----------------------------------------------------------------
    def current_patch(self) -> str:
        """The agent's changes so far as a unified diff against the base commit (taken so that
        nothing the agent set up in its sandbox can shape it: see `DIFF_COMMAND`). A diff
        that cannot be taken (the agent broke its repository) is empty: the agent's loss."""
        assert self.sandbox is not None
        result = self.sandbox.exec(
            DIFF_COMMAND.format(
                workdir=shlex.quote(self.sandbox.spec.workdir),
                base=shlex.quote(self._base),
                ignored=shlex.quote(IGNORED_IN_WORKSPACE),
            ),
            timeout=60,
            fresh=True,
        )
        return result.output if result.exit_code == 0 and not result.truncated else ""

    def _finish(self) -> tuple[float, dict[str, Any]]:
        began = self.clock()
        try:
            patch = self.current_patch()
        except SandboxError as exc:
            self._book_grading(None, self.clock() - began)
            return self._blame_broken_sandbox(exc)
        self.done = True
        grade: GradeResult | None = None

        def graded() -> GradeResult:
            return grade_patch(self.task, patch, sandbox_factory=self.sandbox_factory, clock=self.clock)

        try:
            grade = graded() if self.grade_memo is None else self.grade_memo.grade(self.task, patch, graded)
        finally:
            self._book_grading(grade, self.clock() - began)
        info = {
            "patch": patch,
            "resolved": grade.resolved,
            "grade": grade,
            "format_errors": self.stats.format_errors,
            "turns": self.stats.turns,
            "reward_hack_blocked": list(grade.blocked),
        }
        return grade.score, info

    def _book_grading(self, grade: GradeResult | None, total: float) -> None:
        """Book one grading's `total` seconds in `cost.grading_seconds`, split into its phases:
        the grader's own timings of the verdict run, the canaries and the teardown
        (`GradeResult.seconds`), and the rest (the diff, the sandbox start, the setup, or all
        of it when no grade came) as setup."""
        seconds = grade.seconds if grade is not None else {}
        self.cost.graded_from_memo = grade is not None and grade.from_memo
        tests = seconds.get("tests", 0.0)
        canaries = seconds.get("canaries", 0.0)
        teardown = seconds.get("teardown", 0.0)
        self.cost.grading_seconds += total
        self.cost.test_run_seconds += tests
        self.cost.canary_seconds += canaries
        self.cost.grading_teardown_seconds += teardown
        self.cost.grading_setup_seconds += max(0.0, total - tests - canaries - teardown)

    # -- a sandbox that died under the agent ----------------------------------------------
    def _sandbox_died(self, info: dict[str, Any], exc: SandboxError) -> tuple[str, float, bool, bool, dict[str, Any]]:
        reward, end_info = self._blame_broken_sandbox(exc)
        observation = f"ERROR: the sandbox died: {exc}"
        self.transcript.append({"role": "tool", "content": observation})
        return observation, reward, True, False, {**info, **end_info}

    def _blame_broken_sandbox(self, exc: SandboxError) -> tuple[float, dict[str, Any]]:
        """The agent's sandbox died after the agent acted. If a fresh sandbox of the same task
        starts and answers (the control), the agent broke it: reward 0, `agent_broke_sandbox`.
        If not, the backend itself is failing: a `SandboxError` for the caller to retry."""
        self.done = True
        self._close_sandbox()
        began = self.clock()
        try:
            with self.sandbox_factory(sandbox_spec_for(self.task)) as control:
                answered = control.exec("true", timeout=30, fresh=True).exit_code == 0
        except (SandboxError, GradingError) as control_exc:
            raise SandboxError(f"task {self.task.id}: {exc}; a fresh sandbox fails too: {control_exc}") from exc
        finally:
            self._book_grading(None, self.clock() - began)
        if not answered:
            raise SandboxError(f"task {self.task.id}: {exc}; a fresh sandbox does not answer either") from exc
        info = {
            "patch": "",
            "resolved": False,
            "grade": None,
            "format_errors": self.stats.format_errors,
            "turns": self.stats.turns,
            "end": "agent_broke_sandbox",
            "reward_hack_blocked": ["agent_broke_sandbox"],
            "sandbox_error": str(exc),
        }
        return 0.0, info
