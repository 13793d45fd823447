"""The official-harness adapter: when it can run, what it runs, and how its verdicts are read.

The `docker` test runs SWE-bench's own harness (`python -m swebench.harness.run_evaluation`)
end to end on locally built instance images (`harness_image.py`); the others run without
Docker: the fallback when there is no engine, and the reading of reports the official
grading functions wrote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from swebench.harness.grading import get_eval_report
from swebench.harness.test_spec.test_spec import TestSpec as OfficialTestSpec  # not a pytest class

from evals.config import EvalConfig
from evals.official import check_harness, docker_problem, harness_command, read_report
from evals.swe import evaluate
from tests.conftest import needs_bwrap
from tests.evals import harness_image
from tests.evals.swebench_logs import build_log

FIXTURES = Path(__file__).parent.parent / "fixtures"
SAMPLE = FIXTURES / "swebench_verified_sample.jsonl"


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_without_a_docker_engine_the_harness_says_why_and_nothing_is_counted_unresolved(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    check = check_harness(_rows(SAMPLE))
    assert not check.ready and len(check.not_ready) == 4
    assert all("no Docker engine" in why for why in check.not_ready.values())

    summary = evaluate(EvalConfig(model="gold", dataset=str(SAMPLE), output=tmp_path / "run"), progress=False)
    assert summary["error"] == 4 and summary["unresolved"] == 0
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    for record in records:  # both reasons: no environment for the project grader, no engine for the harness
        assert "environment is not available" in record["error"] and "no Docker engine" in record["error"]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert "not for 4" in report["official_harness"]["summary"]


@needs_bwrap
def test_official_grader_refuses_tasks_that_are_not_swebench_rows(tmp_path):
    from tasks import builtin_tasks

    first = builtin_tasks()[0].id
    summary = evaluate(
        EvalConfig(model="gold", dataset="builtin", instances=[first], output=tmp_path, grader="official"),
        progress=False,
    )
    assert summary["error"] == 1
    record = json.loads((tmp_path / "results.jsonl").read_text())
    assert "not a SWE-bench row" in record["error"]


def test_harness_command_is_the_official_entry_point():
    command = harness_command(
        dataset=Path("/d.jsonl"),
        predictions=Path("/p.jsonl"),
        instance_ids=["a", "b"],
        run_id="r",
        namespace=None,
        max_workers=3,
        timeout_s=60,
    )
    assert command[1:3] == ["-m", "swebench.harness.run_evaluation"]
    flags = dict(zip(command[3::2], command[4::2], strict=False))
    assert flags["--dataset_name"] == "/d.jsonl" and flags["--predictions_path"] == "/p.jsonl"
    assert command[command.index("--instance_ids") + 1 : command.index("--run_id")] == ["a", "b"]
    assert command[command.index("--namespace") + 1] == "none"  # the harness's spelling of a local build
    assert command[command.index("--clean") + 1] == "false"  # never remove the user's images


def _spec(row: dict) -> OfficialTestSpec:
    return OfficialTestSpec(
        instance_id=row["instance_id"],
        repo=row["repo"],
        version=row["version"],
        repo_script_list=[],
        eval_script_list=[],
        env_script_list=[],
        arch="x86_64",
        FAIL_TO_PASS=json.loads(row["FAIL_TO_PASS"]),
        PASS_TO_PASS=json.loads(row["PASS_TO_PASS"]),
        language="py",
        docker_specs={},
        namespace=None,
    )


def _harness_logs(workdir: Path, row: dict, log: str) -> dict:
    """Lay out one instance's logs as `run_instance` does, its report written by the
    official `get_eval_report` from the test output."""
    prediction = {"instance_id": row["instance_id"], "model_name_or_path": "org/model", "model_patch": "diff"}
    log_dir = workdir / "logs" / "run_evaluation" / "run" / "org__model" / row["instance_id"]
    log_dir.mkdir(parents=True)
    (log_dir / "test_output.txt").write_text(f"+ : '>>>>> Start Test Output'\n{log}+ : '>>>>> End Test Output'\n")
    report = get_eval_report(_spec(row), prediction, str(log_dir / "test_output.txt"), include_tests_status=True)
    (log_dir / "report.json").write_text(json.dumps(report))
    return prediction


def test_reports_written_by_the_official_grading_are_read_back(tmp_path):
    row = next(r for r in _rows(SAMPLE) if r["repo"] == "pytest-dev/pytest")
    f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
    passing = {t: "pass" for t in [*f2p, *p2p]}
    prediction = _harness_logs(tmp_path / "ok", row, build_log(row, passing))
    verdict = read_report(tmp_path / "ok", "run", prediction)
    assert verdict.status == "resolved" and verdict.tests_status["FAIL_TO_PASS"]["success"] == f2p

    broken = {**passing, p2p[0]: "fail"}
    prediction = _harness_logs(tmp_path / "broken", row, build_log(row, broken))
    verdict = read_report(tmp_path / "broken", "run", prediction)
    assert verdict.status == "unresolved" and verdict.tests_status["PASS_TO_PASS"]["failure"] == [p2p[0]]


def test_instances_without_a_report_are_errors_unless_the_patch_did_not_apply(tmp_path):
    prediction = {"instance_id": "x__y-1", "model_name_or_path": "m", "model_patch": "diff"}
    log_dir = tmp_path / "logs" / "run_evaluation" / "run" / "m" / "x__y-1"
    log_dir.mkdir(parents=True)
    assert read_report(tmp_path, "run", prediction).status == "error"  # no log at all
    (log_dir / "run_instance.log").write_text("INFO - Test timed out after 60 seconds.\n")
    verdict = read_report(tmp_path, "run", prediction)
    assert verdict.status == "error" and "timed out" in verdict.note
    (log_dir / "run_instance.log").write_text(">>>>> Patch Apply Failed:\nerror: patch failed: calc.py:1\n")
    verdict = read_report(tmp_path, "run", prediction)
    assert verdict.status == "unresolved" and verdict.note == "the patch does not apply"


def _docker_problem() -> str | None:
    problem = docker_problem()
    if problem:
        return problem
    import docker

    client = docker.from_env()
    try:
        client.images.get(harness_image.BASE_IMAGE)
    except docker.errors.ImageNotFound:
        return f"the base image {harness_image.BASE_IMAGE} is not built (make sandbox-image)"
    finally:
        client.close()
    return None


@pytest.fixture
def instance_images(tmp_path):
    problem = _docker_problem()
    if problem:
        if os.environ.get("SANDBOX_REQUIRE_DOCKER") == "1":
            pytest.fail(f"docker tier required (SANDBOX_REQUIRE_DOCKER=1) but unavailable: {problem}")
        pytest.skip(f"official harness unavailable: {problem}")
    from swebench.harness.test_spec.test_spec import make_test_spec

    base = harness_image.make_repository(tmp_path / "repository")
    rows = harness_image.make_rows(base)
    tags = [make_test_spec(row, namespace=harness_image.NAMESPACE).instance_image_key for row in rows]
    harness_image.build_image(tmp_path / "context", tmp_path / "repository", tags)
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    yield dataset
    harness_image.remove_images(tags)


@pytest.mark.docker
def test_official_harness_grades_predictions_in_instance_images(instance_images, tmp_path):
    output = tmp_path / "run"
    summary = evaluate(
        EvalConfig(
            model="gold",
            dataset=str(instance_images),
            output=output,
            workers=2,
            harness_namespace=harness_image.NAMESPACE,
            harness_timeout=120,
        ),
        progress=False,
    )
    records = {r["instance_id"]: r for r in map(json.loads, (output / "results.jsonl").read_text().splitlines())}
    final = records  # the last record of each instance (pending, then graded)
    assert {i: r["status"] for i, r in final.items()} == {
        "pytest-dev__pytest-90001": "resolved",
        "pytest-dev__pytest-90002": "unresolved",  # breaks a PASS_TO_PASS test
        "pytest-dev__pytest-90003": "unresolved",  # does not apply: the agent's fault, not infrastructure
    }
    assert all(r["grader"] == "official" for r in final.values())
    assert final["pytest-dev__pytest-90002"]["failed_tests"] == ["testing/test_calc.py::test_mul"]
    assert final["pytest-dev__pytest-90003"]["note"] == "the patch does not apply"
    assert summary["resolved"] == 1 and summary["unresolved"] == 2 and summary["error"] == 0
    # The harness's own files: one report per graded instance, from the predictions we wrote.
    log_dir = Path(final["pytest-dev__pytest-90001"]["official_log_dir"])
    assert json.loads((log_dir / "report.json").read_text())["pytest-dev__pytest-90001"]["resolved"] is True
    assert "PASSED testing/test_calc.py::test_add" in (log_dir / "test_output.txt").read_text()
    trajectory = json.loads((output / "trajectories" / "pytest-dev__pytest-90002.json").read_text())
    assert trajectory["official"]["tests_status"]["PASS_TO_PASS"]["failure"] == ["testing/test_calc.py::test_mul"]
    report = json.loads((output / "report.json").read_text())
    assert report["graders"] == {"official": 3} and "ready for 3" in report["official_harness"]["summary"]

    # Empty predictions are not sent to the harness: nothing can resolve.
    empty = evaluate(
        EvalConfig(
            model="empty",
            dataset=str(instance_images),
            output=tmp_path / "empty",
            harness_namespace=harness_image.NAMESPACE,
        ),
        progress=False,
    )
    assert empty["empty_patch"] == 3 and not (tmp_path / "empty" / "official").exists()
