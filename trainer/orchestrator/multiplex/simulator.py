"""A discrete-event simulator of the asynchronous RL pipeline, driven by a `TimeModel`
(BiDiRL, arXiv 2607.09207, its cluster-scale evaluation; this simulator is ours).

What it models, and how:

- `units` interchangeable units, each serving the rollout stage, the learner, or in transit
  between them for the model's switch cost. The initial split is the planner's unless given.
- Rollout units run up to `episodes_per_unit` episodes each. An episode draws (tokens,
  turns) from the active phase's length distribution; each turn generates tokens / turns
  tokens, then spends `tool_seconds_per_turn` in its sandbox. Generation is processor
  sharing: the c episodes generating on a unit each run at `TimeModel.episode_tokens_per_s(c)`.
  A free slot goes to the least-loaded rollout unit (owned units before borrowed ones).
- Admission (the Schedule's `wait` rule): an episode may start while `started - dropped <
  (version + max_staleness + 1) * episodes_per_step`. Dropped episodes do not count, so stale
  drops never starve the learner (the Schedule counts started groups; see docs/multiplex.md).
- The learner steps when `episodes_per_step` trajectories are ready, it has a unit, and no
  unit is on its way in (a resize completes before the step). It takes the oldest finished
  ones; any over the staleness bound (learner version - version at the episode's start >
  `max_staleness`) is dropped first. A step on n tokens over k units takes
  `TimeModel.learner_step_seconds(n, k, phase slowdown)`.
- The policy (`policy.POLICIES`) is consulted after every event that can free a unit or
  change the split (an episode finished, a step started or ended, a switch arrived), with a
  `PoolState` whose signals come from a `SignalMeter`, as the orchestrator's loop will.
  Colocated is synchronous (verl-style): it always runs with `max_staleness = 0`.
- Phases (`Phase`) change the length distribution, the tools' and the learner's speed by
  learner step (the policy version an episode starts on picks its phase): forced
  imbalances and drift.

Everything is deterministic for a seed: one event heap ordered by (time, sequence number),
one RNG per phase so the k-th episode of a phase has the same length under every policy.
Events at one instant are all applied before anyone decides. The file is longer than the
house's ~400 lines because the event loop's state is one piece: split, it would scatter.

Figures (`SimResult`) are measured between the end of step `warmup_steps` and the last step:
steps/s, trajectories/s, the idle fraction of each pool (rollout: unit-seconds with no
episode generating / rollout unit-seconds; learner: unit-seconds not stepping / learner
unit-seconds; units in transit count in neither), switches per direction, stale drops.

Over 450 lines on purpose: `_Sim` is one discrete-event loop whose handlers share its clock,
queues and units; split apart, every handler would need all of that state.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import asdict, dataclass, field

from trainer.orchestrator.multiplex.planner import plan
from trainer.orchestrator.multiplex.policy import LEARNER, POLICIES, ROLLOUT, PoolState, Rule, SignalMeter, UnitState
from trainer.orchestrator.multiplex.timemodel import LengthDistribution, TimeModel

__all__ = ["Phase", "SimConfig", "SimResult", "simulate"]

GEN, TOOL, STEP, ARRIVE = range(4)


@dataclass(frozen=True)
class Phase:
    steps: int
    """Learner steps the phase lasts (the last phase lasts to the end of the run)."""
    lengths: LengthDistribution | None = None
    """None: the time model's distribution."""
    learner_slowdown: float = 1.0
    """Multiplies every learner step's time (a forced slow learner)."""
    tool_slowdown: float = 1.0
    """Multiplies every tool call's time (forced slow episodes: slow sandboxes)."""
    name: str = ""


@dataclass(frozen=True)
class SimConfig:
    units: int
    episodes_per_step: int
    episodes_per_unit: int
    max_staleness: int = 1
    steps: int = 50
    warmup_steps: int = 2
    rollout_units: int | None = None
    """The initial split (rollout units); None: `planner.plan`'s. Colocated starts all-rollout."""
    window_s: float = 60.0
    """The signal window of the `SignalMeter`."""
    seed: int = 0
    timeline: bool = False


