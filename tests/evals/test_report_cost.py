"""The evaluation report's sandbox cost: `sandbox_cost` in report.json and its section in
report.md, from recorded costs; and a real run's records carrying their episode's cost."""

import json

import pytest

from evals.config import EvalConfig
from evals.report import build_report, markdown_report
from evals.swe import evaluate
from tasks import builtin_tasks
from tests.conftest import needs_bwrap

COSTS = [
    {"sandbox_start": "cold", "sandbox_start_seconds": 1.0, "tool_seconds": 2.0, "grading_seconds": 3.0,
     "engine_seconds": 10.0, "sandbox_seconds": 20.0, "wall_seconds": 20.0},
    {"sandbox_start": "warm", "sandbox_start_seconds": 0.25, "tool_seconds": 1.0, "grading_seconds": 2.75,
     "engine_seconds": 4.0, "sandbox_seconds": 10.0, "wall_seconds": 20.0},
]  # fmt: skip


def _result(instance: str, status: str, cost: dict | None) -> dict:
    record = {"instance_id": instance, "repo": "r", "difficulty": "easy", "status": status, "resolved": False}
    record.update(patch="x" if status != "error" else "", error="boom" if status == "error" else None)
    return {**record, "cost": cost} if cost else record


def test_the_report_sums_the_cost_of_the_instances_that_recorded_one():
    results = [_result("a", "unresolved", COSTS[0]), _result("b", "resolved", COSTS[1]), _result("c", "error", None)]
    report = build_report(results, run={"model": "m"})
    assert report["sandbox_cost"] == {
        "instances": 2,
        "sandbox_start_seconds": 1.25,
        "tool_seconds": 3.0,
        "grading_seconds": 5.75,
        "grading_setup_seconds": 0.0,
        "test_run_seconds": 0.0,
        "canary_seconds": 0.0,
        "grading_teardown_seconds": 0.0,
        "close_seconds": 0.0,
        "engine_seconds": 14.0,
        "sandbox_seconds": 30.0,
        "wall_seconds": 40.0,
        "sandbox_start_seconds_mean": 0.625,
        "cold_starts": 1,
        "warm_starts": 1,
        "fork_starts": 0,
        "memo_verdicts": 0,
        "sandbox_wait_fraction": 0.25,
        "engine_wait_fraction": 0.35,
    }
    text = markdown_report(report, results, "m", report)
    assert (
        "Over the 2 instance(s) that recorded it: 40.0 s of episode wall time and 30.0 sandbox-seconds (agent "
        "sandboxes and grading). Waiting on the sandbox: 25.0% of the wall time; on the engine: 35.0%."
    ) in text
    assert "| sandbox start (mean 0.625 s; 1 cold, 1 warm) | 1.250 | 3.1% |" in text
    assert "| grading (final diff and hidden tests) | 5.750 | 14.4% |" in text
    assert "| waiting on the engine | 14.000 | 35.0% |" in text
    assert build_report([_result("c", "error", None)], run={})["sandbox_cost"] == {}
    assert "## Where the time went" not in markdown_report(report, results, "m", {**report, "sandbox_cost": {}})


@needs_bwrap
def test_an_agent_runs_records_carry_their_episodes_cost(tmp_path):
    instance = builtin_tasks()[0].id
    config = EvalConfig(model="tiny", dataset="builtin", instances=[instance], max_turns=2, max_new_tokens=8,
                        output=tmp_path)  # fmt: skip
    evaluate(config, progress=False)
    (record,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    cost = record["cost"]
    assert cost["sandbox_start"] == "cold" and cost["engine_seconds"] > 0 and cost["grading_seconds"] > 0
    parts = cost["sandbox_start_seconds"] + cost["tool_seconds"] + cost["grading_seconds"] + cost["engine_seconds"]
    assert parts + cost["close_seconds"] <= cost["wall_seconds"] <= record["seconds"]
    split = ("grading_setup_seconds", "test_run_seconds", "canary_seconds", "grading_teardown_seconds")
    assert sum(cost[name] for name in split) == pytest.approx(cost["grading_seconds"], abs=0.005)  # rounded to ms
    assert cost["test_run_seconds"] > 0 and cost["grading_setup_seconds"] > 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["sandbox_cost"]["instances"] == 1 and report["sandbox_cost"]["cold_starts"] == 1
    trajectory = json.loads((tmp_path / "trajectories" / f"{instance}.json").read_text())
    assert trajectory["timings"]["cost"] == cost
    assert "## Where the time went" in (tmp_path / "report.md").read_text()
