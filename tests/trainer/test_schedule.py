"""The orchestrator's bookkeeping without Ray: admission, staleness, retries, batches, state."""

import json

import pytest

from trainer.algorithms.curriculum import PACController
from trainer.inference.trajectory import Trajectory
from trainer.orchestrator.schedule import EpisodeResult, Schedule, TaskPicker, off_schedule_jobs, staleness

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


def test_a_checkpoint_from_before_per_batch_job_counters_resumes_the_same():
    """State written before VIGOR (no `issued`, no `vigor_batches`, ready groups without their
    rollout count) loads: the next job ids follow on from the half-created batch."""
    schedule = Schedule(TaskPicker(TASKS, seed=0), groups_per_batch=2, group_size=2, gated=False, max_staleness=1)
    first = schedule.next_jobs(version=0, free_slots=2)  # one group of batch 0
    schedule.finish(EpisodeResult(first[0].job_id, [_trajectory(first[0], 0)]))
    schedule.finish(EpisodeResult(first[1].job_id, [_trajectory(first[1], 0)]))
    state = json.loads(json.dumps(schedule.state_dict()))
    del state["issued"], state["vigor_batches"]
    state["ready"] = [entry[:2] for entry in state["ready"]]
    old = Schedule(TaskPicker(TASKS, seed=0), groups_per_batch=2, group_size=2, gated=False, max_staleness=1)
    old.load_state_dict(state)
    assert [j.job_id for j in old.next_jobs(version=0, free_slots=4)] == [2, 3, 4, 5]
    assert [j.job_id for j in schedule.next_jobs(version=0, free_slots=4)] == [2, 3, 4, 5]
    assert old.ready[0][2] == 2 and old.issued == schedule.issued == {1: 2}


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


# -- VIGOR: variance-guided allocation of each batch's rollouts --------------------------------
VIGOR = {"m0": 2, "alpha": 0.5, "gamma": 2.0, "rounds": 4}


def _vigor(**kwargs) -> Schedule:
    return Schedule(TaskPicker(TASKS, seed=0), groups_per_batch=2, group_size=4, vigor=VIGOR, **kwargs)


def _scored(job, version: int, reward: float) -> Trajectory:
    trajectory = _trajectory(job, version)
    trajectory.reward = reward
    return trajectory


def _reward(job) -> float:
    """Task `b` succeeds on odd job ids (high variance); `a` and `c` never (variance 0)."""
    return float(job.task_id == "b" and job.job_id % 2 == 1)


def test_vigor_gives_the_high_variance_prompt_the_extra_rollouts_and_spends_the_budget_exactly():
    """Budget 2 x 4 = 8, paper's settings: round 1 gives both prompts 2; the planned spends
    (4, 4, 8, 16 for 2, 1, 1, 1 prompts) split the remaining 4 as 0, 1, 3 to the kept prompt.
    Prompt `b` (group 1) has rewards 0, 1; prompt `a` (group 0) 0, 0 and wins ties: it is
    ranked out all the same."""
    schedule = _vigor(gated=True, max_staleness=1)
    first = schedule.next_jobs(version=0, free_slots=20)
    # Batch 0's first round, then batch 1's (admitted with it: max_staleness=1), numbered per batch.
    assert [(j.job_id, j.group, j.task_id, j.batch) for j in first] == [
        (0, 0, "a", 0), (1, 0, "a", 0), (2, 1, "b", 0), (3, 1, "b", 0),
        (8, 2, "c", 1), (9, 2, "c", 1), (10, 3, "a", 1), (11, 3, "a", 1),
    ]  # fmt: skip
    assert [j.seed for j in first[:2]] == [0, 1]
    for job in first[:4]:
        schedule.finish(EpisodeResult(job.job_id, [_scored(job, 0, _reward(job))]))
    second = schedule.next_jobs(version=0, free_slots=20)  # the 0-rollout round is skipped
    assert [(j.job_id, j.group, j.version) for j in second] == [(4, 1, 0)]
    assert schedule.take_batch(0) is None  # the allocator is not done: no group is complete
    schedule.finish(EpisodeResult(4, [_scored(second[0], 0, _reward(second[0]))]))
    last = schedule.next_jobs(version=0, free_slots=20)
    assert [(j.job_id, j.group) for j in last] == [(5, 1), (6, 1), (7, 1)]
    for job in reversed(last):
        schedule.finish(EpisodeResult(job.job_id, [_scored(job, 0, _reward(job))]))
    batch = schedule.take_batch(0)
    assert batch.ids == ["0", "1", "2", "3", "4", "5", "6", "7"]
    assert [t.group_id for t in batch.trajectories] == ["0", "0", "1", "1", "1", "1", "1", "1"]
    assert batch.allocation == {
        "rollouts_per_prompt_mean": 4.0,
        "rollouts_per_prompt_max": 6,
        "nonzero_variance_fraction": 0.5,
        "budget_spent": 1.0,
    }
    assert schedule.vigor_batches.keys() == {1} and schedule.issued == {1: 4}


