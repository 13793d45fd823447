"""Policy losses and advantage estimators by name, so a config can pick them.

Every policy loss has one signature,
`loss_fn(logp, logp_rollout, advantages, mask, *, logp_prox=None, **hyper) -> (loss, stats)`,
with [batch, time] tensors and `stats` a flat `dict[str, float]` for the metrics log. Each
entry's defaults are its paper's; `**hyper` overrides them (e.g. `clip_high=0.3`,
`aggregation="token_mean"`). Losses named in `NEEDS_PROX` require `logp_prox`, the learner's
own logprobs before the update; the others use it as the PPO anchor when given (see
`ppo_clip_loss`), except SAO, whose ratio is against the engine's logprobs by definition.

Group advantage estimators have the signature `fn(rewards [N], group_index) -> advantages [N]`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from trainer.algorithms.group import dr_grpo_advantages, grpo_advantages
from trainer.algorithms.ppo import decoupled_ppo_loss, ppo_clip_loss
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
) -> tuple[torch.Tensor, dict[str, float]]:
    """`sao_policy_loss` (arXiv 2607.07508) in the registry's signature.

    `logp_prox` is accepted and not used: SAO has no separate pi_old; its importance ratio is
    always against the logprobs the inference engine recorded.
    """
    del logp_prox
    loss, stats = sao_policy_loss(logp, logp_rollout, advantages, mask, eps_low, eps_high, aggregation)
    return loss, stats.as_dict()


POLICY_LOSSES: dict[str, PolicyLoss] = {
    "sao": sao_loss,
    # GRPO (arXiv 2402.03300): symmetric clip, each sequence's token mean, then the batch mean.
    "grpo": partial(ppo_clip_loss, clip_low=0.2, clip_high=0.2, aggregation="sequence_mean"),
    # Dr.GRPO (arXiv 2503.20783): token sums over a constant horizon, no length normalisation.
    "dr_grpo": partial(ppo_clip_loss, clip_low=0.2, clip_high=0.2, aggregation="sequence_sum_norm"),
    # DAPO (arXiv 2503.14476): clip-higher and token-level normalisation.
    "dapo": partial(ppo_clip_loss, clip_low=0.2, clip_high=0.28, aggregation="token_mean"),
    # PPO with a separate critic: pair with GAE advantages and `clipped_value_loss`.
    "ppo": partial(ppo_clip_loss, clip_low=0.2, clip_high=0.2, aggregation="token_mean"),
    # AReaL (arXiv 2505.24298): behaviour weight pi_prox/pi_behav times the clipped pi_theta/pi_prox.
    "decoupled_ppo": partial(decoupled_ppo_loss, clip_low=0.2, clip_high=0.2, aggregation="token_mean"),
}

NEEDS_PROX: frozenset[str] = frozenset({"decoupled_ppo"})
"""Losses that need `logp_prox`: the learner must run a no-grad forward of the current policy first."""

ADVANTAGE_ESTIMATORS: dict[str, AdvantageEstimator] = {
    "grpo": grpo_advantages,
    "dr_grpo": dr_grpo_advantages,
}


@dataclass(frozen=True)
class AlgorithmSpec:
    """What one algorithm name means for the learner: which loss, which advantages, which critic."""

    policy_loss: str
    advantages: str
    """`gae` (token-level, skip-observation, needs a critic), `turn_gae` (SAPO's turn-level GAE
    over the shared readout) or a key of `ADVANTAGE_ESTIMATORS`."""
    critic: str | None
    """`separate` (a `ValueModel`), `shared` (SAPO's readout tokens) or None (group baseline)."""
    dynamic_sampling: bool = False
    """Drop groups whose rewards are all equal (`dynamic_sampling_mask`) before the update."""


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "sao": AlgorithmSpec("sao", "gae", "separate"),
    "grpo": AlgorithmSpec("grpo", "grpo", None),
    "dr_grpo": AlgorithmSpec("dr_grpo", "dr_grpo", None),
    "dapo": AlgorithmSpec("dapo", "grpo", None, dynamic_sampling=True),
    "ppo": AlgorithmSpec("ppo", "gae", "separate"),
    "decoupled_ppo": AlgorithmSpec("decoupled_ppo", "gae", "separate"),
    # SAPO (arXiv 2608.19842): PPO's clipped surrogate plus value, Q, KL and entropy terms
    # (`sapo.sapo_loss_terms`), read from one model through two reserved vocabulary tokens.
    "sapo": AlgorithmSpec("ppo", "turn_gae", "shared"),
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


def get_algorithm(name: str) -> AlgorithmSpec:
    """The preset called `name`, or a ValueError listing the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}") from None
