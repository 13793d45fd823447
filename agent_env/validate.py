"""Proof that tasks work: the gold patch resolves each one, and the empty patch does not.

`validate_tasks` grades every task for real (in `local` or `docker` sandboxes) and yields
one `TaskValidation` per task as it is done; `python -m agent_env validate` prints them. A task
that cannot run here (no clone, an environment that cannot be built, a required test that
failed for want of the network) is `unavailable`, with the reason, apart from tasks that
fail. `judge` holds the rules (dataset rows and authored tasks differ: tasks/README.md).
"""

from __future__ import annotations

import difflib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent_env.environments import prepare_environments
from agent_env.grading import (
    GradeResult,
    GradingError,
    failure_cause,
    grade_patch,
    missing_modules,
    network_failure,
)
from agent_env.grading.runs import grading_spec_for
from agent_env.oracle import oracle_patch
from sandboxes import Sandbox, SandboxError, SandboxSpec, make_sandbox
from tasks import Task, TaskError, patch_files
from tasks.log_parsers import PASSED, log_parser

log = logging.getLogger(__name__)

Status = Literal["ok", "failed", "unavailable"]


@dataclass(frozen=True)
class TaskValidation:
    """The verdict on one task: `ok` (`checked` says what was proved), `failed` (the task is
    broken: `problems` say how) or `unavailable` (it cannot be graded here: `reason` says
    why). `seconds`: how long grading it took; `log`: the file with both runs' output
    (when asked for); `warnings`: what is odd but allowed (see `judge`); `failed_tests`
    ((test, status) of each required test the gold run did not pass) and `missing_tests`
    (required tests its log does not name): disjoint, for a row that is not ok."""

    task_id: str
    status: Status
    problems: tuple[str, ...] = ()
    reason: str = ""
    checked: str = ""
    seconds: float = 0.0
    warnings: tuple[str, ...] = ()
    log: str = ""
    failed_tests: tuple[tuple[str, str], ...] = ()
    missing_tests: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def is_dataset_row(task: Task) -> bool:
    """A row of a dataset (SWE-bench), not a task authored here: its FAIL_TO_PASS lists come
    from the dataset, which checks only that the gold patch resolves the row and the empty
    patch does not."""
    return bool(task.repo)


def validate_task(
    task: Task, sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None, log_dir: Path | None = None
) -> TaskValidation:
    """Grade `task`'s gold patch and the empty patch (in sandboxes from `sandboxes_factory`,
    default: local ones) and say whether the task is sound (`judge`); with `log_dir`, both
    runs' output is kept in `log_dir/<task id>.log`. `task` has its environment prepared
    already (`prepare_environment`)."""
    if task.unavailable:
        return TaskValidation(task.id, "unavailable", reason=f"not runnable here: {task.unavailable}")
    start = time.monotonic()
    try:
        gold_patch = task.gold_patch
        if not gold_patch and task.verifier is not None and task.verifier.solution_dir is not None:
            gold_patch = oracle_patch(task, sandbox_factory or make_sandbox)
        elif not gold_patch and task.verifier is not None:
            raise TaskError(f"{task.source}: no solution/solve.sh: needed to prove the task can be solved")
        if not gold_patch:
            raise TaskError(f"{task.source}: field 'gold_patch': needed to prove the task can be solved")
        gold = grade_patch(task, gold_patch, sandbox_factory=sandbox_factory)
        empty = grade_patch(task, "", sandbox_factory=sandbox_factory)
    except (TaskError, GradingError) as exc:
        return TaskValidation(task.id, "failed", problems=(str(exc),), seconds=time.monotonic() - start)
    log = _write_log(log_dir, task.id, gold, empty) if log_dir is not None else ""
    if task.verifier is not None:
        return judge_script(task, gold, empty, time.monotonic() - start, log)
    required = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    reported = None
    if any(t in gold.missing and t in empty.missing for t in required):
        reported = reported_ids(task, sandbox_factory or make_sandbox)
    return judge(task, gold, empty, time.monotonic() - start, log, reported)


def reported_ids(task: Task, sandbox_factory: Callable[[SandboxSpec], Sandbox]) -> dict[str, str]:
    """The test ids the task's own test command (not narrowed to its listed ids) reports with
    the gold patch: what a listed id that no run names is compared with. Empty when that run
    cannot be made."""
    try:
        with sandbox_factory(grading_spec_for(task)) as sandbox:
            for name, text in (("gold", task.gold_patch), ("test", task.test_patch)):
                if text:
                    sandbox.write_file(f"/tmp/validate/{name}.patch", text)
                    sandbox.exec(f"git apply /tmp/validate/{name}.patch", timeout=60, fresh=True)
            run = sandbox.exec(task.grading.test_command, timeout=task.limits.grading_timeout_s, fresh=True)
        return log_parser(task.grading.log_parser, task.repo)(run.output)
    except (SandboxError, TaskError, ValueError) as exc:
        log.warning("task %s: the test command's own ids could not be listed: %s", task.id, exc)
        return {}


