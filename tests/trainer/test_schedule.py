"""The orchestrator's bookkeeping without Ray: admission, staleness, retries, batches, state."""

import json

import pytest

from trainer.algorithms import PACController
from trainer.inference.trajectory import Trajectory
from trainer.orchestrator.schedule import EpisodeResult, Schedule, TaskPicker, staleness

TASKS = [("a", "f1"), ("b", "f1"), ("c", "f2")]


def _trajectory(job, version: int, *, tokens: int = 3) -> Trajectory:
    trajectory = Trajectory(task_id=job.task_id, reward=1.0)
    trajectory.extend([1, 2], policy=False)
    trajectory.extend([5] * tokens, policy=True, logprobs=[-0.1] * tokens, version=version)
    trajectory.resolved, trajectory.turns = True, 1
    return trajectory


def _schedule(**kwargs) -> Schedule:
    return Schedule(TaskPicker(TASKS, seed=0), groups_per_batch=2, **kwargs)


def test_sync_schedule_generates_a_whole_batch_then_waits_for_the_learner():
    schedule = _schedule(gated=True, max_staleness=0)
    jobs = schedule.next_jobs(version=0, free_slots=10)
    assert [j.job_id for j in jobs] == [0, 1] and {j.version for j in jobs} == {0}
    assert schedule.next_jobs(version=0, free_slots=10) == []  # batch 1 needs step 1 first
    schedule.finish(EpisodeResult(1, [_trajectory(jobs[1], 0)]))
    assert schedule.take_batch(0) is None  # job 0 still running: the batch is not complete
    schedule.finish(EpisodeResult(0, [_trajectory(jobs[0], 0)]))
    batch = schedule.take_batch(0)
    assert batch.ids == ["0", "1"] and batch.staleness == [0, 0]  # id order, not finish order
    schedule.learner_done()
    assert [j.version for j in schedule.next_jobs(version=1, free_slots=10)] == [1, 1]


def test_deterministic_schedule_pins_batches_to_the_weights_of_step_b_minus_staleness():
    schedule = _schedule(gated=True, max_staleness=1)
    first = schedule.next_jobs(version=0, free_slots=1)  # admission does not depend on free slots
    assert len(first) == 1 and {j.version for j in schedule.jobs.values()} == {0}
    assert sorted(j.batch for j in schedule.jobs.values()) == [0, 0, 1, 1]
    schedule.learner_done()  # step 1 done: batch 2 is pinned to the weights after it
    schedule.next_jobs(version=7, free_slots=0)
    assert [(j.batch, j.version) for j in schedule.jobs.values() if j.batch == 2] == [(2, 7), (2, 7)]


def test_streaming_admission_waits_at_the_staleness_bound_and_counts_it():
    schedule = _schedule(gated=False, max_staleness=1, staleness_policy="wait")
    jobs = schedule.next_jobs(version=0, free_slots=10)
    assert len(jobs) == 4 and all(j.version is None for j in jobs)  # (0 + 1 + 1) batches of 2
    assert schedule.next_jobs(version=0, free_slots=10) == []
    assert schedule.counters["admission_waits"] == 1  # one hold, however often it is polled
    schedule.learner_done()
    assert len(schedule.next_jobs(version=1, free_slots=10)) == 2


def test_drop_policy_never_holds_generation_back_but_drops_stale_trajectories():
    schedule = _schedule(gated=False, max_staleness=1, staleness_policy="drop")
    jobs = schedule.next_jobs(version=0, free_slots=8)
    assert len(jobs) == 8 and schedule.counters["admission_waits"] == 0
    schedule.finish(EpisodeResult(jobs[0].job_id, [_trajectory(jobs[0], 0)]))
    schedule.finish(EpisodeResult(jobs[1].job_id, [_trajectory(jobs[1], 3)]))
    assert schedule.take_batch(version=3) is None  # a lag of 3 > 1: dropped, and the batch not full
    assert schedule.dropped == ["0"] and schedule.counters["stale_dropped"] == 1
    schedule.finish(EpisodeResult(jobs[2].job_id, [_trajectory(jobs[2], 2)]))
    batch = schedule.take_batch(version=3)
    assert batch.ids == ["1", "2"] and batch.staleness == [0, 1]


def test_streaming_batches_take_groups_in_the_order_they_finish():
    schedule = _schedule(gated=False, max_staleness=2)
    jobs = schedule.next_jobs(version=0, free_slots=4)
    for job in reversed(jobs[1:]):
        schedule.finish(EpisodeResult(job.job_id, [_trajectory(job, 0)]))
    assert schedule.take_batch(0).ids == ["3", "2"]  # job 0 is still running; nobody waits for it


