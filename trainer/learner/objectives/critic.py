"""A separate critic: SAO (arXiv 2607.07508), PPO, and AReaL's decoupled PPO (arXiv 2505.24298).

One step with SAO: values from the critic (no grad) -> skip-observation GAE per trajectory
(length-adaptive lambda for the policy, lambda = 1 for the critic) -> one policy update
with SAO's double-sided masked loss -> `critic_steps` critic updates toward the returns
computed before any update (SAO: K = 2). `ppo` and `decoupled_ppo` use the same critic with
their clipped surrogate, a fixed GAE lambda when `gae_lambda` is set, and PPO's clipped
value loss (the value may not move far from its rollout-time estimate); SAO's critic
regresses on the returns directly (the spec's `value_loss`).

Every episode here ends with a graded submission, so the value after the last action is 0
(no bootstrap) whether the agent finished or a limit cut it short.

The objective returns the critic's loss (`critic_loss`); the learner runs its K updates, as
it runs the policy's, and reports the last one's loss as `value_loss`. Each step also
reports what the critic knew before it (`value_statistics`, issue #39): the mean and spread
of its values over policy tokens, the returns' mean, and the explained variance of the
returns (1: the values predict them; 0: no better than their mean; below 0: worse). A critic
that outputs about 0 everywhere turns GAE into the reward itself, REINFORCE without a baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from trainer import distributed
from trainer.algorithms.ppo import clipped_value_loss
from trainer.algorithms.registry import AlgorithmSpec
from trainer.algorithms.sao import gae, length_adaptive_lambda, value_loss
from trainer.inference.trajectory import Trajectory
from trainer.learner.batching import MicroBatch, PreparedBatch, loss_weight
from trainer.learner.logprobs import batch_values
from trainer.learner.objectives.base import MicroLoss, Models, Selection, StepTargets
from trainer.learner.objectives.policy_gradient import PolicyGradientObjective

if TYPE_CHECKING:
    from trainer.config import AlgorithmConfig


@dataclass(frozen=True)
class CriticTarget:
    """One micro-batch's targets, [B, T-1], zero off policy tokens."""

    advantages: torch.Tensor
    returns: torch.Tensor
    """The critic's regression targets (GAE with `critic_lambda`)."""
    old_values: torch.Tensor
    """The critic's values before the update (the clipped value loss's anchor)."""


