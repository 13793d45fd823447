"""`agent_env.validate`: the verdict per task, as data (the grading itself is exercised through
`python -m tasks validate` in tests/tasks/test_cli.py)."""

import shutil
from pathlib import Path

from agent_env.validate import TaskValidation, _not_applied, validate_task, validate_tasks
from tasks import BUILTIN_DIR, Task, builtin_tasks, load_task
from tasks.spec import GradingSpec
from tests.conftest import needs_bwrap

GRADING = GradingSpec(test_command="python -m unittest", fail_to_pass=["tests.test_x.T.test_x"])


def test_a_task_without_a_gold_patch_fails_naming_the_field():
    result = validate_task(Task(id="no-gold", problem_statement="p", grading=GRADING, source="t/task.yaml"))
    assert result.status == "failed" and not result.ok
    assert result.problems == ("t/task.yaml: field 'gold_patch': needed to prove the task can be solved",)


def test_a_task_that_cannot_run_here_is_unavailable_not_failed():
    tasks = [Task(id="far", problem_statement="p", grading=GRADING, unavailable="no clone of x/y")]
    assert list(validate_tasks(tasks)) == [
        TaskValidation("far", "unavailable", reason="not runnable here: no clone of x/y")
    ]


# -- real grading (local sandboxes) of a built-in task and broken copies of it ---------------

GOOD = BUILTIN_DIR / "parsing-querystring-plus"
F2P_KEY = "tests.test_plus_sign.PlusSignTests.test_encoded_plus_in_key"
P2P_UTF8 = "tests.test_query.ParseTests.test_utf8_escapes"


def _copy(tmp_path: Path, name: str, edit=lambda text: text, gold=lambda text: text) -> Task:
    """The built-in task under a new id, its task.yaml and gold patch edited."""
    folder = tmp_path / name
    shutil.copytree(GOOD, folder)
    definition = folder / "task.yaml"
    definition.write_text(edit(definition.read_text().replace("id: parsing-querystring-plus", f"id: {name}")))
    (folder / "gold.patch").write_text(gold((folder / "gold.patch").read_text()))
    return load_task(definition)


@needs_bwrap
def test_ok_says_what_was_checked_and_how_long_it_took():
    (task,) = builtin_tasks(["parsing-querystring-plus"])
    result = validate_task(task)
    assert (result.status, result.problems) == ("ok", ())
    assert result.checked == (
        "gold patch resolves it (3 FAIL_TO_PASS and 9 PASS_TO_PASS pass); empty patch does not (3 FAIL_TO_PASS fail)"
    )
    assert 0 < result.seconds < task.limits.grading_timeout_s * 2


@needs_bwrap
def test_a_gold_patch_that_does_not_apply_names_the_file_and_gits_reason(tmp_path):
    stale = "-    decoded = percent_decode(text, encoding=encoding)"
    task = _copy(tmp_path, "stale-gold", gold=lambda text: text.replace(stale, stale.replace("(text", "(txt")))
    result = validate_task(task)
    assert result.status == "failed"
    assert result.problems == (
        "gold patch does not apply to qsparse/decode.py (git apply: patch failed: qsparse/decode.py:46)",
    )


@needs_bwrap
def test_a_misspelled_test_id_is_reported_as_not_found_not_blamed_on_the_gold_patch(tmp_path):
    def misspell(text: str) -> str:
        text = text.replace(F2P_KEY, F2P_KEY.replace("PlusSignTests", "PlusSignTest"))
        return text.replace(P2P_UTF8, P2P_UTF8.removesuffix("s"))

    result = validate_task(_copy(tmp_path, "typo-ids", edit=misspell))
    assert result.status == "failed"
    assert result.problems == (
        "FAIL_TO_PASS: test id tests.test_plus_sign.PlusSignTest.test_encoded_plus_in_key not found in the test "
        f"output (did you mean {F2P_KEY}?)",
        f"PASS_TO_PASS: test id tests.test_query.ParseTests.test_utf8_escape not found in the test output "
        f"(did you mean {P2P_UTF8}?)",
    )
    # An id like no reported one: the test command may not run it.
    result = validate_task(_copy(tmp_path, "far-id", edit=lambda t: t.replace(P2P_UTF8, "elsewhere.Zzz.test_q")))
    assert result.problems == (
        "PASS_TO_PASS: test id elsewhere.Zzz.test_q not found in the test output (none of the 20 ids it reports "
        "is close: does grading.test_command run it?)",
    )


def test_gits_refusals_become_one_line_with_the_files():
    patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\ndiff --git a/c.py b/c.py\n--- a/c.py\n+++ b/c.py\n"
    log = "error: patch failed: a.py:1\nerror: a.py: patch does not apply\nerror: c.py: No such file or directory\n"
    assert _not_applied(log, patch) == (
        "gold patch does not apply to a.py, c.py (git apply: patch failed: a.py:1; c.py: No such file or directory)"
    )
    assert _not_applied("error: corrupt patch at line 7\n", patch) == (
        "gold patch does not apply (git apply: corrupt patch at line 7)"
    )
