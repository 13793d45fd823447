"""BiDiRL's hot switch, training side: a learner group resized between steps (1 -> 2 -> 1
ranks, real Ray actors, FSDP2 over gloo), in place over a pool of processes and by
restarting them, takes the same steps as a learner that never moved; and a measured round
trip of a unit between a rollout worker and the learner."""

from __future__ import annotations

import pytest
import torch

from tests.trainer.fsdp_worker import fixed_batch
from trainer.build import build_learner
from trainer.learner import Learner
from trainer.orchestrator.learner_group import LearnerGroup, timed_step
from trainer.resolve import load_config

OVERRIDES = ["learner.lr=1e-3", "learner.critic_lr=1e-3", "learner.token_budget=40"]
PER_RANK = {"micro_batches", "model_tokens"}
"""Metrics of how the ranks packed their shares (rank 0's micro-batches; padded tokens over
all ranks): they depend on the number of ranks, not on the learner's state."""


def _assert_close(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], what: str) -> None:
    assert got.keys() == want.keys(), what
    for name, tensor in want.items():
        assert torch.allclose(got[name], tensor, atol=1e-5, rtol=0), f"{what}: {name}"


@pytest.mark.parametrize("pool", [3, 0], ids=["in-place", "restarted"])
def test_a_learner_resized_between_steps_matches_one_that_never_moved(ray_cluster, pool, tmp_path):
    import ray

    from trainer.learner import checkpoint

    config = load_config(None, OVERRIDES)
    batch = fixed_batch()
    reference, _ = build_learner(config)  # one plain rank throughout, in this process
    expected = [reference.step(batch).metrics for _ in range(3)]

    group = LearnerGroup(config, ranks=1, pool=pool)
    processes = {handle._actor_id for handle in group.pool}
    try:
        got = [group.call(timed_step, batch).metrics]
        assert group.resize(1) == 0.0  # already one rank: nothing moves
        grow = group.resize(2)
        assert len(group.ranks) == 2 and group.call(Learner.version) == 1
        got.append(group.call(timed_step, batch).metrics)
        group.save(str(tmp_path / "two-ranks"), {})  # the checkpoint's collectives stay in the learner's ranks
        shrink = group.resize(1)
        assert len(group.ranks) == 1 and group.call(Learner.version) == 2
        got.append(group.call(timed_step, batch).metrics)
        assert grow > 0 and shrink > 0
        weights = group.call(Learner.weights, True)
        if pool:  # in place: the same processes throughout, the one outside the learner idle
            assert {handle._actor_id for handle in group.pool} == processes and len(processes) == pool
            assert ray.get([handle.activate.remote(1, 1) for handle in group.pool[1:]]) == [False, False]
            with pytest.raises(ValueError, match="pool has 3 processes: it cannot grow to 4"):
                group.resize(4)
    finally:
        group.kill()

    for step, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        assert mine["version"] == theirs["version"] == step + 1  # the version carried over
        assert mine.keys() - {"learner_seconds"} == theirs.keys()
        for key, value in theirs.items():
            if key not in PER_RANK:
                assert mine[key] == pytest.approx(value, abs=1e-5, rel=0), f"step {step + 1}: {key}"
    assert got[1]["micro_batches"] < expected[1]["micro_batches"]  # step 2 really ran on two ranks
    _assert_close(weights["policy"], reference.full_policy_state(), "policy")
    _assert_close(weights["critic"], reference.full_state(reference.critic), "critic")
    saved, _ = build_learner(config)
    assert checkpoint.load(saved, tmp_path / "two-ranks")["version"] == 2
    second, _ = build_learner(config)
    for _ in range(2):
        second.step(batch)
    _assert_close(saved.full_policy_state(), second.full_policy_state(), "the checkpoint after step 2")
