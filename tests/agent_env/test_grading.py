"""Grading is where reward hacking starts: each builtin task is graded for real."""

import difflib
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from agent_env import GradingError, ToolEnv, grade_patch
from tasks import builtin_tasks
from tests.conftest import needs_bwrap

pytestmark = needs_bwrap
TASKS = builtin_tasks()


def _one_per_family_fast(tasks: list) -> list:
    """The first task of each family (`collections-`, `config-`, ...) in `make test-fast`; the
    rest of the sweep is `slow` (each task is a full grading, ~1.3 s)."""
    seen: set[str] = set()
    params = []
    for task in tasks:
        family = task.id.split("-")[0]
        params.append(pytest.param(task, id=task.id, marks=() if family not in seen else pytest.mark.slow))
        seen.add(family)
    return params


@pytest.mark.parametrize("task", _one_per_family_fast(TASKS))
def test_gold_resolves_and_empty_does_not(task):
    gold = grade_patch(task, task.gold_patch)
    assert gold.resolved, (task.id, gold.failed, gold.blocked, gold.problems, gold.log[-2000:])
    assert not gold.missing
    # The verdict run left every FAIL_TO_PASS test's mark (its body completed); each test
    # function has one canary twin that alters its assertions (one for all the parameters a
    # function runs with), and the genuine fix fails each one.
    assert gold.marks == tuple((test, True) for test in task.grading.fail_to_pass)
    twinned = sorted(test.split("[")[0] for test, kind, _ in gold.canaries if kind in ("expectation", "negation"))
    assert twinned == sorted({test.split("[")[0] for test in task.grading.fail_to_pass})
    assert all(code not in (0, None) for _, _, code in gold.canaries) and not gold.notes
    empty = grade_patch(task, "")
    assert not empty.resolved
    assert set(task.grading.fail_to_pass) <= set(empty.failed)


def _delete_patch(path: str, text: str) -> str:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    body = "\n".join("-" + line for line in lines)
    return (
        f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n"
        f"@@ -1,{len(lines)} +0,0 @@\n{body}\n"
    )


def test_deleting_visible_tests_never_reaches_the_grader():
    # A visible test file the hidden test patch does not touch, holding PASS_TO_PASS tests:
    # its deletion is dropped, so the tests still run (and still decide the verdict).
    task, path = next(
        (t, p)
        for t in TASKS
        for p in sorted(t.workspace.rglob("test_*.py"))
        if str(p.relative_to(t.workspace)) not in t.test_files()
        and any(name.startswith(p.stem + ".") or f".{p.stem}." in name for name in t.grading.pass_to_pass)
    )
    relative = str(path.relative_to(task.workspace))
    patch = _delete_patch(relative, path.read_text())
    alone = grade_patch(task, patch)
    assert not alone.resolved and alone.dropped == ((relative, "test"),) and alone.blocked == ("protected_files",)
    assert not alone.missing  # the deleted tests ran
    with_gold = grade_patch(task, task.gold_patch + patch)
    assert with_gold.resolved and with_gold.dropped == ((relative, "test"),)


def test_editing_hidden_test_files_is_undone_before_grading():
    task = TASKS[0]
    # A patch that rewrites every test file the hidden test patch touches into a no-op.
    target = task.test_files()[0]
    existing = task.workspace / target
    if existing.exists():
        original = existing.read_text()
        patch = _delete_patch(target, original)
    else:
        patch = (
            f"diff --git a/{target} b/{target}\nnew file mode 100644\n--- /dev/null\n+++ b/{target}\n@@ -0,0 +1 @@\n+\n"
        )
    result = grade_patch(task, patch)
    assert not result.resolved
    assert set(task.grading.fail_to_pass) <= set(result.failed)


def test_a_patch_that_does_not_apply_is_unresolved_not_an_error():
    task = TASKS[0]
    result = grade_patch(task, "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n")
    assert not result.patch_applied and not result.resolved


def test_a_test_run_that_times_out_is_an_error_not_a_zero():
    task = TASKS[0]
    slow = replace(
        task,
        grading=task.grading.model_copy(update={"test_command": "sleep 30"}),
        limits=task.limits.model_copy(update={"grading_timeout_s": 1}),
    )
    with pytest.raises(GradingError, match="timed out"):
        grade_patch(slow, task.gold_patch)


