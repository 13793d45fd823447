"""SE-RL's per-family loss rebalancing in the learner (`algorithm.family_weights: se_rl`).

Each trajectory's token advantages are scaled by its family's weight, from the needs earlier
steps measured (`trainer.algorithms.curriculum.FamilyLossWeights`); the weights in use are in
the step's metrics, the needs are updated from the step's unweighted advantages, and they
survive a checkpoint.
"""

from __future__ import annotations

import pytest
import torch

from tests.trainer.test_learner import make_trajectory
from trainer.config import AlgorithmConfig, ConfigError, LearnerConfig
from trainer.inference.models import ValueModel, load_policy
from trainer.learner import Learner
from trainer.learner.advantages import weigh_families
from trainer.resolve import load_config, resolve_algorithm


def se_rl_learner(seed: int = 0, **rule) -> Learner:
    policy = load_policy("tiny", seed=seed)
    algorithm = resolve_algorithm(AlgorithmConfig(name="sao", family_weights="se_rl", se_rl=rule))
    return Learner(
        policy,
        ValueModel.from_policy(policy),
        pad_id=0,
        algorithm=algorithm,
        optim=LearnerConfig(lr=1e-3, critic_lr=1e-3),
    )


def batch(learner: Learner) -> list:
    """Two trajectories of family `text` (both rewarded) and two of `numeric` (one rewarded)."""
    out = []
    for seed, (family, reward) in enumerate([("text", 1.0), ("text", 1.0), ("numeric", 1.0), ("numeric", 0.0)]):
        trajectory = make_trajectory(learner.policy, reward, seed)
        trajectory.family = family
        out.append(trajectory)
    return out


def test_weights_start_at_one_then_follow_each_familys_measured_need():
    learner = se_rl_learner(floor=0.1, smoothing=0.9)
    first = learner.step(batch(learner))
    assert first.metrics["family_weight/text"] == 1.0 and first.metrics["family_weight/numeric"] == 1.0
    # The needs are the first measurement itself: each family's mean |advantage|.
    need = {
        "text": (abs(first.advantages["j0"]) + abs(first.advantages["j1"])) / 2,
        "numeric": (abs(first.advantages["j2"]) + abs(first.advantages["j3"])) / 2,
    }
    mean = (need["text"] + need["numeric"]) / 2
    expected = {family: 0.1 + 0.9 * value / mean for family, value in need.items()}
    assert learner.family_weights.weights() == pytest.approx(expected, abs=1e-12)
    second = learner.step(batch(learner))
    assert second.metrics["family_weight/text"] == pytest.approx(expected["text"], abs=1e-12)
    assert second.metrics["family_weight/numeric"] == pytest.approx(expected["numeric"], abs=1e-12)
    assert expected["text"] != pytest.approx(expected["numeric"])
    # Weights average 1 over the families, so the loss scale is unchanged on average.
    assert sum(expected.values()) / 2 == pytest.approx(1.0)


def test_each_trajectorys_advantages_are_scaled_by_its_familys_weight():
    learner = se_rl_learner()
    learner.family_weights.add_families(["text", "numeric"])
    learner.family_weights.update("text", advantages=[0.6])
    learner.family_weights.update("numeric", advantages=[0.2])
    weights = learner.family_weights.weights()  # text 0.1 + 0.9 * 1.5 = 1.45, numeric 0.1 + 0.9 * 0.5 = 0.55
    assert weights == pytest.approx({"text": 1.45, "numeric": 0.55})
    trajectories = batch(learner)
    selection = learner.objective.select(trajectories)
    prepared = learner.prepare(selection.trajectories)
    targets = learner.objective.targets(learner.models, selection, prepared)
    before = [target.advantages.clone() for target in targets.micro]
    metrics = weigh_families(learner.family_weights, selection.trajectories, prepared, targets)
    assert metrics == pytest.approx({"family_weight/numeric": 0.55, "family_weight/text": 1.45})
    for micro, target, old in zip(prepared.micro_batches, targets.micro, before, strict=True):
        for row, trajectory in enumerate(micro.trajectories):
            assert torch.equal(target.advantages[row], old[row] * weights[trajectory.family])


def test_the_needs_survive_a_checkpoint(tmp_path):
    learner = se_rl_learner()
    learner.step(batch(learner))
    path = learner.save(tmp_path / "ckpt")
    other = se_rl_learner(seed=5)
    other.load(path)
    assert other.family_weights.weights() == learner.family_weights.weights()
    assert other.family_weights.need == learner.family_weights.need


def test_the_override_and_a_wrong_value():
    config = load_config(
        "configs/train_swe_quick.yaml", ["algorithm.family_weights=se_rl", "algorithm.se_rl.floor=0.2"]
    )
    assert config.algorithm.family_weights == "se_rl" and config.algorithm.se_rl.floor == 0.2
    with pytest.raises(ConfigError, match="family_weights"):
        load_config("configs/train_swe_quick.yaml", ["algorithm.family_weights=serl"])
