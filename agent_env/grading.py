"""Honest grading: a patch is judged in a fresh sandbox, by the task's hidden tests, and only
for the agent's change to the code under test.

The policy being trained is an adversary of this module, so the contract is stricter than
SWE-bench's (`tasks/README.md` states it for users):

1. **Only the agent's change to the code under test counts.** Grading starts from the
   pristine workspace and applies the agent's diff with every protected path dropped
   (tests, runner configuration, start-up hooks, modules shadowing the standard library
   or the runner: `agent_env.protected`), with `git apply` only: a patch that needs fuzz,
   or that git refuses, is not applied (`patch_rejected`). Then the test patch.
2. **Results the code under test cannot forge.** The test command runs as a fresh process
   (not in a shell the agent ever touched), so its exit status comes from the kernel. For
   `python -m unittest` and `python -m pytest` commands it runs under
   `agent_env.runner_guard`, which checks that the runner was not altered in-process and
   prints its own account of every test, tagged with a nonce the tested code never sees.
   The verdict needs that complete account: the guard's line exactly once, every required
   test reported exactly once in the log, the runner's summary exactly once, and an exit
   status that agrees with them. An early exit or a missing summary is reward 0
   (`incomplete_report`), never an infrastructure error.
3. **XFAIL and SKIPPED of a required test fail** (SWE-bench passes XFAIL and ignores
   SKIPPED; a reward must not: code under test could raise either). Evaluations recompute
   SWE-bench's own rule from the statuses (`evals.grading`).
4. **Blame is decided, not guessed.** A test run that times out, kills its sandbox or fills
   its disk after the agent's patch was applied is compared with a control run of the
   pristine workspace: when the control completes, the failure is the patch's (reward 0,
   `grading_crashed_by_patch`); only when the control fails the same way is it an
   infrastructure error (`GradingError`), which callers retry.

`GradeResult.blocked` names each rule that tripped, so training can count them
(`reward_hack_blocked` in the metrics).
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_env.protected import BLOCK_OF_REASON, ProtectionRule, filter_patch, protected_reason
from sandboxes import ExecResult, Sandbox, SandboxError, SandboxSpec, make_sandbox
from tasks import Task, prepare_workspace
from tasks.log_parsers import ERROR, FAILED, PASSED, SKIPPED, XFAIL, log_parser

GRADING_DIR = "/tmp/grading"
AGENT_PATCH = f"{GRADING_DIR}/agent.patch"
TEST_PATCH = f"{GRADING_DIR}/test.patch"
GUARD_SOURCE = Path(__file__).with_name("runner_guard.py")
GUARD_TAG = "@@agentic-rl-guard"
# Rules whose tripping makes the verdict "unresolved" (the others only drop what they caught).
FAILING_RULES = frozenset(
    {
        "patch_rejected",
        "xfail_required",
        "skipped_required",
        "incomplete_report",
        "exit_status_mismatch",
        "runner_tampered",
        "grading_crashed_by_patch",
    }
)

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


# Failure reports in a test log: pytest's `____ Class.test ____` blocks (outside its PASSES
# section, which shows what passing tests printed), unittest's and django's
# `FAIL: test (module.Class)` blocks, and pytest's `FAILED id - message` summary lines.
_SECTION = re.compile(r"^={3,}(?: (.*?) )?={3,}$")
_BLOCK_HEADER = re.compile(r"^_{2,} (?:(?:ERROR|FAILURE) at (?:setup|teardown|call) of )?(.+?) _{2,}$")
_UNITTEST_HEADER = re.compile(r"^(?:FAIL|ERROR): (.+)$")
_SUMMARY_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAN = re.compile(r"^Ran \d+ tests? in ")


def failure_reports(log: str) -> list[tuple[str, str]]:
    """(header, text) of each test's failure report in `log`, in order. The header is what
    names the test: pytest's `Class.test[param]`, or unittest's `test (module.Class)` line
    and, for a test with a docstring, that line and the docstring's first line."""
    reports: list[tuple[str, str]] = []
    header: list[str] | None = None
    body: list[str] = []
    in_header = False  # unittest: the header lasts until its dashed line
    section = ""

    def close() -> None:
        if header is not None:
            reports.append(("\n".join(header), "\n".join(body)))

    for raw in log.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        if (section_match := _SECTION.match(line)) or _RAN.match(line):
            close()
            header, body, in_header = None, [], False
            section = (section_match[1] or "") if section_match else section
            continue
        block = _BLOCK_HEADER.match(line)
        if block and section != "PASSES":
            close()
            header, body, in_header = [block[1]], [], False
            continue
        unittest = _UNITTEST_HEADER.match(line)
        if unittest and header is None:
            header, body, in_header = [unittest[1]], [], True
            continue
        if header is None:
            continue
        if in_header:
            if re.match(r"^-{3,}$", line):
                in_header = False
            else:
                header.append(line.strip())
            continue
        body.append(line)
    close()
    return reports


