"""BiDiRL in the orchestrator's loop (`orchestrator.multiplex`): the planner after a profiling
phase, the policy on every iteration, and its switches applied with the hot-switch
primitives (`RolloutWorker.sleep` / `wake`, `LearnerGroup.resize`).

`Multiplex` implements `sharing.DeviceSharing`, the loop's one seam for device sharing: it
sees the loop only as `LoopState` snapshots and acts only through `Devices` (sleep, wake
or restart a unit's worker, resize the learner), never the orchestrator itself. `tick(state)`
at the top of every loop iteration (advance the signal meter, move the switches in flight,
plan or ask the policy), `signals(state)` after dispatching and stepping (the state the
meter integrates until the next event), and the event hooks `finished` (episodes done),
`dropped` (stale drops at batch time) and `stepped` (a learner step ended: its profile
record and its metrics). The meter is fed as
`policy.SignalMeter` documents: the learner waits while no step runs and no full batch is
ready; rollout slots are held while the schedule admits nothing into free slots of units
that take episodes, and an episode that finished fresh and aged out in the queue behind a
full batch counts its slot-seconds as wasted.

Switch order (`multiplex.units`): to the learner, a unit drains (no new episodes), its worker
sleeps once idle and the learner grows at the next step boundary; to rollout, the learner
shrinks at the next step boundary, then the worker wakes with the newest published weights
(a newer version published while it slept wins). A boundary is any moment no learner step is
in flight: resizes happen between two steps only, so a step never sees its ranks change.

The resize does not stop the loop (`LearnerGroup.resize_refs`): while the learner gathers
its state and rebuilds at the new size, the loop goes on collecting finished episodes and
starting new ones on the rollout units; a learner step or a weights request sent meanwhile
runs on the new ranks after the move (each rank runs its calls in order). The switches
complete (`_finish_resize`: bookkeeping, then the leaving units' workers wake) once every
rank has its state; the loop waits on those references with its episodes (`pending`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from trainer.config import OrchestratorConfig
from trainer.orchestrator.multiplex.planner import plan as make_plan
from trainer.orchestrator.multiplex.policy import LEARNER, POLICIES, ROLLOUT, Rule, SignalMeter, Switch
from trainer.orchestrator.multiplex.sharing import Devices, DeviceSharing, LoopState, StaticSplit
from trainer.orchestrator.multiplex.timemodel import TimeModelError, fit
from trainer.orchestrator.multiplex.units import Units
from trainer.orchestrator.schedule import staleness

logger = logging.getLogger(__name__)


def episode_record(trajectory, step: int) -> dict | None:
    """A `timemodel.fit` episode record of a finished trajectory: its tokens (prompt and
    observations included: prefill is folded into the generation rate), turns, seconds
    waiting on the engine, and every other second of its wall time (sandbox start, tool
    calls, grading) as tool seconds; None when it never reached the engine."""
    if trajectory.engine_seconds <= 0 or len(trajectory.token_ids) < 1:
        return None
    return {
        "kind": "episode",
        "tokens": len(trajectory.token_ids),
        "turns": max(1, trajectory.turns),
        "generation_seconds": round(trajectory.engine_seconds, 4),
        "tool_seconds": round(max(0.0, trajectory.wall_seconds - trajectory.engine_seconds), 4),
        "step": step,
    }


@dataclass
class _Resize:
    """A learner resize in flight."""

    refs: list
    grow: list[int]
    shrink: list[int]
    before: int
    ranks: int
    started: float


class Multiplex:
    """`bidirectional` or `colocated` device sharing (see the module docstring)."""

    def __init__(
        self,
        config: OrchestratorConfig,
        devices: Devices,
        *,
        learner_ranks: int,
        batch_trajectories: int,
        max_staleness: int,
        path: Path | None = None,
    ) -> None:
        """`batch_trajectories`, `max_staleness`: the schedule's (resolved: colocated runs
        synchronous batches, `max_staleness` 0); `path`: where `multiplex.json` goes."""
        self.devices = devices
        self.config = config
        self.path = path
        self.name = config.multiplex
        self.batch_trajectories, self.max_staleness = batch_trajectories, max_staleness
        self.policy = POLICIES[config.multiplex]
        self.rule = Rule(min_imbalance=config.multiplex_min_imbalance, min_window_steps=config.multiplex_window_steps)
        self.meter = SignalMeter(config.multiplex_window_s, config.multiplex_window_steps)
        self.units = Units.split(config.rollout_workers, learner_ranks)
        self.start = time.monotonic()
        self.profile: list[dict] = []
        self.profile_steps = config.multiplex_profile_steps if self.name == "bidirectional" else 0
        self.planned = self.profile_steps == 0
        self.model: dict | None = None
        self.plan: dict | None = None
        self.steps = 0
        self.reported = 0
        self.fresh: dict[str, tuple[bool, float]] = {}
        """Finished, not yet consumed trajectories: (fresh when it finished, its seconds)."""
        self.resizing: _Resize | None = None
        # Colocated (verl-style time-sharing) trains on whole batches: `trainer.resolve` set its
        # max_staleness to 0 and its staleness_policy to wait.

    # -- the loop's hooks (`sharing.DeviceSharing`) ---------------------------------------------
    def unit_count(self) -> int:
        return len(self.units.units)

    def asleep_at_start(self) -> list[int]:
        """The learner's units: their workers sleep until lent."""
        return [u.index for u in self.units.units if u.role != ROLLOUT]

    def open_units(self) -> list[int]:
        """Units taking new episodes: serving rollout and not draining."""
        return self.units.open()

    def first_batch(self, now: float) -> None:
        """Waiting for the first batch is start-up, not imbalance: the signals start now."""
        self.meter.restart(now)

    def tick(self, loop: LoopState) -> None:
        now = time.monotonic()
        self.meter.advance(now)
        self.move(loop.stepping)
        if not self.planned:
            if self.steps >= self.profile_steps and not self.units.switching():
                self._plan(now)
        else:
            state = self.units.state(
                now,
                self.devices.episodes(),
                self.meter.read(now),
                ready=loop.ready,
                running=loop.running,
                episodes_per_step=self.batch_trajectories,
                stepping=loop.stepping,
            )
            switches = self.policy(state, self.rule)
            if switches:
                if self.name == "colocated":
                    reason = "colocated: " + ("a batch is ready" if switches[0].to == LEARNER else "the step is done")
                else:
                    reason = (f"learner_wait {state.learner_wait:.2f}, rollout_wait {state.rollout_wait:.2f} over "
                              f"{state.window_s:.1f} s and {state.window_steps} steps")  # fmt: skip
                self._request(switches, now, reason)
        self.move(loop.stepping)

    def signals(self, loop: LoopState) -> None:
        waiting = not loop.stepping and loop.ready < self.batch_trajectories
        slots = self.config.episodes_per_worker * len(self.units.open())
        self.meter.set(learner_waiting=waiting, held_slots=loop.held_slots, slots=slots)

    def finished(self, trajectories: list, version: int) -> None:
        """Episodes done (without error) while the learner was at `version`."""
        for trajectory in trajectories:
            fresh = staleness(trajectory, version) <= self.max_staleness
            self.fresh[trajectory.trajectory_id] = (fresh, trajectory.episode_seconds)

    def dropped(self, ids: list[str], *, lagging: bool) -> None:
        """Stale drops at batch time; `lagging`: a full batch was waiting for the learner."""
        now = time.monotonic()
        for trajectory_id in ids:
            fresh, seconds = self.fresh.pop(trajectory_id, (False, 0.0))
            if fresh and lagging:
                self.meter.wasted(now, seconds)

    def stepped(self, record: dict, batch, seconds: float) -> None:
        """A learner step ended after `seconds`: profile it, add the multiplex metrics to `record`."""
        now = time.monotonic()
        self.meter.step(now)
        self.steps += 1
        for trajectory_id in batch.ids:
            self.fresh.pop(trajectory_id, None)
        for trajectory in batch.trajectories:
            if (episode := episode_record(trajectory, self.steps)) is not None:
                self.profile.append(episode)
        tokens = sum(len(t.token_ids) for t in batch.trajectories)
        ranks = self.devices.ranks()
        self.profile.append({"kind": "learner_step", "tokens": tokens, "seconds": round(seconds, 4), "units": ranks,
                             "step": self.steps})  # fmt: skip
        switches = self.units.done[self.reported :]
        self.reported = len(self.units.done)
        wait, hold, _, _ = self.meter.read(now)
        lent_to_rollout, lent_to_learner = self.units.lent()
        record.update(
            rollout_units=self.units.serving(ROLLOUT),
            learner_units=self.units.serving(LEARNER),
            learner_ranks=ranks,
            lent_to_rollout=lent_to_rollout,
            lent_to_learner=lent_to_learner,
            learner_wait=round(wait, 4),
            rollout_wait=round(hold, 4),
        )
        for direction in ("to_learner", "to_rollout"):
            mine = [s["seconds"] for s in switches if s["direction"] == direction]
            record[f"switches_{direction}"] = len(mine)
            record[f"switch_{direction}_s"] = round(sum(mine), 4)

    # -- switches -----------------------------------------------------------------------------
    def _request(self, switches: list[Switch], now: float, reason: str) -> None:
        for switch in self.units.request(switches, now, reason):
            unit = self.units.units[switch.unit]
            logger.info("multiplex: unit %d (home %s) switches %s -> %s: %s", unit.index, unit.home, unit.role,
                        switch.to, reason)  # fmt: skip

    def may_step(self) -> bool:
        """Whether the loop may start a learner step now. Colocated steps only on every unit
        (none in rollout, none moving): otherwise a batch ready while units still move would
        train on the learner parked on one rank. The other policies step on the ranks of the
        moment (a step sent during a resize runs on the new ranks)."""
        if self.name != "colocated":
            return True
        return self.units.serving(ROLLOUT) == 0 and not self.units.switching() and self.resizing is None

    def pending(self) -> list:
        """References the loop waits on with its episodes: the in-flight resize's."""
        return list(self.resizing.refs) if self.resizing is not None else []

    def move(self, stepping: bool) -> None:
        """Take the switches in flight as far as they can go now (module docstring);
        `stepping`: a learner step is in flight (the learner is not resized under it)."""
        devices, ray = self.devices, self.devices.ray
        if self.resizing is not None and not self._finish_resize(block=False):
            return  # one resize at a time: the next waits for the learner's new size
        started = time.monotonic()  # several workers sleep (and wake) at once: each is timed from the start
        sleeping = {index: devices.sleep(index) for index in self.units.drained(devices.episodes())}
        for index, ref in sleeping.items():
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:
                logger.warning("multiplex: worker %d died before sleeping; restarted, it stays in rollout", index)
                devices.restart(index)
                self.units.cancel(index)
                continue
            self.units.slept(index, time.monotonic() - started)
        if stepping:
            return  # a step is in flight: the learner changes size only between steps
        grow, shrink = self.units.due()
        if not grow and not shrink:
            return
        before, ranks = devices.ranks(), self.units.ranks()
        started = time.monotonic()
        self.resizing = _Resize(devices.resize(ranks), grow, shrink, before, ranks, started)
        self._finish_resize(block=False)  # done already when nothing had to move

    def settle(self) -> None:
        """Wait for the resize in flight, if any, and complete its switches."""
        if self.resizing is not None:
            self._finish_resize(block=True)

    def _finish_resize(self, *, block: bool) -> bool:
        """Complete the in-flight resize's switches if every rank has its state (or, with
        `block`, once they all have): the units' books, then the leaving units' workers wake
        with the newest weights. Whether it completed."""
        devices, ray, resize = self.devices, self.devices.ray, self.resizing
        if resize.refs:
            ready, _ = ray.wait(resize.refs, num_returns=len(resize.refs), timeout=None if block else 0)
            if len(ready) < len(resize.refs):
                return False
            ray.get(resize.refs)  # a rank's error surfaces here
        self.resizing = None
        now = time.monotonic()
        resize_s = now - resize.started
        self.units.resized(resize.grow, resize_s, now, now - self.start)
        started = time.monotonic()
        waking = {index: devices.wake(index) for index in resize.shrink}
        for index, ref in waking.items():
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError:  # a restarted worker starts awake, with the weights
                logger.warning("multiplex: worker %d died asleep; restarted", index)
                devices.restart(index)
            now = time.monotonic()
            self.units.woke(index, resize_s, now - started, now, now - self.start)
        moved = len(resize.grow) + len(resize.shrink)
        for switch in self.units.done[len(self.units.done) - moved :]:
            logger.info("multiplex: unit %d is in %s (%s in %.2f s; learner %d -> %d ranks)", switch["unit"],
                        switch["direction"][3:], switch["direction"], switch["seconds"], resize.before,
                        resize.ranks)  # fmt: skip
        if self.meter.started:  # the split changed: the signals start over
            self.meter.restart(time.monotonic())
        return True

    def restore(self) -> None:
        """After the last step (the loop calls it with no step in flight): every unit back to
        its home pool, so that what runs after RL (the evaluation) finds the configured (or
        planned) split. Units still draining with episodes on them stay in rollout."""
        self.settle()
        for unit in self.units.units:
            if unit.role == ROLLOUT and unit.target == LEARNER:
                self.units.cancel(unit.index)
        self.move(stepping=False)  # units asleep in transit join the learner first
        self.settle()
        away = [Switch(u.index, u.home) for u in self.units.units if u.role != u.home and u.target is None]
        self._request(away, time.monotonic(), "the run is over: back to its home pool")
        self.move(stepping=False)
        self.settle()

    # -- the planner --------------------------------------------------------------------------
    def records(self, steps: int | None = None) -> list[dict]:
        """Profile records of the first `steps` learner steps (all: None) and every switch."""
        mine = [r for r in self.profile if steps is None or r["step"] <= steps]
        return mine + [{"kind": "switch", **s} for s in self.units.done]

    def _plan(self, now: float) -> None:
        self.planned = True
        try:
            model = fit(self.records(self.profile_steps))
        except TimeModelError as exc:
            logger.warning("multiplex: no time model from the profile (%s); keeping the configured split", exc)
            return
        split = make_plan(
            model, len(self.units.units), self.batch_trajectories,
            episodes_per_unit=self.config.episodes_per_worker, max_staleness=self.max_staleness,
        )  # fmt: skip
        self.model, self.plan = model.to_dict(), split.to_dict()
        logger.info("multiplex: time model %s", json.dumps(model.summary()))
        rollout = [u for u in self.units.units if u.role == ROLLOUT]
        learner = [u for u in self.units.units if u.role == LEARNER]
        episodes = self.devices.episodes()
        move = len(rollout) - split.rollout_units
        if move > 0:  # the idlest rollout units go first
            chosen = sorted(rollout, key=lambda u: (episodes.get(u.index, 0), -u.index))[:move]
            switches = [Switch(u.index, LEARNER) for u in chosen]
        else:
            switches = [Switch(u.index, ROLLOUT) for u in learner[: -move or 0]]
        reason = (f"plan: {split.rollout_units} rollout + {split.learner_units} learner units (predicted "
                  f"{split.predicted.throughput:.3g} episodes/s, {split.predicted.bottleneck}-bound)")  # fmt: skip
        logger.info("multiplex %s", reason)
        self._request(switches, now, reason)
        self.units.rehome()
        self.write()

    def write(self) -> None:
        """`multiplex.json`: the settings, the profile, the time model and plan (if made), the
        model fitted on the whole run, every switch."""
        if self.path is None:
            return
        try:
            whole = fit(self.records()).to_dict()
        except TimeModelError as exc:
            whole = {"error": str(exc)}
        report = {
            "policy": self.name,
            "units": len(self.units.units),
            "rollout_workers": self.config.rollout_workers,
            "episodes_per_step": self.batch_trajectories,
            "episodes_per_unit": self.config.episodes_per_worker,
            "max_staleness": self.max_staleness,
            "profile_steps": self.profile_steps,
            "model": self.model,
            "plan": self.plan,
            "run_model": whole,
            "switches": self.units.done,
            "profile": self.profile,
        }
        self.path.write_text(json.dumps(report, indent=1) + "\n")


def make_sharing(config: OrchestratorConfig, devices: Devices, **settings) -> DeviceSharing:
    """The device sharing `config.multiplex` names; `settings`: `Multiplex`'s keyword
    arguments (unused by `static`)."""
    if config.multiplex == "static":
        return StaticSplit(config.rollout_workers)
    return Multiplex(config, devices, **settings)
