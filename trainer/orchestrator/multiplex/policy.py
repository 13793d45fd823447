"""The bidirectional scheduler's decision rule, and the two baselines, as pure functions
(BiDiRL, arXiv 2607.09207, its "bidirectional scheduler").

Every policy is `policy(state: PoolState, rule: Rule) -> list[Switch]`: from what the two
pools are doing now, which units change role. The caller (the orchestrator's loop, or
`simulator.simulate`) applies the switches; a unit in transit serves neither stage for its
switch cost. The caller measures the two wait signals with a `SignalMeter`:

- `learner_wait`: the fraction of the window in which the learner had no full batch to
  step on (it waits on rollouts: the rollout stage is the bottleneck);
- `rollout_wait`: the fraction of rollout slot-seconds in the window left free because the
  staleness bound held new episodes back, or spent on episodes that finished fresh and then
  aged past the bound in the queue while a full batch was waiting for the learner
  (rollouts wait on the learner: when slots are fewer than the staleness bound admits, a
  lagging learner shows as such drops before it shows as holds). Episodes already stale
  when they finish (the long tail's cost) or that aged while the learner waited for a
  batch to fill (the batch's granularity) do not count.

**`decide`** (BiDiRL's rule as chosen here; the paper gives no formula):

1. No decision while a switch is in flight or the signals cover less than `min_window_s`
   seconds or `min_window_steps` learner steps (they must describe the current split).
2. Capacities from the signals: with r rollout and k learner units, throughput X now, the
   rollout stage could produce `X / (1 - rollout_wait)` and the learner consume
   `X / (1 - learner_wait)`. A stage's capacity is taken as proportional to its units, so
   moving m units from learner to rollout (m < 0: the other way) predicts
   `X(m) = min((r + m) / (r (1 - rollout_wait)), (k - m) / (k (1 - learner_wait)))` (in
   units of X), and `gain(m) = X(m) / X(0)`. When both stages wait (a third limit, e.g. a
   long tail clogging the staleness window), both capacities exceed X and a move only
   helps if it raises the smaller one: the rule does not mistake that for an imbalance.
3. Only the waiting stage lends: a direction is open only if the lender's wait signal is at
   least `min_imbalance`. Lenders keep `min_units`, and each moving unit has been at least
   `min_dwell_s` in its role. Idle units go first; a busy one drains (takes no new work,
   switches once its episodes or the running step are done), fewest episodes first.
   Within each, units borrowed from the other stage go home first: when an imbalance
   reverses, lent units are returned before the other pool lends its own.
4. The target is the move of largest `gain` (ties: fewer units); nothing moves unless
   `gain >= 1 + min_gain` (the band below is the hysteresis that keeps units from
   oscillating on noise). Of the target, at most `max_move_fraction` of the lender's
   units (at least one) move at once: damping, since a saturated signal makes a stage look
   unboundedly fast and a transient backlog looks like a lasting imbalance; the next
   decision, on a fresh window, continues if the imbalance remains.

Departures from BiDiRL: lent units are returned when the imbalance reverses, not when it
merely ends (returning them while balanced would recreate the imbalance they fixed), and a
busy unit drains instead of being preempted (no running episode is cut or migrated).

**`static`**: never switches (the planner's split for the whole run). **`colocated`**: every
unit time-shares (verl-style synchronous colocation): all units generate a batch; once it
is complete and nothing runs, all switch to the learner; after the step, all switch back.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "LEARNER",
    "POLICIES",
    "ROLLOUT",
    "PoolState",
    "Rule",
    "SignalMeter",
    "Switch",
    "UnitState",
    "colocated",
    "decide",
    "gain",
    "static",
]

ROLLOUT = "rollout"
LEARNER = "learner"


@dataclass(frozen=True)
class UnitState:
    unit: int
    home: str
    """The pool that owns it (its role in the initial split)."""
    role: str
    """The stage it serves, or is on its way to when `switching`."""
    busy: bool
    """Rollout: an episode runs on it; learner: a step runs."""
    switching: bool = False
    """Draining (busy, taking no new work) or in transit: it serves `role` once there."""
    dwell_s: float = math.inf
    """Seconds since it last arrived in a role (inf: never switched)."""
    episodes: int = 0
    """Episodes running on it (a rollout unit)."""


@dataclass(frozen=True)
class PoolState:
    units: tuple[UnitState, ...]
    learner_wait: float = 0.0
    rollout_wait: float = 0.0
    window_s: float = 0.0
    """Seconds the signals cover (see `SignalMeter`)."""
    window_steps: int = 0
    """Learner steps finished in that window."""
    ready: int = 0
    """Finished trajectories the learner has not consumed."""
    running: int = 0
    """Episodes in flight."""
    episodes_per_step: int = 1
    learner_stepping: bool = False

    def serving(self, role: str) -> list[UnitState]:
        """Units in `role` or on their way to it."""
        return [u for u in self.units if u.role == role]

    def lent(self, pool: str) -> list[UnitState]:
        """Units `pool` owns that serve the other stage."""
        return [u for u in self.units if u.home == pool and u.role != pool]

    def borrowed(self, pool: str) -> list[UnitState]:
        return [u for u in self.units if u.role == pool and u.home != pool]

    def idle(self, pool: str) -> list[UnitState]:
        return [u for u in self.units if u.role == pool and not u.busy and not u.switching]


@dataclass(frozen=True)
class Switch:
    unit: int
    to: str


@dataclass(frozen=True)
class Rule:
    """The bidirectional rule's thresholds and hysteresis."""

    min_imbalance: float = 0.2
    """A wait signal at or above this marks the other stage as the bottleneck."""
    min_gain: float = 0.05
    """Move only for a predicted throughput gain of at least this fraction."""
    min_dwell_s: float = 0.0
    """A unit stays at least this long in a role before it may switch again."""
    min_window_s: float = 0.0
    """Signals covering less than this many seconds (since the last switch) are not acted on."""
    min_window_steps: int = 4
    """... nor signals covering fewer learner steps (a scale-free minimum: a window must see
    the learner's cycle a few times to tell waiting from the gap between two steps)."""
    min_units: int = 1
    """Each pool keeps at least this many units."""
    max_move_fraction: float = 0.25
    """At most this fraction of the waiting pool's units (at least one) moves per decision:
    damping, since the proportional model overshoots when a signal saturates (a stage
    waiting all the window looks infinitely fast)."""

    def __post_init__(self) -> None:
        if (
            not 0 < self.min_imbalance <= 1
            or self.min_gain < 0
            or self.min_units < 1
            or not 0 < self.max_move_fraction <= 1
        ):
            raise ValueError(f"bad multiplex rule {self}")


