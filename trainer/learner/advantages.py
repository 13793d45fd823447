"""What a learner step does with its advantages beyond the loss.

- Each trajectory's mean advantage over its policy tokens is reported by the step, for the
  whole batch (gathered from every rank): curricula read learnability from it (PAC).
- The positive-only control (`algorithm.positive_advantages_only`, issue #39): negative
  advantages zeroed, so the policy only learns from what went better than its baseline.
- SE-RL's per-family loss weights (`algorithm.family_weights: se_rl`) scale each
  trajectory's token advantages by its family's weight before the loss, and learn each
  family's need from the step's unweighted advantages after it
  (`trainer.algorithms.curriculum.FamilyLossWeights`).
"""

from __future__ import annotations

import torch

from trainer import distributed
from trainer.algorithms.curriculum import FamilyLossWeights
from trainer.inference.trajectory import Trajectory
from trainer.learner.batching import PreparedBatch, token_means
from trainer.learner.objectives import StepTargets


def local_advantages(batch: PreparedBatch, targets: StepTargets) -> dict[str, float]:
    """This rank's trajectories' mean advantage over their policy tokens, by id."""
    local = {}
    for micro, target in zip(batch.micro_batches, targets.micro, strict=True):
        means = token_means(target.advantages, micro.tensors["policy_mask"])
        for trajectory, mean in zip(micro.trajectories, means, strict=False):
            local[trajectory.trajectory_id] = mean
    return local


def keep_positive(targets: StepTargets) -> None:
    """Zero every negative token advantage in `targets`, in place (the positive-only control:
    the same method, learning only from what beat its baseline)."""
    for target in targets.micro:
        target.advantages.clamp_(min=0.0)


def gather_advantages(trajectories: list[Trajectory], local: dict[str, float]) -> dict[str, float]:
    """Every trajectory's advantage by id, from each rank's `local` share (0.0 where none has one)."""
    merged = dict(local)
    if distributed.world_size() > 1:
        shares: list[dict[str, float] | None] = [None] * distributed.world_size()
        torch.distributed.all_gather_object(shares, local, group=distributed.group())
        for share in shares:
            merged.update(share or {})
    return {t.trajectory_id: merged.get(t.trajectory_id, 0.0) for t in trajectories}


def weigh_families(
    family_weights: FamilyLossWeights, trajectories: list[Trajectory], batch: PreparedBatch, targets: StepTargets
) -> dict[str, float]:
    """Scale each trajectory's token advantages in `targets` by its family's weight, from
    what earlier steps measured (so every rank uses the same weights); the weights in use,
    as metrics. Scaling a sequence's advantages is weighting its policy loss."""
    family_weights.add_families(t.family for t in trajectories)  # the whole batch: ranks agree
    weights = family_weights.weights()
    for micro, target in zip(batch.micro_batches, targets.micro, strict=True):
        for row, trajectory in enumerate(micro.trajectories):
            target.advantages[row] *= weights[trajectory.family]
    return {f"family_weight/{family}": weight for family, weight in sorted(weights.items())}


def measure_families(
    family_weights: FamilyLossWeights, trajectories: list[Trajectory], advantages: dict[str, float]
) -> None:
    """Update each family's need from a step's whole batch (gathered from every rank, so all
    ranks keep the same state): its unweighted mean advantages, or its rewards."""
    family_weights.add_families(t.family for t in trajectories)
    for family in sorted({t.family for t in trajectories}):
        mine = [t for t in trajectories if t.family == family]
        family_weights.update(
            family, advantages=[advantages[t.trajectory_id] for t in mine], rewards=[t.reward for t in mine]
        )
