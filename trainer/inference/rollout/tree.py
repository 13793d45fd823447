"""Tree rollouts (PATR, arXiv 2607.15610): branch from promising states, prune degenerate paths.

One episode starts as a single branch. Every `expand_every` turns a process scorer rates the
active branches. Degenerate branches (the same action repeated, or a run of malformed
actions) and branches scoring below `prune_below` are ended early: they are graded as they
stand and stay in the batch as negatives. The best-scoring branches at or above
`expand_above` fork into `children` branches that share everything so far: the sandbox is
forked (`ToolEnv.fork` -> `Sandbox.fork`) and the token prefix is copied, so the engine's
prefix cache serves the shared part instead of recomputing it.

Scores only allocate budget; they never enter a reward or a loss. Budgets are hard limits:
at most `max_branches` branches are ever created, and the tree's unique tokens (shared
prefixes counted once) never pass `max_total_tokens` (branches are ended when it is met).

Each branch plays exactly the turn a linear episode plays (`turns.play_turn`), so a branch
is the episode `run_episode` would give for the same sampled tokens. The tree departs from a
linear episode in three places only: each branch's turns are seeded by branch
(`crc32("<seed>/<branch>/<turn>")`) so siblings diverge after a fork; every turn also spends
the tree's shared budget, and a branch whose next observation would pass it ends
(`tree_token_limit`); and trajectories record their branch fields.

Each trajectory's cost (`trainer.inference.cost`) is its branch's own: the root's sandbox
start or a child's fork, its turns (engine and tool time), its grading, and the scorer's
time shared equally among the branches it rated; so a tree's trajectories add up to the
tree, never counting a shared prefix twice.

Every trajectory is a complete linear episode (root prompt to its end), records its
`parent` branch and `branch_token` (the index where it left its parent), and is tagged with
the tree's id as its `group_id`, so GRPO treats a tree as a group and SAO treats siblings
as extra single rollouts with the critic as baseline.

Where this departs from the paper: PATR's scorer is a learned PRM or an LLM judge; we ship
a heuristic scorer, a value-model scorer (SAO trains the critic anyway) and an LLM judge
through any engine, and rank branches within the tree rather than against fixed scores.
"""

from __future__ import annotations

import copy
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from agent_env import ToolEnv
from trainer.inference.cost import record_sandbox_cost
from trainer.inference.engines.base import Engine
from trainer.inference.rollout.chat import ChatFormat
from trainer.inference.rollout.turns import Outcome, end_early, finish_trajectory, play_turn
from trainer.inference.trajectory import Trajectory


@dataclass
class Branch:
    id: str
    env: ToolEnv
    trajectory: Trajectory
    parent: str | None = None
    branch_token: int = 0
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    done: bool = False


class Scorer(Protocol):
    def score(self, branches: list[Branch]) -> list[float]:
        """A score per branch; higher is more promising. Only allocates budget."""
        ...


def is_degenerate(branch: Branch, repeats: int = 3) -> str | None:
    """Why a branch is going nowhere (identical actions or format errors `repeats` times in a
    row), or None."""
    recent = branch.actions[-repeats:]
    if len(recent) == repeats and len(set(recent)) == 1:
        return "repeated_action"
    errors = branch.observations[-repeats:]
    if len(errors) == repeats and all(o.startswith("ERROR:") for o in errors):
        return "format_error_loop"
    return None


class HeuristicScorer:
    """Rates progress from what the agent saw: penalises malformed calls, failing commands and
    repetition; rewards distinct actions that ran cleanly."""

    def score(self, branches: list[Branch]) -> list[float]:
        scores = []
        for branch in branches:
            recent = branch.observations[-4:]
            errors = sum(o.startswith("ERROR:") for o in recent)
            failed = sum(bool(re.search(r"\[exit code: [1-9]\d*\]", o)) for o in recent)
            distinct = len(set(branch.actions[-4:])) / max(len(branch.actions[-4:]), 1)
            scores.append(distinct - 0.5 * errors / max(len(recent), 1) - 0.25 * failed / max(len(recent), 1))
        return scores


class ValueScorer:
    """The critic's value of each branch's current state (its last token)."""

    def __init__(self, value_of: Callable[[list[list[int]]], list[float]]) -> None:
        self.value_of = value_of

    def score(self, branches: list[Branch]) -> list[float]:
        return self.value_of([b.trajectory.token_ids for b in branches])


class JudgeScorer:
    """An LLM judge through any engine: asks for a 0-10 rating of the transcript so far."""

    PROMPT = (
        "Rate from 0 to 10 how likely this software-engineering agent is to resolve the issue, "
        "judging only from its trajectory so far. Answer with a single number.\n\n{transcript}"
    )

    def __init__(self, engine: Engine, chat: ChatFormat, *, max_chars: int = 6000) -> None:
        self.engine, self.chat, self.max_chars = engine, chat, max_chars

    def score(self, branches: list[Branch]) -> list[float]:
        prompts = []
        for branch in branches:
            transcript = "\n".join(
                f"ACTION: {a}\nRESULT: {o}" for a, o in zip(branch.actions, branch.observations, strict=True)
            )
            text = self.PROMPT.format(transcript=transcript[-self.max_chars :])
            prompts.append(self.chat.prompt_ids("You are a strict reviewer.", text, None))
        outputs = self.engine.generate(prompts, max_new_tokens=4, temperature=0.0, stop_token_ids=(self.chat.end_id,))
        scores = []
        for output in outputs:
            match = re.search(r"\d+(?:\.\d+)?", self.chat.decode(output.token_ids))
            scores.append(min(float(match[0]), 10.0) if match else 0.0)
        return scores