def _names_of(test: str) -> set[str]:
    """How failure reports may name `test`: pytest's `Class.test` for `path::Class::test`,
    unittest's `test (module.Class)` and `test (module.Class.test)` (Python 3.11+) for
    `test (module.Class)` (SWE-bench's django ids) or `module.Class.test` (built-in tasks')."""
    names = {test}
    if "::" in test:
        names.add(".".join(test.split("::")[1:]))
    if unittest := re.match(r"^(\w+) \(([\w.]+)\)$", test):
        names |= {f"{unittest[1]} ({unittest[2]})", f"{unittest[1]} ({unittest[2]}.{unittest[1]})"}
    elif re.match(r"^[\w.]+\.\w+$", test):
        where, _, name = test.rpartition(".")
        names |= {f"{name} ({where})", f"{name} ({test})"}
    return names


def failure_text(log: str, test: str) -> str:
    """What `log` says about `test`'s failure: its failure reports and summary lines."""
    names = _names_of(test)
    texts = [
        body
        for header, body in failure_reports(log)
        if names.intersection(h.strip() for h in header.split("\n")) or header.endswith(f":{test}")
    ]
    for raw in log.splitlines():
        summary = _SUMMARY_LINE.match(_ANSI.sub("", raw).strip())
        if summary and summary[1] == test:
            texts.append(summary[2] or "")
    return "\n".join(texts)


def network_failure(log: str, statuses: dict[str, str], required: list[str] | tuple[str, ...]) -> str | None:
    """`test: line` for the first required test that failed (FAILED or ERROR) with a network
    error in its own failure report, else None. Only that makes a row not gradable offline:
    a passing test may log a refused connection, and a test nobody requires may need the
    network, without saying anything about the tests that decide the verdict."""
    for test in required:
        if statuses.get(test) in (FAILED, ERROR) and (line := network_error(failure_text(log, test))):
            return f"{test}: {line}"
    return None


class GradingError(RuntimeError):
    """Grading could not reach a verdict for reasons outside the agent's patch
    (infrastructure, or a broken task); the message names the task."""


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
    blocked: tuple[str, ...] = ()
    """Rules of the grading contract that tripped (the module docstring), e.g.
    `protected_files`, `incomplete_report`, `runner_tampered`: what a reward hack ran into."""
    dropped: tuple[tuple[str, str], ...] = ()
    """(path, reason) of each file of the agent's diff that never reached the grader."""
    exit_code: int | None = None
    """The test command's exit status, from the kernel."""
    problems: tuple[str, ...] = ()
    """Why each failing rule tripped, in words (for logs and reports)."""


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


def protection_rule(task: Task) -> ProtectionRule:
    """The task's protected-path rule (`agent_env.protected`)."""
    workspace = task.workspace
    existing = frozenset(p.name for p in workspace.iterdir()) if workspace is not None and workspace.is_dir() else ()
    src = workspace / "src" if workspace is not None else None
    if src is not None and src.is_dir():
        existing |= frozenset(p.name for p in src.iterdir())
    return ProtectionRule(
        test_files=tuple(task.test_files()),
        protect=tuple(task.grading.protect),
        unprotect=tuple(task.grading.unprotect),
        existing_top=frozenset(existing),
    )


def _pristine_text(task: Task) -> Callable[[str], str]:
    def read(path: str) -> str:
        if task.workspace is None:
            return ""
        try:
            return (task.workspace / path).read_text(errors="replace")
        except OSError:
            return ""

    return read


# -- the guard ------------------------------------------------------------------------------
_RUNNER_COMMAND = re.compile(
    r"^\s*(?P<python>(?:\S*/)?python(?:\d(?:\.\d+)?)?)\s+-m\s+(?P<runner>unittest|pytest)\b(?P<rest>.*)$", re.S
)
_BARE_PYTEST = re.compile(r"^\s*pytest\b(?P<rest>.*)$", re.S)


