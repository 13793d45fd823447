"""BiDiRL's pure core: time models and their fit, the planner, the decision rule and its
baselines, and the signal meter (trainer.orchestrator.multiplex)."""

import json
import logging
import math
import random

import pytest

from trainer.orchestrator.multiplex import (
    LEARNER,
    POLICIES,
    ROLLOUT,
    EmpiricalLengths,
    LogNormalLengths,
    PoolState,
    Rule,
    SignalMeter,
    Switch,
    TimeModel,
    TimeModelError,
    UnitState,
    colocated,
    decide,
    fit,
    lengths_from_dict,
    plan,
    predict,
    static,
)
from trainer.orchestrator.multiplex.policy import gain

FIXED = EmpiricalLengths(((1000, 1),))


# -- time model -------------------------------------------------------------------------------


def synthetic_profile(truth: TimeModel) -> list[dict]:
    """Records drawn exactly from `truth` (no noise)."""
    records = []
    for index, concurrency in enumerate((1, 2, 4, 8, 3)):
        tokens, turns = 400 + 130 * index, 2 + index
        records.append(
            {
                "kind": "episode",
                "tokens": tokens,
                "turns": turns,
                "generation_seconds": tokens / truth.episode_tokens_per_s(concurrency),
                "tool_seconds": turns * truth.tool_seconds_per_turn,
                "concurrency": concurrency,
            }
        )
    for units in (1, 2, 4):
        for tokens in (3000, 7000, 12000):
            seconds = truth.learner_step_seconds(tokens, units)
            records.append({"kind": "learner_step", "tokens": tokens, "seconds": seconds, "units": units})
    records += [
        {"kind": "switch", "direction": "to_learner", "seconds": 3.0},
        {"kind": "switch", "direction": "to_learner", "seconds": 5.0},
        {"kind": "switch", "direction": "to_rollout", "seconds": 6.0},
    ]
    return records


def test_fit_recovers_the_parameters_it_was_drawn_from():
    truth = TimeModel(
        generation_tokens_per_s=80.0,
        learner_seconds_per_token=1e-3,
        episodes=FIXED,
        concurrency_exponent=0.7,
        tool_seconds_per_turn=2.5,
        learner_step_overhead_s=3.0,
        dp_efficiency=0.9,
    )
    model = fit(synthetic_profile(truth))
    assert model.generation_tokens_per_s == pytest.approx(80.0, rel=1e-9)
    assert model.concurrency_exponent == pytest.approx(0.7, rel=1e-9)
    assert model.tool_seconds_per_turn == pytest.approx(2.5, rel=1e-9)
    assert model.learner_step_overhead_s == pytest.approx(3.0, rel=1e-9)
    assert model.learner_seconds_per_token == pytest.approx(1e-3, rel=1e-9)
    assert model.dp_efficiency == pytest.approx(0.9, rel=1e-9)
    assert (model.switch_to_learner_s, model.switch_to_rollout_s) == (4.0, 6.0)
    assert [units for units, _ in model.measured_seconds_per_token] == [1, 2, 4]
    for units, per_token in model.measured_seconds_per_token:  # on the power law: the same slopes
        assert per_token == pytest.approx(1e-3 / (units * 0.9 ** math.log2(units)), rel=1e-9)
    assert model.assumed == ()
    assert model.episodes == EmpiricalLengths(((400, 2), (530, 3), (660, 4), (790, 5), (920, 6)))


