"""The RL math as small pure functions over tensors (see each module's docstring).

- `sao`: SAO's masked loss, skip-observation GAE, length-adaptive lambda, critic helpers.
- `ppo`: PPO-clip / DAPO / AReaL decoupled losses, clipped value loss, k3 KL, entropy.
- `group`: GRPO / Dr.GRPO advantages and DAPO's dynamic-sampling filter.
- `sapo`: SAPO's shared-backbone value readout, turn-level GAE and combined loss.
- `vigor`: VIGOR's variance-guided rollout allocation.
- `curriculum`: PAC's Thompson-sampling family allocator and per-family loss weights.
- `losses`: policy losses and group advantage estimators by name.
- `registry`: algorithm presets by name (no torch).

Names are imported lazily from their modules (PEP 562), so importing the registry (as
`trainer.config` does) does not import torch.
"""

from __future__ import annotations

import importlib

_SOURCES: dict[str, str] = {
    "ADVANTAGE_ESTIMATORS": "losses",
    "AGGREGATIONS": "sao",
    "ALGORITHMS": "registry",
    "AlgorithmSpec": "registry",
    "CODING_EPS": "sao",
    "CRITIC_STEPS": "sao",
    "FamilyLossWeights": "curriculum",
    "LOSS_PARAMETERS": "losses",
    "MATH_EPS": "sao",
    "NEEDS_PROX": "losses",
    "PACController": "curriculum",
    "POLICY_LOSSES": "losses",
    "PolicyLossStats": "sao",
    "SAO_EPS": "sao",
    "TurnTargets": "sapo",
    "VigorAllocator": "vigor",
    "action_index": "sao",
    "aggregate": "sao",
    "ban_value_tokens": "sapo",
    "broadcast_to_tokens": "group",
    "broadcast_turns": "sapo",
    "clipped_value_loss": "ppo",
    "decoupled_ppo_loss": "ppo",
    "double_sided_mask": "sao",
    "dr_grpo_advantages": "group",
    "dynamic_sampling_mask": "group",
    "eps_for_domain": "sao",
    "freeze_attention": "sao",
    "gae": "sao",
    "get_advantage_estimator": "losses",
    "get_algorithm": "registry",
    "get_policy_loss": "losses",
    "grpo_advantages": "group",
    "kl_k3": "ppo",
    "length_adaptive_lambda": "sao",
    "length_adaptive_lambdas": "sao",
    "normalize_turn_advantages": "sapo",
    "place_turn_rewards": "sao",
    "ppo_clip_loss": "ppo",
    "sao_loss": "losses",
    "sao_policy_loss": "sao",
    "sapo_loss_terms": "sapo",
    "sapo_value": "sapo",
    "sapo_value_from_hidden": "sapo",
    "skip_observation_gae": "sao",
    "token_entropy": "ppo",
    "turn_gae": "sapo",
    "turn_positions": "sapo",
    "value_loss": "sao",
}
"""Each public name and the submodule that defines it."""

__all__ = sorted(_SOURCES)


def __getattr__(name: str):
    try:
        module = _SOURCES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once found, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SOURCES})
