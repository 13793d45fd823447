"""The agent's tools, OpenHands CodeAct-compatible, and parsing them out of model text.

Names and parameters mirror OpenHands' `execute_bash`, `str_replace_editor` and `finish`,
so a model trained here can run under OpenHands and the other way round. Schemas are
OpenAI-style function definitions (what `tokenizer.apply_chat_template(tools=...)` and
OpenAI-compatible servers take).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

EXECUTE_BASH = {
    "type": "function",
    "function": {
        "name": "execute_bash",
        "description": (
            "Execute a bash command in the repository's sandbox. The working directory and "
            "exported variables persist between calls; background processes do not. "
            "Long outputs are truncated in the middle."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to execute."},
                "timeout": {
                    "type": "number",
                    "description": "Optional. Seconds before the command is killed.",
                },
            },
            "required": ["command"],
        },
    },
}

STR_REPLACE_EDITOR = {
    "type": "function",
    "function": {
        "name": "str_replace_editor",
        "description": (
            "Custom editing tool for viewing, creating and editing files. `path` must be "
            "absolute. `view` shows a file with line numbers or lists a directory; `create` "
            "writes a new file; `str_replace` replaces `old_str`, which must occur exactly "
            "once, with `new_str`; `insert` inserts `new_str` after line `insert_line`; "
            "`undo_edit` reverts the last edit of `path`."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                    "description": "The editing command to run.",
                },
                "path": {"type": "string", "description": "Absolute path to a file or directory."},
                "file_text": {"type": "string", "description": "Content of the file to create."},
                "old_str": {"type": "string", "description": "Exact text to replace."},
                "new_str": {"type": "string", "description": "Replacement or inserted text."},
                "insert_line": {"type": "integer", "description": "Line after which to insert."},
                "view_range": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "Optional [start, end] lines to view; end -1 means to the end.",
                },
            },
            "required": ["command", "path"],
        },
    },
}

FINISH = {
    "type": "function",
    "function": {
        "name": "finish",
        "description": "Submit your changes and end the task when the issue is resolved.",
        "parameters": {
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "A short summary of what changed."},
            },
            "required": [],
        },
    },
}

TOOL_SCHEMAS = {"execute_bash": EXECUTE_BASH, "str_replace_editor": STR_REPLACE_EDITOR, "finish": FINISH}


def tool_schemas(names: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """OpenAI-style schemas of the named tools, in order."""
    return [TOOL_SCHEMAS[name] for name in names]


class ToolCallError(ValueError):
    """The model's text holds no well-formed tool call; the message tells the model why."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


def _call_from(name: object, arguments: object, allowed: tuple[str, ...] | list[str]) -> ToolCall:
    if not isinstance(name, str):
        raise ToolCallError('A tool call must be a JSON object with a "name" string.')
    if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string; some models do too
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            raise ToolCallError('"arguments" must be a JSON object.') from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolCallError('"arguments" must be a JSON object.')
    if name not in allowed:
        raise ToolCallError(f"Unknown tool {name!r}; available: {', '.join(allowed)}.")
    return ToolCall(name, arguments)


def parse_tool_calls(action: str | dict, allowed: tuple[str, ...] | list[str]) -> list[ToolCall]:
    """Tool calls from a model's action, in either of the two forms models use.

    - Text in Qwen/Hermes form: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.
      An unclosed final `<tool_call>` is accepted (generation may stop on the closing tag).
    - An OpenAI-style assistant message: `{"content": ..., "tool_calls": [{"type": "function",
      "function": {"name": ..., "arguments": "<json>"}}]}`; without `tool_calls`, its
      `content` is parsed as text.

    Raises `ToolCallError` with a message meant for the model when there is no call, the
    JSON is malformed, or the tool is unknown.
    """
    if isinstance(action, dict):
        tool_calls = action.get("tool_calls") or []
        if not tool_calls:
            return parse_tool_calls(action.get("content") or "", allowed)
        calls = []
        for item in tool_calls:
            function = item.get("function") if isinstance(item, dict) else None
            if not isinstance(function, dict):
                raise ToolCallError('Each entry of "tool_calls" needs a "function" object.')
            calls.append(_call_from(function.get("name"), function.get("arguments"), allowed))
        return calls
    bodies = _TOOL_CALL.findall(action)
    if not bodies:
        raise ToolCallError(
            "No tool call found. Reply with exactly one call in the form "
            '<tool_call>\n{"name": "execute_bash", "arguments": {"command": "ls"}}\n</tool_call>'
        )
    calls = []
    for body in bodies:
        try:
            payload = json.loads(body.strip())
        except json.JSONDecodeError as exc:
            raise ToolCallError(f"The tool call is not valid JSON ({exc.msg} at char {exc.pos}).") from None
        if not isinstance(payload, dict):
            raise ToolCallError('A tool call must be a JSON object with a "name" string.')
        calls.append(_call_from(payload.get("name"), payload.get("arguments", {}), allowed))
    return calls


def format_tool_call(call: ToolCall) -> str:
    """The text form of a call, as a model should produce it (used for gold trajectories)."""
    body = json.dumps({"name": call.name, "arguments": call.arguments})
    return f"<tool_call>\n{body}\n</tool_call>"
