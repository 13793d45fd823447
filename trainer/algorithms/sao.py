"""SAO: single-rollout asynchronous optimisation (arXiv 2607.07508), as pure functions.

- `sao_policy_loss`: direct double-sided importance sampling. With
  `r_t = exp(logp_theta - logp_rollout)` (the logprob the inference engine recorded; there
  is no separate pi_old), tokens with `r <= 1 - eps_low` or `r >= 1 + eps_high` are dropped
  from the loss (masked, not clamped as PPO does), and the rest contribute
  `-sg(r_t) * A_t * logp_theta`. Its gradient is `-r_t * A_t * grad logp`, the importance-
  weighted policy gradient, and exactly zero on masked tokens. The mean runs over all policy
  tokens (a dropped token adds 0), as the paper's `f(r) = 0` formula reads.
- `gae` with the paper's length-adaptive lambda `1 - 1/(alpha * l)` for the policy and
  lambda = 1 for the critic.
- Skip-observation GAE: advantages run over the policy's own tokens only, so the last
  token of action i bootstraps from the value at the first token of action i+1, skipping
  the environment's observation tokens in between. `gae` works on the compressed policy
  tokens of one sequence; `skip_observation_gae` works on full [B, T] sequences with a policy
  mask (observations interleaved) and per-turn rewards.
- `freeze_attention`: the paper's option of freezing the critic's attention layers during RL.

Where we depart: the paper does not say how a truncated episode is bootstrapped; we add
`bootstrap_value` / `final_value` (V of the state after the last action) when the episode
was cut by a limit rather than ended by the agent, as standard GAE does. The length `l` of
the adaptive lambda is the trajectory's number of policy tokens over all its turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

CODING_EPS = (0.8, 3.0)
MATH_EPS = (0.3, 5.0)
SAO_EPS: dict[str, tuple[float, float]] = {"coding": CODING_EPS, "math": MATH_EPS}
"""The paper's (eps_low, eps_high) bands per domain."""
CRITIC_STEPS = 2
"""SAO's K: critic updates per policy update."""


@dataclass(frozen=True)
class PolicyLossStats:
    masked_low_fraction: float
    """Share of policy tokens dropped because r <= 1 - eps_low."""
    masked_high_fraction: float
    """Share of policy tokens dropped because r >= 1 + eps_high."""
    mean_ratio: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def double_sided_mask(ratio: torch.Tensor, eps_low: float, eps_high: float) -> torch.Tensor:
    """SAO's band (arXiv 2607.07508): 1.0 where `1 - eps_low < ratio < 1 + eps_high`, else 0.0.

    Strict on both sides: a ratio exactly on a bound is dropped, as `f(r)` in the paper."""
    return ((ratio > 1.0 - eps_low) & (ratio < 1.0 + eps_high)).to(ratio.dtype)


def eps_for_domain(domain: str) -> tuple[float, float]:
    """SAO's (eps_low, eps_high) for `coding` (0.8, 3.0) or `math` (0.3, 5.0) (arXiv 2607.07508)."""
    try:
        return SAO_EPS[domain]
    except KeyError:
        raise ValueError(f"no SAO mask band for domain {domain!r}; known: {sorted(SAO_EPS)}") from None


AGGREGATIONS = ("token_mean", "sequence_mean", "sequence_sum_norm")


def aggregate(
    values: torch.Tensor, mask: torch.Tensor, mode: str = "token_mean", *, horizon: int | None = None
) -> torch.Tensor:
    """Reduce [batch, time] per-token `values` over `mask`ed tokens to a scalar.

    - `token_mean` (SAO's and DAPO's default, arXiv 2503.14476): mean over every masked-in
      token of the batch, so long sequences weigh more.
    - `sequence_mean` (original GRPO): mean per sequence, then over sequences with tokens.
    - `sequence_sum_norm` (Dr.GRPO, arXiv 2503.20783): per-sequence token *sum* divided by a
      constant `horizon` (default: the padded length T), then mean over sequences with
      tokens; no length normalisation, hence no length bias.
    """
    mask = mask.to(values.dtype)
    if mode == "token_mean":
        return (values * mask).sum() / mask.sum().clamp(min=1.0)
    if mode in ("sequence_mean", "sequence_sum_norm"):
        if mode == "sequence_mean":
            per_sequence = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        else:
            per_sequence = (values * mask).sum(-1) / float(horizon or mask.shape[-1])
        has_tokens = (mask.sum(-1) > 0).to(values.dtype)
        return (per_sequence * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)
    raise ValueError(f"unknown loss aggregation {mode!r}; use one of {', '.join(AGGREGATIONS)}")


