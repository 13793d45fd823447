"""Honest grading: a patch is judged in a fresh sandbox, by the task's hidden tests, from exit
statuses the code under test cannot write, and only for the agent's change to the code under test.

The policy being trained is an adversary of this module, and code in a process can defeat
anything in that process, so no verdict here comes from a checker inside the test process
(`tasks/README.md` states the contract for users):

1. **Only the agent's change to the code under test counts.** A patch over
   `MAX_PATCH_BYTES` is rejected unread (`patch_too_large`). Grading starts from the pristine
   workspace, drops every protected path of the diff (tests, runner configuration, start-up
   hooks: `agent_env.protected`) and applies the rest with `git apply` only (a patch that
   needs fuzz, or that git refuses, is `patch_rejected`). Then the result is judged on the
   tree, by git's own list of what it touched, never on hunk headers: a symlink, a
   dot-path, a new file outside an existing package, or a test section of setup.cfg /
   pyproject.toml changed as the parsed files show is reverted (`outside_allowlist`,
   `protected_files`). Then the test patch.
2. **The verdict is an exit status.** The task's test command, narrowed to exactly the
   required tests (`agent_env.selection`), runs once with the stock runner (no plugin of
   ours) as a fresh process; it must exit 0.
3. **Canary twins must fail.** Each FAIL_TO_PASS test gets twins (`agent_env.canaries`):
   the same command in a fork of the same sandbox, where that test raises after its body
   completes (tail) or where each equality assertion expects another value of the
   expected value's type (expectation; a test with none gets its first assertion
   negated instead). A genuine fix fails both; a skipped body, a
   rewritten outcome, an early exit 0, an always-equal object or code that reads the
   expectation passes one, and the verdict is reward 0 (`canary_passed`). A twin that
   cannot be built is named in `GradeResult.notes`, never guessed.
4. **The log only downgrades.** What the verdict run printed is parsed with the task's log
   parser: a required test it does not report as passed (failed, missing, skipped:
   `skipped_required`, xfailed: `xfail_required`) fails. Nothing it prints passes a test
   whose run did not exit 0 or whose canary passed.
5. **Blame is decided, not guessed.** A verdict run that times out, kills its sandbox or
   fills its disk after the agent's patch was applied is compared with a control run of the
   pristine workspace: when the control completes, the failure is the patch's (reward 0,
   `grading_crashed_by_patch`); only when the control fails the same way is it an
   infrastructure error (`GradingError`), which callers retry.

`GradeResult.blocked` names each rule that tripped, so training can count them
(`reward_hack_blocked` in the metrics).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import random
import re
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agent_env.canaries import Twin, expectation_twin, locate, source_defines, tail_twin
from agent_env.protected import BLOCK_OF_REASON, ProtectionRule, filter_patch, result_reason
from agent_env.selection import directives_of, runner_of, select_command
from sandboxes import ExecResult, Sandbox, SandboxError, SandboxSpec, make_sandbox
from tasks import Task, prepare_workspace
from tasks.log_parsers import ERROR, FAILED, PASSED, SKIPPED, XFAIL, log_parser

log = logging.getLogger(__name__)

GRADING_DIR = "/tmp/grading"
AGENT_PATCH = f"{GRADING_DIR}/agent.patch"
TEST_PATCH = f"{GRADING_DIR}/test.patch"
# Rules whose tripping makes the verdict "unresolved" (the others only drop what they caught).
FAILING_RULES = frozenset(
    {
        "patch_rejected",
        "patch_too_large",
        "canary_passed",
        "xfail_required",
        "skipped_required",
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
    """The verdict run's exit status, from the kernel."""
    problems: tuple[str, ...] = ()
    """Why each failing rule tripped, in words (for logs and reports)."""
    canaries: tuple[tuple[str, str, int | None], ...] = ()
    """(test, kind, exit status) of each canary twin run (None: its sandbox failed); empty
    when the verdict run failed (no twin runs then)."""
    notes: tuple[str, ...] = ()
    """What the grader could not check, in words: a canary it could not build, a log it
    could not parse."""
    command: str = ""
    """The verdict run's command line (the task's, narrowed to the required tests)."""


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


# -- running the tests ----------------------------------------------------------------------
MAX_PATCH_BYTES = 5 * 1024 * 1024
"""A patch larger than this is rejected unread (`patch_too_large`): the grader's memory stays
bounded whatever the agent submits. SWE-bench Verified's largest gold patch is ~0.2 MB."""
MAX_LOG_LINE = 1024
"""Longest log line the parsers read (`parseable`); the rest of a longer line is not read."""
PARALLEL_RUNS = 4
"""How many of one grading's runs (the verdict run and its canary twins) go at once."""