def test_vigor_counts_a_dropped_rollout_as_spent_and_ranks_by_the_rewards_it_has():
    schedule = _vigor(gated=True, max_staleness=0, max_attempts=1)
    first = schedule.next_jobs(version=0, free_slots=20)
    schedule.finish(EpisodeResult(0, error="SandboxError: shell exited"))  # dropped, never scored
    for job in first[1:]:
        schedule.finish(EpisodeResult(job.job_id, [_scored(job, 0, _reward(job))]))
    rest = schedule.next_jobs(version=0, free_slots=20)
    assert [(j.job_id, j.group) for j in rest] == [(4, 1)]
    for job in rest:
        schedule.finish(EpisodeResult(job.job_id, [_scored(job, 0, _reward(job))]))
    for job in schedule.next_jobs(version=0, free_slots=20):
        schedule.finish(EpisodeResult(job.job_id, [_scored(job, 0, _reward(job))]))
    batch = schedule.take_batch(0)
    assert batch.ids == ["1", "2", "3", "4", "5", "6", "7"] and batch.allocation["budget_spent"] == 1.0


def test_vigor_streaming_rounds_do_not_wait_for_other_batches():
    schedule = _vigor(gated=False, max_staleness=1)
    jobs = schedule.next_jobs(version=0, free_slots=8)
    assert [j.batch for j in jobs] == [0, 0, 0, 0, 1, 1, 1, 1] and {j.version for j in jobs} == {None}
    for job in jobs[4:]:  # batch 1's first round finishes; batch 0's is still running
        schedule.finish(EpisodeResult(job.job_id, [_scored(job, 0, float(job.job_id % 2))]))
    while (more := schedule.next_jobs(version=0, free_slots=4)) or schedule.vigor_batches.get(1):
        assert {j.batch for j in more} == {1}
        for job in more:
            schedule.finish(EpisodeResult(job.job_id, [_scored(job, 0, float(job.job_id % 2))]))
    batch = schedule.take_batch(0)
    assert {t.group_id for t in batch.trajectories} == {"2", "3"} and len(batch.ids) == 8
    assert batch.allocation["budget_spent"] == 1.0 and batch.allocation["rollouts_per_prompt_max"] == 6
    assert sorted(schedule.running) == [0, 1, 2, 3]  # batch 0 is still in its first round


def test_vigor_state_round_trip_mid_batch_resumes_with_the_same_future():
    """One job finishes per tick; a checkpoint in the middle of a batch's rounds (an allocator
    past its first round, jobs running) resumes to the same jobs, seeds and batches."""

    def mid_batch(schedule: Schedule) -> bool:
        return schedule.steps_done >= 1 and any(0 < v.allocator.round < 4 for v in schedule.vigor_batches.values())

    def ticks(schedule: Schedule, running: list, created: dict, stop) -> None:
        while not stop(schedule):
            for job in schedule.next_jobs(version=schedule.steps_done, free_slots=3 - len(running)):
                running.append(job)
                created[job.job_id] = (job.group, job.seed, job.task_id, job.version)
            job = running.pop(0)
            schedule.finish(EpisodeResult(job.job_id, [_scored(job, schedule.steps_done, _reward(job))]))
            if schedule.take_batch(schedule.steps_done) is not None:
                schedule.learner_done()

    straight, straight_created = _vigor(gated=True, max_staleness=1, seed=3), {}
    ticks(straight, [], straight_created, lambda s: s.steps_done == 4)
    interrupted, created, running = _vigor(gated=True, max_staleness=1, seed=3), {}, []
    ticks(interrupted, running, created, mid_batch)
    assert running and interrupted.steps_done == 1
    resumed = _vigor(gated=True, max_staleness=1, seed=3)
    resumed.load_state_dict(json.loads(json.dumps(interrupted.state_dict())))
    ticks(resumed, [], created, lambda s: s.steps_done == 4)
    assert resumed.consumed == straight.consumed
    assert [len(ids) for ids in straight.consumed] == [8, 8, 8, 8]
    assert created == {j: straight_created[j] for j in created}  # same ids, groups, seeds, tasks, pins
    assert sorted(resumed.jobs) == sorted(straight.jobs)