def sao_policy_loss(
    logp: torch.Tensor,
    logp_rollout: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = CODING_EPS[0],
    eps_high: float = CODING_EPS[1],
    aggregation: str = "token_mean",
    *,
    horizon: int | None = None,
) -> tuple[torch.Tensor, PolicyLossStats]:
    """SAO's policy loss (arXiv 2607.07508) over [batch, time] tensors; `mask` marks policy tokens.

    `L = -mean_t[sg(f(r_t)) * A_t * logp_t]` with `f(r) = r` inside the band and 0 outside:
    a dropped token contributes 0 to the sum but still counts in the mean, as the paper's
    formula reads (dividing by the kept tokens only would scale the step up by 1/(1 - dropped
    share) exactly when the policy has drifted most). It also makes the loss of a micro-batch
    proportional to its policy tokens, which the learner's gradient accumulation assumes.
    `horizon` is Dr.GRPO's constant divisor for `sequence_sum_norm` (see `aggregate`).
    """
    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp.detach() - logp_rollout)
    keep = double_sided_mask(ratio, eps_low, eps_high) * mask
    # torch.where, not a product with the mask: an overflowed ratio (inf) times 0 would be NaN.
    coefficient = torch.where(keep > 0, ratio * advantages, torch.zeros_like(ratio)).detach()
    loss = aggregate(-coefficient * logp, mask, aggregation, horizon=horizon)
    n = mask.sum().clamp(min=1.0)
    stats = PolicyLossStats(
        masked_low_fraction=float(((ratio <= 1.0 - eps_low).to(logp.dtype) * mask).sum() / n),
        masked_high_fraction=float(((ratio >= 1.0 + eps_high).to(logp.dtype) * mask).sum() / n),
        mean_ratio=float((ratio * mask).sum() / n),
    )
    return loss, stats


def length_adaptive_lambda(length: int, alpha: float = 1.5) -> float:
    """SAO's policy GAE lambda for a response of `length` policy tokens: 1 - 1/(alpha*l).

    From VAPO's length-adaptive GAE (arXiv 2504.05118), used by SAO (arXiv 2607.07508) with
    alpha = 1.5. Long responses get lambda near 1 (low bias over many tokens); a response
    of one token gets 1 - 1/alpha. Clamped at 0 for alpha * l < 1.
    """
    return max(0.0, 1.0 - 1.0 / (alpha * max(length, 1)))


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    gamma: float,
    lam: float,
    bootstrap_value: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (arXiv 1506.02438) over one sequence of policy tokens.

    `rewards[t]` and `values[t]` are per policy token, in order; observation tokens are
    already removed, which is what makes this skip-observation GAE. The value after the
    last token is `bootstrap_value` (0 when the episode terminated). Returns
    (advantages, returns) with `returns = advantages + values`.
    """
    advantages = torch.tensor(
        _reverse_discounted_sum(_td_errors(rewards, values, gamma, float(bootstrap_value)), gamma * lam),
        dtype=values.dtype,
        device=values.device,
    )
    return advantages, advantages + values


def _td_errors(rewards: torch.Tensor, values: torch.Tensor, gamma: float, bootstrap_value: float) -> list[float]:
    """delta_t = r_t + gamma * V_{t+1} - V_t over one compressed sequence, V_n = bootstrap_value."""
    values = values.detach().double().cpu()
    next_values = torch.cat([values[1:], torch.tensor([bootstrap_value], dtype=torch.float64)])
    return (rewards.detach().double().cpu() + gamma * next_values - values).tolist()


def _reverse_discounted_sum(deltas: list[float], discount: float) -> list[float]:
    """A_t = delta_t + discount * A_{t+1}, A_n = 0.

    A scalar loop over Python floats: the recursion is sequential, and per-element tensor
    indexing would cost more than the arithmetic (a closed form via cumsum of discount^-t
    overflows for long sequences).
    """
    out = [0.0] * len(deltas)
    running = 0.0
    for t in range(len(deltas) - 1, -1, -1):
        running = deltas[t] + discount * running
        out[t] = running
    return out


def action_index(policy_mask: torch.Tensor) -> torch.Tensor:
    """Index of the action (maximal run of policy tokens) each token belongs to; -1 elsewhere.

    Works on [..., T]. An action is a contiguous run of policy tokens; the environment's
    observation tokens separate actions.
    """
    mask = policy_mask.bool()
    previous = torch.zeros_like(mask)
    previous[..., 1:] = mask[..., :-1]
    starts = mask & ~previous
    index = starts.long().cumsum(-1) - 1
    return torch.where(mask, index, torch.full_like(index, -1))


def place_turn_rewards(
    policy_mask: torch.Tensor, turn_rewards: Sequence[float] | torch.Tensor, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Per-token rewards for one [T] sequence: turn i's reward on the last token of action i.

    Actions are the runs of `action_index`. A multi-turn episode with a single final reward
    passes zeros for every turn but the last.
    """
    index = action_index(policy_mask)
    n_actions = int(index.max()) + 1 if index.numel() else 0
    turn_rewards = torch.as_tensor(turn_rewards, dtype=dtype, device=policy_mask.device).reshape(-1)
    if turn_rewards.numel() != n_actions:
        raise ValueError(f"got {turn_rewards.numel()} turn rewards for a sequence with {n_actions} actions")
    mask = policy_mask.bool()
    following = torch.zeros_like(mask)
    following[:-1] = mask[1:]
    last_tokens = (mask & ~following).nonzero().squeeze(-1)
    rewards = torch.zeros(policy_mask.shape, dtype=dtype, device=policy_mask.device)
    rewards[last_tokens] = turn_rewards
    return rewards


