"""The grading sandbox prepared and the runs planned, before any tested code runs: the
patches applied and the tree judged (`agent_env.grading.applying`), the command narrowed to
the required tests (`agent_env.grading.selection`), the FAIL_TO_PASS test files marked for
every run, and, once the verdict run passed, one canary twin per required function
(`agent_env.grading.canaries`; `agent_env.grading.verdict` states the contract)."""

from __future__ import annotations

import dataclasses
import logging
import random
import re
from dataclasses import dataclass

from agent_env.grading.applying import TEST_PATCH, apply_agent_patch, git_apply, run_fresh
from agent_env.grading.canaries import Twin, expectation_twin, source_defines
from agent_env.grading.marks import Marked, mark_tests
from agent_env.grading.result import GradingError
from agent_env.grading.selection import (
    directives_of,
    django_descriptions,
    django_label,
    django_modules,
    locate,
    pytest_definition_order,
    runner_of,
    select_command,
    sympy_exact_selection,
)
from sandboxes import Sandbox, SandboxError
from tasks import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """What the grading sandbox holds before any tested code runs."""

    dropped: tuple[tuple[str, str], ...]
    files: frozenset[str]
    command: str
    twins: tuple[Twin, ...]
    """The canary twins: built once the verdict run passed (`build_twins`), empty before."""
    skipped_twins: tuple[str, ...]
    twin_files: tuple[tuple[str, str], ...] = ()
    """Each FAIL_TO_PASS test file, with its text as the verdict run reads it (its required
    functions marked), by path: every run (the verdict's and each twin's) writes them all
    into its fork, a twin with its own test altered, so that no run can tell the verdict
    from a twin by which of its files were written after the fork, or by the marks."""
    marks: tuple[tuple[str, tuple[str, str]], ...] = ()
    """Each FAIL_TO_PASS test's mark in the verdict run (path, text), by id: the verdict
    run passes only where each was written (its body completed, no equality of it held
    against a changed expectation)."""
    functions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """Each required function (path, qualname, the FAIL_TO_PASS ids it runs as): one twin each."""
    seeds: tuple[tuple[str, int], ...] = ()
    """Each marked file's seed (`mark_tests`), by path: a twin's copy carries the same marks."""
    originals: tuple[tuple[str, str], ...] = ()
    """Each marked file's text before the marks, by path: the twins are built from it."""


def _django_descriptions(
    task: Task, sandbox: Sandbox, files: frozenset[str], sources: dict[str, str | None]
) -> dict[str, tuple[str, ...]] | None:
    """Django's test descriptions in the modules the command runs, read from the grading
    sandbox (tests as the test patch left them), when a required id is one."""
    required = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    if all(django_label(test) for test in required):
        return None
    modules = django_modules(task.grading.test_command, files)
    texts = {module: _read_text(sandbox, path, sources) for module, path in modules.items()}
    return django_descriptions({module: text for module, text in texts.items() if text is not None})


def _pytest_positions(
    required: list[str], sandbox: Sandbox, sources: dict[str, str | None]
) -> dict[str, dict[str, tuple[int, ...]]]:
    """Where each required pytest test is defined in its file (`pytest_definition_order`),
    read from the grading sandbox, so the narrowed run keeps the files' own order."""
    paths = dict.fromkeys(test.split("::")[0] for test in required if "::" in test)
    texts = {path: _read_text(sandbox, path, sources) for path in paths}
    return {path: pytest_definition_order(text) for path, text in texts.items() if text is not None}


def _select_sympy_tests(
    task: Task, sandbox: Sandbox, files: frozenset[str], required: list[str], sources: dict[str, str | None]
) -> None:
    """Append `sympy_exact_selection` to each test file the command runs (a file it names, or
    a `test_*.py` under a folder it names), before any tested code runs and before the twins
    are built from them, so that `-k` runs exactly the required tests."""
    directives = [d.rstrip("/") for d in directives_of(task.grading.test_command, files)]
    block = sympy_exact_selection(required)
    for path in sorted(files):
        named = path in directives or (
            path.rsplit("/", 1)[-1].startswith("test_") and any(path.startswith(f"{d}/") for d in directives)
        )
        text = _read_text(sandbox, path, sources) if named and path.endswith(".py") else None
        if text is not None:
            sources[path] = text + block
            sandbox.write_file(path, sources[path])


