"""SAPO (arXiv 2608.19842): one model is policy and value, through two reserved vocabulary rows.

Two rows appended by `trainer.inference.models.reserve_value_tokens` (w+ and w-) carry the
readout `V = r_max * clip((z_w+ - z_w-) / tau_v, -1, 1)`: V before each turn is read from
the logits that choose its first token, Q after it from the logits at its last token. The
step: one forward gives the policy logprobs and every V/Q readout -> turn-level GAE
(`gamma` and `gae_lambda`, default 0.95, count per turn here, not per token; the reward sits
on the last turn, which ends the episode) -> turn advantages normalised over the whole batch
(moments all-reduced over micro-batches and ranks) and broadcast to the turn's tokens -> one
update of `L_clip + c_V L_V + c_Q L_Q + beta KL - c_H H`, token terms weighted by token
share, turn terms by turn share, so accumulation gives exactly the full-batch loss. When the
batch needs more than one micro-batch, a no-grad pass reads the values first (advantage
normalisation needs all of them before any loss); a one-micro-batch step is the single
forward, whose output `targets` keeps for `micro_loss`.

The KL's reference is the rollout policy (the engine's recorded logprobs), not a frozen
copy of the initial model: a frozen copy would cost a second model's memory and a second
forward per step, which is what the shared backbone exists to save, and SAPO is
single-rollout and near on-policy, so the KL to the sampler acts as a trust-region penalty
beside the clip. The value rows are banned from the policy (`trainer.learner.logprobs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from trainer import distributed
from trainer.algorithms.ppo import token_entropy
from trainer.algorithms.sapo import (
    TurnTargets,
    broadcast_turns,
    normalize_turn_advantages,
    sapo_loss_terms,
    sapo_value,
    turn_gae,
    turn_positions,
)
from trainer.inference.models import value_token_ids
from trainer.inference.trajectory import Trajectory
from trainer.learner.batching import MicroBatch, PreparedBatch, loss_weight
from trainer.learner.logprobs import batch_logits, policy_logits, target_logprobs
from trainer.learner.objectives.base import MicroLoss, Models, NoCritic, Selection, StepTargets

if TYPE_CHECKING:
    from trainer.config import AlgorithmConfig

Forward = tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]
"""(policy logprobs [B, T-1], value readout [B, T], logits [B, T-1, V]); see `sapo_forward`."""


@dataclass
class SapoTarget:
    """One micro-batch's turn layout and targets, computed before the update."""

    layout: dict[str, torch.Tensor]
    """`turn_layout`'s tensors."""
    turns: TurnTargets
    """Turn-level GAE (advantages before normalisation, returns, Q targets), [B, N]."""
    advantages: torch.Tensor
    """Normalised turn advantages broadcast to each turn's tokens, [B, T-1]."""
    total_turns: float
    """Turns of the whole batch (all ranks): the turn terms' denominator."""
    forward: Forward | None = None
    """A one-micro-batch step's forward with grad, reused by the loss (then dropped)."""


def checked_value_token_ids(policy: torch.nn.Module, ids: tuple[int, int] | None, name: str) -> tuple[int, int]:
    """SAPO's (w+, w-) ids: given, or recorded by `reserve_value_tokens`; validated."""
    ids = tuple(ids) if ids is not None else value_token_ids(policy)
    if ids is None:
        raise ValueError(
            f"algorithm {name!r} reads values from two reserved tokens: call "
            "trainer.inference.models.reserve_value_tokens(policy, tokenizer) first, or pass value_token_ids"
        )
    rows = policy.get_output_embeddings().weight.shape[0]
    if len(set(ids)) != 2 or not all(0 <= i < rows for i in ids):
        raise ValueError(f"value_token_ids {ids} must be two distinct ids below the vocabulary size {rows}")
    return int(ids[0]), int(ids[1])


