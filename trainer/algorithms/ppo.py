"""PPO-family policy losses, the clipped value loss, KL and entropy, as pure functions.

The baselines SAO is compared against (papers.md, "closest public baselines"):

- `ppo_clip_loss`: the clipped surrogate of PPO (arXiv 1707.06347) with asymmetric bounds,
  used by GRPO (0.2/0.2), DAPO's clip-higher (0.2/0.28, arXiv 2503.14476) and PPO with a
  separate critic (paired with `clipped_value_loss`).
- `decoupled_ppo_loss`: AReaL's decoupled objective (arXiv 2505.24298) for asynchronous
  rollouts, which separates the behaviour policy (the engine that sampled) from the proximal
  policy (the trust-region anchor).
- `kl_k3` and `token_entropy`: the regularisers SAPO's combined loss uses.

Every loss takes [batch, time] tensors, `mask` marking the policy's tokens, and returns
`(loss, stats)` with plain-float stats, so `trainer.algorithms.registry` can select them by
name with one signature.
"""

from __future__ import annotations

import torch

from trainer.algorithms.sao import aggregate


def _clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, clip_low: float, clip_high: float
) -> torch.Tensor:
    """Per-token max(-r A, -clip(r, 1 - clip_low, 1 + clip_high) A): the pessimistic bound."""
    clipped = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(-ratio * advantages, -clipped * advantages)


def _clip_stats(
    ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, clip_low: float, clip_high: float
) -> dict[str, float]:
    """Shares of policy tokens whose gradient the clip removes, on each side, and ratio stats."""
    mask = mask.to(ratio.dtype)
    n = mask.sum().clamp(min=1.0)
    ratio = ratio.detach()
    # The clip only bites where it makes the objective pessimistic: r above the band with
    # A > 0, or below it with A < 0. Elsewhere the unclipped term is the max and flows.
    low = ((ratio < 1.0 - clip_low) & (advantages < 0)).to(ratio.dtype)
    high = ((ratio > 1.0 + clip_high) & (advantages > 0)).to(ratio.dtype)
    log_ratio = torch.log(ratio.clamp(min=1e-30))
    return {
        "clip_low_fraction": float((low * mask).sum() / n),
        "clip_high_fraction": float((high * mask).sum() / n),
        "mean_ratio": float((ratio * mask).sum() / n),
        # k3 estimate of KL(pi_anchor || pi_theta) from tokens sampled by the anchor.
        "approx_kl": float((((ratio - 1.0) - log_ratio) * mask).sum() / n),
    }


def ppo_clip_loss(
    logp: torch.Tensor,
    logp_rollout: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    logp_prox: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    aggregation: str = "token_mean",
    horizon: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped surrogate (arXiv 1707.06347) with separate lower and upper clip ranges.

    `r = exp(logp - logp_old)`, loss per token `max(-r A, -clip(r, 1-clip_low, 1+clip_high) A)`.
    `logp_old` is `logp_prox` when given (the learner's own recomputation of pi_old before the
    update, as verl does, which removes the engine/trainer numerical mismatch from the ratio),
    else the engine's `logp_rollout`. Symmetric 0.2/0.2 is GRPO's and PPO's setting;
    0.2/0.28 is DAPO's clip-higher (arXiv 2503.14476). No dual clip (not in any of our papers).
    `horizon` is Dr.GRPO's constant divisor for `sequence_sum_norm` (one value for the batch).
    """
    anchor = logp_rollout if logp_prox is None else logp_prox
    ratio = torch.exp(logp - anchor.detach())
    per_token = _clipped_surrogate(ratio, advantages.detach(), clip_low, clip_high)
    loss = aggregate(per_token, mask, aggregation, horizon=horizon)
    return loss, _clip_stats(ratio, advantages, mask, clip_low, clip_high)


def decoupled_ppo_loss(
    logp: torch.Tensor,
    logp_rollout: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    logp_prox: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    behav_weight_cap: float | None = None,
    aggregation: str = "token_mean",
    horizon: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """AReaL's decoupled PPO objective (arXiv 2505.24298, eq. 5).

    With the behaviour policy pi_behav (the engine that sampled, `logp_rollout`, possibly
    several versions stale) and the proximal policy pi_prox (`logp_prox`, the learner's
    current weights before this update), the per-token loss is
    `w * max(-r A, -clip(r, 1-clip_low, 1+clip_high) A)` with the importance weight
    `w = pi_prox / pi_behav` (no gradient: neither depends on theta) and the trust-region
    ratio `r = pi_theta / pi_prox`. With `behav_weight_cap`, tokens whose `w` exceeds the cap
    get weight 0 but still count in the token mean, as AReaL's implementation does.
    """
    if logp_prox is None:
        raise ValueError("decoupled_ppo needs logp_prox: the learner's logprobs before this update")
    logp_prox = logp_prox.detach()
    ratio = torch.exp(logp - logp_prox)
    behav_weight = torch.exp(logp_prox - logp_rollout.detach())
    capped = torch.zeros_like(mask, dtype=torch.bool)
    if behav_weight_cap is not None:
        capped = behav_weight > behav_weight_cap
        behav_weight = torch.where(capped, torch.zeros_like(behav_weight), behav_weight)
    per_token = behav_weight * _clipped_surrogate(ratio, advantages.detach(), clip_low, clip_high)
    loss = aggregate(per_token, mask, aggregation, horizon=horizon)
    stats = _clip_stats(ratio, advantages, mask, clip_low, clip_high)
    fmask = mask.to(ratio.dtype)
    n = fmask.sum().clamp(min=1.0)
    stats["mean_behav_weight"] = float((behav_weight * fmask).sum() / n)
    stats["behav_capped_fraction"] = float((capped.to(ratio.dtype) * fmask).sum() / n)
    return loss, stats


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float = 0.2,
    aggregation: str = "token_mean",
) -> torch.Tensor:
    """PPO's clipped value loss (as in OpenAI baselines / torchtune's `PPOLoss`).

    `0.5 * max((V - R)^2, (V_old + clip(V - V_old, -clip, clip) - R)^2)`: the critic may not
    move a value further than `clip` from the one it had at rollout time in a way that helps
    the fit. `clip` is in reward units, so it depends on the reward scale.
    """
    returns, old_values = returns.detach(), old_values.detach()
    clipped = old_values + (values - old_values).clamp(-clip, clip)
    per_token = 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    return aggregate(per_token, mask, aggregation)


def kl_k3(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi_theta || pi_ref) from tokens sampled by pi_theta.

    `exp(ref - logp) - (ref - logp) - 1` (Schulman, "Approximating KL divergence", 2020; the
    GRPO paper's KL term): unbiased, always >= 0, gradient flows through `logp` only.
    """
    log_ratio = logp_ref.detach() - logp
    return torch.exp(log_ratio) - log_ratio - 1.0


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last axis, per position: `logsumexp(z) - sum p z`.

    Computed from logits (not from probabilities) so it stays finite where p underflows, and
    banned tokens (logit -inf, e.g. SAPO's reserved value tokens) contribute 0, not NaN.
    """
    logits = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    # 0 * -inf is NaN in the forward and in the gradient; a finite stand-in where p == 0 is exact.
    finite = torch.where(torch.isfinite(logits), logits, torch.zeros_like(logits))
    return torch.logsumexp(logits, dim=-1) - (torch.softmax(logits, dim=-1) * finite).sum(-1)
