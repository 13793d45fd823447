"""SAPO: single-rollout autoregressive policy optimisation (arXiv 2608.19842), as pure functions.

Policy and value share one backbone. Two reserved vocabulary tokens w+ and w- carry the value:
`V(s) = R_max * clip((z_{w+} - z_{w-}) / tau_v, -1, 1)`, read from the logits at the position
before a turn's response (the logits that choose its first token); Q(s, a) is read the same
way after the response (at its last token). Advantages come from trajectory-level GAE over
turns, are normalised across the batch and broadcast to the turn's tokens; the loss is
`clipped policy loss + c_V L_V + c_Q L_Q + beta KL - c_H entropy`.

What the public summary leaves open, and what we chose:
- Value target: the lambda-return `A_t + V_t` (as PPO). Q target: the one-step Bellman target
  `r_t + gamma (1 - d_t) V_{t+1}` with V held fixed (as in actor-critic methods with a Q head).
- The clip in the readout has zero gradient once `|z+ - z-| > tau_v`; we keep it as written
  (a saturated value only recovers through the other position's gradients). Choose `tau_v`
  large enough that the initial logit gap sits well inside the band.
- Batch normalisation uses the population std over valid turns (a one-turn batch gives 0).
- Loss weights default to c_V = c_Q = 0.5, beta = 0.001 (verl's KL default), c_H = 0.
- The reserved tokens must never be sampled nor compete for probability mass: the engine
  bans them, and the learner's log-softmax must see the same logits (`ban_value_tokens`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from trainer.algorithms.ppo import _clip_stats, _clipped_surrogate, kl_k3
from trainer.algorithms.sao import action_index, aggregate


def sapo_value(
    logits: torch.Tensor, plus_id: int, minus_id: int, *, r_max: float = 1.0, tau: float = 1.0
) -> torch.Tensor:
    """`R_max * clip((z[plus_id] - z[minus_id]) / tau, -1, 1)` over the last (vocabulary) axis."""
    gap = logits[..., plus_id] - logits[..., minus_id]
    return r_max * (gap.float() / tau).clamp(-1.0, 1.0)


def ban_value_tokens(logits: torch.Tensor, plus_id: int, minus_id: int) -> torch.Tensor:
    """Logits with the reserved value tokens at -inf, for the policy's log-softmax and sampling."""
    banned = logits.clone()
    banned[..., [plus_id, minus_id]] = -torch.inf
    return banned


