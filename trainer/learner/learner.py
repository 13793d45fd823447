"""The learner: models, optimizers, version and guards around one step loop over an objective.

`step(trajectories)`: the objective (`trainer.learner.objectives`, picked by the algorithm's
`AlgorithmSpec.objective`) selects what to train on -> this rank's share is packed into
micro-batches (`trainer.learner.batching`) -> the objective's targets, computed before the
update without a gradient -> per micro-batch, the objective's weighted loss and its
backward -> the update, applied with the non-finite guard -> the objective's after-step
work (the critic's K updates) -> version + 1. The step returns its metrics and every
trajectory's mean advantage over its policy tokens, gathered from all ranks (curricula
read learnability from them).

Scale: launched by `torchrun`, each rank takes every world-size-th trajectory, the models
are FSDP2-sharded (`trainer.distributed`), and gradients are averaged across ranks.

Guards: a non-finite loss or gradient norm skips the step on every rank, is counted, and
after `max_bad_steps` in a row raises `NonFiniteError`.

SAPO (arXiv 2608.19842) has no critic model: its value-token ids are validated here,
banned from the policy, written to `state.json` and to the exported config
(`value_token_ids`), and `load` refuses a checkpoint whose ids differ.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from trainer import distributed
from trainer.algorithms.curriculum import FamilyLossWeights
from trainer.algorithms.losses import default_aggregation
from trainer.algorithms.registry import get_algorithm
from trainer.algorithms.sao import freeze_attention
from trainer.config import AlgorithmConfig, LearnerConfig
from trainer.inference.models import ValueModel
from trainer.inference.models import value_token_ids as recorded_value_token_ids
from trainer.inference.trajectory import Trajectory
from trainer.learner import checkpoint, warm_start
from trainer.learner.batching import PreparedBatch, prepare, token_means
from trainer.learner.logprobs import token_logprobs
from trainer.learner.objectives import CriticObjective, StepTargets, make_objective

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


def _value_token_ids(policy: nn.Module, ids: tuple[int, int] | None, name: str) -> tuple[int, int]:
    """SAPO's (w+, w-) ids: given, or recorded by `reserve_value_tokens`; validated."""
    ids = tuple(ids) if ids is not None else recorded_value_token_ids(policy)
    if ids is None:
        raise ValueError(
            f"algorithm {name!r} reads values from two reserved tokens: call "
            "trainer.inference.models.reserve_value_tokens(policy, tokenizer) first, or pass value_token_ids"
        )
    rows = policy.get_output_embeddings().weight.shape[0]
    if len(set(ids)) != 2 or not all(0 <= i < rows for i in ids):
        raise ValueError(f"value_token_ids {ids} must be two distinct ids below the vocabulary size {rows}")
    return int(ids[0]), int(ids[1])