def test_vigor_settings_the_budget_cannot_cover_are_refused():
    with pytest.raises(ValueError, match="m0=3"):
        Schedule(TaskPicker(TASKS, seed=0), groups_per_batch=2, group_size=2, vigor={**VIGOR, "m0": 3})


# -- task pickers: PAC's draw, a stream's phases -------------------------------------------------


def test_pac_picks_the_family_its_thompson_draw_chose():
    """Every family can be drawn (a picker that took the first family of `allocate`'s
    counts, whatever they were, picked `f1` forever)."""
    picker = TaskPicker(TASKS, seed=0, pac=PACController(["f1", "f2"]))
    assert [picker.pick() for _ in range(8)] == [
        ("b", "f1"), ("b", "f1"), ("c", "f2"), ("a", "f1"), ("c", "f2"), ("c", "f2"), ("c", "f2"), ("c", "f2"),
    ]  # fmt: skip
    favoured = PACController(["f1", "f2"])
    for _ in range(20):
        favoured.update("f2", [1.0, -1.0, 1.0, -1.0], [1.0, 0.0, 1.0, 0.0])
        favoured.update("f1", [0.0, 0.0], [0.0, 0.0])
    picker = TaskPicker(TASKS, seed=0, pac=favoured)
    assert [picker.pick()[1] for _ in range(10)] == ["f2"] * 10


PHASES = [("one", 0, 2, ["a", "b"]), ("two", 2, 1, ["c"]), ("one", 3, 2, ["a", "b"])]


def test_a_stream_picks_only_its_phases_tasks_in_turn_and_a_returning_phase_goes_on():
    picker = TaskPicker(TASKS, seed=0, phases=PHASES)
    picks = [(batch, picker.pick(batch)[0]) for batch in (0, 0, 0, 1, 2, 2, 3, 4, 9)]
    assert picks == [(0, "a"), (0, "b"), (0, "a"), (1, "b"), (2, "c"), (2, "c"), (3, "a"), (4, "b"), (9, "a")]
    assert [picker.phase(b)[0] for b in (0, 1, 2, 3, 4, 50)] == ["one", "one", "two", "one", "one", "one"]
    state = json.loads(json.dumps(picker.state_dict()))
    again = TaskPicker(TASKS, seed=0, phases=PHASES)
    again.load_state_dict(state)
    assert [again.pick(3) for _ in range(3)] == [picker.pick(3) for _ in range(3)]


def test_a_stream_with_pac_draws_among_the_phases_families_only():
    picker = TaskPicker(TASKS, seed=0, pac=PACController(["f1", "f2"]), phases=PHASES)
    assert {picker.pick(2) for _ in range(10)} == {("c", "f2")}
    assert {picker.pick(0)[1] for _ in range(10)} == {"f1"}


def test_a_phase_naming_a_task_that_is_not_loaded_is_refused():
    with pytest.raises(ValueError, match=r"phase 'x' picks tasks that are not loaded: \['zz'\]"):
        TaskPicker(TASKS, seed=0, phases=[("x", 0, 1, ["a", "zz"])])


def test_each_batch_of_a_schedule_takes_its_phases_tasks():
    schedule = Schedule(TaskPicker(TASKS, seed=0, phases=PHASES), groups_per_batch=2, gated=False, max_staleness=9)
    jobs = schedule.next_jobs(version=0, free_slots=10)
    assert [(j.batch, j.task_id) for j in jobs] == [
        (0, "a"), (0, "b"), (1, "a"), (1, "b"), (2, "c"), (2, "c"), (3, "a"), (3, "b"), (4, "a"), (4, "b"),
    ]  # fmt: skip