def _write_log(log_dir: Path, task_id: str, gold: GradeResult, empty: GradeResult) -> str:
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"{task_id}.log"
    path.write_text(f"=== gold patch ===\n{gold.log}\n=== empty patch ===\n{empty.log}")
    return str(path)


def judge(
    task: Task,
    gold: GradeResult,
    empty: GradeResult,
    seconds: float,
    log: str = "",
    reported: dict[str, str] | None = None,
) -> TaskValidation:
    """The verdict on `task` from its gold and empty runs. Every task: the gold patch
    applies and resolves it, and the empty patch does not. An authored task (built-in or
    written here) must also have every FAIL_TO_PASS test fail without the fix, else the
    list is wrong; a dataset row (`is_dataset_row`) keeps the dataset's own rule, and a
    FAIL_TO_PASS test that passes before the fix is a warning naming it. A gold run whose
    required test failed on the network is not gradable offline (`network_failure`), nor one
    whose only unmet required tests were skipped for an optional module the environment
    lacks (`missing_modules`; a required test that failed outright still fails the row). A
    listed id that neither run names is not found, with the closest id of `reported` (what
    the task's unnarrowed test command reports, `reported_ids`)."""
    grading = task.grading
    required = [*grading.fail_to_pass, *grading.pass_to_pass]
    failed_tests = tuple((t, gold.statuses[t]) for t in required if t in gold.statuses and gold.statuses[t] != PASSED)
    missing_tests = tuple(t for t in required if t not in gold.statuses)
    common = {"seconds": seconds, "log": log}
    if not gold.resolved and (line := network_failure(gold.log, gold.statuses, required)):
        reason = f"not gradable offline: a required test needs the network ({line})"
        return TaskValidation(task.id, "unavailable", reason=reason, **common)
    skipped = missing_modules(gold.log, missing_tests)
    if not gold.resolved and not failed_tests and skipped and len(skipped) == len(missing_tests):
        test, module = next(iter(skipped.items()))
        reason = (
            "not gradable here: a required test is skipped for a module this environment lacks "
            f"({test}: could not import '{module}')"
        )
        return TaskValidation(task.id, "unavailable", reason=reason, **common)
    # An id neither run reports is misspelled (or not run by the test command), not the gold patch's fault.
    not_found = [t for t in required if t in gold.missing and t in empty.missing]
    seen = reported or {**empty.statuses, **gold.statuses}
    if not_found and not seen:  # nothing ran: the runner crashed, so no id is "misspelled"
        problems = [_reported_nothing(gold.log, len(not_found))]
    else:
        problems = [_not_found(test, task, seen) for test in not_found]
    failing = [t for t, _ in failed_tests if t not in not_found]
    missing = [t for t in missing_tests if t not in not_found]
    if not gold.patch_applied:
        problems.append(_not_applied(gold.log, task.gold_patch))
    elif not gold.resolved and (failing or missing or gold.problems):
        lists = [f"failing: {', '.join(failing)}"] * bool(failing) + [f"missing: {', '.join(missing)}"] * bool(missing)
        # The cause first, in one line: what the first failing test failed with.
        cause = next((c for t in failing if (c := failure_cause(gold.log, t))), None)
        said = f": {failing[0]} fails with `{cause}`" if cause and not gold.problems else ""
        problems.append(f"gold patch does not resolve it{said} ({'; '.join(gold.problems) or '; '.join(lists)})")
    if gold.dropped:
        problems.append(
            "the gold patch changes protected paths, which never reach the grader: "
            + ", ".join(f"{path} ({reason})" for path, reason in gold.dropped)
            + " (list source paths the rule mistakes for tests in grading.unprotect)"
        )
    if empty.resolved:
        problems.append("the empty patch already resolves it (FAIL_TO_PASS tests pass without a fix)")
    passing_before = [t for t in grading.fail_to_pass if t not in empty.failed]
    warnings: tuple[str, ...] = ()
    if passing_before and is_dataset_row(task):
        warnings = tuple(
            f"FAIL_TO_PASS test {t} passes without the fix (valid by the dataset's rule: the gold patch resolves "
            "the row and the empty patch does not)"
            for t in passing_before
        )
    elif passing_before:
        problems.append(f"FAIL_TO_PASS tests pass without a fix: {passing_before}")
    if problems:
        return TaskValidation(
            task.id, "failed", problems=tuple(problems), warnings=warnings, failed_tests=failed_tests,
            missing_tests=missing_tests, **common,
        )  # fmt: skip
    f2p, p2p = len(grading.fail_to_pass), len(grading.pass_to_pass)
    failing_before = f2p - len(passing_before)
    checked = (
        f"gold patch resolves it ({f2p} FAIL_TO_PASS and {p2p} PASS_TO_PASS pass); "
        f"empty patch does not ({failing_before if failing_before == f2p else f'{failing_before} of {f2p}'} "
        "FAIL_TO_PASS fail)"
    )
    return TaskValidation(task.id, "ok", checked=checked, warnings=warnings, **common)


