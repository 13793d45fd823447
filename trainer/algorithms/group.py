"""Group-based advantages (GRPO, Dr.GRPO) and DAPO's dynamic-sampling filter.

Rewards are one per rollout, [N], with `group_index` saying which prompt each rollout
answers (ints in a tensor, or any hashable ids such as prompt strings). Groups may differ in
size, as they do under VIGOR's allocation.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch


def _compact_groups(
    group_index: torch.Tensor | Sequence[Hashable], n: int, device: torch.device
) -> tuple[torch.Tensor, int]:
    """Group ids as 0..G-1 (in order of first appearance for hashable ids) and G."""
    if isinstance(group_index, torch.Tensor):
        _, inverse = torch.unique(group_index.to(device), return_inverse=True)
    else:
        ids: dict[Hashable, int] = {}
        inverse = torch.tensor([ids.setdefault(g, len(ids)) for g in group_index], dtype=torch.long, device=device)
    if inverse.numel() != n:
        raise ValueError(f"got {inverse.numel()} group ids for {n} rewards")
    return inverse, int(inverse.max()) + 1 if n else 0


def _group_mean_std(
    rewards: torch.Tensor, group_index: torch.Tensor | Sequence[Hashable]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-rollout group mean, unbiased group std (0 for singleton groups) and group size."""
    groups, n_groups = _compact_groups(group_index, rewards.numel(), rewards.device)
    zeros = rewards.new_zeros(n_groups)
    counts = zeros.index_add(0, groups, torch.ones_like(rewards))
    means = zeros.index_add(0, groups, rewards) / counts
    # Two passes (mean, then squared deviations) rather than E[r^2] - E[r]^2, which cancels badly.
    squares = zeros.index_add(0, groups, (rewards - means[groups]) ** 2)
    stds = (squares / (counts - 1).clamp(min=1)).sqrt()
    return means[groups], stds[groups], counts[groups]


def grpo_advantages(
    rewards: torch.Tensor, group_index: torch.Tensor | Sequence[Hashable], *, eps: float = 1e-6
) -> torch.Tensor:
    """GRPO's group-normalised advantages (arXiv 2402.03300): `(r - mean_g) / (std_g + eps)`.

    The std is the unbiased one, as TRL and verl compute it. Where the paper is silent: a
    group of one rollout has no spread and gets advantage 0 (its reward minus its own mean).
    """
    mean, std, _ = _group_mean_std(rewards, group_index)
    return (rewards - mean) / (std + eps)


def dr_grpo_advantages(rewards: torch.Tensor, group_index: torch.Tensor | Sequence[Hashable]) -> torch.Tensor:
    """Dr.GRPO's advantages (arXiv 2503.20783): `r - mean_g`, no division by the group's std,
    which otherwise up-weights prompts that are nearly always solved or nearly never."""
    mean, _, _ = _group_mean_std(rewards, group_index)
    return rewards - mean


def dynamic_sampling_mask(
    rewards: torch.Tensor, group_index: torch.Tensor | Sequence[Hashable], *, atol: float = 0.0
) -> torch.Tensor:
    """DAPO's dynamic sampling filter (arXiv 2503.14476): True for rollouts whose group's
    rewards are not all equal (max - min > atol).

    An all-equal group has zero advantage for every rollout, so it carries no gradient and
    only dilutes the batch. DAPO then over-samples prompts until the batch is full; that
    loop is the orchestrator's, this is only the filter. Singleton groups are dropped.
    """
    groups, n_groups = _compact_groups(group_index, rewards.numel(), rewards.device)
    high = rewards.new_full((n_groups,), -torch.inf).scatter_reduce(0, groups, rewards, "amax")
    low = rewards.new_full((n_groups,), torch.inf).scatter_reduce(0, groups, rewards, "amin")
    return (high - low)[groups] > atol
