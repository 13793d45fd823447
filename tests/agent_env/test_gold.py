"""Gold actions in the editor style: hunks become unique `str_replace` calls that solve the task."""

import dataclasses

import pytest

from agent_env import ToolEnv, gold_actions
from agent_env.gold import GoldEditError, gold_edit_calls, hunk_edits, parse_unified_diff, visible_test_command
from agent_env.tools import parse_tool_calls
from tasks import builtin_tasks
from tests.conftest import needs_bwrap

PATCH = """\
diff --git a/pkg/mod.py b/pkg/mod.py
index 1111111..2222222 100644
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,5 +1,5 @@
 def f(x):
-    return x
+    return x + 1
\x20
 def g(x):
     return x
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1,2 @@
+A = 1
+B = 2
"""


def test_parse_unified_diff_reads_files_and_hunks():
    modified, created = parse_unified_diff(PATCH)
    assert (modified.old_path, modified.new_path) == ("pkg/mod.py", "pkg/mod.py")
    assert modified.hunks[0][1:3] == [("-", "    return x"), ("+", "    return x + 1")]
    assert (created.old_path, created.new_path) == (None, "pkg/new.py") and created.plain_text


def test_a_repeated_line_is_widened_until_unique():
    text = "def f(x):\n    return x\n\ndef g(x):\n    return x\n"
    edits = hunk_edits(text, parse_unified_diff(PATCH)[0].hunks)
    assert edits == [("def f(x):\n    return x", "def f(x):\n    return x + 1")]


def test_pure_insertions_and_deletions_keep_a_neighbouring_line():
    text = "a\nb\nc\n"
    insert = [[(" ", "a"), ("+", "new"), (" ", "b")]]
    delete = [[(" ", "a"), ("-", "b"), (" ", "c")]]
    assert hunk_edits(text, insert) == [("a", "a\nnew")]
    assert hunk_edits(text, delete) == [("a\nb", "a")]


def test_text_that_is_never_unique_is_refused():
    with pytest.raises(GoldEditError, match="not unique"):
        hunk_edits("x\nx\n", [[("-", "x"), ("+", "y")]])


def test_every_builtin_task_converts_and_is_shorter_than_its_patch():
    for task in builtin_tasks():
        calls = gold_edit_calls(task)
        edit, patch = gold_actions(task, style="edit")[0], gold_actions(task, style="patch")[0]
        assert len(parse_tool_calls(edit, task.tools)) == len(calls) >= 1
        assert len(edit) < len(patch), task.id


def test_the_edit_style_refuses_a_task_without_the_editor():
    task = dataclasses.replace(builtin_tasks()[0], tools=("execute_bash", "finish"))
    with pytest.raises(GoldEditError, match="str_replace_editor"):
        gold_actions(task, style="edit")
    assert "git apply" in gold_actions(task, style="auto")[0]  # auto falls back to the patch


@needs_bwrap
@pytest.mark.parametrize("task_id", ["config-argv-negative-numbers", "text-table-wide-characters"])
def test_multi_edit_gold_actions_resolve(task_id):
    """Tasks whose patches have several hunks (3 and 5 editor calls in one action)."""
    task = next(t for t in builtin_tasks() if t.id == task_id)
    with ToolEnv(task) as env:
        env.reset()
        first, finish = gold_actions(task, style="edit")
        observation, _, _, _, _ = env.step(first)
        assert observation.count("has been edited") == len(gold_edit_calls(task))
        _, reward, terminated, _, info = env.step(finish)
        assert terminated and reward == 1.0 and info["resolved"]


# -- the multi-turn `explore` style -------------------------------------------------------------


def test_explore_searches_views_edits_tests_and_finishes():
    task = next(t for t in builtin_tasks() if t.id == "text-dedent-whitespace-lines")
    actions = [parse_tool_calls(action, task.tools) for action in gold_actions(task, style="explore")]
    assert all(len(calls) == 1 for calls in actions)  # one tool call per turn
    search, view, edit, check, finish = (calls[0] for calls in actions)
    assert search.arguments == {"command": "cd /workspace && grep -rn 'def common_indent' --include=*.py ."}
    assert view.arguments == {"command": "view", "path": "/workspace/docfmt/blocks.py", "view_range": [18, 28]}
    assert edit.arguments["old_str"] == "        if not line:"
    # The hidden test module the test patch adds is not run, nor is unittest's -v kept.
    assert check.arguments == {"command": "cd /workspace && python3 -m unittest tests.test_blocks"}
    assert finish.name == "finish"


def test_visible_test_command_drops_hidden_tests_and_gives_up_when_none_are_left(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_old.py").write_text("")
    task = dataclasses.replace(
        builtin_tasks()[0],
        workspace=tmp_path,
        test_patch="diff --git a/tests/test_new.py b/tests/test_new.py\n",
        grading=builtin_tasks()[0].grading.model_copy(
            update={"test_command": "pytest -q tests/test_old.py tests/test_new.py::test_x"}
        ),
    )
    assert visible_test_command(task) == "pytest -q tests/test_old.py"
    only_hidden = dataclasses.replace(
        task, grading=task.grading.model_copy(update={"test_command": "pytest tests/test_new.py"})
    )
    assert visible_test_command(only_hidden) is None


def test_every_builtin_task_has_an_explore_trajectory_of_at_least_three_tool_turns():
    for task in builtin_tasks():
        actions = gold_actions(task, style="explore")
        tools = [parse_tool_calls(action, task.tools)[0].name for action in actions]
        assert tools[-1] == "finish" and len(tools) - 1 >= 3, (task.id, tools)
        assert tools.count("str_replace_editor") >= 2, task.id  # a view, then the edit(s)


@needs_bwrap
@pytest.mark.parametrize("task_id", ["text-dedent-whitespace-lines", "text-table-wide-characters"])
def test_explore_trajectories_resolve_with_real_observations(task_id):
    """Each turn is answered by the sandbox: the search finds the definition, the view shows
    its lines, the tests the repository already has pass after the edit."""
    task = next(t for t in builtin_tasks() if t.id == task_id)
    *turns, finish = gold_actions(task, style="explore")
    with ToolEnv(task) as env:
        env.reset()
        observations = [env.step(action)[0] for action in turns]
        _, reward, terminated, _, info = env.step(finish)
    assert terminated and reward == 1.0 and info["resolved"] and info["turns"] == len(turns) + 1
    tools = [parse_tool_calls(action, task.tools)[0] for action in turns]
    for call, observation in zip(tools, observations, strict=True):
        if call.name == "execute_bash" and "grep" in call.arguments["command"]:
            assert ".py:" in observation and "[exit code: 0]" in observation  # the definition was found
        elif call.arguments.get("command") == "view":
            assert "cat -n" in observation
        elif call.name == "execute_bash":  # the repository's own tests, after the edit
            assert "\nOK" in observation and "[exit code: 0]" in observation
