"""Running tool calls against a sandbox: bash, and the OpenHands-style file editor.

The editor reads and writes through the `Sandbox` protocol, so it behaves the same on any
backend. Messages follow OpenHands' wording closely enough that models trained under one
scaffold read the other's observations without surprise.
"""

from __future__ import annotations

import posixpath
import shlex

from agent_env.tools import ToolCall, ToolCallError
from sandboxes import Sandbox

SNIPPET_LINES = 4


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and tail of `text` within `limit` characters, with a marker between."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    dropped = len(text) - head - tail
    return f"{text[:head]}\n<response clipped: {dropped} characters omitted>\n{text[-tail:]}"


def _numbered(text: str, first_line: int = 1) -> str:
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.split("\n"), start=first_line))


class ToolRunner:
    """Executes parsed tool calls in one sandbox; keeps the editor's undo history."""

    def __init__(self, sandbox: Sandbox, *, command_timeout: float, max_output_chars: int) -> None:
        self.sandbox = sandbox
        self.command_timeout = command_timeout
        self.max_output_chars = max_output_chars
        self._history: dict[str, list[str]] = {}

    def run(self, call: ToolCall) -> str:
        """The observation text for one call. Bad arguments raise `ToolCallError`."""
        if call.name == "execute_bash":
            return self._bash(call.arguments)
        if call.name == "str_replace_editor":
            return self._edit(call.arguments)
        raise ToolCallError(f"tool {call.name!r} cannot be run here")

    def _bash(self, args: dict) -> str:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolCallError("execute_bash needs a non-empty 'command' string.")
        timeout = args.get("timeout", self.command_timeout)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ToolCallError("'timeout' must be a positive number of seconds.")
        result = self.sandbox.exec(command, timeout=min(float(timeout), self.command_timeout))
        output = truncate_middle(result.output, self.max_output_chars)
        notes = []
        if result.truncated:
            notes.append("[output truncated: the command printed more than the sandbox keeps]")
        if result.timed_out:
            notes.append(f"[command timed out after {result.seconds:.0f} s and was killed]")
        notes.append(f"[exit code: {result.exit_code}]")
        return (output.rstrip("\n") + "\n" if output else "") + "\n".join(notes)

    # -- str_replace_editor -------------------------------------------------------------
    def _read(self, path: str) -> str:
        try:
            return self.sandbox.read_file(path).decode("utf-8", errors="replace")
        except FileNotFoundError:
            raise ToolCallError(f"The path {path} does not exist.") from None
        except IsADirectoryError:
            raise ToolCallError(f"The path {path} is a directory.") from None
        except OSError as exc:
            raise ToolCallError(f"Cannot read {path}: {exc}") from None

    def _write(self, path: str, text: str, *, remember: str | None) -> None:
        try:
            self.sandbox.write_file(path, text.encode())
        except OSError as exc:  # the agent's own doing: a full disk, a directory in the way
            raise ToolCallError(f"cannot write {path}: {exc.strerror or exc}") from None
        if path.endswith(".py"):
            self._drop_cached_bytecode(path)
        if remember is not None:
            self._history.setdefault(path, []).append(remember)

    def _drop_cached_bytecode(self, path: str) -> None:
        """Remove the .pyc files cached for `path` (Python's and pytest's assertion rewriter's).
        Both check a .pyc by its source's mtime in whole seconds and its size, so an edit of the
        same size (`+ 1` to `- 1`) in the second a run cached the module would run the old code,
        and the agent would see its fix fail. Edits made with bash keep Python's own rule."""
        folder, name = posixpath.split(path)
        cached = shlex.quote(posixpath.join(folder, "__pycache__", name[: -len(".py")]))
        self.sandbox.exec(f"rm -f -- {cached}.*.pyc")

    def _edit(self, args: dict) -> str:
        command, path = args.get("command"), args.get("path")
        if not isinstance(path, str) or not posixpath.isabs(path):
            raise ToolCallError(f"'path' must be an absolute path, got {path!r}.")
        if command == "view":
            return self._view(path, args.get("view_range"))
        if command == "create":
            text = args.get("file_text")
            if not isinstance(text, str):
                raise ToolCallError("'create' needs 'file_text'.")
            exists = self.sandbox.exec(f"test -e {shlex.quote(path)}").exit_code == 0
            if exists:
                raise ToolCallError(f"File already exists at {path}; use str_replace to edit it.")
            self._write(path, text, remember=None)
            return f"File created successfully at: {path}"
        if command == "str_replace":
            return self._str_replace(path, args.get("old_str"), args.get("new_str", ""))
        if command == "insert":
            return self._insert(path, args.get("insert_line"), args.get("new_str"))
        if command == "undo_edit":
            if not self._history.get(path):
                raise ToolCallError(f"No edit history found for {path}.")
            self._write(path, self._history[path].pop(), remember=None)
            return f"Last edit to {path} undone successfully."
        raise ToolCallError(f"Unknown editor command {command!r}; use view, create, str_replace, insert or undo_edit.")

    def _view(self, path: str, view_range: object) -> str:
        quoted = shlex.quote(path)
        if self.sandbox.exec(f"test -d {quoted}").exit_code == 0:
            listing = self.sandbox.exec(
                f"find {quoted} -maxdepth 2 -not -path '*/.*' -not -path '*/__pycache__*' | sort"
            )
            return f"Files and directories up to 2 levels deep in {path}:\n{listing.output}"
        text = self._read(path)
        lines = text.split("\n")
        first = 1
        if view_range is not None:
            if (
                not isinstance(view_range, list)
                or len(view_range) != 2
                or not all(isinstance(n, int) for n in view_range)
            ):
                raise ToolCallError("'view_range' must be a list of two integers.")
            start, end = view_range
            end = len(lines) if end == -1 else end
            if not 1 <= start <= end <= len(lines):
                raise ToolCallError(f"Invalid view_range {view_range}: the file has {len(lines)} lines.")
            lines, first = lines[start - 1 : end], start
        body = truncate_middle(_numbered("\n".join(lines), first), self.max_output_chars)
        return f"Here's the result of running `cat -n` on {path}:\n{body}"

    def _str_replace(self, path: str, old: object, new: object) -> str:
        if not isinstance(old, str) or not old:
            raise ToolCallError("'str_replace' needs a non-empty 'old_str'.")
        if not isinstance(new, str):
            raise ToolCallError("'new_str' must be a string.")
        text = self._read(path)
        count = text.count(old)
        if count == 0:
            raise ToolCallError(f"No replacement was performed, old_str did not appear verbatim in {path}.")
        if count > 1:
            lines = [str(i + 1) for i, line in enumerate(text.split("\n")) if old.split("\n")[0] in line]
            raise ToolCallError(
                f"No replacement was performed. Multiple occurrences of old_str in lines {lines}. "
                "Please ensure it is unique."
            )
        updated = text.replace(old, new, 1)
        self._write(path, updated, remember=text)
        line = text[: text.index(old)].count("\n")
        snippet_lines = updated.split("\n")
        start = max(0, line - SNIPPET_LINES)
        end = line + new.count("\n") + SNIPPET_LINES + 1
        snippet = _numbered("\n".join(snippet_lines[start:end]), start + 1)
        return f"The file {path} has been edited. Here's a snippet of the edited file:\n{snippet}"

    def _insert(self, path: str, insert_line: object, new: object) -> str:
        if not isinstance(insert_line, int) or isinstance(insert_line, bool):
            raise ToolCallError("'insert' needs an integer 'insert_line'.")
        if not isinstance(new, str):
            raise ToolCallError("'insert' needs 'new_str'.")
        text = self._read(path)
        lines = text.split("\n")
        if not 0 <= insert_line <= len(lines):
            raise ToolCallError(f"Invalid insert_line {insert_line}: the file has {len(lines)} lines.")
        updated = "\n".join(lines[:insert_line] + new.split("\n") + lines[insert_line:])
        self._write(path, updated, remember=text)
        start = max(0, insert_line - SNIPPET_LINES)
        end = insert_line + new.count("\n") + SNIPPET_LINES + 1
        snippet = _numbered("\n".join(updated.split("\n")[start:end]), start + 1)
        return f"The file {path} has been edited. Here's a snippet of the edited file:\n{snippet}"
