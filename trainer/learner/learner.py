"""The learner: models, optimizers, version and guards around one step loop over an objective.

`step(trajectories)`: the objective (`trainer.learner.objectives`, picked by the algorithm's
`AlgorithmSpec.objective`) selects what to train on -> this rank's share is packed into
micro-batches (`trainer.learner.batching`) -> the objective's targets, computed before the
update without a gradient -> per micro-batch, the objective's weighted loss and its
backward -> the update, applied with the non-finite guard -> the critic's K updates, each
the same loop over the objective's critic loss -> version + 1. The step returns its
metrics and every trajectory's mean advantage over its policy tokens, gathered from all
ranks (curricula read learnability from them).

Objectives compute losses from a `Models` view; every optimizer (the policy's, the
critic's, the warm start's) is stepped here, by one routine (`_update`). Checkpoints read
the learner through its public state methods (`models_and_optimizers`, `progress`).

Scale: launched by `torchrun`, each rank takes every world-size-th trajectory, the models
are FSDP2-sharded (`trainer.distributed`), and gradients are averaged across ranks.

Guards: a non-finite loss or gradient norm skips the step on every rank, is counted, and
after `max_bad_steps` in a row raises `NonFiniteError`.

No signal, no step (issue #39): an update whose gradient is zero on every rank is not
applied. AdamW would still move the weights (momentum and weight decay) and advance its
state, so a batch that teaches nothing (every advantage zero, as in a group whose
rewards are all equal, or every token masked) would change the policy. Such a step leaves
the weights, the optimizer state and the version as they were, and is counted
(`skipped_no_signal`); DAPO's empty selection counts the same way. The forward and backward
still run (the gradient is what shows there is nothing to learn, for every objective), so a
step costs the same time with or without a signal. VeRL's DAPO refills such batches by
sampling more; we do not, so the step is skipped instead.

SAPO (arXiv 2608.19842) has no critic model: its value-token ids are validated
(`objectives.sapo.checked_value_token_ids`), banned from the policy, written to
`state.json` and to the exported config (`value_token_ids`), and `load` refuses a
checkpoint whose ids differ.

Over 450 lines on purpose: every optimizer step (RL, warm start, critic pre-training) goes
through one `_update` with one set of guards, so the phases live with the class that owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from trainer import distributed
from trainer.algorithms.curriculum import FamilyLossWeights
from trainer.algorithms.registry import get_algorithm
from trainer.algorithms.sao import freeze_attention
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.models import ValueModel
from trainer.inference.trajectory import Trajectory
from trainer.learner import checkpoint, warm_start
from trainer.learner.advantages import (
    gather_advantages,
    keep_positive,
    local_advantages,
    measure_families,
    weigh_families,
)
from trainer.learner.batching import MicroBatch, PreparedBatch, prepare
from trainer.learner.logprobs import gold_probability
from trainer.learner.objectives import MicroLoss, Models, Selection, StepTargets, make_objective
from trainer.learner.objectives.sapo import checked_value_token_ids
from trainer.resolve import resolve_algorithm

logger = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    """Too many consecutive steps had a non-finite loss or gradient norm."""


@dataclass(frozen=True)
class StepResult:
    """What one learner step reports."""

    metrics: dict[str, float]
    """Losses, gradient norm, loss statistics, counts, `skipped_steps` and `version`."""
    advantages: dict[str, float] = field(default_factory=dict)
    """Each trajectory's mean advantage over its policy tokens, by `trajectory_id`, for every
    trajectory of the batch (all ranks); 0.0 for those the objective dropped."""


APPLIED, NO_SIGNAL, NON_FINITE = "applied", "no_signal", "non_finite"
"""How an update went (`Update.outcome`): the optimizer stepped; the gradient was zero on
every rank (nothing to learn, nothing moved); a loss or the gradient norm was not finite."""


class Update(NamedTuple):
    """One optimizer update (`Learner._update`): the micro-batches' `MicroLoss.sums` summed
    on this rank, their `stats` weighted by policy tokens and summed, and how it went."""

    sums: dict[str, float]
    stats: dict[str, float]
    grad_norm: float
    outcome: str
    """`APPLIED`, `NO_SIGNAL` or `NON_FINITE`."""


def _enable_activation_checkpointing(model: nn.Module) -> None:
    # transformers 5 renamed the switch; 4.x only has the old name.
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


class Learner:
    """Policy (and critic) updates from finished trajectories; see the module docstring."""

    def __init__(
        self,
        policy: nn.Module,
        critic: ValueModel | None,
        *,
        pad_id: int,
        algorithm: AlgorithmConfig,
        optim: LearnerConfig,
        temperature: float = 1.0,
        value_token_ids: tuple[int, int] | None = None,
        mesh=None,
    ) -> None:
        self.algorithm = algorithm
        self.optim = optim
        self.spec = get_algorithm(algorithm.name)
        if resolve_algorithm(algorithm) != algorithm:
            raise ValueError(
                f"algorithm {algorithm.name!r} has unresolved fields (loss_aggregation, clip, gae_lambda): "
                "pass it through trainer.resolve.resolve_algorithm (load_config does)"
            )
        self.aggregation = algorithm.loss_aggregation
        if self.spec.critic == "separate" and critic is None:
            raise ValueError(f"algorithm {algorithm.name!r} needs a critic (a ValueModel)")
        self.value_token_ids: tuple[int, int] | None = None
        if self.spec.critic == "shared":  # SAPO: the value lives in two vocabulary rows of the policy
            self.value_token_ids = checked_value_token_ids(policy, value_token_ids, algorithm.name)
        self.banned: tuple[int, ...] = self.value_token_ids or ()
        """Token ids the policy never samples; the learner's log-softmax leaves them out."""
        self.objective = make_objective(self.spec, algorithm, self.aggregation)
        self.family_weights: FamilyLossWeights | None = None
        """SE-RL's per-family loss weights (`algorithm.family_weights: se_rl`), else None."""
        if algorithm.family_weights == "se_rl":
            rule = algorithm.se_rl
            self.family_weights = FamilyLossWeights([], mode=rule.mode, smoothing=rule.smoothing, floor=rule.floor)
        critic = critic if self.spec.critic == "separate" else None
        if critic is not None and optim.freeze_critic_attention:
            freeze_attention(critic)
        if optim.activation_checkpointing:
            for model in (policy, *([critic.backbone] if critic is not None else [])):
                _enable_activation_checkpointing(model)
        self.device = (
            torch.device("cuda", torch.cuda.current_device())
            if mesh is not None and torch.cuda.is_available()
            else torch.device("cpu")
        )
        self.policy = distributed.shard(policy.to(self.device), mesh, bf16=optim.bf16).train()
        self.critic = distributed.shard(critic.to(self.device), mesh, bf16=optim.bf16).train() if critic else None
        self.sharded = mesh is not None
        self.pad_id = pad_id
        self.temperature = temperature
        self.models = Models(self.policy, self.critic, temperature, self.banned, self.value_token_ids)
        """What the objectives read: the models and how the policy samples."""
        self.policy_optimizer = torch.optim.AdamW(self.policy.parameters(), lr=optim.lr)
        self.critic_optimizer = self._critic_optimizer() if self.critic is not None else None
        self.probes: list[Trajectory] = []
        """Gold trajectories whose probability each step reports (`set_probes`)."""
        self._version = 0
        self.skipped_steps = 0
        """Steps skipped for a non-finite loss or gradient norm."""
        self.skipped_no_signal = 0
        """Steps whose policy update was skipped for want of a learning signal."""
        self._bad_in_a_row = 0
        self._warm_start: tuple[PreparedBatch, torch.optim.Optimizer] | None = None
        """The warm start's batch and AdamW between `begin_warm_start` and `end_warm_start`."""
        self._critic_pretraining: tuple[PreparedBatch, StepTargets] | None = None
        """The critic pre-training's batch and targets between its begin and end."""

    @property
    def version(self) -> int:
        """The weights' version: + 1 for every step that changed a model's weights and after a
        warm start."""
        return self._version

    @property
    def has_critic(self) -> bool:
        return self.critic is not None

    def _critic_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW([p for p in self.critic.parameters() if p.requires_grad], lr=self.optim.critic_lr)

    def prepare(self, trajectories: list[Trajectory], aggregation: str | None = None) -> PreparedBatch:
        """This rank's micro-batches of `trajectories` (`trainer.learner.batching.prepare`),
        weighted by `aggregation` (default: the objective's)."""
        return prepare(
            trajectories,
            pad_id=self.pad_id,
            token_budget=self.optim.token_budget,
            device=self.device,
            aggregation=aggregation or self.aggregation,
            tree=self.optim.tree_packing,
        )

    # -- one update -----------------------------------------------------------------------
    def step(self, trajectories: list[Trajectory]) -> StepResult:
        """One update on `trajectories` (the whole batch: each rank takes its share)."""
        if not trajectories:
            raise ValueError("learner step needs at least one trajectory")
        selection = self.objective.select(trajectories)
        if not selection.trajectories:  # e.g. every group had equal rewards: nothing to learn from
            self.skipped_no_signal += 1
            metrics = {**selection.metrics, **self._counters()}
            return StepResult(self._probe(metrics), {t.trajectory_id: 0.0 for t in trajectories})
        batch = self.prepare(selection.trajectories)
        targets = self.objective.targets(self.models, selection, batch)
        if self.algorithm.positive_advantages_only:  # the control arm of issue #39
            keep_positive(targets)
        local = local_advantages(batch, targets)
        family_metrics = {}
        if self.family_weights is not None:  # SE-RL
            family_metrics = weigh_families(self.family_weights, selection.trajectories, batch, targets)

        # Policy: one update, gradients accumulated over micro-batches.
        policy = self._update(
            self.policy, self.policy_optimizer, self._losses(self.objective.micro_loss, batch, targets)
        )
        critic_losses, critic_outcomes = self._critic_updates(batch, targets, self.objective.critic_steps)
        self._count(policy.outcome, critic_outcomes)
        sums = {k: distributed.all_reduce(v) for k, v in policy.sums.items()}
        # The critic's last loss; SAPO's value loss is a term of its policy loss, in its sums.
        sums.setdefault("value_loss", critic_losses[-1] if critic_losses else 0.0)
        metrics = {
            **sums,
            "grad_norm": policy.grad_norm,
            **{k: distributed.all_reduce(v) / max(batch.totals.tokens, 1.0) for k, v in policy.stats.items()},
            "policy_tokens": int(batch.totals.tokens),
            **targets.metrics,
            **selection.metrics,
            "micro_batches": len(batch.micro_batches),
            "model_tokens": int(distributed.all_reduce(batch.model_tokens)),
            **self._counters(),
            **family_metrics,
        }
        advantages = gather_advantages(trajectories, local)
        if self.family_weights is not None:
            measure_families(self.family_weights, selection.trajectories, advantages)
        return StepResult(self._probe(metrics), advantages)

    def _losses(
        self, loss: Callable[..., MicroLoss], batch: PreparedBatch, targets: StepTargets
    ) -> Iterator[tuple[MicroBatch, MicroLoss]]:
        """Each micro-batch with its `loss(models, micro, target, batch)`, computed only when
        the update asks for it (one graph alive at a time)."""
        for micro, target in zip(batch.micro_batches, targets.micro, strict=True):
            yield micro, loss(self.models, micro, target, batch)

    def _update(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, losses: Iterator[tuple[MicroBatch, MicroLoss]]
    ) -> Update:
        """One update of `model`: each micro-batch's loss back-propagated as it comes
        (gradients accumulate), then `_apply`; the summed metrics with it."""
        sums: dict[str, float] = {}
        stats: dict[str, float] = {}
        finite = True
        for micro, part in losses:
            part.loss.backward()
            finite = finite and part.finite
            for key, value in part.sums.items():
                sums[key] = sums.get(key, 0.0) + value
            if part.stats:
                tokens = float(micro.tensors["policy_mask"].sum())
                for key, value in part.stats.items():
                    stats[key] = stats.get(key, 0.0) + value * tokens
            del part  # backward freed the graph; drop the loss's last references too
        grad_norm, outcome = self._apply(model, optimizer, finite)
        return Update(sums, stats, grad_norm, outcome)

    def _critic_updates(self, batch: PreparedBatch, targets: StepTargets, steps: int) -> tuple[list[float], list[str]]:
        """`steps` critic updates toward fixed targets; the loss and the outcome of each."""
        losses, outcomes = [], []
        for _ in range(steps):
            update = self._update(
                self.critic, self.critic_optimizer, self._losses(self.objective.critic_loss, batch, targets)
            )
            losses.append(distributed.all_reduce(update.sums.get("value_loss", 0.0)))
            outcomes.append(update.outcome)
        return losses, outcomes

    def _apply(self, model: nn.Module, optimizer: torch.optim.Optimizer, losses_finite: bool) -> tuple[float, str]:
        """Clip and step, unless a loss or the gradient norm is non-finite on any rank, or the
        gradient is zero on every rank (see the module docstring: no signal, no step);
        gradients are cleared either way. Returns (gradient norm, outcome)."""
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.optim.max_grad_norm)
        grad_norm = float(grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm)
        finite = losses_finite and bool(torch.isfinite(torch.tensor(grad_norm)))
        finite = distributed.all_reduce(0.0 if finite else 1.0, "max") == 0.0
        if not finite:
            outcome = NON_FINITE
        elif distributed.all_reduce(grad_norm, "max") == 0.0:
            outcome = NO_SIGNAL
        else:
            optimizer.step()
            outcome = APPLIED
        optimizer.zero_grad(set_to_none=True)
        return grad_norm, outcome

    def _counters(self) -> dict[str, int]:
        return {
            "skipped_steps": self.skipped_steps,
            "skipped_no_signal": self.skipped_no_signal,
            "version": self.version,
        }

    def _count(self, policy: str, critic: list[str]) -> None:
        """Bump the version when a model's weights changed; count a policy update skipped
        for no signal; count a step with a non-finite update, and give up after
        `max_bad_steps` in a row."""
        outcomes = [policy, *critic]
        if APPLIED in outcomes:
            self._version += 1
        if policy == NO_SIGNAL:
            self.skipped_no_signal += 1
        if NON_FINITE not in outcomes:
            self._bad_in_a_row = 0
            return
        self.skipped_steps += 1
        self._bad_in_a_row += 1
        logger.warning("learner step skipped: a loss or gradient norm was not finite (%d in a row)", self._bad_in_a_row)
        if self._bad_in_a_row >= self.optim.max_bad_steps:
            raise NonFiniteError(f"{self._bad_in_a_row} learner steps in a row had a non-finite loss or gradient")

    # -- warm start and critic pre-training, each in chunks for a progress bar -----------------
    # Their batch (and the warm start's AdamW) stay here from `begin_` to `end_`, so any
    # chunking of the `_steps` makes the same updates.
    def begin_warm_start(self, demonstrations: list[Trajectory], lr: float) -> None:
        """Start a supervised warm start (`trainer.learner.warm_start`) on `demonstrations`,
        with an AdamW of its own."""
        optimizer = torch.optim.AdamW([p for p in self.policy.parameters() if p.requires_grad], lr=lr)
        self._warm_start = (self.prepare(demonstrations, "token_mean"), optimizer)

    def warm_start_steps(self, steps: int) -> list[float]:
        """`steps` more supervised steps of the warm start begun; the loss of each."""
        if self._warm_start is None:
            raise RuntimeError("warm_start_steps needs begin_warm_start first")
        batch, optimizer = self._warm_start
        losses = []
        for _ in range(steps):
            parts = ((micro, warm_start.supervised_loss(self.models, micro, batch)) for micro in batch.micro_batches)
            update = self._update(self.policy, optimizer, parts)
            losses.append(distributed.all_reduce(update.sums.get("loss", 0.0)))
        return losses

    def end_warm_start(self) -> None:
        """Finish the warm start: drop its optimizer, publish a new version and restart the
        critic from the fine-tuned policy."""
        if self._warm_start is None:
            raise RuntimeError("end_warm_start needs begin_warm_start first")
        self._warm_start = None
        self._version += 1  # the engines must pick up the warm-started weights
        if self.critic is not None:
            self.critic_from_policy()

    def critic_from_policy(self) -> None:
        """Start the critic's backbone over from the policy's current weights, with a fresh
        optimizer (SAO initialises the critic from the fine-tuned policy: after a warm start,
        a backbone copied from the random initialisation has no useful features). The value
        head keeps its weights."""
        warm_start.copy_backbone(self.policy, self.critic)
        self.critic_optimizer = self._critic_optimizer()

    def begin_critic_pretraining(self, trajectories: list[Trajectory]) -> None:
        """Start SAO's value pre-training (critic-only updates, the policy frozen): pack
        `trajectories` and fix their value targets (before any update)."""
        if self.critic is None:
            raise ValueError(f"algorithm {self.algorithm.name!r} has no critic to pre-train")
        batch = self.prepare(trajectories, "token_mean")
        self._critic_pretraining = (batch, self.objective.targets(self.models, Selection(trajectories), batch))

    def critic_pretraining_steps(self, steps: int) -> list[float]:
        """`steps` more critic updates of the pre-training begun; the value loss of each."""
        if self._critic_pretraining is None:
            raise RuntimeError("critic_pretraining_steps needs begin_critic_pretraining first")
        batch, targets = self._critic_pretraining
        return self._critic_updates(batch, targets, steps)[0]

    def end_critic_pretraining(self) -> None:
        self._critic_pretraining = None

    def in_phase(self) -> bool:
        """Whether a warm start or critic pre-training is begun and not ended (its batch and
        optimizer are in no checkpoint or exported state)."""
        return self._warm_start is not None or self._critic_pretraining is not None

    def set_probes(self, demonstrations: list[Trajectory]) -> None:
        """Gold trajectories whose probability each step then reports (`gold_probability`)."""
        self.probes = list(demonstrations)

    def _probe(self, metrics: dict[str, float]) -> dict[str, float]:
        if self.probes:  # `trainer.learner.logprobs.gold_probability`
            probability = gold_probability(self.policy, self.probes, self.temperature, self.banned, self.device)
            metrics["gold_probability"] = round(probability, 5)
        return metrics

    # -- weights for the engines ------------------------------------------------------------
    def full_state(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """A model's full (unsharded) weights on CPU; gathered on every rank when sharded."""
        return checkpoint.full_state(model, self.sharded)

    def full_policy_state(self) -> dict[str, torch.Tensor]:
        """The policy's full (unsharded) weights on CPU; gathered on every rank."""
        return self.full_state(self.policy)

    def engine_weights(self) -> dict[str, torch.Tensor]:
        """The policy's full weights for the engines. Under SAPO they include the two value
        rows: the hf engine bans them (it grows its vocabulary to match on the first update)."""
        return self.full_policy_state()

    def weights(self, with_critic: bool) -> dict[str, dict[str, torch.Tensor]]:
        """The full weights the engines load: `policy`, and `critic` (when there is one and
        `with_critic`) for value-scored tree rollouts."""
        weights = {"policy": self.engine_weights()}
        if with_critic and self.critic is not None:
            weights["critic"] = self.full_state(self.critic)
        return weights

    # -- state and checkpoints ------------------------------------------------------------
    def models_and_optimizers(self) -> dict[str, tuple[nn.Module, torch.optim.Optimizer]]:
        """Each trained model with its optimizer, by name: what a checkpoint holds."""
        models = {"policy": (self.policy, self.policy_optimizer)}
        if self.critic is not None:
            models["critic"] = (self.critic, self.critic_optimizer)
        return models

    def progress(self) -> dict:
        """The counters and SE-RL's family weights (JSON-serialisable), for checkpoints."""
        return {
            "version": self._version,
            "skipped_steps": self.skipped_steps,
            "skipped_no_signal": self.skipped_no_signal,
            "bad_in_a_row": self._bad_in_a_row,
            "family_weights": self.family_weights.state_dict() if self.family_weights is not None else None,
        }

    def restore_progress(self, progress: dict) -> None:
        """Take back `progress()`'s values, those present (a checkpoint file keeps no streak
        of bad steps: a resumed run starts a new one)."""
        self._version = int(progress["version"])
        self.skipped_steps = int(progress.get("skipped_steps", 0))
        self.skipped_no_signal = int(progress.get("skipped_no_signal", 0))
        if "bad_in_a_row" in progress:
            self._bad_in_a_row = int(progress["bad_in_a_row"])
        if self.family_weights is not None and progress.get("family_weights") is not None:
            self.family_weights.load_state_dict(progress["family_weights"])

    def save(self, directory: str | Path, extra: dict | None = None, tokenizer=None) -> Path:
        """Write a checkpoint atomically (`trainer.learner.checkpoint`): `dcp/`, `policy/`
        (a Hugging Face folder) and `state.json`."""
        return checkpoint.save(self, directory, extra, tokenizer)

    def load(self, directory: str | Path) -> dict:
        """Restore weights, optimizers and counters from `save` (on any number of ranks)."""
        return checkpoint.load(self, directory)