@dataclass(frozen=True)
class SimResult:
    policy: str
    rollout_units: int
    learner_units: int
    steps: int
    seconds: float
    """Simulated time at the last step's end."""
    steps_per_s: float
    trajectories_per_s: float
    rollout_idle_fraction: float
    learner_idle_fraction: float
    switching_fraction: float
    """Unit-seconds in transit / all unit-seconds."""
    switches_to_learner: int
    switches_to_rollout: int
    episodes_started: int
    stale_dropped: int
    in_flight: int
    ready_left: int
    phase_steps_per_s: tuple[float, ...]
    step_ends: tuple[float, ...] = field(repr=False)
    consumed: tuple[tuple[int, ...], ...] = field(repr=False)
    """Episode ids of each learner step."""
    timeline: tuple[tuple[float, int, int, int], ...] = field(default=(), repr=False)
    """(time, rollout units, learner units, in transit) at each switch and arrival."""

    def figures(self) -> dict:
        """The flat figures (no per-step lists)."""
        data = asdict(self)
        for name in ("step_ends", "consumed", "timeline"):
            data.pop(name)
        data["phase_steps_per_s"] = list(self.phase_steps_per_s)
        return data


@dataclass
class _Unit:
    id: int
    home: str
    role: str
    switching: bool = False
    """In transit to `role`."""
    target: str | None = None
    """Draining: the role it switches to once its work is done (no new work meanwhile)."""
    arrived: float = -math.inf
    episodes: set[int] = field(default_factory=set)
    gen: dict[int, float] = field(default_factory=dict)
    """Generating episodes -> tokens left in their current turn."""
    last: float = 0.0
    stamp: int = 0
    generating: bool = False
    """`gen` was non-empty at the last `reschedule` (kept for the O(1) idle count)."""


@dataclass
class _Episode:
    id: int
    unit: int
    tokens: int
    turn_tokens: float
    turns_left: int
    version: int
    started: float
    tool_seconds: float
    seconds: float = 0.0
    """Wall seconds from start to finish (set when it finishes)."""


