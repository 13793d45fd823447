"""The orchestrator loop's one seam for device sharing (BiDiRL, `orchestrator.multiplex`).

The loop (`trainer.orchestrator.loop`) calls a `DeviceSharing` at fixed points and knows
nothing else of it; a sharing policy sees the loop only as `LoopState` snapshots and acts
only through `Devices`: sleep, wake or restart a unit's rollout worker, resize the learner.
`StaticSplit` (the default, `multiplex: static`) does nothing at every point, so a plain run
reads as plain asynchronous RL; `runtime.Multiplex` is `bidirectional` and `colocated`
(`runtime.make_sharing` picks one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LoopState:
    """What device sharing reads of the loop at one moment (a copy, not the loop)."""

    running: int
    """Episodes in flight."""
    ready: int
    """Trajectories in full batches waiting for the learner."""
    stepping: bool
    """A learner step is in flight."""
    held_slots: int
    """Free episode slots the last dispatch left empty (the schedule admitted nothing)."""


class Devices(Protocol):
    """What device sharing may do to the units, and the one live reading it needs."""

    ray: object
    """Ray (or a test's stand-in): `get`, `wait` and `exceptions.RayActorError`."""

    def episodes(self) -> dict[int, int]:
        """Episodes running on each unit's worker, now (a restart requeues a worker's)."""
        ...

    def sleep(self, unit: int):
        """Free unit `unit`'s engine (its worker must be idle); a reference to wait on."""
        ...

    def wake(self, unit: int):
        """Wake unit `unit`'s worker with the newest published weights; a reference."""
        ...

    def restart(self, unit: int) -> None:
        """Replace unit `unit`'s dead worker (its episodes requeued)."""
        ...

    def ranks(self) -> int:
        """The learner's ranks now."""
        ...

    def resize(self, ranks: int) -> list:
        """Move the learner to `ranks` ranks, between two steps; references to wait on."""
        ...


class DeviceSharing(Protocol):
    """The points at which the loop calls device sharing, in the order a run meets them."""

    def unit_count(self) -> int:
        """Rollout workers to start: one per unit."""
        ...

    def asleep_at_start(self) -> list[int]:
        """Units whose workers sleep from the start (they serve the learner)."""
        ...

    def open_units(self) -> list[int]:
        """Units whose workers take new episodes now."""
        ...

    def tick(self, loop: LoopState) -> None:
        """Top of every loop iteration: switches move on, the policy may ask for more."""
        ...

    def may_step(self) -> bool:
        """Whether a learner step may start now."""
        ...

    def dropped(self, ids: list[str], *, lagging: bool) -> None:
        """Trajectories dropped stale at batch time; `lagging`: a full batch was waiting."""
        ...

    def first_batch(self, now: float) -> None:
        """The learner got its first batch."""
        ...

    def signals(self, loop: LoopState) -> None:
        """After dispatching and stepping: the state until the next event."""
        ...

    def finished(self, trajectories: list, version: int) -> None:
        """Episodes ended without error while the learner was at `version`."""
        ...

    def stepped(self, record: dict, batch, seconds: float) -> None:
        """A learner step ended after `seconds`; `record` (its metrics) may gain figures."""
        ...

    def pending(self) -> list:
        """References the loop waits on with its episodes (a resize in flight)."""
        ...

    def restore(self) -> None:
        """After the last step, with no step in flight: every unit back to its home pool."""
        ...

    def write(self) -> None:
        """At shutdown: the run's record of the sharing (`multiplex.json`)."""
        ...


class StaticSplit:
    """`multiplex: static`: the configured split for the whole run; nothing to do."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def unit_count(self) -> int:
        return self.workers

    def asleep_at_start(self) -> list[int]:
        return []

    def open_units(self) -> list[int]:
        return list(range(self.workers))

    def may_step(self) -> bool:
        return True

    def pending(self) -> list:
        return []

    def tick(self, loop: LoopState) -> None: ...

    def signals(self, loop: LoopState) -> None: ...

    def dropped(self, ids: list[str], *, lagging: bool) -> None: ...

    def first_batch(self, now: float) -> None: ...

    def finished(self, trajectories: list, version: int) -> None: ...

    def stepped(self, record: dict, batch, seconds: float) -> None: ...

    def restore(self) -> None: ...

    def write(self) -> None: ...
