"""`--validate-gold`: gold failures are rerun; flaky ones are quarantined and left out of the rate."""

import json
from pathlib import Path

from agent_env import GradeResult, network_error
from evals.config import EvalConfig
from evals.quarantine import build_quarantine, classify
from evals.runner import Attempt
from evals.swe import evaluate
from tests.conftest import needs_bwrap

EVAL_TASKS = Path(__file__).parent.parent / "fixtures" / "eval_tasks"
RESOLVES, DOES_NOT = "clamp-gold-resolves", "clamp-gold-does-not-resolve"


def test_classify_outcomes_across_runs():
    assert classify(["resolved", "resolved"]) == "stable_pass"
    assert classify(["unresolved", "unresolved", "unresolved"]) == "stable_fail"
    assert classify(["unresolved", "resolved", "unresolved"]) == "flaky"
    assert classify(["unresolved", "error", "unresolved"]) == "stable_fail"  # an error says nothing
    assert classify(["error", "error"]) == "error"


def test_quarantine_lists_flaky_instances_and_gold_failures_apart():
    first = {
        "a": {"status": "resolved"},
        "b": {"status": "unresolved", "failed_tests": ["t1"]},
        "c": {"status": "unresolved", "failed_tests": ["t2"]},
        "d": {"status": "empty_patch"},
        "e": {"status": "error"},
    }
    data = build_quarantine(first, {"b": ["resolved", "unresolved"], "c": ["unresolved", "error"]}, 2)
    assert data["quarantined"] == [{"instance_id": "b", "outcomes": ["unresolved", "resolved", "unresolved"]}]
    failures = {g["instance_id"]: g for g in data["gold_failures"]}
    assert set(failures) == {"c", "d"} and failures["c"]["failed_tests"] == ["t2"]


@needs_bwrap
def test_validate_gold_reports_instances_whose_gold_patch_fails(tmp_path):
    summary = evaluate(
        EvalConfig(
            model="ignored",
            dataset=str(EVAL_TASKS),
            instances=[RESOLVES, DOES_NOT],
            output=tmp_path,
            validate_gold=True,
            reruns=2,
        ),
        progress=False,
    )
    quarantine = json.loads((tmp_path / "quarantine.json").read_text())
    assert quarantine["quarantined"] == []  # it fails every time: broken, not flaky
    assert quarantine["gold_failures"] == [
        {
            "instance_id": DOES_NOT,
            "outcomes": ["unresolved"] * 3,
            "failed_tests": ["tests.test_mathx.ClampTests.test_above"],
        }
    ]
    assert summary["resolved"] == 1 and summary["unresolved"] == 1 and summary["quarantined"] == 0
    report = (tmp_path / "report.md").read_text()
    assert "## Gold patch does not resolve" in report and DOES_NOT in report
    assert json.loads((tmp_path / "run.json").read_text())["model"] == "gold"


class FlakyGoldSolver:
    """Submits the gold patch; its tests pass or fail by a script per instance, as a flaky
    test suite would (the real grader cannot be made flaky on demand)."""

    name, needs_workspace = "gold", False

    def __init__(self, script: dict[str, list[bool]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}

    def __call__(self, task, index, *, grade):
        passed = self.script[task.id].pop(0)
        status = "PASSED" if passed else "FAILED"
        statuses = dict.fromkeys([*task.grading.fail_to_pass, *task.grading.pass_to_pass], "PASSED")
        statuses.update(dict.fromkeys(task.grading.fail_to_pass, status))
        grade = GradeResult(resolved=passed, patch_applied=True, statuses=statuses, exit_code=0 if passed else 1)
        return Attempt(patch=task.gold_patch, grade=grade)


def test_flaky_instances_are_quarantined_and_excluded_from_the_rate(tmp_path):
    solver = FlakyGoldSolver({RESOLVES: [True], DOES_NOT: [False, True, False]})
    summary = evaluate(
        EvalConfig(
            model="gold",
            dataset=str(EVAL_TASKS),
            instances=[RESOLVES, DOES_NOT],
            output=tmp_path / "validate",
            validate_gold=True,
            reruns=2,
        ),
        solver=solver,
        progress=False,
    )
    quarantine = json.loads((tmp_path / "validate" / "quarantine.json").read_text())
    assert quarantine["quarantined"] == [
        {"instance_id": DOES_NOT, "outcomes": ["unresolved", "resolved", "unresolved"]}
    ]
    assert quarantine["gold_failures"] == []
    assert summary["quarantined"] == 1 and summary["counted"] == 1 and summary["resolved_rate"] == 1.0
    report = json.loads((tmp_path / "validate" / "report.json").read_text())
    assert report["quarantined_instances"][0]["instance_id"] == DOES_NOT
    assert "## Quarantined" in (tmp_path / "validate" / "report.md").read_text()

    # A later run of a model leaves the quarantined instance out, given the file.
    later = evaluate(
        EvalConfig(
            model="gold",
            dataset=str(EVAL_TASKS),
            instances=[RESOLVES, DOES_NOT],
            output=tmp_path / "later",
            quarantine=tmp_path / "validate" / "quarantine.json",
        ),
        solver=FlakyGoldSolver({RESOLVES: [True], DOES_NOT: [False]}),
        progress=False,
    )
    assert later["quarantined"] == 1 and later["unresolved"] == 0 and later["resolved_rate"] == 1.0


def test_gold_failures_that_need_the_network_are_quarantined_as_not_gradable_offline():
    """requests' rows call httpbin.org: offline such a test fails with any patch, so the gold
    failure is not gradable here, and runs given the quarantine leave it out."""
    log = (
        "FAILED test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET - requests.exceptions.ConnectionError: "
        "HTTPConnectionPool(host='httpbin.org', port=80): Max retries exceeded (Caused by NewConnectionError("
        "'<urllib3.connection.HTTPConnection object>: Failed to establish a new connection: [Errno -3] "
        "Temporary failure in name resolution'))\n"
    )
    line = network_error(log)
    assert line and "httpbin.org" in line
    assert network_error("FAILED t.py::test_x - assert 1 == 2\n") is None
    first = {
        "net": {"status": "unresolved", "failed_tests": ["t"], "network_error": line},
        "bug": {"status": "unresolved", "failed_tests": ["t"]},
    }
    data = build_quarantine(first, {"net": ["unresolved"], "bug": ["unresolved"]}, 1)
    (entry,) = data["quarantined"]
    assert entry["instance_id"] == "net" and entry["reason"].startswith(
        "not gradable offline: a test needs the network"
    )
    assert [g["instance_id"] for g in data["gold_failures"]] == ["bug"]
