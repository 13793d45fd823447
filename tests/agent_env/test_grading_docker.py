"""The built-in suite in the docker backend: the same grading, the same verdicts."""

import pytest

from agent_env import ToolEnv, gold_actions, grade_patch
from sandboxes import make_sandbox
from tasks import builtin_tasks

pytestmark = pytest.mark.docker
TASKS = builtin_tasks()


def docker(spec):
    return make_sandbox(spec, "docker")


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_gold_resolves_and_empty_does_not_in_docker(task):
    gold = grade_patch(task, task.gold_patch, sandbox_factory=docker)
    assert gold.resolved, (task.id, gold.failed, gold.blocked, gold.problems, gold.log[-2000:])
    # The marks and the twins as locally: every mark left, one twin per FAIL_TO_PASS test
    # function, each failed by the genuine fix.
    assert gold.marks == tuple((test, True) for test in task.grading.fail_to_pass)
    functions = {test.split("[")[0] for test in task.grading.fail_to_pass}
    assert len(gold.canaries) == len(functions) and not gold.notes
    assert all(code not in (0, None) for _, _, code in gold.canaries)
    assert not grade_patch(task, "", sandbox_factory=docker).resolved


def test_an_agent_episode_in_docker():
    task = TASKS[0]
    with ToolEnv(task, sandbox_factory=docker) as env:
        env.reset()
        first, finish = gold_actions(task)
        observation, *_ = env.step(first)
        assert "[exit code: 0]" in observation
        _, reward, terminated, _, info = env.step(finish)
        assert (reward, terminated) == (1.0, True) and info["patch"].startswith("diff --git")