def test_a_measured_learner_size_uses_its_own_slope_and_the_others_the_power_law():
    """As on 2 shared CPU cores: 1 -> 2 ranks halves the per-token time, 2 -> 4 gains nothing.
    The power law fitted through 1, 2 and 4 misses every size; the measured slopes do not."""
    records = [{"kind": "episode", "tokens": 100, "turns": 1, "generation_seconds": 1.0}]
    for units, per_token in ((1, 1e-3), (2, 5e-4), (4, 5e-4)):
        records += [{"kind": "learner_step", "tokens": n, "seconds": 0.5 + per_token * n, "units": units}
                    for n in (2000, 6000)]  # fmt: skip
    model = fit(records)
    assert model.learner_step_overhead_s == pytest.approx(0.5, rel=1e-9)
    assert [units for units, _ in model.measured_seconds_per_token] == [1, 2, 4]
    assert [b for _, b in model.measured_seconds_per_token] == pytest.approx([1e-3, 5e-4, 5e-4], rel=1e-9)
    for units, per_token in ((1, 1e-3), (2, 5e-4), (4, 5e-4)):
        assert model.learner_step_seconds(4000, units) == pytest.approx(0.5 + per_token * 4000, rel=1e-9)
    power_law = model.learner_seconds_per_token / (3 * model.dp_efficiency ** math.log2(3))
    assert model.learner_step_seconds(4000, 3) == pytest.approx(0.5 + power_law * 4000, rel=1e-12)
    assert model.dp_efficiency < 1.0  # 2 -> 4 gained nothing: the law's efficiency falls


