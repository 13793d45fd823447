"""BiDiRL's hot switch, rollout side: the hf engine and a rollout worker sleep (their weights
and caches freed) and wake with the learner's weights, and then generate exactly what a
never-slept engine with those weights generates; a job sent to a sleeping worker goes back
to the queue without using an attempt."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import needs_bwrap
from trainer.config import RolloutConfig
from trainer.inference.engines import EngineAsleepError
from trainer.inference.engines.hf import HFEngine
from trainer.inference.engines.weights import WeightSyncError
from trainer.inference.models import load_policy
from trainer.inference.trajectory import Trajectory
from trainer.orchestrator.schedule import EpisodeJob, EpisodeResult, Schedule, TaskPicker
from trainer.orchestrator.worker import RolloutWorker, WorkerBusyError

PROMPTS = [[5, 6, 7, 8, 9], [11, 12, 13]]


def _generate(engine: HFEngine) -> list[tuple[list[int], list[float], int]]:
    """Two prompts batched with a seed each (continuous batching), then one alone."""
    batched = engine.generate(PROMPTS, max_new_tokens=10, temperature=1.0, seeds=[3, 4])
    alone = engine.generate([PROMPTS[0] + [20]], max_new_tokens=6, temperature=1.0, seed=9)
    return [(g.token_ids, g.logprobs, g.version) for g in [*batched, *alone]]


def _parameter_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def test_a_woken_engine_generates_what_a_fresh_engine_with_those_weights_does():
    engine = HFEngine(load_policy("tiny", seed=0))
    _generate(engine)  # fills the prefix cache
    assert engine._prefixes
    expected_bytes = _parameter_bytes(engine.model)  # tied embedding and head counted once
    assert engine.sleep() == expected_bytes
    assert engine.asleep and not engine._prefixes
    assert all(p.untyped_storage().nbytes() == 0 for p in engine.model.parameters())
    assert engine.sleep() == 0  # already asleep

    newer = load_policy("tiny", seed=1).state_dict()
    engine.wake(newer, 3)
    assert not engine.asleep and engine.version == 3
    assert _parameter_bytes(engine.model) == expected_bytes
    fresh = HFEngine(load_policy("tiny", seed=1), version=3)
    woken = _generate(engine)
    assert woken == _generate(fresh)  # tokens, logprobs and versions, exactly
    assert [t for t, _, _ in woken] != [t for t, _, _ in _generate(HFEngine(load_policy("tiny", seed=0)))]


def test_waking_at_the_same_version_matches_an_engine_that_never_slept():
    """The learner may not have stepped while the unit was lent: the same version again."""
    slept, never = HFEngine(load_policy("tiny", seed=0)), HFEngine(load_policy("tiny", seed=0))
    weights = load_policy("tiny", seed=0).state_dict()
    slept.sleep()
    slept.wake(weights, 0)
    assert _generate(slept) == _generate(never)


def test_an_asleep_engine_refuses_work_in_one_line_and_a_bad_wake_leaves_it_asleep():
    engine = HFEngine(load_policy("tiny", seed=0))
    engine.sleep()
    with pytest.raises(EngineAsleepError, match=r"asleep .*call wake\(state_dict, version\) before generating"):
        engine.generate([[5, 6]], max_new_tokens=2)
    with pytest.raises(EngineAsleepError, match="before updating its weights"):
        engine.load_weights(load_policy("tiny", seed=1).state_dict(), 1)
    partial = load_policy("tiny", seed=1).state_dict()
    del partial["model.norm.weight"]
    with pytest.raises(WeightSyncError, match=r"missing \['model.norm.weight'\]"):
        engine.wake(partial, 1)  # a parameter left out would hold uninitialised memory
    assert engine.asleep and all(p.untyped_storage().nbytes() == 0 for p in engine.model.parameters())
    engine.wake(load_policy("tiny", seed=1).state_dict(), 1)
    assert _generate(engine) == _generate(HFEngine(load_policy("tiny", seed=1), version=1))
    with pytest.raises(RuntimeError, match=r"awake: wake\(\) only after sleep\(\)"):
        engine.wake(load_policy("tiny", seed=1).state_dict(), 2)


def test_a_job_a_sleeping_worker_refused_is_requeued_without_using_an_attempt():
    schedule = Schedule(TaskPicker([("a", "f1")], seed=0), groups_per_batch=2, max_attempts=1)
    first, second = schedule.next_jobs(version=0, free_slots=2)
    refused = EpisodeResult(first.job_id, error="worker 0 is asleep", refused=True)
    assert schedule.finish(refused) == "retry"  # max_attempts=1: a blamed failure would drop it
    assert schedule.counters["infra_retries"] == 0 and first.attempt == 0
    assert [j.job_id for j in schedule.next_jobs(version=0, free_slots=2)] == [first.job_id]
    for job in (first, second):
        trajectory = Trajectory(task_id=job.task_id, reward=1.0)
        trajectory.extend([1, 2], policy=False)
        trajectory.extend([5], policy=True, logprobs=[-0.1], version=0)
        assert schedule.finish(EpisodeResult(job.job_id, [trajectory])) == "done"
    batch = schedule.take_batch(0)
    assert batch.ids == ["0", "1"]  # played once each: neither lost nor duplicated


def _worker(task) -> RolloutWorker:
    settings = RolloutConfig(max_turns=2, max_new_tokens=6, max_total_tokens=4096)
    return RolloutWorker(index=0, model="tiny", engine="hf", seed=0, tasks=[task], sandbox_backend="local",
                         settings=settings)  # fmt: skip


@needs_bwrap
def test_a_worker_sleeps_only_when_idle_refuses_jobs_asleep_and_wakes_to_the_newest_weights():
    from tasks import builtin_tasks

    task = builtin_tasks()[0]
    job = EpisodeJob(job_id=0, group=0, task_id=task.id, family=task.family, seed=5, batch=0)
    v1, v2, v3 = ({"policy": load_policy("tiny", seed=s).state_dict()} for s in (1, 2, 3))
    worker = _worker(task)
    assert worker.batcher is not None  # the turns go through the continuous batcher's decode
    worker.set_weights(1, v1)
    inner = worker.batcher._step
    refusals = []

    def step():  # the real decode step; the scheduler asks for the unit mid-episode
        if not refusals:
            with pytest.raises(WorkerBusyError, match=r"worker 0 has 1 episode\(s\) in flight: sleep\(\) only an idle"):
                worker.sleep()
            refusals.append(True)
        inner()

    worker.batcher._step = step
    played = worker.run(job)
    assert not played.error and refusals and not worker.is_asleep()
    worker.batcher._step = inner

    seconds = worker.sleep()
    assert seconds > 0 and worker.is_asleep() and worker.engine.asleep and not worker._weights
    assert worker.batcher._decode is None
    refused = worker.run(job)
    assert refused.refused and "asleep" in refused.error and not refused.trajectories
    worker.set_weights(3, v3)  # published while asleep: kept (the newest only)
    assert worker.wake(2, v2) > 0
    assert worker.engine.version == 3 and not worker.is_asleep()

    never = _worker(task)  # the same job on a worker that never slept, with the same weights
    never.set_weights(3, v3)
    woken, reference = worker.run(job), never.run(job)
    assert not woken.error and not reference.error
    got, want = woken.trajectories[0], reference.trajectories[0]
    assert got.token_ids == want.token_ids and got.logprobs == want.logprobs
    assert set(v for v, p in zip(got.versions, got.policy_mask, strict=True) if p) == {3}
