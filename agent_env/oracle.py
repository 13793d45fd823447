"""A task's gold as a diff, when its gold is a script (Harbor's `solution/solve.sh`).

Harbor's oracle agent uploads `solution/` to `/solution` and runs `solve.sh` in the agent's
sandbox. `oracle_patch` does the same in the task's own sandbox and takes the diff it leaves
the way `ToolEnv` takes an agent's, so the gold goes through everything a gold patch does
(validation, gold evaluations, warm-start trajectories). `agent_env.prepare_environment`
calls it once the task's environment is built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from sandboxes import Mount, Sandbox, SandboxSpec
from tasks import Task, TaskError

SOLUTION_TARGET = "/solution"


def oracle_patch(task: Task, sandbox_factory: Callable[[SandboxSpec], Sandbox]) -> str:
    """What a task's `solution/solve.sh` changes, as the agent's diff: run as Harbor's oracle
    agent runs it (the folder at /solution, read-only; the script in the workdir) in the
    task's own sandbox, then the diff taken as `ToolEnv` takes an agent's. A `TaskError`
    naming the script when it fails or changes nothing."""
    from agent_env.env import ToolEnv  # the agent's sandbox and its diff, exactly (lazy: env imports grading)

    assert task.verifier is not None and task.verifier.solution_dir is not None
    solution = task.verifier.solution_dir

    def with_solution(spec: SandboxSpec) -> Sandbox:
        return sandbox_factory(dataclasses.replace(spec, mounts=(*spec.mounts, Mount(solution, SOLUTION_TARGET))))

    env = ToolEnv(task, sandbox_factory=with_solution)
    try:
        env.reset()
        assert env.sandbox is not None
        ran = env.sandbox.exec("bash /solution/solve.sh", timeout=task.limits.grading_timeout_s, fresh=True)
        if ran.exit_code != 0:
            last = (ran.output.strip().splitlines() or ["no output"])[-1]
            raise TaskError(f"{solution / 'solve.sh'}: exited {ran.exit_code} ({last[:200]})")
        patch = env.current_patch()
    finally:
        env.close()
    if not patch.strip():
        raise TaskError(f"{solution / 'solve.sh'}: changed nothing in the workdir {task.sandbox.get('workdir', '')}")
    return patch