def gain(rollout_units: int, learner_units: int, learner_wait: float, rollout_wait: float, moved: int) -> float:
    """Predicted throughput after moving `moved` units from learner to rollout (negative:
    from rollout to learner), relative to the prediction for the split now (step 2)."""

    def throughput(m: int) -> float:
        rollout = math.inf if rollout_wait >= 1 else (rollout_units + m) / (rollout_units * (1 - rollout_wait))
        learner = math.inf if learner_wait >= 1 else (learner_units - m) / (learner_units * (1 - learner_wait))
        return min(rollout, learner)

    now = throughput(0)
    return 1.0 if math.isinf(now) else throughput(moved) / now


def _lenders(state: PoolState, rule: Rule, lender: str, wait: float) -> list[UnitState]:
    """The units `lender` may give up now, in the order they go (step 3, before damping)."""
    if wait < rule.min_imbalance:
        return []
    other = LEARNER if lender == ROLLOUT else ROLLOUT
    units = [u for u in state.units if u.role == lender and not u.switching and u.dwell_s >= rule.min_dwell_s]
    units.sort(key=lambda u: (u.busy, u.home != other, u.episodes, u.unit))
    return units[: max(0, len(state.serving(lender)) - rule.min_units)]


def decide(state: PoolState, rule: Rule) -> list[Switch]:
    """BiDiRL's bidirectional rule (module docstring)."""
    if any(u.switching for u in state.units):
        return []
    if state.window_s < rule.min_window_s or state.window_steps < rule.min_window_steps:
        return []
    r, k = len(state.serving(ROLLOUT)), len(state.serving(LEARNER))
    if r == 0 or k == 0:
        return []
    to_rollout = _lenders(state, rule, LEARNER, state.learner_wait)
    to_learner = _lenders(state, rule, ROLLOUT, state.rollout_wait)
    waits = (state.learner_wait, state.rollout_wait)
    best = max(range(-len(to_learner), len(to_rollout) + 1), key=lambda m: (gain(r, k, *waits, m), -abs(m)))
    if best == 0 or gain(r, k, *waits, best) < 1 + rule.min_gain:
        return []
    lender_units = k if best > 0 else r
    count = min(abs(best), max(1, math.floor(lender_units * rule.max_move_fraction)))
    if best > 0:
        return [Switch(u.unit, ROLLOUT) for u in to_rollout[:count]]
    return [Switch(u.unit, LEARNER) for u in to_learner[:count]]


