"""PPO-family losses, value clipping, KL, entropy and the loss registry, against float64
references written as plain loops over tokens."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algorithms.losses import NEEDS_PROX, POLICY_LOSSES, get_policy_loss, sao_loss
from trainer.algorithms.ppo import clipped_value_loss, decoupled_ppo_loss, kl_k3, ppo_clip_loss, token_entropy
from trainer.algorithms.registry import ALGORITHMS, get_algorithm
from trainer.algorithms.sao import sao_policy_loss

logps = st.floats(-4.0, -0.01)
small = st.floats(-3.0, 3.0, allow_nan=False)


def grid(element, extra=0):
    """[B][T] lists of `element`, plus a [B][T] mask; B in 1..3, T in 1..6."""
    return st.integers(1, 3).flatmap(
        lambda b: st.integers(1, 6).flatmap(
            lambda t: st.tuples(
                *[st.lists(st.lists(e, min_size=t, max_size=t), min_size=b, max_size=b) for e in element],
                st.lists(st.lists(st.booleans(), min_size=t, max_size=t), min_size=b, max_size=b),
            )
        )
    )


def reference_aggregate(per_token, mask, mode):
    if mode == "token_mean":
        kept = [v for row, m in zip(per_token, mask, strict=True) for v, k in zip(row, m, strict=True) if k]
        return sum(kept) / len(kept) if kept else 0.0
    per_sequence = []
    for row, m in zip(per_token, mask, strict=True):
        kept = [v for v, k in zip(row, m, strict=True) if k]
        if kept:
            per_sequence.append(sum(kept) / (len(kept) if mode == "sequence_mean" else len(row)))
    return sum(per_sequence) / len(per_sequence) if per_sequence else 0.0


def reference_surrogate(lp, anchor, a, lo, hi):
    r = math.exp(lp - anchor)
    return max(-r * a, -min(max(r, 1 - lo), 1 + hi) * a)


def f64(x):
    return torch.tensor(x, dtype=torch.float64)


@settings(max_examples=50, deadline=None)
@given(grid([logps, logps, small]), st.sampled_from(["token_mean", "sequence_mean", "sequence_sum_norm"]))
def test_ppo_clip_matches_loop_reference(data, aggregation):
    logp, logp_old, adv, mask = data
    loss, stats = ppo_clip_loss(
        f64(logp), f64(logp_old), f64(adv), torch.tensor(mask), clip_low=0.2, clip_high=0.28, aggregation=aggregation
    )
    per_token = [
        [reference_surrogate(logp[b][t], logp_old[b][t], adv[b][t], 0.2, 0.28) for t in range(len(logp[b]))]
        for b in range(len(logp))
    ]
    assert math.isclose(float(loss), reference_aggregate(per_token, mask, aggregation), rel_tol=1e-9, abs_tol=1e-12)
    n = sum(map(sum, mask))
    high = sum(
        1
        for b in range(len(logp))
        for t in range(len(logp[b]))
        if mask[b][t] and adv[b][t] > 0 and math.exp(logp[b][t] - logp_old[b][t]) > 1.28
    )
    assert math.isclose(stats["clip_high_fraction"], high / n if n else 0.0, abs_tol=1e-12)


@settings(max_examples=50, deadline=None)
@given(grid([logps, logps, logps, small]), st.sampled_from([None, 1.5]))
def test_decoupled_ppo_matches_loop_reference(data, cap):
    logp, logp_behav, logp_prox, adv, mask = data
    loss, stats = decoupled_ppo_loss(
        f64(logp), f64(logp_behav), f64(adv), torch.tensor(mask), logp_prox=f64(logp_prox), behav_weight_cap=cap
    )
    per_token = []
    for b in range(len(logp)):
        row = []
        for t in range(len(logp[b])):
            w = math.exp(logp_prox[b][t] - logp_behav[b][t])
            if cap is not None and w > cap:
                w = 0.0
            row.append(w * reference_surrogate(logp[b][t], logp_prox[b][t], adv[b][t], 0.2, 0.2))
        per_token.append(row)
    assert math.isclose(float(loss), reference_aggregate(per_token, mask, "token_mean"), rel_tol=1e-9, abs_tol=1e-12)


def test_clipped_tokens_get_zero_gradient_and_clip_boundaries():
    # ratios e^0.5 ~ 1.65 (A > 0: clipped above 1.28), e^-0.5 ~ 0.61 (A < 0: clipped below 0.8),
    # e^0.5 with A < 0 (pessimistic side: not clipped), e^0.1 ~ 1.105 (inside the band).
    logp = torch.tensor([[-1.0, -1.0, -1.0, -1.0]], dtype=torch.float64, requires_grad=True)
    logp_old = torch.tensor([[-1.5, -0.5, -1.5, -1.1]], dtype=torch.float64)
    adv = torch.tensor([[1.0, -1.0, -1.0, 2.0]], dtype=torch.float64)
    loss, stats = ppo_clip_loss(logp, logp_old, adv, torch.ones(1, 4, dtype=torch.bool), clip_low=0.2, clip_high=0.28)
    loss.backward()
    grad = logp.grad[0]
    assert grad[0] == 0 and grad[1] == 0
    # d/dlogp of -r*A/4 is -r*A/4.
    assert math.isclose(float(grad[2]), math.exp(0.5) / 4, rel_tol=1e-12)
    assert math.isclose(float(grad[3]), -math.exp(0.1) * 2 / 4, rel_tol=1e-12)
    assert stats["clip_high_fraction"] == 0.25 and stats["clip_low_fraction"] == 0.25


def test_on_policy_losses_reduce_to_the_vanilla_policy_gradient():
    torch.manual_seed(0)
    logp_rollout = -torch.rand(2, 5, dtype=torch.float64) * 3
    adv = torch.randn(2, 5, dtype=torch.float64)
    mask = torch.rand(2, 5) > 0.3
    expected = -adv * mask / mask.sum()  # gradient of -mean(A * logp) over the mask
    for name, fn in POLICY_LOSSES.items():
        logp = logp_rollout.clone().requires_grad_(True)
        loss, stats = fn(logp, logp_rollout, adv, mask, logp_prox=logp_rollout, aggregation="token_mean")
        loss.backward()
        assert torch.allclose(logp.grad, expected, atol=1e-12), name
        assert all(isinstance(v, float) for v in stats.values()), name


def test_decoupled_with_fresh_behaviour_equals_ppo_clip():
    torch.manual_seed(1)
    logp, behav, adv = -torch.rand(2, 4) * 2, -torch.rand(2, 4) * 2, torch.randn(2, 4)
    mask = torch.ones(2, 4, dtype=torch.bool)
    a, _ = decoupled_ppo_loss(logp, behav, adv, mask, logp_prox=behav)
    b, _ = ppo_clip_loss(logp, behav, adv, mask)
    assert torch.equal(a, b)
    # A stale behaviour policy rescales each token by pi_prox / pi_behav.
    c, stats = decoupled_ppo_loss(logp, behav - math.log(2.0), adv, mask, logp_prox=behav)
    assert torch.allclose(c, 2 * a) and math.isclose(stats["mean_behav_weight"], 2.0, rel_tol=1e-6)


@settings(max_examples=40, deadline=None)
@given(grid([small, small, small]), st.floats(0.05, 1.0))
def test_clipped_value_loss_matches_loop_reference(data, clip):
    values, old, returns, mask = data
    loss = clipped_value_loss(f64(values), f64(old), f64(returns), torch.tensor(mask), clip=clip)
    per_token = [
        [
            0.5 * max((v - r) ** 2, (o + min(max(v - o, -clip), clip) - r) ** 2)
            for v, o, r in zip(values[b], old[b], returns[b], strict=True)
        ]
        for b in range(len(values))
    ]
    assert math.isclose(float(loss), reference_aggregate(per_token, mask, "token_mean"), rel_tol=1e-9, abs_tol=1e-12)


def test_clipped_value_loss_hand_case():
    # V moved from 0 to 1 towards R = 2 with clip 0.2: max((1-2)^2, (0.2-2)^2) / 2 = 1.62
    loss = clipped_value_loss(torch.tensor([[1.0]]), torch.tensor([[0.0]]), torch.tensor([[2.0]]), torch.ones(1, 1))
    assert math.isclose(float(loss), 1.62, rel_tol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(logps, logps), min_size=1, max_size=8))
def test_kl_k3_matches_loop_reference(pairs):
    logp, ref = zip(*pairs, strict=True)
    kl = kl_k3(f64(logp), f64(ref))
    for k, (lp, lr) in zip(kl.tolist(), pairs, strict=True):
        ratio = math.exp(lr - lp)
        assert math.isclose(k, ratio - math.log(ratio) - 1, rel_tol=1e-9, abs_tol=1e-12) and k >= 0


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4).flatmap(lambda v: st.lists(st.lists(st.floats(-20, 20), min_size=v, max_size=v), min_size=1)))
def test_token_entropy_matches_loop_reference(logits):
    entropy = token_entropy(f64(logits))
    for h, row in zip(entropy.tolist(), logits, strict=True):
        top = max(row)
        z = sum(math.exp(x - top) for x in row)
        probabilities = [math.exp(x - top) / z for x in row]
        assert math.isclose(h, -sum(p * math.log(p) for p in probabilities if p > 0), rel_tol=1e-9, abs_tol=1e-9)


def test_token_entropy_with_banned_tokens_is_finite_with_finite_gradient():
    logits = torch.tensor([[0.0, 0.0, -torch.inf]], requires_grad=True)
    entropy = token_entropy(logits)
    entropy.sum().backward()
    assert math.isclose(entropy.item(), math.log(2), rel_tol=1e-6)
    assert torch.isfinite(logits.grad).all()


def test_registry_names_defaults_and_errors():
    assert set(POLICY_LOSSES) == {"sao", "grpo", "dr_grpo", "dapo", "ppo", "decoupled_ppo"}
    assert POLICY_LOSSES["dapo"].keywords["clip_high"] == 0.28
    assert {spec.policy_loss for spec in ALGORITHMS.values()} <= set(POLICY_LOSSES)
    assert get_algorithm("dapo").dynamic_sampling and get_algorithm("sao").critic == "separate"
    x = torch.zeros(1, 2)
    for name in NEEDS_PROX:
        with pytest.raises(ValueError, match="logp_prox"):
            get_policy_loss(name)(x, x, x, torch.ones(1, 2))
    with pytest.raises(ValueError, match="known"):
        get_policy_loss("trpo")


def test_sao_registry_entry_is_sao_policy_loss():
    torch.manual_seed(2)
    logp, rollout, adv = -torch.rand(2, 5) * 2, -torch.rand(2, 5) * 2, torch.randn(2, 5)
    mask = torch.ones(2, 5, dtype=torch.bool)
    loss, stats = sao_loss(logp, rollout, adv, mask, logp_prox=rollout + 1.0, eps_low=0.3, eps_high=5.0)
    direct, direct_stats = sao_policy_loss(logp, rollout, adv, mask, 0.3, 5.0)
    assert torch.equal(loss, direct) and stats == direct_stats.as_dict()


def test_every_spec_names_an_objective_and_the_loss_parameters_it_reads():
    from trainer.algorithms.losses import LOSS_PARAMETERS
    from trainer.config import AlgorithmConfig

    assert set(LOSS_PARAMETERS) == set(POLICY_LOSSES)
    assert all(hasattr(AlgorithmConfig(), field) for fields in LOSS_PARAMETERS.values() for field in fields)
    for name, spec in ALGORITHMS.items():
        assert spec.objective in ("critic", "group", "sapo"), name
        # A separate critic has a value loss; nothing else does.
        assert (spec.objective == "critic") == (spec.critic == "separate") == (spec.value_loss is not None), name
    assert get_algorithm("ppo").value_loss == get_algorithm("decoupled_ppo").value_loss == "clipped"
    assert get_algorithm("sao").value_loss == "plain"


def test_the_registry_imports_without_torch():
    """`trainer.config` reads the algorithm names: `python -m trainer.train --help` needs no torch."""
    import subprocess
    import sys

    code = "import sys, trainer.algorithms.registry as r; r.get_algorithm('sapo'); print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("name", ["sao", "decoupled_ppo", "ppo"])
def test_sequence_sum_norm_divides_each_sequence_by_the_horizon(name):
    """Every loss takes Dr.GRPO's constant `horizon` (the learner passes it for
    `sequence_sum_norm`): with a uniform advantage on on-policy tokens each loss is linear
    in the token count, so the horizon only rescales it."""
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.7, 0.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    advantages = torch.ones(2, 3)
    loss = get_policy_loss(name)
    common = {"logp_prox": logp, "aggregation": "sequence_sum_norm"}
    at_3, _ = loss(logp, logp, advantages, mask, horizon=3, **common)
    at_12, _ = loss(logp, logp, advantages, mask, horizon=12, **common)
    assert torch.isfinite(at_3) and at_3 != 0
    assert math.isclose(float(at_3), 4 * float(at_12), rel_tol=1e-6)
