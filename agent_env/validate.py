"""Proof that tasks work: the gold patch resolves each one, and the empty patch does not.

`validate_tasks` grades every task for real (in `local` or `docker` sandboxes) and yields
one `TaskValidation` per task as it is done; `python -m tasks validate` prints them. A task
that cannot run here (no clone, an environment that cannot be built, tests that need the
network) is `unavailable`, with the reason, apart from tasks that fail.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from agent_env.environments import prepare_environments
from agent_env.grading import GradingError, grade_patch, network_error
from sandboxes import Sandbox, SandboxSpec, make_sandbox
from tasks import Task, TaskError, patch_files

Status = Literal["ok", "failed", "unavailable"]


@dataclass(frozen=True)
class TaskValidation:
    """The verdict on one task: `ok` (`checked` says what was proved), `failed` (the task is
    broken: `problems` say how) or `unavailable` (it cannot be graded here: `reason` says
    why). `seconds`: how long grading it took."""

    task_id: str
    status: Status
    problems: tuple[str, ...] = ()
    reason: str = ""
    checked: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def validate_task(task: Task, sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None) -> TaskValidation:
    """Grade `task`'s gold patch and the empty patch (in sandboxes from `sandboxes_factory`,
    default: local ones) and say whether the task is sound. `task` has its environment
    prepared already (`prepare_environment`)."""
    if task.unavailable:
        return TaskValidation(task.id, "unavailable", reason=f"not runnable here: {task.unavailable}")
    start = time.monotonic()
    try:
        if not task.gold_patch:
            raise TaskError(f"{task.source}: field 'gold_patch': needed to prove the task can be solved")
        gold = grade_patch(task, task.gold_patch, sandbox_factory=sandbox_factory)
        empty = grade_patch(task, "", sandbox_factory=sandbox_factory)
    except (TaskError, GradingError) as exc:
        return TaskValidation(task.id, "failed", problems=(str(exc),), seconds=time.monotonic() - start)
    seconds = time.monotonic() - start
    if not gold.resolved and (line := network_error(gold.log)):
        return TaskValidation(
            task.id, "unavailable", reason=f"not gradable offline: a test needs the network ({line})", seconds=seconds
        )
    grading = task.grading
    # An id neither run reports is misspelled (or not run by the test command), not the gold patch's fault.
    not_found = [t for t in (*grading.fail_to_pass, *grading.pass_to_pass) if t in gold.missing and t in empty.missing]
    problems = [_not_found(test, task, {**empty.statuses, **gold.statuses}) for test in not_found]
    failing = [t for t in gold.failed if t not in not_found]
    if not gold.patch_applied:
        problems.append(_not_applied(gold.log, task.gold_patch))
    elif not gold.resolved and (failing or gold.problems):
        why = "; ".join(gold.problems) or f"failing: {', '.join(failing)}"
        problems.append(f"gold patch does not resolve it ({why})")
    if gold.dropped:
        problems.append(
            "the gold patch changes protected paths, which never reach the grader: "
            + ", ".join(f"{path} ({reason})" for path, reason in gold.dropped)
            + " (list source paths the rule mistakes for tests in grading.unprotect)"
        )
    if empty.resolved:
        problems.append("the empty patch already resolves it (FAIL_TO_PASS tests pass without a fix)")
    passing_before = [t for t in grading.fail_to_pass if t not in empty.failed]
    if passing_before:
        problems.append(f"FAIL_TO_PASS tests pass without a fix: {passing_before}")
    if problems:
        return TaskValidation(task.id, "failed", problems=tuple(problems), seconds=seconds)
    f2p, p2p = len(grading.fail_to_pass), len(grading.pass_to_pass)
    checked = (
        f"gold patch resolves it ({f2p} FAIL_TO_PASS and {p2p} PASS_TO_PASS pass); "
        f"empty patch does not ({f2p} FAIL_TO_PASS fail)"
    )
    return TaskValidation(task.id, "ok", checked=checked, seconds=seconds)


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


def _not_applied(log: str, patch: str) -> str:
    """The files `git apply` refused and its reason, in one line."""
    errors = [line.removeprefix("error: ").strip() for line in log.splitlines() if line.startswith("error: ")]
    touched = patch_files(patch)
    files = [f for f in touched if any(e.startswith((f"{f}:", f"patch failed: {f}:")) for e in errors)]
    failed_hunks = {f for f in files if any(e.startswith(f"patch failed: {f}:") for e in errors)}
    reasons = [e for e in errors if not any(e == f"{f}: patch does not apply" for f in failed_hunks)]
    why = "; ".join(reasons) or (log.strip().splitlines() or ["no output"])[-1]
    return f"gold patch does not apply{' to ' + ', '.join(files) if files else ''} (git apply: {why[:300]})"


def validate_tasks(tasks: Iterable[Task], sandbox: str = "local") -> Iterator[TaskValidation]:
    """Prepare the tasks' environments for `sandbox` (`local` or `docker`), then validate
    each task in turn, yielding its verdict as soon as it is known."""
    prepared = prepare_environments(list(tasks), sandbox)
    factory = None if sandbox == "local" else (lambda spec: make_sandbox(spec, sandbox))
    for task in prepared:
        yield validate_task(task, factory)