def gae_targets(
    trajectories: list[Trajectory],
    values: torch.Tensor,
    policy_mask: torch.Tensor,
    *,
    gamma: float,
    gae_lambda: float | None,
    lambda_alpha: float,
    critic_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Policy advantages and critic returns, [B, T-1], from the critic's `values`.

    Skip-observation GAE (`trainer.algorithms.sao.gae` over each row's policy tokens only),
    the trajectory's reward on its last policy token. The policy's lambda is `gae_lambda`,
    or SAO's length-adaptive `1 - 1/(alpha * l)` when None; the critic's is `critic_lambda`.
    """
    advantages = torch.zeros_like(values)
    returns = torch.zeros_like(values)
    for row, traj in enumerate(trajectories):
        positions = policy_mask[row].nonzero().squeeze(-1)
        if positions.numel() == 0:
            continue
        token_values = values[row, positions].cpu()
        rewards = torch.zeros_like(token_values)
        rewards[-1] = traj.reward
        lam = gae_lambda if gae_lambda is not None else length_adaptive_lambda(positions.numel(), lambda_alpha)
        advantages[row, positions] = gae(rewards, token_values, gamma, lam)[0].to(values.device)
        returns[row, positions] = gae(rewards, token_values, gamma, critic_lambda)[1].to(values.device)
    return advantages, returns


def value_statistics(targets: list[CriticTarget], masks: list[torch.Tensor]) -> dict[str, float]:
    """`value_mean`, `value_std` (population), `return_mean` and `explained_variance`
    (1 - Var(returns - values) / Var(returns), left out when the returns do not vary) over
    the policy tokens of every micro-batch on every rank; {} without a policy token."""
    sums = dict.fromkeys(("n", "v", "v2", "r", "r2", "e", "e2"), 0.0)
    for target, mask in zip(targets, masks, strict=True):
        keep = mask.bool()
        values, returns = target.old_values[keep].double(), target.returns[keep].double()
        errors = returns - values
        for key, x in (("v", values), ("r", returns), ("e", errors)):
            sums[key] += float(x.sum())
            sums[key + "2"] += float((x * x).sum())
        sums["n"] += float(keep.sum())
    sums = {key: distributed.all_reduce(value) for key, value in sums.items()}
    n = sums["n"]
    if n == 0:
        return {}

    def variance(key: str) -> float:
        return max(sums[key + "2"] / n - (sums[key] / n) ** 2, 0.0)

    metrics = {"value_mean": sums["v"] / n, "value_std": variance("v") ** 0.5, "return_mean": sums["r"] / n}
    if variance("r") > 0:
        metrics["explained_variance"] = 1.0 - variance("e") / variance("r")
    return metrics


class CriticObjective(PolicyGradientObjective):
    """GAE advantages from a separate `ValueModel`, then K critic updates after the policy's."""

    def __init__(self, spec: AlgorithmSpec, algorithm: AlgorithmConfig, aggregation: str, hyper: dict) -> None:
        super().__init__(spec.policy_loss, aggregation, hyper)
        self.clipped_value_loss = spec.value_loss == "clipped"
        self.gamma, self.gae_lambda = algorithm.gamma, algorithm.gae_lambda
        self.lambda_alpha, self.critic_lambda = algorithm.lambda_alpha, algorithm.critic_lambda
        self.critic_steps = algorithm.critic_steps

    def select(self, trajectories: list[Trajectory]) -> Selection:
        return Selection(trajectories)

    def targets(self, models: Models, selection: Selection, batch: PreparedBatch) -> StepTargets:
        # Empty micro-batches run the critic too: under FSDP every forward is a collective.
        micro = [self.micro_targets(models, m) for m in batch.micro_batches]
        masks = [m.tensors["policy_mask"] for m in batch.micro_batches]
        return StepTargets(micro, value_statistics(micro, masks))

    def micro_targets(self, models: Models, micro: MicroBatch) -> CriticTarget:
        """Values (no grad), then GAE advantages and returns for one micro-batch."""
        tensors = micro.tensors
        with torch.no_grad():
            values = batch_values(models.critic, tensors)[:, :-1].float()
        advantages, returns = gae_targets(
            micro.trajectories,
            values,
            tensors["policy_mask"],
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            lambda_alpha=self.lambda_alpha,
            critic_lambda=self.critic_lambda,
        )
        return CriticTarget(advantages, returns, values)

    def value_loss(self, values, returns, old_values, mask) -> torch.Tensor:
        # The value loss has no horizon: Dr.GRPO's per-sequence sums fall back to a token mean.
        aggregation = "token_mean" if self.aggregation == "sequence_sum_norm" else self.aggregation
        if self.clipped_value_loss:
            return clipped_value_loss(values, old_values, returns, mask, aggregation=aggregation)
        return value_loss(values, returns, mask, aggregation)

    def critic_loss(self, models: Models, micro: MicroBatch, target: CriticTarget, batch: PreparedBatch) -> MicroLoss:
        """One micro-batch's value loss toward the returns computed before any update."""
        tensors = micro.tensors
        values = batch_values(models.critic, tensors)[:, :-1].float()
        loss = self.value_loss(values, target.returns, target.old_values, tensors["policy_mask"])
        weight = loss_weight(tensors, batch.totals, self.aggregation)
        return MicroLoss(
            loss=loss * weight,
            finite=bool(torch.isfinite(loss)),
            sums={"value_loss": float(loss.detach()) * weight / distributed.world_size()},
        )