def guarded_command(command: str, guard: str, nonce_file: str) -> str | None:
    """`command` rewritten to run under the runner guard, or None when it is not a plain
    `python -m unittest|pytest ...` or `pytest ...` command line (then it runs as it is)."""
    if any(sign in command for sign in ("&&", "||", ";", "|", "\n", "`", "$(")):
        return None
    match = _RUNNER_COMMAND.match(command)
    if match:
        return f"{match['python']} {guard} {nonce_file} -m {match['runner']}{match['rest']}"
    match = _BARE_PYTEST.match(command)
    if match:
        # The python beside the pytest script (a virtualenv's), else python3.
        return (
            'p=$(command -v pytest); py="${p%/*}/python"; [ -x "$py" ] || py=python3; '
            f'exec "$py" {guard} {nonce_file} -m pytest{match["rest"]}'
        )
    return None


@dataclass(frozen=True)
class GuardReport:
    tests: dict[str, str]
    tampered: tuple[str, ...]
    exit: int | None
    lines: int
    """How many guard lines carried the right nonce (exactly one is a complete account)."""


def read_guard(log: str, nonce: str) -> GuardReport | None:
    """The guard's account from a log, or None when no line carries the nonce."""
    found = []
    for line in log.splitlines():
        if line.startswith(GUARD_TAG + " "):
            tag_nonce, _, payload = line[len(GUARD_TAG) + 1 :].partition(" ")
            if tag_nonce == nonce:
                found.append(payload)
    if not found:
        return None
    try:
        data = json.loads(found[-1])
    except ValueError:
        return GuardReport({}, ("the guard's account is not valid JSON",), None, len(found))
    return GuardReport(
        tests={str(k): str(v) for k, v in (data.get("tests") or {}).items()},
        tampered=tuple(str(t) for t in data.get("tampered") or ()),
        exit=data.get("exit"),
        lines=len(found),
    )


def strip_guard(log: str) -> str:
    """The log without guard lines (what the task's own parser reads)."""
    return "\n".join(line for line in log.splitlines() if not line.startswith(GUARD_TAG))


# -- the runner's account -------------------------------------------------------------------
_UNITTEST_SUMMARY = re.compile(r"^Ran (\d+) tests? in [\d.]+s$", re.M)
_UNITTEST_RESULT = re.compile(r"^(OK|FAILED)\b(?: \((.*)\))?\s*$", re.M)
_PYTEST_SUMMARY = re.compile(r"^=+ (.*?) in [\d.]+s(?: \([^)]*\))? =+$", re.M)


def _unittest_mentions(log: str, test: str) -> int:
    """How many verdict headers (`name (where) ...`) the log has for one unittest id."""
    module_class, _, name = test.rpartition(".")
    pattern = rf"^{re.escape(name)} \((?:{re.escape(module_class)}|{re.escape(test)})\)"
    return len(re.findall(pattern, log, re.M))


def _pytest_mentions(log: str, test: str) -> int:
    return len(re.findall(rf"^(?:PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) {re.escape(test)}(?:\s|$)", log, re.M))


def account_problems(
    log: str, exit_code: int | None, parser: str, statuses: dict[str, str], required: list[str]
) -> dict[str, list[str]]:
    """Where a test run's own account is incomplete or contradicts its exit status, by rule
    (`incomplete_report`, `exit_status_mismatch`); empty when it is consistent."""
    problems: dict[str, list[str]] = {}

    def add(rule: str, text: str) -> None:
        problems.setdefault(rule, []).append(text)

    failing = [t for t, s in statuses.items() if s in (FAILED, ERROR)]
    if parser == "unittest":
        summaries = _UNITTEST_SUMMARY.findall(log)
        results = _UNITTEST_RESULT.findall(log)
        if len(summaries) != 1 or len(results) < 1:
            add(
                "incomplete_report",
                f"{len(summaries)} 'Ran N tests' summaries (one expected): the run ended early or was forged",
            )
        else:
            ok = results[-1][0] == "OK"
            if ok and exit_code != 0:
                add("exit_status_mismatch", f"the summary says OK but the runner exited {exit_code}")
            if not ok and exit_code == 0:
                add("exit_status_mismatch", "the summary says FAILED but the runner exited 0")
        for test in required:
            count = _unittest_mentions(log, test)
            if count > 1:
                add("incomplete_report", f"{test} reported {count} times")
    elif parser == "pytest":
        summaries = _PYTEST_SUMMARY.findall(log)
        if len(summaries) != 1:
            add("incomplete_report", f"{len(summaries)} final pytest summaries (one expected)")
        else:
            bad = re.search(r"\b\d+ (failed|errors?)\b", summaries[0])
            if not bad and exit_code not in (0,):
                add(
                    "exit_status_mismatch",
                    f"the summary '{summaries[0]}' shows no failure but pytest exited {exit_code}",
                )
            if bad and exit_code == 0:
                add("exit_status_mismatch", f"the summary '{summaries[0]}' shows failures but pytest exited 0")
        for test in required:
            count = _pytest_mentions(log, test)
            if count > 1:
                add("incomplete_report", f"{test} reported {count} times")
    if parser == "swebench" and not failing and statuses and exit_code not in (0, None):
        add("exit_status_mismatch", f"the log shows no failing test but the test command exited {exit_code}")
    return problems


