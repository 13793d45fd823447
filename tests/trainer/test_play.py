"""`Orchestrator.play` (the evaluations) after the loop: the episodes `run` left playing hold
their slots until they end, are recorded as the loop records them, and then give their
slots to the evaluation. Ray is replaced by a recorder whose episodes end in the order they
started; the orchestrator's bookkeeping is the real one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainer.config import OrchestratorConfig
from trainer.inference.trajectory import Trajectory
from trainer.orchestrator.loop import Counters, Orchestrator, _Running
from trainer.orchestrator.multiplex.sharing import StaticSplit
from trainer.orchestrator.schedule import EpisodeJob, EpisodeResult, Schedule, TaskPicker


class _Ray:
    """Episodes end in the order they started, one per `wait`; `in_flight` is the most that
    ever ran at once (the slots)."""

    exceptions = SimpleNamespace(RayActorError=RuntimeError)

    def __init__(self) -> None:
        self.started: list[str] = []
        self.results: dict[str, EpisodeResult] = {}
        self.ended: list[str] = []
        self.in_flight = 0

    def start(self, ref: str, result: EpisodeResult) -> str:
        self.started.append(ref)
        self.results[ref] = result
        self.in_flight = max(self.in_flight, len(self.started) - len(self.ended))
        return ref

    def wait(self, refs, num_returns, timeout):
        assert num_returns == 1 and refs, "play waits for one of its episodes"
        first = min(refs, key=self.started.index)
        self.ended.append(first)
        return [first], [r for r in refs if r != first]

    def get(self, ref):
        return self.results[ref]


class _Worker:
    def __init__(self, index: int, ray: _Ray) -> None:
        def run(job: EpisodeJob) -> str:
            trajectory = Trajectory(task_id=job.task_id, reward=1.0, resolved=job.seed % 2 == 0)
            return ray.start(f"eval {job.job_id}@{index}", EpisodeResult(job.job_id, [trajectory], worker=index))

        self.run = SimpleNamespace(remote=run)


def _orchestrator(slots: int, workers: int) -> tuple[Orchestrator, _Ray]:
    """An orchestrator as `run` leaves it: every slot holds one of the next batch's episodes."""
    ray = _Ray()
    orchestrator = Orchestrator.__new__(Orchestrator)  # the real methods, no Ray actors
    schedule = Schedule(TaskPicker([("a", "f")], seed=0), groups_per_batch=slots * workers, gated=False)
    orchestrator.__dict__.update(
        ray=ray, config=OrchestratorConfig(rollout_workers=workers, episodes_per_worker=slots), schedule=schedule,
        workers=[_Worker(i, ray) for i in range(workers)], running={}, sharing=StaticSplit(workers), counters=Counters(), version=0,
    )  # fmt: skip
    for n, job in enumerate(schedule.next_jobs(version=0, free_slots=slots * workers)):
        index = n % workers
        ref = ray.start(
            f"train {job.job_id}@{index}", EpisodeResult(job.job_id, [Trajectory(task_id="a")], worker=index)
        )
        orchestrator.running[ref] = _Running(job, index, deadline=float("inf"))
    return orchestrator, ray


def _jobs(count: int) -> list[EpisodeJob]:
    return [EpisodeJob(job_id=-1 - i, group=-1 - i, task_id="a", family="f", seed=i, batch=-1) for i in range(count)]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_runs_episodes_in_flight_are_collected_and_their_slots_go_to_the_evaluation(workers):
    orchestrator, ray = _orchestrator(slots=2, workers=workers)
    left = list(orchestrator.running)
    trajectories = orchestrator.play(_jobs(5))
    assert [t.resolved for t in trajectories] == [True, False, True, False, True]  # every job, in order
    assert orchestrator.running == {} and orchestrator.schedule.running == set()  # the run's were recorded
    assert ray.ended[: len(left)] == left  # ...as they ended, before any evaluation episode could start
    assert ray.in_flight == 2 * workers  # never more than the slots
    assert [r.split("@")[0] for r in ray.started[len(left) :]] == [f"eval {-1 - i}" for i in range(5)]  # each once


def test_an_evaluation_waits_for_slots_instead_of_failing_when_the_run_holds_every_one():
    orchestrator, ray = _orchestrator(slots=1, workers=1)
    assert orchestrator._free_slots() == {0: 0}  # nothing can start: before, play raised at once
    assert len(orchestrator.play(_jobs(3))) == 3
    assert ray.ended == ["train 0@0", "eval -1@0", "eval -2@0", "eval -3@0"]


def test_an_episode_that_never_ends_is_a_one_line_error_naming_the_setting():
    orchestrator, ray = _orchestrator(slots=1, workers=1)
    ray.wait = lambda refs, num_returns, timeout: ([], list(refs))  # nothing ends within the timeout
    with pytest.raises(RuntimeError, match=r"episode_timeout_s=900.0s \(0 of these and 1 of the run's still running\)"):
        orchestrator.play(_jobs(1))
