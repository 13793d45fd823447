"""SAO math against float64 references written as plain loops over tokens."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algorithms.sao import (
    aggregate,
    double_sided_mask,
    gae,
    length_adaptive_lambda,
    sao_policy_loss,
    value_loss,
)

floats = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False)


def reference_loss(logp, logp_rollout, adv, mask, eps_low, eps_high):
    """-mean over policy tokens of f(r) * A * logp, f(r) = r inside (1-eps_low, 1+eps_high), else 0."""
    total, count = 0.0, 0
    for row in range(len(logp)):
        for t in range(len(logp[row])):
            if not mask[row][t]:
                continue
            count += 1
            r = math.exp(logp[row][t] - logp_rollout[row][t])
            if 1 - eps_low < r < 1 + eps_high:
                total += -r * adv[row][t] * logp[row][t]
    return total / count if count else 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda b: st.integers(1, 6).flatmap(
            lambda t: st.tuples(
                st.lists(st.lists(st.floats(-4, -0.01), min_size=t, max_size=t), min_size=b, max_size=b),
                st.lists(st.lists(st.floats(-4, -0.01), min_size=t, max_size=t), min_size=b, max_size=b),
                st.lists(st.lists(floats, min_size=t, max_size=t), min_size=b, max_size=b),
                st.lists(st.lists(st.booleans(), min_size=t, max_size=t), min_size=b, max_size=b),
            )
        )
    )
)
def test_policy_loss_matches_loop_reference(data):
    logp, logp_rollout, adv, mask = data
    loss, _ = sao_policy_loss(
        torch.tensor(logp, dtype=torch.float64),
        torch.tensor(logp_rollout, dtype=torch.float64),
        torch.tensor(adv, dtype=torch.float64),
        torch.tensor(mask),
        eps_low=0.8,
        eps_high=3.0,
    )
    assert math.isclose(
        float(loss), reference_loss(logp, logp_rollout, adv, mask, 0.8, 3.0), rel_tol=1e-9, abs_tol=1e-12
    )


def test_masked_tokens_get_exactly_zero_gradient():
    logp = torch.tensor([[-1.0, -1.0, -1.0, -1.0]], dtype=torch.float64, requires_grad=True)
    # ratios: e^0 = 1 (kept), e^-2 ~ 0.135 (<= 0.2: dropped low), e^1.5 ~ 4.48 (>= 4: dropped high), e^0.5 (kept)
    logp_rollout = torch.tensor([[-1.0, 1.0, -2.5, -1.5]], dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    loss, stats = sao_policy_loss(logp, logp_rollout, adv, torch.ones(1, 4, dtype=torch.bool), 0.8, 3.0)
    loss.backward()
    grad = logp.grad[0]
    assert grad[1] == 0 and grad[2] == 0
    assert grad[0] != 0 and grad[3] != 0
    # Gradient of a kept token is -r * A / n: dropped tokens still count in the mean (f(r) = 0).
    assert math.isclose(float(grad[3]), -math.exp(0.5) / 4, rel_tol=1e-12)
    assert stats.masked_low_fraction == 0.25 and stats.masked_high_fraction == 0.25


def test_mask_boundaries_are_strict():
    # eps values whose bounds are exact in binary: 1 - 0.5 = 0.5 and 1 + 3 = 4.
    ratio = torch.tensor([0.5, 0.5000001, 3.9999999, 4.0], dtype=torch.float64)
    assert double_sided_mask(ratio, 0.5, 3.0).tolist() == [0.0, 1.0, 1.0, 0.0]


def test_all_tokens_masked_gives_zero_loss_with_a_graph():
    logp = torch.zeros(1, 2, requires_grad=True)
    loss, _ = sao_policy_loss(logp, torch.full((1, 2), 5.0), torch.ones(1, 2), torch.ones(1, 2, dtype=torch.bool))
    loss.backward()
    assert loss.item() == 0.0 and logp.grad.abs().sum() == 0


def test_an_overflowing_ratio_is_dropped_without_nan():
    logp = torch.tensor([[-1.0, -1.0]], requires_grad=True)
    loss, stats = sao_policy_loss(logp, torch.tensor([[-200.0, -1.0]]), torch.ones(1, 2), torch.ones(1, 2))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert logp.grad[0, 0] == 0 and logp.grad[0, 1] == -0.5 and stats.masked_high_fraction == 0.5


def reference_gae(rewards, values, gamma, lam, bootstrap):
    n = len(values)
    adv = [0.0] * n
    for t in range(n):  # the forward sum definition, not the backward recursion
        total = 0.0
        for k in range(t, n):
            next_v = values[k + 1] if k + 1 < n else bootstrap
            delta = rewards[k] + gamma * next_v - values[k]
            total += (gamma * lam) ** (k - t) * delta
        adv[t] = total
    return adv


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(st.lists(floats, min_size=n, max_size=n), st.lists(floats, min_size=n, max_size=n))
    ),
    st.floats(0.5, 1.0),
    st.floats(0.0, 1.0),
    floats,
)
def test_gae_matches_forward_sum_reference(rv, gamma, lam, bootstrap):
    rewards, values = rv
    adv, ret = gae(
        torch.tensor(rewards, dtype=torch.float64), torch.tensor(values, dtype=torch.float64), gamma, lam, bootstrap
    )
    expected = reference_gae(rewards, values, gamma, lam, bootstrap)
    assert torch.allclose(adv, torch.tensor(expected, dtype=torch.float64), atol=1e-9)
    assert torch.allclose(ret, adv + torch.tensor(values, dtype=torch.float64))


def test_lambda_one_gives_monte_carlo_returns():
    _, returns = gae(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.3, -0.2, 0.9]), 1.0, 1.0)
    assert torch.allclose(returns, torch.ones(3))


def test_length_adaptive_lambda():
    assert math.isclose(length_adaptive_lambda(100, 1.5), 1 - 1 / 150)
    assert length_adaptive_lambda(1, 1.5) == 1 - 1 / 1.5
    assert length_adaptive_lambda(0, 1.5) == 1 - 1 / 1.5  # an empty response counts as one token
    assert length_adaptive_lambda(1, 0.5) == 0.0  # alpha * l < 1: clamped at 0, not negative


def test_aggregations():
    values = torch.tensor([[1.0, 3.0, 0.0], [5.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert float(aggregate(values, mask, "token_mean")) == 3.0  # (1 + 3 + 5) / 3
    assert float(aggregate(values, mask, "sequence_mean")) == 3.5  # (2 + 5) / 2
    assert float(value_loss(torch.tensor([[1.0, 2.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[1, 1]]))) == 1.25
