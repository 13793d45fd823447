"""`rollout.format_error_reward`: an episode that lands the fix and then slips into garbage
instead of calling `finish` is still resolved (the grade, the evaluations), but RL trains on
at most the set reward; a clean finish keeps its grade. Real worker, sandboxes and grading;
the engine replays fixed replies."""

from __future__ import annotations

import pytest

from agent_env import gold_actions
from tasks import builtin_tasks
from tests.conftest import needs_bwrap
from trainer.config import ConfigError, RolloutConfig
from trainer.inference.engines.scripted import ScriptedEngine
from trainer.inference.models import load_policy
from trainer.inference.rollout import training_reward
from trainer.inference.trajectory import Trajectory
from trainer.orchestrator.schedule import EpisodeJob
from trainer.orchestrator.worker import RolloutWorker
from trainer.resolve import load_config

TASK = builtin_tasks(["text-dedent-whitespace-lines"])[0]
GARBAGE = '<tool_call>\n{"name": "finish", "argu'
EDIT, GOLD_FINISH = gold_actions(TASK, style="edit")  # one str_replace, then finish


def test_the_cap_lowers_only_episodes_ended_by_format_errors():
    def reward(end, grade, cap):
        return training_reward(Trajectory(task_id="t", reward=grade, end=end), cap)

    assert reward("format_errors", 1.0, 0.0) == 0.0  # resolved, ended on garbage: capped
    assert reward("format_errors", 0.0, 0.0) == 0.0
    assert reward("format_errors", 0.0, -0.5) == -0.5  # a penalty below the grade
    assert reward("format_errors", 0.0, 0.5) == 0.0  # a cap never raises a failure
    assert reward("finish", 1.0, 0.0) == 1.0
    assert reward("max_turns", 1.0, 0.0) == 1.0
    assert reward("token_limit", 0.0, -0.5) == 0.0


def _play(replies: list[str], cap: float | None) -> Trajectory:
    settings = RolloutConfig(max_turns=4, max_new_tokens=200, max_format_errors=1, format_error_reward=cap,
                             batch_turns=False)  # fmt: skip
    worker = RolloutWorker(index=0, model="tiny", engine="hf", seed=0, tasks=[TASK], sandbox_backend="local",
                           settings=settings)  # fmt: skip
    worker.set_weights(1, {"policy": load_policy("tiny", seed=1).state_dict()})
    worker.engine = ScriptedEngine(replies, worker.chat.encode, worker.chat.end_id, version=1)
    job = EpisodeJob(job_id=0, group=0, task_id=TASK.id, family=TASK.family, seed=0, batch=0)
    result = worker.run(job)
    worker.close()
    assert not result.error
    (trajectory,) = result.trajectories
    return trajectory


@needs_bwrap
@pytest.mark.parametrize("cap, expected", [(None, 1.0), (0.0, 0.0), (-0.25, -0.25)])
def test_a_fix_that_ends_in_garbage_is_resolved_but_earns_the_cap(cap, expected):
    trajectory = _play([EDIT, GARBAGE], cap)
    assert trajectory.resolved and trajectory.end == "format_errors" and trajectory.format_errors == 1
    assert trajectory.reward == expected


@needs_bwrap
def test_a_fix_that_finishes_cleanly_keeps_its_grade():
    trajectory = _play([EDIT, GOLD_FINISH], 0.0)
    assert trajectory.resolved and trajectory.end == "finish" and trajectory.reward == 1.0


def test_the_field_is_documented_and_typed():
    assert load_config(None, []).rollout.format_error_reward is None  # the grade, by default
    assert load_config(None, ["rollout.format_error_reward=0"]).rollout.format_error_reward == 0.0
    with pytest.raises(ConfigError) as error:
        load_config(None, ["rollout.format_error_reward=lots"])
    assert "rollout.format_error_reward" in str(error.value)
