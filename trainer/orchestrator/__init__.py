"""Asynchronous training on Ray: rollout workers and the learner group as actors.

`Schedule` (plain Python) decides what runs and what the learner consumes; `RolloutWorker`
plays episodes; `LearnerGroup` is the FSDP2 learner as Ray actors; `Orchestrator` is the
loop between them. `trainer.train` builds them from a `TrainConfig`.
"""

from trainer.orchestrator.schedule import Batch, EpisodeJob, EpisodeResult, Schedule, TaskPicker

__all__ = ["Batch", "EpisodeJob", "EpisodeResult", "Schedule", "TaskPicker"]
