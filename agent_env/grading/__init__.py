"""Honest grading: a patch is judged from exit statuses the code under test cannot write.

- `verdict`: `grade_patch` and the contract, in its docstring;
- `applying`: the agent's patch applied in the grading sandbox, the tree it leaves judged;
- `runs`: the grading sandbox's runs (the verdict run and the twins) and where their time goes;
- `canaries`: the canary twins; `selection`: narrowing a test command to test ids;
- `protected`: what of the agent's change reaches the grader; `logs`: reading test logs;
- `script_verifier`: tasks whose verifier is a script that writes a reward (Harbor tasks).
"""

from agent_env.grading.applying import protection_rule
from agent_env.grading.logs import (
    failure_cause,
    failure_reports,
    failure_text,
    missing_modules,
    network_error,
    network_failure,
)
from agent_env.grading.memo import GradeMemo
from agent_env.grading.result import GradeResult, GradingError
from agent_env.grading.runs import grading_spec_for, sandbox_spec_for
from agent_env.grading.verdict import MAX_PATCH_BYTES, describe, grade_patch

__all__ = [
    "MAX_PATCH_BYTES",
    "GradeMemo",
    "GradeResult",
    "GradingError",
    "describe",
    "failure_cause",
    "failure_reports",
    "failure_text",
    "grade_patch",
    "grading_spec_for",
    "missing_modules",
    "network_error",
    "network_failure",
    "protection_rule",
    "sandbox_spec_for",
]