def turn_positions(policy_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For one sequence's [T] token-frame policy mask (True where the token was sampled):
    the logit positions of each turn's V readout (the token before the response, whose logits
    choose its first token) and Q readout (the response's last token), and each turn's index.

    Returns (v_positions [N], q_positions [N], turn_of_token [T] with -1 off policy tokens).
    A response at position 0 has no token before it; that is an error.
    """
    index = action_index(policy_mask)
    mask = policy_mask.bool()
    following = torch.zeros_like(mask)
    following[:-1] = mask[1:]
    previous = torch.zeros_like(mask)
    previous[1:] = mask[:-1]
    starts = (mask & ~previous).nonzero().squeeze(-1)
    ends = (mask & ~following).nonzero().squeeze(-1)
    if starts.numel() and int(starts[0]) == 0:
        raise ValueError("a response starts at token 0: SAPO reads V from the token before it")
    return starts - 1, ends, index


class TurnTargets(NamedTuple):
    advantages: torch.Tensor
    """GAE advantage per turn, [B, N], 0 on padding turns."""
    returns: torch.Tensor
    """Lambda-return `A_t + V_t`, the value target."""
    q_targets: torch.Tensor
    """One-step target `r_t + gamma (1 - d_t) V_{t+1}`, the Q target."""


def turn_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    turn_mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
    *,
    final_values: torch.Tensor | float = 0.0,
) -> TurnTargets:
    """SAPO's trajectory-level GAE over turns (arXiv 2608.19842), batched over [B, N] turns.

    `delta_t = r_t + gamma (1 - d_t) V_{t+1} - V_t`, `A_t = delta_t + gamma lam (1 - d_t) A_{t+1}`.
    `turn_mask` marks real turns (trajectories are right-padded to N turns). After the last
    real turn, `V_{t+1}` is `final_values` (V of the state after the last observation): it
    counts only when that turn's `d_t` is 0, i.e. the episode was truncated, not terminated.
    The recursion is vectorised over the batch and loops over turns (N is small).
    """
    valid = turn_mask.bool()
    not_done = 1.0 - dones.to(values.dtype)
    next_value = torch.as_tensor(final_values, dtype=values.dtype, device=values.device).expand(values.shape[0]).clone()
    next_advantage = torch.zeros_like(next_value)
    advantages = torch.zeros_like(values)
    q_targets = torch.zeros_like(values)
    for t in range(values.shape[1] - 1, -1, -1):
        target = rewards[:, t] + gamma * not_done[:, t] * next_value
        advantage = target - values[:, t] + gamma * lam * not_done[:, t] * next_advantage
        # Padding turns pass the carried value and advantage through unchanged.
        here = valid[:, t]
        advantages[:, t] = torch.where(here, advantage, 0.0)
        q_targets[:, t] = torch.where(here, target, 0.0)
        next_value = torch.where(here, values[:, t], next_value)
        next_advantage = torch.where(here, advantage, next_advantage)
    returns = torch.where(valid, advantages + values, 0.0)
    return TurnTargets(advantages, returns, q_targets)


def normalize_turn_advantages(
    advantages: torch.Tensor,
    turn_mask: torch.Tensor,
    eps: float = 1e-8,
    *,
    moments: tuple[float, float] | None = None,
) -> torch.Tensor:
    """`(A - mean_B) / (std_B + eps)` over the batch's real turns (population std); 0 on padding.

    `moments`: a precomputed (mean, std) of the whole batch, for a batch split into
    micro-batches or across ranks (the learner all-reduces them); by default, this tensor's."""
    valid = turn_mask.bool()
    if moments is not None:
        mean, std = moments
        return torch.where(valid, (advantages - mean) / (std + eps), 0.0)
    values = advantages[valid]
    if values.numel() == 0:
        return torch.zeros_like(advantages)
    mean = values.mean()
    std = values.std(correction=0)
    return torch.where(valid, (advantages - mean) / (std + eps), 0.0)


def broadcast_turns(turn_values: torch.Tensor, turn_of_token: torch.Tensor) -> torch.Tensor:
    """Per-turn values [B, N] onto tokens [B, T] by `turn_of_token` (-1: not a policy token -> 0)."""
    index = turn_of_token.clamp(min=0)
    gathered = turn_values.gather(-1, index)
    return torch.where(turn_of_token >= 0, gathered, torch.zeros_like(gathered))


class SAPOLossTerms(NamedTuple):
    """The terms of SAPO's loss as scalars with gradient, before weighting, plus clip stats.

    Token terms (`policy`, `kl`, `entropy`) are averaged over policy tokens by `aggregation`;
    turn terms (`value`, `q`) over real turns. A learner that accumulates micro-batches
    weights the two kinds by their own shares of the global batch (tokens vs turns)."""

    policy: torch.Tensor
    value: torch.Tensor
    q: torch.Tensor
    kl: torch.Tensor
    entropy: torch.Tensor
    stats: dict[str, float]


def sapo_loss_terms(
    logp: torch.Tensor,
    logp_rollout: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    values: torch.Tensor,
    value_targets: torch.Tensor,
    q_values: torch.Tensor,
    q_targets: torch.Tensor,
    turn_mask: torch.Tensor,
    logp_ref: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    aggregation: str = "token_mean",
    horizon: int | None = None,
) -> SAPOLossTerms:
    """The unweighted terms of SAPO's loss (arXiv 2608.19842), which the learner combines
    as `L_clip + c_V L_V + c_Q L_Q + beta KL - c_H H`, token terms and turn terms each
    weighted by their share of the batch (`trainer.learner.objectives.sapo`).

    Token tensors are [B, T] (`advantages` already broadcast from normalised turn advantages,
    `entropy` from `ppo.token_entropy`, `logp_ref` the KL reference's logprobs: the learner
    passes the rollout logprobs, see `trainer.learner.objectives.sapo`); value tensors are
    [B, N] per turn, with `values`/`q_values` read by `sapo_value` and targets from
    `turn_gae`. `L_V` and `L_Q` are half squared errors averaged over real turns; KL is the
    k3 estimator and entropy the token entropy, both token-averaged the same way as the
    policy loss. The clipped policy term anchors at the engine's logprobs (SAPO is
    single-rollout and on-policy up to staleness). A missing `logp_ref` or `entropy` gives
    a zero term."""
    ratio = torch.exp(logp - logp_rollout.detach())
    surrogate = _clipped_surrogate(ratio, advantages.detach(), clip_low, clip_high)
    policy = aggregate(surrogate, mask, aggregation, horizon=horizon)
    turns = turn_mask.to(values.dtype)
    n_turns = turns.sum().clamp(min=1.0)
    value = (0.5 * (values - value_targets.detach()) ** 2 * turns).sum() / n_turns
    q = (0.5 * (q_values - q_targets.detach()) ** 2 * turns).sum() / n_turns
    zero = logp.new_zeros(())
    kl = aggregate(kl_k3(logp, logp_ref), mask, aggregation, horizon=horizon) if logp_ref is not None else zero
    ent = aggregate(entropy, mask, aggregation, horizon=horizon) if entropy is not None else zero
    return SAPOLossTerms(policy, value, q, kl, ent, _clip_stats(ratio, advantages, mask, clip_low, clip_high))
