"""Before a run: which grader grades each instance, which instances (still) run, and the
SWE-bench rows and harness specifications the run is made from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tasks import Task

if TYPE_CHECKING:
    from evals.official import HarnessCheck

PENDING = "pending_official"
"""The status of an instance solved and waiting for the official harness's verdict."""


@dataclass(frozen=True)
class GradePlan:
    """How one instance is graded: by the `project` sandbox grader, the `official` harness
    (in its instance `image`), or not at all (`error`, with the reason)."""

    kind: str
    reason: str = ""
    image: str = ""


def is_swebench_row(task: Task) -> bool:
    return task.grading.log_parser == "swebench" and bool(task.repo)


def plan_grading(task: Task, grader: str, harness: HarnessCheck) -> GradePlan:
    """Pick the grader of one instance; the reason names what is missing when none can."""
    if task.id in harness.ready and grader in ("auto", "official"):
        return GradePlan("official", image=harness.ready[task.id])
    if grader == "official":
        why = harness.not_ready.get(task.id) or "not a SWE-bench row: the official harness grades only those"
        return GradePlan("error", f"the official harness cannot grade it here: {why}")
    if task.workspace is not None and not task.unavailable:
        return GradePlan("project")
    reason = task.unavailable or "no workspace"
    if task.id in harness.not_ready:
        reason += f"; official harness: {harness.not_ready[task.id]}"
    return GradePlan("error", reason)


def needs_run(record: dict | None, plan: GradePlan, retry_errors: bool) -> bool:
    """Whether an instance runs (again): not yet run, an error to retry, or left waiting for
    an official harness that can no longer grade it."""
    if record is None:
        return True
    if record["status"] == PENDING:
        return plan.kind != "official"
    return record["status"] == "error" and retry_errors


def harness_specs(tasks: list[Task]) -> dict[str, dict]:
    """The harness specification each (repository, version) of the run's SWE-bench rows was
    made from, with how many instances use it, keyed `repo version`, sorted."""
    specs: dict[str, dict] = {}
    for task in tasks:
        if task.harness_spec:
            key = f"{task.harness_spec['repo']} {task.harness_spec['version']}"
            specs.setdefault(key, {**task.harness_spec, "instances": 0})["instances"] += 1
    return dict(sorted(specs.items()))


def swebench_rows(dataset: str, tasks: list[Task]) -> list[dict]:
    """The raw rows of the SWE-bench tasks (the official harness needs them whole)."""
    wanted = {t.id for t in tasks if is_swebench_row(t)}
    if not wanted:
        return []
    from tasks.swebench import HF_DATASETS, read_rows

    source = HF_DATASETS[0] if dataset == "verified" else dataset
    return [row for _, row in read_rows(source) if row.get("instance_id") in wanted]