class _Crash(Exception):
    """The verdict run ended without an exit status that means anything: a timeout, a dead
    sandbox, a full disk."""


@dataclass(frozen=True)
class _Prepared:
    """What the grading sandbox holds before any tested code runs."""

    dropped: tuple[tuple[str, str], ...]
    files: frozenset[str]
    command: str
    twins: tuple[Twin, ...]
    skipped_twins: tuple[str, ...]


def _exec(sandbox: Sandbox, command: str, timeout: float = 60) -> ExecResult:
    return sandbox.exec(command, timeout=timeout, fresh=True)


def _apply(sandbox: Sandbox, path: str) -> ExecResult:
    """`git apply` of a patch file in the grading sandbox: strict (no fuzz), no hooks."""
    return _exec(sandbox, f"git -c core.hooksPath=/dev/null apply --whitespace=nowarn {path}")


def _git_changes(sandbox: Sandbox, paths: list[str]) -> list[tuple[str, str, str]]:
    """(status, new mode, path) of each path the agent's patch touched, as git sees the
    result against the pristine commit (a rename is a deletion and an addition)."""
    if not paths:
        return []
    listing = f"{GRADING_DIR}/touched"
    sandbox.write_file(listing, "\0".join(paths) + "\0")
    git = "git -c core.hooksPath=/dev/null --literal-pathspecs"
    result = _exec(
        sandbox,
        f"{git} add -f -A --pathspec-from-file={listing} --pathspec-file-nul >/dev/null 2>&1; "
        f"{git} diff --cached --raw -z --no-renames HEAD 2>/dev/null; {git} reset -q >/dev/null 2>&1",
    )
    fields = result.output.split("\0")
    changes = []
    for meta, path in zip(fields[::2], fields[1::2], strict=False):
        parts = meta.lstrip(":").split()
        if len(parts) >= 5:
            changes.append((parts[4][:1], parts[1], path))
    return changes


def _touched(sandbox: Sandbox, path: str) -> list[str] | None:
    """Every path `git apply` would touch for the patch file (git's own parse), or None
    when git cannot read it."""
    numstat = _exec(
        sandbox, f"git -c core.hooksPath=/dev/null apply --numstat -z --whitespace=nowarn {path} 2>/dev/null"
    )
    if numstat.exit_code != 0:
        return None
    paths: list[str] = []
    fields = numstat.output.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        if not entry:
            i += 1
            continue
        counts = entry.split("\t")
        if len(counts) == 3 and counts[2] == "" and i + 2 < len(fields):  # a rename: old, new follow
            paths += [fields[i + 1], fields[i + 2]]
            i += 3
            continue
        paths.append(counts[-1])
        i += 1
    return [p for p in dict.fromkeys(paths) if p]


def _revert(sandbox: Sandbox, reverted: list[tuple[str, bool]]) -> None:
    """Put each (path, existed) back as the pristine commit has it."""
    listing = f"{GRADING_DIR}/revert"
    for path, existed in reverted:
        sandbox.write_file(listing, path)
        if existed:
            _exec(
                sandbox,
                f'p=$(cat {listing}); rm -rf -- "$p"; '
                f'git -c core.hooksPath=/dev/null --literal-pathspecs checkout -q HEAD -- "$p"',
            )
        else:
            _exec(sandbox, f'p=$(cat {listing}); rm -rf -- "$p"')