def test_fit_keeps_what_the_profile_cannot_tell_and_says_so():
    records = [
        {"kind": "episode", "tokens": 300, "turns": 3, "generation_seconds": 6.0, "concurrency": 2},
        {"kind": "episode", "tokens": 500, "turns": 5, "generation_seconds": 10.0, "concurrency": 2},
        {"kind": "learner_step", "tokens": 800, "seconds": 4.0, "units": 2},
        {"kind": "learner_step", "tokens": 800, "seconds": 4.0, "units": 2},
    ]
    model = fit(records, concurrency_exponent=0.5, dp_efficiency=0.8, switch_to_learner_s=1.5)
    # 50 tokens/s each at concurrency 2 with alpha 0.5: r1 = 50 * 2**0.5.
    assert model.generation_tokens_per_s == pytest.approx(50 * math.sqrt(2), rel=1e-12)
    assert model.concurrency_exponent == 0.5
    assert model.tool_seconds_per_turn == 0.0
    # Tokens never varied: no overhead term; 4 s = c1 * 800 / (2 * 0.8**1).
    assert model.learner_step_overhead_s == 0.0
    assert model.learner_seconds_per_token == pytest.approx(4.0 * 2 * 0.8 / 800, rel=1e-12)
    assert model.switch_to_learner_s == 1.5
    assert model.assumed == (
        "concurrency_exponent",
        "learner_step_overhead_s",
        "dp_efficiency",
        "switch_to_learner_s",
        "switch_to_rollout_s",
    )


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"kind": "episodes"}], "profile record 0: field 'kind' must be one of"),
        ([{"kind": "learner_step", "tokens": 1, "seconds": 1, "units": 1}], "at least one 'episode'"),
        (
            [
                {"kind": "episode", "tokens": 10, "turns": 1, "generation_seconds": 0},
                {"kind": "learner_step", "tokens": 1, "seconds": 1, "units": 1},
            ],
            "profile record 0 (episode): field 'generation_seconds' must be a positive number, not 0",
        ),
        (
            [
                {"kind": "episode", "tokens": 10, "turns": 1, "generation_seconds": 1},
                {"kind": "learner_step", "tokens": 1, "seconds": 1},
            ],
            "profile record 1 (learner_step): field 'units' must be a positive number, not None",
        ),
        (
            [
                {"kind": "episode", "tokens": 10, "turns": 1, "generation_seconds": 1},
                {"kind": "learner_step", "tokens": 1, "seconds": 1, "units": 1},
                {"kind": "switch", "direction": "sideways", "seconds": 1},
            ],
            "profile record 2 (switch): field 'direction'",
        ),
    ],
)
def test_a_bad_profile_record_is_named(records, message):
    with pytest.raises(TimeModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fit(records)


def test_the_stage_formulas():
    model = TimeModel(
        generation_tokens_per_s=100.0,
        learner_seconds_per_token=0.01,
        episodes=FIXED,
        concurrency_exponent=0.5,
        learner_step_overhead_s=2.0,
        dp_efficiency=0.5,
    )
    assert model.episode_tokens_per_s(4) == 50.0  # 100 * 4**-0.5
    assert model.episode_tokens_per_s(0.5) == 100.0  # never faster than alone
    assert model.learner_step_seconds(1000, 1) == 12.0
    assert model.learner_step_seconds(1000, 4) == 2.0 + 10.0 / (4 * 0.25)
    assert model.learner_step_seconds(1000, 2, slowdown=3.0) == 3 * (2.0 + 10.0)
    with pytest.raises(ValueError):
        model.learner_step_seconds(1000, 0)


def test_mean_episode_seconds_is_the_concurrency_fixed_point():
    lengths = EmpiricalLengths(((600, 3),))
    linear = TimeModel(
        generation_tokens_per_s=60.0,
        learner_seconds_per_token=0.0,
        episodes=lengths,
        tool_seconds_per_turn=2.0,
    )
    assert linear.mean_episode_seconds(8) == 600 / 60 + 3 * 2.0
    shared = TimeModel(
        generation_tokens_per_s=60.0,
        learner_seconds_per_token=0.0,
        episodes=lengths,
        tool_seconds_per_turn=2.0,
        concurrency_exponent=0.0,
    )
    tau = shared.mean_episode_seconds(8)
    gen = tau - 6.0
    concurrency = 8 * gen / tau  # the episodes generating at once, by the fixed point
    assert gen == pytest.approx(600 / shared.episode_tokens_per_s(concurrency), rel=1e-9)


def test_lognormal_lengths():
    lengths = LogNormalLengths(median_tokens=4000, sigma=1.0, tokens_per_turn=1000, max_tokens=32768)
    rng, again = random.Random(3), random.Random(3)
    draws = [lengths.sample(rng) for _ in range(2000)]
    assert draws == [lengths.sample(again) for _ in range(2000)]
    assert all(1 <= tokens <= 32768 and turns == max(1, math.ceil(tokens / 1000)) for tokens, turns in draws)
    assert max(tokens for tokens, _ in draws) == 32768  # the context limit clips the tail
    unclipped = LogNormalLengths(median_tokens=4000, sigma=1.0, tokens_per_turn=1000)
    assert unclipped.mean_tokens() == pytest.approx(4000 * math.exp(0.5), rel=1e-12)
    assert lengths.mean_tokens() < unclipped.mean_tokens()
    assert sum(t for t, _ in draws) / len(draws) == pytest.approx(lengths.mean_tokens(), rel=0.05)
    assert sum(t for _, t in draws) / len(draws) == pytest.approx(lengths.mean_turns(), rel=0.05)
    assert LogNormalLengths(2500, 0.0, 1000).mean_turns() == 3.0


def test_time_model_round_trips_through_json():
    for lengths in (EmpiricalLengths(((10, 1), (20, 2))), LogNormalLengths(4000.0, 1.2, 800.0, 32768)):
        model = TimeModel(
            generation_tokens_per_s=40.0,
            learner_seconds_per_token=2e-4,
            episodes=lengths,
            switch_to_learner_s=1.0,
            measured_seconds_per_token=((1, 2e-4), (3, 8e-5)),
            assumed=("dp_efficiency",),
        )
        assert TimeModel.from_dict(json.loads(json.dumps(model.to_dict()))) == model
        assert lengths_from_dict(lengths.to_dict()) == lengths


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"generation_tokens_per_s": 1, "learner_seconds_per_token": 1, "episodes": {}, "speed": 1}, "field 'speed'"),
        ({"generation_tokens_per_s": 1, "episodes": {"kind": "lognormal"}}, "field 'learner_seconds_per_token'"),
        ({"generation_tokens_per_s": "fast", "learner_seconds_per_token": 1, "episodes": {}}, "must be a number"),
        ({"generation_tokens_per_s": 1, "learner_seconds_per_token": 1, "episodes": {"kind": "x"}}, "episodes.kind"),
        ({"generation_tokens_per_s": 1, "learner_seconds_per_token": 1, "episodes": {"kind": "lognormal"}}, "episodes"),
        (
            {
                "generation_tokens_per_s": 1,
                "learner_seconds_per_token": 1,
                "dp_efficiency": 2,
                "episodes": FIXED.to_dict(),
            },
            "dp_efficiency",
        ),
        ([], "JSON object"),
    ],
)
def test_a_bad_time_model_is_named(data, message):
    with pytest.raises(TimeModelError, match=message):
        TimeModel.from_dict(data)


# -- planner ----------------------------------------------------------------------------------


