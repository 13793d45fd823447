"""What an agent sees and does: a text-native, Gymnasium-shaped env over a sandbox.

Importing this package never imports torch, ray, docker or vllm.
"""

from agent_env.checker import EnvCheckError, check_env
from agent_env.env import SYSTEM_PROMPT, SandboxCost, ToolEnv
from agent_env.environments import needs_environment, prepare_environment, prepare_environments
from agent_env.gold import gold_actions
from agent_env.grading import (
    GradeMemo,
    GradeResult,
    GradingError,
    grade_patch,
    grading_spec_for,
    network_error,
    network_failure,
    sandbox_spec_for,
)
from agent_env.tools import TOOL_SCHEMAS, ToolCall, ToolCallError, format_tool_call, parse_tool_calls, tool_schemas

__all__ = [
    "SYSTEM_PROMPT",
    "TOOL_SCHEMAS",
    "EnvCheckError",
    "GradeMemo",
    "GradeResult",
    "GradingError",
    "SandboxCost",
    "ToolCall",
    "ToolCallError",
    "ToolEnv",
    "check_env",
    "format_tool_call",
    "gold_actions",
    "grade_patch",
    "grading_spec_for",
    "needs_environment",
    "network_error",
    "network_failure",
    "parse_tool_calls",
    "prepare_environment",
    "prepare_environments",
    "sandbox_spec_for",
    "tool_schemas",
]
