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
from trainer.inference.trajectory import Trajectory
from trainer.learner.tree import is_packed, packed_inputs, unpack


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
    logits: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    banned: tuple[int, ...] = (),
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """log pi(target) under `policy_logits(logits, banned) / temperature`, [B, T] from [B, T, V];
    with `rows` ([B, T] indices into the first axis of `logits` [N, V]: a packed prefix tree,
    `trainer.learner.tree`), target (b, t) is scored at `logits[rows[b, t]]`.
    A target that is a banned id (a value token spelled out in a prompt or an observation;
    the policy never samples one) gets 0, not -inf, so masked sums stay finite."""
    allowed = policy_logits(logits, banned)
    log_probs = torch.log_softmax(allowed / temperature, dim=-1)
    safe = targets
    if banned:
        is_banned = torch.isin(targets, torch.tensor(banned, device=targets.device))
        safe = torch.where(is_banned, torch.zeros_like(targets), targets)
    if rows is None:
        picked = log_probs.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    else:
        picked = log_probs[rows, safe]
    return torch.where(is_banned, torch.zeros_like(picked), picked) if banned else picked


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


def batch_logprobs(
    model: nn.Module, tensors: dict[str, torch.Tensor], temperature: float = 1.0, banned: tuple[int, ...] = ()
) -> torch.Tensor:
    """`token_logprobs` of a micro-batch, [B, T-1]: flat, or once per distinct prefix when the
    micro-batch is a packed prefix tree (the log-softmax too runs on the packed row)."""
    if not is_packed(tensors):
        return token_logprobs(model, tensors["input_ids"], tensors["attention_mask"], temperature, banned)
    logits = model(**packed_inputs(tensors)).logits[0].float()
    rows = tensors["tree_index"][:, :-1]
    return target_logprobs(logits, tensors["input_ids"][:, 1:], temperature, banned, rows=rows)


def batch_logits(model: nn.Module, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """A micro-batch's logits [B, T, V] in the flat layout, computed flat or packed."""
    if not is_packed(tensors):
        mask = causal_attention_mask(tensors["attention_mask"])
        return model(input_ids=tensors["input_ids"], attention_mask=mask).logits
    return unpack(model(**packed_inputs(tensors)).logits, tensors)


def batch_values(critic: nn.Module, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    """A `ValueModel`'s values of a micro-batch, [B, T], computed flat or packed."""
    if not is_packed(tensors):
        return critic(tensors["input_ids"], tensors["attention_mask"])
    return unpack(critic(**packed_inputs(tensors)), tensors)


@torch.no_grad()
def gold_probability(
    policy: nn.Module,
    demonstrations: list[Trajectory],
    temperature: float = 1.0,
    banned: tuple[int, ...] = (),
    device: torch.device | str = "cpu",
) -> float:
    """Mean over `demonstrations` of P(the policy samples their exact actions) at
    `temperature`: a deterministic measure of progress on the tasks, where the sampled
    success rate of a few episodes per step is noise (its gradient is P x the supervised
    gradient toward the gold action). Every rank must call it when sharded."""
    total = 0.0
    for demo in demonstrations:
        ids = torch.tensor([demo.token_ids], device=device)
        logp = token_logprobs(policy, ids, torch.ones_like(ids), temperature, banned)[0]
        mask = torch.tensor(demo.policy_mask[1:], device=device)
        total += float(torch.exp((logp * mask).sum()))
    return total / len(demonstrations)