# -- running the tests ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Run:
    applied: bool
    result: ExecResult | None
    apply_log: str = ""
    nonce: str = ""
    guarded: bool = False


class _Crash(Exception):
    """The test run ended without a verdict: timeout, a dead sandbox, full storage."""


def _apply(sandbox: Sandbox, path: str) -> ExecResult:
    """`git apply` of a patch file in the grading sandbox: strict (no fuzz), no hooks."""
    return sandbox.exec(f"git -c core.hooksPath=/dev/null apply --whitespace=nowarn {path}", timeout=60, fresh=True)


def _test_file_manifest(sandbox: Sandbox, task: Task, folder: str) -> dict[str, str]:
    """sha256 of the protected files the test run can import, by path: the runner guard
    checks that none changes while the tests run. Every file of the test patch comes first;
    in big repositories only those beside them are kept, 2000 at most."""
    listed = sandbox.exec("git ls-files -z --cached --others --exclude-standard", timeout=60, fresh=True)
    rule = protection_rule(task)
    tests = list(task.test_files())
    paths = tests + [
        p
        for p in dict.fromkeys(listed.output.split("\0") if listed.exit_code == 0 else ())
        if p and p not in tests and "\n" not in p and protected_reason(p, rule) is not None
    ]
    if len(paths) > 2000:
        dirs = tuple({p.rpartition("/")[0] + "/" for p in tests if "/" in p})
        paths = tests + [p for p in paths[len(tests) :] if p.startswith(dirs)]
    sandbox.write_file(f"{folder}/l", "\0".join(paths[:2000]))
    hashed = sandbox.exec(f"xargs -0 sha256sum -- < {folder}/l 2>/dev/null; rm -f {folder}/l", timeout=120, fresh=True)
    files = {}
    for line in hashed.output.splitlines():
        digest, sep, path = line.partition("  ")
        if sep and len(digest) == 64 and not digest.startswith("\\"):
            files[path] = digest
    return files


def _run_tests(task: Task, patch: str, factory: Callable[[SandboxSpec], Sandbox]) -> _Run:
    try:
        with factory(sandbox_spec_for(task)) as sandbox:
            if patch.strip():
                sandbox.write_file(AGENT_PATCH, patch if patch.endswith("\n") else patch + "\n")
                applied = _apply(sandbox, AGENT_PATCH)
                if applied.exit_code != 0:
                    return _Run(False, None, applied.output)
            if task.test_patch:
                sandbox.write_file(TEST_PATCH, task.test_patch)
                restored = _apply(sandbox, TEST_PATCH)
                if restored.exit_code != 0:
                    raise GradingError(
                        f"task {task.id}: its test patch does not apply ({task.source}): {restored.output.strip()}"
                    )
            nonce = secrets.token_hex(16)
            folder = f"/tmp/.g{secrets.token_hex(8)}"
            command = guarded_command(task.grading.test_command, f"{folder}/guard.py", f"{folder}/n")
            if command is not None:
                files = _test_file_manifest(sandbox, task, folder)
                sandbox.write_file(f"{folder}/guard.py", GUARD_SOURCE.read_bytes())
                sandbox.write_file(f"{folder}/n", json.dumps({"nonce": nonce, "files": files}))
            run = sandbox.exec(command or task.grading.test_command, timeout=task.limits.grading_timeout_s, fresh=True)
    except SandboxError as exc:
        raise _Crash(f"the sandbox failed during the test run: {exc}") from exc
    if run.timed_out:
        raise _Crash(f"the test run timed out after {task.limits.grading_timeout_s:g} s")
    if run.cause in ("disk", "pids", "memory"):
        raise _Crash(f"the test run hit the sandbox's {run.cause} limit")
    return _Run(True, run, nonce=nonce, guarded=command is not None)


_controls: dict[str, str | None] = {}
_controls_lock = threading.Lock()