def planner_model() -> TimeModel:
    # 1000-token episodes at 100 tokens/s: 10 s each; 1 ms per token on one unit.
    return TimeModel(generation_tokens_per_s=100.0, learner_seconds_per_token=1e-3, episodes=FIXED)


def test_the_planner_on_a_hand_worked_case(caplog):
    # 4 units, 8 episodes per step, 2 per unit: R(r) = 2r/10 = 0.2r, L(k) = 8 / (8/k) = k.
    with caplog.at_level(logging.INFO, logger="trainer.orchestrator.multiplex.planner"):
        split = plan(planner_model(), 4, 8, episodes_per_unit=2, max_staleness=1)
    assert (split.rollout_units, split.learner_units) == (3, 1)
    assert [(c.rollout_rate, c.learner_rate, c.throughput) for c in split.candidates] == [
        pytest.approx((0.2, 3.0, 0.2)),
        pytest.approx((0.4, 2.0, 0.4)),
        pytest.approx((0.6, 1.0, 0.6)),
    ]
    assert split.predicted.bottleneck == "rollout"
    assert split.predicted.learner_step_seconds == 8.0
    assert "multiplex plan: 3 rollout + 1 learner units" in caplog.text
    assert json.loads(json.dumps(split.to_dict()))["predicted"]["bottleneck"] == "rollout"


def test_the_synchronous_pipeline_adds_the_stage_times():
    # max_staleness 0: X = 1 / (1/R + 1/L); r=2: 1/(1/0.4 + 1/2) = 1/3; r=3: 1/(1/0.6 + 1) = 0.375.
    split = plan(planner_model(), 4, 8, episodes_per_unit=2, max_staleness=0)
    assert [c.throughput for c in split.candidates] == pytest.approx([1 / (5 + 1 / 3), 1 / 3, 0.375])
    assert split.rollout_units == 3


def test_the_planner_breaks_ties_by_balance_then_fewer_rollout_units():
    # R(r) = 0.2r, L(k) = 0.2k (learner 40 s a step of 8): r=1 and r=2 give 0.2 and 0.4 ... and
    # 2+2 balances exactly: of equal throughputs the balanced split wins.
    model = TimeModel(generation_tokens_per_s=100.0, learner_seconds_per_token=5e-3, episodes=FIXED)
    split = plan(model, 4, 8, episodes_per_unit=2)
    assert [c.throughput for c in split.candidates] == pytest.approx([0.2, 0.4, 0.2])
    assert split.rollout_units == 2
    slow = predict(model, 2, 2, 8, episodes_per_unit=2, learner_slowdown=2.0)
    assert slow.learner_rate == pytest.approx(0.2) and slow.throughput == pytest.approx(0.2)


def test_the_planner_refuses_a_pool_of_one():
    with pytest.raises(ValueError, match="at least 2 units"):
        plan(planner_model(), 1, 8, episodes_per_unit=2)


# -- the decision rule ------------------------------------------------------------------------


def units(rollout: int, learner: int, overrides: dict[int, dict] | None = None) -> tuple[UnitState, ...]:
    """`rollout` idle rollout units (ids 0..), then `learner` idle learner units; `overrides`
    maps a unit id to UnitState fields to change."""
    made = []
    for unit in range(rollout + learner):
        role = ROLLOUT if unit < rollout else LEARNER
        fields = {"unit": unit, "home": role, "role": role, "busy": False, **(overrides or {}).get(unit, {})}
        made.append(UnitState(**fields))
    return tuple(made)


def pool(rollout: int, learner: int, wait: float = 0.0, hold: float = 0.0, overrides=None) -> PoolState:
    return PoolState(units(rollout, learner, overrides), wait, hold, window_s=100.0, window_steps=4)


RULE = Rule()


def test_the_rule_waits_for_a_window_on_the_current_split():
    state = pool(4, 4, wait=0.5)
    assert decide(state, RULE) == [Switch(4, ROLLOUT)]
    in_flight = pool(4, 4, wait=0.5, overrides={0: {"switching": True, "busy": True}})
    assert decide(in_flight, RULE) == []
    short = PoolState(state.units, 0.5, 0.0, window_s=100.0, window_steps=3)
    assert decide(short, RULE) == []
    assert decide(state, Rule(min_window_s=101.0)) == []


