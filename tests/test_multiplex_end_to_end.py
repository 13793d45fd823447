"""`orchestrator.multiplex=bidirectional` end to end (BiDiRL, issue #21): one training run
through `trainer.train` with a forced imbalance the scheduler must correct in both
directions; and `colocated`, every unit time-shared between the two roles at every step.
Real Ray actors, local sandboxes, the tiny model.

The task stream (`bench.perf.multiplex.write_phase_suite`) first plays tasks whose hidden tests
sleep (slow episodes: the learner waits on rollouts), then tasks with long problem
statements and quick tests (a slow learner: rollouts wait on admission). The tasks' sleeping
tests are the load, not a synchronisation of the test."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.perf.multiplex import write_phase_suite
from tests.conftest import needs_bwrap
from trainer.resolve import load_config
from trainer.train import train

SLOW_STEPS, STEPS = 6, 16
UNITS = 4
SETTINGS = [
    "run.samples_every=0",
    "orchestrator.rollout_workers=2",
    "placement.learner_ranks=2",
    "orchestrator.episodes_per_worker=2",
    "orchestrator.episodes_per_step=4",
    "orchestrator.max_staleness=1",
    "rollout.max_turns=1",
    "rollout.max_new_tokens=4",
    "rollout.max_total_tokens=4096",
    "learner.lr=1e-5",
    # The load is the tasks' sleeping tests: with the grading memo (on by default) the tiny
    # model's repeated diff is graded once and its later episodes are quick, so the learner
    # never waits on rollouts (CI, 2026-12-06: a rollout unit went to the learner at step 5).
    "rollout.grading_memo=false",
]
"""4 units: 2 rollout workers with 2 episode slots each, and a learner of 2 ranks; every
episode graded (no memo)."""


def assert_every_job_accounted_once(run_dir: Path, steps: int) -> None:
    """No trajectory lost or duplicated across the switches: every job created is consumed,
    dropped for staleness, finished and waiting, or still to run, exactly once."""
    schedule = json.loads((run_dir / "checkpoints" / f"step_{steps:06d}" / "state.json").read_text())["schedule"]
    consumed = [i for ids in schedule["consumed"] for i in ids]
    assert [len(ids) for ids in schedule["consumed"]] == [4] * steps
    ready = [t["trajectory_id"] for _, trajectories, _ in schedule["ready"] for t in trajectories]
    pending = [str(job["job_id"]) for job in schedule["jobs"]]
    accounted = consumed + schedule["dropped"] + ready + pending
    assert len(accounted) == len(set(accounted))
    assert set(accounted) == {str(i) for i in range(schedule["next_group"])}


@needs_bwrap
def test_bidirectional_lends_the_learners_unit_then_borrows_a_rollout_unit(tmp_path: Path, ray_cluster):
    """Over 60 s on 2 cores: the scheduler moves units only after windows of real steps with
    slow episodes, then slow learner steps, so the run must last through both phases."""
    stream = write_phase_suite(tmp_path / "suite", slow_seconds=3.0, slow_steps=SLOW_STEPS)
    config = load_config(
        None,
        [
            f"tasks.source=stream:{stream}",
            f"run.output_dir={tmp_path}",
            "run.name=mux",
            f"run.steps={STEPS}",
            "orchestrator.multiplex=bidirectional",
            "orchestrator.multiplex_profile_steps=0",  # the scheduler, not the planner, must move units
            "orchestrator.multiplex_window_steps=2",
            "orchestrator.multiplex_window_s=1",
            *SETTINGS,
        ],
    )
    started = time.monotonic()
    run_dir = train(config)
    print(f"multiplexed run: {time.monotonic() - started:.1f} s")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    # Each step applied an update or had no signal (rewards all 0 under a fresh critic).
    assert [r["version"] + r["skipped_no_signal"] for r in records] == list(range(1, STEPS + 1))
    phases = {name: [r for r in records if r["phase"] == name] for name in ("slow episodes", "slow learner")}

    # Slow episodes: a learner unit was lent to rollout (the learner shrank, a worker woke).
    assert any(r["switches_to_rollout"] for r in phases["slow episodes"]), [
        (r["step"], r["learner_wait"], r["rollout_wait"], r["rollout_units"]) for r in records
    ]
    assert any(r["lent_to_rollout"] for r in phases["slow episodes"])
    # Slow learner: a unit went (back) to the learner, taken from the rollout pool.
    assert any(r["switches_to_learner"] for r in phases["slow learner"]), [
        (r["step"], r["learner_wait"], r["rollout_wait"], r["rollout_units"]) for r in records
    ]
    for record in records:
        assert record["rollout_units"] + record["learner_units"] <= 4
        assert record["rollout_units"] >= 1 and record["learner_units"] >= 1
        # Every token consumed was at most max_staleness versions behind the learner.
        assert record["staleness_max"] <= 1
        assert record["infra_dropped"] == 0
    report = json.loads((run_dir / "multiplex.json").read_text())
    assert {s["direction"] for s in report["switches"]} == {"to_rollout", "to_learner"}
    assert all(s["seconds"] > 0 and s["reason"] for s in report["switches"])

    assert_every_job_accounted_once(run_dir, STEPS)


COLOCATED_STEPS = 4


@needs_bwrap
def test_colocated_trains_every_step_on_every_unit_and_generates_on_every_unit(tmp_path: Path, ray_cluster):
    """Over 60 s in a full suite on 2 cores (74 s, 2026-12-07): a real colocated run on Ray,
    each step's learner and rollout phases on every unit, long enough to see each unit do both."""
    stream = write_phase_suite(tmp_path / "suite", slow_seconds=0.0, slow_steps=COLOCATED_STEPS)
    config = load_config(
        None,
        [f"tasks.source=stream:{stream}", f"run.output_dir={tmp_path}", "run.name=colocated",
         f"run.steps={COLOCATED_STEPS}", "orchestrator.multiplex=colocated", *SETTINGS],
    )  # fmt: skip
    run_dir = train(config)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["version"] + r["skipped_no_signal"] for r in records] == list(range(1, COLOCATED_STEPS + 1))
    for record in records:
        assert record["learner_ranks"] == UNITS, record  # every step ran on every unit
        assert record["staleness_max"] == 0  # synchronous: each batch generated by the newest policy
        assert record["infra_dropped"] == 0 and record["stale_dropped"] == 0
    # The learner's 2 home units first go to rollout (all 4 generate the first batch), then
    # all 4 train on it; after each step all 4 generate the next batch and train on it.
    assert [r["switches_to_rollout"] for r in records] == [2] + [UNITS] * (COLOCATED_STEPS - 1)
    assert [r["switches_to_learner"] for r in records] == [UNITS] * COLOCATED_STEPS
    assert_every_job_accounted_once(run_dir, COLOCATED_STEPS)


