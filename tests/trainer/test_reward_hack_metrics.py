"""`reward_hack_blocked`: per step, how many episodes tripped each grading rule."""

from trainer.inference.trajectory import Trajectory
from trainer.metrics import reward_hacks_blocked


def _trajectory(blocked):
    t = Trajectory(task_id="t")
    t.reward_hack_blocked = list(blocked or ())
    return t


def test_counts_episodes_per_rule_once_each():
    batch = [
        _trajectory(["protected_files", "runner_tampered"]),
        _trajectory(["protected_files", "protected_files"]),  # an episode counts once per rule
        _trajectory([]),
        _trajectory(["agent_broke_sandbox"]),
    ]
    assert reward_hacks_blocked(batch) == {"agent_broke_sandbox": 1, "protected_files": 2, "runner_tampered": 1}
    assert reward_hacks_blocked([_trajectory([])]) == {}