def test_groups_lost_to_drops_are_replaced_so_an_async_run_never_stalls():
    """Streaming with `wait` admission: the window counts groups that can still reach a batch.
    Jobs 0-2 of a broken task are dropped (one attempt each); new groups replace them, so
    batches keep coming (the bound counted every group ever created: the run stalled here
    with nothing running, nothing queued and no batch)."""
    schedule = _schedule(gated=False, max_staleness=1, staleness_policy="wait", max_attempts=1)  # B = 2
    version, batches = 0, []
    for _ in range(6):
        for job in schedule.next_jobs(version=version, free_slots=100):
            if job.job_id in (0, 1, 2):
                assert schedule.finish(EpisodeResult(job.job_id, [], error="sandbox died")) == "dropped"
            else:
                schedule.finish(EpisodeResult(job.job_id, [_trajectory(job, version)]))
        batch = schedule.take_batch(version)
        if batch is not None:
            batches.append(batch.ids)
            schedule.learner_done()
            version += 1
    assert batches == [["3", "4"], ["5", "6"], ["7", "8"], ["9", "10"], ["11", "12"]]  # before: none at all
    assert schedule.lost_groups == 3 and schedule.counters["infra_dropped"] == 3
    restored = _schedule(gated=False, max_staleness=1, staleness_policy="wait", max_attempts=1)
    restored.load_state_dict(schedule.state_dict())
    assert restored.lost_groups == 3


def test_a_group_dropped_stale_is_replaced_and_the_window_keeps_its_size():
    schedule = _schedule(gated=False, max_staleness=1, staleness_policy="wait")  # B = 2: a window of 4 groups
    jobs = {j.job_id: j for j in schedule.next_jobs(version=0, free_slots=100)}
    assert sorted(jobs) == [0, 1, 2, 3]
    for job_id in (1, 2):
        schedule.finish(EpisodeResult(job_id, [_trajectory(jobs[job_id], 0)]))
    assert schedule.take_batch(0).ids == ["1", "2"]
    schedule.learner_done()
    jobs.update({j.job_id: j for j in schedule.next_jobs(version=1, free_slots=100)})
    assert sorted(jobs) == [0, 1, 2, 3, 4, 5]
    schedule.finish(EpisodeResult(3, [_trajectory(jobs[3], 0)]))
    schedule.finish(EpisodeResult(4, [_trajectory(jobs[4], 1)]))
    assert schedule.take_batch(1).ids == ["3", "4"]
    schedule.learner_done()
    schedule.finish(EpisodeResult(0, [_trajectory(jobs[0], 0)]))  # two versions behind now
    assert schedule.take_batch(2) is None and schedule.counters["stale_dropped"] == 1
    assert schedule.lost_groups == 1
    # Window (2 + 1 + 1) x 2 = 8 groups, of which group 0 is lost: three new ones, not two.
    assert [j.job_id for j in schedule.next_jobs(version=2, free_slots=100)] == [6, 7, 8]


def test_off_schedule_jobs_take_the_tasks_in_turn_with_ids_below_the_schedules():
    from types import SimpleNamespace

    tasks = [SimpleNamespace(id=task_id, family=family) for task_id, family in TASKS]
    jobs = off_schedule_jobs(tasks, [1_000_000 + i for i in range(4)], first_id=-1_000_000)
    assert [(j.job_id, j.group, j.task_id, j.family, j.seed, j.batch) for j in jobs] == [
        (-1_000_000, -1_000_000, "a", "f1", 1_000_000, -1),
        (-1_000_001, -1_000_001, "b", "f1", 1_000_001, -1),
        (-1_000_002, -1_000_002, "c", "f2", 1_000_002, -1),
        (-1_000_003, -1_000_003, "a", "f1", 1_000_003, -1),
    ]
    scheduled = _schedule().next_jobs(version=0, free_slots=10)
    assert min(j.job_id for j in scheduled) >= 0  # the schedule's own ids never meet these
    with pytest.raises(ValueError, match="first_id=0: off-schedule ids are negative"):
        off_schedule_jobs(tasks, [1], first_id=0)