def test_the_learner_waiting_lends_its_idle_units_to_rollout():
    # r=4, k=4, learner waits half the time: X(1) = min(5/4, 3/2) = 1.25 is the best move.
    assert gain(4, 4, 0.5, 0.0, 1) == 1.25
    assert gain(4, 4, 0.5, 0.0, 2) == 1.0
    assert decide(pool(4, 4, wait=0.5), RULE) == [Switch(4, ROLLOUT)]


def test_rollouts_held_back_lend_their_units_to_the_learner():
    assert gain(4, 4, 0.0, 0.5, -1) == 1.25
    assert decide(pool(4, 4, hold=0.5), RULE) == [Switch(0, LEARNER)]


def test_the_target_is_approached_in_damped_steps_and_ties_move_fewer_units():
    # r=12, k=8, wait 0.6: X(3) = min(15/12, 5/3.2) = 1.25 = X(4) = min(16/12, 4/3.2): the
    # target is 3 (fewer on a tie); at most 25% of 8 learner units move at once: 2.
    assert gain(12, 8, 0.6, 0.0, 3) == gain(12, 8, 0.6, 0.0, 4) == 1.25
    assert decide(pool(12, 8, wait=0.6), RULE) == [Switch(12, ROLLOUT), Switch(13, ROLLOUT)]
    assert decide(pool(12, 8, wait=0.6), Rule(max_move_fraction=1.0)) == [Switch(u, ROLLOUT) for u in (12, 13, 14)]


def test_no_move_below_the_gain_or_the_imbalance_threshold():
    # r=25, k=7, wait 0.25: the best move (1 unit) gains 4% < 5%.
    assert gain(25, 7, 0.25, 0.0, 1) == pytest.approx(1.04)
    assert decide(pool(25, 7, wait=0.25), RULE) == []
    assert decide(pool(25, 7, wait=0.25), Rule(min_gain=0.03)) == [Switch(25, ROLLOUT)]
    # A large predicted gain, but the learner waits less than min_imbalance.
    assert gain(8, 8, 0.19, 0.0, 1) == pytest.approx(7 / (8 * 0.81))
    assert decide(pool(8, 8, wait=0.19), RULE) == []
    assert decide(pool(8, 8, wait=0.2), RULE) == [Switch(8, ROLLOUT)]
    assert decide(pool(4, 4), RULE) == []


def test_both_stages_waiting_is_not_an_imbalance():
    # A third limit (a tail clogging the staleness window): no move raises the smaller capacity.
    state = pool(26, 6, wait=0.4, hold=0.3)
    assert gain(26, 6, 0.4, 0.3, 1) < 1 and gain(26, 6, 0.4, 0.3, -1) < 1
    assert decide(state, RULE) == []


def test_a_pool_never_goes_below_its_floor():
    assert decide(pool(4, 1, wait=0.9), RULE) == []
    assert decide(pool(1, 4, hold=0.9), RULE) == []
    assert decide(pool(4, 2, wait=0.9), Rule(min_units=2)) == []
    assert decide(pool(4, 2, wait=0.9), RULE) == [Switch(4, ROLLOUT)]


def test_idle_units_go_first_then_borrowed_ones_then_the_least_loaded():
    # Rollout units 0-5; learner bottleneck. Unit 1 idle and owned, unit 3 idle and borrowed
    # (home learner), unit 0 busy with 1 episode, the rest busy with 2.
    overrides = {u: {"busy": True, "episodes": 2} for u in range(6)}
    overrides[0] = {"busy": True, "episodes": 1}
    overrides[1] = {"busy": False}
    overrides[3] = {"busy": False, "home": LEARNER}
    state = pool(6, 2, hold=0.9, overrides=overrides)
    rule = Rule(max_move_fraction=0.5)
    assert decide(state, rule) == [Switch(3, LEARNER), Switch(1, LEARNER), Switch(0, LEARNER)]


