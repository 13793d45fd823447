import json
from pathlib import Path

from evals.swe import evaluate, markdown_report, status_of, summarize
from tests.conftest import needs_bwrap

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_status_and_summary_math():
    results = [
        {"status": status_of({"patch": "diff", "resolved": True})},
        {"status": status_of({"patch": "diff", "resolved": False})},
        {"status": status_of({"patch": "  ", "resolved": False})},
        {"status": status_of({"error": "sandbox died", "patch": "", "resolved": False})},
    ]
    assert [r["status"] for r in results] == ["resolved", "unresolved", "empty_patch", "error"]
    summary = summarize(results)
    assert summary["resolved"] == 1 and summary["error"] == 1 and summary["instances"] == 4
    assert summary["resolved_rate"] == 0.25
    assert abs(summary["resolved_rate_of_graded"] - 1 / 3) < 1e-12  # errors are not unresolved


def test_swebench_rows_without_environment_are_errors_not_unresolved(tmp_path):
    summary = evaluate(model="gold", dataset=str(FIXTURES / "swebench_verified_sample.jsonl"), output=tmp_path)
    assert summary["error"] == 4 and summary["unresolved"] == 0
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert all("environment is not available" in r["error"] for r in results)
    assert (tmp_path / "predictions.jsonl").read_text() == ""  # nothing was run, nothing predicted
    assert "| 4 | 0 | 0 | 0 | 4 |" in (tmp_path / "report.md").read_text()


@needs_bwrap
def test_gold_oracle_resolves_everything_and_predictions_are_official(tmp_path):
    summary = evaluate(model="gold", dataset="builtin", output=tmp_path)
    assert summary["resolved"] == summary["instances"] >= 3
    predictions = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == summary["instances"]
    for prediction in predictions:
        assert set(prediction) == {"instance_id", "model_name_or_path", "model_patch"}
        assert prediction["model_patch"].startswith("diff --git")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["resolved_rate"] == 1.0


@needs_bwrap
def test_reruns_skip_finished_instances(tmp_path):
    from tasks import builtin_tasks

    first, second = (t.id for t in builtin_tasks()[:2])
    evaluate(model="empty", dataset="builtin", output=tmp_path, instances=[first])
    before = (tmp_path / "results.jsonl").read_text()
    summary = evaluate(model="empty", dataset="builtin", output=tmp_path, instances=[first, second])
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert (tmp_path / "results.jsonl").read_text().startswith(before) and len(lines) == 2
    assert summary["instances"] == 2 and summary["empty_patch"] == 2


def test_markdown_report_has_a_row_per_instance():
    results = [
        {"instance_id": "a", "status": "resolved", "turns": 3},
        {"instance_id": "b", "status": "error", "error": "x|y"},
    ]
    text = markdown_report(summarize(results), results, "m")
    assert "| a | resolved | 3 |" in text and "| b | error | 0 | x/y |" in text
