"""The orchestrator's bookkeeping of resource units for BiDiRL's hot switch: which stage each
unit serves, which are on their way to the other, and the `PoolState` the policies decide
on. Pure Python (no Ray): the loop (`trainer.orchestrator.loop`) makes the Ray calls this
tells it to make, in this order, and reports back.

A unit is one rollout worker's slot in the pool or one learner rank (a CPU slot here, a GPU
there). Every unit has a rollout worker actor; while the unit serves the learner, that
worker sleeps (its engine freed). Its life through a switch:

- **rollout -> learner**: `request` marks it draining (`target`): no new episodes go to it.
  Once its episodes are done (`drained`), the loop calls `worker.sleep()` and reports it
  (`slept`): it is in transit. At the next step boundary (no learner step in flight) the
  loop resizes the learner to `ranks()` and reports it (`resized`): it serves the learner.
- **learner -> rollout**: `request` marks it leaving; at the next step boundary the loop
  resizes the learner to `ranks()` (one rank fewer), calls `worker.wake(version, weights)`
  with the newest published weights and reports both (`resized`, `woke`).

A learner group cannot have zero ranks: while every unit generates (colocated between two
steps), the learner is parked on one idle rank (`ranks()` is at least 1), its state kept in
host memory, as BiDiRL offloads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainer.orchestrator.multiplex.policy import LEARNER, ROLLOUT, PoolState, Switch, UnitState

__all__ = ["Unit", "Units"]


@dataclass
class Unit:
    index: int
    home: str
    role: str
    """The stage it serves; during a switch to the learner, `learner` from `slept` on."""
    target: str | None = None
    """Switching: the role it is on its way to (rollout: draining; learner: leaving at the
    next step boundary)."""
    transit: bool = False
    """Asleep and waiting for the learner's resize (rollout -> learner)."""
    arrived: float = -math.inf
    """When it arrived in its role (monotonic seconds; -inf: never switched)."""
    since: float = 0.0
    """When its switch was asked for."""
    sleep_s: float = 0.0
    reason: str = ""


@dataclass
class Units:
    """Every unit's role and switch in flight, and the switches done (for metrics and
    `multiplex.json`)."""

    units: list[Unit]
    done: list[dict] = field(default_factory=list)
    """One dict per completed switch: unit, direction, seconds (sleep + resize, or resize +
    wake), when (seconds since the run's start, as given), reason."""

    @classmethod
    def split(cls, rollout: int, learner: int) -> Units:
        """Units 0..rollout-1 serve rollout, the next `learner` the learner (their workers asleep)."""
        return cls(
            [Unit(i, ROLLOUT, ROLLOUT) for i in range(rollout)]
            + [Unit(rollout + i, LEARNER, LEARNER) for i in range(learner)]
        )

    # -- what serves what ---------------------------------------------------------------------
    def open(self) -> list[int]:
        """Units that take new episodes: rollout, not draining."""
        return [u.index for u in self.units if u.role == ROLLOUT and u.target is None]

    def serving(self, role: str) -> int:
        """Units in `role` now (draining ones included; units in transit to the learner not)."""
        return sum(u.role == role and not u.transit for u in self.units)

    def ranks(self) -> int:
        """The learner group's size once the switches due at a step boundary are applied."""
        staying = [u for u in self.units if u.role == LEARNER and u.target != ROLLOUT]
        return max(1, len(staying))

    def switching(self) -> bool:
        return any(u.target is not None or u.transit for u in self.units)

    def lent(self) -> tuple[int, int]:
        """(learner units serving rollout, rollout units serving the learner)."""
        return (
            sum(u.home == LEARNER and u.role == ROLLOUT for u in self.units),
            sum(u.home == ROLLOUT and u.role == LEARNER for u in self.units),
        )

    def state(
        self,
        now: float,
        episodes: dict[int, int],
        signals: tuple[float, float, float, int],
        *,
        ready: int,
        running: int,
        episodes_per_step: int,
        stepping: bool,
    ) -> PoolState:
        """The policies' view: `episodes` running per unit, the `SignalMeter`'s reading."""
        views = tuple(
            UnitState(
                unit=u.index,
                home=u.home,
                role=u.target or u.role,
                busy=episodes.get(u.index, 0) > 0 if u.role == ROLLOUT else stepping,
                switching=u.target is not None or u.transit,
                dwell_s=now - u.arrived,
                episodes=episodes.get(u.index, 0),
            )
            for u in self.units
        )
        wait, hold, window, steps = signals
        return PoolState(views, wait, hold, window, steps, ready, running, episodes_per_step, stepping)

    # -- switches -------------------------------------------------------------------------
    def request(self, switches: list[Switch], now: float, reason: str) -> list[Switch]:
        """Start `switches` (a policy's answer); returns those that were new. A switch of a
        unit already switching, or to the role it has, is a policy bug: ValueError."""
        started = []
        for switch in switches:
            unit = self.units[switch.unit]
            if unit.target is not None or unit.transit or switch.to == unit.role or switch.to not in (ROLLOUT, LEARNER):
                raise ValueError(f"impossible switch {switch} of unit {unit}")
            unit.target, unit.since, unit.reason = switch.to, now, reason
            started.append(switch)
        return started

    def drained(self, episodes: dict[int, int]) -> list[int]:
        """Units draining to the learner with no episode left: their workers may sleep now."""
        return [
            u.index for u in self.units if u.role == ROLLOUT and u.target == LEARNER and not episodes.get(u.index, 0)
        ]

    def slept(self, index: int, seconds: float) -> None:
        unit = self.units[index]
        unit.role, unit.target, unit.transit, unit.sleep_s = LEARNER, None, True, seconds

    def cancel(self, index: int) -> None:
        """A drain abandoned (its worker died and was restarted awake): it stays in rollout."""
        unit = self.units[index]
        unit.role, unit.target, unit.transit = ROLLOUT, None, False

    def due(self) -> tuple[list[int], list[int]]:
        """(units arriving at the learner, units leaving it) at the next step boundary."""
        grow = [u.index for u in self.units if u.transit]
        shrink = [u.index for u in self.units if u.role == LEARNER and u.target == ROLLOUT]
        return grow, shrink

    def resized(self, grow: list[int], resize_s: float, now: float, when: float) -> None:
        """The learner took the units of `grow` (resized in `resize_s` seconds)."""
        for index in grow:
            unit = self.units[index]
            unit.transit, unit.arrived = False, now
            self._record(unit, "to_learner", unit.sleep_s + resize_s, when)

    def woke(self, index: int, resize_s: float, wake_s: float, now: float, when: float) -> None:
        """The unit left the learner (its share of the resize: `resize_s`) and its worker woke."""
        unit = self.units[index]
        unit.role, unit.target, unit.arrived = ROLLOUT, None, now
        self._record(unit, "to_rollout", resize_s + wake_s, when)

    def _record(self, unit: Unit, direction: str, seconds: float, when: float) -> None:
        self.done.append(
            {"unit": unit.index, "direction": direction, "seconds": round(seconds, 4), "at_s": round(when, 3),
             "reason": unit.reason}
        )  # fmt: skip

    def rehome(self) -> None:
        """The planner's split becomes each unit's home (lent and borrowed are relative to it)."""
        for unit in self.units:
            unit.home = unit.target or unit.role