PLANNED_STEPS = 5


@needs_bwrap
def test_the_planner_profiles_slow_episodes_and_gives_rollout_the_learners_spare_unit(tmp_path: Path, ray_cluster):
    """Over 60 s on a loaded 2-core machine (66 s in a full suite at load 7-27, 2026-12-06), since
    its episodes' tests sleep 8 s each for 3 profiled steps and more after the switch.
    The planner on a real run: 3 profiled steps of episodes whose tests sleep 8 s, then the
    fitted time model's split, reached by real switches. Rollout is the bottleneck by far
    (2 units x 2 slots make 4 episodes per ~9 s where a one-rank learner step on them takes
    a second or two, 5 under load), so the plan moves the learner's spare unit to rollout:
    3 rollout + 1 learner (it would take a one-rank step over 6 s to choose otherwise)."""
    stream = write_phase_suite(tmp_path / "suite", slow_seconds=8.0, slow_steps=PLANNED_STEPS)
    # A signal window of 100 steps: the run-time rule never acts, only the planner moves units.
    config = load_config(
        None,
        [f"tasks.source=stream:{stream}", f"run.output_dir={tmp_path}", "run.name=planned",
         f"run.steps={PLANNED_STEPS}", "orchestrator.multiplex=bidirectional", "orchestrator.multiplex_profile_steps=3",
         "orchestrator.multiplex_window_steps=100", *SETTINGS],
    )  # fmt: skip
    run_dir = train(config)
    report = json.loads((run_dir / "multiplex.json").read_text())
    model, plan = report["model"], report["plan"]
    assert model["generation_tokens_per_s"] > 0 and model["tool_seconds_per_turn"] > 7.0  # the sleeping tests
    assert plan["predicted"]["throughput"] == max(c["throughput"] for c in plan["candidates"])
    assert (plan["rollout_units"], plan["learner_units"]) == (3, 1), plan
    (switch,) = [s for s in report["switches"] if not s["reason"].startswith("the run is over")]
    assert switch["direction"] == "to_rollout" and switch["reason"].startswith("plan: 3 rollout + 1 learner")
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["learner_ranks"] for r in records[:3]] == [2, 2, 2]  # profiled on the configured split
    assert records[-1]["learner_ranks"] == 1 and records[-1]["rollout_units"] == 3
    assert_every_job_accounted_once(run_dir, PLANNED_STEPS)
