"""A rollout worker with `rollout.sandbox_pool`: episodes start warm once the pool has
filled, their trajectories say so and carry their cost, and closing the worker closes the
pool's idle sandboxes (real worker, engine and sandboxes)."""

from __future__ import annotations

import tempfile

import pytest

from agent_env import grading_spec_for, sandbox_spec_for
from tasks import builtin_tasks
from tests.conftest import needs_bwrap
from trainer.config import ConfigError, RolloutConfig
from trainer.inference.models import load_policy
from trainer.orchestrator.schedule import EpisodeJob
from trainer.orchestrator.worker import RolloutWorker
from trainer.resolve import load_config


@needs_bwrap
def test_a_pooled_worker_starts_episodes_warm_and_closes_its_pool(tmp_path, monkeypatch):
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # the local sandboxes' folders go here
    task = builtin_tasks()[0]
    worker = RolloutWorker(
        index=0, model="tiny", engine="hf", seed=0, tasks=[task], sandbox_backend="local",
        settings=RolloutConfig(max_turns=1, max_new_tokens=6, sandbox_pool=2, grading_memo=False),
    )  # fmt: skip
    worker.set_weights(1, {"policy": load_policy("tiny", seed=1).state_dict()})
    starts = []
    for job_id in range(2):
        result = worker.run(EpisodeJob(job_id=job_id, group=job_id, task_id=task.id, family=task.family, seed=job_id,
                                       batch=0))  # fmt: skip
        assert not result.error
        (trajectory,) = result.trajectories
        starts.append(trajectory.sandbox_start)
        assert trajectory.wall_seconds > 0 and trajectory.engine_seconds > 0 and trajectory.grading_seconds > 0
        waits = trajectory.sandbox_start_seconds + trajectory.tool_seconds + trajectory.grading_seconds
        assert waits + trajectory.engine_seconds <= trajectory.wall_seconds
        for spec in (sandbox_spec_for(task), grading_spec_for(task)):  # the agent's and grading's
            assert worker.pool.wait_ready(spec, timeout=120)
    assert starts == ["cold", "warm"]
    # The second episode and its grading (the first's grading asked for its spec first).
    assert worker.pool.counts["warm_starts"] == 2
    assert list(folder.glob("sandbox-*"))  # two idle sandboxes
    worker.close()
    assert worker.pool.closed and list(folder.glob("sandbox-*")) == []


def test_a_negative_pool_size_is_one_line():
    assert load_config(None, []).rollout.sandbox_pool == 0  # off by default
    with pytest.raises(ConfigError) as error:
        load_config(None, ["rollout.sandbox_pool=-1"])
    assert str(error.value) == (
        "override 'rollout.sandbox_pool=-1': field 'rollout.sandbox_pool': Input should be greater than or equal to 0"
    )
