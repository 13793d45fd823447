"""A step with no learning signal moves nothing (issue #39), the positive-only control, and
the critic's value statistics.

AdamW moves the weights even with a zero gradient (weight decay on the first step, momentum
after a real one), so before the fix a GRPO batch whose groups all had equal rewards still
changed the policy: these tests fail on that code.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tests.trainer.test_learner import make_learner, make_trajectory
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.models import ValueModel, load_policy
from trainer.learner import Learner
from trainer.learner.objectives import CriticTarget
from trainer.learner.objectives.critic import value_statistics
from trainer.resolve import resolve_algorithm


def group(policy, rewards: list[float], seeds, group_id: str = "g") -> list:
    trajectories = [make_trajectory(policy, r, s) for s, r in zip(seeds, rewards, strict=True)]
    for trajectory in trajectories:
        trajectory.group_id = group_id
    return trajectories


def snapshot(learner: Learner) -> tuple[list[torch.Tensor], dict]:
    """The policy's weights and its optimizer's whole state, copied."""
    return [p.detach().clone() for p in learner.policy.parameters()], copy.deepcopy(
        learner.policy_optimizer.state_dict()
    )


def assert_same(before, after) -> None:
    weights, state = before
    weights_after, state_after = after
    assert all(torch.equal(a, b) for a, b in zip(weights, weights_after, strict=True))
    assert state.keys() == state_after.keys() and state["state"].keys() == state_after["state"].keys()
    for key, slots in state["state"].items():
        for name, value in slots.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(state_after["state"][key][name])), (key, name)


@pytest.mark.parametrize("algorithm", ["grpo", "dr_grpo", "grpo_mask", "dapo"])
def test_an_all_equal_batch_after_a_real_step_moves_nothing(algorithm):
    """After a real step (AdamW has momentum), a batch of all-equal groups leaves the policy,
    the optimizer state and the version as they were, and is counted."""
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, None, algorithm, lr=1e-3)
    learner.step(group(policy, [1.0, 0.0], range(2)))
    assert learner.version == 1
    before = snapshot(learner)
    result = learner.step(group(policy, [1.0, 1.0], range(2, 4)) + group(policy, [0.0, 0.0], range(4, 6), "h"))
    assert_same(before, snapshot(learner))
    assert learner.version == 1 and result.metrics["version"] == 1
    assert result.metrics["skipped_no_signal"] == 1 == learner.skipped_no_signal
    assert result.metrics["skipped_steps"] == 0  # not a non-finite step
    assert set(result.advantages.values()) == {0.0}


def test_a_first_step_without_signal_creates_no_optimizer_state():
    """Before any real step: AdamW's weight decay alone would shrink every weight."""
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, None, "grpo", lr=1e-3)
    before = snapshot(learner)
    learner.step(group(policy, [0.0, 0.0], range(2)))
    assert_same(before, snapshot(learner))
    assert learner.policy_optimizer.state_dict()["state"] == {}


def test_sao_with_a_fresh_critic_on_failures_alone_moves_nothing():
    """SAO's value head starts at 0: on a batch of failures every advantage and every value
    error is 0, so neither the policy nor the critic has a gradient, and neither steps."""
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, ValueModel.from_policy(policy), "sao", lr=1e-3, critic_lr=1e-3)
    before = snapshot(learner)
    critic = [p.detach().clone() for p in learner.critic.parameters()]
    result = learner.step([make_trajectory(policy, 0.0, s) for s in range(3)])
    assert_same(before, snapshot(learner))
    assert all(torch.equal(a, b) for a, b in zip(critic, learner.critic.parameters(), strict=True))
    assert learner.critic_optimizer.state_dict()["state"] == {}
    assert result.metrics["version"] == 0 and result.metrics["skipped_no_signal"] == 1
    assert result.metrics["value_mean"] == 0.0 and result.metrics["value_std"] == 0.0
    assert "explained_variance" not in result.metrics  # every return is 0: nothing to explain


