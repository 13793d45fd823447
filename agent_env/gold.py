"""Gold trajectories: the actions an ideal agent would send to solve a task.

Applying the gold patch through the agent's own tools exercises the whole path a model
takes (tool-call parsing, the sandbox, the submission diff, grading); the same actions
serve as demonstrations for a supervised warm start.

Three one-turn styles and one multi-turn style. `patch` writes the gold patch to a file and runs `git apply`: it handles any
patch. `edit` turns each hunk into a `str_replace_editor` call whose `old_str` is the
smallest run of the hunk's lines that occurs exactly once in the file, the way agents in
OpenHands-style scaffolds edit (and SWE-Gym's trajectories show): for a one-line fix it is
a quarter of the patch's tokens, so a small model learns to imitate it in far fewer steps
and RL has fewer tokens to keep sharp. `auto` uses `edit` when every change of the patch is
expressible that way (text edits of files present in the workspace, or new files) and
`patch` otherwise.

`explore` is the long-horizon trajectory an agent takes when the code is not in its prompt,
one tool call per turn: search for the definition the fix changes (`grep -rn "def name"`),
view those lines, make each edit, run the tests already in the repository (the task's test
command without the hidden tests the test patch adds), then `finish`: five turns for a
one-hunk fix, each answered by the sandbox's real observation.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent_env.tools import ToolCall, format_tool_call
from tasks import Task

PATCH_FILE = "/tmp/gold.patch"
GoldStyle = Literal["auto", "edit", "patch", "explore"]
VIEW_LINES = 24  # the most lines the `explore` style views around a change (keeps observations short)
_DEFINITION = re.compile(r"^\s*(?:async\s+)?(def|class)\s+(\w+)")


class GoldEditError(ValueError):
    """The gold patch cannot be written as editor calls (the `patch` style still works)."""


@dataclass
class FileDiff:
    """One file's part of a unified diff."""

    old_path: str | None  # None for a new file
    new_path: str | None  # None for a deleted file
    hunks: list[list[tuple[str, str]]] = field(default_factory=list)  # (" " | "-" | "+", line)
    plain_text: bool = True  # False: binary, mode-only, or "\\ No newline at end of file"


def parse_unified_diff(patch: str) -> list[FileDiff]:
    """The files and hunks of a `git diff` style patch. Lines are kept without their newline."""
    files: list[FileDiff] = []
    current: FileDiff | None = None
    lines = patch.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            current = FileDiff(old_path=None, new_path=None)
            files.append(current)
        elif current is None:
            pass  # text before the first file header
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            current.old_path = _diff_path(line[4:])
            current.new_path = _diff_path(lines[i + 1][4:])
            i += 1
        elif line.startswith("@@"):
            hunk: list[tuple[str, str]] = []
            current.hunks.append(hunk)
            while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "-", "+", "\\", ""):
                if lines[i + 1].startswith(("--- ", "+++ ")) and i + 2 < len(lines) and lines[i + 2].startswith("+++ "):
                    break
                i += 1
                text = lines[i]
                if text.startswith("\\"):
                    current.plain_text = False  # "\ No newline at end of file"
                else:
                    hunk.append((text[:1] or " ", text[1:]))
        elif line.startswith(("Binary files", "GIT binary patch", "rename from", "copy from", "old mode")):
            current.plain_text = False
        i += 1
    return files