def static(state: PoolState, rule: Rule) -> list[Switch]:
    """The fixed split: never switches."""
    return []


def colocated(state: PoolState, rule: Rule) -> list[Switch]:
    """Every unit time-shares: generate a whole batch on all units, then train on all."""
    if any(u.switching for u in state.units) or state.learner_stepping:
        return []
    if state.ready >= state.episodes_per_step and state.running == 0:
        return [Switch(u.unit, LEARNER) for u in state.serving(ROLLOUT)]
    if state.ready < state.episodes_per_step:
        return [Switch(u.unit, ROLLOUT) for u in state.serving(LEARNER)]
    return []


Policy = Callable[[PoolState, Rule], list[Switch]]
POLICIES: dict[str, Policy] = {"static": static, "colocated": colocated, "bidirectional": decide}


class SignalMeter:
    """Measures `learner_wait` and `rollout_wait` over a sliding window, restarted whenever
    the split changes (the signals then describe the current split only).

    The caller reports each state as it begins (`set`), the time before each change
    (`advance`), each learner step's end (`step`) and the slot-seconds of each episode that
    aged out in the learner's queue (`wasted`). `read(now)` gives the signals since the last
    `restart`, over the last `window_s` seconds (to a resolution of `window_s / 16`) or the
    last `window_steps` learner steps, whichever is longer (slow steps must not leave a
    window too short to decide on: pass the rule's `min_window_steps`). Nothing is measured
    before the first `restart` (the loop calls it at the learner's first step: waiting for
    the first batch is start-up, not imbalance)."""

    def __init__(self, window_s: float, window_steps: int = 2) -> None:
        if window_s <= 0 or window_steps < 0:
            raise ValueError("window_s must be > 0 and window_steps >= 0")
        self.window_s, self.window_steps = window_s, window_steps
        self.started = False
        self.last = 0.0
        self.waiting, self.held, self.slots = False, 0, 0
        self.totals = [0.0, 0.0, 0.0, 0.0]
        """Cumulative learner-waiting seconds, held or wasted slot-seconds, rollout
        slot-seconds, learner steps."""
        self.marks: deque[tuple[float, list[float]]] = deque()

    def set(self, *, learner_waiting: bool, held_slots: int, slots: int) -> None:
        self.waiting, self.held, self.slots = learner_waiting, held_slots, slots

    def advance(self, now: float) -> None:
        if self.started and now > self.last:
            dt = now - self.last
            self.totals[0] += dt * self.waiting
            self.totals[1] += dt * self.held
            self.totals[2] += dt * self.slots
            if now - self.marks[-1][0] >= self.window_s / 16:
                self.mark(now)
        self.last = now

    def wasted(self, now: float, slot_seconds: float) -> None:
        """An episode that occupied a slot for `slot_seconds` finished fresh and was dropped
        at `now` after aging past the staleness bound in the learner's queue, behind a full
        batch."""
        self.advance(now)
        if self.started:
            self.totals[1] += slot_seconds

    def step(self, now: float) -> None:
        """A learner step ended at `now`."""
        self.advance(now)
        if self.started:
            self.totals[3] += 1
            self.mark(now)

    def mark(self, now: float) -> None:
        """Remember the totals at `now`; forget marks the window no longer needs."""
        self.marks.append((now, list(self.totals)))
        while (
            len(self.marks) > 1
            and self.marks[1][0] <= now - self.window_s
            and self.totals[3] - self.marks[1][1][3] >= self.window_steps
        ):
            self.marks.popleft()

    def restart(self, now: float) -> None:
        self.advance(now)
        self.started = True
        self.last = now
        self.marks = deque([(now, list(self.totals))])

    def read(self, now: float) -> tuple[float, float, float, int]:
        """(learner_wait, rollout_wait, window_s, window_steps); zeros before the first
        `restart`."""
        self.advance(now)
        if not self.started:
            return 0.0, 0.0, 0.0, 0
        since, base = self.marks[0]
        span = now - since
        if span <= 0:
            return 0.0, 0.0, 0.0, 0
        slot_seconds = self.totals[2] - base[2]
        hold = min(1.0, (self.totals[1] - base[1]) / slot_seconds) if slot_seconds > 0 else 0.0
        return (self.totals[0] - base[0]) / span, hold, span, round(self.totals[3] - base[3])
