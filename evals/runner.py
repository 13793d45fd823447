"""Solvers: what produces an instance's patch (an agent, or an oracle), and what it cost.

A solver is called with a task and its index in the run (the index seeds sampling, so a
run gives the same results whatever the number of workers) and returns an `Attempt`: the
patch, the project grader's `GradeResult` when it graded, the transcript, turns, tokens
and timings. Solvers are called from several threads at once (`--workers`): the engine
is shared (generation holds no per-call state on it) and every episode has its own env.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent_env import GradeResult, ToolEnv, grade_patch
from sandboxes import Sandbox, SandboxSpec
from tasks import Task

ORACLES = ("gold", "empty")
SandboxFactory = Callable[[SandboxSpec], Sandbox]


@dataclass
class Attempt:
    """One instance's run: the submission and what it took."""

    patch: str
    grade: GradeResult | None = None
    """The project grader's result; None when it did not grade (the official harness will)."""
    transcript: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    tokens: int = 0
    """Length of the episode's token sequence (prompt, model and tool tokens)."""
    policy_tokens: int = 0
    """Tokens the model generated."""
    end: str | None = None
    """Why the episode ended: finish, max_turns, time_limit, token_limit (None for oracles)."""
    solve_s: float = 0.0
    """Seconds to produce the patch (for an agent: the episode, its final grading included)."""
    grade_s: float | None = None
    """Seconds of grading measured apart (oracles); None when it happened inside the episode."""
    cost: dict = field(default_factory=dict)
    """Where the time went (`trainer.inference.cost.episode_cost`: the sandbox's start, tool
    calls, grading, the engine, sandbox-seconds, wall time); an oracle has only grading."""


class Solver(Protocol):
    name: str
    needs_workspace: bool
    """Whether solving needs the task's environment (an agent does; an oracle does not)."""

    def __call__(self, task: Task, index: int, *, grade: bool) -> Attempt:
        """Solve `task`; grade with the project's sandbox grader when `grade` is set."""
        ...


class PatchSolver:
    """A solver whose patches are known in advance: it submits them, and grades them in a
    fresh sandbox when asked (no environment is needed to produce them)."""

    name = "patches"
    needs_workspace = False

    def __init__(self, *, sandbox_factory: SandboxFactory | None = None) -> None:
        self.sandbox_factory = sandbox_factory

    def patch_for(self, task: Task) -> str:
        raise NotImplementedError

    def __call__(self, task: Task, index: int, *, grade: bool) -> Attempt:
        attempt = Attempt(patch=self.patch_for(task))
        if grade:
            started = time.monotonic()
            attempt.grade = grade_patch(task, attempt.patch, sandbox_factory=self.sandbox_factory)
            attempt.grade_s = round(time.monotonic() - started, 3)
            # No episode: all of it is grading, in a sandbox of its own.
            attempt.cost = {"grading_seconds": attempt.grade_s, "sandbox_seconds": attempt.grade_s,
                            "wall_seconds": attempt.grade_s}  # fmt: skip
        return attempt


class OracleSolver(PatchSolver):
    """Submits each task's gold patch (`gold`) or nothing (`empty`): runs that check grading."""

    def __init__(self, kind: str, *, sandbox_factory: SandboxFactory | None = None) -> None:
        if kind not in ORACLES:
            raise ValueError(f"unknown oracle {kind!r}; known: {', '.join(ORACLES)}")
        super().__init__(sandbox_factory=sandbox_factory)
        self.name = kind

    def patch_for(self, task: Task) -> str:
        return task.gold_patch if self.name == "gold" else ""


class PredictionsSolver(PatchSolver):
    """Submits the patches of a predictions file in SWE-bench's format (another scaffold's
    output, e.g. OpenHands'), so they are graded and reported like a run of our own. The
    run grades only the instances the file names (`evals.swe.predicted_tasks`)."""

    def __init__(self, path: Path, *, sandbox_factory: SandboxFactory | None = None) -> None:
        super().__init__(sandbox_factory=sandbox_factory)
        self.path = Path(path)
        self.patches: dict[str, str] = {}
        models = set()
        try:
            lines = self.path.read_text().splitlines()
        except OSError as exc:
            raise ValueError(f"{self.path}: cannot read predictions: {exc}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                prediction = json.loads(line)
                self.patches[prediction["instance_id"]] = prediction.get("model_patch") or ""
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                raise ValueError(f"{self.path}:{number}: not a prediction ({exc!r})") from None
            models.add(str(prediction.get("model_name_or_path") or self.path.stem))
        self.name = ",".join(sorted(models)) or self.path.stem

    def patch_for(self, task: Task) -> str:
        return self.patches.get(task.id, "")


class RecordingEnv(ToolEnv):
    """A `ToolEnv` that keeps the grade of the episode's end (run_episode drops it)."""

    grade: GradeResult | None = None

    def step(self, action: str | dict) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if "grade" in info:
            self.grade = info["grade"]
        return observation, reward, terminated, truncated, info

    def truncate(self, reason: str = "token_limit") -> tuple[float, dict[str, Any]]:
        reward, info = super().truncate(reason)
        self.grade = info.get("grade")
        return reward, info


class AgentSolver:
    """Runs the policy in the env's OpenHands-compatible tool set, one episode per task.

    The env grades the final diff itself when the episode ends (`grade` cannot turn that
    off); the official harness, where it grades, does so again from the prediction.
    """

    needs_workspace = True

    def __init__(
        self,
        model: str,
        *,
        engine: str,
        base_url: str | None,
        tokenizer: str | None,
        max_turns: int,
        max_new_tokens: int,
        max_total_tokens: int,
        temperature: float,
        seed: int,
        sandbox_factory: SandboxFactory | None = None,
    ) -> None:
        from trainer.inference.engines import make_engine  # lazy: the hf engine imports torch
        from trainer.inference.models import load_tokenizer
        from trainer.inference.rollout import ChatFormat

        self.name = model
        self.chat = ChatFormat(load_tokenizer(tokenizer or model))
        self.engine = make_engine(engine, model, seed=seed, base_url=base_url)
        self.max_turns, self.max_new_tokens, self.max_total_tokens = max_turns, max_new_tokens, max_total_tokens
        self.temperature, self.seed = temperature, seed
        self.sandbox_factory = sandbox_factory

    def __call__(self, task: Task, index: int, *, grade: bool) -> Attempt:
        from trainer.inference.cost import episode_cost
        from trainer.inference.rollout import run_episode

        env = RecordingEnv(
            task, sandbox_factory=self.sandbox_factory, max_turns=min(self.max_turns, task.limits.max_turns)
        )
        started = time.monotonic()
        trajectory = run_episode(
            env,
            self.engine,
            self.chat,
            max_new_tokens=self.max_new_tokens,
            max_total_tokens=self.max_total_tokens,
            temperature=self.temperature,
            seed=self.seed + index,
        )
        return Attempt(
            patch=trajectory.patch,
            grade=env.grade,
            transcript=env.transcript,
            turns=trajectory.turns,
            tokens=len(trajectory),
            policy_tokens=trajectory.num_policy_tokens,
            end=trajectory.end,
            solve_s=round(time.monotonic() - started, 3),
            cost=episode_cost(trajectory),
        )