def test_lent_units_go_home_first_when_the_imbalance_reverses():
    # Learner units 4-7; unit 6 is borrowed from rollout: the learner now waits, so it goes home.
    state = pool(4, 4, wait=0.5, overrides={6: {"home": ROLLOUT}})
    assert decide(state, RULE) == [Switch(6, ROLLOUT)]
    assert state.lent(ROLLOUT) == [state.units[6]] and state.borrowed(LEARNER) == [state.units[6]]


def test_a_unit_dwells_before_it_switches_again():
    state = pool(4, 4, wait=0.5, overrides={4: {"dwell_s": 5.0}})
    assert decide(state, Rule(min_dwell_s=10.0)) == [Switch(5, ROLLOUT)]
    assert decide(state, Rule(min_dwell_s=1.0)) == [Switch(4, ROLLOUT)]


def test_gain_with_saturated_signals():
    assert gain(4, 4, 1.0, 0.0, 2) == 1.5  # the learner never worked: only rollout's side binds
    assert gain(4, 4, 1.0, 1.0, 2) == 1.0  # nothing measured: no prediction


def test_rule_validation():
    for bad in ({"min_imbalance": 0.0}, {"min_gain": -0.1}, {"min_units": 0}, {"max_move_fraction": 0.0}):
        with pytest.raises(ValueError):
            Rule(**bad)


def test_static_never_switches():
    assert static(pool(4, 4, wait=0.9), RULE) == []
    assert set(POLICIES) == {"static", "colocated", "bidirectional"}


def test_colocated_time_shares_every_unit():
    all_rollout = units(4, 0)
    done = PoolState(all_rollout, ready=8, running=0, episodes_per_step=8)
    assert colocated(done, RULE) == [Switch(u, LEARNER) for u in range(4)]
    generating = PoolState(all_rollout, ready=8, running=2, episodes_per_step=8)
    assert colocated(generating, RULE) == []
    all_learner = tuple(UnitState(u, ROLLOUT, LEARNER, busy=False) for u in range(4))
    stepping = PoolState(all_learner, ready=0, episodes_per_step=8, learner_stepping=True)
    assert colocated(stepping, RULE) == []
    stepped = PoolState(all_learner, ready=0, episodes_per_step=8)
    assert colocated(stepped, RULE) == [Switch(u, ROLLOUT) for u in range(4)]
    moving = PoolState((*all_learner[:3], UnitState(3, ROLLOUT, LEARNER, False, switching=True)), episodes_per_step=8)
    assert colocated(moving, RULE) == []


# -- the signal meter -------------------------------------------------------------------------


def test_the_meter_measures_over_its_window_since_the_last_restart():
    meter = SignalMeter(window_s=160.0, window_steps=2)
    meter.set(learner_waiting=True, held_slots=4, slots=8)
    meter.advance(50.0)
    assert meter.read(50.0) == (0.0, 0.0, 0.0, 0)  # not started: start-up is not measured
    meter.restart(50.0)
    meter.advance(60.0)  # 10 s waiting, 40 held slot-seconds of 80
    meter.set(learner_waiting=False, held_slots=0, slots=8)
    meter.step(70.0)
    meter.wasted(70.0, 20.0)
    assert meter.read(90.0) == (10 / 40, 60 / 320, 40.0, 1)
    meter.restart(90.0)
    meter.set(learner_waiting=True, held_slots=0, slots=8)
    meter.step(100.0)
    assert meter.read(100.0) == (1.0, 0.0, 10.0, 1)


def test_the_window_slides_but_keeps_enough_steps():
    meter = SignalMeter(window_s=16.0, window_steps=0)
    meter.restart(0.0)
    meter.set(learner_waiting=True, held_slots=0, slots=1)
    for now in range(1, 41):
        meter.advance(float(now))
    assert 16.0 <= meter.read(40.0)[2] <= 17.0  # the last 16 s, to a resolution of 16/16
    steps = SignalMeter(window_s=16.0, window_steps=2)
    steps.restart(0.0)
    steps.set(learner_waiting=True, held_slots=0, slots=1)
    steps.step(10.0)
    steps.step(100.0)
    for now in range(101, 141):
        steps.advance(float(now))
    # 40 s since the last step: the window still reaches back to the step before it.
    wait, _, window, count = steps.read(140.0)
    assert count == 2 and window == 130.0 and wait == 1.0
