"""`make eval-swe ARGS="--repo-cache DIR"`: SWE-bench rows run from local clones, in an
environment built for the sandbox backend; rows that cannot run here are reported as such
(errors with the reason, listed apart), never as unresolved.

The requests row over a repository made here (tests/tasks/swebench_repo.py) shares the
content-cached environment of tests/tasks/test_swebench_envs.py."""

import json
import tempfile
from pathlib import Path

import pytest

from evals.swe import main
from tests.conftest import needs_bwrap
from tests.tasks import swebench_repo as repo

pytestmark = needs_bwrap


@pytest.fixture
def rows(tmp_path, monkeypatch):
    if problem := repo.index_problem():
        pytest.skip(problem)
    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", str(Path(tempfile.gettempdir()) / "agentic-rl-test-envs"))
    commits = repo.make_clone(tmp_path / "cache" / "psf__requests")
    xarray = repo.make_clone(tmp_path / "cache" / "pydata__xarray")
    return tmp_path / "cache", repo.write_rows(
        tmp_path / "rows.jsonl",
        [
            repo.requests_row(commits),
            {**repo.real_row("pydata__xarray-6938"), "base_commit": xarray["base"]},  # no environment.yml in the clone
            repo.real_row("pallets__flask-5014"),  # no clone in the cache
        ],
    )


def test_gold_and_empty_runs_over_a_repo_cache(rows, tmp_path, capsys):
    cache, path = rows
    runs = {}
    for model in ("gold", "empty"):
        output = tmp_path / model
        argv = ["--model", model, "--dataset", str(path), "--repo-cache", str(cache), "--grader", "project"]
        assert main([*argv, "--output", str(output)]) == 0
        summary = json.loads(capsys.readouterr().out.split("\npredictions:")[0])
        records = {r["instance_id"]: r for r in map(json.loads, (output / "results.jsonl").read_text().splitlines())}
        runs[model] = records
        assert summary["unavailable"] == 2 and summary["error"] == 2 and summary["unresolved"] == 0
        assert "none of the conda environment files" in records["pydata__xarray-6938"]["unavailable"]
        assert "no clone of pallets/flask" in records["pallets__flask-5014"]["unavailable"]
        report = (output / "report.md").read_text()
        assert "## Errored instances (2)" in report and "Never counted as unresolved. 2 cannot run here" in report
        assert "| pydata__xarray-6938 | not runnable here | " in report and "conda environment files" in report
        assert json.loads((output / "run.json").read_text())["repo_cache"] == str(cache)
    gold = runs["gold"]["psf__requests-1142"]
    assert gold["status"] == "resolved" and gold["grader"] == "project" and gold["failed_tests"] == []
    assert runs["empty"]["psf__requests-1142"]["status"] == "empty_patch"
