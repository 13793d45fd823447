"""The RL recipe behind `make train-swe` (asynchronous by default, synchronous with
`orchestrator.mode: sync`), in torchtune's shape: a class whose methods are the phases of a
run, called in order by `trainer.train.train`:

    recipe = RLRecipe(config)
    recipe.setup()         # run folder, tasks, Ray, learner group, resume, schedule, workers
    recipe.warm_start()    # supervised start on gold trajectories, critic pre-training
    recipe.evaluate("eval_before")
    recipe.run()           # RL: the orchestrator's loop, checkpoints via `save`
    recipe.evaluate("eval_after")
    recipe.close()         # workers, learner, Ray, metrics, the plot

Rollout workers (Ray actors, each with its own inference engine and a few episode slots) play
episodes of the tasks in sandboxes; each finished episode is graded by the task's hidden tests
and streams to the learner (a group of Ray actors, one per FSDP2 rank). The learner makes one
update as soon as a batch is ready, and its weights are published to the workers with a
version number while episodes keep running (`orchestrator.mode: async`, with
`orchestrator.max_staleness` bounding how old a consumed token may be). `mode: sync` is the
baseline: generate a whole batch, then train.

Where this departs from SAO (arXiv 2607.07508): on CPU the rollout engines are transformers
models that generate one turn at a time; tokens produced across a weight update carry each
version, and the learner's importance ratios use the logprobs recorded at generation time, as
the paper prescribes. Episodes that fail for infrastructure reasons are retried and, after
`orchestrator.max_attempts`, dropped and counted, never scored 0.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path

import yaml

from sandboxes.console import rearm
from trainer.config import ConfigError, TrainConfig
from trainer.inference.manifest import MANIFEST
from trainer.inference.models import load_tokenizer
from trainer.inference.rollout import ChatFormat
from trainer.learner import Learner
from trainer.metrics import MetricsWriter, plot, require_tracker, step_record
from trainer.recipes.phases import (
    build_schedule,
    chunked_steps,
    demonstrations,
    describe,
    load_tasks,
    progress_bar,
    read_summary,
    reap_sandboxes,
    success_summary,
    truncate_metrics,
    write_summary,
)
from trainer.samples import SampleWriter

logger = logging.getLogger(__name__)

EVAL_SEED = 1_000_000
"""Evaluation episodes draw seeds from here on: no training episode uses them. Their job ids
count down from -EVAL_SEED (`off_schedule_jobs`)."""
CRITIC_PRETRAIN_FIRST_ID = -1
"""Critic pre-training's episodes: job ids and seeds count down from here (-1, -2, ...),
below the schedule's ids and seeds (>= 0) and above evaluation's ids."""
INTERRUPT_SAVE_S = 5.0
"""On an interrupt, how long the learner step in flight may take to end before the checkpoint."""


class RLRecipe:
    def __init__(self, config: TrainConfig, *, sandbox_factory=None) -> None:
        """`sandbox_factory` replaces the configured backend's (tests inject failing sandboxes)."""
        if not config.resolved:  # every derived value is settled once, before anything runs
            raise ConfigError(
                "the recipe runs a resolved config: load it with trainer.resolve.load_config, or pass one "
                "built or changed in code through trainer.resolve.resolve"
            )
        self.config = config
        self.sandbox_factory = sandbox_factory
        self.run_dir = Path(config.run.output_dir) / config.run.name
        self.checkpoint: Path | None = None
        self.resumed: dict = {}
        self.summary: dict = {}
        self.learner = self.orchestrator = self.metrics = self.schedule = self.pac = None
        self.demonstrations: list = []
        self._started_ray = False
        self.interrupted = False
        self._progress = None
        self._last = {"time": time.monotonic(), "infra": 0}

    # -- setup ----------------------------------------------------------------------------------
    def setup(self) -> None:
        """Everything before the first episode: the run folder, the tasks (environments built
        when needed), Ray, the learner group (resumed when asked), the schedule and workers."""
        from trainer.build import engine_model
        from trainer.build import sandbox_factory as backend_factory
        from trainer.checkpoints import latest_checkpoint
        from trainer.inference.manifest import verify
        from trainer.inference.models import verify_model_folder
        from trainer.orchestrator.learner_group import LearnerGroup
        from trainer.orchestrator.loop import Orchestrator, WorkerSpec, start_ray

        config = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(yaml.safe_dump(config.model_dump(), sort_keys=False))
        require_tracker(config.run.tracker)
        tasks = load_tasks(config)
        self.tasks = tasks
        verify_model_folder(config.model.name)  # a damaged export: one line here, not in every actor
        if config.run.resume == "auto":  # the newest that verifies; each damaged one skipped with a line
            resume = latest_checkpoint(self.run_dir)
        elif config.run.resume:  # an explicit checkpoint must verify: ManifestError, one line
            resume = config.run.resume
            verify(resume)
        else:
            resume = None
        self.factory = self.sandbox_factory or backend_factory(config.tasks.sandbox_backend)
        placement, orchestration = config.placement, config.orchestrator
        logger.info("starting Ray: %d rollout workers, %d learner rank(s)", orchestration.rollout_workers,
                    placement.learner_ranks)  # fmt: skip
        self._started_ray = start_ray(
            placement.ray_address, workers=orchestration.rollout_workers + placement.learner_ranks
        )
        rearm()  # Ray's core took SIGTERM: make it stop the run cleanly again (see train.main)
        logger.info("loading the learner (%s on %s)", config.algorithm.name, config.model.name)
        # Multiplexed: a pool of rank processes, one per unit, so a unit joins or leaves the
        # learner in place (no process starts; BiDiRL's hot switch).
        units = orchestration.rollout_workers + placement.learner_ranks
        self.learner = LearnerGroup(
            config,
            ranks=placement.learner_ranks,
            num_gpus=placement.learner_gpus,
            pool=0 if orchestration.multiplex == "static" else units,
        )
        if resume:
            self.resumed = self.learner.call(Learner.load, str(resume))
        self.schedule, self.pac = build_schedule(config, tasks)
        if self.resumed:
            self.schedule.load_state_dict(self.resumed["schedule"])
            truncate_metrics(self.run_dir / "metrics.jsonl", self.schedule.steps_done)
            self.summary = read_summary(self.run_dir / "summary.json")
            logger.info("resumed from %s: step %d, version %d", resume, self.schedule.steps_done,
                        self.resumed["version"])  # fmt: skip
        else:
            self._start_records_afresh()
        workers = WorkerSpec(
            model=engine_model(config),
            engine=config.model.engine,
            seed=config.run.seed,
            sandbox_backend=config.tasks.sandbox_backend,
            rollout=config.rollout,
            gpus=placement.worker_gpus,
        )
        self.metrics = MetricsWriter(
            self.run_dir,
            tracker=config.run.tracker,
            project=config.run.tracker_project,
            run_name=config.run.name,
            config=config.model_dump(),
        )
        self.samples = SampleWriter(self.run_dir, every=config.run.samples_every)
        self._decode = ChatFormat(load_tokenizer(config.model.name)).decode
        if self.resumed:  # the steps after the checkpoint are played again
            self.samples.truncate(self.schedule.steps_done)
        self.orchestrator = Orchestrator(
            orchestration, workers, self.schedule, self.learner, tasks,
            sandbox_factory=self.sandbox_factory, on_step=self._on_step, save=self.save,
            multiplex_path=self.run_dir / "multiplex.json",
        )  # fmt: skip
        logger.info("starting %d rollout workers (loading the model in each)", len(self.orchestrator.workers))
        self.orchestrator.publish(self.learner.call(Learner.version), wait=True)  # every worker is up

    def _start_records_afresh(self) -> None:
        """A run that does not resume writes its own records: an earlier run's metrics,
        samples and summary in the same folder would otherwise be appended to (duplicate
        steps in the plot). Its checkpoints are left alone, with a warning."""
        stale = [self.run_dir / name for name in ("metrics.jsonl", "samples.jsonl", "summary.json")]
        if found := [path for path in stale if path.exists()]:
            logger.info("starting afresh in %s: replacing the earlier run's %s", self.run_dir,
                        ", ".join(path.name for path in found))  # fmt: skip
            for path in found:
                path.unlink()
        if (self.run_dir / "checkpoints").is_dir() and any((self.run_dir / "checkpoints").iterdir()):
            logger.warning("%s holds an earlier run's checkpoints; this run overwrites them step by step "
                           "(run.resume=auto continues the earlier run instead)", self.run_dir / "checkpoints")  # fmt: skip

    # -- warm start -----------------------------------------------------------------------------
    def warm_start(self) -> None:
        """Supervised steps on gold trajectories, then critic pre-training on one batch of
        episodes; both skipped on a resumed run (its checkpoint has them)."""
        config = self.config.warm_start
        if config.steps:
            logger.info("playing the gold trajectories of %d tasks", len(self.tasks))
            self.demonstrations = demonstrations(self.tasks, self.config, self.factory, progress=True)
            if self.demonstrations:  # each step then reports the probability of the gold actions
                self.learner.call(Learner.set_probes, self.demonstrations)
        if config.steps and not self.resumed:
            logger.info("warm start: %d supervised steps on %d gold trajectories", config.steps,
                        len(self.demonstrations))  # fmt: skip
            # In chunks, a bar advanced between them; the same updates as one call (one AdamW).
            with progress_bar(config.steps, "warm start", "step") as bar:
                self.learner.call(Learner.begin_warm_start, self.demonstrations, config.lr)
                losses = chunked_steps(partial(self.learner.call, Learner.warm_start_steps), config.steps, bar)
                self.learner.call(Learner.end_warm_start)
            solved = sum(t.reward for t in self.demonstrations)
            logger.info("warm start on %d gold trajectories (%.0f resolved): loss %.3f -> %.4f in %d steps",
                        len(self.demonstrations), solved, losses[0], losses[-1], len(losses))  # fmt: skip
            self.orchestrator.publish(self.learner.call(Learner.version), wait=True)
        if config.critic_pretrain_steps and not self.resumed and self.learner.call(Learner.has_critic):
            # One batch's worth of episodes, cycling over the tasks (a single task still gets
            # `episodes_per_step` rollouts: the value of one outcome is no baseline).
            from trainer.orchestrator.schedule import off_schedule_jobs

            count = self.config.orchestrator.episodes_per_step * self.config.algorithm.group_size
            seeds = [CRITIC_PRETRAIN_FIRST_ID - i for i in range(count)]
            jobs = off_schedule_jobs(self.tasks, seeds, first_id=CRITIC_PRETRAIN_FIRST_ID)
            logger.info("critic pre-training: playing %d episodes", len(jobs))
            played = self.orchestrator.play(jobs, progress="critic pre-training: episodes")
            with progress_bar(config.critic_pretrain_steps, "critic pre-training: updates", "step") as bar:
                self.learner.call(Learner.begin_critic_pretraining, played)
                steps = partial(self.learner.call, Learner.critic_pretraining_steps)
                losses = chunked_steps(steps, config.critic_pretrain_steps, bar)
                self.learner.call(Learner.end_critic_pretraining)
            logger.info("critic pre-training: value loss %.4f -> %.4f in %d steps", losses[0], losses[-1],
                        len(losses))  # fmt: skip

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate(self, key: str) -> dict | None:
        """Success of `evaluation.episodes` episodes (the tasks in turn, fixed seeds) with the
        newest weights, stored in `summary.json` under `key`. `eval_before` is skipped on a
        resumed run (the first run measured it)."""
        episodes = self.config.evaluation.episodes
        if not episodes or (key == "eval_before" and self.resumed):
            return None
        from trainer.orchestrator.schedule import off_schedule_jobs

        self.orchestrator.publish(self.learner.call(Learner.version), wait=True)  # the newest weights everywhere
        jobs = off_schedule_jobs(self.tasks, [EVAL_SEED + i for i in range(episodes)], first_id=-EVAL_SEED)
        logger.info("evaluating: %d episodes on fixed seeds", len(jobs))
        when = "before" if key == "eval_before" else "after"
        result = success_summary(self.orchestrator.play(jobs, progress=f"evaluating ({when} RL)"))
        self.summary[key] = result
        logger.info("evaluation %s RL: %s", when, describe(result))
        write_summary(self.run_dir / "summary.json", self.summary)  # kept by a resumed run
        return result

    # -- RL -------------------------------------------------------------------------------------
    def run(self) -> None:
        """RL until `run.steps` learner steps are done, with a checkpoint every
        `run.checkpoint_every` steps and after the last."""
        from tqdm import tqdm

        steps = self.config.run.steps
        self._progress = tqdm(total=steps, initial=self.schedule.steps_done, desc="train-swe", unit="step")
        self._last = {"time": time.monotonic(), "infra": self._infra()}
        if steps == 0:
            self.save(0)  # the warm-started weights, for other runs to start from
        self.orchestrator.run(steps, self.config.run.checkpoint_every)
        self._progress.close()

    def save(self, step: int) -> Path:
        """A checkpoint of the learner and the schedule (and the curriculum) at `step`."""
        extra = {"step": step, "schedule": self.schedule.state_dict()}
        if self.pac is not None:
            extra["curriculum"] = self.pac.state_dict()
        folder = self.run_dir / "checkpoints" / f"step_{step:06d}"
        self.checkpoint = Path(self.learner.save(str(folder), extra))
        return self.checkpoint

    def keep_progress(self, within_s: float = INTERRUPT_SAVE_S) -> str:
        """After an interrupt (Ctrl-C, SIGTERM): finish the learner step in flight if it ends
        within `within_s`, save a checkpoint of the last completed step (unless it has one, or
        the state cannot be resumed from), and return what was kept and how to continue."""
        from trainer.checkpoints import latest_checkpoint

        self.interrupted = True
        try:
            checkpoint, why = self._checkpoint_now(within_s)
        except Exception as exc:  # noqa: BLE001 - the run is stopping: say why, keep the rest
            checkpoint, why = None, f"saving failed: {exc}"
        done = self.schedule.steps_done if self.schedule is not None else 0
        kept = f"{done} of {self.config.run.steps} steps finished ({self.run_dir}; "
        if checkpoint is None:
            latest = latest_checkpoint(self.run_dir, verify=False)  # stopping: no time to hash
            kept += f"no checkpoint saved: {why}" + (f"; the newest is {latest.name}" if latest else "")
        again = "again" if self.config.run.resume == "auto" else "with run.resume=auto"
        return (
            kept
            + (f"checkpoint {checkpoint.name}" if checkpoint else "")
            + f"); run the same command {again} to continue"
        )

    def _checkpoint_now(self, within_s: float) -> tuple[Path | None, str]:
        """(the checkpoint of the last completed step, or None and why not)."""
        orchestrator, schedule = self.orchestrator, self.schedule
        if orchestrator is None or schedule is None:
            return None, "training had not started"
        # A step in flight changes the learner's weights: let it end (its metrics line is
        # written), or save nothing, since the weights would be ahead of the schedule.
        if not schedule.gated and not orchestrator.finish_step(within_s):
            return None, f"the learner step in flight did not end within {within_s:.0f} s"
        done = schedule.steps_done
        if orchestrator.learner_ref is not None or schedule.taken != done:
            return None, "the learner was in the middle of a step"
        if schedule.gated and any(
            j.version is not None and j.version < orchestrator.version for j in schedule.jobs.values()
        ):
            return None, "episodes pinned to older weights were running"
        if done == 0:
            return None, "no learner step had finished"
        folder = self.run_dir / "checkpoints" / f"step_{done:06d}"
        return (folder if (folder / MANIFEST).is_file() else self.save(done)), ""

    def close(self) -> None:
        """Stop workers and learner, shut Ray down if this recipe started it, close metrics
        and draw the plot. Safe to call after a failure in any phase. Sandboxes of the
        killed workers are reaped."""
        if self.orchestrator is not None:
            self.orchestrator.shutdown()
        elif self.learner is not None:
            self.learner.kill()
        if self.metrics is not None:
            self.metrics.close()
        if self._started_ray:
            import ray

            ray.shutdown()
        if self.orchestrator is not None:
            reap_sandboxes()
        if self._progress is not None:
            self._progress.close()
        if (self.run_dir / "metrics.jsonl").exists() and not self.interrupted:  # a resumed run draws it
            chart = plot(self.run_dir / "metrics.jsonl", self.run_dir / "metrics.png", self.summary)
            logger.info("run folder: %s  metrics: %s (+ tensorboard/, %s)  checkpoint: %s", self.run_dir,
                        self.run_dir / "metrics.jsonl", chart.name, self.checkpoint)  # fmt: skip

    def __enter__(self) -> RLRecipe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- per step -------------------------------------------------------------------------------
    def _infra(self) -> int:
        return self.schedule.counters["infra_retries"] + self.schedule.counters["infra_dropped"]

    def _on_step(self, record: dict, batch) -> None:
        now = time.monotonic()
        infra = self._infra()
        out = step_record(
            step=self.schedule.steps_done,
            learner=record,
            batch=batch,
            seconds=now - self._last["time"],
            infra_errors=infra - self._last["infra"],  # failures since the previous step
            schedule_counters=self.schedule.counters,
            orchestrator=self.orchestrator,
        )
        if self.pac is not None:
            out["curriculum"] = {f: round(self.pac.posterior(f)[0], 4) for f in self.pac.families}
        if (phase := self.schedule.picker.phase(out["step"] - 1)) is not None:  # a task stream
            out["phase"] = phase[0]
            out["phase_index"] = self.schedule.picker.phases.index(phase)
        self._last = {"time": now, "infra": infra}
        self.metrics.write(out)
        self.samples.write(out["step"], batch.trajectories, self._decode)  # `python -m evals.view RUN`
        self._progress.update(1)
        self._progress.set_postfix(
            reward=f"{out.get('reward_mean', 0.0):.2f}",
            success=f"{out.get('success_rate', 0.0):.2f}",
            stale=out.get("staleness_max", 0),
        )
