"""`evals.swe`: loading, predictions, trajectories, resume, parallel workers, error accounting,
report math and files. End-to-end runs use built-in tasks in local sandboxes, with the
gold/empty oracles or the tiny model for a couple of turns."""

import importlib.util
import json
from pathlib import Path

import pytest

from agent_env import GradeResult
from evals.config import EvalConfig
from evals.report import breakdown, build_report, markdown_report, status_of, summarize, wilson_interval
from evals.runner import Attempt
from evals.swe import evaluate, main
from sandboxes import SandboxError
from tasks import builtin_tasks
from tests.conftest import needs_bwrap

FIXTURES = Path(__file__).parent.parent / "fixtures"
EVAL_TASKS = FIXTURES / "eval_tasks"
FIVE = [t.id for t in builtin_tasks()[:5]]


def _records(run: Path) -> dict[str, dict]:
    """The last record of each instance in a run's results.jsonl."""
    records = {}
    for line in (run / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        records[record["instance_id"]] = record
    return records


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- report math --------------------------------------------------------------------------------


def test_status_and_summary_math():
    results = [
        {"instance_id": "a", "status": status_of({"patch": "diff", "resolved": True}), "turns": 4, "tokens": 100},
        {"instance_id": "b", "status": status_of({"patch": "diff", "resolved": False}), "turns": 2, "tokens": 50},
        {"instance_id": "c", "status": status_of({"patch": "  ", "resolved": False}), "turns": 6, "tokens": 30},
        {"instance_id": "d", "status": status_of({"error": "sandbox died", "patch": "", "resolved": False})},
    ]
    assert [r["status"] for r in results] == ["resolved", "unresolved", "empty_patch", "error"]
    summary = summarize(results)
    assert summary["resolved"] == 1 and summary["error"] == 1 and summary["instances"] == 4
    assert summary["resolved_rate"] == 0.25
    assert abs(summary["resolved_rate_of_graded"] - 1 / 3) < 1e-12  # errors are not unresolved
    assert summary["mean_turns"] == 4.0 and summary["mean_tokens"] == 60.0  # errors did not run
    assert summary["empty_patch"] == 1 and summary["empty_patch_resolved"] == 0
    # An empty patch whose tests pass is never resolved in the rate, but the summary says so.
    broken = [{"instance_id": "e", "status": status_of({"patch": "", "resolved": True}), "resolved": True}]
    assert (summarize(broken)["resolved"], summarize(broken)["empty_patch_resolved"]) == (0, 1)
    assert "Empty patches are graded too: 1 of 1 resolve" in markdown_report(summarize(broken), broken, "empty", {})

    quarantined = summarize(results, quarantined=["b"])  # left out of every count and rate
    assert quarantined["quarantined"] == 1 and quarantined["counted"] == 3 and quarantined["unresolved"] == 0
    assert quarantined["resolved_rate"] == 1 / 3 and quarantined["resolved_rate_of_graded"] == 0.5


def test_wilson_interval_exact_values():
    # Published values of the 95% Wilson score interval.
    assert wilson_interval(3, 10) == (0.1078, 0.6032)
    assert wilson_interval(1, 4) == (0.0456, 0.6994)
    assert wilson_interval(0, 10) == (0.0, 0.2775)  # never below 0, nor a point at 0
    assert wilson_interval(10, 10) == (0.7225, 1.0)
    assert wilson_interval(250, 500) == (0.4563, 0.5437)
    assert wilson_interval(0, 0) == (0.0, 1.0)  # no instance: nothing known


def test_resolved_rates_carry_their_intervals_overall_and_per_repository():
    statuses = ["resolved"] * 3 + ["unresolved"] * 5 + ["empty_patch", "error"]
    results = [
        {"instance_id": str(i), "repo": "r/x" if i < 4 else "r/y", "status": status}
        for i, status in enumerate(statuses)
    ]
    report = build_report(results, run={"model": "m"})
    assert (report["resolved"], report["counted"]) == (3, 10)
    assert report["resolved_rate_ci"] == [0.1078, 0.6032]  # 3 of 10
    assert report["resolved_rate_of_graded_ci"] == list(wilson_interval(3, 9))  # the error is not graded
    assert report["by_repo"]["r/x"]["resolved_rate_ci"] == [0.3006, 0.9544]  # 3 of 4
    assert report["by_repo"]["r/y"]["resolved_rate_ci"] == [0.0, 0.3903]  # 0 of 6
    text = markdown_report(report, results, "m", report)
    assert "| 10 | 3 | 5 | 1 | 1 | 0 | 30.0 | 33.3 | 10.8–60.3 | 12.1–64.6 |" in text
    assert "| r/x | 4 | 3 | 1 | 0 | 0 | 75.0 | 30.1–95.4 |" in text
    assert "| r/y | 6 | 0 | 4 | 1 | 1 | 0.0 | 0.0–39.0 |" in text


def test_errored_instances_are_listed_with_their_reasons():
    results = [
        {"instance_id": "a", "status": "resolved"},
        {"instance_id": "b", "status": "error", "error": "task b: the sandbox died\ntraceback ..."},
        {"instance_id": "c", "status": "error", "error": "task c: not runnable",
         "unavailable": "row (c): packages: the harness installs them from a conda environment.yml"},
        {"instance_id": "d", "status": "error", "error": "task d: flaky"},
    ]  # fmt: skip
    report = build_report(
        results, run={"model": "m"}, quarantine={"quarantined": [{"instance_id": "d", "outcomes": []}]}
    )
    assert report["errored_instances"] == [  # a quarantined instance is not counted, so not listed
        {"instance_id": "b", "reason": "task b: the sandbox died", "unavailable": False},
        {"instance_id": "c", "reason": "row (c): packages: the harness installs them from a conda environment.yml",
         "unavailable": True},
    ]  # fmt: skip
    lines = markdown_report(report, results, "m", report).splitlines()
    at = lines.index("## Errored instances (2)")
    assert lines[at + 2].startswith("Never counted as unresolved. 1 cannot run here")
    assert lines[at + 6 : at + 8] == [
        "| b | infrastructure | task b: the sandbox died |",
        "| c | not runnable here | row (c): packages: the harness installs them from a conda environment.yml |",
    ]


def test_breakdowns_by_repository_and_difficulty():
    results = [
        {"instance_id": "1", "repo": "r/x", "difficulty": "hard", "status": "resolved", "turns": 3},
        {"instance_id": "2", "repo": "r/x", "difficulty": "easy", "status": "unresolved", "turns": 5},
        {"instance_id": "3", "repo": "r/y", "difficulty": "easy", "status": "error"},
    ]
    by_repo = breakdown(results, "repo")
    assert list(by_repo) == ["r/x", "r/y"]
    assert by_repo["r/x"]["resolved_rate"] == 0.5 and by_repo["r/x"]["mean_turns"] == 4.0
    assert by_repo["r/y"]["error"] == 1 and by_repo["r/y"]["resolved_rate_of_graded"] == 0.0
    assert list(breakdown(results, "difficulty")) == ["easy", "hard"]  # easy to hard, not by name


def test_a_quarantined_instance_shows_its_quarantine_reason_not_unresolved():
    results = [
        {"instance_id": "net", "status": "unresolved", "turns": 0, "patch": "diff"},
        {"instance_id": "flaky", "status": "unresolved", "turns": 0, "patch": "diff"},
        {"instance_id": "ok", "status": "resolved", "turns": 0, "patch": "diff"},
    ]
    quarantine = {
        "quarantined": [
            {"instance_id": "net", "outcomes": ["unresolved", "unresolved"],
             "reason": "not gradable offline: a test needs the network (t: Network is unreachable)"},
            {"instance_id": "flaky", "outcomes": ["unresolved", "resolved"]},
        ]
    }  # fmt: skip
    report = build_report(results, run={"model": "gold"}, quarantine=quarantine)
    assert report["instances_status"] == {"net": "quarantined", "flaky": "quarantined", "ok": "resolved"}
    lines = markdown_report(summarize(results, ["net", "flaky"]), results, "gold", report).splitlines()
    table = lines[lines.index("| instance | status | turns | note |") + 2 :]
    assert table[:3] == [
        "| net | quarantined | 0 | not gradable offline: a test needs the network (t: Network is unreachable) |",
        "| flaky | quarantined | 0 | flaky: outcomes differ across runs (unresolved, resolved) |",
        "| ok | resolved | 0 |  |",
    ]


def test_markdown_report_has_every_section():
    results = [
        {"instance_id": "a", "repo": "r/x", "difficulty": "easy", "status": "resolved", "turns": 3},
        {"instance_id": "b", "repo": "r/y", "difficulty": "hard", "status": "error", "error": "x|y"},
    ]
    report = build_report(results, run={"model": "m", "dataset": "d"})
    text = markdown_report(report, results, "m", report)
    assert "| a | resolved | 3 |" in text and "| b | error | 0 | x/y |" in text
    assert "| 2 | 1 | 0 | 0 | 1 | 0 | 50.0 | 100.0 |" in text  # headline: errors are not unresolved
    assert "## By repository" in text and "| r/x | 1 | 1 | 0 | 0 | 0 | 100.0 |" in text
    assert "## By difficulty" in text and "| hard | 1 | 0 | 0 | 0 | 1 | 0.0 |" in text


# -- loading and honest errors -----------------------------------------------------------------


def test_swebench_rows_without_environment_are_errors_not_unresolved(tmp_path):
    summary = evaluate(
        EvalConfig(model="gold", dataset=str(FIXTURES / "swebench_verified_sample.jsonl"), output=tmp_path),
        progress=False,
    )
    assert summary["error"] == 4 and summary["unresolved"] == 0
    results = _lines(tmp_path / "results.jsonl")
    assert all("environment is not available" in r["error"] for r in results)
    assert (tmp_path / "predictions.jsonl").read_text() == ""  # nothing was graded, nothing predicted
    assert "| 4 | 0 | 0 | 0 | 4 |" in (tmp_path / "report.md").read_text()
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report["by_repo"]) == {"django/django", "sympy/sympy", "pytest-dev/pytest", "astropy/astropy"}
    assert report["by_difficulty"]["easy"]["instances"] == 1  # django-10097 is "<15 min fix"
    # The harness the run used, and the specification of each (repo, version) its rows used.
    source = "swebench 4.1.0 MAP_REPO_VERSION_TO_SPECS_PY (swebench_specs_4.1.0.json)"
    assert report["swebench_version"] == "5.0.2"
    assert list(report["harness_specs"]) == ["astropy/astropy 4.3", "django/django 2.2", "pytest-dev/pytest 7.2",
                                             "sympy/sympy 1.0"]  # fmt: skip
    assert report["harness_specs"]["django/django 2.2"] == {
        "repo": "django/django", "version": "2.2", "python": "3.5", "install": "python setup.py install",
        "test_cmd": "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", "source": source,
        "instances": 1,
    }  # fmt: skip
    assert json.loads((tmp_path / "run.json").read_text())["harness_specs"] == report["harness_specs"]
    text = (tmp_path / "report.md").read_text()
    assert "harness: swebench 5.0.2" in text and f"Per repository and version, from {source}." in text
    assert "| pytest-dev/pytest | 7.2 | 1 | 3.9 | `python -m pip install -e .` | `pytest -rA` |" in text
    assert "## Errored instances (4)" in text


