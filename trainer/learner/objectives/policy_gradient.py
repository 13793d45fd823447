"""The policy-gradient half shared by the critic and group objectives: one registry loss.

The loss comes from `trainer.algorithms.losses.POLICY_LOSSES` by the spec's `policy_loss`:
SAO's double-sided masked loss (arXiv 2607.07508), PPO's clip, GRPO's (arXiv 2402.03300),
Dr.GRPO's (arXiv 2503.20783), DAPO's (arXiv 2503.14476) or AReaL's decoupled PPO
(arXiv 2505.24298). The optimizer steps only after every micro-batch, so the current
weights are the proximal policy of the decoupled objective: no extra forward is needed.
"""

from __future__ import annotations

import torch

from trainer import distributed
from trainer.algorithms.losses import NEEDS_PROX, get_policy_loss
from trainer.learner.batching import MicroBatch, PreparedBatch, loss_weight
from trainer.learner.logprobs import batch_logprobs
from trainer.learner.objectives.base import MicroLoss, MicroTarget, Models


class PolicyGradientObjective:
    """A registry policy loss over the advantages a subclass's `targets` computes."""

    def __init__(self, policy_loss: str, aggregation: str, hyper: dict) -> None:
        self.loss_fn = get_policy_loss(policy_loss)
        self.needs_prox = policy_loss in NEEDS_PROX
        self.aggregation = aggregation
        self.hyper = {"aggregation": aggregation, **hyper}
        """The loss's keyword arguments (its paper's defaults where absent)."""

    def micro_loss(self, models: Models, micro: MicroBatch, target: MicroTarget, batch: PreparedBatch) -> MicroLoss:
        tensors = micro.tensors
        logp = batch_logprobs(models.policy, tensors, models.temperature)
        prox = logp.detach() if self.needs_prox else None
        hyper = self.hyper if batch.horizon is None else {**self.hyper, "horizon": batch.horizon}
        loss, stats = self.loss_fn(
            logp, tensors["rollout_logp"], target.advantages, tensors["policy_mask"], logp_prox=prox, **hyper
        )
        weight = loss_weight(tensors, batch.totals, self.aggregation)
        return MicroLoss(
            loss=loss * weight,
            finite=bool(torch.isfinite(loss)),
            sums={"policy_loss": float(loss.detach()) * weight / distributed.world_size()},
            stats=stats,
        )