def length_adaptive_lambdas(policy_mask: torch.Tensor, alpha: float = 1.5) -> list[float]:
    """`length_adaptive_lambda` per row of a [B, T] policy mask, l = the row's policy tokens."""
    return [length_adaptive_lambda(int(n), alpha) for n in policy_mask.bool().sum(-1).tolist()]


def skip_observation_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    policy_mask: torch.Tensor,
    gamma: float,
    lam: float | Sequence[float],
    *,
    final_value: float | torch.Tensor = 0.0,
    truncated: bool | torch.Tensor = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SAO's skip-observation GAE over full sequences (arXiv 2607.07508).

    Inputs are [B, T] (or [T]) with the environment's observation tokens interleaved;
    `policy_mask` marks the tokens the policy sampled, `values[t]` is the critic's value of the
    state in which policy token t was chosen, and `rewards[t]` is the reward after token t,
    which must be 0 off policy tokens (put a turn's reward on the last token of its action,
    see `place_turn_rewards`). Values at observation tokens are never read: the last token of
    action i bootstraps from the first token of action i+1,
    `delta = r + gamma * V(a_{i+1,0}) - V(a_{i,N})`, `A(a_{i,N}) = delta + gamma*lam*A(a_{i+1,0})`.

    `lam` is one value or one per row (`length_adaptive_lambdas` for the policy, 1.0 for the
    critic). The value after the last action is `final_value` (the critic's value of the
    state after the last observation) only where `truncated`: an episode cut by a limit still
    has a future, one the agent ended (terminated) has none. Where the paper is silent: it
    does not discuss truncation; this is standard GAE.

    Returns (advantages, returns = advantages + values), both 0 off policy tokens; on each
    row it equals `gae` over that row's policy tokens.
    """
    squeeze = values.dim() == 1
    if squeeze:
        rewards, values, policy_mask = rewards[None], values[None], policy_mask[None]
    if not (rewards.shape == values.shape == policy_mask.shape):
        raise ValueError(
            f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and policy_mask "
            f"{tuple(policy_mask.shape)} must have one shape"
        )
    mask = policy_mask.bool()
    if bool((rewards[~mask] != 0).any()):
        raise ValueError("a reward sits on a non-policy token; put it on the last token of the action it follows")
    batch = values.shape[0]
    lams = [float(lam)] * batch if isinstance(lam, (int, float)) else [float(x) for x in lam]
    finals = torch.as_tensor(final_value, dtype=torch.float64).expand(batch).tolist()
    cut = torch.as_tensor(truncated, dtype=torch.bool).expand(batch).tolist()
    if len(lams) != batch:
        raise ValueError(f"got {len(lams)} lambdas for {batch} sequences")

    advantages = torch.zeros_like(values)
    for row in range(batch):
        positions = mask[row].nonzero().squeeze(-1)
        if positions.numel() == 0:
            continue
        bootstrap = finals[row] if cut[row] else 0.0
        deltas = _td_errors(rewards[row, positions], values[row, positions], gamma, bootstrap)
        advantages[row, positions] = torch.tensor(
            _reverse_discounted_sum(deltas, gamma * lams[row]), dtype=values.dtype, device=values.device
        )
    returns = torch.where(mask, advantages + values, torch.zeros_like(values))
    if squeeze:
        return advantages[0], returns[0]
    return advantages, returns


def freeze_attention(model: nn.Module) -> int:
    """Set `requires_grad=False` on the attention parameters of a Hugging Face decoder.

    SAO (arXiv 2607.07508) optionally freezes the critic's attention layers during RL. An
    attention block is a module whose class name ends in `Attention` (Qwen2Attention,
    LlamaAttention, ...) or whose attribute name is `self_attn`/`attn`/`attention`; all its
    parameters are frozen (q/k/v/o projections and their biases, q/k norms where present).
    The paper does not say whether the pre-attention norm counts; we leave norms outside the
    attention module trainable. Returns the number of parameter tensors frozen; raises when
    the model has no recognisable attention block, since a silent no-op would go unnoticed.
    """
    names = {"self_attn", "attn", "attention", "self_attention"}
    frozen: set[int] = set()
    count = 0
    for name, module in model.named_modules():
        if not (type(module).__name__.endswith("Attention") or name.rsplit(".", 1)[-1] in names):
            continue
        for parameter in module.parameters():
            # Nested matches (an `attn` inside an `...Attention`) must not count twice.
            if id(parameter) not in frozen:
                frozen.add(id(parameter))
                parameter.requires_grad_(False)
                count += 1
    if count == 0:
        raise ValueError(f"{type(model).__name__} has no attention module to freeze")
    return count


def value_loss(
    values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, aggregation: str = "token_mean"
) -> torch.Tensor:
    """Half squared error of token values against their returns, over `mask`ed tokens.

    SAO's critic loss (arXiv 2607.07508): token-level values regressed on lambda = 1 returns,
    unclipped (the paper mentions no value clipping; PPO's clipped form is
    `ppo.clipped_value_loss`)."""
    return aggregate(0.5 * (values - returns.detach()) ** 2, mask, aggregation)
