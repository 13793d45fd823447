"""The RL math as small pure functions over tensors (see each module's docstring).

- `sao`: SAO's masked loss, skip-observation GAE, length-adaptive lambda, critic helpers.
- `ppo`: PPO-clip / DAPO / AReaL decoupled losses, clipped value loss, k3 KL, entropy.
- `group`: GRPO / Dr.GRPO advantages and DAPO's dynamic-sampling filter.
- `sapo`: SAPO's shared-backbone value readout, turn-level GAE and combined loss.
- `vigor`: VIGOR's variance-guided rollout allocation.
- `curriculum`: PAC's Thompson-sampling family allocator and per-family loss weights.
- `registry`: losses, estimators and algorithm presets by name.
"""

from trainer.algorithms.curriculum import FamilyLossWeights, PACController
from trainer.algorithms.group import (
    broadcast_to_tokens,
    dr_grpo_advantages,
    dynamic_sampling_mask,
    grpo_advantages,
)
from trainer.algorithms.ppo import (
    clipped_value_loss,
    decoupled_ppo_loss,
    kl_k3,
    ppo_clip_loss,
    token_entropy,
)
from trainer.algorithms.registry import (
    ADVANTAGE_ESTIMATORS,
    ALGORITHMS,
    NEEDS_PROX,
    POLICY_LOSSES,
    AlgorithmSpec,
    get_advantage_estimator,
    get_algorithm,
    get_policy_loss,
    sao_loss,
)
from trainer.algorithms.sao import (
    AGGREGATIONS,
    CODING_EPS,
    CRITIC_STEPS,
    MATH_EPS,
    SAO_EPS,
    PolicyLossStats,
    action_index,
    aggregate,
    double_sided_mask,
    eps_for_domain,
    freeze_attention,
    gae,
    length_adaptive_lambda,
    length_adaptive_lambdas,
    place_turn_rewards,
    sao_policy_loss,
    skip_observation_gae,
    value_loss,
)
from trainer.algorithms.sapo import (
    TurnTargets,
    ban_value_tokens,
    broadcast_turns,
    normalize_turn_advantages,
    sapo_loss,
    sapo_value,
    sapo_value_from_hidden,
    turn_gae,
    turn_positions,
)
from trainer.algorithms.vigor import VigorAllocator

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AGGREGATIONS",
    "ALGORITHMS",
    "CODING_EPS",
    "CRITIC_STEPS",
    "MATH_EPS",
    "NEEDS_PROX",
    "POLICY_LOSSES",
    "SAO_EPS",
    "AlgorithmSpec",
    "FamilyLossWeights",
    "PACController",
    "PolicyLossStats",
    "TurnTargets",
    "VigorAllocator",
    "action_index",
    "aggregate",
    "ban_value_tokens",
    "broadcast_to_tokens",
    "broadcast_turns",
    "clipped_value_loss",
    "decoupled_ppo_loss",
    "double_sided_mask",
    "dr_grpo_advantages",
    "dynamic_sampling_mask",
    "eps_for_domain",
    "freeze_attention",
    "gae",
    "get_advantage_estimator",
    "get_algorithm",
    "get_policy_loss",
    "grpo_advantages",
    "kl_k3",
    "length_adaptive_lambda",
    "length_adaptive_lambdas",
    "normalize_turn_advantages",
    "place_turn_rewards",
    "ppo_clip_loss",
    "sao_loss",
    "sao_policy_loss",
    "sapo_loss",
    "sapo_value",
    "sapo_value_from_hidden",
    "skip_observation_gae",
    "token_entropy",
    "turn_gae",
    "turn_positions",
    "value_loss",
]
