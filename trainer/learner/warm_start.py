"""Supervised warm start on demonstrations, and the critic restarted from the result.

A random policy solves nothing, and RL on all-zero rewards has nothing to learn from: the
warm start fits the demonstrations' policy tokens (e.g. gold trajectories) by
cross-entropy, averaged over every demonstrated token (`token_mean`, whatever the RL
objective's aggregation), with an AdamW of its own so RL starts from fresh optimizer
state (`SupervisedRun` keeps that optimizer between chunks of steps, so a driver can show
progress without changing a number). SAO (arXiv 2607.07508) initialises the critic from
the fine-tuned policy, so after a warm start the critic's backbone is copied from the
policy's decoder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from trainer import distributed
from trainer.inference.trajectory import Trajectory
from trainer.learner.batching import loss_weight, prepare
from trainer.learner.logprobs import batch_logprobs

if TYPE_CHECKING:
    from trainer.learner.learner import Learner


class SupervisedRun:
    """A warm start in progress: the demonstrations packed once and the AdamW of all its
    steps, so that `steps(n)` called in chunks (the driver draws progress between them)
    makes exactly the updates of one call with their sum."""

    def __init__(self, learner: Learner, demonstrations: list[Trajectory], lr: float) -> None:
        self.learner = learner
        self.optimizer = torch.optim.AdamW([p for p in learner.policy.parameters() if p.requires_grad], lr=lr)
        self.batch = prepare(
            demonstrations,
            pad_id=learner.pad_id,
            token_budget=learner.optim.token_budget,
            device=learner.device,
            tree=bool(learner.optim.tree_packing),
        )

    def steps(self, steps: int) -> list[float]:
        """`steps` more cross-entropy updates of the policy; the loss of each."""
        learner, batch = self.learner, self.batch
        losses = []
        for _ in range(steps):
            total, finite = 0.0, True
            for micro in batch.micro_batches:
                tensors = micro.tensors
                logp = batch_logprobs(learner.policy, tensors, learner.temperature, learner.banned)
                mask = tensors["policy_mask"].float()
                loss = -(logp * mask).sum() / mask.sum().clamp(min=1.0)
                weight = loss_weight(tensors, batch.totals, "token_mean")  # every demonstrated token counts
                (loss * weight).backward()
                finite = finite and bool(torch.isfinite(loss))
                total += float(loss.detach()) * weight / distributed.world_size()
            learner.apply(learner.policy, self.optimizer, finite)
            losses.append(distributed.all_reduce(total))
        return losses


@torch.no_grad()
def copy_backbone(policy: nn.Module, critic: nn.Module) -> None:
    """Overwrite the critic's backbone with the policy's decoder weights (the value head keeps
    its own). Sharded modules are copied shard by shard (same layout)."""
    decoder = policy.get_decoder() if hasattr(policy, "get_decoder") else policy.model
    source = dict(decoder.named_parameters())
    for name, parameter in critic.backbone.named_parameters():
        parameter.copy_(source[name])
