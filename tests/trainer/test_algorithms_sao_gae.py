"""SAO's skip-observation GAE on full sequences, turn rewards, aggregation and critic helpers,
against float64 references written as plain loops over tokens."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algorithms.sao import (
    action_index,
    aggregate,
    eps_for_domain,
    freeze_attention,
    gae,
    length_adaptive_lambda,
    length_adaptive_lambdas,
    place_turn_rewards,
    skip_observation_gae,
)
from trainer.inference.models import ValueModel, load_policy

small = st.floats(-3.0, 3.0, allow_nan=False)


def reference_skip_observation_gae(rewards, values, mask, gamma, lam, bootstrap):
    """Forward-sum definition over the full sequence: walk right from each policy token,
    skipping observation tokens by scanning for the next policy token."""
    n = len(mask)

    def next_policy(k):
        j = k + 1
        while j < n and not mask[j]:
            j += 1
        return j if j < n else None

    advantages = [0.0] * n
    for t in range(n):
        if not mask[t]:
            continue
        total, k, steps = 0.0, t, 0
        while k is not None:
            nxt = next_policy(k)
            next_value = values[nxt] if nxt is not None else bootstrap
            total += (gamma * lam) ** steps * (rewards[k] + gamma * next_value - values[k])
            k, steps = nxt, steps + 1
        advantages[t] = total
    returns = [advantages[t] + values[t] if mask[t] else 0.0 for t in range(n)]
    return advantages, returns


rows = st.integers(1, 3).flatmap(
    lambda b: st.integers(1, 10).flatmap(
        lambda t: st.tuples(
            st.lists(st.lists(small, min_size=t, max_size=t), min_size=b, max_size=b),  # rewards
            st.lists(st.lists(small, min_size=t, max_size=t), min_size=b, max_size=b),  # values
            st.lists(st.lists(st.booleans(), min_size=t, max_size=t), min_size=b, max_size=b),  # policy mask
            st.lists(st.floats(0.0, 1.0), min_size=b, max_size=b),  # lambda per row
            st.lists(small, min_size=b, max_size=b),  # final values
            st.lists(st.booleans(), min_size=b, max_size=b),  # truncated
        )
    )
)


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(0.5, 1.0))
def test_skip_observation_gae_matches_loop_reference_and_compressed_gae(data, gamma):
    rewards, values, mask, lams, finals, truncated = data
    rewards = [[r if m else 0.0 for r, m in zip(rr, mm, strict=True)] for rr, mm in zip(rewards, mask, strict=True)]
    adv, ret = skip_observation_gae(
        torch.tensor(rewards, dtype=torch.float64),
        torch.tensor(values, dtype=torch.float64),
        torch.tensor(mask),
        gamma,
        lams,
        final_value=torch.tensor(finals, dtype=torch.float64),
        truncated=torch.tensor(truncated),
    )
    for row in range(len(values)):
        bootstrap = finals[row] if truncated[row] else 0.0
        ref_adv, ref_ret = reference_skip_observation_gae(
            rewards[row], values[row], mask[row], gamma, lams[row], bootstrap
        )
        assert torch.allclose(adv[row], torch.tensor(ref_adv, dtype=torch.float64), atol=1e-9)
        assert torch.allclose(ret[row], torch.tensor(ref_ret, dtype=torch.float64), atol=1e-9)
        # The same numbers as `gae` over the row's policy tokens with observations cut out.
        positions = torch.tensor(mask[row]).nonzero().squeeze(-1)
        if positions.numel():
            c_adv, c_ret = gae(
                torch.tensor(rewards[row], dtype=torch.float64)[positions],
                torch.tensor(values[row], dtype=torch.float64)[positions],
                gamma,
                lams[row],
                bootstrap,
            )
            assert torch.allclose(adv[row, positions], c_adv, atol=1e-12)
            assert torch.allclose(ret[row, positions], c_ret, atol=1e-12)


# Two actions separated by two observation tokens: [a a o o a].
MASK = torch.tensor([True, True, False, False, True])
VALUES = torch.tensor([1.0, 2.0, 99.0, -99.0, 3.0], dtype=torch.float64)
REWARDS = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64)


def test_hand_computed_terminated_episode_ignores_observation_values_and_final_value():
    # gamma=0.9, lam=0.5: d4 = 1 - 3 = -2; d1 = 0.9*3 - 2 = 0.7 (skips the 99s); d0 = 0.9*2 - 1 = 0.8
    # A4 = -2; A1 = 0.7 + 0.45*(-2) = -0.2; A0 = 0.8 + 0.45*(-0.2) = 0.71
    adv, ret = skip_observation_gae(REWARDS, VALUES, MASK, 0.9, 0.5, final_value=10.0, truncated=False)
    assert torch.allclose(adv, torch.tensor([0.71, -0.2, 0.0, 0.0, -2.0], dtype=torch.float64))
    assert torch.allclose(ret, torch.tensor([1.71, 1.8, 0.0, 0.0, 1.0], dtype=torch.float64))


def test_truncation_bootstraps_from_the_final_value():
    # d4 = 1 + 0.9*10 - 3 = 7; A1 = 0.7 + 0.45*7 = 3.85; A0 = 0.8 + 0.45*3.85 = 2.5325
    adv, _ = skip_observation_gae(REWARDS, VALUES, MASK, 0.9, 0.5, final_value=10.0, truncated=True)
    assert torch.allclose(adv, torch.tensor([2.5325, 3.85, 0.0, 0.0, 7.0], dtype=torch.float64))


def test_lambda_one_returns_are_discounted_monte_carlo_plus_bootstrap():
    _, terminated = skip_observation_gae(REWARDS, VALUES, MASK, 1.0, 1.0)
    _, truncated = skip_observation_gae(REWARDS, VALUES, MASK, 1.0, 1.0, final_value=5.0, truncated=True)
    assert terminated[MASK].tolist() == [1.0, 1.0, 1.0]
    assert truncated[MASK].tolist() == [6.0, 6.0, 6.0]


def test_per_turn_rewards_land_on_each_actions_last_token():
    mask = torch.tensor([False, True, True, False, True, False, False, True, True])
    assert action_index(mask).tolist() == [-1, 0, 0, -1, 1, -1, -1, 2, 2]
    rewards = place_turn_rewards(mask, [0.5, -1.0, 2.0], dtype=torch.float64)
    assert rewards.tolist() == [0.0, 0.0, 0.5, 0.0, -1.0, 0.0, 0.0, 0.0, 2.0]
    # gamma = lam = 1: each token's return is the sum of the rewards from its turn on.
    _, returns = skip_observation_gae(rewards, torch.zeros(9, dtype=torch.float64), mask, 1.0, 1.0)
    assert returns.tolist() == [0.0, 1.5, 1.5, 0.0, 1.0, 0.0, 0.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="3 actions"):
        place_turn_rewards(mask, [1.0])


def reference_runs(mask):
    """(start, end) of each maximal run of True, by walking the list."""
    runs, start = [], None
    for t, m in enumerate(mask + [False]):
        if m and start is None:
            start = t
        elif not m and start is not None:
            runs.append((start, t - 1))
            start = None
    return runs


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=14), st.lists(small, min_size=14, max_size=14))
def test_action_index_and_turn_rewards_match_loop_reference(mask, turn_rewards):
    runs = reference_runs(mask)
    expected_index = [-1] * len(mask)
    expected_rewards = [0.0] * len(mask)
    for i, (start, end) in enumerate(runs):
        for t in range(start, end + 1):
            expected_index[t] = i
        expected_rewards[end] = turn_rewards[i]
    assert action_index(torch.tensor(mask)).tolist() == expected_index
    placed = place_turn_rewards(torch.tensor(mask), turn_rewards[: len(runs)], dtype=torch.float64)
    assert placed.tolist() == expected_rewards


def test_reward_on_an_observation_token_is_an_error():
    with pytest.raises(ValueError, match="non-policy token"):
        skip_observation_gae(torch.tensor([0.0, 1.0]), torch.zeros(2), torch.tensor([True, False]), 1.0, 1.0)


def test_length_adaptive_lambda_per_row():
    mask = torch.tensor([[True] * 4 + [False] * 2, [True, False, True, False, False, False]])
    assert length_adaptive_lambdas(mask, 1.5) == [1 - 1 / 6, 1 - 1 / 3]
    assert length_adaptive_lambdas(mask, 1.5)[0] == length_adaptive_lambda(4, 1.5)


def test_sequence_sum_norm_divides_by_a_constant_horizon():
    values = torch.tensor([[1.0, 3.0, 0.0, 0.0], [5.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0]])
    assert float(aggregate(values, mask, "sequence_sum_norm")) == (4 / 4 + 5 / 4) / 2
    assert float(aggregate(values, mask, "sequence_sum_norm", horizon=2)) == (4 / 2 + 5 / 2) / 2
    with pytest.raises(ValueError, match="sequence_sum_norm"):
        aggregate(values, mask, "mean")


def test_eps_for_domain():
    assert eps_for_domain("coding") == (0.8, 3.0) and eps_for_domain("math") == (0.3, 5.0)
    with pytest.raises(ValueError, match="poetry"):
        eps_for_domain("poetry")


@pytest.fixture(scope="module")
def tiny_policy():
    return load_policy("tiny", seed=0)


def test_freeze_attention_freezes_exactly_the_attention_parameters(tiny_policy):
    critic = ValueModel.from_policy(tiny_policy)
    attention_names = {n for n, _ in critic.named_parameters() if ".self_attn." in n}
    assert freeze_attention(critic) == len(attention_names) == 14  # q/k/v weight + bias, o weight; 2 layers
    assert {n for n, p in critic.named_parameters() if not p.requires_grad} == attention_names
    # A backward pass reaches the MLPs and the head but no attention weight.
    ids = torch.randint(0, 2000, (1, 8))
    critic(ids).sum().backward()
    for name, parameter in critic.named_parameters():
        assert (parameter.grad is None) == (name in attention_names), name


def test_freeze_attention_on_the_policy_and_on_a_model_without_attention(tiny_policy):
    import copy

    policy = copy.deepcopy(tiny_policy)
    assert freeze_attention(policy) == 14
    assert all(p.requires_grad for n, p in policy.named_parameters() if "self_attn" not in n)
    with pytest.raises(ValueError, match="no attention"):
        freeze_attention(torch.nn.Linear(2, 2))


def test_masked_gae_of_length_zero_rows():
    adv, ret = skip_observation_gae(torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.bool), 1.0, 1.0)
    assert adv.abs().sum() == 0 and ret.abs().sum() == 0
    assert math.isclose(length_adaptive_lambda(0), 1 - 1 / 1.5)
