"""`grpo_mask`: GRPO's group advantages, no critic, SAO's double-sided mask as the policy loss."""

import math

import pytest
import torch

from tests.trainer.test_learner import make_learner, make_trajectory
from trainer.algorithms.losses import sao_loss
from trainer.algorithms.registry import ALGORITHMS, AlgorithmSpec, get_algorithm
from trainer.config import AlgorithmConfig, ConfigError
from trainer.inference.models import load_policy
from trainer.learner import token_logprobs
from trainer.learner.batching import loss_weight
from trainer.learner.objectives import GroupObjective
from trainer.resolve import load_config


def test_grpo_mask_is_grpos_advantages_with_saos_loss_and_no_critic():
    assert get_algorithm("grpo_mask") == AlgorithmSpec("sao", "grpo", None, "group")
    assert get_algorithm("grpo_mask").policy_loss == get_algorithm("sao").policy_loss
    assert get_algorithm("grpo_mask").advantages == get_algorithm("grpo").advantages
    assert "grpo_mask" in ALGORITHMS and AlgorithmConfig(name="grpo_mask").name == "grpo_mask"
    config = load_config(None, ["algorithm.name=grpo_mask", "algorithm.group_size=2"])
    assert config.algorithm.name == "grpo_mask"
    with pytest.raises(ConfigError, match="grpo_mask compares rollouts of a task, needs >= 2"):
        load_config(None, ["algorithm.name=grpo_mask"])


def perturbed_group():
    """One group of four rollouts (rewards 1, 0, 0, 1) whose recorded logprobs put three
    policy tokens outside SAO's coding band (0.2, 4): j0's first two action tokens at
    r = e^-5 (below), j1's first at r = e^2 (above)."""
    policy = load_policy("tiny", seed=3)
    trajectories = [make_trajectory(policy, r, s) for s, r in enumerate([1.0, 0.0, 0.0, 1.0])]
    for traj in trajectories:
        traj.group_id = "g"
    own = [i for i, m in enumerate(trajectories[0].policy_mask) if m]
    trajectories[0].logprobs[own[0]] += 5.0
    trajectories[0].logprobs[own[1]] += 5.0
    own = [i for i, m in enumerate(trajectories[1].policy_mask) if m]
    trajectories[1].logprobs[own[0]] -= 2.0
    return trajectories


def test_grpo_mask_loss_is_saos_loss_on_group_advantages_and_drops_tokens_outside_the_band():
    learner = make_learner(load_policy("tiny", seed=3), None, "grpo_mask", lr=1e-3)
    assert learner.critic is None and isinstance(learner.objective, GroupObjective)
    assert learner.objective.hyper == {"aggregation": "token_mean", "eps_low": 0.8, "eps_high": 3.0}
    trajectories = perturbed_group()
    selection = learner.objective.select(trajectories)
    # Rewards 1, 0, 0, 1: mean 0.5, unbiased std sqrt(1/3), so +-0.5 * sqrt(3) (eps 1e-6).
    advantage = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    assert selection.sequence_advantages == pytest.approx([advantage, -advantage, -advantage, advantage], abs=1e-12)
    batch = learner.prepare(selection.trajectories)
    [micro] = batch.micro_batches
    [target] = learner.objective.targets(learner.models, selection, batch).micro
    tensors = micro.tensors
    mask = tensors["policy_mask"]
    assert int(mask.sum()) == 36 and loss_weight(tensors, batch.totals, "token_mean") == 1.0
    part = learner.objective.micro_loss(learner.models, micro, target, batch)

    logp = token_logprobs(learner.policy, tensors["input_ids"], tensors["attention_mask"], learner.temperature)
    rollout = tensors["rollout_logp"]
    # The same number as SAO's registry loss on the group advantages ...
    expected, stats = sao_loss(logp, rollout, target.advantages, mask, eps_low=0.8, eps_high=3.0)
    assert torch.equal(part.loss.detach(), expected.detach()) and part.stats == stats
    # ... which is the plain ratio-weighted policy gradient over every policy token but the
    # three outside the band, divided by all 36 (a dropped token still counts in the mean).
    ratio = torch.exp(logp.detach() - rollout)
    outside = mask & ((ratio <= 0.2) | (ratio >= 4.0))
    rows = [micro.indices[row] for row in outside.nonzero()[:, 0].tolist()]
    assert sorted(rows) == [0, 0, 1]
    keep = (mask & ~outside).float()
    by_hand = -(ratio * target.advantages * logp.detach() * keep).sum() / 36
    assert float(part.loss.detach()) == pytest.approx(float(by_hand), rel=1e-6)
    assert stats["masked_low_fraction"] == pytest.approx(2 / 36)
    assert stats["masked_high_fraction"] == pytest.approx(1 / 36)

    # The step reports the mask's fractions like SAO's does, and there is no critic loss.
    metrics = learner.step(trajectories).metrics
    assert metrics["masked_low_fraction"] == pytest.approx(2 / 36, abs=1e-7)
    assert metrics["masked_high_fraction"] == pytest.approx(1 / 36, abs=1e-7)
    assert metrics["value_loss"] == 0.0 and metrics["policy_tokens"] == 36 and metrics["version"] == 1


def test_grpo_mask_differs_from_grpo_only_in_the_loss():
    """Same advantages as GRPO; GRPO's clip keeps the out-of-band tokens' (clipped) gradient
    where the mask drops them, so the losses differ on the same batch."""
    trajectories = perturbed_group()
    masked = make_learner(load_policy("tiny", seed=3), None, "grpo_mask")
    grpo = make_learner(load_policy("tiny", seed=3), None, "grpo")
    a, b = masked.objective.select(trajectories), grpo.objective.select(trajectories)
    assert a.sequence_advantages == b.sequence_advantages
    losses = []
    for learner, selection in ((masked, a), (grpo, b)):
        batch = learner.prepare(selection.trajectories)
        [micro] = batch.micro_batches
        [target] = learner.objective.targets(learner.models, selection, batch).micro
        losses.append(float(learner.objective.micro_loss(learner.models, micro, target, batch).loss.detach()))
    assert losses[0] != losses[1]
