"""BiDiRL's glue in the orchestrator's loop (`trainer.orchestrator.multiplex.runtime`,
`multiplex.units`, driven through the loop's `_Devices`): the policies' `PoolState` built from the loop's state, and switches
applied in the hot switch's order (drain, sleep, resize at a step boundary; resize at a step
boundary, then wake with the newest weights). Ray's actors are replaced by recorders of the
calls they receive; the bookkeeping and the order of calls are the real ones."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.agent_env.clocked import Clock
from trainer.config import OrchestratorConfig, TrainConfig
from trainer.inference.trajectory import Trajectory
from trainer.orchestrator.loop import _Devices
from trainer.orchestrator.multiplex import LEARNER, ROLLOUT, Switch, colocated
from trainer.orchestrator.multiplex.runtime import Multiplex
from trainer.orchestrator.multiplex.sharing import LoopState
from trainer.orchestrator.multiplex.units import Units
from trainer.orchestrator.schedule import Batch, EpisodeResult, Schedule, TaskPicker
from trainer.resolve import resolve


class _Call:
    def __init__(self, log: list, name: str, value) -> None:
        self.log, self.name, self.value = log, name, value

    def remote(self, *args):
        self.log.append((self.name, *args))
        return self.value


class _Worker:
    def __init__(self, index: int, log: list) -> None:
        self.sleep = _Call(log, f"sleep {index}", 0.25)
        self.wake = _Call(log, f"wake {index}", 0.5)


class _Learner:
    """Records resizes; each takes `RESIZE_S` on the clock and its references are ready at
    once, unless `hold` (then when the test adds them to `ready`)."""

    RESIZE_S = 2.0

    def __init__(self, ranks: int, log: list, clock: Clock) -> None:
        self.ranks, self.log, self.clock = [object()] * ranks, log, clock
        self.hold, self.ready = False, set()

    def resize_refs(self, ranks: int) -> list:  # as `LearnerGroup.resize_refs`: nothing to do at the same size
        if ranks == len(self.ranks):
            return []
        self.log.append(("resize", ranks))
        self.ranks = [object()] * ranks
        refs = [f"imported@{rank} of {ranks}" for rank in range(ranks)]
        if not self.hold:
            self.clock.now += self.RESIZE_S
            self.ready.update(refs)
        return refs


class _Loop(SimpleNamespace):
    """What the loop's `_Devices` reads of the `Orchestrator` (the same attributes and methods)."""

    def _episodes(self) -> dict[int, int]:
        return dict(self.episodes)

    def _restart_worker(self, index: int) -> None:
        self.workers[index].sleep.log.append((f"restart {index}",))


def _state(loop: _Loop) -> LoopState:
    """The loop's `_state()`, from the fake's attributes."""
    ready = sum(len(trajectories) for _, trajectories, _ in loop.schedule.ready)
    return LoopState(len(loop.running), ready, loop.learner_ref is not None, loop.held_slots)


def _multiplex(loop: _Loop, path=None) -> Multiplex:
    return Multiplex(loop.config, _Devices(loop), learner_ranks=len(loop.learner.ranks),
                     batch_trajectories=loop.schedule.batch_trajectories,
                     max_staleness=loop.schedule.max_staleness, path=path)  # fmt: skip


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> Clock:
    """`time` as `multiplex.runtime` reads it: seconds move only when a test moves them."""
    from trainer.orchestrator.multiplex import runtime

    fake = Clock()
    fake.now = 100.0
    monkeypatch.setattr(runtime, "time", SimpleNamespace(monotonic=fake))
    return fake


def _loop(policy: str = "bidirectional", rollout: int = 2, learner: int = 2) -> tuple[_Loop, list]:
    from trainer.orchestrator.multiplex import runtime

    log: list = []
    clock = runtime.time.monotonic
    config = OrchestratorConfig(multiplex=policy, rollout_workers=rollout, multiplex_profile_steps=0,
                                multiplex_window_steps=2, episodes_per_step=2)  # fmt: skip
    config = resolve(TrainConfig(orchestrator=config)).orchestrator  # colocated: max_staleness 0
    group = _Learner(learner, log, clock)

    def wait(refs, num_returns, timeout):
        assert timeout == 0 or not set(refs) - group.ready, "a blocking wait that would never end"
        return [r for r in refs if r in group.ready], [r for r in refs if r not in group.ready]

    ray = SimpleNamespace(get=lambda value: value, wait=wait, exceptions=SimpleNamespace(RayActorError=RuntimeError))
    loop = _Loop(
        config=config, ray=ray, learner=group,
        workers=[_Worker(i, log) for i in range(rollout + learner)],
        schedule=Schedule(TaskPicker([("a", "f")], seed=0), groups_per_batch=2, gated=False,
                          max_staleness=config.max_staleness),
        running={}, learner_ref=None, version=7, weights_ref="weights@7", held_slots=0, episodes={},
    )  # fmt: skip
    loop.mux = _multiplex(loop)
    return loop, log