def _enable_activation_checkpointing(model: nn.Module) -> None:
    # transformers 5 renamed the switch; 4.x only has the old name.
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def gather_advantages(trajectories: list[Trajectory], local: dict[str, float]) -> dict[str, float]:
    """Every trajectory's advantage by id, from each rank's `local` share (0.0 where none has one)."""
    merged = dict(local)
    if distributed.world_size() > 1:
        shares: list[dict[str, float] | None] = [None] * distributed.world_size()
        torch.distributed.all_gather_object(shares, local, group=distributed.group())
        for share in shares:
            merged.update(share or {})
    return {t.trajectory_id: merged.get(t.trajectory_id, 0.0) for t in trajectories}


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
        self.aggregation = algorithm.loss_aggregation or default_aggregation(self.spec.policy_loss)
        if self.spec.critic == "separate" and critic is None:
            raise ValueError(f"algorithm {algorithm.name!r} needs a critic (a ValueModel)")
        self.value_token_ids: tuple[int, int] | None = None
        if self.spec.critic == "shared":  # SAPO: the value lives in two vocabulary rows of the policy
            self.value_token_ids = _value_token_ids(policy, value_token_ids, algorithm.name)
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
        self.policy_optimizer = torch.optim.AdamW(self.policy.parameters(), lr=optim.lr)
        self.critic_optimizer = self._critic_optimizer() if self.critic is not None else None
        self.version = 0
        self.skipped_steps = 0
        self._bad_in_a_row = 0
        self._warm_start: warm_start.SupervisedRun | None = None
        """The warm start between `begin_warm_start` and `end_warm_start`."""
        self._critic_pretraining: tuple[PreparedBatch, StepTargets] | None = None
        """The critic pre-training's batch and targets between its begin and end."""

    def _critic_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW([p for p in self.critic.parameters() if p.requires_grad], lr=self.optim.critic_lr)

    def prepare(self, trajectories: list[Trajectory]) -> PreparedBatch:
        """This rank's micro-batches of `trajectories` (`trainer.learner.batching.prepare`)."""
        return prepare(
            trajectories,
            pad_id=self.pad_id,
            token_budget=self.optim.token_budget,
            device=self.device,
            aggregation=self.aggregation,
            tree=bool(self.optim.tree_packing),
        )

    # -- one update -----------------------------------------------------------------------
    def step(self, trajectories: list[Trajectory]) -> StepResult:
        """One update on `trajectories` (the whole batch: each rank takes its share)."""
        if not trajectories:
            raise ValueError("learner step needs at least one trajectory")
        selection = self.objective.select(trajectories)
        if not selection.trajectories:  # e.g. every group had equal rewards: nothing to learn from
            metrics = {**selection.metrics, "version": self.version, "skipped_steps": self.skipped_steps}
            return StepResult(metrics, {t.trajectory_id: 0.0 for t in trajectories})
        batch = self.prepare(selection.trajectories)
        targets = self.objective.targets(self, selection, batch)
        local = self._local_advantages(batch, targets)
        family_metrics = self._weigh_families(selection.trajectories, batch, targets)

        # Policy: one step, gradients accumulated over micro-batches.
        sums: dict[str, float] = {}
        stats_sum: dict[str, float] = {}
        finite = True
        for micro, target in zip(batch.micro_batches, targets.micro, strict=True):
            part = self.objective.micro_loss(self, micro, target, batch)
            part.loss.backward()
            finite = finite and part.finite
            for key, value in part.sums.items():
                sums[key] = sums.get(key, 0.0) + value
            tokens = float(micro.tensors["policy_mask"].sum())
            for key, value in part.stats.items():
                stats_sum[key] = stats_sum.get(key, 0.0) + value * tokens
            del part  # backward freed the graph; drop the loss's last references too
        grad_norm, ok = self.apply(self.policy, self.policy_optimizer, finite)
        after, after_ok = self.objective.after_step(self, batch, targets)
        self._count(ok and after_ok)
        metrics = {
            **{k: distributed.all_reduce(v) for k, v in sums.items()},
            **after,
            "grad_norm": grad_norm,
            **{k: distributed.all_reduce(v) / max(batch.totals.tokens, 1.0) for k, v in stats_sum.items()},
            "policy_tokens": int(batch.totals.tokens),
            **targets.metrics,
            **selection.metrics,
            "micro_batches": len(batch.micro_batches),
            "model_tokens": int(distributed.all_reduce(batch.model_tokens)),
            "skipped_steps": self.skipped_steps,
            "version": self.version,
            **family_metrics,
        }
        advantages = gather_advantages(trajectories, local)
        if self.family_weights is not None:
            self._measure_families(selection.trajectories, advantages)
        return StepResult(metrics, advantages)

    def _weigh_families(
        self, trajectories: list[Trajectory], batch: PreparedBatch, targets: StepTargets
    ) -> dict[str, float]:
        """SE-RL: scale each trajectory's token advantages by its family's weight, from what
        earlier steps measured (so every rank uses the same weights); the weights in use, as
        metrics. Scaling a sequence's advantages is weighting its policy loss."""
        if self.family_weights is None:
            return {}
        self.family_weights.add_families(t.family for t in trajectories)  # the whole batch: ranks agree
        weights = self.family_weights.weights()
        for micro, target in zip(batch.micro_batches, targets.micro, strict=True):
            for row, trajectory in enumerate(micro.trajectories):
                target.advantages[row] *= weights[trajectory.family]
        return {f"family_weight/{family}": weight for family, weight in sorted(weights.items())}

    def _measure_families(self, trajectories: list[Trajectory], advantages: dict[str, float]) -> None:
        """Update each family's need from this step's whole batch (gathered from every rank,
        so all ranks keep the same state): its unweighted mean advantages, or its rewards."""
        self.family_weights.add_families(t.family for t in trajectories)
        for family in sorted({t.family for t in trajectories}):
            mine = [t for t in trajectories if t.family == family]
            self.family_weights.update(
                family, advantages=[advantages[t.trajectory_id] for t in mine], rewards=[t.reward for t in mine]
            )

    @staticmethod
    def _local_advantages(batch: PreparedBatch, targets: StepTargets) -> dict[str, float]:
        """This rank's trajectories' mean advantage over their policy tokens, by id."""
        local = {}
        for micro, target in zip(batch.micro_batches, targets.micro, strict=True):
            means = token_means(target.advantages, micro.tensors["policy_mask"])
            for trajectory, mean in zip(micro.trajectories, means, strict=False):
                local[trajectory.trajectory_id] = mean
        return local

    def apply(self, model: nn.Module, optimizer: torch.optim.Optimizer, losses_finite: bool) -> tuple[float, bool]:
        """Clip and step, unless a loss or the gradient norm is non-finite on any rank;
        gradients are cleared either way. Returns (gradient norm, applied)."""
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.optim.max_grad_norm)
        grad_norm = float(grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm)
        finite = losses_finite and bool(torch.isfinite(torch.tensor(grad_norm)))
        finite = distributed.all_reduce(0.0 if finite else 1.0, "max") == 0.0
        if finite:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return grad_norm, finite

    def _count(self, ok: bool) -> None:
        """Bump the version after an applied step; count a skipped one, and give up after
        `max_bad_steps` in a row."""
        if ok:
            self._bad_in_a_row = 0
            self.version += 1
            return
        self.skipped_steps += 1
        self._bad_in_a_row += 1
        logger.warning("learner step skipped: a loss or gradient norm was not finite (%d in a row)", self._bad_in_a_row)
        if self._bad_in_a_row >= self.optim.max_bad_steps:
            raise NonFiniteError(f"{self._bad_in_a_row} learner steps in a row had a non-finite loss or gradient")

    # -- warm start and critic pre-training -------------------------------------------------
    def warm_start(self, demonstrations: list[Trajectory], steps: int, lr: float) -> list[float]:
        """Supervised warm start (`trainer.learner.warm_start`), then the critic restarted
        from the fine-tuned policy; publishes a new version. Returns each step's loss.
        The same as `begin_warm_start`, `warm_start_steps` in any chunks, `end_warm_start`."""
        self.begin_warm_start(demonstrations, lr)
        losses = self.warm_start_steps(steps)
        self.end_warm_start()
        return losses

    def begin_warm_start(self, demonstrations: list[Trajectory], lr: float) -> None:
        """Start a warm start on `demonstrations`: its batch and AdamW live here until
        `end_warm_start`, so its steps can be taken in chunks with the same numbers."""
        self._warm_start = warm_start.SupervisedRun(self, demonstrations, lr)

    def warm_start_steps(self, steps: int) -> list[float]:
        """`steps` more supervised steps of the warm start begun; the loss of each."""
        if self._warm_start is None:
            raise RuntimeError("warm_start_steps needs begin_warm_start first")
        return self._warm_start.steps(steps)

    def end_warm_start(self) -> None:
        """Finish the warm start: drop its optimizer, publish a new version and restart the
        critic from the fine-tuned policy."""
        if self._warm_start is None:
            raise RuntimeError("end_warm_start needs begin_warm_start first")
        self._warm_start = None
        self.version += 1  # the engines must pick up the warm-started weights
        if self.critic is not None:
            self.critic_from_policy()

    def critic_from_policy(self) -> None:
        """Start the critic's backbone over from the policy's current weights, with a fresh
        optimizer (SAO initialises the critic from the fine-tuned policy: after a warm start,
        a backbone copied from the random initialisation has no useful features). The value
        head keeps its weights."""
        warm_start.copy_backbone(self.policy, self.critic)
        self.critic_optimizer = self._critic_optimizer()

    def pretrain_critic(self, trajectories: list[Trajectory], steps: int) -> list[float]:
        """SAO's value pre-training: critic-only updates on fixed trajectories (policy frozen).
        The same as `begin_critic_pretraining`, `critic_pretraining_steps` in any chunks,
        `end_critic_pretraining`."""
        self.begin_critic_pretraining(trajectories)
        losses = self.critic_pretraining_steps(steps)
        self.end_critic_pretraining()
        return losses

    def begin_critic_pretraining(self, trajectories: list[Trajectory]) -> None:
        """Pack `trajectories` and fix their value targets (before any update), kept here
        until `end_critic_pretraining`."""
        if not isinstance(self.objective, CriticObjective):
            raise ValueError(f"algorithm {self.algorithm.name!r} has no critic to pre-train")
        batch = prepare(
            trajectories,
            pad_id=self.pad_id,
            token_budget=self.optim.token_budget,
            device=self.device,
            tree=bool(self.optim.tree_packing),
        )
        targets = StepTargets([self.objective.micro_targets(self, micro) for micro in batch.micro_batches])
        self._critic_pretraining = (batch, targets)

    def critic_pretraining_steps(self, steps: int) -> list[float]:
        """`steps` more critic updates of the pre-training begun; the value loss of each."""
        if self._critic_pretraining is None:
            raise RuntimeError("critic_pretraining_steps needs begin_critic_pretraining first")
        batch, targets = self._critic_pretraining
        return self.objective.critic_updates(self, batch, targets, steps)[0]

    def end_critic_pretraining(self) -> None:
        self._critic_pretraining = None

    def gold_probability(self, demonstrations: list[Trajectory]) -> float:
        """Mean over `demonstrations` of P(the policy samples their exact actions) at the
        training temperature: a deterministic measure of progress on the tasks, where the
        sampled success rate of a few episodes per step is noise (its gradient is P x the
        supervised gradient toward the gold action). Every rank must call it when sharded."""
        total = 0.0
        with torch.no_grad():
            for demo in demonstrations:
                ids = torch.tensor([demo.token_ids], device=self.device)
                logp = token_logprobs(self.policy, ids, torch.ones_like(ids), self.temperature, self.banned)[0]
                mask = torch.tensor(demo.policy_mask[1:], device=self.device)
                total += float(torch.exp((logp * mask).sum()))
        return total / len(demonstrations)

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

    # -- checkpoints ----------------------------------------------------------------------
    def save(self, directory: str | Path, extra: dict | None = None, tokenizer=None) -> Path:
        """Write a checkpoint atomically (`trainer.learner.checkpoint`): `dcp/`, `policy/`
        (a Hugging Face folder) and `state.json`."""
        return checkpoint.save(self, directory, extra, tokenizer)

    def load(self, directory: str | Path) -> dict:
        """Restore weights, optimizers and counters from `save` (on any number of ranks)."""
        return checkpoint.load(self, directory)
