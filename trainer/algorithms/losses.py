"""Policy losses and group advantage estimators by name (the torch half of the registry).

Every policy loss has one signature,
`loss_fn(logp, logp_rollout, advantages, mask, *, logp_prox=None, **hyper) -> (loss, stats)`,
with [batch, time] tensors and `stats` a flat `dict[str, float]` for the metrics log. Each
entry's defaults are its paper's; `**hyper` overrides them (e.g. `clip_high=0.3`,
`aggregation="token_mean"`, `horizon=` for `sequence_sum_norm`). Losses named in
`NEEDS_PROX` require `logp_prox`, the learner's own logprobs before the update; the others
use it as the PPO anchor when given (see `ppo_clip_loss`), except SAO, whose ratio is
against the engine's logprobs by definition.

Group advantage estimators have the signature `fn(rewards [N], group_index) -> advantages [N]`.
Each loss's paper defaults (clip range, aggregation) come from
`trainer.algorithms.registry.LOSS_DEFAULTS`, which the config's resolve step reads without
importing torch.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from trainer.algorithms.group import dr_grpo_advantages, grpo_advantages
from trainer.algorithms.ppo import decoupled_ppo_loss, ppo_clip_loss
from trainer.algorithms.registry import LOSS_DEFAULTS
from trainer.algorithms.sao import CODING_EPS, sao_policy_loss

PolicyLoss = Callable[..., tuple[torch.Tensor, dict[str, float]]]
AdvantageEstimator = Callable[..., torch.Tensor]


def sao_loss(
    logp: torch.Tensor,
    logp_rollout: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    logp_prox: torch.Tensor | None = None,
    eps_low: float = CODING_EPS[0],
    eps_high: float = CODING_EPS[1],
    aggregation: str = "token_mean",
    horizon: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """`sao_policy_loss` (arXiv 2607.07508) in the registry's signature.

    `logp_prox` is accepted and not used: SAO has no separate pi_old; its importance ratio is
    always against the logprobs the inference engine recorded.
    """
    del logp_prox
    loss, stats = sao_policy_loss(logp, logp_rollout, advantages, mask, eps_low, eps_high, aggregation, horizon=horizon)
    return loss, stats.as_dict()


POLICY_LOSSES: dict[str, PolicyLoss] = {
    "sao": sao_loss,
    # GRPO, Dr.GRPO, DAPO: the PPO clip with each paper's clip range and aggregation
    # (`LOSS_DEFAULTS`); PPO with a separate critic pairs it with GAE and `clipped_value_loss`.
    **{name: partial(ppo_clip_loss, **LOSS_DEFAULTS[name]) for name in ("grpo", "dr_grpo", "dapo", "ppo")},
    # AReaL (arXiv 2505.24298): behaviour weight pi_prox/pi_behav times the clipped pi_theta/pi_prox.
    "decoupled_ppo": partial(decoupled_ppo_loss, **LOSS_DEFAULTS["decoupled_ppo"]),
}

LOSS_PARAMETERS: dict[str, tuple[str, ...]] = {
    "sao": ("eps_low", "eps_high"),
    **{name: ("clip_low", "clip_high") for name in ("grpo", "dr_grpo", "dapo", "ppo", "decoupled_ppo")},
}
"""The `AlgorithmConfig` fields each loss takes as keyword arguments (unset ones keep the
loss's paper default)."""

NEEDS_PROX: frozenset[str] = frozenset({"decoupled_ppo"})
"""Losses that need `logp_prox`, the proximal policy's logprobs. The learner passes the
current policy's own logprobs, detached, from the forward it takes anyway: it steps the
optimizer only after every micro-batch, so the weights of that forward are the proximal
policy, and no extra forward is needed (`trainer.learner.objectives.policy_gradient`)."""

ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
}


def get_policy_loss(name: str) -> PolicyLoss:
    """The policy loss called `name`, or a ValueError listing the known ones."""
    try:
        return POLICY_LOSSES[name]
    except KeyError:
        raise ValueError(f"unknown policy loss {name!r}; known: {sorted(POLICY_LOSSES)}") from None


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    """The group advantage estimator called `name`, or a ValueError listing the known ones."""
    try:
        return ADVANTAGE_ESTIMATORS[name]
    except KeyError:
        raise ValueError(f"unknown advantage estimator {name!r}; known: {sorted(ADVANTAGE_ESTIMATORS)}") from None
