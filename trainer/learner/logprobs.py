"""Token logprobs as the policy samples them: value tokens banned, at a temperature.

Under SAPO (arXiv 2608.19842) two vocabulary rows appended by
`trainer.inference.models.reserve_value_tokens` (w+ and w-) carry the value readout. Both
rows are banned from the policy: the learner's log-softmax never sees them (exactly the
distribution the hf engine samples from with the same ban), so importance ratios stay exact
and the rows get gradient from the value terms alone.
"""

from __future__ import annotations

import torch
from torch import nn

from trainer.inference.models import causal_attention_mask


def policy_logits(logits: torch.Tensor, banned: tuple[int, ...] = ()) -> torch.Tensor:
    """The logits the policy samples from: `banned` ids (SAPO's value tokens) get no mass.

    Banned ids at the end of the vocabulary (where `reserve_value_tokens` puts them) are
    sliced off, a view with no copy; elsewhere they are set to -inf. Either way the
    log-softmax equals the hf engine's, which bans the same ids with -inf."""
    if not banned:
        return logits
    vocab = logits.shape[-1]
    if sorted(banned) == list(range(vocab - len(banned), vocab)):
        return logits[..., : vocab - len(banned)]
    return logits.index_fill(-1, torch.tensor(sorted(banned), device=logits.device), -torch.inf)


def target_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0, banned: tuple[int, ...] = ()
) -> torch.Tensor:
    """log pi(target) under `policy_logits(logits, banned) / temperature`, [B, T] from [B, T, V].
    A target that is a banned id (a value token spelled out in a prompt or an observation;
    the policy never samples one) gets 0, not -inf, so masked sums stay finite."""
    allowed = policy_logits(logits, banned)
    log_probs = torch.log_softmax(allowed / temperature, dim=-1)
    if not banned:
        return log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    is_banned = torch.isin(targets, torch.tensor(banned, device=targets.device))
    safe = torch.where(is_banned, torch.zeros_like(targets), targets)
    picked = log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    return torch.where(is_banned, torch.zeros_like(picked), picked)


def token_logprobs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    temperature: float = 1.0,
    banned: tuple[int, ...] = (),
) -> torch.Tensor:
    """log pi(token t+1 | tokens <= t) for every position, shape [B, T-1]; `banned` ids as in
    `policy_logits`. A right-padded mask is dropped (`causal_attention_mask`)."""
    mask = causal_attention_mask(attention_mask)
    logits = model(input_ids=input_ids, attention_mask=mask).logits[:, :-1].float()
    return target_logprobs(logits, input_ids[:, 1:], temperature, banned)
