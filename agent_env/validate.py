"""Proof that tasks work: the gold patch resolves each one, and the empty patch does not.

`validate_tasks` grades every task for real (in `local` or `docker` sandboxes) and yields
one `TaskValidation` per task as it is done; `python -m tasks validate` prints them. A task
that cannot run here (no clone, an environment that cannot be built, tests that need the
network) is `unavailable`, with the reason, apart from tasks that fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from agent_env.environments import prepare_environments
from agent_env.grading import GradingError, grade_patch, network_error
from sandboxes import Sandbox, SandboxSpec, make_sandbox
from tasks import Task, TaskError

Status = Literal["ok", "failed", "unavailable"]


@dataclass(frozen=True)
class TaskValidation:
    """The verdict on one task: `ok`, `failed` (the task is broken: `problems` say how) or
    `unavailable` (it cannot be graded here: `reason` says why)."""

    task_id: str
    status: Status
    problems: tuple[str, ...] = ()
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def validate_task(task: Task, sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None) -> TaskValidation:
    """Grade `task`'s gold patch and the empty patch (in sandboxes from `sandboxes_factory`,
    default: local ones) and say whether the task is sound. `task` has its environment
    prepared already (`prepare_environment`)."""
    if task.unavailable:
        return TaskValidation(task.id, "unavailable", reason=f"not runnable here: {task.unavailable}")
    try:
        if not task.gold_patch:
            raise TaskError(f"{task.source}: field 'gold_patch': needed to prove the task can be solved")
        gold = grade_patch(task, task.gold_patch, sandbox_factory=sandbox_factory)
        empty = grade_patch(task, "", sandbox_factory=sandbox_factory)
    except (TaskError, GradingError) as exc:
        return TaskValidation(task.id, "failed", problems=(str(exc),))
    if not gold.resolved and (line := network_error(gold.log)):
        return TaskValidation(task.id, "unavailable", reason=f"not gradable offline: a test needs the network ({line})")
    problems = []
    if not gold.resolved:
        why = "; ".join(gold.problems) or f"failing: {', '.join(gold.failed)}"
        problems.append(f"gold patch does not resolve it ({why})")
    if gold.dropped:
        problems.append(
            "the gold patch changes protected paths, which never reach the grader: "
            + ", ".join(f"{path} ({reason})" for path, reason in gold.dropped)
            + " (list source paths the rule mistakes for tests in grading.unprotect)"
        )
    if empty.resolved:
        problems.append("the empty patch already resolves it (FAIL_TO_PASS tests pass without a fix)")
    passing_before = [t for t in task.grading.fail_to_pass if t not in empty.failed]
    if passing_before:
        problems.append(f"FAIL_TO_PASS tests pass without a fix: {passing_before}")
    return TaskValidation(task.id, "failed" if problems else "ok", problems=tuple(problems))


def validate_tasks(tasks: Iterable[Task], sandbox: str = "local") -> Iterator[TaskValidation]:
    """Prepare the tasks' environments for `sandbox` (`local` or `docker`), then validate
    each task in turn, yielding its verdict as soon as it is known."""
    prepared = prepare_environments(list(tasks), sandbox)
    factory = None if sandbox == "local" else (lambda spec: make_sandbox(spec, sandbox))
    for task in prepared:
        yield validate_task(task, factory)