@dataclass(frozen=True)
class TreeStats:
    branches: int
    pruned: int
    unique_tokens: int
    """Tokens of the tree with shared prefixes counted once."""
    linear_tokens: int
    """Tokens of its trajectories counted separately (what independent rollouts would hold)."""


def run_tree(
    env: ToolEnv,
    engine: Engine,
    chat: ChatFormat,
    scorer: Scorer,
    *,
    tree_id: str,
    max_new_tokens: int,
    max_episode_tokens: int,
    expand_every: int = 2,
    children: int = 2,
    max_branches: int = 4,
    max_total_tokens: int = 1 << 20,
    expand_above: float = float("-inf"),
    prune_below: float = float("-inf"),
    temperature: float = 1.0,
    seed: int | None = None,
) -> tuple[list[Trajectory], TreeStats]:
    """Grow one tree of episodes; returns every branch's trajectory (pruned ones included,
    marked `pruned`) and the tree's token accounting. Envs are closed on return."""
    if children < 2 or max_branches < 1 or expand_every < 1:
        raise ValueError("need children >= 2, max_branches >= 1 and expand_every >= 1")
    clock = env.clock
    started = clock()
    observation, info = env.reset(seed=seed)
    root = Trajectory(task_id=env.task.id, group_id=tree_id)
    root.extend(chat.prompt_ids(info["system_prompt"], observation, info["tools"]), policy=False)
    root.wall_seconds = clock() - started
    branches = [Branch(id=f"{tree_id}/0", env=env, trajectory=root)]
    unique = len(root)
    pruned = 0
    turn = 0

    def finish(branch: Branch, outcome: Outcome) -> None:
        branch.done = True
        finish_trajectory(branch.trajectory, branch.env, outcome)
        t = branch.trajectory
        t.branch_id, t.parent, t.branch_token = branch.id, branch.parent, branch.branch_token
        branch.env.close()
        record_sandbox_cost(t, branch.env.cost)

    def end_now(branch: Branch, reason: str) -> None:
        """Prune `branch`: graded as it stands (its own time)."""
        began = clock()
        finish(branch, end_early(branch.env, reason))
        branch.trajectory.pruned = True
        branch.trajectory.wall_seconds += clock() - began

    try:
        while any(not b.done for b in branches):
            for branch in [b for b in branches if not b.done]:
                # The turn a linear episode plays, with PATR's shared tree budget on top and
                # a seed per branch, so siblings sample differently after a fork.
                began = clock()
                played = play_turn(
                    branch.env,
                    engine,
                    chat,
                    branch.trajectory,
                    max_new_tokens=max_new_tokens,
                    max_total_tokens=max_episode_tokens,
                    temperature=temperature,
                    seed=None if seed is None else zlib.crc32(f"{seed}/{branch.id}/{turn}".encode()),
                    tree_room=max_total_tokens - unique,
                )
                unique += played.new_tokens
                if played.action is not None:
                    branch.actions.append(played.action)
                    branch.observations.append(played.observation)
                if played.outcome is not None:
                    finish(branch, played.outcome)
                branch.trajectory.wall_seconds += clock() - began
            turn += 1
            active = [b for b in branches if not b.done]
            if not active or turn % expand_every:
                continue
            # Degenerate paths end now, as negatives.
            for branch in active:
                reason = is_degenerate(branch)
                if reason:
                    end_now(branch, f"pruned:{reason}")
                    pruned += 1
            active = [b for b in branches if not b.done]
            if not active:
                break
            began = clock()
            scores = scorer.score(active)
            share = (clock() - began) / len(active)  # the scorer's time, shared by what it rated
            for branch in active:
                branch.trajectory.wall_seconds += share
            ranked = sorted(zip(scores, range(len(active)), active, strict=True), key=lambda x: (-x[0], x[1]))
            for score, _, branch in ranked:
                if score < prune_below and len(active) > 1:
                    end_now(branch, "pruned:low_score")
                    pruned += 1
                    active.remove(branch)
            expanding, room = [], max_branches - len(branches)
            for score, _, branch in ranked:
                if not branch.done and score >= expand_above and room > 0:
                    expanding.append((branch, min(children - 1, room)))
                    room -= expanding[-1][1]
            for branch, forks in expanding:  # every new sandbox starts now, side by side
                branch.env.prefork(forks)
            for branch, forks in expanding:
                for _ in range(forks):
                    began = clock()
                    child_env = branch.env.fork()
                    child = Branch(
                        id=f"{tree_id}/{len(branches)}",
                        env=child_env,
                        trajectory=copy.deepcopy(branch.trajectory),
                        parent=branch.id,
                        branch_token=len(branch.trajectory),
                        actions=list(branch.actions),
                        observations=list(branch.observations),
                    )
                    # The child's cost is its own from here: what the parent spent is the parent's.
                    child.trajectory.engine_seconds = 0.0
                    child.trajectory.wall_seconds = clock() - began
                    branches.append(child)
    finally:
        for branch in branches:
            if not branch.done:
                branch.env.close()
    trajectories = [b.trajectory for b in branches]
    stats = TreeStats(
        branches=len(branches),
        pruned=pruned,
        unique_tokens=unique,
        linear_tokens=sum(len(t) for t in trajectories),
    )
    return trajectories, stats