def _judge_tree(
    task: Task, sandbox: Sandbox, touched: list[str], pristine: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    """Revert every change the allowlist refuses, judged on the tree after `git apply`."""
    rule = protection_rule(task)
    read = _pristine_text(task)

    def read_both(path: str) -> tuple[str, str]:
        try:
            new = sandbox.read_file(path).decode(errors="replace")
        except SandboxError:
            new = ""
        return read(path), new

    dropped, reverted = [], []
    for status, mode, path in _git_changes(sandbox, touched):
        reason = result_reason(path, status=status, new_mode=mode, rule=rule, pristine=pristine, read_both=read_both)
        if reason is not None:
            dropped.append((path, reason))
            reverted.append((path, path in pristine))
    _revert(sandbox, reverted)
    return tuple(dropped)


def _build_twins(
    task: Task, sandbox: Sandbox, files: frozenset[str], runner: str | None, rng: random.Random
) -> tuple[list[Twin], list[str]]:
    """The canary twins of every FAIL_TO_PASS test, and why each one not built was not."""
    twins: list[Twin] = []
    missing: list[str] = []
    directives = directives_of(task.grading.test_command, files)
    sources: dict[str, str | None] = {}
    for test in task.grading.fail_to_pass:
        where = locate(test, runner or "", files, directives)
        if isinstance(where, str):
            missing.append(f"{test}: no canary: {where}")
            continue
        path, qualname = where
        if runner == "sympy":  # the id names a function: the directive file that defines it
            for candidate in directives:
                text = _read_text(sandbox, candidate, sources)
                if text is not None and source_defines(text, qualname):
                    path = candidate
                    break
        source = _read_text(sandbox, path, sources)
        if source is None:
            missing.append(f"{test}: no canary: {path} cannot be read")
            continue
        for build in (tail_twin, expectation_twin):
            try:
                twin = build(source, path, test, qualname, rng)
            except Exception as exc:  # noqa: BLE001 - a builder's bug must not stop a training run
                log.exception("task %s: building a canary for %s failed (a grader bug)", task.id, test)
                missing.append(f"{test}: no {build.__name__} canary: its builder failed ({type(exc).__name__})")
                continue
            if twin.source is None:
                missing.append(f"{test}: no {twin.kind} canary: {twin.reason}")
            else:
                twins.append(twin)
    rng.shuffle(twins)
    return twins, missing


def _read_text(sandbox: Sandbox, path: str, cache: dict[str, str | None]) -> str | None:
    if path not in cache:
        try:
            cache[path] = sandbox.read_file(path).decode()
        except (SandboxError, UnicodeDecodeError, OSError):
            cache[path] = None
    return cache[path]


def _patch_bytes(patch: str) -> bytes:
    """The patch as git reads it: surrogates that stand for undecodable bytes become those
    bytes again; a lone surrogate that stands for none (any str can hold one) becomes '?'."""
    try:
        return patch.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return patch.encode("utf-8", "replace")


def _prepare(task: Task, patch: str, sandbox: Sandbox, rng: random.Random) -> _Prepared | str:
    """Apply the agent's patch and the test patch to the grading sandbox, revert what the
    allowlist refuses, and plan the runs. A string: git refused the patch (its words)."""
    # Listings read without git's stderr: a warning (docker's sandbox user cannot read
    # $HOME/.config/git/ignore) would otherwise be glued to the first path.
    files_cmd = "git ls-files -z --cached --others --exclude-standard 2>/dev/null"
    listing = _exec(sandbox, "git ls-tree -r -z --name-only HEAD 2>/dev/null").output
    pristine = frozenset(p for p in listing.split("\0") if p)
    dropped: tuple[tuple[str, str], ...] = ()
    if patch.strip():
        sandbox.write_file(AGENT_PATCH, _patch_bytes(patch))
        touched = _touched(sandbox, AGENT_PATCH)
        applied = _apply(sandbox, AGENT_PATCH) if touched is not None else None
        if applied is None or applied.exit_code != 0:
            return (applied.output if applied is not None else "git cannot read the patch").strip()
        dropped = _judge_tree(task, sandbox, touched or [], pristine)
    if task.test_patch:
        sandbox.write_file(TEST_PATCH, task.test_patch)
        restored = _apply(sandbox, TEST_PATCH)
        if restored.exit_code != 0:
            raise GradingError(
                f"task {task.id}: its test patch does not apply ({task.source}): {restored.output.strip()[:500]}"
            )
    files = frozenset(p for p in _exec(sandbox, files_cmd).output.split("\0") if p)
    required = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    runner = runner_of(task.grading.test_command)
    command = select_command(task.grading.test_command, required, files) or task.grading.test_command
    twins, skipped = _build_twins(task, sandbox, files, runner, rng)
    return _Prepared(dropped, files, command, tuple(twins), tuple(skipped))


def _run_twin(sandbox: Sandbox, twin: Twin, command: str, timeout: float) -> ExecResult:
    """One canary twin in a fork of the prepared sandbox: its own processes, its own files."""
    with sandbox.fork() as fork:
        assert twin.source is not None
        fork.write_file(twin.path, twin.source)
        return fork.exec(command, timeout=timeout, fresh=True)


@dataclass(frozen=True)
class _Runs:
    prepared: _Prepared
    verdict: ExecResult
    twins: tuple[tuple[Twin, ExecResult | None], ...]
    """Each twin and how it ended (None: its sandbox failed; a failure, as a canary must).
    Empty when the verdict run failed: no twin ran."""


def _run_tests(task: Task, patch: str, factory: Callable[[SandboxSpec], Sandbox], rng: random.Random) -> _Runs | str:
    """Prepare the grading sandbox and keep a fork of it, untouched, before any tested code
    runs; run the verdict command in the sandbox; when it exits 0, run each twin in a fork of
    the untouched one, `PARALLEL_RUNS` at once. A failed verdict run needs no canary: it is
    reward 0 whatever they would say, so a failing patch costs one fork and one run."""
    timeout = task.limits.grading_timeout_s
    ended: list[tuple[Twin, ExecResult | None]] = []
    try:
        with factory(sandbox_spec_for(task)) as sandbox:
            prepared = _prepare(task, patch, sandbox, rng)
            if isinstance(prepared, str):
                return prepared
            with contextlib.ExitStack() as stack:
                clean = stack.enter_context(sandbox.fork()) if prepared.twins else None
                verdict = sandbox.exec(prepared.command, timeout=timeout, fresh=True)
                if clean is not None and verdict.exit_code == 0 and not verdict.timed_out:
                    ended = _run_twins(task, clean, prepared, timeout)
    except SandboxError as exc:
        raise _Crash(f"the sandbox failed during the test run: {exc}") from exc
    if verdict.timed_out:
        raise _Crash(f"the test run timed out after {timeout:g} s")
    if verdict.cause in ("disk", "pids", "memory"):
        raise _Crash(f"the test run hit the sandbox's {verdict.cause} limit")
    return _Runs(prepared, verdict, tuple(ended))


def _run_twins(task: Task, clean: Sandbox, prepared: _Prepared, timeout: float) -> list[tuple[Twin, ExecResult | None]]:
    ended: list[tuple[Twin, ExecResult | None]] = []
    with ThreadPoolExecutor(max_workers=PARALLEL_RUNS) as pool:
        futures = [pool.submit(_run_twin, clean, twin, prepared.command, timeout) for twin in prepared.twins]
        for twin, future in zip(prepared.twins, futures, strict=True):
            try:
                ended.append((twin, future.result()))
            except SandboxError as exc:
                log.warning("task %s: a canary's sandbox failed (%s): counted as a failing canary", task.id, exc)
                ended.append((twin, None))
    return ended


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
        _run_tests(task, "", factory, random.Random(0))
        outcome = None
    except _Crash as exc:
        outcome = str(exc)
    with _controls_lock:
        _controls[key] = outcome
    return outcome


def parseable(log: str) -> str:
    """`log` with every line cut to `MAX_LOG_LINE` characters. Some SWE-bench parsers are
    quadratic in a line's length (psf/requests': 35 s for one 100 KB line, 211 s for 256 KB),
    and the tested code writes the log; a cut line keeps its start, where the test id is,
    and the longest id in Verified has 374 characters."""
    lines = log.split("\n")
    if all(len(line) <= MAX_LOG_LINE for line in lines):
        return log
    return "\n".join(line[:MAX_LOG_LINE] for line in lines)


def with_cut_ids(statuses: dict[str, str], wanted: list[str]) -> dict[str, str]:
    """`statuses`, plus a status for each wanted id that an older parser cut at a space
    (`test_x[ceci` of `test_x[ceci n'est pas un meta]`, astropy 13236) and that today's
    parser reports whole: passed only if every test it stands for passed."""
    out = dict(statuses)
    for test in wanted:
        if test in out or "[" not in test or test.endswith("]"):
            continue
        found = [
            status
            for name, status in statuses.items()
            if name.startswith(test) and name[len(test) : len(test) + 1].isspace()
        ]
        if found:
            out[test] = next((status for status in found if status != PASSED), PASSED)
    return out


def _log_statuses(task: Task, log: str) -> tuple[dict[str, str], str]:
    """What the verdict run's log says of each test, for reports and to downgrade a verdict
    (never to pass a test): the task's own parser, which must not raise on any log."""
    try:
        statuses = log_parser(task.grading.log_parser, task.repo)(parseable(log))
        return {str(k): str(v) for k, v in statuses.items()}, ""
    except Exception as exc:  # noqa: BLE001 - the log is the tested code's output: any text
        return {}, f"the log could not be parsed ({type(exc).__name__}), so it downgrades nothing"


def grade_patch(
    task: Task,
    patch: str,
    *,
    sandbox_factory: Callable[[SandboxSpec], Sandbox] | None = None,
    rng: random.Random | None = None,
) -> GradeResult:
    """Grade `patch` (a unified diff against the task's workspace) for `task`; see the
    module docstring for the contract. Raises `GradingError` only for failures that happen
    without the agent's patch too, and `SandboxError` for a sandbox that cannot start; any
    patch, log or output the agent can shape gives a result with a reason."""
    if len(patch) > MAX_PATCH_BYTES or len(_patch_bytes(patch)) > MAX_PATCH_BYTES:
        return GradeResult(
            resolved=False,
            patch_applied=False,
            blocked=("patch_too_large",),
            problems=(f"patch_too_large: the patch has over {MAX_PATCH_BYTES:,} bytes; it was not read",),
        )
    factory = sandbox_factory or make_sandbox
    rng = rng or random.Random(secrets.randbits(64))
    filtered = filter_patch(patch, protection_rule(task), _pristine_text(task))
    try:
        runs = _run_tests(task, filtered.patch, factory, rng)
    except _Crash as crash:
        if not filtered.patch.strip():
            raise GradingError(f"task {task.id}: {crash}") from None
        control = _control_failure(task, factory)
        if control is not None:
            raise GradingError(f"task {task.id}: {crash}; the pristine workspace fails too ({control})") from None
        blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in filtered.dropped))
        return GradeResult(
            resolved=False,
            patch_applied=True,
            blocked=(*blocked, "grading_crashed_by_patch"),
            dropped=filtered.dropped,
            problems=(f"{crash}, where the pristine workspace completes",),
        )
    if isinstance(runs, str):
        blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in filtered.dropped))
        return GradeResult(
            resolved=False,
            patch_applied=False,
            log=runs[:20_000],
            blocked=(*blocked, "patch_rejected"),
            dropped=filtered.dropped,
            problems=(f"patch_rejected: git apply refused the patch: {runs[:300]}",),
        )
    return _verdict(task, filtered.dropped, runs)


