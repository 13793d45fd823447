"""The agent's limits per episode, defined once for training and evaluation.

An episode ends when the agent has had `max_turns` turns (or the task's own limit, if that
is lower), or when its token sequence (prompt, actions and observations) reaches
`max_total_tokens`; in each turn the model generates at most `max_new_tokens`. Training
(`trainer.config.RolloutConfig`: `rollout.max_turns=...`) and evaluation
(`evals.config.EvalConfig`: `agent.max_turns=...`, `--max-turns`) state these settings through
`limit_field`, so their meaning, bounds and docstrings are this module's alone; each side
keeps its own defaults (a CPU demo's short episodes, a real SWE-bench run's long ones).

Sampling (temperature, seed) is not here: training samples at a temperature above 0 that its
learner scores tokens at, evaluation may decode greedily.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# What each limit bounds; every limit is a positive count.
LIMITS: dict[str, str] = {
    "max_turns": "Agent turns per episode (caps each task's own limit).",
    "max_new_tokens": "Tokens the model may generate in one turn.",
    "max_total_tokens": "Tokens (prompt, actions and observations) per episode before it is truncated.",
}


def limit_field(name: str, default: int) -> Any:
    """The config field of the limit `name` with `default`: how a config states a limit (a
    field of `AgentLimits`, or one of its own, as `rollout.max_turns` is for training)."""
    return Field(default=default, gt=0, description=LIMITS[name])


class AgentLimits(BaseModel):
    """The limits of one episode as a typed section; its defaults are a SWE-bench run's
    (`evals`), and a config that embeds the limits among its own fields states its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int = limit_field("max_turns", 30)
    max_new_tokens: int = limit_field("max_new_tokens", 256)
    max_total_tokens: int = limit_field("max_total_tokens", 16384)
