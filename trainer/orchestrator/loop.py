"""The orchestrator: rollout workers and the learner group as Ray actors, and the loop that
feeds one from the other.

The driver owns no model. It asks the `Schedule` which episode jobs to start, sends them to
rollout workers with a free slot (`RolloutWorker.run`), and waits (`ray.wait`) on whatever
finishes first: an episode (its result goes back to the schedule) or the learner's step
(its new weights are published to every worker by object reference, and the schedule may
admit more work). The learner runs while episodes keep running; nothing waits for the
slowest episode unless the synchronous baseline asks for it.

Faults are handled here: an episode past `episode_timeout_s` means its worker hung; a
`RayActorError` means it died. Either way the worker is killed, replaced, sandboxes its
process left are reaped, and its episodes go back to the queue (same seed) until
`max_attempts`, then are dropped and counted. Sandbox and grading errors come back as
error results and are retried the same way. None is ever scored 0.

Checkpoints (every `checkpoint_every` learner steps) hold the learner (weights, optimizers)
and the schedule: jobs not finished, groups half collected (and, under VIGOR, each batch's
allocator between its rounds), trajectories finished but not consumed, what was consumed,
the task picker's RNG and curriculum. A gated (sync or
deterministic) run first lets episodes pinned to older weights finish, so a resumed run
consumes the same trajectories and reaches the same parameters bit for bit.

Device sharing (BiDiRL, `orchestrator.multiplex`, docs/multiplex.md) plugs in at one seam,
`self.sharing` (`trainer.orchestrator.multiplex.sharing.DeviceSharing`): the loop tells it
what happens and asks it which workers take episodes and whether a step may start; it sees
the loop as `LoopState` snapshots and acts through `_Devices` (a unit's worker sleeps, wakes
or restarts; the learner resizes). Under `multiplex: static` it does nothing.

Over 450 lines on purpose: the loop, the workers' lifecycle (start, restart, placement) and
the evaluations' `play` share one table of running episodes and its fault handling.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainer.config import OrchestratorConfig, RolloutConfig
from trainer.orchestrator.learner_group import LearnerGroup, timed_step
from trainer.orchestrator.multiplex.runtime import make_sharing
from trainer.orchestrator.multiplex.sharing import LoopState
from trainer.orchestrator.schedule import Batch, EpisodeJob, EpisodeResult, Schedule
from trainer.orchestrator.worker import RolloutWorker

logger = logging.getLogger(__name__)
WORKER_CLOSE_S = 10.0
"""How long shutdown waits for the workers to close their warm pools before killing them."""


@dataclass
class _Running:
    job: EpisodeJob
    worker: int
    deadline: float


@dataclass
class Counters:
    worker_restarts: int = 0
    hung_episodes: int = 0
    learner_busy_seconds: float = 0.0
    first_step_started: float | None = None
    """When the learner first had a batch: idle time is counted from then (the wait for
    the very first episodes is start-up, not a scheduling loss)."""
    last_step_ended: float = 0.0


@dataclass(frozen=True)
class WorkerSpec:
    """What every rollout worker (and every restarted one) is started with."""

    model: str
    """The model (name or folder) its engine serves (SAPO on vLLM: an export with the value rows)."""
    engine: str
    seed: int
    sandbox_backend: str
    rollout: RolloutConfig
    gpus: float = 0.0


class Orchestrator:
    def __init__(
        self,
        config: OrchestratorConfig,
        workers: WorkerSpec,
        schedule: Schedule,
        learner: LearnerGroup,
        tasks: list,
        *,
        sandbox_factory=None,
        on_step: Callable[[dict, Batch], None] | None = None,
        save: Callable[[int], None] | None = None,
        multiplex_path: Path | None = None,
    ) -> None:
        """`on_step(record, batch)` receives each learner step's metrics; `save(step)` is
        called when a checkpoint is due (after a gated run drained older pins).
        `multiplex_path`: where a multiplexed run writes its profile, time model, plan and
        switches (`multiplex.json`)."""
        import ray

        self.ray = ray
        self.config = config
        self.spec = workers
        self.schedule = schedule
        self.learner = learner
        self.on_step = on_step
        self.save = save
        self.sandbox_factory = sandbox_factory
        self.tasks_ref = ray.put(tasks)  # one copy in the object store for every worker (and restart)
        self.with_critic = workers.rollout.kind == "tree" and workers.rollout.tree.scorer == "value"
        self.steps = 0
        self.checkpoint_every = 0
        self.workers: list = [None] * config.rollout_workers
        self.worker_nodes: dict[int, object] = {}
        """Each worker's Ray node id (or the pending reply that will name it)."""
        self.running: dict = {}  # episode ref -> _Running
        self.learner_ref = None
        self.learner_batch: Batch | None = None
        self.learner_started = 0.0
        self.weights_ref = None
        self.counters = Counters()
        self.version = 0
        self.held_slots = 0
        """Free slots the last dispatch left empty (the schedule admitted nothing more)."""
        self.sharing = make_sharing(
            config,
            _Devices(self),
            learner_ranks=len(learner.ranks),
            batch_trajectories=schedule.batch_trajectories,
            max_staleness=schedule.max_staleness,
            path=multiplex_path,
        )
        self.workers = [None] * self.sharing.unit_count()
        for index in range(len(self.workers)):
            self._start_worker(index)
        self.ray.get([self.workers[i].sleep.remote() for i in self.sharing.asleep_at_start()])

    # -- workers ------------------------------------------------------------------------------
    def _start_worker(self, index: int, restart: bool = False) -> None:
        config, spec = self.config, self.spec
        slots = config.episodes_per_worker
        actor = self.ray.remote(
            num_cpus=0,
            num_gpus=spec.gpus,
            max_concurrency=slots + 2,
            scheduling_strategy=self._worker_placement(index, restart),
        )(RolloutWorker)
        self.workers[index] = actor.remote(
            index=index,
            model=spec.model,
            engine=spec.engine,
            seed=spec.seed,
            tasks=self.tasks_ref,
            sandbox_backend=spec.sandbox_backend,
            settings=spec.rollout,
            keep_versions=config.max_staleness + 2,
            sandbox_factory=self.sandbox_factory,
            sleep_mode=config.multiplex != "static",  # a unit's worker may be put to sleep
        )
        if self.weights_ref is not None:
            self.workers[index].set_weights.remote(self.version, self.weights_ref)
        self.worker_nodes[index] = self.workers[index].node.remote()

    def _worker_placement(self, index: int, restart: bool = False):
        """Where worker `index` goes: on a cluster, the alive nodes with the GPUs it needs, in
        turn, so the workers and their sandboxes spread over every node instead of packing the
        first. Pinned at the
        first start (a soft affinity fell back to the driver's node on busy machines, packing
        every worker there); soft for a restart, which must land on any alive node (the node
        it names may be the one that just died)."""
        gpus = self.spec.gpus  # only nodes that can hold the worker (a CPU head cannot hold a vLLM one)
        nodes = sorted(
            node["NodeID"]
            for node in self.ray.nodes()
            if node["Alive"] and node.get("Resources", {}).get("GPU", 0) >= gpus
        )
        if len(nodes) < 2:
            return "DEFAULT"
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node = nodes[index % len(nodes)]
        logger.info("rollout worker %d: node %s (%d alive)", index, node[:8], len(nodes))
        return NodeAffinitySchedulingStrategy(node_id=node, soft=restart)

    def node_count(self) -> int:
        """Distinct Ray nodes the rollout workers run on (workers still starting not counted)."""
        for index, node in list(self.worker_nodes.items()):
            if isinstance(node, self.ray.ObjectRef):
                ready, _ = self.ray.wait([node], timeout=0)
                if ready:
                    try:
                        self.worker_nodes[index] = self.ray.get(node)
                    except self.ray.exceptions.RayError:  # died starting: its restart reports anew
                        self.worker_nodes[index] = None
        return len({n for n in self.worker_nodes.values() if isinstance(n, str)})

    def _restart_worker(self, index: int, *, culprit: int | None = None) -> None:
        """Kill worker `index`, start a new one, and put its episodes back in the queue. The
        culprit (the hung episode; every episode of a crashed worker) uses up an attempt."""
        self.ray.kill(self.workers[index], no_restart=True)
        self.counters.worker_restarts += 1
        for ref, running in list(self.running.items()):
            if running.worker == index:
                del self.running[ref]
                self.schedule.fail(running.job.job_id, blame=culprit is None or running.job.job_id == culprit)
        try:  # sandboxes whose owner died
            from sandboxes.reaper import reap

            reap()
        except Exception as exc:  # noqa: BLE001 - reaping is best effort; the run goes on
            logger.warning("reaping after a worker restart failed: %s", exc)
        self._start_worker(index, restart=True)

    def publish(self, version: int, *, wait: bool = False) -> None:
        """Send the learner's current weights to every worker (by reference: one copy in
        Ray's object store, fetched by each worker). `wait` blocks until every worker has
        them (and so has started); otherwise a hung worker must not stall the loop, and
        episodes wait for their weights instead."""
        from trainer.learner import Learner

        self.version = version
        self.weights_ref = self.learner.call_ref(Learner.weights, self.with_critic)
        landed = [worker.set_weights.remote(version, self.weights_ref) for worker in self.workers]
        if wait:
            self.ray.get(landed)

    # -- the loop -----------------------------------------------------------------------------
    def _episodes(self) -> dict[int, int]:
        """Episodes running on each worker."""
        used = dict.fromkeys(range(len(self.workers)), 0)
        for running in self.running.values():
            used[running.worker] += 1
        return used

    def _free_slots(self) -> dict[int, int]:
        """Free episode slots of the workers that take new episodes (shared devices: those of
        units serving rollout and not draining)."""
        used = self._episodes()
        return {i: self.config.episodes_per_worker - used[i] for i in self.sharing.open_units()}

    def _state(self) -> LoopState:
        ready = sum(len(trajectories) for _, trajectories, _ in self.schedule.ready)
        return LoopState(len(self.running), ready, self.learner_ref is not None, self.held_slots)

    def _submit(self, job: EpisodeJob, free: dict[int, int]):
        """Start `job` on the worker with the most free slots (the lowest index on ties)."""
        if not free:
            raise RuntimeError("no rollout worker takes episodes (every unit serves the learner)")
        index = max(free, key=lambda i: (free[i], -i))
        free[index] -= 1
        return index, self.workers[index].run.remote(job)

    def _dispatch(self) -> None:
        free = self._free_slots()
        for job in self.schedule.next_jobs(self.version, sum(free.values())):
            index, ref = self._submit(job, free)
            self.running[ref] = _Running(job, index, time.monotonic() + self.config.episode_timeout_s)
        self.held_slots = sum(free.values())  # left free: the schedule admitted nothing more

    def _maybe_step(self) -> None:
        if self.learner_ref is not None or not self.sharing.may_step():
            return
        dropped = len(self.schedule.dropped)
        batch = self.schedule.take_batch(self.version)
        self.sharing.dropped(self.schedule.dropped[dropped:], lagging=batch is not None)
        if batch is None:
            return
        if not batch.trajectories:  # every trajectory was dropped (stale or failed)
            self.schedule.learner_done()
            if self.on_step:
                self.on_step({"episodes": 0, "version": self.version}, batch)
            return
        self.learner_batch = batch
        self.learner_started = time.monotonic()
        if self.counters.first_step_started is None:
            self.counters.first_step_started = self.learner_started
            self.sharing.first_batch(self.learner_started)
        self.learner_ref = self.learner.call_ref(timed_step, batch.trajectories)

    def _on_result(self, ref) -> None:
        running = self.running.pop(ref)
        try:
            result: EpisodeResult = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as exc:
            self.running[ref] = running  # _restart_worker requeues it with the others
            logger.warning("worker %d died (%s); restarting it", running.worker, type(exc).__name__)
            self._restart_worker(running.worker)
            return
        outcome = self.schedule.finish(result)
        if not result.error:
            self.sharing.finished(result.trajectories, self.version)
        else:
            logger.warning("episode %d (%s): %s -> %s", running.job.job_id, running.job.task_id, result.error, outcome)

    def _on_learner(self) -> None:
        result = self.ray.get(self.learner_ref)
        record = result.metrics
        batch = self.learner_batch
        self.learner_ref, self.learner_batch = None, None
        self.schedule.picker.observe(batch.trajectories, result.advantages)
        self.publish(int(record["version"]))
        self.counters.last_step_ended = time.monotonic()
        self.counters.learner_busy_seconds += self.counters.last_step_ended - self.learner_started
        self.schedule.learner_done()
        self.sharing.stepped(record, batch, self.counters.last_step_ended - self.learner_started)
        if self.on_step:
            self.on_step(record, batch)
        step = self.schedule.steps_done
        if self.save and (step == self.steps or (self.checkpoint_every and step % self.checkpoint_every == 0)):
            self._drain_older_pins()
            self.save(step)

    def finish_step(self, timeout: float) -> bool:
        """Let the learner step in flight end (its metrics are reported and its weights
        published, as in the loop) if it does within `timeout` seconds; True when no step is
        in flight any more. For a run that is stopping (Ctrl-C) and wants a checkpoint."""
        if self.learner_ref is None:
            return True
        if not self.ray.wait([self.learner_ref], timeout=timeout)[0]:
            return False
        self._on_learner()
        return True

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for running in list(self.running.values()):
            if running.deadline < now and running in self.running.values():
                self.counters.hung_episodes += 1
                logger.warning(
                    "episode %d (%s) on worker %d passed orchestrator.episode_timeout_s=%s: restarting the worker",
                    running.job.job_id,
                    running.job.task_id,
                    running.worker,
                    self.config.episode_timeout_s,
                )
                self._restart_worker(running.worker, culprit=running.job.job_id)

    def _wait(self) -> None:
        refs = list(self.running)
        if self.learner_ref is not None:
            refs.append(self.learner_ref)
        refs += self.sharing.pending()  # a learner resize in flight: its end completes switches
        if not refs:
            raise RuntimeError("the orchestrator has nothing to wait for: no episode can be started")
        deadline = min((r.deadline for r in self.running.values()), default=time.monotonic() + 60)
        timeout = max(0.0, min(60.0, deadline - time.monotonic()))
        done, _ = self.ray.wait(refs, num_returns=1, timeout=timeout)
        for ref in done:
            if ref == self.learner_ref:
                self._on_learner()
            elif ref in self.running:
                self._on_result(ref)  # else a resize's: the next tick completes it
        self._check_deadlines()

    def _drain_older_pins(self) -> None:
        """Before a gated run's checkpoint: let every episode pinned to older weights finish
        (a resumed run no longer has those weights to replay them with)."""
        while any(job.version is not None and job.version < self.version for job in self.schedule.jobs.values()):
            self._dispatch()
            self._wait()

    def run(self, steps: int, checkpoint_every: int = 0) -> None:
        """Run until the schedule has completed `steps` learner steps, calling `save` after
        every `checkpoint_every`-th step (0: none) and after the last."""
        self.steps, self.checkpoint_every = steps, checkpoint_every
        while self.schedule.steps_done < steps:
            self.sharing.tick(self._state())
            self._dispatch()
            self._maybe_step()
            self.sharing.signals(self._state())
            if self.schedule.steps_done >= steps:
                break
            self._wait()
        if self.learner_ref is None:
            self.sharing.restore()

    def play(self, jobs: list[EpisodeJob], progress: str | None = None) -> list:
        """Run `jobs` outside the schedule (the evaluations, the batch value pre-training
        learns from) and return their trajectories. With a `progress` label, a bar on stderr
        counts the finished episodes (log lines go above it while it is open); it is closed
        before this returns.

        Episodes the loop left running (`run` returns once its last step is done, with the
        next batch's episodes still playing) keep their slots until they end; they are
        recorded as the loop would (`_on_result`) and their slots go to `jobs` (a DAPO run's
        dynamic sampling leaves every slot busy)."""
        from contextlib import nullcontext

        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        pending: dict = {}  # ref -> (job, worker index)
        results = []
        queue = list(jobs)
        resolved = 0
        with (
            tqdm(total=len(jobs), desc=progress, unit="episode", disable=progress is None) as bar,
            logging_redirect_tqdm() if progress else nullcontext(),
        ):
            while queue or pending:
                free = self._free_slots()  # the loop's episodes still running hold theirs
                for _, index in pending.values():
                    free[index] = free.get(index, 0) - 1
                while queue and any(v > 0 for v in free.values()):
                    job = queue.pop(0)
                    index, ref = self._submit(job, free)
                    pending[ref] = (job, index)
                waiting = [*pending, *self.running]
                if not waiting:
                    raise RuntimeError("no rollout worker takes episodes (every unit serves the learner)")
                done, _ = self.ray.wait(waiting, num_returns=1, timeout=self.config.episode_timeout_s)
                if not done:
                    raise RuntimeError(
                        f"no episode finished within orchestrator.episode_timeout_s={self.config.episode_timeout_s}s "
                        f"({len(pending)} of these and {len(self.running)} of the run's still running)"
                    )
                for ref in done:
                    if ref in self.running:
                        self._on_result(ref)  # the run's: recorded, its slot freed
                        continue
                    job, index = pending.pop(ref)
                    result = self.ray.get(ref)
                    if result.error:
                        logger.warning("episode %d (%s) left out: %s", job.job_id, job.task_id, result.error)
                    results.extend(result.trajectories)
                    resolved += sum(bool(t.resolved) for t in result.trajectories)
                    bar.set_postfix(resolved=resolved, refresh=False)  # drawn by the update
                    bar.update(1)
        return results

    def learner_idle_fraction(self) -> float:
        """Share of the time since the first batch in which the learner had nothing to do
        (waiting for trajectories); stepping and publishing weights count as busy."""
        if self.counters.first_step_started is None:
            return 0.0
        wall = self.counters.last_step_ended - self.counters.first_step_started
        return max(0.0, 1.0 - self.counters.learner_busy_seconds / wall) if wall > 0 else 0.0

    def shutdown(self) -> None:
        self.sharing.write()
        # Workers close their warm pools first (a few seconds at most), then are killed.
        closing = [worker.close.remote() for worker in self.workers if worker is not None]
        if closing:
            try:
                self.ray.wait(closing, num_returns=len(closing), timeout=WORKER_CLOSE_S)
            except Exception as exc:  # noqa: BLE001 - best effort: a dead worker's sandboxes are reaped
                logger.warning("closing the rollout workers' sandbox pools failed: %s", exc)
        for worker in self.workers:
            if worker is not None:
                self.ray.kill(worker, no_restart=True)
        self.learner.kill()


