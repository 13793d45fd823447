"""SAO: single-rollout asynchronous optimisation (arXiv 2607.07508), as pure functions.

- `sao_policy_loss`: direct double-sided importance sampling. With
  `r_t = exp(logp_theta - logp_rollout)` (the logprob the inference engine recorded; there
  is no separate pi_old), tokens with `r <= 1 - eps_low` or `r >= 1 + eps_high` are dropped
  from the loss (masked, not clamped as PPO does), and the rest contribute
  `-sg(r_t) * A_t * logp_theta`. Its gradient is `-r_t * A_t * grad logp`, the importance-
  weighted policy gradient, and exactly zero on masked tokens.
- `gae` with the paper's length-adaptive lambda `1 - 1/(alpha * l)` for the policy and
  lambda = 1 for the critic.
- Skip-observation GAE: advantages run over the policy's own tokens only, so the last
  token of action i bootstraps from the value at the first token of action i+1, skipping
  the environment's observation tokens in between.

Where we depart: the paper does not say how a truncated episode is bootstrapped; we add
`bootstrap_value` (V of the state after the last action) when the episode was cut by a
limit rather than ended by the agent, as standard GAE does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CODING_EPS = (0.8, 3.0)
MATH_EPS = (0.3, 5.0)


@dataclass(frozen=True)
class PolicyLossStats:
    masked_low_fraction: float
    """Share of policy tokens dropped because r <= 1 - eps_low."""
    masked_high_fraction: float
    """Share of policy tokens dropped because r >= 1 + eps_high."""
    mean_ratio: float


def double_sided_mask(ratio: torch.Tensor, eps_low: float, eps_high: float) -> torch.Tensor:
    """1.0 where `1 - eps_low < ratio < 1 + eps_high` (strict on both sides), else 0.0."""
    return ((ratio > 1.0 - eps_low) & (ratio < 1.0 + eps_high)).to(ratio.dtype)


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str = "token_mean") -> torch.Tensor:
    """Mean of `values` over `mask`ed tokens: over all tokens of the batch (`token_mean`),
    or per sequence then over sequences (`sequence_mean`). Inputs are [batch, time]."""
    mask = mask.to(values.dtype)
    if mode == "token_mean":
        return (values * mask).sum() / mask.sum().clamp(min=1.0)
    if mode == "sequence_mean":
        per_sequence = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        has_tokens = (mask.sum(-1) > 0).to(values.dtype)
        return (per_sequence * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)
    raise ValueError(f"unknown loss aggregation {mode!r}; use token_mean or sequence_mean")


def sao_policy_loss(
    logp: torch.Tensor,
    logp_rollout: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = CODING_EPS[0],
    eps_high: float = CODING_EPS[1],
    aggregation: str = "token_mean",
) -> tuple[torch.Tensor, PolicyLossStats]:
    """SAO's policy loss over [batch, time] tensors; `mask` marks policy tokens."""
    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp.detach() - logp_rollout)
    keep = double_sided_mask(ratio, eps_low, eps_high) * mask
    per_token = -(ratio * advantages).detach() * logp
    loss = aggregate(per_token, keep, aggregation) if keep.sum() > 0 else (logp * 0.0).sum()
    n = mask.sum().clamp(min=1.0)
    stats = PolicyLossStats(
        masked_low_fraction=float(((ratio <= 1.0 - eps_low).to(logp.dtype) * mask).sum() / n),
        masked_high_fraction=float(((ratio >= 1.0 + eps_high).to(logp.dtype) * mask).sum() / n),
        mean_ratio=float((ratio * mask).sum() / n),
    )
    return loss, stats


def length_adaptive_lambda(length: int, alpha: float = 1.5) -> float:
    """SAO's policy GAE lambda for a response of `length` policy tokens: 1 - 1/(alpha*l)."""
    return max(0.0, 1.0 - 1.0 / (alpha * max(length, 1)))


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    gamma: float,
    lam: float,
    bootstrap_value: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over one sequence of policy tokens.

    `rewards[t]` and `values[t]` are per policy token, in order; observation tokens are
    already removed, which is what makes this skip-observation GAE. The value after the
    last token is `bootstrap_value` (0 when the episode terminated). Returns
    (advantages, returns) with `returns = advantages + values`.
    """
    # A scalar loop over Python floats: the recursion is sequential, and per-element tensor
    # indexing would cost more than the arithmetic.
    reward_list, value_list = rewards.tolist(), values.tolist()
    out = [0.0] * len(value_list)
    next_value, running = float(bootstrap_value), 0.0
    for t in range(len(value_list) - 1, -1, -1):
        delta = reward_list[t] + gamma * next_value - value_list[t]
        running = delta + gamma * lam * running
        out[t] = running
        next_value = value_list[t]
    advantages = torch.tensor(out, dtype=values.dtype)
    return advantages, advantages + values


def value_loss(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, aggregation: str = "token_mean"
) -> torch.Tensor:
    """Half squared error of token values against their returns, over `mask`ed tokens."""
    return aggregate(0.5 * (values - returns.detach()) ** 2, mask, aggregation)
