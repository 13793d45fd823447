"""The OpenHands agent (openhands-sdk) on one task, its tools acting in the task's `Sandbox`.

Imported only by `evals.openhands_run` in the Python 3.12 venv `make openhands-venv` builds
(`.venv-openhands`), never by the project's own venv.

OpenHands' local conversation runs its tools on the host; here they run in the task's
`Sandbox` (the same one our own scaffold gets: `agent_env.ToolEnv.reset()`, the repository at
/workspace, no network): the agent is given OpenHands' real `terminal` and `file_editor`
tools (openhands-tools' definitions: names, descriptions and argument schemas as the model
sees them) with executors that act through the `Sandbox` protocol (`terminal`:
`Sandbox.exec` in the sandbox's persistent shell; `file_editor`: the project's
OpenHands-style editor, `agent_env.editor.ToolRunner`), plus the SDK's built-in `finish`
and `think`. `SandboxWorkspace` is OpenHands' workspace interface (`execute_command`,
`file_upload`, `file_download`, `git_changes`, `git_diff`) over the same sandbox. The
conversation's own files (its state, nothing of the repository) stay in a host folder,
`OUTPUT/conversations/<id>`, which OpenHands needs as `working_dir`. The submission is the
sandbox's diff against the base commit, taken as our scaffold takes it (`ToolEnv.current_patch`).

This module imports `tasks`, `sandboxes` and `agent_env` (plain Python, pydantic and yaml:
they run on 3.12 with the SDK's dependencies) and never torch or `trainer`.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import shlex
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# litellm fetches its model price list from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

# ruff: noqa: E402 (the two settings above must precede the SDK's import)
from openhands.sdk import LLM, Agent, Conversation, Tool
from openhands.sdk.conversation.exceptions import ConversationRunError
from openhands.sdk.git.models import GitChange, GitChangeStatus, GitDiff
from openhands.sdk.tool import ToolDefinition, ToolExecutor, register_tool
from openhands.sdk.workspace import LocalWorkspace
from openhands.sdk.workspace.models import CommandResult, FileOperationResult
from openhands.tools.file_editor import FileEditorTool
from openhands.tools.file_editor.definition import FileEditorAction, FileEditorObservation
from openhands.tools.terminal import TerminalTool
from openhands.tools.terminal.definition import TerminalAction, TerminalObservation
from openhands.tools.terminal.metadata import CmdOutputMetadata
from pydantic import PrivateAttr

from agent_env.editor import ToolRunner, truncate_middle
from agent_env.env import ToolEnv
from agent_env.tools import ToolCall, ToolCallError
from sandboxes import Sandbox, SandboxError
from tasks import Task

log = logging.getLogger(__name__)

MAX_OUTPUT_CHARS = 16000  # what one observation keeps (OpenHands' own cap is 30,000)
USER_TEMPLATE = (
    "<issue>\n{problem}\n</issue>\n\n"
    "The repository is checked out at {workdir} (in the sandbox your tools run in). "
    "Make the smallest change to the non-test source files that resolves the issue, "
    "then call `finish`."
)


class SandboxWorkspace(LocalWorkspace):
    """OpenHands' workspace interface over a project `Sandbox`.

    `working_dir` is a host folder for the conversation's own files (OpenHands' local
    conversation needs one); commands and files are the sandbox's, under `sandbox_workdir`.
    Relative paths are taken from the sandbox's workdir."""

    _sandbox: Sandbox = PrivateAttr()
    _runner: ToolRunner = PrivateAttr()

    def __init__(self, *, working_dir: str | Path, sandbox: Sandbox, command_timeout: float, **kwargs: Any):
        super().__init__(working_dir=working_dir, **kwargs)
        self._sandbox = sandbox
        self._runner = ToolRunner(sandbox, command_timeout=command_timeout, max_output_chars=MAX_OUTPUT_CHARS)

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

    @property
    def runner(self) -> ToolRunner:
        """The editor (and its undo history) the `file_editor` tool uses."""
        return self._runner

    @property
    def sandbox_workdir(self) -> str:
        return self._sandbox.spec.workdir

    def _in_sandbox(self, path: str | Path) -> str:
        return posixpath.join(self.sandbox_workdir, str(path))

    def execute_command(self, command: str, cwd: str | Path | None = None, timeout: float = 30.0) -> CommandResult:
        """Run `command` in a fresh shell of the sandbox (stdout and stderr come interleaved,
        as `stdout`); `cwd` defaults to the sandbox's workdir."""
        where = self._in_sandbox(cwd) if cwd is not None else self.sandbox_workdir
        result = self._sandbox.exec(f"cd {shlex.quote(where)} && {command}", timeout=timeout, fresh=True)
        return CommandResult(
            command=command,
            exit_code=result.exit_code,
            stdout=result.output,
            stderr="",
            timeout_occurred=result.timed_out,
        )

    def file_upload(self, source_path: str | Path, destination_path: str | Path) -> FileOperationResult:
        """Copy a host file into the sandbox."""
        destination = self._in_sandbox(destination_path)
        try:
            data = Path(source_path).read_bytes()
            self._sandbox.write_file(destination, data)
        except (OSError, SandboxError) as exc:
            return FileOperationResult(
                success=False, source_path=str(source_path), destination_path=destination, error=str(exc)
            )
        return FileOperationResult(
            success=True, source_path=str(source_path), destination_path=destination, file_size=len(data)
        )

    def file_download(self, source_path: str | Path, destination_path: str | Path) -> FileOperationResult:
        """Copy a sandbox file to the host."""
        source = self._in_sandbox(source_path)
        try:
            data = self._sandbox.read_file(source)
            Path(destination_path).parent.mkdir(parents=True, exist_ok=True)
            Path(destination_path).write_bytes(data)
        except (OSError, SandboxError) as exc:
            return FileOperationResult(
                success=False, source_path=source, destination_path=str(destination_path), error=str(exc)
            )
        return FileOperationResult(
            success=True, source_path=source, destination_path=str(destination_path), file_size=len(data)
        )

    def _git(self, args: str, path: str | Path) -> str:
        result = self._sandbox.exec(f"cd {shlex.quote(self._in_sandbox(path))} && git {args}", timeout=60, fresh=True)
        if result.exit_code != 0:
            raise RuntimeError(f"git {args} in {path} failed: {result.output.strip()[:300]}")
        return result.output

    def git_changes(self, path: str | Path) -> list[GitChange]:
        """The repository's changed files (`git status --porcelain`), untracked ones as ADDED."""
        status = {"M": GitChangeStatus.UPDATED, "A": GitChangeStatus.ADDED, "?": GitChangeStatus.ADDED,
                  "D": GitChangeStatus.DELETED, "R": GitChangeStatus.MOVED}  # fmt: skip
        changes = []
        for line in self._git("status --porcelain --untracked-files=all", path).splitlines():
            code, name = line[:2].strip() or "M", line[3:]
            changes.append(
                GitChange(status=status.get(code[0], GitChangeStatus.UPDATED), path=Path(name.split(" -> ")[-1]))
            )
        return changes

    def git_diff(self, path: str | Path) -> GitDiff:
        """A file's text at HEAD and now (None where it does not exist)."""
        file = self._in_sandbox(path)
        repo = posixpath.dirname(file)
        original = self._sandbox.exec(
            f"cd {shlex.quote(repo)} && git show HEAD:./{shlex.quote(posixpath.basename(file))}", fresh=True
        )
        try:
            modified: str | None = self._sandbox.read_file(file).decode("utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            modified = None
        return GitDiff(original=original.output if original.exit_code == 0 else None, modified=modified)


def _workspace_of(conv_state: Any) -> SandboxWorkspace:
    workspace = conv_state.workspace
    if not isinstance(workspace, SandboxWorkspace):
        raise TypeError("the sandbox tools need a conversation whose workspace is a SandboxWorkspace")
    return workspace


class SandboxTerminalExecutor(ToolExecutor):
    """`terminal` actions run in the sandbox's persistent shell (cwd and exports carry over)."""

    def __init__(self, workspace: SandboxWorkspace) -> None:
        self.workspace = workspace

    def __call__(self, action: TerminalAction, conversation: Any = None) -> TerminalObservation:
        if action.is_input or action.reset:
            return TerminalObservation.from_text(
                text="This terminal runs each command to completion: there is no running process to send input "
                "to, and no session to reset. Run a new command instead.",
                command=action.command,
                is_error=True,
            )
        limit = self.workspace.runner.command_timeout
        timeout = min(float(action.timeout), limit) if action.timeout and action.timeout > 0 else limit
        try:
            result = self.workspace.sandbox.exec(action.command, timeout=timeout)
        except SandboxError as exc:  # the sandbox died: infrastructure, not the agent's doing
            raise RuntimeError(f"the sandbox failed: {exc}") from exc
        text = truncate_middle(result.output, MAX_OUTPUT_CHARS).rstrip("\n")
        if result.truncated:
            text += "\n[output truncated: the command printed more than the sandbox keeps]"
        if result.timed_out:
            text += f"\n[command timed out after {result.seconds:.0f} s and was killed]"
        return TerminalObservation.from_text(
            text=text,
            command=action.command,
            exit_code=result.exit_code,
            timeout=result.timed_out,
            metadata=CmdOutputMetadata(exit_code=result.exit_code),
        )


class SandboxFileEditorExecutor(ToolExecutor):
    """`file_editor` actions through the project's editor (`agent_env.editor.ToolRunner`),
    which reads and writes through the `Sandbox` protocol."""

    def __init__(self, workspace: SandboxWorkspace) -> None:
        self.workspace = workspace

    def __call__(self, action: FileEditorAction, conversation: Any = None) -> FileEditorObservation:
        arguments = {
            key: getattr(action, key)
            for key in ("command", "path", "file_text", "old_str", "new_str", "insert_line", "view_range")
            if getattr(action, key) is not None
        }
        try:
            text = self.workspace.runner.run(ToolCall("str_replace_editor", arguments))
        except ToolCallError as exc:
            return FileEditorObservation.from_text(
                text=str(exc), command=action.command, path=action.path, is_error=True
            )
        except SandboxError as exc:
            raise RuntimeError(f"the sandbox failed: {exc}") from exc
        return FileEditorObservation.from_text(text=text, command=action.command, path=action.path)


class SandboxTerminal(ToolDefinition[TerminalAction, TerminalObservation]):
    """Resolves the `sandbox_terminal` spec to OpenHands' own `terminal` tool, executed in the sandbox."""

    @classmethod
    def create(cls, conv_state: Any, **params: Any) -> Sequence[ToolDefinition]:
        workspace = _workspace_of(conv_state)
        return TerminalTool.create(conv_state, executor=SandboxTerminalExecutor(workspace))


def _remove_unused_history(executor: Any) -> None:
    """`FileEditorTool.create` builds OpenHands' own executor, whose editor makes its undo
    history's folder (`oh_editor_history_*` under the temp dir) at once. Ours replaces that
    executor (undo is `ToolRunner`'s), so the folder would be left behind by every conversation."""
    history = getattr(getattr(executor, "editor", None), "_history_manager", None)
    folder = getattr(getattr(history, "cache", None), "directory", None)
    if folder is not None and Path(folder).name.startswith("oh_editor_history_"):
        shutil.rmtree(folder, ignore_errors=True)


class SandboxFileEditor(ToolDefinition[FileEditorAction, FileEditorObservation]):
    """Resolves the `sandbox_file_editor` spec to OpenHands' own `file_editor` tool, executed in the sandbox."""

    @classmethod
    def create(cls, conv_state: Any, **params: Any) -> Sequence[ToolDefinition]:
        workspace = _workspace_of(conv_state)
        tools = FileEditorTool.create(conv_state)
        for tool in tools:
            _remove_unused_history(tool.executor)
        # The real description names the working directory: the repository's, in the sandbox.
        return [
            tool.set_executor(SandboxFileEditorExecutor(workspace)).model_copy(
                update={"description": tool.description.replace(workspace.working_dir, workspace.sandbox_workdir)}
            )
            for tool in tools
        ]


register_tool("sandbox_terminal", SandboxTerminal)
register_tool("sandbox_file_editor", SandboxFileEditor)


def run_task(task: Task, llm: LLM, output: Path, *, max_iterations: int) -> dict[str, Any] | None:
    """One OpenHands conversation on `task`; returns its prediction (SWE-bench's format), or
    None when the conversation failed (its trajectory says why; no prediction, as SWE-bench
    runs leave out errored instances)."""
    started = time.monotonic()
    events: list[dict[str, Any]] = []
    with ToolEnv(task) as env:
        env.reset()
        assert env.sandbox is not None
        scratch = output / "conversations" / task.id
        scratch.mkdir(parents=True, exist_ok=True)
        workspace = SandboxWorkspace(
            working_dir=scratch, sandbox=env.sandbox, command_timeout=task.limits.command_timeout_s
        )
        agent = Agent(llm=llm, tools=[Tool(name="sandbox_terminal"), Tool(name="sandbox_file_editor")])
        conversation = Conversation(
            agent=agent,
            workspace=workspace,
            max_iteration_per_run=max_iterations,
            callbacks=[lambda event: events.append(event.model_dump(mode="json"))],
            visualizer=None,
        )
        error = None
        try:
            conversation.send_message(
                USER_TEMPLATE.format(problem=task.problem_statement, workdir=workspace.sandbox_workdir)
            )
            conversation.run()
            status = str(conversation.state.execution_status.value)
        except ConversationRunError as exc:  # the model server failed (after the SDK's retries)
            status, error = "error", str(exc)
        finally:
            conversation.close()
        patch = env.current_patch() if error is None else ""
    seconds = round(time.monotonic() - started, 2)
    prediction = {"instance_id": task.id, "model_name_or_path": f"openhands/{llm.model.split('/', 1)[-1]}",
                  "model_patch": patch}  # fmt: skip
    trajectory = {**prediction, "status": status, "error": error, "seconds": seconds, "events": events}
    (output / "trajectories").mkdir(parents=True, exist_ok=True)
    (output / "trajectories" / f"{task.id}.json").write_text(json.dumps(trajectory, indent=1))
    if error is not None:
        log.error("%s: the conversation failed: %s", task.id, error[:500])
        return None
    log.info("%s: %s, %d events, %d patch lines, %.1f s", task.id, status, len(events), patch.count("\n"), seconds)
    return prediction


def make_llm(model: str, base_url: str, api_key: str) -> LLM:
    """OpenHands' LLM for an OpenAI-compatible server's `model` (chat completions, native tool calls)."""
    return LLM(model=f"openai/{model}", base_url=base_url, api_key=api_key, usage_id="agent", num_retries=2,
               temperature=0.0)  # fmt: skip
