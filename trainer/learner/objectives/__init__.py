"""Learner objectives: one `Objective` interface, one implementation per kind of baseline.

- `critic`: a separate critic (SAO, PPO, decoupled PPO): GAE advantages, K critic updates.
- `group`: group baselines (GRPO, Dr.GRPO, DAPO): group-normalised advantages, no critic.
- `sapo`: SAPO's shared policy-value backbone: turn-level GAE over the readout.

`make_objective` picks the class from the algorithm's `AlgorithmSpec.objective`
(`trainer.algorithms.registry`): nothing here branches on an algorithm's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer.algorithms.losses import LOSS_PARAMETERS
from trainer.algorithms.registry import AlgorithmSpec
from trainer.learner.objectives.base import MicroLoss, MicroTarget, Models, NoCritic, Objective, Selection, StepTargets
from trainer.learner.objectives.critic import CriticObjective, CriticTarget, gae_targets
from trainer.learner.objectives.group import GroupObjective, GroupTarget, group_selection
from trainer.learner.objectives.sapo import SapoObjective, SapoTarget, sapo_forward, turn_layout

if TYPE_CHECKING:
    from trainer.config import AlgorithmConfig


def loss_hyper(spec: AlgorithmSpec, algorithm: AlgorithmConfig) -> dict:
    """The policy loss's keyword arguments from the config (`LOSS_PARAMETERS`): SAO's mask
    band, or the PPO family's clip range where the config sets one (the paper's default
    otherwise)."""
    values = {name: getattr(algorithm, name) for name in LOSS_PARAMETERS[spec.policy_loss]}
    return {name: value for name, value in values.items() if value is not None}


def make_objective(spec: AlgorithmSpec, algorithm: AlgorithmConfig, aggregation: str) -> Objective:
    """The objective `spec.objective` names, configured from `algorithm`."""
    hyper = loss_hyper(spec, algorithm)
    if spec.objective == "critic":
        return CriticObjective(spec, algorithm, aggregation, hyper)
    if spec.objective == "group":
        return GroupObjective(spec, aggregation, hyper)
    if spec.objective == "sapo":
        return SapoObjective(algorithm, aggregation, hyper)
    raise ValueError(f"unknown objective {spec.objective!r}; known: critic, group, sapo")


__all__ = [
    "CriticObjective",
    "CriticTarget",
    "GroupObjective",
    "GroupTarget",
    "MicroLoss",
    "MicroTarget",
    "Models",
    "NoCritic",
    "Objective",
    "SapoObjective",
    "SapoTarget",
    "Selection",
    "StepTargets",
    "gae_targets",
    "group_selection",
    "loss_hyper",
    "make_objective",
    "sapo_forward",
    "turn_layout",
]
