"""A linear episode: the engine and the env take turns until the env ends it."""

from __future__ import annotations

from agent_env import ToolEnv
from trainer.inference.engines.base import Engine
from trainer.inference.rollout.chat import ChatFormat
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
    grading) propagate: a broken episode is the caller's to retry, never a reward of 0."""
    try:
        observation, info = env.reset(seed=seed)
        trajectory = Trajectory(task_id=env.task.id)
        trajectory.extend(chat.prompt_ids(info["system_prompt"], observation, info["tools"]), policy=False)
        turn = 0
        while True:
            budget = min(max_new_tokens, max_total_tokens - len(trajectory))
            if budget <= 0:
                reward, end_info = env.truncate("token_limit")
                trajectory.reward, trajectory.truncated = reward, True
                break
            generation = engine.generate(
                [trajectory.token_ids],
                max_new_tokens=budget,
                temperature=temperature,
                stop_token_ids=(chat.end_id,),
                seed=None if seed is None else seed * 1000 + turn,
            )[0]
            trajectory.extend(
                generation.token_ids, policy=True, logprobs=generation.logprobs, version=generation.version
            )
            observation, reward, terminated, truncated, end_info = env.step(chat.decode(generation.token_ids))
            turn += 1
            if terminated or truncated:
                trajectory.reward, trajectory.terminated, trajectory.truncated = reward, terminated, truncated
                break
            trajectory.extend(
                chat.observation_ids(observation, turn_closed=generation.finish_reason == "stop"), policy=False
            )
        trajectory.turns = env.stats.turns
        trajectory.format_errors = env.stats.format_errors
        trajectory.resolved = bool(end_info.get("resolved", False))
        trajectory.end = end_info.get("end")
        trajectory.patch = end_info.get("patch", "")
        trajectory.reward_hack_blocked = list(end_info.get("reward_hack_blocked", ()))
        return trajectory
    finally:
        env.close()
