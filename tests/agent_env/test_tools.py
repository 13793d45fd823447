import json

import pytest

from agent_env import TOOL_SCHEMAS, ToolCall, ToolCallError, format_tool_call, parse_tool_calls, tool_schemas
from agent_env.editor import ToolRunner, truncate_middle
from sandboxes import SandboxSpec, make_sandbox
from tests.conftest import needs_bwrap

ALL = ("execute_bash", "str_replace_editor", "finish")


def test_schemas_are_openai_functions_with_openhands_names():
    schemas = tool_schemas(ALL)
    assert [s["function"]["name"] for s in schemas] == list(ALL)
    for schema in schemas:
        assert schema["type"] == "function"
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
    editor = TOOL_SCHEMAS["str_replace_editor"]["function"]["parameters"]["properties"]["command"]["enum"]
    assert editor == ["view", "create", "str_replace", "insert", "undo_edit"]
    json.dumps(schemas)  # serialisable


def test_parse_hermes_tool_call_round_trips():
    call = ToolCall("execute_bash", {"command": "ls -la"})
    text = "Let me look.\n" + format_tool_call(call)
    assert parse_tool_calls(text, ALL) == [call]


def test_parse_accepts_unclosed_final_call_and_string_arguments():
    text = '<tool_call>{"name": "finish", "arguments": "{\\"message\\": \\"done\\"}"}'
    assert parse_tool_calls(text, ALL) == [ToolCall("finish", {"message": "done"})]


def test_parse_multiple_calls_in_order():
    text = format_tool_call(ToolCall("execute_bash", {"command": "a"})) + format_tool_call(ToolCall("finish"))
    assert [c.name for c in parse_tool_calls(text, ALL)] == ["execute_bash", "finish"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I will just talk.", "No tool call"),
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ('<tool_call>["execute_bash"]</tool_call>', '"name"'),
        ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', "Unknown tool"),
        ('<tool_call>{"name": "finish", "arguments": [1]}</tool_call>', "JSON object"),
    ],
)
def test_malformed_calls_raise_a_message_for_the_model(text, message):
    with pytest.raises(ToolCallError, match=message):
        parse_tool_calls(text, ALL)


def test_truncate_middle_keeps_head_and_tail():
    text = "a" * 50 + "b" * 50
    out = truncate_middle(text, 20)
    assert out.startswith("a" * 10) and out.endswith("b" * 10) and "80 characters omitted" in out
    assert truncate_middle("short", 20) == "short"


@needs_bwrap
def test_editor_commands_against_a_real_sandbox(tmp_path):
    (tmp_path / "mod.py").write_text("def f():\n    return 1\n")
    with make_sandbox(SandboxSpec(workspace=tmp_path)) as sandbox:
        runner = ToolRunner(sandbox, command_timeout=10, max_output_chars=2000)
        edit = lambda **kw: runner.run(ToolCall("str_replace_editor", kw))  # noqa: E731
        assert "     2\t    return 1" in edit(command="view", path="/workspace/mod.py")
        assert "mod.py" in edit(command="view", path="/workspace")
        edit(command="str_replace", path="/workspace/mod.py", old_str="return 1", new_str="return 2")
        assert sandbox.read_file("mod.py") == b"def f():\n    return 2\n"
        edit(command="insert", path="/workspace/mod.py", insert_line=0, new_str="import os")
        assert sandbox.read_file("mod.py").startswith(b"import os\ndef f()")
        edit(command="undo_edit", path="/workspace/mod.py")
        edit(command="undo_edit", path="/workspace/mod.py")
        assert sandbox.read_file("mod.py") == b"def f():\n    return 1\n"
        edit(command="create", path="/workspace/pkg/new.py", file_text="x = 1\n")
        assert sandbox.read_file("pkg/new.py") == b"x = 1\n"
        with pytest.raises(ToolCallError, match="already exists"):
            edit(command="create", path="/workspace/pkg/new.py", file_text="")
        with pytest.raises(ToolCallError, match="did not appear verbatim"):
            edit(command="str_replace", path="/workspace/mod.py", old_str="nope", new_str="")
        with pytest.raises(ToolCallError, match="absolute"):
            edit(command="view", path="mod.py")
        with pytest.raises(ToolCallError, match="does not exist"):
            edit(command="view", path="/workspace/missing.py")
        bash = runner.run(ToolCall("execute_bash", {"command": "echo hi; exit 4"}))
        assert bash == "hi\n[exit code: 4]"


def test_parse_openai_style_messages():
    message = {
        "content": None,
        "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "execute_bash", "arguments": '{"command": "ls"}'}},
            {"id": "2", "type": "function", "function": {"name": "finish", "arguments": ""}},
        ],
    }
    assert parse_tool_calls(message, ALL) == [ToolCall("execute_bash", {"command": "ls"}), ToolCall("finish", {})]
    text_only = {"content": format_tool_call(ToolCall("finish"))}
    assert parse_tool_calls(text_only, ALL) == [ToolCall("finish", {})]
    with pytest.raises(ToolCallError, match="No tool call"):
        parse_tool_calls({"content": "thinking"}, ALL)
    with pytest.raises(ToolCallError, match='"function"'):
        parse_tool_calls({"tool_calls": [{"type": "function"}]}, ALL)
    with pytest.raises(ToolCallError, match="Unknown tool"):
        parse_tool_calls({"tool_calls": [{"function": {"name": "nope", "arguments": "{}"}}]}, ALL)


@needs_bwrap
@pytest.mark.parametrize("command", ["str_replace", "undo_edit", "create"])
def test_an_edit_in_the_second_of_the_last_run_runs_the_new_code(tmp_path, command):
    """Python checks a cached .pyc by its source's mtime in whole seconds and its size, so an
    edit of the same size in the second the last run cached the module ran the old code: an
    agent that fixed `+ 1` to `- 1` and ran the tests at once saw its fix fail. The second is
    pinned here (`touch -d`), as a fast tool loop lands it by chance. (`insert` always changes
    the size.)"""
    (tmp_path / "mod.py").write_text("X = 1\n")
    with make_sandbox(SandboxSpec(workspace=tmp_path)) as sandbox:
        runner = ToolRunner(sandbox, command_timeout=10, max_output_chars=2000)
        edit = lambda **kw: runner.run(ToolCall("str_replace_editor", kw))  # noqa: E731
        bash = lambda command: runner.run(ToolCall("execute_bash", {"command": command}))  # noqa: E731
        run = "python3 -c 'import mod; print(mod.X)'"
        pin = "touch -d @1700000000 /workspace/mod.py"
        if command == "create":  # a file removed and created again, same size, same second
            assert bash(f"{pin} && {run} && rm mod.py") == "1\n[exit code: 0]"
            edit(command="create", path="/workspace/mod.py", file_text="X = 2\n")
        else:
            if command == "undo_edit":
                edit(command="str_replace", path="/workspace/mod.py", old_str="X = 1", new_str="X = 3")
            assert bash(f"{pin} && {run}").startswith("3\n" if command == "undo_edit" else "1\n")
            if command == "str_replace":
                edit(command="str_replace", path="/workspace/mod.py", old_str="X = 1", new_str="X = 2")
            else:
                edit(command="undo_edit", path="/workspace/mod.py")
        expected = {"str_replace": "2", "undo_edit": "1", "create": "2"}[command]
        assert bash(f"{pin} && {run}") == f"{expected}\n[exit code: 0]"