def test_a_task_sandbox_definition_sets_env_and_limits(tmp_path):
    import shutil

    import yaml

    from tasks import load_task

    source = TASKS[0].source
    folder = tmp_path / "task"
    shutil.copytree(Path(source).parent, folder)
    data = yaml.safe_load((folder / "task.yaml").read_text())
    data["sandbox"] = {"env": {"TASK_COLOUR": "teal"}, "limits": {"output_bytes": 4096}}
    (folder / "task.yaml").write_text(yaml.safe_dump(data))
    task = load_task(folder)
    from agent_env import sandbox_spec_for

    spec = sandbox_spec_for(task)
    assert spec.env["TASK_COLOUR"] == "teal" and spec.limits.output_bytes == 4096
    assert spec.limits.timeout_s == task.limits.command_timeout_s
    with ToolEnv(task) as env:
        env.reset()
        observation, *_ = env.step(
            '<tool_call>{"name": "execute_bash", "arguments": {"command": "echo $TASK_COLOUR"}}</tool_call>'
        )
        assert observation.startswith("teal")
    # A malformed definition is reported with the file and the field.
    data["sandbox"] = {"workdir": "relative"}
    (folder / "task.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(Exception, match=r"task.yaml.*workdir"):
        sandbox_spec_for(load_task(folder))
    data["sandbox"] = {"workspace": "elsewhere"}
    (folder / "task.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(Exception, match=r"'sandbox'.*belongs to the task"):
        load_task(folder)


def test_a_canary_builder_that_fails_is_named_and_grading_goes_on(monkeypatch):
    # A bug in a twin builder (pylint's `assert self.texts` once raised KeyError in the
    # negation twin) must not stop a training run: the twin is missing, and the note says why.
    from agent_env.grading import plan

    def broken(*args, **kwargs):
        raise KeyError("texts")

    monkeypatch.setattr(plan, "expectation_twin", broken)
    task = TASKS[0]
    gold = grade_patch(task, task.gold_patch)
    assert gold.resolved and {kind for _, kind, _ in gold.canaries} == {"tail"}
    assert all(code not in (0, None) for _, _, code in gold.canaries)
    assert sorted(gold.notes) == sorted(
        f"{test}: no expectation canary: its builder failed (KeyError)" for test in task.grading.fail_to_pass
    )


def test_a_command_past_one_arguments_limit_runs_and_tested_code_cannot_rewrite_it():
    # pydata__xarray-3993's narrowed command names over a thousand node ids: as the one
    # argument of `bash -c` it is past Linux's 128 KiB limit ("Argument list too long").
    from agent_env.grading import runs
    from sandboxes import SandboxSpec, make_sandbox

    words = " ".join(f"id{i:06d}" for i in range(20_000))  # 180,000 bytes
    with make_sandbox(SandboxSpec()) as sandbox:
        assert sandbox.exec(f"printf '%s\\n' {words} | wc -l", timeout=60, fresh=True).exit_code != 0
        counted = runs.run_command(sandbox, f"printf '%s\\n' {words} | wc -l", timeout=60)
        assert (counted.exit_code, counted.output.strip()) == (0, "20000")
        # The attack: a process the command starts (tested code) rewrites the file it came
        # from; `bash FILE` then reads on from its offset, past the new end, and exits 0
        # (as here). Bash had read all of it first, so the run fails as written.
        rewrite = f"sh -c \"printf 'exit 0\\\\n' > {runs.COMMAND_FILE}\""
        attack = f": {words}\n{rewrite}\nfalse\n"
        sandbox.write_file(runs.COMMAND_FILE, attack)
        assert sandbox.exec(f"bash {runs.COMMAND_FILE}", timeout=60, fresh=True).exit_code == 0
        assert runs.run_command(sandbox, attack, timeout=60).exit_code == 1


CLAMP_TASK = Path(__file__).parent.parent / "fixtures" / "hack_tasks" / "pytest-clamp-upper"
KNOWN_BUG = "tests/test_known.py::test_lerp_of_a_third"


def _with_a_known_bug(tmp_path: Path):
    """The pytest fixture task, with a PASS_TO_PASS test its repository marks as an expected
    failure (as matplotlib__matplotlib-22719's are): it xfails with or without any fix."""
    import yaml

    from tasks import load_task

    folder = tmp_path / "task"
    shutil.copytree(CLAMP_TASK, folder)
    (folder / "repo" / "tests" / "test_known.py").write_text(
        "import pytest\n\nfrom clampy import lerp\n\n\n"
        '@pytest.mark.xfail(reason="floats")\ndef test_lerp_of_a_third():\n    assert lerp(0, 1, 1 / 3) == 0.3\n'
    )
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    spec["grading"]["pass_to_pass"].append(KNOWN_BUG)
    spec["grading"]["test_command"] += " tests/test_known.py"
    (folder / "task.yaml").write_text(yaml.safe_dump(spec))
    return load_task(folder)


def _edit_patch(task, path: str, old: str, new: str) -> str:
    before = (task.workspace / path).read_text()
    after = before.replace(old, new, 1)
    assert after != before
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


def test_a_test_the_repository_expects_to_fail_passes_as_the_harness_counts_it(tmp_path):
    task = _with_a_known_bug(tmp_path)
    gold = grade_patch(task, task.gold_patch)
    assert gold.resolved and not gold.blocked, (gold.problems, gold.log[-2000:])
    assert gold.statuses[KNOWN_BUG] == "PASSED"
    assert gold.notes == (f"{KNOWN_BUG}: an expected failure in the pristine workspace too, counted as passed",)
    empty = grade_patch(task, "")
    assert not empty.resolved and set(empty.failed) == set(task.grading.fail_to_pass)
    assert "xfail_required" not in empty.blocked


def test_tested_code_that_xfails_a_passing_test_is_still_refused(tmp_path):
    # The attack: the fix, plus `pytest.xfail` from the code under test in a PASS_TO_PASS
    # test that passes in the pristine workspace. The control run says it passed there.
    task = _with_a_known_bug(tmp_path)
    xfail = _edit_patch(
        task,
        "clampy/core.py",
        "    if value > high:\n        return low\n    return value\n",
        '    if value > high:\n        return high\n    if value == 5:\n        __import__("pytest").xfail("flaky")\n'
        "    return value\n",
    )
    result = grade_patch(task, xfail)
    assert not result.resolved
    assert result.blocked == ("xfail_required",)
    assert result.problems == ("xfail_required: tests/test_core.py::test_inside is an expected failure",)
    assert result.statuses[KNOWN_BUG] == "PASSED"  # the repository's own expected failure still counts


def test_a_verdict_log_longer_than_the_agents_output_cap_is_read_whole(tmp_path):
    """The agent's commands keep `output_bytes` of output (here 512 bytes, the middle
    dropped); the verdict run keeps `GRADING_OUTPUT_BYTES`, or a large row's passing tests
    read as missing (matplotlib__matplotlib-25122, 2,488 required tests, at 256 KiB)."""
    import yaml

    from agent_env import sandbox_spec_for
    from agent_env.grading.runs import GRADING_OUTPUT_BYTES, grading_spec_for
    from sandboxes import make_sandbox
    from tasks import load_task

    folder = tmp_path / "task"
    shutil.copytree(Path(TASKS[0].source).parent, folder)
    data = yaml.safe_load((folder / "task.yaml").read_text())
    data["sandbox"] = {"limits": {"output_bytes": 512}}
    (folder / "task.yaml").write_text(yaml.safe_dump(data))
    task = load_task(folder)
    assert sandbox_spec_for(task).limits.output_bytes == 512
    assert grading_spec_for(task).limits.output_bytes == GRADING_OUTPUT_BYTES
    with make_sandbox(sandbox_spec_for(task)) as sandbox:  # what the agent would see
        assert "bytes of output dropped" in sandbox.exec(task.grading.test_command, fresh=True).output
    gold = grade_patch(task, task.gold_patch)
    assert gold.resolved and not gold.missing and "bytes of output dropped" not in gold.log
