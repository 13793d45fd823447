"""`check_env`: the conformance check every env must pass (like Gymnasium's `check_env`).

It drives a fresh env through the contract the rollout layer relies on: reset's return
types, step's five-tuple, format errors as observations rather than crashes, `finish`
terminating, the turn limit truncating, step-after-end refused, forks independent, and
close idempotent. A failure raises `EnvCheckError` naming the broken rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_env.tools import ToolCall, format_tool_call

FINISH = format_tool_call(ToolCall("finish", {"message": "checking"}))
HARMLESS = format_tool_call(ToolCall("execute_bash", {"command": "echo conformance"}))


class EnvCheckError(AssertionError):
    pass


def _require(condition: bool, rule: str) -> None:
    if not condition:
        raise EnvCheckError(rule)


def _check_step(result: Any) -> tuple[str, float, bool, bool, dict]:
    _require(isinstance(result, tuple) and len(result) == 5, "step() returns a 5-tuple")
    observation, reward, terminated, truncated, info = result
    _require(isinstance(observation, str), "observations are text")
    _require(isinstance(reward, float), "rewards are floats")
    _require(isinstance(terminated, bool) and isinstance(truncated, bool), "terminated/truncated are bools")
    _require(not (terminated and truncated), "an episode is not both terminated and truncated")
    _require(isinstance(info, dict), "info is a dict")
    return result


def check_env(make_env: Callable[[], Any], *, max_turn_check: int = 40) -> None:
    """Run the conformance rules on envs from `make_env` (each call gives a fresh env)."""
    env = make_env()
    try:
        result = env.reset(seed=0)
        _require(isinstance(result, tuple) and len(result) == 2, "reset() returns (observation, info)")
        observation, info = result
        _require(isinstance(observation, str) and observation, "reset() gives a non-empty text observation")
        for key in ("task_id", "system_prompt", "tools"):
            _require(key in info, f"reset() info has {key!r}")
        _require(all(t.get("type") == "function" for t in info["tools"]), "tools are OpenAI-style function schemas")

        observation, reward, terminated, truncated, step_info = _check_step(env.step("no tool call at all"))
        _require(not terminated and reward == 0.0, "a malformed action neither ends the episode nor scores")
        _require("format_error" in step_info, "a malformed action is reported in info['format_error']")

        child = env.fork()
        try:
            child_turns = len(child.transcript)
            _check_step(env.step(HARMLESS))
            _require(len(child.transcript) == child_turns, "a fork does not see its parent's later turns")
        finally:
            child.close()

        *_, terminated, truncated, end_info = _check_step(env.step(FINISH))
        _require(terminated and not truncated, "finish terminates the episode")
        _require(end_info.get("end") == "finish", "info['end'] says why the episode ended")
        try:
            env.step(HARMLESS)
        except RuntimeError:
            pass
        else:
            raise EnvCheckError("step() after the end of an episode is refused")
    finally:
        env.close()
    env.close()  # idempotent

    limited = make_env()
    try:
        limited.reset(seed=1)
        for _ in range(max_turn_check):
            try:
                result = limited.step(HARMLESS)
            except RuntimeError as exc:
                raise EnvCheckError(f"the turn limit truncates the episode (it ended silently: {exc})") from exc
            *_, terminated, truncated, step_info = _check_step(result)
            _require(not terminated, "a harmless action does not terminate")
            if truncated:
                _require(step_info.get("end") in ("max_turns", "time_limit"), "truncation names its limit")
                break
        else:
            raise EnvCheckError(f"the turn limit truncates the episode (none within {max_turn_check} turns)")
    finally:
        limited.close()
