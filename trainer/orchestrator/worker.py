"""A rollout worker: plays episodes of the tasks with its own inference engine.

The orchestrator runs each worker as a Ray actor with several episode slots (threads):
episodes spend most of their time in sandboxes (tests, builds), so one engine serves many
of them, one turn at a time under a lock. Before every turn an episode moves the engine to
the newest published weights, so an episode in flight keeps going across a weight update
and each of its tokens records the version that produced it (partial rollouts). A job
pinned to a version (gated mode) generates with exactly that version instead; the worker
keeps the last few versions for it.

Infrastructure failures (the sandbox died, grading failed) come back as an error result
for the orchestrator to retry; they are never scored 0.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

from trainer.config import RolloutConfig
from trainer.orchestrator.schedule import EpisodeJob, EpisodeResult


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
        prefix_cache: bool = True,
        sandbox_factory=None,
        weights_timeout_s: float = 600.0,
    ) -> None:
        from trainer.build import sandbox_factory as make_sandbox_factory
        from trainer.inference.engines import make_engine
        from trainer.inference.models import load_tokenizer
        from trainer.inference.rollout import ChatFormat

        self.index = index
        self.settings = settings
        self.tasks = {task.id: task for task in tasks}  # loaded (and environments built) by the driver
        self.chat = ChatFormat(load_tokenizer(model))
        self.sandbox_factory = sandbox_factory or make_sandbox_factory(sandbox_backend)
        self.engine = make_engine(engine, model, seed=seed)
        if not prefix_cache and hasattr(self.engine, "prefix_cache_size"):
            self.engine.prefix_cache_size = 0  # bitwise-reproducible runs: no cache-dependent numerics
        self.engine.version = -1  # nothing published yet: the first weights always load
        self.keep_versions = keep_versions
        self._weights: OrderedDict[int, dict] = OrderedDict()
        self._pinned: OrderedDict[int, object] = OrderedDict()
        self._critic = None
        self._critic_version = -1
        self._lock = threading.RLock()
        self._arrived = threading.Condition(self._lock)
        self.weights_timeout_s = weights_timeout_s

    # -- control --------------------------------------------------------------------------
    def pid(self) -> int:
        return os.getpid()

    def set_weights(self, version: int, weights: dict) -> int:
        """Store published weights ({"policy": state, "critic": state?}); episodes pick them
        up at their next turn. Returns the version stored."""
        with self._lock:
            self._weights[version] = weights
            while len(self._weights) > self.keep_versions:
                self._weights.popitem(last=False)
            self._arrived.notify_all()
        return version

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
            if newest > self.engine.version:
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
        from agent_env import GradingError, ToolEnv
        from sandboxes import SandboxError
        from trainer.inference.rollout import run_episode, run_tree

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
        with self.worker._lock:
            return self.worker._engine_for(self.pinned).generate(prompts, **kwargs)