class _Sim:
    def __init__(self, model: TimeModel, config: SimConfig, phases: list[Phase], policy: str, rule: Rule) -> None:
        self.model, self.config, self.rule = model, config, rule
        self.phases = phases or [Phase(steps=config.steps)]
        self.phase_rngs = [random.Random(config.seed * 1_000_003 + i) for i in range(len(self.phases))]
        self.policy_name, self.policy = policy, POLICIES[policy]
        self.staleness = 0 if policy == "colocated" else config.max_staleness
        rollout = config.units if policy == "colocated" else config.rollout_units
        self.units = [
            _Unit(i, ROLLOUT if i < rollout else LEARNER, ROLLOUT if i < rollout else LEARNER)
            for i in range(config.units)
        ]
        self.heap: list = []
        self.seq = 0
        self.now = 0.0
        self.episodes: dict[int, _Episode] = {}
        self.ready: list[int] = []
        self.started = self.dropped = self.version = self.running = 0
        self.generating_units = 0
        """Rollout units with an episode generating."""
        self.pool: dict[str, list[_Unit]] = {}
        self.moving = 0
        self.regroup()
        self.stepping = False
        self.consumed: list[tuple[int, ...]] = []
        self.step_ends: list[float] = []
        self.switches = {ROLLOUT: 0, LEARNER: 0}
        self.meter = SignalMeter(config.window_s, rule.min_window_steps)
        self.totals = dict.fromkeys(("rollout", "rollout_idle", "learner", "learner_idle", "switching"), 0.0)
        self.mark: dict[str, float] | None = None
        self.timeline: list[tuple[float, int, int, int]] = []

    # -- helpers ----------------------------------------------------------------------------
    def push(self, at: float, kind: int, a: int = 0, b: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at, self.seq, kind, a, b))

    def phase(self, version: int) -> int:
        end = 0
        for index, phase in enumerate(self.phases):
            end += phase.steps
            if version < end:
                return index
        return len(self.phases) - 1

    def regroup(self) -> None:
        """The units serving each stage (after a switch starts or ends)."""
        self.pool = {role: [u for u in self.units if u.role == role and not u.switching] for role in (ROLLOUT, LEARNER)}
        self.moving = sum(u.switching for u in self.units)

    def integrate(self, now: float) -> None:
        """Accumulate unit-seconds of the state that held since the last event."""
        dt = now - self.now
        if dt > 0:
            rollout, learner, totals = len(self.pool[ROLLOUT]), len(self.pool[LEARNER]), self.totals
            totals["switching"] += dt * self.moving
            totals["rollout"] += dt * rollout
            totals["rollout_idle"] += dt * (rollout - self.generating_units)
            totals["learner"] += dt * learner
            totals["learner_idle"] += dt * learner * (not self.stepping)
        self.meter.advance(now)
        self.now = now

    # -- generation -------------------------------------------------------------------------
    def progress(self, unit: _Unit) -> None:
        if unit.gen:
            done = self.model.episode_tokens_per_s(len(unit.gen)) * (self.now - unit.last)
            for eid in unit.gen:
                unit.gen[eid] -= done
        unit.last = self.now

    def reschedule(self, unit: _Unit) -> None:
        unit.stamp += 1
        if unit.generating != bool(unit.gen):
            unit.generating = not unit.generating
            self.generating_units += 1 if unit.generating else -1
        if unit.gen:
            left = max(0.0, min(unit.gen.values()))
            self.push(self.now + left / self.model.episode_tokens_per_s(len(unit.gen)), GEN, unit.id, unit.stamp)

    def start_episode(self, unit: _Unit) -> None:
        index = self.phase(self.version)
        phase = self.phases[index]
        tokens, turns = (phase.lengths or self.model.episodes).sample(self.phase_rngs[index])
        tool = self.model.tool_seconds_per_turn * phase.tool_slowdown
        episode = _Episode(self.started, unit.id, tokens, tokens / turns, turns, self.version, self.now, tool)
        self.started += 1
        self.running += 1
        self.episodes[episode.id] = episode
        unit.episodes.add(episode.id)
        self.progress(unit)
        unit.gen[episode.id] = episode.turn_tokens
        self.reschedule(unit)

    def turn_done(self, episode: _Episode, unit: _Unit) -> bool:
        """After a turn's tool call: the next turn generates (True) or the episode ends."""
        episode.turns_left -= 1
        if episode.turns_left > 0:
            unit.gen[episode.id] = episode.turn_tokens
            return True
        unit.episodes.discard(episode.id)
        self.running -= 1
        episode.seconds = self.now - episode.started
        if self.version - episode.version > self.staleness:
            self.drop(episode.id, lagging=False)
        else:
            self.ready.append(episode.id)
        if unit.target is not None and not unit.episodes:
            self.depart(unit, unit.target)
        return False

    def drop(self, eid: int, *, lagging: bool) -> None:
        """Over the staleness bound: it only gets older, so it is dropped (and no longer
        counts against admission). `lagging`: it aged out in the queue while a full batch
        was waiting for the learner, so it was produced faster than the learner took it and
        its slot-seconds count as rollout wait. One already stale when it finished (the long
        tail), or that aged while the learner waited for a batch to fill, does not."""
        episode = self.episodes.pop(eid)
        if lagging:
            self.meter.wasted(self.now, episode.seconds)
        self.dropped += 1

    def on_gen(self, unit: _Unit, stamp: int) -> bool:
        if stamp != unit.stamp:
            return False
        self.progress(unit)
        least = min(unit.gen.values())
        finished = False
        for eid in [e for e, left in unit.gen.items() if left <= least + 1e-9]:
            del unit.gen[eid]
            episode = self.episodes[eid]
            if episode.tool_seconds > 0:
                self.push(self.now + episode.tool_seconds, TOOL, eid)
            else:
                finished |= not self.turn_done(episode, unit)
        self.reschedule(unit)
        return finished

    def on_tool(self, eid: int) -> bool:
        episode = self.episodes[eid]
        unit = self.units[episode.unit]
        self.progress(unit)
        going = self.turn_done(episode, unit)
        self.reschedule(unit)
        return not going

    # -- admission, learner, switches ---------------------------------------------------------
    def admission_open(self) -> bool:
        return self.started - self.dropped < (self.version + self.staleness + 1) * self.config.episodes_per_step

    def dispatch(self) -> None:
        slots = self.config.episodes_per_unit
        while self.admission_open():
            free = [u for u in self.pool[ROLLOUT] if len(u.episodes) < slots and u.target is None]
            if not free:
                return
            self.start_episode(min(free, key=lambda u: (len(u.episodes), u.home != ROLLOUT, u.id)))

    def try_step(self) -> None:
        learners = self.pool[LEARNER]
        if self.stepping or self.version >= self.config.steps or not learners:
            return
        if self.moving and any(u.switching and u.role == LEARNER for u in self.units):
            return
        batch = self.config.episodes_per_step
        if len(self.ready) < batch:
            return
        taken, self.ready = self.ready[:batch], self.ready[batch:]
        tokens = sum(self.episodes.pop(eid).tokens for eid in taken)
        self.consumed.append(tuple(taken))
        if len(self.consumed) == 1:
            self.meter.restart(self.now)  # waiting for the first batch is start-up
        slowdown = self.phases[self.phase(self.version)].learner_slowdown
        self.stepping = True
        self.push(self.now + self.model.learner_step_seconds(tokens, len(learners), slowdown), STEP)

    def state(self) -> PoolState:
        wait, hold, window, window_steps = self.meter.read(self.now)
        units = tuple(
            UnitState(
                u.id,
                u.home,
                u.target or u.role,
                bool(u.episodes) if u.role == ROLLOUT else self.stepping,
                u.switching or u.target is not None,
                self.now - u.arrived,
                len(u.episodes),
            )  # fmt: skip
            for u in self.units
        )
        return PoolState(
            units, wait, hold, window, window_steps, len(self.ready), self.running,
            self.config.episodes_per_step, self.stepping,
        )  # fmt: skip

    def consult(self) -> None:
        if self.policy_name == "static":  # never switches: skip building its state
            return
        if self.policy_name == "bidirectional" and not self.may_decide():
            return
        state = self.state()
        for switch in self.policy(state, self.rule):
            unit, view = self.units[switch.unit], state.units[switch.unit]
            if view.switching or switch.to == view.role or switch.to not in (ROLLOUT, LEARNER):
                raise ValueError(f"policy {self.policy_name} asked for an impossible switch {switch} of {view}")
            self.switches[switch.to] += 1
            if view.busy:  # it drains first: no new work; it leaves when its work is done
                unit.target = switch.to
            else:
                self.depart(unit, switch.to)

    def depart(self, unit: _Unit, to: str) -> None:
        """`unit` (idle) starts its switch to `to`."""
        unit.role, unit.target, unit.switching = to, None, True
        self.push(self.now + self.model.switch_seconds(to == LEARNER), ARRIVE, unit.id)
        self.regroup()
        self.record()

    def may_decide(self) -> bool:
        """False where `decide` returns [] by its step 1 (a switch in flight, a window too
        short): skipping the call then is the same decision, without building the state."""
        if self.moving or any(u.target is not None for u in self.units):
            return False
        _, _, window, steps = self.meter.read(self.now)
        return window >= self.rule.min_window_s and steps >= self.rule.min_window_steps

    def record(self) -> None:
        if self.config.timeline:
            self.timeline.append((self.now, len(self.pool[ROLLOUT]), len(self.pool[LEARNER]), self.moving))

    def signals(self) -> None:
        """The meter's state from now on (held slots: free slots admission keeps empty)."""
        slots = self.config.episodes_per_unit
        open_units = [u for u in self.pool[ROLLOUT] if u.target is None]
        held = 0 if self.admission_open() else sum(slots - len(u.episodes) for u in open_units)
        waiting = not self.stepping and len(self.ready) < self.config.episodes_per_step
        self.meter.set(learner_waiting=waiting, held_slots=held, slots=slots * len(open_units))

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> None:
        self.dispatch()
        self.try_step()
        self.consult()
        self.signals()
        while self.version < self.config.steps:
            if not self.heap:
                raise RuntimeError(f"simulation stalled at version {self.version} (policy {self.policy_name})")
            self.integrate(self.heap[0][0])
            changed = False
            while self.heap and self.heap[0][0] == self.now:  # everything at this instant, then decide once
                changed |= self.handle(*heapq.heappop(self.heap)[2:])
            if changed:
                self.try_step()
                self.dispatch()
                self.consult()
                self.try_step()
                self.signals()

    def handle(self, kind: int, a: int, b: int) -> bool:
        """Apply one event; True when it can have freed a unit or changed the split."""
        if kind == GEN:
            return self.on_gen(self.units[a], b)
        if kind == TOOL:
            return self.on_tool(a)
        if kind == STEP:
            self.stepping = False
            for unit in [u for u in self.pool[LEARNER] if u.target is not None]:
                self.depart(unit, unit.target)
            self.version += 1
            self.step_ends.append(self.now)
            self.meter.step(self.now)
            stale = {eid for eid in self.ready if self.version - self.episodes[eid].version > self.staleness}
            if stale:
                self.ready = [eid for eid in self.ready if eid not in stale]
                lagging = len(self.ready) >= self.config.episodes_per_step
                for eid in sorted(stale):
                    self.drop(eid, lagging=lagging)
            if self.version == self.config.warmup_steps:
                self.mark = dict(self.totals)
            return True
        unit = self.units[a]  # ARRIVE
        unit.switching, unit.arrived, unit.last = False, self.now, self.now
        self.regroup()
        if self.meter.started:  # the split changed: the signals start over
            self.meter.restart(self.now)
        self.record()
        return True

    def result(self) -> SimResult:
        config = self.config
        warm = config.warmup_steps
        start = self.step_ends[warm - 1] if warm else 0.0
        span = self.step_ends[-1] - start
        base = self.mark if warm else dict.fromkeys(self.totals, 0.0)
        window = {k: self.totals[k] - base[k] for k in self.totals}
        all_unit_seconds = window["rollout"] + window["learner"] + window["switching"]
        ends, phase_rates, first = [0.0, *self.step_ends], [], 0
        for index, phase in enumerate(self.phases):
            last = config.steps if index == len(self.phases) - 1 else min(first + phase.steps, config.steps)
            if last > first:
                phase_rates.append((last - first) / (ends[last] - ends[first]))
            first = last
        return SimResult(
            policy=self.policy_name,
            rollout_units=sum(u.home == ROLLOUT for u in self.units),
            learner_units=sum(u.home == LEARNER for u in self.units),
            steps=self.version,
            seconds=self.step_ends[-1],
            steps_per_s=(config.steps - warm) / span,
            trajectories_per_s=(config.steps - warm) * config.episodes_per_step / span,
            rollout_idle_fraction=window["rollout_idle"] / window["rollout"] if window["rollout"] else 0.0,
            learner_idle_fraction=window["learner_idle"] / window["learner"] if window["learner"] else 0.0,
            switching_fraction=window["switching"] / all_unit_seconds if all_unit_seconds else 0.0,
            switches_to_learner=self.switches[LEARNER],
            switches_to_rollout=self.switches[ROLLOUT],
            episodes_started=self.started,
            stale_dropped=self.dropped,
            in_flight=self.running,
            ready_left=len(self.ready),
            phase_steps_per_s=tuple(phase_rates),
            step_ends=tuple(self.step_ends),
            consumed=tuple(self.consumed),
            timeline=tuple(self.timeline),
        )


def simulate(
    model: TimeModel,
    config: SimConfig,
    policy: str = "static",
    *,
    phases: list[Phase] | None = None,
    rule: Rule | None = None,
) -> SimResult:
    """Run the pipeline under `policy` ("static", "colocated", "bidirectional") for
    `config.steps` learner steps (see the module docstring)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    if not 0 <= config.warmup_steps < config.steps:
        raise ValueError(f"warmup_steps must be in [0, steps), not {config.warmup_steps}")
    if config.rollout_units is None and policy != "colocated":
        split = plan(
            model, config.units, config.episodes_per_step,
            episodes_per_unit=config.episodes_per_unit, max_staleness=config.max_staleness,
            lengths=(phases[0].lengths if phases else None),
        )  # fmt: skip
        config = SimConfig(**{**asdict(config), "rollout_units": split.rollout_units})
    elif policy != "colocated" and not 1 <= config.rollout_units < config.units:
        raise ValueError(f"rollout_units must leave each stage a unit: {config.rollout_units} of {config.units}")
    sim = _Sim(model, config, list(phases or []), policy, rule or Rule())
    sim.run()
    return sim.result()
