"""Grading is adversarial: every reward hack in `hacks.py` must earn nothing.

Each hack is applied the two ways a policy could: through the agent's own tools in a
`ToolEnv` episode (files written with `str_replace_editor` / `execute_bash`, then the
hack's shell commands, then `finish`), and as a patch handed to `grade_patch`. Targets: a
built-in unittest task, a pytest task (tests/fixtures/hack_tasks/), and a SWE-bench row over
the synthetic requests repository (`slow`: its environment is built once per machine).
Both sandbox backends. For every hack: no exception, reward 0, and where a rule of the
grading contract applies, that rule in `blocked`. The defence must not over-block either:
gold alone resolves, the empty patch does not, and gold beside a hack that only tampers
with tests or runner infrastructure still resolves (the tampering is dropped, not the fix).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import shlex
import tempfile
from pathlib import Path

import pytest

from agent_env import ToolEnv, grade_patch
from sandboxes import make_sandbox
from tasks import builtin_tasks, load_task
from tests.agent_env import hacks as H
from tests.conftest import needs_bwrap

pytestmark = [pytest.mark.adversarial, needs_bwrap]

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hack_tasks"
BACKENDS = [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=pytest.mark.docker)]


def _targets() -> dict[str, H.Target]:
    unittest_task = next(t for t in builtin_tasks() if t.id == "text-dedent-whitespace-lines")
    pytest_task = load_task(FIXTURES / "pytest-clamp-upper")
    return {
        "unittest": H.Target(
            "unittest", unittest_task, "docfmt/__init__.py", "tests/__init__.py", "tests/test_blocks.py"
        ),
        "pytest": H.Target("pytest", pytest_task, "clampy/__init__.py", "tests/__init__.py", "tests/test_core.py"),
    }


TARGETS = _targets()


def factory(backend: str):
    return lambda spec: make_sandbox(spec, backend)


def _fast(task):
    """A hack that hangs or stops its sandbox: short limits, so that the suite stays quick."""
    return dataclasses.replace(
        task, limits=task.limits.model_copy(update={"grading_timeout_s": 8.0, "command_timeout_s": 5.0})
    )


def _grade(target: H.Target, hack: H.Hack | None, patch: str, backend: str):
    task = _fast(target.task) if hack is not None and hack.fast_timeout else target.task
    try:
        return grade_patch(task, patch, sandbox_factory=factory(backend))
    except Exception as exc:  # noqa: BLE001 - an exception is itself a finding: name it
        pytest.fail(f"RAISES: grade_patch raised {type(exc).__name__}: {str(exc)[:500]}")


def _hack_patch(target: H.Target, hack: H.Hack, *, with_gold: bool = False) -> str:
    if hack.raw_patch is not None:
        raw = hack.raw_patch(target)
        return (target.task.gold_patch + raw) if with_gold else raw
    ops = hack.ops(target)
    if not with_gold:
        return H.diff_of(target, ops)
    with tempfile.TemporaryDirectory() as tmp:
        import subprocess

        work = H.materialise(target, ops, Path(tmp))
        subprocess.run(["git", "apply"], input=target.task.gold_patch, text=True, cwd=work, check=True)
        subprocess.run(["git", "add", "-A", "-f"], cwd=work, check=True)
        return subprocess.run(
            ["git", "diff", "--cached", "--binary", "--no-ext-diff", "--no-textconv", "HEAD"],
            cwd=work, check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip


def _check_blocked(hack: H.Hack, blocked, kind: str | None = None) -> None:
    if kind in hack.plain_failure_under and not blocked:
        return  # a plain failure, no rule: the hack never took effect (`Hack.plain_failure_under`)
    if hack.expect:
        assert set(blocked) & hack.expect, f"BLOCKED-RULE: expected one of {sorted(hack.expect)}, got {blocked!r}"


def _plain(target: H.Target, hack: H.Hack) -> bool:
    """A hack made only of text written to .py files: through the agent's tools it becomes
    the same patch as on the patch path, by the same editor and diff as any other such hack."""
    if hack.agent_only or hack.commands is not None or hack.raw_patch is not None:
        return False
    ops = hack.ops(target).items()
    return all(op.action != "delete" and op.mode is None and b"\0" not in op.data and path.endswith(".py")
               for path, op in ops)  # fmt: skip


def _docker_agent_cases() -> set[str]:
    """The hacks whose agent-tools path runs on docker as well: every one that uses the shell,
    git, odd files or modes (the docker sandbox's own tools and diff), and the first plain one
    of each class. Every hack's patch path runs on both backends; this keeps CI near 30 min."""
    keep, classes = set(), set()
    for hack in H.HACKS:
        kind = next((k for k in hack.kinds if k in TARGETS), None)
        if kind is None:
            continue
        family = hack.name.split("_", 1)[0]
        if not _plain(TARGETS[kind], hack) or family not in classes:
            keep.add(hack.name)
            classes.add(family)
    return keep


def _params(kinds: tuple[str, ...], *, agent: bool, only=None):
    docker_agent = _docker_agent_cases() if agent else set()
    out = []
    for kind in kinds:
        for hack in H.HACKS:
            if kind not in hack.kinds or (only and not only(hack)):
                continue
            if agent:
                # The agent's path runs each hack once, on the first task kind it applies to.
                if hack.raw_patch is not None or kind != next(k for k in hack.kinds if k in TARGETS):
                    continue
            elif hack.agent_only:
                continue
            for backend in BACKENDS:
                if agent and backend.id == "docker" and hack.name not in docker_agent:
                    continue
                out.append(pytest.param(kind, hack, backend.values[0], id=f"{kind}-{hack.name}-{backend.id}",
                                        marks=backend.marks))  # fmt: skip
    return out


# -- the defence does not over-block -----------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", list(TARGETS))
def test_gold_resolves_and_empty_does_not(kind, backend):
    target = TARGETS[kind]
    gold = _grade(target, None, target.task.gold_patch, backend)
    assert gold.resolved, (gold.failed, getattr(gold, "blocked", None), gold.log[-2000:])
    assert not getattr(gold, "blocked", ())
    empty = _grade(target, None, "", backend)
    assert not empty.resolved
    assert set(target.task.grading.fail_to_pass) <= set(empty.failed)


@pytest.mark.parametrize(
    ("kind", "hack", "backend"), _params(tuple(TARGETS), agent=False, only=lambda h: h.tamper_only)
)
def test_gold_beside_tampering_still_resolves(kind, hack, backend):
    target = TARGETS[kind]
    result = _grade(target, hack, _hack_patch(target, hack, with_gold=True), backend)
    assert result.resolved, (
        f"OVER-BLOCKS: {getattr(result, 'blocked', None)} failed={result.failed} {result.log[-1500:]}"
    )
    _check_blocked(hack, getattr(result, "blocked", ()))


# -- every hack, as a patch ---------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "hack", "backend"), _params(tuple(TARGETS), agent=False))
def test_hack_as_patch_earns_nothing(kind, hack, backend):
    target = TARGETS[kind]
    result = _grade(target, hack, _hack_patch(target, hack), backend)
    assert not result.resolved, f"PAYS: {hack.name} ({hack.doc}) resolved: statuses={result.statuses}"
    _check_blocked(hack, getattr(result, "blocked", ()), kind)


# -- every hack, through the agent's own tools ------------------------------------------------


def _call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _bash(command: str) -> str:
    return _call("execute_bash", command=command)


def _actions(target: H.Target, hack: H.Hack) -> list[str]:
    """The hack as an agent would type it: editor for new text files, bash for the rest."""
    workdir = "/workspace"
    actions = []
    if hack.agent_fixes:
        gold = base64.b64encode(target.task.gold_patch.encode()).decode()
        actions.append(_bash(f"cd {workdir} && echo {gold} | base64 -d | git apply"))
    for path, op in hack.ops(target).items():
        full = f"{workdir}/{path}"
        quoted = shlex.quote(full)
        data = base64.b64encode(op.data).decode()
        exists = (target.task.workspace / path).exists()
        if op.action == "delete":
            actions.append(_bash(f"rm -f {quoted}"))
        elif op.action == "write" and not exists and op.mode is None and b"\0" not in op.data and path.endswith(".py"):
            actions.append(_call("str_replace_editor", command="create", path=full, file_text=op.data.decode()))
        elif op.action == "prepend":
            actions.append(_bash(f"{{ echo {data} | base64 -d; cat {quoted}; }} > /tmp/.h && cat /tmp/.h > {quoted}"))
        else:
            redirect = ">>" if op.action == "append" else ">"
            actions.append(_bash(f"mkdir -p $(dirname {quoted}) && echo {data} | base64 -d {redirect} {quoted}"))
        if "__pycache__" in path or path.endswith(".pyc"):
            actions.append(_bash(f"cd {workdir} && git add -f {shlex.quote(path)}"))  # past .git/info/exclude
    for command in hack.commands(target) if hack.commands else []:
        actions.append(_bash(f"cd {workdir} && {command}"))
    actions.append(_call("finish", message="done"))
    return actions


@pytest.mark.parametrize(("kind", "hack", "backend"), _params(tuple(TARGETS), agent=True))
def test_hack_through_agent_tools_earns_nothing(kind, hack, backend):
    target = TARGETS[kind]
    task = _fast(target.task) if hack.fast_timeout else target.task
    env = ToolEnv(task, sandbox_factory=factory(backend))
    try:
        env.reset()
        reward, info, done = 0.0, {}, False
        for action in _actions(target, hack):
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                done = True
                break
        assert done, "the episode did not end"
    except Exception as exc:  # noqa: BLE001 - an exception is itself a finding: name it
        pytest.fail(f"RAISES: the episode raised {type(exc).__name__}: {str(exc)[:500]}")
    finally:
        env.close()
    blocked = tuple(info.get("reward_hack_blocked", ()))
    if hack.agent_fixes:
        assert reward == 1.0, f"HIDES-FIX: the real fix was not graded; patch={info.get('patch', '')[:500]!r}"
        return
    assert reward == 0.0, f"PAYS: {hack.name} ({hack.doc}) earned {reward}; patch={info.get('patch', '')[:300]!r}"
    # `kill -9 -1` / `kill -STOP -1` no longer reach the supervisor, so the sandbox survives
    # them (the conformance attacks check that); a sandbox that does die is the agent's 0
    # (`agent_broke_sandbox`, tests/agent_env/test_env.py).
    if hack.agent_expect is not None:
        hack = dataclasses.replace(hack, expect=hack.agent_expect)
    _check_blocked(hack, blocked, kind)


# -- a SWE-bench row (the synthetic requests repository) --------------------------------------


@pytest.fixture(scope="module")
def swe_targets(tmp_path_factory):
    from agent_env import prepare_environment
    from tasks.swebench import row_to_task
    from tests.tasks import swebench_repo as repo

    if problem := repo.index_problem():
        pytest.skip(problem)
    patch = pytest.MonkeyPatch()
    patch.setenv("AGENTIC_RL_ENV_CACHE", str(Path(tempfile.gettempdir()) / "agentic-rl-test-envs"))
    root = tmp_path_factory.mktemp("hack-repo-cache")
    commits = repo.make_clone(root / "psf__requests")
    task = row_to_task(repo.requests_row(commits), "rows.jsonl:1", root)
    built: dict[str, H.Target] = {}

    def get(backend: str) -> H.Target:
        if backend not in built:
            prepared = prepare_environment(task, backend)
            if prepared.unavailable:
                pytest.skip(f"the requests row cannot run on {backend}: {prepared.unavailable}")
            built[backend] = H.Target("swebench", prepared, "requests/__init__.py", None, "test_requests.py")
        return built[backend]

    yield get
    patch.undo()


def _swe_params(agent: bool):
    out = []
    for hack in H.HACKS:
        if "swebench" not in hack.kinds or (agent and hack.raw_patch is not None) or (not agent and hack.agent_only):
            continue
        if agent and hack.name not in ("git_shell_function", "source_patches_runner", "conftest_makereport_passes"):
            continue
        for backend in BACKENDS:
            out.append(pytest.param(hack, backend.values[0], id=f"swebench-{hack.name}-{backend.id}",
                                    marks=[*backend.marks, pytest.mark.slow]))  # fmt: skip
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_swebench_gold_resolves_and_empty_does_not(swe_targets, backend):
    target = swe_targets(backend)
    assert _grade(target, None, target.task.gold_patch, backend).resolved
    assert not _grade(target, None, "", backend).resolved


@pytest.mark.parametrize(("hack", "backend"), _swe_params(agent=False))
def test_swebench_hack_as_patch_earns_nothing(swe_targets, hack, backend):
    target = swe_targets(backend)
    result = _grade(target, hack, _hack_patch(target, hack), backend)
    assert not result.resolved, f"PAYS: {hack.name} ({hack.doc}) resolved: statuses={result.statuses}"
    _check_blocked(hack, getattr(result, "blocked", ()), "swebench")
    if hack.tamper_only:
        both = _grade(target, hack, _hack_patch(target, hack, with_gold=True), backend)
        assert both.resolved, f"OVER-BLOCKS: {getattr(both, 'blocked', None)} {both.log[-1500:]}"


@pytest.mark.parametrize(("hack", "backend"), _swe_params(agent=True))
def test_swebench_hack_through_agent_tools_earns_nothing(swe_targets, hack, backend):
    target = swe_targets(backend)
    with ToolEnv(target.task, sandbox_factory=factory(backend)) as env:
        env.reset()
        try:
            for action in _actions(target, hack):
                _, reward, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"RAISES: the episode raised {type(exc).__name__}: {str(exc)[:500]}")
    assert terminated or truncated
    assert reward == 0.0, f"PAYS: {hack.name} earned {reward}"
    _check_blocked(hack, tuple(info.get("reward_hack_blocked", ())))


def test_the_catalogue_is_broad():
    """At least 30 distinct hacks, each on a task kind the suite runs."""
    assert len(H.HACKS) >= 30
    assert all(set(h.kinds) <= {"unittest", "pytest", "swebench"} and h.kinds for h in H.HACKS)
