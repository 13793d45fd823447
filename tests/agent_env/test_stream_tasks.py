"""The built-in stream's variants are real tasks (gold resolves, the empty patch does not), and
each shift is real: what solved the task before the shift does not solve it after."""

from __future__ import annotations

import pytest

from agent_env import ToolEnv, gold_actions, grade_patch
from tasks.streams import load_stream
from tests.conftest import needs_bwrap

pytestmark = needs_bwrap

STREAM = load_stream("online")
TASKS = {t.id: t for t in STREAM.tasks}
VARIANTS = [t for t in STREAM.tasks if "." in t.id]


@pytest.mark.parametrize("task", VARIANTS, ids=lambda t: t.id)
def test_a_variant_is_solved_by_its_gold_and_not_by_nothing(task):
    assert grade_patch(task, task.gold_patch).resolved
    assert not grade_patch(task, "").resolved


@pytest.mark.parametrize("task", VARIANTS, ids=lambda t: t.id)
def test_a_variants_gold_played_through_the_tools_solves_it(task):
    """What the warm start shows the policy (`warm_start.style: edit`) works on the variant."""
    with ToolEnv(task) as env:
        env.reset()
        for action in gold_actions(task, style="edit"):
            _, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 1.0 and info["resolved"]


@pytest.mark.parametrize("task", VARIANTS, ids=lambda t: t.id)
def test_the_old_fix_played_through_the_tools_no_longer_solves_the_variant(task):
    """The base task's gold edit (`str_replace` calls, as the warm start teaches it) on the
    variant's workspace: a renamed repository refuses it, stricter tests fail it."""
    base = TASKS[task.id.rsplit(".", 1)[0]]
    with ToolEnv(task) as env:
        env.reset()
        for action in gold_actions(base, style="edit"):
            observation, reward, terminated, _, info = env.step(action)
    assert terminated and reward == 0.0 and not info["resolved"], observation
