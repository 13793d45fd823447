"""Honest grading: a patch is judged in a fresh sandbox, by the task's hidden tests.

SWE-bench's contract: start from the pristine workspace, apply the agent's patch, restore
every file the test patch touches to its pristine state (so edits to those tests are
undone), apply the test patch, run the test command, and read per-test statuses from the
log. Resolved means every FAIL_TO_PASS and every PASS_TO_PASS test passed (an expected
failure counts as passed, as in SWE-bench); a test missing from the log, or skipped, counts
as failed (SWE-bench ignores skipped ones; a reward must not). A broken sandbox or a test run that times out is an
infrastructure error (`GradingError`), never an unresolved result.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes import Sandbox, SandboxError, SandboxSpec, make_sandbox
from tasks import Task, prepare_workspace
from tasks.log_parsers import PASSED, XFAIL, log_parser

AGENT_PATCH = "/tmp/grading/agent.patch"
TEST_PATCH = "/tmp/grading/test.patch"


# What a test run prints when a test reached for the network, which sandboxes never have:
# such a test fails whatever the patch (SWE-bench's requests rows call httpbin.org).
NETWORK_ERRORS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname provided",
    "Network is unreachable",
    "Failed to establish a new connection",
    "getaddrinfo failed",
    "Could not resolve host",
    "No route to host",
)


def network_error(log: str) -> str | None:
    """The first line of a test log that shows a test reaching for the network, if any."""
    for line in log.splitlines():
        if any(sign in line for sign in NETWORK_ERRORS):
            return line.strip()[:300]
    return None


class GradingError(RuntimeError):
    """Grading could not reach a verdict (infrastructure); the message names the task."""


@dataclass(frozen=True)
class GradeResult:
    resolved: bool
    patch_applied: bool
    statuses: dict[str, str] = field(default_factory=dict)
    failed: tuple[str, ...] = ()
    """FAIL_TO_PASS / PASS_TO_PASS tests that did not pass (missing ones included)."""
    missing: tuple[str, ...] = ()
    """FAIL_TO_PASS / PASS_TO_PASS tests the log does not mention at all."""
    log: str = ""


def sandbox_spec_for(task: Task) -> SandboxSpec:
    """The sandbox a task's agent works in: its prepared workspace at the workdir, in the
    image and with the env, network and limits of the task's sandbox definition (if any);
    a command's timeout is the task's `limits.command_timeout_s`."""
    if task.sandbox:
        from sandboxes.images import parse_definition  # lazy: it needs yaml and more

        spec = parse_definition(task.sandbox, Path(task.source or "task.yaml")).spec()
    else:
        spec = SandboxSpec()
    limits = dataclasses.replace(spec.limits, timeout_s=task.limits.command_timeout_s)
    return dataclasses.replace(spec, workspace=prepare_workspace(task), limits=limits)


def _restore_test_files(task: Task) -> str:
    lines = []
    for path in task.test_files():
        quoted = shlex.quote(path)
        lines.append(
            f"if git cat-file -e HEAD:{quoted} 2>/dev/null; then git checkout -q HEAD -- {quoted}; "
            f"else rm -rf {quoted}; fi"
        )
    return "\n".join(lines)


def grade_patch(
    task: Task,
    patch: str,
    *,
    sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None,
) -> GradeResult:
    """Grade `patch` (a unified diff against the task's workspace) for `task`."""
    factory = sandbox_factory or make_sandbox
    parser = log_parser(task.grading.log_parser, task.repo)
    try:
        with factory(sandbox_spec_for(task)) as sandbox:
            if patch.strip():
                sandbox.write_file(AGENT_PATCH, patch if patch.endswith("\n") else patch + "\n")
                applied = sandbox.exec(
                    f"git apply --whitespace=nowarn {AGENT_PATCH} || patch --batch --fuzz=5 -p1 -i {AGENT_PATCH}",
                    timeout=60,
                )
                if applied.exit_code != 0:
                    return GradeResult(resolved=False, patch_applied=False, log=applied.output)
            if task.test_patch:
                sandbox.write_file(TEST_PATCH, task.test_patch)
                restored = sandbox.exec(
                    f"{_restore_test_files(task)}\ngit apply --whitespace=nowarn {TEST_PATCH}", timeout=60
                )
                if restored.exit_code != 0:
                    raise GradingError(
                        f"task {task.id}: its test patch does not apply ({task.source}): {restored.output.strip()}"
                    )
            run = sandbox.exec(task.grading.test_command, timeout=task.limits.grading_timeout_s)
    except SandboxError as exc:
        raise GradingError(f"task {task.id}: sandbox failed during grading: {exc}") from exc
    if run.timed_out:
        raise GradingError(f"task {task.id}: test run timed out after {task.limits.grading_timeout_s} s")
    statuses = parser(run.output)
    wanted = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    # SWE-bench's rule, with one deliberate difference: a SKIPPED required test fails here
    # (the official harness ignores it), since code under test could raise SkipTest for reward.
    failed = tuple(t for t in wanted if statuses.get(t) not in (PASSED, XFAIL))
    missing = tuple(t for t in wanted if t not in statuses)
    return GradeResult(
        resolved=not failed,
        patch_applied=True,
        statuses=statuses,
        failed=failed,
        missing=missing,
        log=run.output,
    )