def judge_script(task: Task, gold: GradeResult, empty: GradeResult, seconds: float, log: str = "") -> TaskValidation:
    """The verdict on a task whose verifier is a script (Harbor tasks): the oracle's change
    applies, reaches the verifier whole and earns the full reward (1) with every canary twin
    scoring lower; doing nothing earns less. What the grader could not check (no canary of a
    shell-only verifier) is a warning."""
    problems = []
    if not gold.patch_applied:
        problems.append(f"the oracle's change does not apply ({'; '.join(gold.problems)[:300]})")
    elif gold.dropped:
        dropped = ", ".join(f"{path} ({reason})" for path, reason in gold.dropped)
        problems.append(f"the oracle changes paths that never reach the verifier: {dropped}")
    elif not gold.resolved:
        why = "; ".join(gold.problems) or f"the verifier gave {gold.score:g}, not 1"
        problems.append(f"the oracle (solution/solve.sh) does not resolve it: {why}")
    if empty.score >= gold.score:
        problems.append(f"doing nothing already scores {empty.score:g} (the oracle: {gold.score:g})")
    common = {"seconds": seconds, "log": log, "warnings": gold.notes}
    if problems:
        return TaskValidation(task.id, "failed", problems=tuple(problems), **common)
    twins = f"none of its {len(gold.canaries)} canary twin(s) paid" if gold.canaries else "no canary twin"
    checked = f"the oracle scores {gold.score:g} ({twins}); doing nothing scores {empty.score:g}"
    return TaskValidation(task.id, "ok", checked=checked, **common)


def _not_found(test: str, task: Task, reported: dict[str, str]) -> str:
    """A listed test id the test output never mentions, with the closest id it does."""
    field = "FAIL_TO_PASS" if test in task.grading.fail_to_pass else "PASS_TO_PASS"
    listed = {*task.grading.fail_to_pass, *task.grading.pass_to_pass}
    others = [t for t in reported if t not in listed]
    close = difflib.get_close_matches(test, others, n=1) or sorted(t for t in others if t.endswith(test))[:1]
    hint = (
        f"did you mean {close[0]}?"
        if close
        else f"none of the {len(reported)} ids it reports is close: does grading.test_command run it?"
    )
    return f"{field}: test id {test} not found in the test output ({hint})"


def _reported_nothing(log: str, count: int) -> str:
    """The cause when neither run reported a single test: the test command itself failed
    (an import error, a runner that crashes on this version), with the last line it printed."""
    lines = [line.strip() for line in log.splitlines() if line.strip() and not line.startswith("===")]
    last = lines[-1][:300] if lines else "no output"
    return (
        f"the test command reported no test at all, so none of the {count} required tests can be found "
        f"(the runner crashed or collected nothing; its last line: {last})"
    )


def _not_applied(log: str, patch: str) -> str:
    """The files `git apply` refused and its reason, in one line."""
    errors = [line.removeprefix("error: ").strip() for line in log.splitlines() if line.startswith("error: ")]
    touched = patch_files(patch)
    files = [f for f in touched if any(e.startswith((f"{f}:", f"patch failed: {f}:")) for e in errors)]
    failed_hunks = {f for f in files if any(e.startswith(f"patch failed: {f}:") for e in errors)}
    reasons = [e for e in errors if not any(e == f"{f}: patch does not apply" for f in failed_hunks)]
    why = "; ".join(reasons) or (log.strip().splitlines() or ["no output"])[-1]
    return f"gold patch does not apply{' to ' + ', '.join(files) if files else ''} (git apply: {why[:300]})"


def validate_tasks(
    tasks: Iterable[Task], sandbox: str = "local", log_dir: Path | None = None, *, build_workers: int | None = None
) -> Iterator[TaskValidation]:
    """Prepare the tasks' environments for `sandbox` (`local` or `docker`, on up to
    `build_workers` threads), then validate each task in turn, yielding its verdict as soon
    as it is known (logs in `log_dir`)."""
    prepared = prepare_environments(list(tasks), sandbox, workers=build_workers)
    factory = None if sandbox == "local" else (lambda spec: make_sandbox(spec, sandbox))
    for task in prepared:
        yield validate_task(task, factory, log_dir)
