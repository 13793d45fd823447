"""One instance: solve it (an agent or an oracle, `evals.runner`), grade it with the
project's sandbox grader unless the official harness will, and make its record (a line of
`results.jsonl`) and its trajectory (`trajectories/<id>.json`). Failures of the machinery
around the model become an `error` record, never unresolved."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from agent_env import GradingError, network_failure
from evals.official import OfficialVerdict, run_harness
from evals.plan import PENDING, GradePlan
from evals.report import status_of
from evals.runner import Attempt, Solver
from evals.store import RunStore, trajectory_name
from evals.swebench_verdict import verdict
from sandboxes import SandboxError
from tasks import Task, TaskError
from trainer.inference.engines.base import EngineError

logger = logging.getLogger(__name__)

# Failures of the machinery around the model: recorded as errors, never as unresolved.
INFRA_ERRORS = (SandboxError, GradingError, EngineError, TaskError)
# Rules of the grading contract that mean the test run's account cannot be trusted: an
# evaluation fails them as training does (XFAIL / SKIPPED follow SWE-bench's own rule here).
INTEGRITY_RULES = frozenset(
    {"patch_rejected", "patch_too_large", "canary_passed", "tail_not_reached", "grading_crashed_by_patch"}
)
LOG_TAIL_CHARS = 4000


def base_record(task: Task) -> dict:
    return {"instance_id": task.id, "repo": task.repo or task.family, "difficulty": task.difficulty}


def listed_failures(failed: Sequence[str], missing: Sequence[str]) -> dict[str, list[str]]:
    """`failed_tests` (named in the log with a failing status) and `missing_tests` (not in
    the log at all) of a record: SWE-bench counts a missing test among the failures, but a
    report lists each test once, under what happened to it."""
    return {"failed_tests": [t for t in failed if t not in missing], "missing_tests": list(missing)}


def grade_fields(task: Task, attempt: Attempt) -> dict:
    """The project grader's result under SWE-bench's rule (`evals.swebench_verdict.verdict`)."""
    grade = attempt.grade
    if grade is None:  # the episode ended without a grade: the agent broke its sandbox
        return {"resolved": False, "note": f"ended: {attempt.end}", "failed_tests": [], "grader": "project"}
    if not grade.patch_applied:
        return {"resolved": False, "note": "the patch does not apply", "failed_tests": [], "grader": "project"}
    if task.verifier is not None:  # a verifier script (Harbor tasks): its reward decides, not a test list
        fields = {"resolved": grade.resolved, "grader": "verifier", "reward": grade.score, "failed_tests": []}
        if grade.rewards:
            fields["rewards"] = dict(grade.rewards)
        if grade.blocked:
            fields["reward_hack_blocked"] = list(grade.blocked)
        if grade.problems:
            fields["note"] = "; ".join(grade.problems)
        return fields
    result = verdict(grade.statuses, task.grading.fail_to_pass, task.grading.pass_to_pass)
    # SWE-bench's rule decides XFAIL and SKIPPED; a forged or incomplete test run fails here too.
    forged = [rule for rule in grade.blocked if rule in INTEGRITY_RULES]
    fields = {
        # The verdict run's exit status decides as it does for training: a log cannot pass a test.
        "resolved": result.resolved and not forged and grade.exit_code == 0,
        "grader": "project",
        **listed_failures(result.failed, result.missing),
    }
    if result.ignored:
        fields["ignored_tests"] = list(result.ignored)
    if grade.blocked:
        fields["reward_hack_blocked"] = list(grade.blocked)
    if forged:
        fields["note"] = "; ".join(grade.problems) or ", ".join(forged)
    if grade.resolved != fields["resolved"]:  # agent_env's stricter rule (see evals.swebench_verdict)
        fields["agent_env_resolved"] = grade.resolved
    required = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    if not result.resolved and (line := network_failure(grade.log, grade.statuses, required)):
        fields["network_error"] = line  # a required test failed on the network: see evals.quarantine
    return fields


def trajectory_of(task: Task, model: str, record: dict, attempt: Attempt | None, started_at: str) -> dict:
    grade = attempt.grade if attempt else None
    return {
        "instance_id": task.id,
        "model": model,
        "status": record["status"],
        "resolved": record.get("resolved", False),
        "grader": record.get("grader"),
        "error": record.get("error"),
        "patch": attempt.patch if attempt else "",
        "turns": record.get("turns", 0),
        "tokens": record.get("tokens", 0),
        "policy_tokens": record.get("policy_tokens", 0),
        "end": record.get("end"),
        "timings": {
            "started_at": started_at,
            "solve_s": attempt.solve_s if attempt else None,
            "grade_s": attempt.grade_s if attempt else None,
            "total_s": record["seconds"],
            **({"cost": attempt.cost} if attempt and attempt.cost else {}),
        },
        "grade": None
        if grade is None
        else {
            "patch_applied": grade.patch_applied,
            "failed_tests": record.get("failed_tests", []),
            "missing_tests": record.get("missing_tests", []),
            "statuses": grade.statuses,
            "log_tail": grade.log[-LOG_TAIL_CHARS:],
        },
        "transcript": attempt.transcript if attempt else [],
    }


def attempt_instance(task: Task, index: int, solver: Solver, plan: GradePlan, model: str) -> tuple[dict, dict]:
    """Solve and (unless the official harness will) grade one instance: its record and its
    trajectory. Infrastructure failures become an `error` record naming the instance."""
    record, attempt = base_record(task), None
    started, started_at = time.monotonic(), datetime.now(UTC).isoformat(timespec="seconds")
    try:
        if plan.kind == "error":
            raise GradingError(f"task {task.id}: {plan.reason}")
        if solver.needs_workspace and (task.workspace is None or task.unavailable):
            raise GradingError(f"task {task.id}: the agent cannot run: {task.unavailable or 'no workspace'}")
        attempt = solver(task, index, grade=plan.kind == "project")
    except INFRA_ERRORS as exc:
        record.update(error=str(exc), patch="", resolved=False)
        if task.unavailable:  # its environment cannot be had here: not runnable, reported apart
            record["unavailable"] = task.unavailable
    except Exception as exc:  # a bug, not infrastructure: stop, but say which instance
        raise RuntimeError(f"instance {task.id}: {type(exc).__name__}: {exc}") from exc
    if attempt is not None:
        record.update(
            patch=attempt.patch,
            turns=attempt.turns,
            tokens=attempt.tokens,
            policy_tokens=attempt.policy_tokens,
            end=attempt.end,
            resolved=False,
        )
        if attempt.cost:
            record["cost"] = attempt.cost
        if plan.kind == "project":
            record.update(grade_fields(task, attempt))
    record["status"] = status_of(record)
    if plan.kind == "official" and record["status"] not in ("error", "empty_patch"):
        record.update(status=PENDING, grader="official")
    record["seconds"] = round(time.monotonic() - started, 3)
    record["trajectory"] = f"trajectories/{trajectory_name(task.id)}"
    return record, trajectory_of(task, model, record, attempt, started_at)


# -- a run's official grading (`evals.official` runs the harness) ------------------------------


def grade_officially(
    pending: list[dict],
    *,
    rows: list[dict],
    plans: dict[str, GradePlan],  # the run's; the harness reads the rows
    predictions: dict[str, dict],
    workdir: Path,
    run_id: str,
    workers: int,
    timeout_s: int,
) -> dict[str, OfficialVerdict]:
    """Run the official harness on the pending instances' predictions."""
    batch = [predictions[record["instance_id"]] for record in pending]
    logger.info("official harness: grading %d instance(s); log: %s", len(batch), workdir / "harness.log")
    return run_harness(rows, batch, workdir=workdir, run_id=run_id, max_workers=workers, timeout_s=timeout_s)


def apply_official(record: dict, official: OfficialVerdict) -> dict:
    final = {**record, "status": official.status, "resolved": official.status == "resolved", "grader": "official"}
    if official.status == "error":
        final["error"] = f"task {record['instance_id']}: {official.note}"
    elif official.note:
        final["note"] = official.note
    if official.tests_status:
        failures = [
            *official.tests_status.get("FAIL_TO_PASS", {}).get("failure", []),
            *official.tests_status.get("PASS_TO_PASS", {}).get("failure", []),
        ]
        final.update(listed_failures(failures, record.get("missing_tests", [])))
    final["official_log_dir"] = official.log_dir
    return final


def record_official_in_trajectory(store: RunStore, record: dict, official: OfficialVerdict) -> None:
    path = store.root / record["trajectory"]
    data = json.loads(path.read_text()) if path.exists() else {"instance_id": record["instance_id"]}
    data.update(status=record["status"], resolved=record["resolved"], grader="official", error=record.get("error"))
    data["official"] = {"status": official.status, "note": official.note, "tests_status": official.tests_status}
    data["official"]["log_dir"] = official.log_dir
    store.write_trajectory(record["instance_id"], data)
