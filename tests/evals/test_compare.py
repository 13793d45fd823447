"""`python -m evals.compare RUN_A RUN_B`: flips, counts and net change, as Markdown and JSON."""

import json

from evals.compare import compare_runs, main
from evals.config import EvalConfig
from evals.swe import evaluate
from tasks import builtin_tasks
from tests.conftest import needs_bwrap


def _run(folder, model: str, statuses: dict[str, str]) -> None:
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"model": model}))
    lines = [
        {"instance_id": i, "status": s, "resolved": s == "resolved", **({"error": "boom"} if s == "error" else {})}
        for i, s in statuses.items()
    ]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def test_flips_counts_and_net_change(tmp_path):
    _run(tmp_path / "a", "base", {"i1": "resolved", "i2": "resolved", "i3": "unresolved", "i4": "error",
                                  "i5": "empty_patch", "i6": "resolved", "only_a": "resolved"})  # fmt: skip
    _run(tmp_path / "b", "tuned", {"i1": "resolved", "i2": "unresolved", "i3": "resolved", "i4": "resolved",
                                   "i5": "unresolved", "i6": "resolved", "only_b": "resolved"})  # fmt: skip
    (tmp_path / "b" / "quarantine.json").write_text(
        json.dumps({"quarantined": [{"instance_id": "i6", "outcomes": []}]})
    )
    data = compare_runs(tmp_path / "a", tmp_path / "b")
    assert data["resolved_to_unresolved"] == ["i2"] and data["unresolved_to_resolved"] == ["i3"]
    assert data["other_status_changes"] == [{"instance_id": "i5", "a": "empty_patch", "b": "unresolved"}]
    assert data["errors"] == ["i4"]  # an error is not a flip either way
    assert data["quarantined"] == ["i6"] and data["only_in_a"] == ["only_a"] and data["only_in_b"] == ["only_b"]
    assert data["comparable"] == 4 and data["resolved_a"] == 2 and data["resolved_b"] == 2 and data["net_change"] == 0
    assert data["run_a"]["model"] == "base" and data["run_b"]["quarantined"] == 1


@needs_bwrap
def test_command_line_compares_two_real_runs(tmp_path, capsys):
    ids = [t.id for t in builtin_tasks()[:2]]
    evaluate(EvalConfig(model="gold", dataset="builtin", instances=ids, output=tmp_path / "gold"), progress=False)
    evaluate(EvalConfig(model="empty", dataset="builtin", instances=ids, output=tmp_path / "empty"), progress=False)
    assert main([str(tmp_path / "gold"), str(tmp_path / "empty"), "--output", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert f"| resolved -> unresolved | 2 | {ids[0]}, {ids[1]} |" in text
    assert "net change -2" in text
    assert (tmp_path / "cmp" / "compare.md").read_text() == text
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["net_change"] == -2
    assert main([str(tmp_path / "gold"), str(tmp_path / "missing")]) == 2
    assert "not an evaluation run" in capsys.readouterr().err
