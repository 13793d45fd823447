"""The same SWE-bench row in the docker backend: its environment is a local image built
from the base image (the spec's Python copied in, pip over the host's network), then graded.
The images are cached by content in the engine, so only the first run builds (~2 min)."""

from __future__ import annotations

import pytest

from agent_env import ToolEnv, grade_patch, prepare_environment
from sandboxes import make_sandbox
from tasks.swebench import row_to_task
from tests.tasks import swebench_repo as repo

pytestmark = pytest.mark.docker


def docker(spec):
    return make_sandbox(spec, "docker")


def test_a_row_runs_in_a_locally_built_image(tmp_path):
    if problem := repo.index_problem():
        pytest.skip(problem)
    commits = repo.make_clone(tmp_path / "cache" / "psf" / "requests")  # the owner/name layout
    task = prepare_environment(row_to_task(repo.requests_row(commits), "row", tmp_path / "cache"), "docker")
    assert not task.unavailable, task.unavailable
    assert task.sandbox["image"].startswith("agentic-rl/pyenv-ws:") and task.sandbox["mounts"] == []
    gold = grade_patch(task, task.gold_patch, sandbox_factory=docker)
    assert gold.resolved and "Python 3.9.18" in gold.log, gold.log[-3000:]
    empty = grade_patch(task, "", sandbox_factory=docker)
    assert not empty.resolved and empty.statuses[repo.FAIL_TO_PASS[0]] == "FAILED"
    with ToolEnv(task, sandbox_factory=docker) as env:
        env.reset()
        run = env.sandbox.exec("git log --all --oneline | wc -l; git tag | wc -l; python --version; whoami")
        assert run.output.split() == ["1", "0", "Python", "3.9.18", "sandbox"], run.output
        attack = env.sandbox.exec(repo.USER_SITE_ATTACK)
        assert attack.output.split() == repo.USER_SITE_DEFENDED, attack.output
