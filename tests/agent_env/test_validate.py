"""`agent_env.validate`: the verdict per task, as data (the grading itself is exercised through
`python -m tasks validate` in tests/tasks/test_cli.py)."""

from agent_env.validate import TaskValidation, validate_task, validate_tasks
from tasks import Task
from tasks.spec import GradingSpec

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