def sapo_forward(
    policy: torch.nn.Module,
    tensors: dict[str, torch.Tensor],
    value_token_ids: tuple[int, int],
    *,
    r_max: float,
    tau_v: float,
    temperature: float = 1.0,
    values_only: bool = False,
) -> Forward:
    """One forward: (policy logprobs [B, T-1] with the value tokens banned, the value readout
    at every position [B, T], the logits [B, T-1, V] for the entropy); with `values_only`,
    just the readout."""
    logits = batch_logits(policy, tensors).float()
    plus, minus = value_token_ids
    readout = sapo_value(logits, plus, minus, r_max=r_max, tau=tau_v)
    if values_only:
        return None, readout, None
    shifted = logits[:, :-1]
    logp = target_logprobs(shifted, tensors["input_ids"][:, 1:], temperature, value_token_ids)
    return logp, readout, shifted


def turn_layout(group: list[Trajectory], tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per turn of each row ([B, N], right-padded): the logit positions of V (before the
    response) and Q (its last token), which turns are real, rewards (the trajectory's on
    its last turn) and dones (the last turn ends the episode: graded, no bootstrap); and
    each token's turn, [B, T-1] in the learner's target frame (-1 off policy tokens)."""
    # Back to the token frame: position 0 is never a policy token here (`padded_batch` drops it).
    token_mask = torch.nn.functional.pad(tensors["policy_mask"], (1, 0))
    rows = [turn_positions(mask) for mask in token_mask]
    # At least one (masked) turn: a padding micro-batch has none, and gathers need a column.
    size, width = token_mask.shape[0], max([1] + [len(v) for v, _, _ in rows])
    device = token_mask.device
    layout = {
        "v_index": torch.zeros((size, width), dtype=torch.long, device=device),
        "q_index": torch.zeros((size, width), dtype=torch.long, device=device),
        "turn_mask": torch.zeros((size, width), dtype=torch.bool, device=device),
        "rewards": torch.zeros((size, width), device=device),
        "dones": torch.zeros((size, width), dtype=torch.bool, device=device),
        "turn_of_token": torch.stack([index for _, _, index in rows])[:, 1:],
    }
    for row, (v_positions, q_positions, _) in enumerate(rows):
        count = len(v_positions)
        if not count:
            continue
        layout["v_index"][row, :count] = v_positions
        layout["q_index"][row, :count] = q_positions
        layout["turn_mask"][row, :count] = True
        layout["rewards"][row, count - 1] = group[row].reward
        layout["dones"][row, count - 1] = True
    return layout


class SapoObjective(NoCritic):
    """Turn-level GAE over the shared readout and SAPO's combined loss; no critic model (its
    value loss is a term of the policy's, reported as `value_loss`)."""

    def __init__(self, algorithm: AlgorithmConfig, aggregation: str, hyper: dict) -> None:
        self.config = algorithm.sapo
        self.gamma = algorithm.gamma
        self.lam = algorithm.gae_lambda  # resolved: 0.95 unless set (`trainer.resolve`)
        self.aggregation = aggregation
        self.clip = {k: hyper[k] for k in ("clip_low", "clip_high") if k in hyper}

    def forward(self, models: Models, tensors: dict[str, torch.Tensor], values_only: bool = False) -> Forward:
        return sapo_forward(
            models.policy,
            tensors,
            models.value_token_ids,
            r_max=self.config.r_max,
            tau_v=self.config.tau_v,
            temperature=models.temperature,
            values_only=values_only,
        )

    def select(self, trajectories: list[Trajectory]) -> Selection:
        return Selection(trajectories)

    def targets(self, models: Models, selection: Selection, batch: PreparedBatch) -> StepTargets:
        micro_batches = batch.micro_batches
        layouts = [turn_layout(micro.trajectories, micro.tensors) for micro in micro_batches]
        n_turns = distributed.all_reduce(sum(float(layout["turn_mask"].sum()) for layout in layouts))
        # Values before the update. One micro-batch (on every rank: `prepare` pads the
        # counts): its forward with grad is reused for the loss. Several: a no-grad pass
        # first, since normalising advantages needs every turn of the batch.
        single = len(micro_batches) == 1
        forward = self.forward(models, micro_batches[0].tensors) if single else None
        if single:
            readouts = [forward[1].detach()]
        else:
            with torch.no_grad():
                readouts = [self.forward(models, micro.tensors, values_only=True)[1] for micro in micro_batches]
        turns = []
        for layout, readout in zip(layouts, readouts, strict=True):
            values = readout.gather(1, layout["v_index"])
            turns.append(
                turn_gae(layout["rewards"], values, layout["dones"], layout["turn_mask"], self.gamma, self.lam)
            )
        # Moments of the whole batch's turn advantages (two all-reduces: exact, not sum of squares).
        real = [target.advantages[layout["turn_mask"]] for target, layout in zip(turns, layouts, strict=True)]
        count = max(n_turns, 1.0)
        mean = distributed.all_reduce(sum(float(a.sum()) for a in real)) / count
        variance = distributed.all_reduce(sum(float(((a - mean) ** 2).sum()) for a in real)) / count
        micro = []
        for layout, target in zip(layouts, turns, strict=True):
            normalised = normalize_turn_advantages(
                target.advantages, layout["turn_mask"], moments=(mean, variance**0.5)
            )
            advantages = broadcast_turns(normalised, layout["turn_of_token"])
            micro.append(SapoTarget(layout, target, advantages, n_turns, forward))
        return StepTargets(micro, metrics={"turns": int(n_turns)})

    def micro_loss(self, models: Models, micro: MicroBatch, target: SapoTarget, batch: PreparedBatch) -> MicroLoss:
        tensors = micro.tensors
        forward, target.forward = target.forward, None  # the loss's graph holds what it needs
        logp, readout, logits = forward if forward is not None else self.forward(models, tensors)
        layout, config, world = target.layout, self.config, distributed.world_size()
        turn_mask, mask = layout["turn_mask"], tensors["policy_mask"]
        values = readout.gather(1, layout["v_index"])
        entropy = None
        if config.c_h:
            entropy = token_entropy(policy_logits(logits, models.banned) / models.temperature)
        terms = sapo_loss_terms(
            logp,
            tensors["rollout_logp"],
            target.advantages,
            mask,
            values=values,
            value_targets=target.turns.returns,
            q_values=readout.gather(1, layout["q_index"]),
            q_targets=target.turns.q_targets,
            turn_mask=turn_mask,
            logp_ref=tensors["rollout_logp"] if config.beta else None,
            entropy=entropy,
            aggregation=self.aggregation,
            horizon=batch.horizon,
            **self.clip,
        )
        token_weight = loss_weight(tensors, batch.totals, self.aggregation)
        turn_weight = float(turn_mask.sum()) / max(target.total_turns, 1.0) * world
        loss = token_weight * (terms.policy + config.beta * terms.kl - config.c_h * terms.entropy) + turn_weight * (
            config.c_v * terms.value + config.c_q * terms.q
        )
        sums = {}
        for key, term, weight in (
            ("loss", loss, 1.0),
            ("policy_loss", terms.policy, token_weight),
            ("value_loss", terms.value, turn_weight),
            ("q_loss", terms.q, turn_weight),
            ("kl", terms.kl, token_weight),
            ("entropy", terms.entropy, token_weight),
        ):
            sums[key] = float(term.detach()) * weight / world
        turns = turn_mask.float()
        sums["value_mean"] = float((values.detach() * turns).sum()) / max(target.total_turns, 1.0)
        sums["return_mean"] = float((target.turns.returns * turns).sum()) / max(target.total_turns, 1.0)
        return MicroLoss(loss=loss, finite=bool(torch.isfinite(loss)), sums=sums, stats=terms.stats)
