"""Our tasks out as Harbor task folders: `python -m tasks export-harbor [PATH ...] --out DIR`.

Each task becomes `DIR/<id>/` in Harbor's format (schema 1.4, what `harbor init` writes, in
separate verifier mode with the workdir as the artifact: the tests run in a fresh container of
the task's image holding the agent's workdir, as they do here):
- `instruction.md`: the problem statement;
- `environment/Dockerfile`: `FROM` the image the task runs in here (the base image,
  `agentic-rl/base:bookworm`, unless its sandbox names another; a SWE-bench row needs an image
  with its environment, `--image`), the workspace copied to `/workspace`;
- `tests/test.sh`: restores the files the hidden tests touch from `tests/pristine/*.orig`, applies the
  test patch, runs the task's test command into `/logs/verifier/test-output.txt`, and
  `tests/judge.py` writes `reward.txt`: 1 when every FAIL_TO_PASS and PASS_TO_PASS test reads
  as passed in that log (pytest's `-rA` lines or unittest's `-v` lines; the harness's rule), else 0;
- `solution/solve.sh`: applies the gold patch (`solution/gold.patch`).

The exported verifier is Harbor's contract (a log read in the agent's container), weaker
than ours (`agent_env.grading`): graded here again (`harbor:DIR`), it gets our allowlist, the
reward read after the sandbox closes and the moved-reward-path twin, but no test twins (its
tests arrive as a patch). A task whose log format judge.py cannot read (sympy's runner) is
refused with the reason.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

from tasks.spec import Task, TaskError, patch_files

BASE_IMAGE = "agentic-rl/base:bookworm"
WORKDIR = "/workspace"
READABLE_LOGS = ("unittest", "pytest")

JUDGE = '''"""Harbor verifier of an exported agentic-rl task: reward 1 when every required test
reads as passed in the test log (pytest -rA or unittest -v lines), else 0."""
import json
import os
import re
import sys

required = json.load(open(os.environ.get("JUDGE_REQUIRED", "/tests/required.json")))
reward_path = sys.argv[2] if len(sys.argv) > 2 else "/logs/verifier/reward.txt"
status = {}
pending = None  # a unittest test whose docstring line carries the result


def unittest_result(name, where, outcome):
    ident = where if where.endswith("." + name) else where + "." + name
    verdict = "PASSED" if outcome == "ok" else "FAILED"
    status[ident] = status[f"{name} ({where})"] = verdict


for line in open(sys.argv[1], errors="replace").read().splitlines():
    match = re.match(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\\S+)", line)
    if match:
        status[match.group(2)] = match.group(1)
        continue
    match = re.match(r"^(\\w+) \\(([\\w.]+)\\)(?: \\.\\.\\. (.*))?$", line)
    if match:
        pending = None
        if match.group(3) is None:
            pending = (match.group(1), match.group(2))
        else:
            unittest_result(match.group(1), match.group(2), match.group(3).strip())
        continue
    if pending and " ... " in line:
        unittest_result(*pending, line.rsplit(" ... ", 1)[1].strip())
        pending = None
missing = [t for t in required if status.get(t) != "PASSED"]
for test in missing:
    print(f"not passed: {test} ({status.get(test, \'not in the log\')})")
print(f"{len(required) - len(missing)} of {len(required)} required tests passed")
open(reward_path, "w").write("1" if not missing else "0")
'''


def task_toml(task: Task) -> str:
    """The task's `task.toml` (schema 1.4)."""
    keywords = json.dumps([task.family, task.difficulty])
    return f'''schema_version = "1.4"
artifacts = ["{WORKDIR}"]

[task]
name = "agentic-rl/{task.id}"
description = {json.dumps(f"Exported from agentic-rl ({task.source or 'built-in'})")}
keywords = {keywords}

[metadata]
family = {json.dumps(task.family)}
difficulty = {json.dumps(task.difficulty)}
source = {json.dumps(task.source)}

[verifier]
timeout_sec = {float(task.limits.grading_timeout_s)}
environment_mode = "separate"

[agent]
timeout_sec = {float(max(task.limits.command_timeout_s * task.limits.max_turns, 600))}

[environment]
build_timeout_sec = 600.0
network_mode = "no-network"
workdir = "{WORKDIR}"
'''