def _locate_required(
    task: Task,
    sandbox: Sandbox,
    files: frozenset[str],
    runner: str | None,
    described: dict[str, tuple[str, ...]] | None,
    sources: dict[str, str | None],
) -> tuple[dict[tuple[str, str], list[str]], list[str]]:
    """Each FAIL_TO_PASS test's function, (path, qualname), with the ids it runs as (a
    parametrized function runs as several), and why a test that was not found was not."""
    functions: dict[tuple[str, str], list[str]] = {}
    missing: list[str] = []
    directives = directives_of(task.grading.test_command, files)
    for test in task.grading.fail_to_pass:
        where = locate(test, runner or "", files, directives, described)
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
        if _read_text(sandbox, path, sources) is None:
            missing.append(f"{test}: no canary: {path} cannot be read")
            continue
        functions.setdefault((path, qualname), []).append(test)
    return functions, missing


def _qualnames_by_path(functions) -> dict[str, list[str]]:
    """The required functions' qualnames, grouped by the file that defines them (in order)."""
    by_path: dict[str, list[str]] = {}
    for path, qualname, *_ in functions:
        by_path.setdefault(path, []).append(qualname)
    return by_path


def _plan_marks(
    task: Task,
    sandbox: Sandbox,
    files: frozenset[str],
    runner: str | None,
    rng: random.Random,
    described: dict[str, tuple[str, ...]] | None,
    sources: dict[str, str | None],
) -> tuple[dict[str, str], dict[str, tuple[str, str]], dict[tuple[str, str], list[str]], dict[str, int], list[str]]:
    """The verdict run's files: (each FAIL_TO_PASS test file with its required functions
    marked, as every run reads it (`mark_tests`); each test's mark, by id; each required
    function, (path, qualname), with its ids; each file's seed for its marks, so that a twin's
    copy carries the same ones; why a test got no mark)."""
    functions, missing = _locate_required(task, sandbox, files, runner, described, sources)
    by_path = _qualnames_by_path(functions)
    seeds = {path: rng.getrandbits(64) for path in by_path}
    verdict_files: dict[str, str] = {}
    marks: dict[str, tuple[str, str]] = {}
    for path, qualnames in by_path.items():
        try:
            done = mark_tests(sources[path] or "", path, qualnames, seeds[path])
        except Exception as exc:  # noqa: BLE001 - a builder's bug must not stop a training run
            log.exception("task %s: marking %s failed (a grader bug)", task.id, path)
            done = Marked(
                sources[path] or "", {}, dict.fromkeys(qualnames, f"its builder failed ({type(exc).__name__})")
            )
        verdict_files[path] = done.source
        for qualname in qualnames:
            tests = functions[(path, qualname)]
            if qualname in done.marks:
                marks |= dict.fromkeys(tests, done.marks[qualname])
            else:
                missing.append(f"{tests[0]}: no mark: {done.reasons[qualname]}")
    return verdict_files, marks, functions, seeds, missing


STOPS_AT_FIRST_FAILURE = re.compile(r"(?:^|\s)(?:-x|--exitfirst|--maxfail(?:=|\s+)\S+|--failfast)(?=\s|$)")
"""Options of pytest, unittest and Django's runner that end a run at its first failure: a
twin's run then never reaches the tests after the one it alters, so it cannot be asked for
their marks."""


