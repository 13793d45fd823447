"""GRPO / Dr.GRPO advantages and DAPO's dynamic-sampling filter, against float64 references
written as plain loops over groups."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algorithms.group import dr_grpo_advantages, dynamic_sampling_mask, grpo_advantages
from trainer.algorithms.losses import ADVANTAGE_ESTIMATORS, get_advantage_estimator

# Rewards drawn from a few values so that ties and all-equal groups are common, as with 0/1 rewards.
samples = st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0.0, 1.0, 0.5, -2.0, 3.25])), min_size=1, max_size=16)


def reference_group_advantages(groups, rewards, normalise, eps=1e-6):
    members = {}
    for g, r in zip(groups, rewards, strict=True):
        members.setdefault(g, []).append(r)
    out = []
    for g, r in zip(groups, rewards, strict=True):
        rs = members[g]
        mean = sum(rs) / len(rs)
        if not normalise:
            out.append(r - mean)
            continue
        std = math.sqrt(sum((x - mean) ** 2 for x in rs) / (len(rs) - 1)) if len(rs) > 1 else 0.0
        out.append((r - mean) / (std + eps))
    return out


@settings(max_examples=60, deadline=None)
@given(samples)
def test_group_advantages_match_loop_reference(pairs):
    groups, rewards = [p[0] for p in pairs], [p[1] for p in pairs]
    r = torch.tensor(rewards, dtype=torch.float64)
    for ids in (torch.tensor(groups) * 7, [f"prompt-{g}" for g in groups]):  # sparse ints and strings
        grpo = grpo_advantages(r, ids)
        dr = dr_grpo_advantages(r, ids)
        assert torch.allclose(
            grpo, torch.tensor(reference_group_advantages(groups, rewards, True), dtype=torch.float64), atol=1e-9
        )
        assert torch.allclose(
            dr, torch.tensor(reference_group_advantages(groups, rewards, False), dtype=torch.float64), atol=1e-12
        )
        keep = dynamic_sampling_mask(r, ids)
        for i, g in enumerate(groups):
            assert bool(keep[i]) == (len({rewards[j] for j in range(len(groups)) if groups[j] == g}) > 1)


def test_hand_computed_groups_of_unequal_size():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.5])
    groups = ["a", "a", "a", "a", "b", "b", "c"]
    # group a: mean 0.5, unbiased std sqrt(1/3); b: all equal; c: a singleton
    s = math.sqrt(1 / 3)
    expected = [0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0.0, 0.0, 0.0]
    assert torch.allclose(grpo_advantages(rewards, groups, eps=0.0).nan_to_num(0.0), torch.tensor(expected))
    assert torch.allclose(grpo_advantages(rewards, groups)[:4], torch.tensor(expected[:4]), atol=1e-5)
    assert dr_grpo_advantages(rewards, groups).tolist() == [0.5, -0.5, -0.5, 0.5, 0.0, 0.0, 0.0]
    assert dynamic_sampling_mask(rewards, groups).tolist() == [True] * 4 + [False] * 3
    assert dynamic_sampling_mask(torch.tensor([1.0, 1.05]), [0, 0], atol=0.1).tolist() == [False, False]


def test_registry():
    assert {"grpo": grpo_advantages, "dr_grpo": dr_grpo_advantages} == ADVANTAGE_ESTIMATORS
    assert get_advantage_estimator("dr_grpo") is dr_grpo_advantages
