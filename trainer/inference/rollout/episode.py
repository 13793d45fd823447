"""A linear episode: the engine and the env take turns until the env ends it."""

from __future__ import annotations

from agent_env import ToolEnv
from trainer.inference.cost import record_sandbox_cost
from trainer.inference.engines.base import Engine
from trainer.inference.rollout.chat import ChatFormat
from trainer.inference.rollout.turns import finish_trajectory, play_turn
from trainer.inference.trajectory import Trajectory


def run_episode(
    env: ToolEnv,
    engine: Engine,
    chat: ChatFormat,
    *,
    max_new_tokens: int,
    max_total_tokens: int,
    temperature: float = 1.0,
    seed: int | None = None,
) -> Trajectory:
    """Play one episode; the env is closed afterwards. Infrastructure errors (sandbox,
    grading) propagate: a broken episode is the caller's to retry, never a reward of 0.
    Turn `n` samples with seed `seed * 1000 + n`, so a seeded episode is reproducible.
    The trajectory records what the episode cost (`trainer.inference.cost`), timed by the
    env's clock from `reset` to the env's close."""
    started = env.clock()
    try:
        observation, info = env.reset(seed=seed)
        trajectory = Trajectory(task_id=env.task.id)
        trajectory.extend(chat.prompt_ids(info["system_prompt"], observation, info["tools"]), policy=False)
        turn = 0
        while True:
            played = play_turn(
                env,
                engine,
                chat,
                trajectory,
                max_new_tokens=max_new_tokens,
                max_total_tokens=max_total_tokens,
                temperature=temperature,
                seed=None if seed is None else seed * 1000 + turn,
            )
            turn += 1
            if played.outcome is not None:
                finish_trajectory(trajectory, env, played.outcome)
                break
    finally:
        env.close()
    record_sandbox_cost(trajectory, env.cost)
    trajectory.wall_seconds = env.clock() - started
    return trajectory
