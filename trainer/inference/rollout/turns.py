"""One agent turn, shared by linear episodes (`episode.py`) and PATR trees (`tree.py`).

A turn is: pick the token budget, sample the policy's reply from the engine, append it
(ids, logprobs, version) to the trajectory, hand its text to the env, then either record
how the episode ended or append the observation ids the next turn is sampled after. Both
rollouts play exactly this turn, so it lives once: a linear episode and a one-branch tree
given the same sampled tokens must be the same trajectory, token for token, and any fix to
the turn (budgets, stop tokens, how observations are rendered) must reach both.

What differs between the two stays with the callers: the per-turn seed, and whether a turn
also spends a tree's shared token budget (`tree_room`, see `play_turn`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from agent_env import ToolEnv
from trainer.inference.engines.base import Engine
from trainer.inference.rollout.chat import ChatFormat
from trainer.inference.trajectory import Trajectory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """How an episode ended: the env's grade and why (`info["end"]`)."""

    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """What one call of `play_turn` did."""

    action: str | None
    """The policy's reply as text; None when no reply was sampled (the budget was spent)."""
    observation: str | None
    """What the env answered (appended only if the episode goes on); None with `action`."""
    new_tokens: int
    """Tokens appended to the trajectory this turn (policy reply plus observation)."""
    outcome: Outcome | None
    """How the episode ended this turn; None when it goes on."""


def end_early(env: ToolEnv, reason: str) -> Outcome:
    """End the episode from outside the env (a token limit, a tree pruning the branch) and
    grade it as it stands: it is a truncated episode, never a dropped one."""
    logger.debug("task %s: episode ended early: %s", env.task.id, reason)
    reward, info = env.truncate(reason)
    return Outcome(reward, terminated=False, truncated=True, info=info)


def play_turn(
    env: ToolEnv,
    engine: Engine,
    chat: ChatFormat,
    trajectory: Trajectory,
    *,
    max_new_tokens: int,
    max_total_tokens: int,
    temperature: float,
    seed: int | None,
    tree_room: int | None = None,
) -> Turn:
    """Play one turn of `env`, appending to `trajectory`. Infrastructure errors propagate.

    The reply gets at most `max_new_tokens`, and never takes the trajectory past
    `max_total_tokens`; with no room left the episode is ended (`token_limit`) without
    sampling. The wait for the engine is added to `trajectory.engine_seconds` (env's clock).
    `tree_room` is a PATR tree's shared budget (arXiv 2607.15610): the tokens the
    whole tree may still add, shared prefixes counted once. It caps the reply too, and when
    the observation would not fit after the reply, the branch ends (`tree_token_limit`)
    instead of appending it, so the tree never passes its budget. None for linear episodes.
    """
    budget = min(max_new_tokens, max_total_tokens - len(trajectory))
    if tree_room is not None:
        budget = min(budget, tree_room)
    if budget <= 0:
        return Turn(None, None, 0, end_early(env, "token_limit"))
    asked = env.clock()
    generation = engine.generate(
        [trajectory.token_ids],
        max_new_tokens=budget,
        temperature=temperature,
        stop_token_ids=(chat.end_id,),
        seed=seed,
    )[0]
    trajectory.engine_seconds += env.clock() - asked
    trajectory.extend(generation.token_ids, policy=True, logprobs=generation.logprobs, version=generation.version)
    spent = len(generation.token_ids)
    action = chat.decode(generation.token_ids)
    observation, reward, terminated, truncated, info = env.step(action)
    if terminated or truncated:
        return Turn(action, observation, spent, Outcome(reward, terminated, truncated, info))
    ids = chat.observation_ids(observation, turn_closed=generation.finish_reason == "stop")
    if tree_room is not None and spent + len(ids) > tree_room:
        return Turn(action, observation, spent, end_early(env, "tree_token_limit"))
    trajectory.extend(ids, policy=False)
    return Turn(action, observation, spent + len(ids), None)


def finish_trajectory(trajectory: Trajectory, env: ToolEnv, outcome: Outcome) -> None:
    """Record the episode's outcome in the trajectory's typed fields (its one writer for
    them). The env is left open: the caller closes it when it is done with it."""
    trajectory.reward = outcome.reward
    trajectory.terminated = outcome.terminated
    trajectory.truncated = outcome.truncated
    trajectory.turns = env.stats.turns
    trajectory.format_errors = env.stats.format_errors
    trajectory.resolved = bool(outcome.info.get("resolved", False))
    trajectory.end = outcome.info.get("end")
    trajectory.patch = outcome.info.get("patch", "")
    trajectory.reward_hack_blocked = list(outcome.info.get("reward_hack_blocked", ()))


def training_reward(trajectory: Trajectory, format_error_reward: float) -> float:
    """The reward RL trains on: the grade, capped at `format_error_reward` for an episode that
    ended on malformed replies (`end == "format_errors"`; `rollout.format_error_reward`): an
    agent must end by calling `finish`, not by slipping into garbage after its edit. A cap,
    never a raise: no setting lets a failed episode earn more than its grade."""
    if trajectory.end == "format_errors":
        return min(trajectory.reward, format_error_reward)
    return trajectory.reward
