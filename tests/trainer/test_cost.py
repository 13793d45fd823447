"""Sandbox cost per trajectory and per step (`trainer.inference.cost`): exact under a fake
clock for linear episodes and PATR trees, the step record's sums and fractions from recorded
values, and the plot's cost panels."""

import json
from types import SimpleNamespace

import pytest

from agent_env import ToolEnv
from agent_env.tools import ToolCall, format_tool_call
from tasks import builtin_tasks
from tests.agent_env.clocked import FORK_S, SLOW_S, START_S, Clock, clocked_factory
from tests.conftest import needs_bwrap
from trainer.inference.cost import cost_summary, episode_cost
from trainer.inference.engines.scripted import ScriptedEngine
from trainer.inference.models import load_tokenizer
from trainer.inference.rollout import ChatFormat, HeuristicScorer, run_episode, run_tree
from trainer.inference.trajectory import Trajectory
from trainer.metrics import plot, step_record

# Grading starts a sandbox (3 s) and runs the tests in a fork of it (0.5 s), as every canary
# twin runs; the twins themselves run only after a verdict that passed, and here the scripted
# agent fixes nothing.
GRADING_S = START_S + FORK_S
# Where that went: the start is grading's setup, the verdict run's fork its test run; the runs
# and the closes take no time on the fake clock.
SPLIT = {"grading_setup_seconds": START_S, "test_run_seconds": FORK_S, "canary_seconds": 0.0,
         "grading_teardown_seconds": 0.0, "close_seconds": 0.0}  # fmt: skip

TASK = builtin_tasks()[0]
ENGINE_S = 5.0
SLOW = format_tool_call(ToolCall("execute_bash", {"command": "echo working #slow"}))
FINISH = format_tool_call(ToolCall("finish"))


@pytest.fixture(scope="module")
def chat():
    return ChatFormat(load_tokenizer("tiny"))


class SlowEngine(ScriptedEngine):
    """Scripted replies, each taking `ENGINE_S` of the fake clock."""

    def __init__(self, clock: Clock, replies: list[str], chat: ChatFormat) -> None:
        super().__init__(replies, chat.encode, chat.end_id)
        self.clock = clock

    def generate(self, prompts, **kwargs):
        self.clock.now += ENGINE_S
        return super().generate(prompts, **kwargs)


# Three episodes' costs as `episode_cost` records them.
RECORDED = [
    {"sandbox_start": "cold", "sandbox_start_seconds": 1.0, "tool_seconds": 2.0, "grading_seconds": 3.0,
     "grading_setup_seconds": 1.0, "test_run_seconds": 1.0, "canary_seconds": 0.75, "grading_teardown_seconds": 0.25,
     "close_seconds": 0.5, "engine_seconds": 10.0, "sandbox_seconds": 20.0, "wall_seconds": 20.0},
    {"sandbox_start": "warm", "sandbox_start_seconds": 0.25, "tool_seconds": 1.0, "grading_seconds": 2.75,
     "grading_setup_seconds": 0.5, "test_run_seconds": 2.0, "canary_seconds": 0.0, "grading_teardown_seconds": 0.25,
     "close_seconds": 0.0, "engine_seconds": 4.0, "sandbox_seconds": 10.0, "wall_seconds": 10.0},
    {"sandbox_start": "fork", "sandbox_start_seconds": 0.5, "tool_seconds": 0.0, "grading_seconds": 1.5,
     "engine_seconds": 6.0, "sandbox_seconds": 9.0, "wall_seconds": 10.0},  # recorded before the split
]  # fmt: skip


def test_the_summary_sums_times_counts_starts_and_weighs_fractions_by_wall_time():
    assert cost_summary(RECORDED) == {
        "sandbox_start_seconds": 1.75,
        "tool_seconds": 3.0,
        "grading_seconds": 7.25,
        "grading_setup_seconds": 1.5,
        "test_run_seconds": 3.0,
        "canary_seconds": 0.75,
        "grading_teardown_seconds": 0.5,
        "close_seconds": 0.5,
        "engine_seconds": 20.0,
        "sandbox_seconds": 39.0,
        "wall_seconds": 40.0,
        "sandbox_start_seconds_mean": 0.5833,
        "cold_starts": 1,
        "warm_starts": 1,
        "fork_starts": 1,
        "memo_verdicts": 0,
        "sandbox_wait_fraction": 0.3125,  # (1.75 + 3 + 7.25 + 0.5) / 40
        "engine_wait_fraction": 0.5,  # 20 / 40
    }
    assert cost_summary([]) == {}
    assert cost_summary([{"grading_seconds": 2.0}])["sandbox_wait_fraction"] == 0.0  # no wall time: no share


