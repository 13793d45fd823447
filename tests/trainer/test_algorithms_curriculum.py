"""PAC's Thompson-sampling controller and per-family loss weights: hand-computed posteriors,
allocation against the closed-form probability of being best, state round trips."""

import json
import math
import random
from fractions import Fraction

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trainer.algorithms.curriculum import FamilyLossWeights, PACController


def test_hand_computed_posterior():
    pac = PACController(["a", "b"], prior_mean=0.5, prior_strength=1.0, noise_std=0.25, discount=0.9)
    assert pac.update("a", torch.tensor([0.2, -0.4]), [1.0, 0.0]) == pytest.approx(0.3)  # mean|A|, no gain yet
    mean, std = pac.posterior("a")
    assert mean == pytest.approx((0.5 + 0.3) / 2) and std == pytest.approx(0.25 / math.sqrt(2))
    # Reward 1.0 against an EMA of 0.5: gain 0.5, score 0.1 + 0.5. Old statistics decay by 0.9.
    assert pac.update("a", [0.1, -0.1], [1.0, 1.0]) == pytest.approx(0.6)
    mean, std = pac.posterior("a")
    assert mean == pytest.approx((0.5 + 0.9 * 0.3 + 0.6) / 2.9) and std == pytest.approx(0.25 / math.sqrt(2.9))
    assert pac.stats["a"]["reward_ema"] == pytest.approx(0.75)
    assert pac.posterior("b") == pytest.approx((0.5, 0.25))


def normal_cdf(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_allocation_follows_the_probability_of_being_best():
    pac = PACController(["a", "b"])
    for _ in range(3):
        pac.update("a", [0.4, -0.4], [0.5])
        pac.update("b", [0.1, -0.1], [0.5])
    (ma, sa), (mb, sb) = pac.posterior("a"), pac.posterior("b")
    p_a = normal_cdf((ma - mb) / math.sqrt(sa**2 + sb**2))
    counts = pac.allocate(4000, random.Random(0))
    assert sum(counts.values()) == 4000
    assert abs(counts["a"] / 4000 - p_a) < 0.03


def test_allocation_shifts_toward_a_family_whose_reward_rises():
    pac = PACController(["rising", "flat"])
    for step in range(6):
        pac.update("rising", [0.3, -0.3], [0.2 + 0.1 * step])
        pac.update("flat", [0.3, -0.3], [0.5])
    counts = pac.allocate(2000, random.Random(1))
    assert counts["rising"] > 2 * counts["flat"]
    # Same learnability and flat rewards everywhere: no preference.
    even = PACController(["rising", "flat"])
    for _ in range(6):
        even.update("rising", [0.3, -0.3], [0.5])
        even.update("flat", [0.3, -0.3], [0.5])
    assert abs(even.allocate(2000, random.Random(1))["rising"] - 1000) < 100


def test_min_share_and_errors():
    pac = PACController(["a", "b", "c"], min_share=0.1)
    for _ in range(5):
        pac.update("a", [1.0], [1.0])
    counts = pac.allocate(100, random.Random(0))
    assert sum(counts.values()) == 100 and min(counts.values()) >= 10
    with pytest.raises(ValueError, match="'z'"):
        pac.update("z", [1.0], [1.0])
    with pytest.raises(ValueError, match="exceeds"):
        PACController(["a", "b"], min_share=0.6)


def test_pac_state_survives_a_json_round_trip():
    pac = PACController(["a", "b"], discount=0.8, min_share=0.05)
    pac.update("a", [0.5, -0.2], [0.0, 1.0])
    pac.update("a", [0.1], [1.0])
    restored = PACController(["a", "b"])
    restored.load_state_dict(json.loads(json.dumps(pac.state_dict())))
    assert restored.state_dict() == pac.state_dict()
    assert restored.allocate(50, random.Random(3)) == pac.allocate(50, random.Random(3))
    with pytest.raises(ValueError, match="unknown settings"):
        restored.load_state_dict({"settings": {"temperature": 1.0}, "families": {}})


def test_family_weights_hand_computed():
    weights = FamilyLossWeights(["a", "b", "c"], mode="learnability", smoothing=0.9, floor=0.1)
    assert weights.weights() == {"a": 1.0, "b": 1.0, "c": 1.0}
    weights.update("a", advantages=[0.4, -0.4])
    weights.update("b", advantages=torch.tensor([0.2]))
    # c unseen takes the mean need 0.3; needs (0.4, 0.2, 0.3), mean 0.3
    assert weights.weights() == pytest.approx({"a": 0.1 + 0.9 * 4 / 3, "b": 0.1 + 0.9 * 2 / 3, "c": 1.0})
    weights.update("a", advantages=[0.1])  # smoothed: 0.9 * 0.4 + 0.1 * 0.1 = 0.37
    assert weights.need["a"] == pytest.approx(0.37)
    assert weights.sequence_weights(["b", "a"]).tolist() == pytest.approx(
        [weights.weights()["b"], weights.weights()["a"]]
    )

    failure = FamilyLossWeights(["x", "y"], mode="failure", floor=0.0)
    failure.update("x", rewards=[1.0, 1.0, 1.0, 0.0])  # need 0.25
    failure.update("y", rewards=[0.0, 0.0, 1.0, 0.0])  # need 0.75
    assert failure.weights() == pytest.approx({"x": 0.5, "y": 1.5})  # the failing family weighs more
    with pytest.raises(ValueError, match="rewards"):
        failure.update("x", advantages=[1.0])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.lists(st.floats(-2, 2), min_size=1, max_size=4)), max_size=12),
    st.floats(0.0, 0.99),
    st.floats(0.0, 1.0),
)
@example(updates=[("a", [5e-324])], smoothing=0.0, floor=0.5)  # a subnormal need: 0.5 * 5e-324 is 0
@example(updates=[("a", [1.5e-323]), ("b", [5e-324])], smoothing=0.0, floor=0.0)
def test_family_weights_match_loop_reference(updates, smoothing, floor):
    weights = FamilyLossWeights(list("abcd"), smoothing=smoothing, floor=floor)
    need = {}
    for family, advantages in updates:
        weights.update(family, advantages=advantages)
        observed = sum(abs(a) for a in advantages) / len(advantages)
        need[family] = observed if family not in need else smoothing * need[family] + (1 - smoothing) * observed
    out = weights.weights()
    if need and sum(need.values()) > 0:
        # The reference in exact arithmetic from the same (float) needs.
        exact = {f: Fraction(v) for f, v in need.items()}
        default = sum(exact.values()) / len(exact)
        full = [exact.get(f, default) for f in "abcd"]
        mean = sum(full) / 4
        for f, n in zip("abcd", full, strict=True):
            assert out[f] == pytest.approx(float(floor + (1 - Fraction(floor)) * n / mean), abs=1e-9)
    else:
        assert out == dict.fromkeys("abcd", 1.0)
    assert sum(out.values()) / 4 == pytest.approx(1.0) and min(out.values()) >= floor - 1e-12

    restored = FamilyLossWeights(list("abcd"))
    restored.load_state_dict(json.loads(json.dumps(weights.state_dict())))
    assert restored.weights() == out