def _diff_path(field_value: str) -> str | None:
    path = field_value.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def hunk_edits(text: str, hunks: list[list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """(old_str, new_str) replacements that turn `text` into the patched file, applied in
    order with `str_replace` semantics (old_str occurs exactly once when it is applied).
    Each old_str is the hunk's changed lines, widened by context lines until it is unique
    and neither side is empty (a pure insertion or deletion needs a neighbouring line)."""
    edits = []
    for hunk in hunks:
        changed = [k for k, (tag, _) in enumerate(hunk) if tag != " "]
        if not changed:
            continue
        low, high = changed[0], changed[-1]
        while True:
            window = hunk[low : high + 1]
            old = "\n".join(line for tag, line in window if tag != "+")
            new = "\n".join(line for tag, line in window if tag != "-")
            if any(tag != "+" for tag, _ in window) and any(tag != "-" for tag, _ in window) and text.count(old) == 1:
                break
            if low == 0 and high == len(hunk) - 1:
                raise GoldEditError(f"a hunk's text is not unique in its file: {old[:80]!r}")
            # Widen by one context line on the side with less so far (the earlier side on ties).
            if low > 0 and (high == len(hunk) - 1 or changed[0] - low <= high - changed[-1]):
                low -= 1
            else:
                high += 1
        edits.append((old, new))
        text = text.replace(old, new, 1)
    return edits


def _patched(text: str, hunks: list[list[tuple[str, str]]]) -> str:
    """The file after the hunks, by line matching (the check on `hunk_edits`)."""
    lines = text.split("\n")
    position = 0
    for hunk in hunks:
        old = [line for tag, line in hunk if tag != "+"]
        new = [line for tag, line in hunk if tag != "-"]
        for start in range(position, len(lines) - len(old) + 1):
            if lines[start : start + len(old)] == old:
                lines[start : start + len(old)] = new
                position = start + len(new)
                break
        else:
            raise GoldEditError("a hunk's context does not match the file")
    return "\n".join(lines)


def gold_edit_calls(task: Task, workdir: str = "/workspace") -> list[ToolCall]:
    """The gold patch as `str_replace_editor` calls against the task's workspace files.
    Raises GoldEditError when some change cannot be written that way."""
    if not task.gold_patch:
        raise ValueError(f"task {task.id} has no gold patch")
    if task.workspace is None:
        raise GoldEditError(f"task {task.id} has no workspace to read files from")
    calls = []
    for diff in parse_unified_diff(task.gold_patch):
        if not diff.plain_text or diff.new_path is None:
            raise GoldEditError(f"{diff.old_path}: binary, mode, rename or deletion")
        target = f"{workdir.rstrip('/')}/{diff.new_path}"
        if diff.old_path is None:  # a new file
            body = "\n".join(line for tag, line in (pair for hunk in diff.hunks for pair in hunk) if tag == "+")
            calls.append(
                ToolCall("str_replace_editor", {"command": "create", "path": target, "file_text": body + "\n"})
            )
            continue
        if diff.old_path != diff.new_path:
            raise GoldEditError(f"{diff.old_path}: renamed")
        source = Path(task.workspace) / diff.old_path
        if not source.is_file():
            raise GoldEditError(f"{diff.old_path}: not in the workspace {task.workspace}")
        text = source.read_text()
        edits = hunk_edits(text, diff.hunks)
        expected, edited = _patched(text, diff.hunks), text
        for old, new in edits:
            edited = edited.replace(old, new, 1)
        if edited != expected:
            raise GoldEditError(f"{diff.old_path}: the edits do not reproduce the patch")
        calls += [
            ToolCall("str_replace_editor", {"command": "str_replace", "path": target, "old_str": old, "new_str": new})
            for old, new in edits
        ]
    if not calls:
        raise GoldEditError(f"task {task.id}: the gold patch changes no file")
    return calls


def gold_actions(task: Task, workdir: str | None = None, style: GoldStyle = "patch") -> list[str]:
    """Model-text actions that solve the task, one per turn (in `workdir`, default the task's
    sandbox workdir). The one-turn styles: the first action makes the whole change (one or
    more tool calls), the second calls `finish`; `explore`: see `gold_explore_actions`."""
    workdir = workdir or task.sandbox.get("workdir", "/workspace")
    if not task.gold_patch:
        raise ValueError(f"task {task.id} has no gold patch")
    if style == "explore":
        if "str_replace_editor" not in task.tools or "execute_bash" not in task.tools:
            raise GoldEditError(
                f"task {task.id}: the explore style needs the execute_bash and str_replace_editor tools"
            )
        return gold_explore_actions(task, workdir)
    finish = format_tool_call(ToolCall("finish", {"message": "Applied the fix."}))
    if style != "patch" and "str_replace_editor" in task.tools:
        try:
            calls = gold_edit_calls(task, workdir)
        except GoldEditError:
            if style == "edit":
                raise
        else:
            return ["\n".join(format_tool_call(call) for call in calls), finish]
    if style == "edit":
        raise GoldEditError(f"task {task.id} does not offer the str_replace_editor tool")
    marker = "GOLD_PATCH_END"
    while marker in task.gold_patch:
        marker += "_"
    command = f"cd {workdir} && cat > {PATCH_FILE} <<'{marker}'\n{task.gold_patch.rstrip(chr(10))}\n{marker}\ngit apply {PATCH_FILE} && git status --short"
    return [format_tool_call(ToolCall("execute_bash", {"command": command})), finish]


def _enclosing_definition(lines: list[str], line: int) -> tuple[int, str] | None:
    """(0-based line, "def name" or "class name") of the innermost definition at or above `line`."""
    for k in range(line, -1, -1):
        if match := _DEFINITION.match(lines[k]):
            return k, f"{match.group(1)} {match.group(2)}"
    return None


def visible_test_command(task: Task) -> str | None:
    """The task's test command restricted to the tests already in its workspace: arguments
    naming a file the test patch adds (as a path, `path::test` or a dotted module) are
    dropped, and so is unittest's `-v` (the dots and the verdict are enough). None when no
    test would be left to run or the workspace is unknown."""
    if task.workspace is None:
        return None
    workspace = Path(task.workspace)
    hidden = {path for path in task.test_files() if not (workspace / path).exists()}
    hidden |= {path.removesuffix(".py").replace("/", ".") for path in hidden if path.endswith(".py")}
    words = shlex.split(task.grading.test_command)

    def names_a_visible_test(word: str) -> bool:
        target = word.split("::")[0]
        return (
            bool(target)
            and not target.startswith("-")
            and ((workspace / target).is_file() or (workspace / (target.replace(".", "/") + ".py")).is_file())
        )

    kept = [word for word in words if word.split("::")[0] not in hidden and not (word == "-v" and "unittest" in words)]
    if hidden and not any(names_a_visible_test(word) for word in kept):
        return None  # every test the command names is hidden: running it would run nothing, or everything
    return shlex.join(kept)


def gold_explore_actions(task: Task, workdir: str = "/workspace") -> list[str]:
    """The `explore` style: search, view, edit (one call per edit), test, finish, one tool
    call per action. Raises GoldEditError when the fix cannot be written as editor calls."""
    root = workdir.rstrip("/")
    edits = gold_edit_calls(task, workdir)
    actions: list[ToolCall] = []
    first = edits[0]
    if first.arguments["command"] == "str_replace":
        relative = first.arguments["path"][len(root) + 1 :]
        text = (Path(task.workspace) / relative).read_text()
        lines = text.split("\n")
        start = text[: text.index(first.arguments["old_str"])].count("\n")
        end = start + first.arguments["old_str"].count("\n")
        found = _enclosing_definition(lines, start)
        if found is not None:
            actions.append(
                ToolCall("execute_bash", {"command": f"cd {root} && grep -rn {shlex.quote(found[1])} --include=*.py ."})
            )
            top = found[0]
        else:
            top = max(0, start - 3)
        top = max(top, end + 2 - VIEW_LINES)  # a long definition: the lines just above the change
        bottom = min(len(lines), max(end + 3, top + 1), top + VIEW_LINES)
        actions.append(
            ToolCall(
                "str_replace_editor",
                {"command": "view", "path": first.arguments["path"], "view_range": [top + 1, bottom]},
            )
        )
    actions += edits
    if check := visible_test_command(task):
        actions.append(ToolCall("execute_bash", {"command": f"cd {root} && {check}"}))
    actions.append(ToolCall("finish", {"message": "Fixed the issue; the existing tests pass."}))
    return [format_tool_call(call) for call in actions]