def test_the_pool_state_is_built_from_the_units_and_the_loop():
    units = Units.split(2, 2)
    units.request([Switch(1, LEARNER)], now=0.0, reason="test")
    state = units.state(10.0, {0: 2, 1: 1}, (0.5, 0.1, 8.0, 3), ready=3, running=3, episodes_per_step=4,
                        stepping=True)  # fmt: skip
    assert [(u.unit, u.home, u.role, u.busy, u.switching, u.episodes) for u in state.units] == [
        (0, ROLLOUT, ROLLOUT, True, False, 2),
        (1, ROLLOUT, LEARNER, True, True, 1),  # draining: it serves the learner once idle
        (2, LEARNER, LEARNER, True, False, 0),  # a step is running
        (3, LEARNER, LEARNER, True, False, 0),
    ]
    assert (state.learner_wait, state.rollout_wait, state.window_s, state.window_steps) == (0.5, 0.1, 8.0, 3)
    assert (state.ready, state.running, state.episodes_per_step, state.learner_stepping) == (3, 3, 4, True)
    assert units.open() == [0]  # the draining unit takes no new episode
    with pytest.raises(ValueError, match="impossible switch"):
        units.request([Switch(1, LEARNER)], now=1.0, reason="again")


def test_a_unit_lent_to_the_learner_drains_sleeps_then_joins_it_at_a_step_boundary():
    loop, log = _loop()
    mux = loop.mux
    loop.episodes = {0: 1}
    mux._request([Switch(0, LEARNER)], 0.0, "test")
    mux.move(loop.learner_ref is not None)
    assert log == []  # an episode still runs on it: it drains
    assert mux.units.open() == [1]
    loop.episodes, loop.learner_ref = {}, "a step in flight"
    mux.move(loop.learner_ref is not None)
    assert log == [("sleep 0",)]  # idle: asleep now, but the learner is stepping
    assert mux.units.due() == ([0], [])
    loop.learner_ref = None  # the step ended: a boundary
    mux.move(loop.learner_ref is not None)
    assert log == [("sleep 0",), ("resize", 3)]
    assert mux.units.serving(LEARNER) == 3 and mux.units.lent() == (0, 1)
    (switch,) = mux.units.done
    # The sleep as the driver saw it (its wall time), plus the resize.
    assert switch["direction"] == "to_learner" and switch["seconds"] == 2.0 and switch["reason"] == "test"


def test_the_loop_goes_on_while_the_learner_resizes_and_the_switch_completes_when_it_has(clock):
    loop, log = _loop()
    mux, learner = loop.mux, loop.learner
    learner.hold = True
    mux._request([Switch(3, ROLLOUT)], 0.0, "test")
    mux.move(loop.learner_ref is not None)
    assert log == [("resize", 1)] and mux.pending() == ["imported@0 of 1"]
    assert mux.units.done == [] and mux.units.due() == ([], [3])  # not done: its worker sleeps on
    clock.now += 1.5
    mux.move(loop.learner_ref is not None)  # the loop went on (episodes, steps); the resize is still in flight
    assert log == [("resize", 1)] and mux.units.done == []
    learner.ready.add("imported@0 of 1")
    clock.now += 1.0
    mux.move(loop.learner_ref is not None)
    assert log == [("resize", 1), ("wake 3", 7, "weights@7")] and mux.pending() == []
    assert mux.units.done[0]["direction"] == "to_rollout" and mux.units.done[0]["seconds"] == 2.5
    assert mux.units.open() == [0, 1, 3]


def test_a_unit_returned_to_rollout_leaves_at_a_step_boundary_and_wakes_with_the_newest_weights():
    loop, log = _loop()
    mux = loop.mux
    loop.learner_ref = "a step in flight"
    mux._request([Switch(3, ROLLOUT)], 0.0, "test")
    mux.move(loop.learner_ref is not None)
    assert log == [] and mux.units.open() == [0, 1]
    loop.learner_ref, loop.version, loop.weights_ref = None, 8, "weights@8"
    mux.move(loop.learner_ref is not None)
    assert log == [("resize", 1), ("wake 3", 8, "weights@8")]  # shrink first, then wake
    assert mux.units.open() == [0, 1, 3] and mux.units.lent() == (1, 0)
    # The resize's seconds, plus the wake's as the driver saw them (its wall time).
    assert mux.units.done[0]["direction"] == "to_rollout" and mux.units.done[0]["seconds"] == 2.0


