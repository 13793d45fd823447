"""Group baselines with no critic: GRPO (arXiv 2402.03300), Dr.GRPO (arXiv 2503.20783) and
DAPO (arXiv 2503.14476).

Each rollout's advantage is its reward normalised over the rollouts of its `group_id` (the
task id when empty), computed over the whole batch before it is split across ranks, and
broadcast to the rollout's policy tokens. DAPO also drops groups whose rewards are all
equal (`dynamic_sampling_mask`): they carry no signal. There is no critic to update.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trainer.algorithms.group import dynamic_sampling_mask
from trainer.algorithms.losses import get_advantage_estimator
from trainer.algorithms.registry import AlgorithmSpec
from trainer.inference.trajectory import Trajectory
from trainer.learner.batching import MicroBatch, PreparedBatch
from trainer.learner.objectives.base import Models, NoCritic, Selection, StepTargets
from trainer.learner.objectives.policy_gradient import PolicyGradientObjective


@dataclass(frozen=True)
class GroupTarget:
    advantages: torch.Tensor
    """The sequence's advantage on each of its policy tokens, [B, T-1], 0 elsewhere."""


def group_selection(trajectories: list[Trajectory], estimator: str, dynamic_sampling: bool) -> Selection:
    """Per-sequence advantages over each group's rollouts in the whole batch, after DAPO's
    zero-variance filter when `dynamic_sampling` (the dropped count is a metric)."""
    rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float64)
    groups = [t.group_id or t.task_id for t in trajectories]
    metrics = {}
    if dynamic_sampling:
        keep = dynamic_sampling_mask(rewards, groups).tolist()
        metrics["zero_variance_dropped"] = keep.count(False)
        trajectories = [t for t, k in zip(trajectories, keep, strict=True) if k]
        rewards = rewards[torch.tensor(keep, dtype=torch.bool)]
        groups = [g for g, k in zip(groups, keep, strict=True) if k]
    if not trajectories:  # every group had equal rewards: nothing to learn from
        return Selection([], [], metrics)
    advantages = get_advantage_estimator(estimator)(rewards, groups).tolist()
    return Selection(trajectories, advantages, metrics)


def sequence_to_tokens(per_sequence: list[float], policy_mask: torch.Tensor) -> torch.Tensor:
    """[B, T-1] token advantages: each row's value on its policy tokens, 0 elsewhere."""
    if not per_sequence:  # a padding micro-batch
        return torch.zeros(policy_mask.shape, device=policy_mask.device)
    return torch.tensor(per_sequence, device=policy_mask.device)[:, None] * policy_mask.float()


class GroupObjective(NoCritic, PolicyGradientObjective):
    """Group-normalised advantages, the spec's policy loss, no critic."""

    def __init__(self, spec: AlgorithmSpec, aggregation: str, hyper: dict) -> None:
        super().__init__(spec.policy_loss, aggregation, hyper)
        self.estimator = spec.advantages
        self.dynamic_sampling = spec.dynamic_sampling

    def select(self, trajectories: list[Trajectory]) -> Selection:
        return group_selection(trajectories, self.estimator, self.dynamic_sampling)

    def targets(self, models: Models, selection: Selection, batch: PreparedBatch) -> StepTargets:
        return StepTargets([self.micro_target(selection, micro) for micro in batch.micro_batches])

    @staticmethod
    def micro_target(selection: Selection, micro: MicroBatch) -> GroupTarget:
        per_sequence = [selection.sequence_advantages[i] for i in micro.indices]
        return GroupTarget(sequence_to_tokens(per_sequence, micro.tensors["policy_mask"]))
