"""Sandbox cost: where an episode's wall time went (its sandbox or its engine), and the sums
that a training step (`metrics.jsonl`) and an evaluation report (`report.json`) show.

Per trajectory (its fields, written by the rollout from the env's `agent_env.SandboxCost`
and its own timing of the engine): how the sandbox started (`cold`, `warm` from a warm pool,
`fork` for a PATR branch) and how long that took, seconds in tool calls, in grading, waiting
on the engine, the sandbox time used (`sandbox_seconds`) and the wall time. The sandbox
parts, the engine part and the rest (chat formatting, tokenizing) are disjoint intervals of
the wall time, so the two fractions below never add up to more than 1.

Per step or evaluation (`cost_summary`, over `episode_cost` dicts): sums of each time, the
mean start, start counts by kind, and two fractions of the summed wall time, each a
time-weighted mean over the episodes: `sandbox_wait_fraction` (start + tool calls +
grading + closing the agent's sandbox) and `engine_wait_fraction` (the engine). Grading's
time is split too (`GRADING_PHASES`: setup, the verdict run, the canary twins, teardown), so
a step's metrics show which part of the sandbox bill to cut next.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agent_env import SandboxCost
from trainer.inference.trajectory import Trajectory

GRADING_PHASES = ("grading_setup_seconds", "test_run_seconds", "canary_seconds", "grading_teardown_seconds")
"""The parts of `grading_seconds`, as `agent_env.SandboxCost` splits it."""
SECONDS = (
    "sandbox_start_seconds",
    "tool_seconds",
    "grading_seconds",
    *GRADING_PHASES,
    "close_seconds",
    "engine_seconds",
    "sandbox_seconds",
    "wall_seconds",
)
"""The timed fields of an episode's cost (and of a `Trajectory`)."""
STARTS = ("cold", "warm", "fork")


def record_sandbox_cost(trajectory: Trajectory, cost: SandboxCost) -> None:
    """Copy what the env measured (`ToolEnv.cost`, final once the env is closed) into the
    trajectory's cost fields."""
    trajectory.sandbox_start = cost.start
    trajectory.sandbox_start_seconds = cost.start_seconds
    trajectory.tool_seconds = cost.tool_seconds
    trajectory.grading_seconds = cost.grading_seconds
    for name in (*GRADING_PHASES, "close_seconds"):
        setattr(trajectory, name, getattr(cost, name))
    trajectory.sandbox_seconds = cost.sandbox_seconds
    trajectory.graded_from_memo = cost.graded_from_memo


def episode_cost(trajectory: Trajectory) -> dict[str, float | str]:
    """A trajectory's cost fields as a dict (what an evaluation record keeps), seconds to
    the millisecond."""
    return {"sandbox_start": trajectory.sandbox_start, "graded_from_memo": trajectory.graded_from_memo} | {
        name: round(getattr(trajectory, name), 3) for name in SECONDS
    }


def cost_summary(episodes: Iterable[Mapping]) -> dict[str, float | int]:
    """The cost of a set of episodes (each an `episode_cost` dict; missing fields count as
    0): each time summed (`<field>`), the mean start (`sandbox_start_seconds_mean`), the
    starts by kind (`cold_starts`, `warm_starts`, `fork_starts`), the verdicts that came
    from the grading memo (`memo_verdicts`, no sandbox ran for them), and the shares of the
    summed wall time spent waiting on the sandbox (start, tool calls, grading, the close) and
    on the engine. Empty for no episodes."""
    episodes = list(episodes)
    if not episodes:
        return {}
    sums = {name: sum(float(e.get(name) or 0.0) for e in episodes) for name in SECONDS}
    wall = sums["wall_seconds"]
    waiting = sums["sandbox_start_seconds"] + sums["tool_seconds"] + sums["grading_seconds"] + sums["close_seconds"]
    out: dict[str, float | int] = {name: round(value, 3) for name, value in sums.items()}
    out["sandbox_start_seconds_mean"] = round(sums["sandbox_start_seconds"] / len(episodes), 4)
    for kind in STARTS:
        out[f"{kind}_starts"] = sum(1 for e in episodes if e.get("sandbox_start") == kind)
    out["memo_verdicts"] = sum(1 for e in episodes if e.get("graded_from_memo"))
    out["sandbox_wait_fraction"] = round(waiting / wall, 4) if wall > 0 else 0.0
    out["engine_wait_fraction"] = round(sums["engine_seconds"] / wall, 4) if wall > 0 else 0.0
    return out
