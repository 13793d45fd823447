"""The learner: policy and critic updates from finished trajectories.

One `step(trajectories)` with the default algorithm, SAO: values from the critic (no grad)
-> skip-observation GAE per trajectory (length-adaptive lambda for the policy, lambda = 1
for the critic) -> one policy update with SAO's double-sided masked loss ->
`critic_steps` critic updates (SAO: K = 2) -> version + 1. The baselines are selected by
name (`trainer.algorithms.registry`): `ppo` and `decoupled_ppo` use the critic with a fixed
GAE lambda and the clipped value loss; `grpo`, `dr_grpo` and `dapo` use group-normalised
advantages over the rollouts of each `group_id` and no critic (`dapo` also drops groups
whose rewards are all equal).

`sapo` (arXiv 2608.19842) has no critic model: one model is policy and value. Two vocabulary
rows appended by `trainer.inference.models.reserve_value_tokens` (w+ and w-) carry the readout
`V = r_max * clip((z_w+ - z_w-) / tau_v, -1, 1)`: V before each turn is read from the logits
that choose its first token, Q after it from the logits at its last token. The step: one
forward gives the policy logprobs and every V/Q readout -> turn-level GAE (`gamma` and
`gae_lambda`, default 0.95, count per turn here, not per token; the reward sits on the last
turn, which ends the episode) -> turn advantages normalised over the whole batch (moments
all-reduced over micro-batches and ranks) and broadcast to the turn's tokens -> one update of
`L_clip + c_V L_V + c_Q L_Q + beta KL - c_H H`, token terms weighted by token share, turn
terms by turn share, so accumulation gives exactly the full-batch loss. When the batch needs
more than one micro-batch, a no-grad pass reads the values first (advantage normalisation
needs all of them before any loss); a one-micro-batch step is the single forward.
Both rows are banned from the policy: the learner's log-softmax never sees them (exactly
the distribution the hf engine samples from with the same ban), so importance ratios stay
exact and the rows get gradient from the value terms alone. The KL's reference is the
rollout policy (the engine's recorded logprobs), not a frozen copy of the initial model:
a frozen copy would cost a second model's memory and a second forward per step, which is
what the shared backbone exists to save, and SAPO is single-rollout and near on-policy, so
the KL to the sampler acts as a trust-region penalty beside the clip. The value-token ids
are written to `state.json` and to the exported config (`value_token_ids`), and `load`
refuses a checkpoint whose ids differ.

Scale: launched by `torchrun`, each rank takes every world-size-th trajectory, the models
are FSDP2-sharded (`trainer.distributed`), and gradients are averaged across ranks. On
each rank, trajectories are packed into micro-batches by a token budget (longest first)
and gradients accumulate over them; every micro-batch's loss is weighted so the sum is
exactly the loss over the whole global batch. Ranks run the same number of micro-batches
(padding with empty ones) because each FSDP forward is a collective.

Guards: a non-finite loss or gradient norm skips the step on every rank, is counted, and
after `max_bad_steps` in a row raises `NonFiniteError`.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import torch
from torch import nn

from trainer import distributed
from trainer.algorithms import (
    NEEDS_PROX,
    clipped_value_loss,
    dynamic_sampling_mask,
    freeze_attention,
    gae,
    get_advantage_estimator,
    get_algorithm,
    get_policy_loss,
    length_adaptive_lambda,
    value_loss,
)
from trainer.algorithms.ppo import token_entropy
from trainer.algorithms.sapo import (
    broadcast_turns,
    normalize_turn_advantages,
    sapo_loss_terms,
    sapo_value,
    turn_gae,
    turn_positions,
)
from trainer.inference.models import ValueModel
from trainer.inference.models import value_token_ids as recorded_value_token_ids
from trainer.inference.trajectory import Trajectory


class CheckpointError(RuntimeError):
    """A checkpoint is missing or unreadable; the message names the folder."""


class NonFiniteError(RuntimeError):
    """Too many consecutive steps had a non-finite loss or gradient norm."""


def pack_by_tokens(lengths: list[int], budget: int) -> list[list[int]]:
    """Group sequence indices into micro-batches whose padded size (longest x count) fits
    `budget` tokens, longest first. A sequence longer than the budget gets its own."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for index in order:
        if batches and lengths[batches[-1][0]] * (len(batches[-1]) + 1) <= budget:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def _batch(trajectories: list[Trajectory], pad_id: int, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Right-padded [B, T] tensors; per-token fields are shifted to align with targets."""
    length = max(len(t) for t in trajectories)
    size = len(trajectories)
    input_ids = torch.full((size, length), pad_id, dtype=torch.long)
    attention = torch.zeros((size, length), dtype=torch.long)
    policy = torch.zeros((size, length), dtype=torch.bool)
    rollout_logp = torch.zeros((size, length), dtype=torch.float32)
    for row, traj in enumerate(trajectories):
        n = len(traj)
        input_ids[row, :n] = torch.tensor(traj.token_ids)
        attention[row, :n] = 1
        policy[row, :n] = torch.tensor(traj.policy_mask)
        rollout_logp[row, :n] = torch.tensor(traj.logprobs)
    batch = {
        "input_ids": input_ids,
        "attention_mask": attention,
        # Token t+1 is predicted at position t: everything below is indexed by target.
        "policy_mask": policy[:, 1:],
        "rollout_logp": rollout_logp[:, 1:],
    }
    return {k: v.to(device) for k, v in batch.items()}


def _empty_batch(pad_id: int, device) -> dict[str, torch.Tensor]:
    """A two-token micro-batch with no policy token: keeps ranks' collectives in step."""
    return {
        "input_ids": torch.full((1, 2), pad_id, dtype=torch.long, device=device),
        "attention_mask": torch.ones((1, 2), dtype=torch.long, device=device),
        "policy_mask": torch.zeros((1, 1), dtype=torch.bool, device=device),
        "rollout_logp": torch.zeros((1, 1), device=device),
    }


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
    `policy_logits`."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    return target_logprobs(logits, input_ids[:, 1:], temperature, banned)


class Learner:
    def __init__(
        self,
        policy: nn.Module,
        critic: ValueModel | None,
        *,
        pad_id: int,
        algorithm: str = "sao",
        lr: float = 1e-6,
        critic_lr: float = 5e-6,
        eps_low: float = 0.8,
        eps_high: float = 3.0,
        critic_steps: int = 2,
        gamma: float = 1.0,
        lambda_alpha: float = 1.5,
        critic_lambda: float = 1.0,
        temperature: float = 1.0,
        max_grad_norm: float = 1.0,
        aggregation: str | None = None,
        clip_low: float | None = None,
        clip_high: float | None = None,
        gae_lambda: float | None = None,
        freeze_critic_attention: bool = False,
        value_token_ids: tuple[int, int] | None = None,
        tau_v: float = 1.0,
        r_max: float = 1.0,
        c_v: float = 0.5,
        c_q: float = 0.5,
        beta: float = 0.001,
        c_h: float = 0.0,
        token_budget: int = 16384,
        mesh=None,
        bf16: bool = False,
        activation_checkpointing: bool = False,
        max_bad_steps: int = 3,
    ) -> None:
        self.algorithm = algorithm
        self.spec = get_algorithm(algorithm)
        self.loss_fn = get_policy_loss(self.spec.policy_loss)
        preset = getattr(self.loss_fn, "keywords", {})
        self.aggregation = aggregation or preset.get("aggregation", "token_mean")
        if self.aggregation not in ("token_mean", "sequence_mean", "sequence_sum_norm"):
            raise ValueError(f"unknown loss aggregation {self.aggregation!r}")
        self.loss_hyper: dict = {"aggregation": self.aggregation}
        if self.spec.policy_loss == "sao":
            self.loss_hyper.update(eps_low=eps_low, eps_high=eps_high)
        else:
            self.loss_hyper.update(
                {k: v for k, v in (("clip_low", clip_low), ("clip_high", clip_high)) if v is not None}
            )
        if self.spec.critic == "separate" and critic is None:
            raise ValueError(f"algorithm {algorithm!r} needs a critic (a ValueModel)")
        # SAPO: the value lives in two reserved vocabulary rows of the policy itself.
        self.value_token_ids: tuple[int, int] | None = None
        if self.spec.critic == "shared":
            ids = tuple(value_token_ids) if value_token_ids is not None else recorded_value_token_ids(policy)
            if ids is None:
                raise ValueError(
                    f"algorithm {algorithm!r} reads values from two reserved tokens: call "
                    "trainer.inference.models.reserve_value_tokens(policy, tokenizer) first, or pass value_token_ids"
                )
            rows = policy.get_output_embeddings().weight.shape[0]
            if len(set(ids)) != 2 or not all(0 <= i < rows for i in ids):
                raise ValueError(f"value_token_ids {ids} must be two distinct ids below the vocabulary size {rows}")
            self.value_token_ids = (int(ids[0]), int(ids[1]))
        self.banned: tuple[int, ...] = self.value_token_ids or ()
        """Token ids the policy never samples; the learner's log-softmax leaves them out."""
        self.tau_v, self.r_max, self.c_v, self.c_q, self.beta, self.c_h = tau_v, r_max, c_v, c_q, beta, c_h
        critic = critic if self.spec.critic == "separate" else None
        if critic is not None and freeze_critic_attention:
            freeze_attention(critic)
        if activation_checkpointing:
            for model in (policy, *([critic.backbone] if critic is not None else [])):
                # transformers 5 renamed the switch; 4.x only has the old name.
                if hasattr(model, "activation_checkpointing_enable"):
                    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
                else:
                    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.device = (
            torch.device("cuda", torch.cuda.current_device())
            if mesh is not None and torch.cuda.is_available()
            else torch.device("cpu")
        )
        self.policy = distributed.shard(policy.to(self.device), mesh, bf16=bf16).train()
        self.critic = distributed.shard(critic.to(self.device), mesh, bf16=bf16).train() if critic else None
        self.sharded = mesh is not None
        self.pad_id = pad_id
        self.eps_low, self.eps_high = eps_low, eps_high
        self.critic_steps = critic_steps if self.critic is not None else 0
        self.gamma, self.lambda_alpha, self.critic_lambda = gamma, lambda_alpha, critic_lambda
        self.gae_lambda = gae_lambda
        self.temperature = temperature
        self.max_grad_norm = max_grad_norm
        self.token_budget = token_budget
        self.max_bad_steps = max_bad_steps
        self.policy_optimizer = torch.optim.AdamW(self.policy.parameters(), lr=lr)
        self.critic_optimizer = (
            torch.optim.AdamW([p for p in self.critic.parameters() if p.requires_grad], lr=critic_lr)
            if self.critic is not None
            else None
        )
        self.version = 0
        self.skipped_steps = 0
        self._bad_in_a_row = 0
        self._sequence_advantages: dict[int, float] = {}
        self._advantages: dict[str, float] = {}

    # -- batching -------------------------------------------------------------------------
    def _prepare(
        self, trajectories: list[Trajectory]
    ) -> tuple[list[tuple[list[Trajectory], dict]], tuple[float, float]]:
        """This rank's share, packed by token budget and padded to the ranks' common count,
        and the global (policy tokens, sequences with policy tokens) the losses average over."""
        local = trajectories[distributed.rank() :: distributed.world_size()]
        groups = [[local[i] for i in g] for g in pack_by_tokens([len(t) for t in local], self.token_budget)]
        batches = [(g, _batch(g, self.pad_id, self.device)) for g in groups]
        count = int(distributed.all_reduce(len(batches), "max"))
        batches += [([], _empty_batch(self.pad_id, self.device))] * (count - len(batches))
        totals = (
            distributed.all_reduce(sum(t.num_policy_tokens for t in local)),
            distributed.all_reduce(sum(1 for t in local if t.num_policy_tokens)),
        )
        return batches, totals

    def _weight(self, batch: dict, totals: tuple[float, float]) -> float:
        """This micro-batch's share of the global loss. FSDP averages gradients over ranks,
        so shares are scaled by the world size to make the result the global mean."""
        tokens, sequences = totals
        if self.aggregation == "token_mean":  # sequence_mean and sequence_sum_norm: per sequence
            share = float(batch["policy_mask"].sum()) / max(tokens, 1.0)
        else:
            share = float((batch["policy_mask"].sum(-1) > 0).sum()) / max(sequences, 1.0)
        return share * distributed.world_size()

    # -- advantages -----------------------------------------------------------------------
    def advantages(
        self, trajectories: list[Trajectory], batch: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Policy advantages, critic returns and the critic's values before the update,
        [B, T-1], zero off policy tokens.

        Every episode here ends with a graded submission, so the value after the last
        action is 0 (no bootstrap) whether the agent finished or a limit cut it short.
        Group methods read the per-sequence advantages `step` computed over the whole batch.
        """
        mask = batch["policy_mask"]
        if self.critic is None:
            per_sequence = [self._sequence_advantages[id(t)] for t in trajectories]
            advantages = torch.zeros(mask.shape, device=mask.device)
            if per_sequence:
                advantages = torch.tensor(per_sequence, device=mask.device)[:, None] * mask.float()
            zeros = torch.zeros_like(advantages)
            return advantages, zeros, zeros
        with torch.no_grad():
            values = self.critic(batch["input_ids"], batch["attention_mask"])[:, :-1].float()
        advantages = torch.zeros_like(values)
        returns = torch.zeros_like(values)
        for row, traj in enumerate(trajectories):
            positions = batch["policy_mask"][row].nonzero().squeeze(-1)
            if positions.numel() == 0:
                continue
            token_values = values[row, positions].cpu()
            rewards = torch.zeros_like(token_values)
            rewards[-1] = traj.reward
            lam = (
                self.gae_lambda
                if self.gae_lambda is not None
                else length_adaptive_lambda(positions.numel(), self.lambda_alpha)
            )
            advantages[row, positions] = gae(rewards, token_values, self.gamma, lam)[0].to(values.device)
            returns[row, positions] = gae(rewards, token_values, self.gamma, self.critic_lambda)[1].to(values.device)
        return advantages, returns, values

    # -- one update -----------------------------------------------------------------------
    def _apply(self, model: nn.Module, optimizer: torch.optim.Optimizer, losses_finite: bool) -> tuple[float, bool]:
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.max_grad_norm)
        grad_norm = float(grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm)
        finite = losses_finite and bool(torch.isfinite(torch.tensor(grad_norm)))
        finite = distributed.all_reduce(0.0 if finite else 1.0, "max") == 0.0
        if finite:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return grad_norm, finite

    def _group_advantages(self, trajectories: list[Trajectory]) -> tuple[list[Trajectory], int]:
        """For group methods: per-sequence advantages over each `group_id`'s rollouts in the
        whole batch (before it is split across ranks), and DAPO's zero-variance filter.
        Returns the trajectories to train on and how many were dropped."""
        rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float64)
        groups = [t.group_id or t.task_id for t in trajectories]
        dropped = 0
        if self.spec.dynamic_sampling:
            keep = dynamic_sampling_mask(rewards, groups).tolist()
            dropped = keep.count(False)
            trajectories = [t for t, k in zip(trajectories, keep, strict=True) if k]
            rewards = rewards[torch.tensor(keep, dtype=torch.bool)]
            groups = [g for g, k in zip(groups, keep, strict=True) if k]
        if trajectories:
            values = get_advantage_estimator(self.spec.advantages)(rewards, groups).tolist()
            # Keyed by object identity: valid for this step only, rebuilt every step.
            self._sequence_advantages = {id(t): v for t, v in zip(trajectories, values, strict=True)}
        return trajectories, dropped

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        self._advantages = {}
        if not trajectories:
            raise ValueError("learner step needs at least one trajectory")
        if self.spec.critic == "shared":
            return self._sapo_step(trajectories)
        dropped = 0
        if self.critic is None:
            trajectories, dropped = self._group_advantages(trajectories)
            if not trajectories:  # every group had equal rewards: nothing to learn from
                return {"zero_variance_dropped": dropped, "version": self.version, "skipped_steps": self.skipped_steps}
        micro_batches, totals = self._prepare(trajectories)
        hyper = dict(self.loss_hyper)
        if self.aggregation == "sequence_sum_norm":  # one horizon for the whole batch
            hyper["horizon"] = int(distributed.all_reduce(max(len(t) for t in trajectories) - 1, "max"))
        # Empty micro-batches run the critic too: under FSDP every forward is a collective.
        targets = [(batch, *self.advantages(group, batch)) for group, batch in micro_batches]
        for (group, _), (batch, advantages, _, _) in zip(micro_batches, targets, strict=True):
            mask = batch["policy_mask"].float()
            means = ((advantages * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).tolist()
            for trajectory, mean in zip(group, means, strict=False):
                self._advantages[trajectory.trajectory_id] = mean  # curricula read learnability from it

        # Policy: one step, gradients accumulated over micro-batches.
        stats_sum: dict[str, float] = {}
        policy_loss, finite = 0.0, True
        for batch, advantages, _, _ in targets:
            logp = token_logprobs(self.policy, batch["input_ids"], batch["attention_mask"], self.temperature)
            # The optimizer steps only after every micro-batch, so the current weights are the
            # proximal policy of the decoupled objective: no extra forward is needed.
            prox = logp.detach() if self.spec.policy_loss in NEEDS_PROX else None
            loss, stats = self.loss_fn(
                logp, batch["rollout_logp"], advantages, batch["policy_mask"], logp_prox=prox, **hyper
            )
            weight = self._weight(batch, totals)
            (loss * weight).backward()
            finite = finite and bool(torch.isfinite(loss))
            policy_loss += float(loss.detach()) * weight / distributed.world_size()
            tokens = float(batch["policy_mask"].sum())
            for key, value in stats.items():
                stats_sum[key] = stats_sum.get(key, 0.0) + value * tokens
        grad_norm, policy_ok = self._apply(self.policy, self.policy_optimizer, finite)

        # Critic: K steps toward the returns computed before any update.
        critic_losses, critic_ok = self._critic_updates(targets, totals, self.critic_steps)
        policy_ok = policy_ok and critic_ok

        self._count(policy_ok)
        tokens = max(totals[0], 1.0)
        return {
            "policy_loss": distributed.all_reduce(policy_loss),
            "value_loss": critic_losses[-1] if critic_losses else 0.0,
            "grad_norm": grad_norm,
            **{k: distributed.all_reduce(v) / tokens for k, v in stats_sum.items()},
            "policy_tokens": int(totals[0]),
            **({"zero_variance_dropped": dropped} if self.spec.dynamic_sampling else {}),
            "micro_batches": len(micro_batches),
            "skipped_steps": self.skipped_steps,
            "version": self.version,
        }

    def _count(self, ok: bool) -> None:
        """Bump the version after an applied step; count a skipped one, and give up after
        `max_bad_steps` in a row."""
        if ok:
            self._bad_in_a_row = 0
            self.version += 1
        else:
            self.skipped_steps += 1
            self._bad_in_a_row += 1
            if self._bad_in_a_row >= self.max_bad_steps:
                raise NonFiniteError(f"{self._bad_in_a_row} learner steps in a row had a non-finite loss or gradient")

    # -- SAPO: one model for policy and value -----------------------------------------------
    def _sapo_forward(
        self, batch: dict[str, torch.Tensor], values_only: bool = False
    ) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """One forward: (policy logprobs [B, T-1] with the value tokens banned, the value
        readout at every position [B, T], the logits [B, T-1, V] for the entropy); with
        `values_only`, just the readout."""
        logits = self.policy(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
        plus, minus = self.value_token_ids
        readout = sapo_value(logits, plus, minus, r_max=self.r_max, tau=self.tau_v)
        if values_only:
            return None, readout, None
        shifted = logits[:, :-1]
        logp = target_logprobs(shifted, batch["input_ids"][:, 1:], self.temperature, self.banned)
        return logp, readout, shifted

    def _turn_layout(self, group: list[Trajectory], batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per turn of each row ([B, N], right-padded): the logit positions of V (before the
        response) and Q (its last token), which turns are real, rewards (the trajectory's on
        its last turn) and dones (the last turn ends the episode: graded, no bootstrap); and
        each token's turn, [B, T-1] in the learner's target frame (-1 off policy tokens)."""
        # Back to the token frame: position 0 is never a policy token here (`_batch` drops it).
        token_mask = torch.nn.functional.pad(batch["policy_mask"], (1, 0))
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

    def _sapo_step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        micro_batches, totals = self._prepare(trajectories)
        layouts = [self._turn_layout(group, batch) for group, batch in micro_batches]
        n_turns = distributed.all_reduce(sum(float(layout["turn_mask"].sum()) for layout in layouts))
        world = distributed.world_size()
        horizon = None
        if self.aggregation == "sequence_sum_norm":  # one horizon for the whole batch
            horizon = int(distributed.all_reduce(max(len(t) for t in trajectories) - 1, "max"))

        # Values before the update. One micro-batch (on every rank: `_prepare` pads the
        # counts): its forward with grad is reused for the loss. Several: a no-grad pass
        # first, since normalising advantages needs every turn of the batch.
        single = len(micro_batches) == 1
        outputs = [self._sapo_forward(micro_batches[0][1])] if single else None
        if single:
            readouts = [outputs[0][1].detach()]
        else:
            with torch.no_grad():
                readouts = [self._sapo_forward(batch, values_only=True)[1] for _, batch in micro_batches]
        lam = self.gae_lambda if self.gae_lambda is not None else 0.95
        targets = []
        for layout, readout in zip(layouts, readouts, strict=True):
            values = readout.gather(1, layout["v_index"])
            targets.append(turn_gae(layout["rewards"], values, layout["dones"], layout["turn_mask"], self.gamma, lam))
        # Moments of the whole batch's turn advantages (two all-reduces: exact, not sum of squares).
        real = [target.advantages[layout["turn_mask"]] for target, layout in zip(targets, layouts, strict=True)]
        count = max(n_turns, 1.0)
        mean = distributed.all_reduce(sum(float(a.sum()) for a in real)) / count
        variance = distributed.all_reduce(sum(float(((a - mean) ** 2).sum()) for a in real)) / count

        clip = {k: self.loss_hyper[k] for k in ("clip_low", "clip_high") if k in self.loss_hyper}
        sums = dict.fromkeys(
            ("loss", "policy_loss", "value_loss", "q_loss", "kl", "entropy", "value_mean", "return_mean"), 0.0
        )
        stats_sum: dict[str, float] = {}
        finite = True
        for (group, batch), layout, target in zip(micro_batches, layouts, targets, strict=True):
            logp, readout, logits = outputs[0] if single else self._sapo_forward(batch)
            turn_mask = layout["turn_mask"]
            turn_advantages = normalize_turn_advantages(target.advantages, turn_mask, moments=(mean, variance**0.5))
            advantages = broadcast_turns(turn_advantages, layout["turn_of_token"])
            mask = batch["policy_mask"]
            token_means = ((advantages * mask).sum(-1) / mask.sum(-1).clamp(min=1)).tolist()
            for trajectory, value in zip(group, token_means, strict=False):
                self._advantages[trajectory.trajectory_id] = value  # curricula read learnability from it
            values = readout.gather(1, layout["v_index"])
            terms = sapo_loss_terms(
                logp,
                batch["rollout_logp"],
                advantages,
                mask,
                values=values,
                value_targets=target.returns,
                q_values=readout.gather(1, layout["q_index"]),
                q_targets=target.q_targets,
                turn_mask=turn_mask,
                logp_ref=batch["rollout_logp"] if self.beta else None,
                entropy=token_entropy(policy_logits(logits, self.banned) / self.temperature) if self.c_h else None,
                aggregation=self.aggregation,
                horizon=horizon,
                **clip,
            )
            token_weight = self._weight(batch, totals)
            turn_weight = float(turn_mask.sum()) / max(n_turns, 1.0) * world
            loss = token_weight * (terms.policy + self.beta * terms.kl - self.c_h * terms.entropy) + turn_weight * (
                self.c_v * terms.value + self.c_q * terms.q
            )
            loss.backward()
            outputs = None  # backward freed the graph; drop the logits too (B x T x vocab floats)
            del logp, readout, logits
            finite = finite and bool(torch.isfinite(loss))
            for key, term, weight in (
                ("loss", loss, 1.0),
                ("policy_loss", terms.policy, token_weight),
                ("value_loss", terms.value, turn_weight),
                ("q_loss", terms.q, turn_weight),
                ("kl", terms.kl, token_weight),
                ("entropy", terms.entropy, token_weight),
            ):
                sums[key] += float(term.detach()) * weight / world
            turns = turn_mask.float()
            sums["value_mean"] += float((values.detach() * turns).sum()) / max(n_turns, 1.0)
            sums["return_mean"] += float((target.returns * turns).sum()) / max(n_turns, 1.0)
            tokens = float(mask.sum())
            for key, value in terms.stats.items():
                stats_sum[key] = stats_sum.get(key, 0.0) + value * tokens
        grad_norm, ok = self._apply(self.policy, self.policy_optimizer, finite)
        self._count(ok)
        return {
            **{k: distributed.all_reduce(v) for k, v in sums.items()},
            "grad_norm": grad_norm,
            **{k: distributed.all_reduce(v) / max(totals[0], 1.0) for k, v in stats_sum.items()},
            "policy_tokens": int(totals[0]),
            "turns": int(n_turns),
            "micro_batches": len(micro_batches),
            "skipped_steps": self.skipped_steps,
            "version": self.version,
        }

    def warm_start(self, demonstrations: list[Trajectory], steps: int, lr: float) -> list[float]:
        """Supervised warm start: cross-entropy on the demonstrations' policy tokens (e.g. gold
        trajectories), with an optimizer of its own so RL starts from fresh optimizer state.
        A random policy solves nothing, and RL on all-zero rewards has nothing to learn from."""
        optimizer = torch.optim.AdamW([p for p in self.policy.parameters() if p.requires_grad], lr=lr)
        micro_batches, totals = self._prepare(demonstrations)
        saved, self.aggregation = self.aggregation, "token_mean"  # every demonstrated token counts
        losses = []
        try:
            for _ in range(steps):
                total, finite = 0.0, True
                for _, batch in micro_batches:
                    logp = token_logprobs(
                        self.policy, batch["input_ids"], batch["attention_mask"], self.temperature, self.banned
                    )
                    mask = batch["policy_mask"].float()
                    loss = -(logp * mask).sum() / mask.sum().clamp(min=1.0)
                    weight = self._weight(batch, totals)
                    (loss * weight).backward()
                    finite = finite and bool(torch.isfinite(loss))
                    total += float(loss.detach()) * weight / distributed.world_size()
                self._apply(self.policy, optimizer, finite)
                losses.append(distributed.all_reduce(total))
        finally:
            self.aggregation = saved
        self.version += 1  # the engines must pick up the warm-started weights
        if self.critic is not None:
            self.critic_from_policy()
        return losses

    def _value_loss(self, values, returns, old_values, mask) -> torch.Tensor:
        # PPO's critic may not move a value far from its rollout-time estimate; SAO's critic
        # regresses on the returns directly.
        aggregation = "token_mean" if self.aggregation == "sequence_sum_norm" else self.aggregation
        if self.spec.policy_loss in ("ppo", "decoupled_ppo"):
            return clipped_value_loss(values, old_values, returns, mask, aggregation=aggregation)
        return value_loss(values, returns, mask, aggregation)

    @torch.no_grad()
    def critic_from_policy(self) -> None:
        """Start the critic's backbone over from the policy's current weights, with a fresh
        optimizer (SAO initialises the critic from the fine-tuned policy: after a warm start,
        a backbone copied from the random initialisation has no useful features). The value
        head keeps its weights. Sharded modules are copied shard by shard (same layout)."""
        decoder = self.policy.get_decoder() if hasattr(self.policy, "get_decoder") else self.policy.model
        source = dict(decoder.named_parameters())
        for name, parameter in self.critic.backbone.named_parameters():
            parameter.copy_(source[name])
        self.critic_optimizer = torch.optim.AdamW(
            [p for p in self.critic.parameters() if p.requires_grad], lr=self.critic_optimizer.param_groups[0]["lr"]
        )

    def pretrain_critic(self, trajectories: list[Trajectory], steps: int) -> list[float]:
        """SAO's value pre-training: critic-only updates on fixed trajectories (policy frozen)."""
        if self.critic is None:
            raise ValueError(f"algorithm {self.algorithm!r} has no critic to pre-train")
        micro_batches, totals = self._prepare(trajectories)
        targets = [(batch, *self.advantages(group, batch)) for group, batch in micro_batches]
        return self._critic_updates(targets, totals, steps)[0]

    def _critic_updates(
        self, targets: list[tuple], totals: tuple[float, float], steps: int
    ) -> tuple[list[float], bool]:
        """`steps` critic updates toward fixed targets (batch, advantages, returns, old values);
        returns the loss of each and whether every one was finite (and applied)."""
        losses, all_ok = [], True
        for _ in range(steps):
            total, finite = 0.0, True
            for batch, _, returns, old_values in targets:
                values = self.critic(batch["input_ids"], batch["attention_mask"])[:, :-1].float()
                loss = self._value_loss(values, returns, old_values, batch["policy_mask"])
                weight = self._weight(batch, totals)
                (loss * weight).backward()
                finite = finite and bool(torch.isfinite(loss))
                total += float(loss.detach()) * weight / distributed.world_size()
            _, ok = self._apply(self.critic, self.critic_optimizer, finite)
            losses.append(distributed.all_reduce(total))
            all_ok = all_ok and ok
        return losses, all_ok

    # -- weights for the engines ------------------------------------------------------------
    def full_state(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """A model's full (unsharded) weights on CPU; gathered on every rank when sharded."""
        if not self.sharded:  # the plain module holds the full tensors: a copy is all it takes
            return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(model, options=options)
        return {k: v.detach().clone() if v.device.type == "cpu" else v.detach().cpu() for k, v in state.items()}

    def full_policy_state(self) -> dict[str, torch.Tensor]:
        """The policy's full (unsharded) weights on CPU; gathered on every rank."""
        return self.full_state(self.policy)

    def engine_weights(self) -> dict[str, torch.Tensor]:
        """The policy's full weights for the engines. Under SAPO they include the two value
        rows: the hf engine bans them (it grows its vocabulary to match on the first update)."""
        return self.full_policy_state()

    # -- checkpoints ----------------------------------------------------------------------
    def _models(self) -> dict[str, tuple[nn.Module, torch.optim.Optimizer]]:
        models = {"policy": (self.policy, self.policy_optimizer)}
        if self.critic is not None:
            models["critic"] = (self.critic, self.critic_optimizer)
        return models

    def _state(self) -> dict:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        state = {}
        for name, (model, optimizer) in self._models().items():
            state[name], state[f"{name}_optim"] = get_state_dict(model, optimizer)
        return state

    def save(self, directory: str | Path, extra: dict | None = None, tokenizer=None) -> Path:
        """Write a checkpoint atomically: a complete folder appears, or nothing does.

        `dcp/` holds the sharded training state (torch.distributed.checkpoint: loads on any
        number of ranks); `policy/` the policy as a Hugging Face folder (safetensors) that
        transformers and vLLM load directly; `state.json` the counters.
        """
        import torch.distributed.checkpoint as dcp

        directory = Path(directory)
        staging = directory.parent / f".{directory.name}.partial"
        if distributed.rank() == 0:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        distributed.barrier()
        with warnings.catch_warnings():  # single-process saves are intended, not a mistake
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.save(self._state(), checkpoint_id=str(staging / "dcp"))
        full = self.full_policy_state()
        if distributed.rank() == 0:
            # A plain copy writes the export: a sharded module's own save_pretrained would
            # reach for its sharded parameters.
            from transformers import AutoModelForCausalLM

            plain = AutoModelForCausalLM.from_config(self.policy.config)
            plain.load_state_dict(full)
            plain.save_pretrained(staging / "policy", safe_serialization=True)
            if tokenizer is not None:
                tokenizer.save_pretrained(staging / "policy")
            state = {"version": self.version, "skipped_steps": self.skipped_steps}
            if self.value_token_ids is not None:  # a resumed run must read values from the same rows
                state["value_token_ids"] = list(self.value_token_ids)
            state.update(extra or {})
            (staging / "state.json").write_text(json.dumps(state, indent=2))
            if directory.exists():
                trash = directory.parent / f".{directory.name}.old"
                shutil.rmtree(trash, ignore_errors=True)
                os.replace(directory, trash)
                os.replace(staging, directory)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                os.replace(staging, directory)
        distributed.barrier()
        return directory

    def load(self, directory: str | Path) -> dict:
        """Restore weights, optimizers and counters from `save` (on any number of ranks)."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict

        # DCP reports read failures as CheckpointException, a BaseException.
        failures = (Exception, dcp.CheckpointException)
        directory = Path(directory)
        try:
            state = json.loads((directory / "state.json").read_text())
        except failures as exc:
            raise CheckpointError(f"checkpoint {directory} is unreadable: {type(exc).__name__}: {exc}") from exc
        saved_ids = tuple(state["value_token_ids"]) if state.get("value_token_ids") else None
        if saved_ids != self.value_token_ids:
            raise CheckpointError(
                f"checkpoint {directory} reads values from tokens {saved_ids} (None: no SAPO value tokens), "
                f"this learner ({self.algorithm}) from {self.value_token_ids}: resume with the same algorithm and model"
            )
        try:
            training = self._state()
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="torch.distributed is disabled")
                dcp.load(training, checkpoint_id=str(directory / "dcp"))
            for name, (model, optimizer) in self._models().items():
                set_state_dict(
                    model, optimizer, model_state_dict=training[name], optim_state_dict=training[f"{name}_optim"]
                )
        except failures as exc:  # a torn or foreign checkpoint: say which one
            raise CheckpointError(f"checkpoint {directory} is unreadable: {type(exc).__name__}: {exc}") from exc
        self.version = int(state["version"])
        self.skipped_steps = int(state.get("skipped_steps", 0))
        return state


SAOLearner = Learner
"""The learner with its default algorithm; kept as the name most callers know."""