def build_twins(task: Task, prepared: Prepared, rng: random.Random) -> tuple[list[Twin], list[str]]:
    """One canary twin per required function, its file marked as the verdict run's is, and
    why a twin was not built. A function's twin expects other values (or negates its first
    assertion: `expectation_twin`) and must fail, yet leave the marks of the other required
    functions: a genuine fix completes their bodies there too, while code that is honest
    in that process (at random, or by telling the twin from the verdict run) does not. A
    twin that can ask for no other mark (the task has one required function, or the command
    stops at its first failure) gets a tail twin beside it, which raises after the body and
    must leave its own mark; so does a function with no assertion to alter, instead. Built
    only once the verdict run passed (`agent_env.grading.runs.run_tests`): a failing patch (most
    of them) needs none."""
    originals, seeds, verdict_files = dict(prepared.originals), dict(prepared.seeds), dict(prepared.twin_files)
    by_path = _qualnames_by_path(prepared.functions)
    mark_of = dict(prepared.marks)
    marks_of = {(path, qualname): mark_of.get(tests[0]) for path, qualname, tests in prepared.functions}
    completes = not STOPS_AT_FIRST_FAILURE.search(prepared.command)
    twins: list[Twin] = []
    missing: list[str] = []
    for path, qualname, tests in prepared.functions:
        test, source, seed = tests[0], originals[path], seeds[path]
        own = marks_of[(path, qualname)]
        others = tuple(m for where, m in marks_of.items() if m is not None and where != (path, qualname))
        others = others if completes else ()
        try:
            twin = expectation_twin(source, path, test, qualname, rng, avoid=verdict_files[path])
            if twin.source is not None:
                marked = mark_tests(twin.source, path, by_path[path], seed, avoid=source).source
                twin = dataclasses.replace(twin, source=marked, marks=others)
        except Exception as exc:  # noqa: BLE001 - a builder's bug must not stop a training run
            log.exception("task %s: building a canary for %s failed (a grader bug)", task.id, test)
            twin = Twin("expectation", test, path, None, f"its builder failed ({type(exc).__name__})")
        if twin.source is not None:
            twins.append(twin)
        else:
            missing.append(f"{test}: no {twin.kind} canary: {twin.reason}")
        if own is not None and (twin.source is None or not others):  # the body completes, then it raises
            raising = mark_tests(source, path, by_path[path], seed, raising=qualname).source
            twins.append(Twin("tail", test, path, raising, mark=own, marks=(own, *others)))
    rng.shuffle(twins)
    return twins, missing


def _read_text(sandbox: Sandbox, path: str, cache: dict[str, str | None]) -> str | None:
    if path not in cache:
        try:
            cache[path] = sandbox.read_file(path).decode()
        except (SandboxError, UnicodeDecodeError, OSError):
            cache[path] = None
    return cache[path]


def prepare(task: Task, patch: str, sandbox: Sandbox, rng: random.Random) -> Prepared | str:
    """Apply the agent's patch and the test patch to the grading sandbox, revert what the
    allowlist refuses, and plan the runs. A string: git refused the patch (its words)."""
    files_cmd = "git ls-files -z --cached --others --exclude-standard 2>/dev/null"
    dropped = apply_agent_patch(task, patch, sandbox)
    if isinstance(dropped, str):
        return dropped
    if task.test_patch:
        sandbox.write_file(TEST_PATCH, task.test_patch)
        restored = git_apply(sandbox, TEST_PATCH)
        if restored.exit_code != 0:
            raise GradingError(
                f"task {task.id}: its test patch does not apply ({task.source}): {restored.output.strip()[:500]}"
            )
    files = frozenset(p for p in run_fresh(sandbox, files_cmd).output.split("\0") if p)
    required = [*task.grading.fail_to_pass, *task.grading.pass_to_pass]
    runner = runner_of(task.grading.test_command)
    sources: dict[str, str | None] = {}
    described = _django_descriptions(task, sandbox, files, sources) if runner == "django" else None
    positions = _pytest_positions(required, sandbox, sources) if runner == "pytest" else None
    if runner == "sympy":
        _select_sympy_tests(task, sandbox, files, required, sources)
    command = select_command(task.grading.test_command, required, files, described, positions)
    command = command or task.grading.test_command
    verdict_files, marks, functions, seeds, skipped = _plan_marks(task, sandbox, files, runner, rng, described, sources)
    return Prepared(
        dropped,
        files,
        command,
        (),
        tuple(skipped),
        tuple(sorted(verdict_files.items())),
        tuple(marks.items()),
        tuple((path, qualname, tuple(tests)) for (path, qualname), tests in functions.items()),
        tuple(seeds.items()),
        tuple((path, sources[path] or "") for path in seeds),
    )
