"""Supervised warm start on demonstrations, and the critic restarted from the result.

A random policy solves nothing, and RL on all-zero rewards has nothing to learn from: the
warm start fits the demonstrations' policy tokens (e.g. gold trajectories) by
cross-entropy, averaged over every demonstrated token (`token_mean`, whatever the RL
objective's aggregation). Here is its loss; the learner (`Learner.begin_warm_start`) keeps
the packed demonstrations and an AdamW of the warm start's own between chunks of steps (RL
then starts from fresh optimizer state, and a driver can show progress without changing a
number) and makes the updates. SAO (arXiv 2607.07508) initialises the critic from the
fine-tuned policy, so after a warm start the critic's backbone is copied from the policy's
decoder.
"""

from __future__ import annotations

import torch
from torch import nn

from trainer import distributed
from trainer.learner.batching import MicroBatch, PreparedBatch, loss_weight
from trainer.learner.logprobs import batch_logprobs
from trainer.learner.objectives.base import MicroLoss, Models


def supervised_loss(models: Models, micro: MicroBatch, batch: PreparedBatch) -> MicroLoss:
    """One micro-batch's cross-entropy on its policy tokens, weighted by its share of every
    demonstrated token of `batch`; `sums["loss"]` is its part of the batch's loss."""
    tensors = micro.tensors
    logp = batch_logprobs(models.policy, tensors, models.temperature, models.banned)
    mask = tensors["policy_mask"].float()
    loss = -(logp * mask).sum() / mask.sum().clamp(min=1.0)
    weight = loss_weight(tensors, batch.totals, "token_mean")  # every demonstrated token counts
    return MicroLoss(
        loss=loss * weight,
        finite=bool(torch.isfinite(loss)),
        sums={"loss": float(loss.detach()) * weight / distributed.world_size()},
    )


@torch.no_grad()
def copy_backbone(policy: nn.Module, critic: nn.Module) -> None:
    """Overwrite the critic's backbone with the policy's decoder weights (the value head keeps
    its own). Sharded modules are copied shard by shard (same layout)."""
    decoder = policy.get_decoder() if hasattr(policy, "get_decoder") else policy.model
    source = dict(decoder.named_parameters())
    for name, parameter in critic.backbone.named_parameters():
        parameter.copy_(source[name])