class RayStartError(RuntimeError):
    """Ray could not be started or joined: the machine or the cluster, not the run; said in
    one line by `trainer.train`."""


def start_ray(address: str | None = None, *, workers: int = 1) -> bool:
    """Join the Ray cluster at `address`, or start a local one; returns whether this call
    started Ray (and so should shut it down). Actors get this checkout on their path and
    the sandbox settings (AGENTIC_RL_*, SANDBOX_*) of this process. A local Ray runs its
    actors at this process's niceness, not Ray's default of 15 (which keeps a shared node's
    raylet responsive): the learner and rollout workers are the run itself, so `nice make
    train-swe` nices all of it and another job at niceness 0 no longer starves it (two busy
    processes per core made a training step of ~2 s take 131-208 s, 2026-12-07). A start or join that
    fails raises `RayStartError` naming Ray's reason (at load 212 on 2 cores a local node
    timed out during start-up, stress round 4 of 8, 2026-12-06)."""
    import ray

    if ray.is_initialized():
        return False
    env = {k: v for k, v in os.environ.items() if k.startswith(("AGENTIC_RL_", "SANDBOX_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), os.environ.get("PYTHONPATH", "")) if p)
    options: dict = {"runtime_env": {"env_vars": env}, "logging_level": "WARNING"}
    try:
        if address:
            ray.init(address=address, **options)
        else:
            # A local cluster on this machine needs no token authentication (Ray warns of it at
            # every start otherwise); a RAY_AUTH_MODE set by the user is left as it is.
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            cpus = max(os.cpu_count() or 1, workers)  # logical slots; the episodes mostly wait on sandboxes
            # address="local": always a new Ray of this run's own, never a cluster that happens to
            # run on this machine (ray.init() with no address would join the newest one).
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, object_store_memory=1 << 30,
                     _system_config={"worker_niceness": os.nice(0)}, **options)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - whatever Ray raises, it did not start: one line
        try:
            ray.shutdown()  # what did start (a GCS, a raylet) goes with it
        except Exception:  # noqa: BLE001 - nothing started to shut down
            logger.debug("ray.shutdown after a failed start", exc_info=True)
        cause = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        if address:
            raise RayStartError(
                f"could not join the Ray cluster at {address} ({cause}); is it running (`ray status --address "
                f"{address}`)? or leave placement.ray_address unset for a local Ray"
            ) from exc
        raise RayStartError(
            f"could not start a local Ray ({cause}); a machine too busy to start it in time, or a temp folder it "
            "cannot write (RAY_TMPDIR, TMPDIR): run the same command again"
        ) from exc
    return True


class _Devices:
    """The loop's hands as device sharing may use them (`multiplex.sharing.Devices`): a
    unit's worker sleeps, wakes with the newest weights or restarts; the learner resizes."""

    def __init__(self, loop: Orchestrator) -> None:
        self._loop = loop
        self.ray = loop.ray

    def episodes(self) -> dict[int, int]:
        return self._loop._episodes()

    def sleep(self, unit: int):
        return self._loop.workers[unit].sleep.remote()

    def wake(self, unit: int):
        return self._loop.workers[unit].wake.remote(self._loop.version, self._loop.weights_ref)

    def restart(self, unit: int) -> None:
        self._loop._restart_worker(unit)

    def ranks(self) -> int:
        return len(self._loop.learner.ranks)

    def resize(self, ranks: int) -> list:
        return self._loop.learner.resize_refs(ranks)
