"""Algorithm presets by name: what each name means for the learner, importable without torch.

`AlgorithmSpec` says which policy loss, which advantages, which critic, which learner
objective (`trainer.learner.objectives`) and which value loss an algorithm uses; the
learner reads these fields and never branches on the algorithm's name. `LOSS_DEFAULTS`
holds each policy loss's paper defaults. The torch tables (`POLICY_LOSSES`,
`ADVANTAGE_ESTIMATORS`, `NEEDS_PROX`, `get_policy_loss`, ...) live in
`trainer.algorithms.losses`; this module imports no torch, so `trainer.config` (and
`python -m trainer.train --help`) can list the algorithms without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class AlgorithmSpec:
    """What one algorithm name means for the learner: which loss, which advantages, which critic."""

    policy_loss: str
    """A key of `trainer.algorithms.losses.POLICY_LOSSES`."""
    advantages: str
    """`gae` (token-level, skip-observation, needs a critic), `turn_gae` (SAPO's turn-level GAE
    over the shared readout) or a key of `ADVANTAGE_ESTIMATORS`."""
    critic: str | None
    """`separate` (a `ValueModel`), `shared` (SAPO's readout tokens) or None (group baseline)."""
    objective: Literal["critic", "group", "sapo"]
    """The learner's objective (`trainer.learner.objectives`): a separate critic with GAE
    advantages and K critic updates, group-normalised advantages with no critic, or SAPO's
    shared policy-value backbone."""
    value_loss: Literal["clipped", "plain"] | None = None
    """The separate critic's loss: PPO's `clipped_value_loss` (the value may not move far from
    its rollout-time estimate) or SAO's `value_loss` (plain regression on the returns)."""
    dynamic_sampling: bool = False
    """Drop groups whose rewards are all equal (`dynamic_sampling_mask`) before the update."""
    gae_lambda: float | None = None
    """The policy's GAE lambda when `algorithm.gae_lambda` is unset (SAPO: 0.95); None keeps
    SAO's length-adaptive lambda."""


ALGORITHMS: dict[str, AlgorithmSpec] = {
    # SAO (arXiv 2607.07508): double-sided masked loss, length-adaptive GAE, K = 2 critic updates.
    "sao": AlgorithmSpec("sao", "gae", "separate", "critic", value_loss="plain"),
    # GRPO (arXiv 2402.03300), Dr.GRPO (arXiv 2503.20783), DAPO (arXiv 2503.14476): no critic.
    "grpo": AlgorithmSpec("grpo", "grpo", None, "group"),
    "dr_grpo": AlgorithmSpec("dr_grpo", "dr_grpo", None, "group"),
    "dapo": AlgorithmSpec("dapo", "grpo", None, "group", dynamic_sampling=True),
    # An ablation, not a paper's method: GRPO's group-normalised advantages and no critic, with
    # SAO's double-sided token mask (arXiv 2607.07508) as the policy loss (the same "sao" key,
    # eps_low/eps_high from the config). Against `sao` (mask + critic) and `grpo` (PPO clip +
    # groups) it isolates what SAO's mask buys from what its critic buys (issue #16).
    "grpo_mask": AlgorithmSpec("sao", "grpo", None, "group"),
    "ppo": AlgorithmSpec("ppo", "gae", "separate", "critic", value_loss="clipped"),
    # AReaL (arXiv 2505.24298): decoupled PPO, the proximal policy is the learner's own.
    "decoupled_ppo": AlgorithmSpec("decoupled_ppo", "gae", "separate", "critic", value_loss="clipped"),
    # SAPO (arXiv 2608.19842): PPO's clipped surrogate plus value, Q, KL and entropy terms
    # (`sapo.sapo_loss_terms`), read from one model through two reserved vocabulary tokens.
    "sapo": AlgorithmSpec("ppo", "turn_gae", "shared", "sapo", gae_lambda=0.95),
}

LOSS_DEFAULTS: dict[str, dict[str, float | str]] = {
    "sao": {"aggregation": "token_mean"},
    # GRPO (arXiv 2402.03300): symmetric clip, each sequence's token mean, then the batch mean.
    "grpo": {"clip_low": 0.2, "clip_high": 0.2, "aggregation": "sequence_mean"},
    # Dr.GRPO (arXiv 2503.20783): token sums over a constant horizon, no length normalisation.
    "dr_grpo": {"clip_low": 0.2, "clip_high": 0.2, "aggregation": "sequence_sum_norm"},
    # DAPO (arXiv 2503.14476): clip-higher and token-level normalisation.
    "dapo": {"clip_low": 0.2, "clip_high": 0.28, "aggregation": "token_mean"},
    "ppo": {"clip_low": 0.2, "clip_high": 0.2, "aggregation": "token_mean"},
    # AReaL (arXiv 2505.24298).
    "decoupled_ppo": {"clip_low": 0.2, "clip_high": 0.2, "aggregation": "token_mean"},
}
"""Each policy loss's paper defaults, by loss name: its clip range (the PPO family) and its
loss aggregation. The losses (`trainer.algorithms.losses.POLICY_LOSSES`) take them as their
defaults, and `trainer.resolve` writes them into a run's config where it sets none."""


def get_algorithm(name: str) -> AlgorithmSpec:
    """The preset called `name`, or a ValueError listing the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}") from None