def test_a_run_where_every_instance_errored_exits_1_with_one_line(tmp_path, capsys):
    sample = FIXTURES / "swebench_verified_sample.jsonl"
    assert main(["--model", "gold", "--dataset", str(sample), "--output", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out.split("\npredictions: ")[0])["error"] == 4  # the summary is still printed
    assert (
        captured.err.strip()
        .splitlines()[-1]
        .endswith(f"every instance errored (4 of 4): no verdict to report; the errors are in {tmp_path / 'report.md'}")
    )


@needs_bwrap
def test_a_test_run_past_its_timeout_is_an_error_and_a_wrong_gold_patch_is_unresolved(tmp_path):
    summary = evaluate(EvalConfig(model="gold", dataset=str(EVAL_TASKS), output=tmp_path), progress=False)
    records = _records(tmp_path)
    assert records["clamp-gold-resolves"]["status"] == "resolved"
    assert records["clamp-gold-does-not-resolve"]["status"] == "unresolved"
    assert records["clamp-gold-does-not-resolve"]["failed_tests"] == ["tests.test_mathx.ClampTests.test_above"]
    timed_out = records["clamp-grading-times-out"]
    assert timed_out["status"] == "error" and "timed out" in timed_out["error"]
    assert "clamp-grading-times-out" in timed_out["error"]  # errors name the instance
    assert summary["error"] == 1 and summary["unresolved"] == 1 and summary["resolved_rate_of_graded"] == 0.5
    predicted = {p["instance_id"] for p in _lines(tmp_path / "predictions.jsonl")}
    assert predicted == {"clamp-gold-resolves", "clamp-gold-does-not-resolve"}  # no prediction for an error


class FailingSolver:
    """A solver whose infrastructure fails on one instance, or which has a bug."""

    name, needs_workspace = "failing", False

    def __init__(self, fail_on: str, error: Exception) -> None:
        self.fail_on, self.error = fail_on, error

    def __call__(self, task, index, *, grade):
        if task.id == self.fail_on:
            raise self.error
        return Attempt(patch=task.gold_patch, grade=GradeResult(resolved=True, patch_applied=True, statuses={}))


@needs_bwrap
def test_infrastructure_errors_are_recorded_and_bugs_stop_the_run_naming_the_instance(tmp_path):
    first, second = FIVE[:2]
    solver = FailingSolver(second, SandboxError("the sandbox's shell died"))
    summary = evaluate(
        EvalConfig(model="m", dataset="builtin", instances=[first, second], output=tmp_path / "a"),
        solver=solver,
        progress=False,
    )
    assert summary["error"] == 1 and summary["unresolved"] == 1  # (the double's statuses name no test)
    assert "the sandbox's shell died" in _records(tmp_path / "a")[second]["error"]

    solver = FailingSolver(second, KeyError("a bug"))
    with pytest.raises(RuntimeError, match=f"instance {second}: KeyError"):
        evaluate(
            EvalConfig(model="m", dataset="builtin", instances=[first, second], output=tmp_path / "b"), solver=solver
        )
    assert list(_records(tmp_path / "b")) == [first]  # what finished before is kept


# -- predictions, trajectories, resume ----------------------------------------------------------


@needs_bwrap
def test_gold_oracle_resolves_and_writes_official_predictions_and_trajectories(tmp_path):
    summary = evaluate(
        EvalConfig(model="gold", dataset="builtin", instances=FIVE, output=tmp_path, workers=2), progress=False
    )
    assert summary["resolved"] == summary["instances"] == 5
    predictions = _lines(tmp_path / "predictions.jsonl")
    assert [p["instance_id"] for p in predictions] == FIVE  # in task order once the run ends
    for prediction in predictions:
        assert set(prediction) == {"instance_id", "model_name_or_path", "model_patch"}
        assert prediction["model_patch"].startswith("diff --git") and prediction["model_name_or_path"] == "gold"
    trajectory = json.loads((tmp_path / "trajectories" / f"{FIVE[0]}.json").read_text())
    assert trajectory["status"] == "resolved" and trajectory["patch"] == predictions[0]["model_patch"]
    assert trajectory["grade"]["failed_tests"] == [] and trajectory["timings"]["grade_s"] > 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["resolved_rate"] == 1.0 and report["graders"] == {"project": 5} and report["workers"] == 2
    if importlib.util.find_spec("matplotlib"):  # not a declared dependency (yet): the chart is optional
        png = (tmp_path / "report.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


@needs_bwrap
def test_reruns_skip_finished_instances(tmp_path):
    first, second = FIVE[:2]
    evaluate(EvalConfig(model="empty", dataset="builtin", output=tmp_path, instances=[first]), progress=False)
    before = (tmp_path / "results.jsonl").read_text()
    summary = evaluate(
        EvalConfig(model="empty", dataset="builtin", output=tmp_path, instances=[first, second]), progress=False
    )
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert (tmp_path / "results.jsonl").read_text().startswith(before) and len(lines) == 2
    assert summary["instances"] == 2 and summary["empty_patch"] == 2


@needs_bwrap
def test_resume_retries_errors_and_survives_a_torn_last_line(tmp_path):
    first, second, third = FIVE[:3]
    # A run killed mid-write: an error to retry, a finished instance, half a line.
    error = {"instance_id": first, "status": "error", "error": "engine went away", "patch": "", "resolved": False}
    done = {"instance_id": second, "status": "resolved", "resolved": True, "patch": "diff", "turns": 0}
    (tmp_path / "results.jsonl").write_text(json.dumps(error) + "\n" + json.dumps(done) + "\n" + '{"instance_id": "')
    (tmp_path / "predictions.jsonl").write_text(
        json.dumps({"instance_id": second, "model_name_or_path": "gold", "model_patch": "diff"}) + "\n"
    )
    summary = evaluate(EvalConfig(model="gold", dataset="builtin", instances=[first, second, third], output=tmp_path))
    records = _records(tmp_path)
    assert records[first]["status"] == "resolved" and records[third]["status"] == "resolved"
    assert records[second] == done  # not run again
    assert summary["resolved"] == 3 and summary["error"] == 0
    assert [p["instance_id"] for p in _lines(tmp_path / "predictions.jsonl")] == [first, second, third]


# -- the agent, in parallel ---------------------------------------------------------------------


@needs_bwrap
def test_parallel_workers_give_the_same_results_as_one(tmp_path):
    ids = FIVE[:2]
    options = dict(model="tiny", dataset="builtin", instances=ids, max_turns=2, max_new_tokens=8)
    one = evaluate(EvalConfig(output=tmp_path / "one", workers=1, **options), progress=False)
    two = evaluate(EvalConfig(output=tmp_path / "two", workers=2, **options), progress=False)
    assert one == two
    keys = ("status", "patch", "turns", "tokens", "policy_tokens", "end", "failed_tests")
    for instance in ids:
        a, b = _records(tmp_path / "one")[instance], _records(tmp_path / "two")[instance]
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
        trajectory = json.loads((tmp_path / "two" / "trajectories" / f"{instance}.json").read_text())
        assert [m["role"] for m in trajectory["transcript"]][:3] == ["system", "user", "assistant"]
        assert trajectory["turns"] == 2 and trajectory["policy_tokens"] > 0 and trajectory["end"] == "max_turns"
        assert trajectory["tokens"] > trajectory["policy_tokens"] and trajectory["timings"]["solve_s"] > 0


# -- the command line ---------------------------------------------------------------------------


@needs_bwrap
def test_command_line_runs_and_bad_input_names_the_file(tmp_path, capsys):
    code = main(["--model", "gold", "--instances", ",".join(FIVE[:2]), "--output", str(tmp_path), "--workers", "2"])
    assert code == 0 and json.loads((tmp_path / "report.json").read_text())["resolved"] == 2
    missing = tmp_path / "nope.jsonl"
    assert main(["--model", "gold", "--dataset", str(missing), "--output", str(tmp_path / "x")]) == 2
    assert str(missing) in capsys.readouterr().err


def test_a_dataset_path_that_does_not_exist_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)  # no fall-through to the hub
    missing = tmp_path / "nope" / "rows.jsonl"
    assert main(["--model", "gold", "--dataset", str(missing), "--output", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: task source {missing}: no such file or folder; give a folder of task YAMLs, a task.yaml, "
        "a SWE-bench .jsonl, builtin, or a Hugging Face dataset name"
    ]
    assert not (tmp_path / "x").exists()


def test_a_hub_dataset_that_cannot_be_fetched_is_one_line_suggesting_a_local_jsonl(tmp_path, monkeypatch, capsys):
    import sys
    import types

    hub = types.ModuleType("datasets")

    def load_dataset(name, split):
        raise ConnectionError(f"Couldn't reach '{name}' on the Hub (LocalEntryNotFoundError)")

    hub.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", hub)
    assert main(["--model", "gold", "--dataset", "verified", "--output", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: dataset princeton-nlp/SWE-bench_Verified: not a local path, and the Hugging Face hub could not "
        "give it (ConnectionError: Couldn't reach 'princeton-nlp/SWE-bench_Verified' on the Hub "
        "(LocalEntryNotFoundError)); pass a local SWE-bench .jsonl instead (its rows, one per line)"
    ]


def test_an_unknown_instance_is_one_line_with_the_closest_id(tmp_path, capsys):
    code = main(["--model", "gold", "--instances", f"{FIVE[0]}x", "--output", str(tmp_path / "x")])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: task id(s) {FIVE[0]}x not found in builtin (closest: {FIVE[0]} for {FIVE[0]}x); pass tasks.ids=[] "
        "(evals: no --instances) to take every task, or list ids they have (30 tasks)"
    ]


# -- the project grader's record fields ------------------------------------------------------------


def test_a_test_is_listed_once_failed_or_missing_and_network_comes_from_required_failures():
    from evals.instance import grade_fields
    from tasks import Task
    from tasks.spec import GradingSpec
    from tests.agent_env.test_network_failure import BODY, GET, NAME_RESOLUTION, PROXY, pytest_log

    grading = GradingSpec(
        test_command="pytest -rA", log_parser="swebench", fail_to_pass=[GET, "test_requests.py::gone"],
        pass_to_pass=[PROXY],
    )  # fmt: skip
    task = Task(id="psf__requests-1", problem_statement="p", grading=grading, repo="psf/requests")
    log = pytest_log(get_fails_with=NAME_RESOLUTION, body_fails=True)
    statuses = {GET: "FAILED", PROXY: "PASSED", BODY: "FAILED"}
    grade = GradeResult(False, True, statuses, (GET, "test_requests.py::gone"), ("test_requests.py::gone",), log)
    fields = grade_fields(task, Attempt(patch="x", grade=grade))
    assert fields["failed_tests"] == [GET] and fields["missing_tests"] == ["test_requests.py::gone"]
    assert fields["network_error"] == f"{GET}: " + f"E       {NAME_RESOLUTION}"[:300]
    # Only test_body_length (failed, not required) and test_proxy_env (passed) show network errors.
    task = Task(id="psf__requests-1", problem_statement="p", repo="psf/requests", grading=grading.model_copy(
        update={"fail_to_pass": ["test_requests.py::gone"]}))  # fmt: skip
    log = pytest_log(get_fails_with="AssertionError: 404 != 200", body_fails=True).replace(
        "AssertionError: '0' != '3'", NAME_RESOLUTION
    )
    grade = GradeResult(False, True, statuses, ("test_requests.py::gone",), ("test_requests.py::gone",), log)
    fields = grade_fields(task, Attempt(patch="x", grade=grade))
    assert "network_error" not in fields and fields["failed_tests"] == []