def _verdict(task: Task, dropped_before: tuple[tuple[str, str], ...], runs: _Runs) -> GradeResult:
    """The verdict from exit statuses: the verdict run exits 0, every canary twin does not.
    The log only downgrades: each required test must also read as passed in it."""
    dropped = (*dropped_before, *runs.prepared.dropped)
    blocked = list(dict.fromkeys(BLOCK_OF_REASON[reason] for _, reason in dropped))
    problems: dict[str, list[str]] = {}
    output = runs.verdict.output
    statuses, unreadable = _log_statuses(task, output)
    wanted = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    statuses = with_cut_ids(statuses, wanted)
    passed_run = runs.verdict.exit_code == 0
    for twin, result in runs.twins:
        if result is not None and result.exit_code == 0 and not result.timed_out:
            problems.setdefault("canary_passed", []).append(
                f"{twin.test}: its {twin.kind} canary, built to fail, exited 0"
            )
    for test in wanted:
        if statuses.get(test) == XFAIL:
            problems.setdefault("xfail_required", []).append(f"{test} is an expected failure")
        elif statuses.get(test) == SKIPPED:
            problems.setdefault("skipped_required", []).append(f"{test} was skipped")
    # A failed run whose log says every required test passed: which one failed only the log
    # could say, and it does not.
    if not passed_run and all(statuses.get(t) == PASSED for t in wanted):
        statuses = {**statuses, **dict.fromkeys(wanted, FAILED)}
    failed = tuple(t for t in wanted if statuses.get(t) != PASSED)
    missing = tuple(t for t in wanted if t not in statuses)
    blocked += [rule for rule in problems if rule not in blocked]
    tripped = FAILING_RULES.intersection(blocked)
    notes = list(runs.prepared.skipped_twins)
    if unreadable:
        notes.append(unreadable)
    return GradeResult(
        resolved=passed_run and not failed and not tripped,
        patch_applied=True,
        statuses=statuses,
        failed=failed,
        missing=missing,
        log=output,
        blocked=tuple(blocked),
        dropped=dropped,
        exit_code=runs.verdict.exit_code,
        problems=tuple(f"{rule}: {text}" for rule, texts in problems.items() for text in texts),
        canaries=tuple((t.test, t.kind, r.exit_code if r is not None else None) for t, r in runs.twins),
        notes=tuple(notes),
        command=runs.prepared.command,
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
    "describe",
    "MAX_PATCH_BYTES",
    "grade_patch",
    "failure_reports",
    "network_error",
    "network_failure",
    "protection_rule",
    "sandbox_spec_for",
]
