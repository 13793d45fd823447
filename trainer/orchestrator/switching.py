"""Moving a resource unit between the rollout pool and the learner, and timing it.

BiDiRL (arXiv 2607.09207) lends a unit of the waiting pool to the bottleneck stage through
a hot-switch runtime: the rollout side sleeps its vLLM engine (weights and KV cache freed),
the training side takes the unit as one more FSDP rank; the way back shrinks the learner
and wakes the engine with the newest weights. These are the two directions over this
repository's primitives (`RolloutWorker.sleep` / `wake`, `LearnerGroup.resize`), and
`measure_switch`, which times both on real actors for `bench.perf.multiplex` and the planner's
time model. On a GPU the same calls sleep vLLM (the worker's engine built with
`sleep_mode=True`) and reshard FSDP2 over NCCL; here they free the hf engine and reshard
over gloo.

The callers' contract: a unit is lent only while its worker is idle (no episode in flight:
`sleep` refuses otherwise), and the learner is resized only between two steps.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from trainer.config import TrainConfig
from trainer.inference.trajectory import Trajectory

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SwitchTiming:
    """One round trip of a unit, in seconds of wall time seen by the driver (Ray calls
    included), each part as one blocking call."""

    sleep_s: float
    """The rollout worker frees its engine (weights, caches, older versions)."""
    grow_s: float
    """The learner moves to one more rank (the lent unit)."""
    shrink_s: float
    """The learner moves back to its ranks before."""
    wake_s: float
    """The worker loads the learner's newest weights and takes jobs again."""

    @property
    def rollout_to_learner_s(self) -> float:
        return self.sleep_s + self.grow_s

    @property
    def learner_to_rollout_s(self) -> float:
        return self.shrink_s + self.wake_s

    def as_dict(self) -> dict[str, float]:
        """Flat figures for a benchmark's JSON."""
        return {
            "rollout_to_learner_s": round(self.rollout_to_learner_s, 4),
            "learner_to_rollout_s": round(self.learner_to_rollout_s, 4),
            "sleep_s": round(self.sleep_s, 4),
            "grow_s": round(self.grow_s, 4),
            "shrink_s": round(self.shrink_s, 4),
            "wake_s": round(self.wake_s, 4),
        }


def lend_to_learner(worker, learner, ranks: int) -> tuple[float, float]:
    """Rollout -> learner: put the idle `worker` (a Ray actor handle) to sleep, then resize
    `learner` (a `LearnerGroup`) to `ranks`. Returns (sleep seconds, resize seconds)."""
    import ray

    started = time.monotonic()
    ray.get(worker.sleep.remote())
    slept = time.monotonic()
    learner.resize(ranks)
    return slept - started, time.monotonic() - slept


def return_to_rollout(worker, learner, ranks: int, *, with_critic: bool = False) -> tuple[float, float]:
    """Learner -> rollout: resize `learner` back to `ranks`, then wake `worker` with the
    learner's current weights (version and state, by reference through Ray's object store).
    Returns (resize seconds, wake seconds)."""
    import ray

    from trainer.learner import Learner

    started = time.monotonic()
    learner.resize(ranks)
    resized = time.monotonic()
    version = learner.call(Learner.version)
    ray.get(worker.wake.remote(version, learner.call_ref(Learner.weights, with_critic)))
    return resized - started, time.monotonic() - resized


def measure_switch(
    config: TrainConfig,
    *,
    learner_ranks: int = 1,
    repeats: int = 1,
    trajectories: list[Trajectory] | None = None,
    in_place: bool = True,
) -> list[SwitchTiming]:
    """Time `repeats` round trips of one unit between a rollout worker and a learner of
    `learner_ranks` ranks (it grows to `learner_ranks + 1` and back), on real actors for
    `config`'s model and engine. With `trajectories`, the learner takes a step on them
    before each round trip, so its optimizer states are full-sized, as in a run. `in_place`:
    the learner is a pool of `learner_ranks + 1` processes that stay (`LearnerGroup(pool=...)`,
    what a multiplexed run uses); False: every resize starts its ranks' processes cold.
    Needs Ray started (`trainer.orchestrator.loop.start_ray`); everything it starts ends
    before it returns."""
    import ray

    from trainer.build import engine_model
    from trainer.learner import Learner
    from trainer.orchestrator.learner_group import LearnerGroup, timed_step
    from trainer.orchestrator.worker import RolloutWorker

    learner = LearnerGroup(config, ranks=learner_ranks, pool=learner_ranks + 1 if in_place else 0)
    actor = ray.remote(num_cpus=0, max_concurrency=4)(RolloutWorker)
    worker = actor.remote(
        index=0,
        model=engine_model(config),
        engine=config.model.engine,
        seed=config.run.seed,
        tasks=[],
        sandbox_backend=config.tasks.sandbox_backend,
        settings=config.rollout,
        sleep_mode=True,
    )
    timings = []
    try:
        ray.get(worker.set_weights.remote(learner.call(Learner.version), learner.call_ref(Learner.weights, False)))
        for _ in range(repeats):
            if trajectories:
                ray.get(learner.call_ref(timed_step, trajectories))
            sleep_s, grow_s = lend_to_learner(worker, learner, learner_ranks + 1)
            shrink_s, wake_s = return_to_rollout(worker, learner, learner_ranks)
            timing = SwitchTiming(sleep_s=sleep_s, grow_s=grow_s, shrink_s=shrink_s, wake_s=wake_s)
            logger.info("switch round trip: %s", timing.as_dict())
            timings.append(timing)
    finally:
        ray.kill(worker)
        learner.kill()
    return timings