def _control_failure(task: Task, factory: Callable[[SandboxSpec], Sandbox]) -> str | None:
    """How a run of the pristine workspace (no agent patch) fails to reach a verdict, or
    None when it completes: the control that decides who broke a crashed run. Cached per
    task and workspace for the process."""
    key = f"{task.id}:{task.workspace}:{task.grading.test_command}"
    with _controls_lock:
        if key in _controls:
            return _controls[key]
    try:
        _run_tests(task, "", factory)
        outcome = None
    except _Crash as exc:
        outcome = str(exc)
    with _controls_lock:
        _controls[key] = outcome
    return outcome


def grade_patch(
    task: Task,
    patch: str,
    *,
    sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None,
) -> GradeResult:
    """Grade `patch` (a unified diff against the task's workspace) for `task`; see the
    module docstring for the contract. Raises `GradingError` only for failures that happen
    without the agent's patch too."""
    factory = sandbox_factory or make_sandbox
    parser_name = task.grading.log_parser
    parser = log_parser(parser_name, task.repo)
    filtered = filter_patch(patch, protection_rule(task), _pristine_text(task))
    blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in filtered.dropped))
    try:
        run = _run_tests(task, filtered.patch, factory)
    except _Crash as crash:
        if not filtered.patch.strip():
            raise GradingError(f"task {task.id}: {crash}") from None
        control = _control_failure(task, factory)
        if control is not None:
            raise GradingError(f"task {task.id}: {crash}; the pristine workspace fails too ({control})") from None
        return GradeResult(
            resolved=False,
            patch_applied=True,
            blocked=(*blocked, "grading_crashed_by_patch"),
            dropped=filtered.dropped,
            problems=(f"{crash}, where the pristine workspace completes",),
        )
    if not run.applied:
        return GradeResult(
            resolved=False,
            patch_applied=False,
            log=run.apply_log,
            blocked=(*blocked, "patch_rejected"),
            dropped=filtered.dropped,
            problems=(f"git apply refused the patch: {run.apply_log.strip()[:300]}",),
        )
    assert run.result is not None
    log = run.result.output
    visible = strip_guard(log)
    statuses = parser(visible)
    wanted = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    problems = account_problems(visible, run.result.exit_code, parser_name, statuses, wanted)
    if run.guarded:
        guard = read_guard(log, run.nonce)
        if guard is None:
            problems.setdefault("incomplete_report", []).append(
                "the runner guard's account is missing: the test process ended early"
            )
        else:
            if guard.lines != 1:
                problems.setdefault("incomplete_report", []).append(f"{guard.lines} guard accounts (one expected)")
            if guard.tampered:
                problems.setdefault("runner_tampered", []).extend(guard.tampered)
            if guard.exit is not None and guard.exit != run.result.exit_code:
                problems.setdefault("exit_status_mismatch", []).append(
                    f"the guard ended with {guard.exit} but the process exited {run.result.exit_code}"
                )
            for test in wanted:
                said, seen = guard.tests.get(test), statuses.get(test)
                if said is not None and seen is not None and (said == PASSED) != (seen == PASSED):
                    problems.setdefault("incomplete_report", []).append(
                        f"{test}: the log says {seen}, the runner guard saw {said}"
                    )
            # The guard's account decides each test it saw: the log only adds what it lacks.
            statuses = {**statuses, **guard.tests}
    for test in wanted:
        if statuses.get(test) == XFAIL:
            problems.setdefault("xfail_required", []).append(f"{test} is an expected failure")
        elif statuses.get(test) == SKIPPED:
            problems.setdefault("skipped_required", []).append(f"{test} was skipped")
    failed = tuple(t for t in wanted if statuses.get(t) != PASSED)
    missing = tuple(t for t in wanted if t not in statuses)
    blocked += [rule for rule in problems if rule not in blocked]
    tripped = FAILING_RULES.intersection(blocked)
    return GradeResult(
        resolved=not failed and not tripped,
        patch_applied=True,
        statuses=statuses,
        failed=failed,
        missing=missing,
        log=log,
        blocked=tuple(blocked),
        dropped=filtered.dropped,
        exit_code=run.result.exit_code,
        problems=tuple(f"{rule}: {text}" for rule, texts in problems.items() for text in texts),
    )


def describe(result: GradeResult) -> str:
    """One line: the verdict and the rules that tripped."""
    verdict = "resolved" if result.resolved else "unresolved"
    if result.blocked:
        verdict += f" (blocked: {', '.join(result.blocked)})"
    return verdict


__all__ = [
    "GradeResult",
    "GradingError",
    "account_problems",
    "describe",
    "grade_patch",
    "guarded_command",
    "failure_reports",
    "network_error",
    "network_failure",
    "protection_rule",
    "read_guard",
    "sandbox_spec_for",
]