def test_a_fully_masked_sao_step_skips_the_policy_but_trains_the_critic():
    """Every token outside SAO's ratio band (recorded logprobs far above the policy's): the
    masked loss has a zero gradient, found by the gradient norm, so the policy does not step;
    the critic's value loss still has a signal, and it steps."""
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, ValueModel.from_policy(policy), "sao", lr=1e-3, critic_lr=1e-3)
    trajectories = [make_trajectory(policy, r, s) for s, r in enumerate([1.0, 0.0, 1.0])]
    for trajectory in trajectories:
        trajectory.logprobs = [lp + 10.0 for lp in trajectory.logprobs]
    before = snapshot(learner)
    head = learner.critic.head.weight.detach().clone()
    result = learner.step(trajectories)
    assert result.metrics["masked_low_fraction"] == 1.0 and result.metrics["grad_norm"] == 0.0
    assert_same(before, snapshot(learner))
    assert not torch.equal(head, learner.critic.head.weight)
    assert result.metrics["skipped_no_signal"] == 1 and result.metrics["version"] == 1  # the critic moved


def test_skipped_no_signal_survives_a_checkpoint(tmp_path):
    policy = load_policy("tiny", seed=0)
    learner = make_learner(policy, None, "grpo", lr=1e-3)
    learner.step(group(policy, [0.0, 0.0], range(2)))
    learner.step(group(policy, [1.0, 0.0], range(2, 4)))
    learner.save(tmp_path / "ckpt")
    resumed = make_learner(load_policy("tiny", seed=1), None, "grpo", lr=1e-3)
    resumed.load(tmp_path / "ckpt")
    assert (resumed.skipped_no_signal, resumed.version) == (1, 1)


def grpo_learner(policy, positive: bool) -> Learner:
    """GRPO, or its positive-only control (`algorithm.positive_advantages_only`)."""
    algorithm = resolve_algorithm(AlgorithmConfig(name="grpo", positive_advantages_only=positive))
    return Learner(policy, None, pad_id=0, algorithm=algorithm, optim=LearnerConfig(lr=1e-3))


def test_positive_advantages_only_zeroes_the_negative_ones():
    """The control arm: the same GRPO step, its negative advantages zeroed before the loss."""
    rewards = [1.0, 0.0, 0.0, 0.0]
    runs = {}
    for positive in (False, True):
        policy = load_policy("tiny", seed=0)
        runs[positive] = grpo_learner(policy, positive).step(group(policy, rewards, range(4))).advantages
    plain, positive = runs[False], runs[True]
    # (r - mean) / (std + 1e-6), std unbiased: 0.75 / 0.5 and -0.25 / 0.5.
    assert plain["j0"] == pytest.approx(1.5, abs=1e-5) and plain["j1"] == pytest.approx(-0.5, abs=1e-5)
    assert positive == {"j0": plain["j0"], "j1": 0.0, "j2": 0.0, "j3": 0.0}


def test_positive_advantages_only_trains_on_a_success_and_skips_equal_rewards():
    policy = load_policy("tiny", seed=0)
    learner = grpo_learner(policy, positive=True)
    learner.step(group(policy, [1.0, 0.0], range(2)))
    # A group of one success among failures has a positive advantage: it trains.
    assert learner.step(group(policy, [0.0, 1.0], range(2, 4))).metrics["version"] == 2
    before = snapshot(learner)
    # Equal rewards: every advantage 0, before or after the clamp.
    assert learner.step(group(policy, [1.0, 1.0], range(4, 6))).metrics["skipped_no_signal"] == 1
    assert_same(before, snapshot(learner))


def test_value_statistics_match_numpy():
    values = torch.tensor([[0.1, 0.2, 0.3, 9.0], [0.5, 0.0, 0.0, 0.0]])
    returns = torch.tensor([[1.0, 1.0, 0.0, 5.0], [0.0, 0.0, 0.0, 0.0]])
    masks = [torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])]
    got = value_statistics([CriticTarget(torch.zeros_like(values), returns, values)], masks)
    v = np.array([0.1, 0.2, 0.3, 0.5], dtype=np.float32).astype(np.float64)
    r = np.array([1.0, 1.0, 0.0, 0.0])
    assert got == pytest.approx(
        {
            "value_mean": v.mean(),
            "value_std": v.std(),
            "return_mean": r.mean(),
            "explained_variance": 1 - np.var(r - v) / np.var(r),
        },
        rel=1e-12,
    )
    assert value_statistics([CriticTarget(values, returns, values)], [torch.zeros(2, 4)]) == {}