def test_groups_are_consumed_whole():
    schedule = Schedule(TaskPicker(TASKS, seed=0), groups_per_batch=1, group_size=3, gated=False, max_staleness=1)
    jobs = schedule.next_jobs(version=0, free_slots=3)
    assert {j.task_id for j in jobs} == {"a"} and {j.group for j in jobs} == {0}
    for job in jobs[:2]:
        schedule.finish(EpisodeResult(job.job_id, [_trajectory(job, 0)]))
    assert schedule.take_batch(0) is None
    schedule.finish(EpisodeResult(jobs[2].job_id, [_trajectory(jobs[2], 0)]))
    batch = schedule.take_batch(0)
    assert batch.ids == ["0", "1", "2"] and {t.group_id for t in batch.trajectories} == {"0"}


def test_infrastructure_failures_retry_with_the_same_seed_then_drop():
    schedule = _schedule(gated=True, max_attempts=2)
    job = schedule.next_jobs(version=0, free_slots=1)[0]
    assert schedule.finish(EpisodeResult(job.job_id, error="SandboxError: shell exited")) == "retry"
    again = schedule.next_jobs(version=0, free_slots=1)[0]
    assert again.job_id == job.job_id and again.seed == job.seed and again.attempt == 1
    assert schedule.finish(EpisodeResult(job.job_id, error="GradingError: timeout")) == "dropped"
    assert schedule.counters == {"infra_retries": 1, "infra_dropped": 1, "stale_dropped": 0, "admission_waits": 0}
    other = schedule.next_jobs(version=0, free_slots=1)[0]
    schedule.finish(EpisodeResult(other.job_id, [_trajectory(other, 0)]))
    batch = schedule.take_batch(0)
    assert batch.ids == ["1"]  # the dropped episode is missing, never scored 0


def test_a_neighbour_of_a_crashed_job_is_requeued_without_using_an_attempt():
    schedule = _schedule(gated=True, max_attempts=1)
    first, second = schedule.next_jobs(version=0, free_slots=2)
    assert schedule.fail(second.job_id, blame=False) == "retry" and schedule.jobs[second.job_id].attempt == 0
    assert schedule.fail(first.job_id) == "dropped"


def test_state_round_trip_resumes_with_the_same_future():
    """Stop after 3 rounds with one job still running, save as JSON, load into a fresh
    schedule: the rest of the run consumes exactly what the uninterrupted run consumes."""

    def rounds(schedule: Schedule, count: int, running: dict | None = None) -> dict:
        running = {} if running is None else running
        for _ in range(count):
            for job in schedule.next_jobs(version=schedule.steps_done, free_slots=3):
                running[job.job_id] = job
            for job_id in sorted(running)[:-1]:  # the newest job keeps running
                job = running.pop(job_id)
                schedule.finish(EpisodeResult(job_id, [_trajectory(job, schedule.steps_done)]))
            batch = schedule.take_batch(schedule.steps_done)
            if batch is not None:
                schedule.picker.observe(batch.trajectories, {t.trajectory_id: 0.5 for t in batch.trajectories})
                schedule.learner_done()
        return running

    def fresh() -> Schedule:
        pac = PACController(["f1", "f2"])
        return Schedule(TaskPicker(TASKS, seed=3, pac=pac), groups_per_batch=2, gated=True, max_staleness=1, seed=3)

    straight = fresh()
    rounds(straight, 8)
    interrupted = fresh()
    assert rounds(interrupted, 3)  # a job is running at the checkpoint
    resumed = fresh()
    resumed.load_state_dict(json.loads(json.dumps(interrupted.state_dict())))
    rounds(resumed, 5)
    assert resumed.consumed == straight.consumed and len(straight.consumed) >= 4
    assert resumed.picker.state_dict() == straight.picker.state_dict()
    assert sorted(resumed.jobs) == sorted(straight.jobs)


def test_staleness_is_measured_from_the_oldest_policy_token():
    trajectory = Trajectory(task_id="t")
    trajectory.extend([1], policy=False)
    trajectory.extend([2, 3], policy=True, logprobs=[0.0, 0.0], version=4)
    trajectory.extend([9], policy=False)
    trajectory.extend([5], policy=True, logprobs=[0.0], version=6)
    assert staleness(trajectory, 6) == 2


def test_unknown_staleness_policy_is_refused():
    with pytest.raises(ValueError, match="staleness_policy"):
        _schedule(staleness_policy="maybe")
