"""The Ray orchestrator: faults, the synchronous baseline, partial rollouts, and exact resume
after SIGKILL. Real workers, real sandboxes, the real learner; faults are injected where they
happen (in the worker's process, see `faults.py`)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import needs_bwrap, output_progress, wait_exit, wait_progressing
from tests.trainer.faults import FaultySandboxes
from trainer.config import RolloutConfig, TreeConfig
from trainer.orchestrator.schedule import EpisodeJob
from trainer.orchestrator.worker import RolloutWorker
from trainer.resolve import load_config
from trainer.train import train

REPO = Path(__file__).resolve().parents[2]
SMALL = [
    "orchestrator.episodes_per_step=2",
    "rollout.max_turns=1",
    "rollout.max_new_tokens=8",
    "learner.lr=1e-3",
    "learner.critic_lr=1e-3",
]


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@needs_bwrap
def test_crashed_and_hung_workers_and_dead_sandboxes_are_retried_not_scored(tmp_path, ray_cluster):
    """Over 60 s (63 s in a full suite on 2 cores at load 8-18, 2026-12-07): a 3-step run whose
    worker crashes, whose sandbox dies and whose episode hangs; the hang is only found by
    `episode_timeout_s` (30 s, what a loaded machine's slowest real episode stays under), and
    each failed episode is played again by a restarted worker."""
    faults = FaultySandboxes(str(tmp_path), {3: "crash", 6: "sandbox", 9: "hang"})
    config = load_config(
        None,
        # sync: every batch needs all of its episodes, so none of the faults can be outrun
        [f"run.output_dir={tmp_path}", "run.name=faults", "orchestrator.mode=sync", "run.steps=3", *SMALL, "orchestrator.rollout_workers=2",
         "orchestrator.episodes_per_worker=2", "orchestrator.episode_timeout_s=30", "orchestrator.max_attempts=4"],
    )  # fmt: skip
    run_dir = train(config, sandbox_factory=faults)
    assert {p.name for p in tmp_path.glob("*.done")} == {"crash.done", "sandbox.done", "hang.done"}
    records = _records(run_dir)
    assert [r["step"] for r in records] == [1, 2, 3]  # training went on
    last = records[-1]
    # At least the planned faults (a heavily loaded machine may add slow episodes taken for hangs).
    assert last["worker_restarts"] >= 2 and last["hung_episodes"] >= 1
    assert last["infra_retries"] >= 3 and last["infra_dropped"] == 0
    state = json.loads((run_dir / "checkpoints" / "step_000003" / "state.json").read_text())
    consumed = [i for step in state["schedule"]["consumed"] for i in step]
    assert len(consumed) == len(set(consumed)) == 6  # each failed episode was played again, once


@needs_bwrap
def test_sync_mode_trains_on_whole_batches_in_order(tmp_path, ray_cluster):
    config = load_config(
        None, [f"run.output_dir={tmp_path}", "run.name=sync", "orchestrator.mode=sync", "run.steps=2", *SMALL]
    )
    run_dir = train(config)
    records = _records(run_dir)
    assert [r["staleness_max"] for r in records] == [0, 0]
    # Each step applied an update or was skipped for want of a signal (a batch of failures).
    assert [r["version"] + r["skipped_no_signal"] for r in records] == [1, 2]
    state = json.loads((run_dir / "checkpoints" / "step_000002" / "state.json").read_text())
    assert state["schedule"]["consumed"] == [["0", "1"], ["2", "3"]]


@needs_bwrap
@pytest.mark.parametrize(
    ("rollout", "batch_turns"), [("linear", False), ("tree", False), ("linear", True), ("tree", True)]
)
def test_an_episode_in_flight_switches_weights_between_turns_and_records_each_version(rollout, batch_turns):
    """Partial rollouts: weights published mid-episode are used from the next turn on, every
    token records the version that sampled it, and its logprob is that version's. A tree
    spanning the update keeps its shared prefix's versions in every branch. The same through
    the worker's turn batcher (its decode steps instead of the engine's generate)."""
    from tasks import builtin_tasks
    from trainer.inference.models import load_policy
    from trainer.learner import token_logprobs

    task = builtin_tasks()[0]
    worker = RolloutWorker(
        index=0, model="tiny", engine="hf", seed=0, tasks=[task], sandbox_backend="local",
        settings=RolloutConfig(max_turns=3, max_new_tokens=6, max_total_tokens=4096, kind=rollout,
                               tree=TreeConfig(scorer="heuristic", expand_every=1, branches=3), batch_turns=batch_turns),
    )  # fmt: skip
    first, second = load_policy("tiny", seed=1), load_policy("tiny", seed=2)
    worker.set_weights(1, {"policy": first.state_dict()})
    turns = []
    if batch_turns:
        assert worker.batcher is not None
        inner_step = worker.batcher._step

        def step():  # the real decode; a new version lands once the first turn is answered
            answered = worker.batcher.turns
            inner_step()
            if worker.batcher.turns > answered:
                turns.append(worker.engine.version)
                if len(turns) == 1:
                    worker.set_weights(2, {"policy": second.state_dict()})

        worker.batcher._step = step
    else:
        assert worker.batcher is None
        inner = worker.engine.generate

        def generate(prompts, **kwargs):  # the real engine; a new version lands after turn 1
            out = inner(prompts, **kwargs)
            turns.append(out[0].version)
            if len(turns) == 1:  # published as the orchestrator would (the worker's lock is re-entrant)
                worker.set_weights(2, {"policy": second.state_dict()})
            return out

        worker.engine.generate = generate
    result = worker.run(EpisodeJob(job_id=0, group=0, task_id=task.id, family=task.family, seed=5, batch=0))
    assert not result.error
    assert turns[0] == 1 and set(turns[1:]) == {2} and len(turns) >= 2
    assert len(result.trajectories) == (1 if rollout == "linear" else 3)
    for trajectory in result.trajectories:
        versions = [v for v, p in zip(trajectory.versions, trajectory.policy_mask, strict=True) if p]
        assert versions[0] == 1 and versions[-1] == 2 and versions == sorted(versions)
        ids = torch.tensor([trajectory.token_ids])
        for version, model in ((1, first), (2, second)):
            with torch.no_grad():
                recomputed = token_logprobs(model.eval(), ids, torch.ones_like(ids))[0]
            positions = [i for i, v in enumerate(trajectory.versions) if v == version]
            recorded = torch.tensor([trajectory.logprobs[i] for i in positions])
            assert torch.allclose(recomputed[[i - 1 for i in positions]], recorded, atol=1e-5)


def _launch(tmp_path: Path, run_name: str, args: list[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "trainer.train", *args, f"run.output_dir={tmp_path}", f"run.name={run_name}",
               "run.resume=auto"]  # fmt: skip
    with open(tmp_path / f"{run_name}.log", "a") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _kill_run(process: subprocess.Popen) -> None:
    """SIGKILL the whole run: the driver and the Ray processes it started."""
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _training_state(checkpoint: Path) -> dict:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = checkpoint.parent / f"{checkpoint.name}.pt"
    dcp_to_torch_save(checkpoint / "dcp", out)
    return torch.load(out, weights_only=False)


def _assert_bitwise_equal(a, b, path: str = "") -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _assert_bitwise_equal(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), f"{path} differs"
    else:
        assert a == b, path


@needs_bwrap
@pytest.mark.ray
def test_sigkill_at_random_points_then_resume_consumes_the_same_trajectories_and_params(tmp_path):
    """Over 60 s (195 s in a full suite on 2 cores, 2026-12-06): five real training runs, each
    starting Ray and loading the model: one straight through 6 steps, and the same run killed
    with SIGKILL three times (once mid-checkpoint, twice at random times), each time resumed,
    the last to its end; a resume's equality with the straight run is only shown by runs
    that really die."""
    # 6 steps: room for two kills after a checkpoint, even when the cores are shared and a run is slow to start.
    args = ["orchestrator.deterministic=true", "orchestrator.max_staleness=1", "run.steps=6", "run.checkpoint_every=1", "rollout.max_turns=2",
            "rollout.max_new_tokens=8", "orchestrator.episodes_per_step=2", "learner.lr=1e-3", "learner.critic_lr=1e-3", "orchestrator.rollout_workers=2"]  # fmt: skip
    straight = _launch(tmp_path, "straight", args)
    straight_progress = output_progress(tmp_path / "straight.log", tmp_path / "straight" / "metrics.jsonl")
    assert wait_exit(straight, straight_progress, "the uninterrupted run") == 0, (
        tmp_path / "straight.log"
    ).read_text()[-3000:]

    rng = random.Random(0)
    checkpoints = tmp_path / "killed" / "checkpoints"
    kills = 0
    while True:
        process = _launch(tmp_path, "killed", args)
        progress = output_progress(tmp_path / "killed.log", tmp_path / "killed" / "metrics.jsonl")
        if kills == 0:  # the first kill lands while a checkpoint is being written
            wait_progressing(lambda p=process: p.poll() is not None or list(checkpoints.glob(".step_*.partial")),
                             progress, "a checkpoint write to start", interval=0.005)  # fmt: skip
        elif kills < 3:  # then at random points after the run made progress (episodes in flight)
            before = len(list(checkpoints.glob("step_*")))
            wait_progressing(lambda p=process, n=before: p.poll() is not None or len(list(checkpoints.glob("step_*"))) > n,
                             progress, "the next checkpoint")  # fmt: skip
            # Not a wait for anything: the kill lands a random time after that checkpoint.
            time.sleep(rng.uniform(0.0, 3.0))
        else:
            assert wait_exit(process, progress, "the last resumed run") == 0, (tmp_path / "killed.log").read_text()[
                -3000:
            ]
            break
        if process.poll() is None:
            _kill_run(process)
            kills += 1
        elif process.returncode == 0:
            break
        else:
            pytest.fail((tmp_path / "killed.log").read_text()[-3000:])
    assert kills >= 1
    log = (tmp_path / "killed.log").read_text()
    assert log.count("resumed from") >= 2

    final = "step_000006"
    expected = json.loads((tmp_path / "straight" / "checkpoints" / final / "state.json").read_text())
    actual = json.loads((checkpoints / final / "state.json").read_text())
    assert actual["schedule"]["consumed"] == expected["schedule"]["consumed"]  # 0 lost, 0 duplicated
    assert len(sum(actual["schedule"]["consumed"], [])) == 12
    _assert_bitwise_equal(
        _training_state(checkpoints / final), _training_state(tmp_path / "straight" / "checkpoints" / final)
    )


@needs_bwrap
def test_vigor_in_deterministic_mode_resumes_to_the_same_trajectories_and_params(tmp_path, ray_cluster):
    """GRPO with VIGOR's rounds, gated (deterministic): 3 steps straight, and 2 steps then a
    resume to 3, consume the same job ids and reach the same parameters bit for bit (the
    schedule's allocators go into the checkpoint; `test_schedule` resumes one mid-round)."""
    common = [f"run.output_dir={tmp_path}", *SMALL, "algorithm.name=grpo", "algorithm.group_size=4",
              "algorithm.allocation=vigor", "orchestrator.deterministic=true", "orchestrator.max_staleness=1",
              "run.checkpoint_every=1"]  # fmt: skip
    straight = train(load_config(None, [*common, "run.name=straight", "run.steps=3"]))
    split = train(load_config(None, [*common, "run.name=split", "run.steps=2"]))
    train(load_config(None, [*common, "run.name=split", "run.steps=3", "run.resume=auto"]))
    final = "step_000003"
    expected = json.loads((straight / "checkpoints" / final / "state.json").read_text())["schedule"]
    actual = json.loads((split / "checkpoints" / final / "state.json").read_text())["schedule"]
    assert actual["consumed"] == expected["consumed"]
    assert [sorted(int(i) for i in ids) for ids in actual["consumed"]] == [
        list(range(b * 8, b * 8 + 8)) for b in range(3)
    ]
    assert [r["budget_spent"] for r in _records(split)] == [1.0, 1.0, 1.0]
    _assert_bitwise_equal(
        _training_state(split / "checkpoints" / final), _training_state(straight / "checkpoints" / final)
    )


@needs_bwrap
def test_a_two_rank_learner_group_trains_and_one_rank_resumes_its_checkpoint(tmp_path, ray_cluster):
    common = [f"run.output_dir={tmp_path}", "run.name=ranks", *SMALL, "run.checkpoint_every=1"]
    run_dir = train(load_config(None, [*common, "run.steps=1", "placement.learner_ranks=2"]))
    train(load_config(None, [*common, "run.steps=2", "placement.learner_ranks=1", "run.resume=auto"]))
    records = _records(run_dir)
    assert [r["step"] for r in records] == [1, 2] and records[-1]["version"] + records[-1]["skipped_no_signal"] == 2


@needs_bwrap
def test_a_fresh_run_in_an_old_run_folder_replaces_its_records(tmp_path, ray_cluster):
    """Training again without `run.resume` writes its own metrics and summary, not the earlier
    run's with this one's appended (two step-1 records would zigzag the plot)."""
    common = [f"run.output_dir={tmp_path}", "run.name=again", *SMALL, "run.steps=1", "evaluation.episodes=2"]
    run_dir = train(load_config(None, common))
    train(load_config(None, common))
    assert [r["step"] for r in _records(run_dir)] == [1]
    assert json.loads((run_dir / "summary.json").read_text())["eval_after"]["episodes"] == 2


def _scored_batch() -> list:
    """Four finished trajectories with distinct ids and non-zero rewards (the critic's value
    head starts at 0, so each advantage is its reward); family f1 at even positions, f2 at
    odd ones (a two-rank learner gives the odd ones to rank 1)."""
    from trainer.inference.trajectory import Trajectory

    batch = []
    for index in range(4):
        trajectory = Trajectory(task_id=f"task{index % 2}", trajectory_id=str(index), family=f"f{index % 2 + 1}")
        trajectory.extend(list(range(5 + index, 17 + index)), policy=False)
        trajectory.extend([30 + index, 31, 32, 33, 34 + index], policy=True, logprobs=[-1.5] * 5, version=0)
        trajectory.reward = (1.0, 0.5, 0.25, 1.0)[index]
        batch.append(trajectory)
    return batch


def test_a_two_rank_learner_returns_every_advantage_to_the_curriculum(ray_cluster):
    """With `placement.learner_ranks=2`, rank 0 trains on only half of the batch: the step's
    advantages must still come back for every trajectory (gathered across ranks), equal to
    the one-rank learner's, so PAC learns from the whole batch, not from zeros."""
    import ray

    from trainer.algorithms.curriculum import PACController
    from trainer.learner import Learner
    from trainer.orchestrator.learner_group import LearnerGroup
    from trainer.orchestrator.schedule import TaskPicker

    config = load_config(None, ["learner.lr=1e-3", "learner.critic_lr=1e-3"])
    results = {}
    for ranks in (1, 2):
        group = LearnerGroup(config, ranks=ranks)
        try:
            results[ranks] = ray.get(group.call_ref(Learner.step, _scored_batch()))
        finally:
            group.kill()
    batch = _scored_batch()
    single, double = results[1].advantages, results[2].advantages
    assert set(double) == set(single) == {"0", "1", "2", "3"}
    assert all(abs(double[key] - single[key]) < 1e-5 for key in single)
    assert all(single[key] != 0.0 for key in single)

    pac = PACController(["f1", "f2"])
    TaskPicker([("task0", "f1"), ("task1", "f2")], seed=0, pac=pac).observe(batch, double)
    for family, keys in (("f1", ("0", "2")), ("f2", ("1", "3"))):
        learnability = sum(abs(single[key]) for key in keys) / 2  # the first update has no reward gain
        assert pac.stats[family]["last_score"] == pytest.approx(learnability, abs=1e-5)


def test_a_local_rays_workers_run_at_the_runs_niceness(ray_cluster):
    """Ray starts its workers at niceness 15; a run's learner and rollout workers are the run
    itself, so under another job's load they must not starve (`start_ray`'s docstring)."""
    import ray

    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == os.nice(0)
