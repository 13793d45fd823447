"""The one interface every learner objective implements, and the values passed through it.

A learner step (`trainer.learner.learner.Learner.step`) is one loop over an `Objective`:

1. `select(trajectories)`: the trajectories to train on (DAPO drops zero-variance groups),
   with anything computed over the whole batch before it is split across ranks (group
   advantages);
2. `targets(learner, selection, batch)`: per micro-batch, everything computed before the
   update without a gradient (values, GAE advantages and returns, turn layouts), including
   each token's advantage;
3. `micro_loss(learner, micro, target, batch)`: one micro-batch's weighted loss, which the
   learner back-propagates (gradients accumulate over micro-batches);
4. after the learner applied the update (with the non-finite guard):
   `after_step(learner, batch, targets)`, e.g. the critic's K updates.

Advantages are computed per step and passed explicitly: nothing survives a step in an
objective, which holds only its configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import torch

from trainer.inference.trajectory import Trajectory
from trainer.learner.batching import MicroBatch, PreparedBatch

if TYPE_CHECKING:
    from trainer.learner.learner import Learner


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
    """One micro-batch's contribution to the step."""

    loss: torch.Tensor
    """Weighted so the sum over micro-batches and ranks is the global batch's loss."""
    finite: bool
    """Whether the loss (before weighting) is finite; the learner skips the step if not."""
    sums: dict[str, float] = field(default_factory=dict)
    """Metric contributions, already weighted; the learner sums them over micro-batches and ranks."""
    stats: dict[str, float] = field(default_factory=dict)
    """Per-token means (clip fractions, ratios); the learner averages them over policy tokens."""


class Objective(Protocol):
    """What the learner optimises (see the module docstring for the order of the calls)."""

    aggregation: str
    """How token losses are averaged (`token_mean`, `sequence_mean`, `sequence_sum_norm`);
    micro-batch weights follow it (`trainer.learner.batching.loss_weight`)."""

    def select(self, trajectories: list[Trajectory]) -> Selection: ...

    def targets(self, learner: Learner, selection: Selection, batch: PreparedBatch) -> StepTargets: ...

    def micro_loss(
        self, learner: Learner, micro: MicroBatch, target: MicroTarget, batch: PreparedBatch
    ) -> MicroLoss: ...

    def after_step(self, learner: Learner, batch: PreparedBatch, targets: StepTargets) -> tuple[dict[str, float], bool]:
        """Work after the policy update; returns metrics and whether it all applied."""
        ...
