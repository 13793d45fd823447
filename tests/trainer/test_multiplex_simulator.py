"""The discrete-event simulator of the asynchronous pipeline against closed forms, its
conservation of episodes, and the three policies on balanced and forced-imbalance runs."""

import pytest

from trainer.orchestrator.multiplex import (
    POLICIES,
    EmpiricalLengths,
    LogNormalLengths,
    Phase,
    SimConfig,
    Switch,
    TimeModel,
    simulate,
)

ONE_TURN = EmpiricalLengths(((100, 1),))


def model(**overrides) -> TimeModel:
    """100-token episodes at 50 tokens/s (2 s each); 0.5 s per 400-token learner step."""
    fields = {"generation_tokens_per_s": 50.0, "learner_seconds_per_token": 0.5 / 400, "episodes": ONE_TURN}
    return TimeModel(**{**fields, **overrides})


def small(**overrides) -> SimConfig:
    fields = {"units": 3, "episodes_per_step": 4, "episodes_per_unit": 2, "steps": 6, "warmup_steps": 1}
    return SimConfig(**{**fields, "rollout_units": 2, **overrides})


def test_rollout_bound_pipeline_matches_its_closed_form():
    # 2 rollout units x 2 slots = one batch of 4 every 2 s; the learner needs 0.5 s of it.
    result = simulate(model(), small())
    assert result.step_ends == (2.5, 4.5, 6.5, 8.5, 10.5, 12.5)
    assert result.steps_per_s == 0.5 and result.trajectories_per_s == 2.0
    assert result.rollout_idle_fraction == 0.0
    assert result.learner_idle_fraction == 0.75
    assert (result.switches_to_learner, result.switches_to_rollout, result.stale_dropped) == (0, 0, 0)


def test_learner_bound_pipeline_matches_its_closed_form():
    # A 3 s learner step: one step every 3 s; rollout units generate 2 s of every 3.
    result = simulate(model(learner_seconds_per_token=3 / 400), small())
    assert result.step_ends == (5.0, 8.0, 11.0, 14.0, 17.0, 20.0)
    assert result.steps_per_s == 1 / 3
    assert result.rollout_idle_fraction == 1 / 3
    assert result.learner_idle_fraction == 0.0


def test_turns_and_tools_follow_the_time_model():
    # Two turns of 50 tokens (1 s each), each followed by a 1 s tool call: 4 s an episode.
    result = simulate(model(tool_seconds_per_turn=1.0, episodes=EmpiricalLengths(((100, 2),))), small())
    assert result.step_ends == (4.5, 8.5, 12.5, 16.5, 20.5, 24.5)
    assert result.rollout_idle_fraction == 0.5  # the unit waits on the sandboxes half the time
    assert result.learner_idle_fraction == 0.875


def test_concurrent_episodes_share_a_unit_by_the_concurrency_exponent():
    # alpha = 0: one unit's 50 tokens/s are shared by its 2 episodes: 4 s each.
    config = small(units=2, episodes_per_step=2, steps=4, rollout_units=1)
    assert simulate(model(concurrency_exponent=0.0), config).step_ends == (4.25, 8.25, 12.25, 16.25)
    # alpha = 1: each runs at 50 tokens/s as if alone.
    assert simulate(model(), config).step_ends == (2.25, 4.25, 6.25, 8.25)


def test_colocated_pays_both_switches_every_step():
    # All 2 units generate 4 episodes (2 s), switch (0.25 s), train on 2 units (0.25 s),
    # switch back (0.5 s): 3 s a step, 2 units x 2 switches each step.
    result = simulate(model(switch_to_learner_s=0.25, switch_to_rollout_s=0.5), small(units=2, steps=4), "colocated")
    assert result.step_ends == (2.5, 5.5, 8.5, 11.5)
    assert result.steps_per_s == 1 / 3
    assert (result.switches_to_learner, result.switches_to_rollout) == (8, 8)
    assert result.switching_fraction == 0.25  # 0.75 s of every 3 s
    assert (result.rollout_units, result.learner_units, result.stale_dropped) == (2, 0, 0)


def balanced_model() -> TimeModel:
    # 2 + 2 units, 4 per step: rollout makes 4 episodes per 2 s, the learner (2 units) needs 2 s.
    return model(learner_seconds_per_token=1 / 100, switch_to_learner_s=0.5, switch_to_rollout_s=0.5)


def test_bidirectional_equals_static_when_balanced():
    config = small(units=4, steps=40, warmup_steps=2, window_s=4.0)
    static = simulate(balanced_model(), config, "static")
    bidirectional = simulate(balanced_model(), config, "bidirectional")
    assert static.steps_per_s == 0.5
    assert bidirectional.step_ends == static.step_ends
    assert (bidirectional.switches_to_learner, bidirectional.switches_to_rollout) == (0, 0)


