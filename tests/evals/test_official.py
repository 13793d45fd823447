"""The official-harness adapter: when it can run, what it runs, and how its verdicts are read.

The `docker` test runs SWE-bench's own harness (`python -m swebench.harness.run_evaluation`)
end to end on locally built instance images (`harness_image.py`); the others run without
Docker: the fallback when there is no engine, and the reading of reports the official
grading functions wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from swebench.harness.grading import get_eval_report
from swebench.harness.utils import make_test_spec

from evals.config import EvalConfig
from evals.official import check_harness, docker_problem, harness_command, harness_version, read_report
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


def test_harness_command_is_swebench_5s_command_line():
    command = harness_command(
        dataset=Path("/d.jsonl"),
        predictions=Path("/p.jsonl"),
        instance_ids=["a", "b"],
        run_id="r",
        max_workers=3,
        timeout_s=60,
    )
    assert command[1:5] == ["-c", "from swebench.cli.cli import main; main()", "eval", "/d.jsonl"]
    assert command[5:] == ["--predictions", "/p.jsonl", "-i", "a", "-i", "b", "--run-id", "r", "--workers", "3",
                           "--timeout", "60", "--report-dir", "."]  # fmt: skip
    # The command line itself parses it: its --help names every option used.
    shown = subprocess.run([*command[:4], "--help"], capture_output=True, text=True, check=True).stdout
    assert all(flag in shown for flag in ("--predictions", "--instance", "--run-id", "--workers", "--timeout"))


def test_the_harness_version_is_the_pinned_one():
    assert harness_version() == "5.0.2"


def test_rows_without_swebench_5_columns_are_not_ready_and_say_why(tmp_path):
    if docker_problem():
        pytest.skip(f"needs a Docker engine to reach the row checks: {docker_problem()}")
    rows = _rows(SAMPLE)
    check = check_harness(rows)
    assert not check.ready
    assert all(
        why.startswith("the row has no image, eval_script, log_parser, eval_type:") for why in check.not_ready.values()
    )
    named = [{**rows[0], **harness_image.make_rows("0" * 40)[0], "instance_id": "x__y-1"}]
    assert check_harness(named).not_ready == {
        "x__y-1": "instance image agentic-rl-test/sweb.eval.x86_64.pytest-dev_1776_pytest-90001:latest is not present "
        "(docker pull it, or swebench images build)"
    }
    assert check_harness(named, allow_pull=True).ready == {
        "x__y-1": "agentic-rl-test/sweb.eval.x86_64.pytest-dev_1776_pytest-90001:latest"
    }


def _spec(row: dict):
    """swebench 5's TestSpec of a row; the sample rows lack its columns, which are filled in."""
    return make_test_spec({**row, "image": "img", "eval_script": "", "log_parser": "parse_log_pytest",
                           "eval_type": "pass_and_fail"})  # fmt: skip


def _harness_logs(workdir: Path, row: dict, log: str, *, wrap: bool = True, text: str = "") -> dict:
    """Lay out one instance's logs as `run_instance` does, its report written by the
    official `get_eval_report` from the test output (`text` as is, when not `wrap`)."""
    prediction = {"instance_id": row["instance_id"], "model_name_or_path": "org/model", "model_patch": "diff"}
    log_dir = workdir / "logs" / "run_evaluation" / "run" / "org__model" / row["instance_id"]
    log_dir.mkdir(parents=True)
    output = f"+ : '>>>>> Start Test Output'\n{log}+ : '>>>>> End Test Output'\n" if wrap else text
    (log_dir / "test_output.txt").write_text(output)
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


def test_a_report_flagging_an_environment_failure_is_an_error_not_unresolved(tmp_path):
    """swebench 5 flags logs with no test results and an environment's signature (here the
    kernel's OOM killer) as `infra_failure`; the run counts them as errors."""
    row = next(r for r in _rows(SAMPLE) if r["repo"] == "pytest-dev/pytest")
    prediction = _harness_logs(tmp_path, row, "", wrap=False, text="Cannot allocate memory\nKilled\n")
    verdict = read_report(tmp_path, "run", prediction)
    assert (verdict.status, verdict.note) == ("error", "the official harness's environment failed (out_of_memory)")


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
    base = harness_image.make_repository(tmp_path / "repository")
    rows = harness_image.make_rows(base)
    tags = [make_test_spec(row).image for row in rows]
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
        ),
        progress=False,
    )
    assert empty["empty_patch"] == 3 and not (tmp_path / "empty" / "official").exists()
