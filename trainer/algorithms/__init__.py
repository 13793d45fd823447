"""The RL math as small pure functions over tensors (see each module's docstring).

- `sao`: SAO's masked loss, skip-observation GAE, length-adaptive lambda, critic helpers.
- `ppo`: PPO-clip / DAPO / AReaL decoupled losses, clipped value loss, k3 KL, entropy.
- `group`: GRPO / Dr.GRPO advantages and DAPO's dynamic-sampling filter.
- `sapo`: SAPO's shared-backbone value readout, turn-level GAE and combined loss.
- `vigor`: VIGOR's variance-guided rollout allocation.
- `curriculum`: PAC's Thompson-sampling family allocator and per-family loss weights.
- `losses`: policy losses and group advantage estimators by name.
- `registry`: algorithm presets and each loss's paper defaults by name (no torch: the
  config and `python -m trainer.train --help` read it without importing torch).

Import names from the module that defines them (`from trainer.algorithms.sao import gae`).
"""
