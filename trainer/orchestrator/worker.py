"""A rollout worker: plays episodes of the tasks with its own inference engine.

The orchestrator runs each worker as a Ray actor with several episode slots (threads):
episodes spend most of their time in sandboxes (tests, builds), so one engine serves many
of them. Turns that arrive while the engine is busy are batched (`TurnBatcher`,
`rollout.batch_turns`): the next engine call decodes all of them together, each from its
own cached prefix and with its own seed, so an episode's tokens do not depend on which
others shared its batch. Before every turn an episode moves the engine to
the newest published weights, so an episode in flight keeps going across a weight update
and each of its tokens records the version that produced it (partial rollouts). A job
pinned to a version (gated mode) generates with exactly that version instead; the worker
keeps the last few versions for it.

Infrastructure failures (the sandbox died, grading failed) come back as an error result
for the orchestrator to retry; they are never scored 0.

Hot switch (BiDiRL, arXiv 2607.09207): an idle worker can be put to sleep (`sleep`) so its
resource unit serves a learner rank, and woken (`wake`) with the current weights when the
unit comes back. Sleeping frees the engine's weights and caches (vLLM's sleep mode on a
GPU, `HFEngine.sleep` here), the engines kept for older pinned versions and the critic copy.
A worker sleeps only when no episode runs on it: BiDiRL's scheduler lends idle units, and an
episode cut in half would be lost work (a drain is the scheduler's to wait for: it stops
sending jobs and waits for their results). A job that reaches a sleeping worker anyway is
turned away unstarted (`EpisodeResult.refused`), and the schedule requeues it without using
an attempt: it is neither lost nor played twice.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections import OrderedDict

from trainer.config import RolloutConfig
from trainer.orchestrator.schedule import EpisodeJob, EpisodeResult
from trainer.orchestrator.turn_batching import TurnBatcher

logger = logging.getLogger(__name__)


class WorkerBusyError(RuntimeError):
    """`sleep` was asked of a worker with episodes in flight."""


class RolloutWorker:
    def __init__(
        self,
        *,
        index: int,
        model: str,
        engine: str,
        seed: int,
        tasks: list,
        sandbox_backend: str,
        settings: RolloutConfig,
        keep_versions: int = 2,
        sandbox_factory=None,
        weights_timeout_s: float = 600.0,
        sleep_mode: bool = False,
    ) -> None:
        """`sleep_mode`: build an engine that can `sleep` (vLLM needs it at construction,
        `enable_sleep_mode`; the hf engine always can)."""
        from trainer.build import sandbox_factory as make_sandbox_factory
        from trainer.inference.engines import make_engine
        from trainer.inference.models import load_tokenizer
        from trainer.inference.rollout import ChatFormat

        self.index = index
        self.settings = settings
        self.tasks = {task.id: task for task in tasks}  # loaded (and environments built) by the driver
        self.chat = ChatFormat(load_tokenizer(model))
        self.sandbox_factory = sandbox_factory or make_sandbox_factory(sandbox_backend)
        self.grade_memo = None
        if settings.grading_memo:  # a diff graded once per worker (agent_env.grading.memo)
            from agent_env import GradeMemo

            self.grade_memo = GradeMemo()
        self.pool = None
        if settings.sandbox_pool > 0:  # warm starts: sandboxes started ahead, per task (sandboxes.pool)
            from sandboxes import SandboxPool

            # Two specs per task: the agent's sandbox and grading's (which keeps more output).
            specs = 2 * settings.sandbox_pool_tasks
            self.pool = SandboxPool(self.sandbox_factory, settings.sandbox_pool, max_specs=specs)
            self.sandbox_factory = self.pool
        self.engine = make_engine(engine, model, seed=seed, sleep_mode=sleep_mode)
        if not settings.prefix_cache and hasattr(self.engine, "prefix_cache_size"):
            self.engine.prefix_cache_size = 0  # bitwise-reproducible runs: no cache-dependent numerics
        self.engine.version = -1  # nothing published yet: the first weights always load
        self.keep_versions = keep_versions
        self._weights: OrderedDict[int, dict] = OrderedDict()
        self._pinned: OrderedDict[int, object] = OrderedDict()
        self._critic = None
        self._critic_version = -1
        self._lock = threading.RLock()
        self._arrived = threading.Condition(self._lock)
        self.batcher = (
            TurnBatcher(self._lock, self._engine_for, lambda: next(reversed(self._weights), None))
            if settings.batch_turns and getattr(self.engine, "batches_rows", False)
            else None
        )
        """Batches concurrent episodes' turns (None: one turn at a time under the lock; off in
        the resolved config of runs that must be bitwise reproducible, and for an engine
        without per-row seeds, such as a test's scripted one)."""
        self.weights_timeout_s = weights_timeout_s
        self._active = 0
        """Episodes in `run` now (read and changed under the lock)."""
        self._asleep = False

    # -- control --------------------------------------------------------------------------
    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        """The Ray node this worker runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        """Close the warm pool's idle sandboxes (the orchestrator calls it before it kills
        the worker; a worker killed without it leaves what the reaper removes)."""
        if self.pool is not None:
            self.pool.close()

    def set_weights(self, version: int, weights: dict) -> int:
        """Store published weights ({"policy": state, "critic": state?}); episodes pick them
        up at their next turn. Returns the version stored. A sleeping worker keeps only the
        newest version it was sent (for `wake`): nothing can play an older pinned one on it."""
        with self._lock:
            self._weights[version] = weights
            while len(self._weights) > (1 if self._asleep else self.keep_versions):
                self._weights.popitem(last=False)
            self._arrived.notify_all()
        return version

    # -- hot switch (BiDiRL) ----------------------------------------------------------------
    def is_asleep(self) -> bool:
        """Whether the worker sleeps (a method: Ray actor handles reach no properties)."""
        return self._asleep

    def sleep(self) -> float:
        """Free the engine (weights, prefix cache, decode state), the engines kept for older
        pinned versions, the critic copy and the stored weights, so this worker's unit can
        serve a learner rank; returns the seconds it took (0.0 when already asleep).
        Precondition: no episode in flight here (`WorkerBusyError` otherwise); jobs sent
        while asleep are refused (`EpisodeResult.refused`) until `wake`."""
        started = time.monotonic()
        with self._lock:
            if self._asleep:
                return 0.0
            if self._active:
                raise WorkerBusyError(
                    f"worker {self.index} has {self._active} episode(s) in flight: sleep() only an idle worker "
                    "(stop sending it jobs and wait for their results first)"
                )
            if not callable(getattr(self.engine, "sleep", None)):
                raise RuntimeError(
                    f"worker {self.index}: the {type(self.engine).__name__} cannot sleep; use engine=hf or vllm"
                )
            self._asleep = True
            if self.batcher is not None:
                self.batcher.release()
            freed = self.engine.sleep()
            self._pinned.clear()
            self._critic, self._critic_version = None, -1
            self._weights.clear()  # `wake` brings the weights to resume with
            gc.collect()  # module graphs hold reference cycles: free their tensors now
        seconds = time.monotonic() - started
        logger.info("worker %d asleep in %.3fs (engine freed %s bytes)", self.index, seconds, freed)
        return seconds

    def wake(self, version: int, weights: dict) -> float:
        """Load `weights` ({"policy": state, "critic": state?}) published as `version` into
        the engine and take jobs again; a newer version sent while asleep (`set_weights`)
        wins. Returns the seconds it took. Precondition: `sleep` was called."""
        started = time.monotonic()
        with self._lock:
            if not self._asleep:
                raise RuntimeError(f"worker {self.index} is awake: wake() only after sleep()")
            self._weights[version] = weights
            self._weights = OrderedDict(sorted(self._weights.items()))
            newest = next(reversed(self._weights))
            self.engine.wake(self._weights[newest]["policy"], newest)
            while len(self._weights) > self.keep_versions:
                self._weights.popitem(last=False)
            self._asleep = False
            self._arrived.notify_all()
        seconds = time.monotonic() - started
        logger.info("worker %d awake at version %d in %.3fs", self.index, newest, seconds)
        return seconds

    def _engine_for(self, pinned: int | None):
        """The live engine moved to the newest weights (or to the pinned version when that
        is the newest), else a private engine at the pinned version. Called under the lock."""
        # Weights are sent without waiting for them to land: the first turn may beat them.
        arrived = self._arrived.wait_for(
            lambda: self._weights and (pinned is None or max(self._weights) >= pinned), self.weights_timeout_s
        )
        if not arrived:
            raise RuntimeError(f"worker {self.index}: weights of version {pinned} never arrived")
        newest = next(reversed(self._weights))
        if pinned is None or pinned == newest:
            # Not under rows still decoding (a generation keeps one version): they finish first.
            decoding = self.batcher is not None and self.batcher.decoding()
            if newest > self.engine.version and not decoding:
                self.engine.load_weights(self._weights[newest]["policy"], newest)
            return self.engine
        if pinned not in self._pinned:
            if pinned not in self._weights:
                raise RuntimeError(f"worker {self.index}: weights of version {pinned} are no longer here")
            if not hasattr(self.engine, "model"):
                raise RuntimeError(f"worker {self.index}: only the hf engine keeps older versions (max_staleness)")
            import copy

            from trainer.inference.engines.hf import HFEngine

            engine = HFEngine(copy.deepcopy(self.engine.model), pad_id=self.engine.pad_id, prefix_cache_size=0)
            engine.load_weights(self._weights[pinned]["policy"], pinned)
            self._pinned[pinned] = engine
            while len(self._pinned) > self.keep_versions:
                self._pinned.popitem(last=False)
        return self._pinned[pinned]

    # -- episodes -------------------------------------------------------------------------
    def run(self, job: EpisodeJob) -> EpisodeResult:
        """Play `job`; its trajectories, or an error result the orchestrator retries (turned
        away unstarted, `refused`, when this worker sleeps)."""
        with self._lock:
            if self._asleep:
                return EpisodeResult(
                    job.job_id,
                    error=f"worker {self.index} is asleep (lent to the learner): the job goes back to the queue",
                    worker=self.index,
                    refused=True,
                )
            self._active += 1
        try:
            return self._play(job)
        finally:
            with self._lock:
                self._active -= 1

    def _play(self, job: EpisodeJob) -> EpisodeResult:
        from agent_env import GradingError, ToolEnv
        from sandboxes import SandboxError
        from trainer.inference.rollout import run_episode, run_tree, training_reward

        started = time.monotonic()
        task = self.tasks.get(job.task_id)
        if task is None:
            return EpisodeResult(job.job_id, error=f"worker {self.index}: unknown task {job.task_id!r}")
        s = self.settings
        env = ToolEnv(
            task,
            sandbox_factory=self.sandbox_factory,
            max_turns=min(s.max_turns, task.limits.max_turns),
            max_output_chars=s.max_observation_chars,
            max_format_errors=s.max_format_errors,
            grade_memo=self.grade_memo,
        )
        engine = _TurnEngine(self, job.version)
        try:
            if s.kind == "tree":
                trajectories, _ = run_tree(
                    env, engine, self.chat, self._scorer(engine, job.version), tree_id=str(job.job_id),
                    max_new_tokens=s.max_new_tokens, max_episode_tokens=s.max_total_tokens,
                    expand_every=s.tree.expand_every, children=s.tree.children, max_branches=s.tree.branches,
                    temperature=s.temperature, seed=job.seed,
                )  # fmt: skip
            else:
                trajectories = [
                    run_episode(
                        env,
                        engine,
                        self.chat,
                        max_new_tokens=s.max_new_tokens,
                        max_total_tokens=s.max_total_tokens,
                        temperature=s.temperature,
                        seed=job.seed,
                    )  # fmt: skip
                ]
        except (SandboxError, GradingError) as exc:
            return EpisodeResult(
                job.job_id, error=f"{type(exc).__name__}: {exc}", seconds=time.monotonic() - started, worker=self.index
            )
        if s.format_error_reward is not None:
            for trajectory in trajectories:
                trajectory.reward = training_reward(trajectory, s.format_error_reward)
        return EpisodeResult(job.job_id, trajectories, seconds=time.monotonic() - started, worker=self.index)

    def _scorer(self, engine, pinned: int | None):
        from trainer.inference.rollout import HeuristicScorer, JudgeScorer, ValueScorer

        if self.settings.tree.scorer == "heuristic":
            return HeuristicScorer()
        if self.settings.tree.scorer == "judge":
            return JudgeScorer(engine, self.chat)
        return ValueScorer(lambda sequences: self._values(sequences, pinned))

    def _values(self, sequences: list[list[int]], pinned: int | None) -> list[float]:
        """The critic's value of each sequence's last state, with the critic published
        beside the policy (the same version as the policy for pinned jobs)."""
        import torch

        from trainer.inference.models import ValueModel

        with self._lock:
            version = pinned if pinned is not None else next(reversed(self._weights), None)
            weights = self._weights.get(version) if version is not None else None
            if weights is None or "critic" not in weights:
                raise RuntimeError(f"worker {self.index}: tree_scorer=value needs the critic's weights")
            if self._critic is None:
                self._critic = ValueModel.from_policy(self.engine.model).eval()
            if self._critic_version != version:
                self._critic.load_state_dict(weights["critic"])
                self._critic_version = version
            with torch.no_grad():
                return [float(self._critic(torch.tensor([ids]))[0, -1]) for ids in sequences]


class _TurnEngine:
    """What an episode sees as its engine: each turn runs under the worker's lock, on the
    newest weights (or the job's pinned version)."""

    def __init__(self, worker: RolloutWorker, pinned: int | None) -> None:
        self.worker = worker
        self.pinned = pinned

    @property
    def version(self) -> int:
        return self.pinned if self.pinned is not None else self.worker.engine.version

    def generate(self, prompts, **kwargs):
        if self.worker.batcher is not None and len(prompts) == 1:
            return self.worker.batcher.generate(self.pinned, prompts[0], kwargs)
        with self.worker._lock:
            return self.worker._engine_for(self.pinned).generate(prompts, **kwargs)
