"""Gold trajectories: the actions an ideal agent would send to solve a task.

Applying the gold patch through the agent's own tools exercises the whole path a model
takes (tool-call parsing, the sandbox, the submission diff, grading); the same actions
serve as demonstrations for a supervised warm start.
"""

from __future__ import annotations

from agent_env.tools import ToolCall, format_tool_call
from tasks import Task

PATCH_FILE = "/tmp/gold.patch"


def gold_actions(task: Task, workdir: str = "/workspace") -> list[str]:
    """Model-text actions that apply the task's gold patch, then finish."""
    if not task.gold_patch:
        raise ValueError(f"task {task.id} has no gold patch")
    marker = "GOLD_PATCH_END"
    while marker in task.gold_patch:
        marker += "_"
    command = f"cd {workdir} && cat > {PATCH_FILE} <<'{marker}'\n{task.gold_patch.rstrip(chr(10))}\n{marker}\ngit apply {PATCH_FILE} && git status --short"
    return [
        format_tool_call(ToolCall("execute_bash", {"command": command})),
        format_tool_call(ToolCall("finish", {"message": "Applied the fix."})),
    ]