FORCED = [Phase(25, tool_slowdown=8, name="slow episodes"), Phase(35, learner_slowdown=4, name="slow learner")]


def forced_model() -> TimeModel:
    # Balanced at 5 + 3 units before the phases: 2.5 s episodes (2 turns, 0.25 s tools) give
    # 4 episodes/s; a step of 8 on 3 units takes 2 s. Slow episodes: 6 s; slow learner: 8 s.
    return TimeModel(
        generation_tokens_per_s=50.0,
        learner_seconds_per_token=6 / 800,
        tool_seconds_per_turn=0.25,
        episodes=EmpiricalLengths(((100, 2),)),
        switch_to_learner_s=0.5,
        switch_to_rollout_s=0.5,
    )


def forced_config(**overrides) -> SimConfig:
    fields = {"units": 8, "episodes_per_step": 8, "episodes_per_unit": 2, "steps": 60, "warmup_steps": 2}
    return SimConfig(**{**fields, "max_staleness": 1, "window_s": 10.0, "rollout_units": 5, **overrides})


def test_bidirectional_corrects_a_forced_imbalance_both_ways():
    results = {name: simulate(forced_model(), forced_config(), name, phases=FORCED) for name in POLICIES}
    static, bidirectional = results["static"], results["bidirectional"]
    assert bidirectional.steps_per_s > 1.2 * static.steps_per_s
    assert bidirectional.steps_per_s > 1.2 * results["colocated"].steps_per_s
    # Slow episodes: the learner lends; slow learner: rollout lends (and the lent unit goes home).
    assert bidirectional.switches_to_rollout >= 1 and bidirectional.switches_to_learner >= 2
    slow_learner_gain = bidirectional.phase_steps_per_s[1] / static.phase_steps_per_s[1]
    assert slow_learner_gain > 1.3
    assert bidirectional.learner_idle_fraction < static.learner_idle_fraction
    assert bidirectional.rollout_idle_fraction < static.rollout_idle_fraction


def conserved(result) -> None:
    consumed = [eid for step in result.consumed for eid in step]
    assert len(consumed) == len(set(consumed)) == result.steps * 8
    assert result.episodes_started == len(consumed) + result.stale_dropped + result.ready_left + result.in_flight
    assert max(consumed) < result.episodes_started


def test_no_episode_is_lost_or_duplicated_across_switches():
    lengths = LogNormalLengths(median_tokens=100, sigma=1.0, tokens_per_turn=40, max_tokens=1000)
    phases = [Phase(20, lengths, tool_slowdown=8), Phase(40, lengths, learner_slowdown=4)]
    for name in POLICIES:
        result = simulate(forced_model(), forced_config(timeline=True), name, phases=phases)
        conserved(result)
        if name != "static":
            assert result.switches_to_learner + result.switches_to_rollout > 0
            assert result.timeline and all(r + k + moving == 8 for _, r, k, moving in result.timeline)
    tail = simulate(forced_model(), forced_config(), "bidirectional", phases=phases)
    assert tail.stale_dropped > 0  # the long tail ages past max_staleness: dropped, not lost


def test_the_simulation_is_deterministic_for_a_seed():
    lengths = LogNormalLengths(median_tokens=100, sigma=0.8, tokens_per_turn=40)
    phases = [Phase(30, lengths)]
    first = simulate(forced_model(), forced_config(steps=30), "bidirectional", phases=phases, rule=None)
    again = simulate(forced_model(), forced_config(steps=30), "bidirectional", phases=phases)
    assert first == again
    other_seed = simulate(forced_model(), forced_config(steps=30, seed=1), "bidirectional", phases=phases)
    assert other_seed.step_ends != first.step_ends


def test_the_planner_picks_the_split_when_none_is_given():
    # The hand-worked planner case of test_multiplex_core: 3 rollout + 1 learner.
    planned = TimeModel(
        generation_tokens_per_s=100.0, learner_seconds_per_token=1e-3, episodes=EmpiricalLengths(((1000, 1),))
    )
    result = simulate(planned, SimConfig(units=4, episodes_per_step=8, episodes_per_unit=2, steps=5))
    assert (result.rollout_units, result.learner_units) == (3, 1)


def test_bad_settings_and_bad_policies_are_refused(monkeypatch):
    with pytest.raises(ValueError, match="unknown policy"):
        simulate(model(), small(), "round-robin")
    with pytest.raises(ValueError, match="warmup_steps"):
        simulate(model(), small(warmup_steps=6))
    with pytest.raises(ValueError, match="rollout_units"):
        simulate(model(), small(rollout_units=3))
    monkeypatch.setitem(POLICIES, "stay", lambda state, rule: [Switch(0, state.units[0].role)])
    with pytest.raises(ValueError, match="impossible switch"):
        simulate(model(), small(), "stay")
