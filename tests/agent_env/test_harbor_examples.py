"""The example Harbor tasks (tasks/harbor_examples) are valid on both backends: the oracle
(solution/solve.sh) earns 1 with none of its canary twins paying, and doing nothing earns 0."""

import pytest

from agent_env.validate import validate_tasks
from tasks import load_task_set
from tests.conftest import needs_bwrap

BACKENDS = [pytest.param("local", marks=needs_bwrap), pytest.param("docker", marks=pytest.mark.docker)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_example_harbor_task_is_valid(backend):
    """Over 60 s on docker in a full suite on 2 cores (67 s, 2026-12-07): each example task is
    validated for real (its oracle and an empty run, in fresh containers, graded)."""
    results = list(validate_tasks(load_task_set("harbor:tasks/harbor_examples"), backend))
    assert [(r.task_id, r.status) for r in results] == [
        ("agentic-rl__count-error-lines", "ok"),
        ("agentic-rl__fix-median", "ok"),
        ("agentic-rl__fix-word-count", "ok"),
        ("agentic-rl__ready-script", "ok"),
        ("agentic-rl__region-totals", "ok"),
    ], [r.problems for r in results]
    checked = {r.task_id: r.checked for r in results}
    assert checked["agentic-rl__fix-median"] == (
        "the oracle scores 1 (none of its 10 canary twin(s) paid); doing nothing scores 0"
    )
    # The shell-only verifier has no test twin, only the moved-reward-path one, and says so.
    ready = next(r for r in results if r.task_id == "agentic-rl__ready-script")
    assert ready.checked == "the oracle scores 1 (none of its 1 canary twin(s) paid); doing nothing scores 0"
    assert ready.warnings == ("no test canary: the verifier has no Python test function to build a twin of",)
