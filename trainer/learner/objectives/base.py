"""The one interface every learner objective implements, and the values passed through it.

A learner step (`trainer.learner.learner.Learner.step`) is one loop over an `Objective`:

1. `select(trajectories)`: the trajectories to train on (DAPO drops zero-variance groups),
   with anything computed over the whole batch before it is split across ranks (group
   advantages);
2. `targets(models, selection, batch)`: per micro-batch, everything computed before the
   update without a gradient (values, GAE advantages and returns, turn layouts), including
   each token's advantage;
3. `micro_loss(models, micro, target, batch)`: one micro-batch's weighted policy loss; the
   learner back-propagates each (gradients accumulate over micro-batches) and applies the
   update, with the non-finite guard;
4. `critic_steps` times (SAO's K critic updates, toward the targets of step 2):
   `critic_loss(models, micro, target, batch)` per micro-batch, and the learner's update of
   the critic.

Objectives compute, the learner updates: an objective reads `Models` (the models and how
the policy samples, not the learner) and returns losses; it never holds an optimizer, so
zeroing, back-propagation, clipping, the guard and the step are written once, in the
learner. Advantages are computed per step and passed explicitly: nothing survives a step
in an objective, which holds only its configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn

from trainer.inference.trajectory import Trajectory
from trainer.learner.batching import MicroBatch, PreparedBatch


@dataclass(frozen=True)
class Models:
    """What an objective reads of the learner: the models it scores with and how the policy
    samples. Fixed when the learner is built (the modules are updated in place)."""

    policy: nn.Module
    critic: nn.Module | None = None
    """The separate critic (a `ValueModel`), or None (group baselines, SAPO)."""
    temperature: float = 1.0
    """The sampling temperature the rollout logprobs were recorded at."""
    banned: tuple[int, ...] = ()
    """Token ids the policy never samples (SAPO's value rows): left out of its log-softmax."""
    value_token_ids: tuple[int, int] | None = None
    """SAPO's (w+, w-) readout rows of the policy, or None."""


@dataclass(frozen=True)
class Selection:
    """The trajectories a step trains on, and what was computed over all of them."""

    trajectories: list[Trajectory]
    sequence_advantages: list[float] | None = None
    """Group baselines: one advantage per selected trajectory (same order)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Reported even when nothing is left to train on (e.g. `zero_variance_dropped`)."""


class MicroTarget(Protocol):
    """What an objective computed for one micro-batch before the update."""

    advantages: torch.Tensor
    """Each token's advantage, [B, T-1] in the learner's target frame, 0 off policy tokens."""


@dataclass
class StepTargets:
    """An objective's targets for every micro-batch of a step (same order)."""

    micro: list[MicroTarget]
    metrics: dict[str, float] = field(default_factory=dict)
    """Step metrics known before the update (e.g. SAPO's number of turns)."""


@dataclass(frozen=True)
class MicroLoss:
    """One micro-batch's contribution to an update."""

    loss: torch.Tensor
    """Weighted so the sum over micro-batches and ranks is the global batch's loss."""
    finite: bool
    """Whether the loss (before weighting) is finite; the learner skips the update if not."""
    sums: dict[str, float] = field(default_factory=dict)
    """Metric contributions, already weighted; the learner sums them over micro-batches and ranks."""
    stats: dict[str, float] = field(default_factory=dict)
    """Per-token means (clip fractions, ratios); the learner averages them over policy tokens."""


class Objective(Protocol):
    """What the learner optimises (see the module docstring for the order of the calls)."""

    aggregation: str
    """How token losses are averaged (`token_mean`, `sequence_mean`, `sequence_sum_norm`);
    micro-batch weights follow it (`trainer.learner.batching.loss_weight`)."""
    critic_steps: int
    """Critic updates after each policy update (0: no critic model to update)."""

    def select(self, trajectories: list[Trajectory]) -> Selection: ...

    def targets(self, models: Models, selection: Selection, batch: PreparedBatch) -> StepTargets: ...

    def micro_loss(self, models: Models, micro: MicroBatch, target: MicroTarget, batch: PreparedBatch) -> MicroLoss: ...

    def critic_loss(self, models: Models, micro: MicroBatch, target: MicroTarget, batch: PreparedBatch) -> MicroLoss:
        """One micro-batch's weighted critic loss, its `sums` holding `value_loss`; called
        only by objectives with a critic (`critic_steps`, the critic's pre-training)."""
        ...


class NoCritic:
    """The critic half of `Objective` for objectives without a critic model."""

    critic_steps = 0

    def critic_loss(self, models: Models, micro: MicroBatch, target: MicroTarget, batch: PreparedBatch) -> MicroLoss:
        raise TypeError(f"{type(self).__name__} has no critic model to train")