@needs_bwrap
def test_a_linear_episode_records_where_its_time_went(chat):
    clock = Clock()
    env = ToolEnv(TASK, sandbox_factory=clocked_factory(clock), clock=clock)
    trajectory = run_episode(env, SlowEngine(clock, [SLOW, FINISH], chat), chat, max_new_tokens=64,
                             max_total_tokens=8000)  # fmt: skip
    # start 3, turn 1 (engine 5, tool 2), turn 2 (engine 5, grading 3.5): 18.5 s in all
    assert trajectory.end == "finish"
    assert episode_cost(trajectory) == {
        "sandbox_start": "cold",
        "graded_from_memo": False,
        "sandbox_start_seconds": START_S,
        "tool_seconds": SLOW_S,
        "grading_seconds": GRADING_S,
        **SPLIT,
        "engine_seconds": 2 * ENGINE_S,
        "sandbox_seconds": 18.5 + GRADING_S,  # the agent's sandbox lived 18.5 s, grading's beside it
        "wall_seconds": 18.5,
    }
    summary = cost_summary([episode_cost(trajectory)])
    assert (summary["sandbox_wait_fraction"], summary["engine_wait_fraction"]) == (0.4595, 0.5405)


@needs_bwrap
def test_a_trees_branches_each_count_their_own_part_and_add_up_to_the_tree(chat):
    clock = Clock()
    env = ToolEnv(TASK, sandbox_factory=clocked_factory(clock), clock=clock)
    (root, child), stats = run_tree(
        env, SlowEngine(clock, [SLOW, FINISH, FINISH], chat), chat, HeuristicScorer(), tree_id="t",
        max_new_tokens=64, max_episode_tokens=8000, expand_every=1, children=2, max_branches=2,
    )  # fmt: skip
    assert stats.branches == 2 and child.parent == root.branch_id
    # root: start 3, turn 1 (5 + 2); the fork (0.5) is the child's; turn 2 (5 + grading 3.5)
    assert episode_cost(root) == {
        "sandbox_start": "cold", "graded_from_memo": False, "sandbox_start_seconds": START_S, "tool_seconds": SLOW_S,
        "grading_seconds": GRADING_S, **SPLIT, "engine_seconds": 2 * ENGINE_S,
        "sandbox_seconds": 19.0 + GRADING_S,  # alive from 0 to 19 (the fork ran in its life)
        "wall_seconds": 18.5,
    }  # fmt: skip
    # child: forked at 10 (0.5), its turn 2 from 19 (5 + grading 3.5), closed at 27.5
    assert episode_cost(child) == {
        "sandbox_start": "fork", "graded_from_memo": False, "sandbox_start_seconds": FORK_S, "tool_seconds": 0.0,
        "grading_seconds": GRADING_S, **SPLIT, "engine_seconds": ENGINE_S,
        "sandbox_seconds": 17.5 + GRADING_S, "wall_seconds": 9.0,
    }  # fmt: skip
    assert root.wall_seconds + child.wall_seconds == clock.now == 27.5  # the tree's time, counted once


def _batch(trajectories):
    return SimpleNamespace(trajectories=trajectories, staleness=[0] * len(trajectories), allocation={})


def _orchestrator():
    counters = SimpleNamespace(worker_restarts=0, hung_episodes=0)
    return SimpleNamespace(counters=counters, running={}, learner_idle_fraction=lambda: 0.0, node_count=lambda: 1)


def test_the_step_record_carries_the_steps_cost():
    trajectories = []
    for cost in RECORDED:
        trajectory = Trajectory(task_id="t")
        for name, value in cost.items():
            setattr(trajectory, name, value)
        trajectories.append(trajectory)
    counters = {"stale_dropped": 0, "admission_waits": 0, "infra_retries": 0, "infra_dropped": 0}
    record = step_record(step=1, learner={}, batch=_batch(trajectories), seconds=1.0, infra_errors=0,
                         schedule_counters=counters, orchestrator=_orchestrator())  # fmt: skip
    assert {key: record[key] for key in cost_summary(RECORDED)} == cost_summary(RECORDED)
    empty = step_record(step=2, learner={}, batch=_batch([]), seconds=1.0, infra_errors=0,
                        schedule_counters=counters, orchestrator=_orchestrator())  # fmt: skip
    assert "sandbox_seconds" not in empty


def test_the_plot_has_the_four_cost_panels(tmp_path):
    import matplotlib.image

    metrics = tmp_path / "metrics.jsonl"
    records = [{"step": s, "success_rate": 0.5} for s in (1, 2)]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    plain = matplotlib.image.imread(plot(metrics, tmp_path / "plain.png"))
    costed = [{**r, **cost_summary(RECORDED[: r["step"]])} for r in records]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in costed))
    with_cost = matplotlib.image.imread(plot(metrics, tmp_path / "cost.png"))
    # sandbox-seconds; the sandbox and engine wait fractions; cold and warm starts; verdicts
    # from the grading memo (2 inches each at 100 dpi)
    assert with_cost.shape[0] - plain.shape[0] == 4 * 200