TEST_SH = """#!/bin/bash
# Harbor verifier exported by agentic-rl: hidden tests restored and applied, then judged.
cd {workdir}
{restore}
git apply --whitespace=nowarn /tests/test.patch || {{ echo 0 > /logs/verifier/reward.txt; exit 0; }}
( {command} ) > /logs/verifier/test-output.txt 2>&1
python3 /tests/judge.py /logs/verifier/test-output.txt
"""

SOLVE_SH = """#!/bin/bash
# The oracle: the task's gold patch.
cd {workdir}
git apply --whitespace=nowarn /solution/gold.patch
"""


def refusal(task: Task, image: str | None = None) -> str | None:
    """Why `task` cannot be exported as it is, or None."""
    if task.verifier is not None:
        return "it is a Harbor task already"
    if task.workspace is None or not task.workspace.is_dir():
        return f"its workspace is not here ({task.unavailable or 'no repository'})"
    if not task.gold_patch:
        return "it has no gold patch (the oracle's solution)"
    parser = task.grading.log_parser
    if parser == "swebench" and task.repo == "sympy/sympy":
        return "sympy's test runner prints a log judge.py cannot read"
    if parser not in (*READABLE_LOGS, "swebench"):
        return f"judge.py cannot read a {parser!r} log"
    if task.repo and not image:
        return (
            "a SWE-bench row needs an image with its environment: give --image (the harness's instance image, "
            "or the agentic-rl/pyenv-ws image `agent_env validate --sandbox docker` built for it)"
        )
    return None


def _workspace_files(task: Task, into: Path) -> None:
    """The workspace as the agent first sees it, without git's own folder."""
    assert task.workspace is not None
    if (task.workspace / ".git").exists():  # a one-commit repository: its committed tree
        listed = subprocess.run(
            ["git", "-C", str(task.workspace), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.decode()
        for rel in filter(None, listed.split("\0")):
            source = task.workspace / rel
            if source.is_file() and not source.is_symlink():
                (into / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, into / rel)
    else:
        shutil.copytree(
            task.workspace, into, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git"), dirs_exist_ok=True
        )


def export_task(task: Task, out: Path, image: str | None = None) -> Path:
    """`task` written as a Harbor task folder under `out` (replacing one of the same id);
    a `TaskError` saying why when it cannot be (`refusal`)."""
    if (why := refusal(task, image)) is not None:
        raise TaskError(f"task {task.id}: cannot be exported to Harbor: {why}")
    folder = out / task.id
    if folder.exists():
        shutil.rmtree(folder)
    environment, tests, solution = folder / "environment", folder / "tests", folder / "solution"
    workspace = environment / "workspace"
    workspace.mkdir(parents=True)
    _workspace_files(task, workspace)
    base = image or task.sandbox.get("image") or BASE_IMAGE
    env = "".join(f"ENV {name}={json.dumps(value)}\n" for name, value in task.sandbox.get("env", {}).items())
    (environment / "Dockerfile").write_text(
        f"FROM {base}\n{env}COPY --chown=sandbox:sandbox workspace/ {WORKDIR}/\nWORKDIR {WORKDIR}\n"
    )
    (folder / "task.toml").write_text(task_toml(task))
    (folder / "instruction.md").write_text(task.problem_statement.strip() + "\n")
    tests.mkdir()
    restore = []
    for rel in patch_files(task.test_patch):
        if (workspace / rel).is_file():  # the agent may have changed it: the pristine copy goes back
            # Kept as `<path>.orig`: a copy that is not a test file the verifier runs.
            (tests / "pristine" / f"{rel}.orig").parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(workspace / rel, tests / "pristine" / f"{rel}.orig")
            restore.append(
                f"mkdir -p {shlex.quote(str(Path(rel).parent))} && cp /tests/pristine/{shlex.quote(rel + '.orig')} {shlex.quote(rel)}"
            )
        else:
            restore.append(f"rm -rf {shlex.quote(rel)}")
    (tests / "test.patch").write_text(task.test_patch)
    (tests / "required.json").write_text(json.dumps([*task.grading.fail_to_pass, *task.grading.pass_to_pass]))
    (tests / "judge.py").write_text(JUDGE)
    script = TEST_SH.format(workdir=WORKDIR, restore="\n".join(restore) or ":", command=task.grading.test_command)
    (tests / "test.sh").write_text(script)
    (tests / "test.sh").chmod(0o755)
    solution.mkdir()
    (solution / "gold.patch").write_text(task.gold_patch)
    (solution / "solve.sh").write_text(SOLVE_SH.format(workdir=WORKDIR))
    (solution / "solve.sh").chmod(0o755)
    return folder
