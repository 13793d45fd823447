"""VIGOR's allocator: exact budget, the paper's schedule, and a preference for high variance."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.algorithms.vigor import VigorAllocator


def variance(xs):
    mean = sum(xs) / len(xs)
    return sum((x - mean) ** 2 for x in xs) / len(xs)


def run_four_prompts(budget):
    vigor = VigorAllocator(budget)  # m0=2, alpha=0.5, gamma=2, T=4
    rounds = [vigor.first_round(["a", "b", "c", "d"])]
    rewards = {"a": [0.0, 1.0], "b": [1.0, 1.0], "c": [0.0, 0.5], "d": [0.0, 1.0]}
    # variances .25, 0, .0625, .25: a and d tie at the top; ties keep first_round's order.
    rounds.append(vigor.next_round(rewards))
    rewards["a"] += [0.0] * rounds[-1]["a"]  # variance falls below d's
    rewards["d"] += [1.0, 0.0] * (rounds[-1]["d"] // 2) + [1.0] * (rounds[-1]["d"] % 2)
    rounds.append(vigor.next_round(rewards))
    rewards["d"] += [1.0] * rounds[-1]["d"]
    rounds.append(vigor.next_round(rewards))
    assert vigor.done and vigor.spent == budget and vigor.next_round(rewards) == {}
    return rounds


def test_hand_computed_four_prompts():
    # The paper's schedule for 4 prompts: 2 each, top 2 get 4, top 1 gets 8, then 16 (kept sets
    # never shrink below one prompt), 40 in all.
    assert run_four_prompts(40) == [{"a": 2, "b": 2, "c": 2, "d": 2}, {"a": 4, "d": 4}, {"d": 8}, {"d": 16}]
    # A smaller budget scales rounds 2..4 by their planned shares 8:8:16 of what remains (24):
    # floor(24 * 8/32) = 6 -> 3 each, floor(18 * 8/24) = 6, then the remaining 12.
    assert run_four_prompts(32) == [{"a": 2, "b": 2, "c": 2, "d": 2}, {"a": 3, "d": 3}, {"d": 6}, {"d": 12}]
    # An odd round spend leaves one over, which goes to the best-ranked prompt (a, by the tie rule):
    # budget 36 -> round 2 spends floor(28 * 8/32) = 7.
    assert run_four_prompts(36)[1] == {"a": 4, "d": 3}


def test_paper_schedule_matches_the_eight_per_prompt_budget():
    prompts = list(range(8))
    vigor = VigorAllocator(8 * len(prompts))
    plan = [vigor.first_round(prompts)]
    rng = random.Random(0)
    rewards = {p: [] for p in prompts}
    while not vigor.done:
        for p, n in plan[-1].items():
            rewards[p] += [float(rng.random() < 0.5) for _ in range(n)]
        plan.append(vigor.next_round(rewards))
    assert [sum(r.values()) for r in plan] == [16, 16, 16, 16]
    assert [sorted(set(r.values())) for r in plan] == [[2], [4], [8], [16]]


def test_one_round_is_the_uniform_baseline_and_bad_input_is_refused():
    assert VigorAllocator(10, rounds=1).first_round(["a", "b", "c"]) == {"a": 4, "b": 3, "c": 3}
    with pytest.raises(ValueError, match="budget 5"):
        VigorAllocator(5).first_round(["a", "b", "c"])
    vigor = VigorAllocator(12)
    with pytest.raises(RuntimeError, match="first_round"):
        vigor.next_round({})
    vigor.first_round(["a", "b"])
    with pytest.raises(ValueError, match="'b'"):
        vigor.next_round({"a": [0.0, 1.0]})
    with pytest.raises(ValueError, match="m0"):
        VigorAllocator(12, m0=1)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(0, 120),
    st.integers(2, 4),
    st.sampled_from([0.25, 0.5, 0.75, 1.0]),
    st.sampled_from([1.0, 1.5, 2.0, 3.0]),
    st.integers(1, 5),
    st.integers(0, 10**6),
)
def test_budget_is_spent_exactly_and_never_exceeded_and_goes_to_high_variance(
    n_prompts, extra, m0, alpha, gamma, rounds, seed
):
    budget = m0 * n_prompts + extra
    vigor = VigorAllocator(budget, m0=m0, alpha=alpha, gamma=gamma, rounds=rounds)
    rng = random.Random(seed)
    prompts = [f"p{i}" for i in range(n_prompts)]
    success = {p: rng.choice([0.0, 0.1, 0.5, 0.9, 1.0]) for p in prompts}
    rewards = {p: [] for p in prompts}
    allocation, spent, calls, in_play = vigor.first_round(prompts), 0, 1, set(prompts)
    while True:
        assert all(n > 0 for n in allocation.values())
        assert set(allocation) <= in_play  # kept sets are nested
        spent += sum(allocation.values())
        assert spent <= budget and spent == vigor.spent
        for p, n in allocation.items():
            rewards[p] += [float(rng.random() < success[p]) for _ in range(n)]
        if vigor.done:
            break
        previous = in_play
        allocation = vigor.next_round(rewards)
        calls += 1
        if allocation:
            in_play = set(allocation)
            # Every prompt given rollouts has at least the variance of every prompt dropped.
            dropped = previous - in_play
            if dropped:
                assert min(variance(rewards[p]) for p in in_play) >= max(variance(rewards[p]) for p in dropped)
    assert spent == budget
    assert calls <= rounds