def test_colocated_time_shares_every_unit_and_parks_the_learner_on_one_rank():
    loop, log = _loop("colocated", rollout=2, learner=1)
    mux = loop.mux
    assert loop.schedule.max_staleness == 0  # synchronous batches (the resolved config's)
    mux.tick(_state(loop))  # no batch ready: every unit generates; the learner is parked on one rank
    assert log == [("wake 2", 7, "weights@7")] and mux.units.open() == [0, 1, 2]
    assert not mux.may_step()  # the learner's rank is parked: no step on it
    for job in loop.schedule.next_jobs(7, 3):
        trajectory = Trajectory(task_id="a", reward=1.0)
        trajectory.extend([1, 2], policy=False)
        trajectory.extend([5], policy=True, logprobs=[-0.1], version=7)
        loop.schedule.finish(EpisodeResult(job.job_id, [trajectory]))
    mux.tick(_state(loop))  # a batch is ready and nothing runs: every unit goes to the learner
    assert log[1:] == [("sleep 0",), ("sleep 1",), ("sleep 2",), ("resize", 3)]
    assert mux.may_step()  # every unit is in the learner
    state = mux.units.state(0.0, {}, (0, 0, 0, 0), ready=0, running=0, episodes_per_step=2, stepping=False)
    assert colocated(state, mux.rule) == [Switch(i, ROLLOUT) for i in range(3)]


def test_a_step_reports_the_split_and_the_switches_since_the_last_step():
    loop, _ = _loop()
    mux = loop.mux
    mux._request([Switch(3, ROLLOUT)], 0.0, "test")
    mux.move(loop.learner_ref is not None)
    trajectory = Trajectory(task_id="a", trajectory_id="0", engine_seconds=0.5, wall_seconds=2.0, turns=1)
    trajectory.extend([1, 2, 3], policy=False)
    record: dict = {}
    mux.stepped(record, Batch(1, [trajectory], ["0"], [0], 0), 1.5)
    assert record["rollout_units"] == 3 and record["learner_units"] == 1 and record["learner_ranks"] == 1
    assert (record["switches_to_rollout"], record["switches_to_learner"]) == (1, 0)
    assert record["switch_to_rollout_s"] == 2.0 and record["lent_to_rollout"] == 1
    assert mux.profile == [
        {"kind": "episode", "tokens": 3, "turns": 1, "generation_seconds": 0.5, "tool_seconds": 1.5, "step": 1},
        {"kind": "learner_step", "tokens": 3, "seconds": 1.5, "units": 1, "step": 1},
    ]
    record = {}
    mux.stepped(record, Batch(2, [], [], [], 0), 1.0)
    assert record["switches_to_rollout"] == 0  # each switch is reported once


def _played(tokens: int, engine_s: float, wall_s: float, trajectory_id: str) -> Trajectory:
    trajectory = Trajectory(task_id="a", trajectory_id=trajectory_id, engine_seconds=engine_s, wall_seconds=wall_s,
                            turns=1)  # fmt: skip
    trajectory.extend(list(range(tokens)), policy=False)
    return trajectory


def test_after_the_profile_the_planner_moves_to_its_split_and_logs_the_model(tmp_path):
    """Slow episodes (10 s of sandbox each) and a fast learner: the planner gives rollout
    every unit but one; the learner's second unit leaves at once (no step in flight)."""
    loop, log = _loop()
    loop.config = loop.config.model_copy(update={"multiplex_profile_steps": 2})
    loop.mux = mux = _multiplex(loop, tmp_path / "multiplex.json")
    for step, tokens in enumerate((100, 200), start=1):
        batch = [_played(tokens, 0.1, 10.0, f"{step}.{i}") for i in range(2)]
        mux.stepped({}, Batch(step, batch, [t.trajectory_id for t in batch], [0, 0], 0), 0.01 * tokens)
    mux.tick(_state(loop))
    assert mux.plan["rollout_units"] == 3 and mux.plan["learner_units"] == 1
    assert mux.model["tool_seconds_per_turn"] == pytest.approx(9.9)
    assert log == [("resize", 1), ("wake 2", 7, "weights@7")]
    assert [u.home for u in mux.units.units] == [ROLLOUT, ROLLOUT, ROLLOUT, LEARNER]  # the plan is home now
    mux.write()
    report = json.loads((tmp_path / "multiplex.json").read_text())
    assert report["plan"]["rollout_units"] == 3 and report["switches"][0]["reason"].startswith("plan: 3 rollout")
    assert len(report["profile"]) == 6 and report["run_model"]["generation_tokens_per_s"] > 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["orchestrator.mode=sync"], "needs orchestrator.mode=async, not sync nor deterministic"),
        (["orchestrator.deterministic=true"], "needs orchestrator.mode=async, not sync nor deterministic"),
        (["placement.learner_gpus=1"], "placement.learner_gpus and placement.worker_gpus must be equal"),
    ],
)
def test_multiplex_refuses_what_it_cannot_switch_in_one_line(overrides, message):
    from trainer.config import ConfigError
    from trainer.resolve import load_config

    with pytest.raises(ConfigError, match=message) as error:
        load_config(None, ["orchestrator.multiplex=bidirectional", *overrides])
    assert "\n" not in str(error.value) and "field 'orchestrator.multiplex'" in str(error.value)
    assert load_config(None, overrides).orchestrator.multiplex == "static"  # static: nothing changes
