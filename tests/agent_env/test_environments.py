"""Environments are built once per shared part (a SWE-bench (repo, version) spec) and reused
by every task that has it; different shared parts build in parallel, within a bound.

The scheduling tests replace the per-task build (`_prepare`) with a double that records
which tasks are in flight at once (threads meet at a barrier, never a sleep); the sharing
test builds real environments (Python 3.9 from pyenv, pip) for three rows of one spec.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

import pytest

from agent_env import environments, prepare_environments
from tasks import GradingSpec, Task
from tasks.swebench import row_to_task
from tests.conftest import needs_bwrap
from tests.tasks import swebench_repo as repo


def _task(task_id: str, version: str, install: str = "true") -> Task:
    return Task(
        id=task_id,
        problem_statement="x",
        grading=GradingSpec(test_command="true", fail_to_pass=["t"]),
        sandbox={"python": {"version": version, "setup": [f"echo {version}"], "install": [install]}},
        harness_spec={"repo": "owner/repo", "version": version},
    )


class Recorder:
    """A stand-in for the per-task build: records the tasks in flight at once, and lets
    `meet` tasks go only when `meet` of them are in flight together (a barrier)."""

    def __init__(self, meet: int = 1, fail: dict[str, str] | None = None) -> None:
        self.lock = threading.Lock()
        self.in_flight: set[str] = set()
        self.most = 0
        self.calls: list[str] = []
        self.seen_together: list[set[str]] = []
        self.barrier = threading.Barrier(meet, timeout=60) if meet > 1 else None
        self.fail = fail or {}

    def __call__(self, task: Task, backend: str, log) -> tuple[Task, str, tuple[str, ...]]:
        with self.lock:
            self.calls.append(task.id)
            self.in_flight.add(task.id)
            self.most = max(self.most, len(self.in_flight))
            self.seen_together.append(set(self.in_flight))
        try:
            if self.barrier is not None:
                self.barrier.wait()
            if task.id in self.fail:
                return dataclasses.replace(task, unavailable=f"cannot: {task.id}"), self.fail[task.id], ()
            return dataclasses.replace(task, sandbox={"built": task.id}), "", ("environment", "workspace")
        finally:
            with self.lock:
                self.in_flight.discard(task.id)


def test_different_specs_build_in_parallel_within_the_bound(monkeypatch):
    recorder = Recorder(meet=2)
    monkeypatch.setattr(environments, "_prepare", recorder)
    tasks = [_task("a", "3.9"), _task("b", "3.10"), _task("c", "3.11"), _task("d", "3.12")]
    out = prepare_environments(tasks, "local", progress=False, workers=2)
    assert [t.sandbox for t in out] == [{"built": "a"}, {"built": "b"}, {"built": "c"}, {"built": "d"}]
    # Two at a time met at the barrier (so they ran together); never a third.
    assert recorder.most == 2 and sorted(recorder.calls) == ["a", "b", "c", "d"]


def test_one_spec_builds_its_shared_part_before_its_other_tasks_start(monkeypatch, caplog):
    recorder = Recorder()
    monkeypatch.setattr(environments, "_prepare", recorder)
    tasks = [_task("r1", "3.9", "i1"), _task("r2", "3.9", "i2"), _task("r3", "3.9", "i3"), _task("o", "3.8")]
    seconds: dict[str, float] = {}
    built: set[str] = set()
    with caplog.at_level(logging.INFO, logger="agent_env.environments"):
        out = prepare_environments(tasks, "local", progress=False, workers=4, seconds=seconds, built=built)
    assert [t.sandbox for t in out] == [{"built": t.id} for t in tasks]
    # Each task's time is kept, and who built (the recorder says every task built something).
    assert sorted(seconds) == ["o", "r1", "r2", "r3"] and all(s >= 0 for s in seconds.values())
    assert built == {"o", "r1", "r2", "r3"}
    # r2 and r3 (install steps differ; the shared part does not) start only once r1 is done.
    assert recorder.calls[:2] in (["r1", "o"], ["o", "r1"])
    assert all("r1" not in together for together in recorder.seen_together if together & {"r2", "r3"})
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "4 task(s) need 2 shared environment(s); building on up to 4 thread(s)"
    assert sum(line.startswith("environment owner/repo 3.9 (3 task(s)): shared part built;") for line in lines) == 1
    assert sum(line.startswith("environment owner/repo 3.8 (1 task(s)): shared part built;") for line in lines) == 1


def test_a_shared_part_that_fails_is_not_built_again_for_the_other_tasks(monkeypatch):
    recorder = Recorder(fail={"r1": "setup", "x1": "install"})
    monkeypatch.setattr(environments, "_prepare", recorder)
    tasks = [_task("r1", "3.9", "i1"), _task("r2", "3.9", "i2"), _task("x1", "3.8", "i1"), _task("x2", "3.8", "i2")]
    out = prepare_environments(tasks, "local", progress=False, workers=2)
    assert [t.unavailable for t in out] == ["cannot: r1", "cannot: r1", "cannot: x1", ""]
    # A failed setup step is the spec's: r2 is not built again. A failed install is the task's own.
    assert sorted(recorder.calls) == ["r1", "x1", "x2"]


@pytest.mark.slow
@needs_bwrap
def test_rows_of_one_spec_build_the_shared_environment_once(tmp_path, monkeypatch, caplog):
    """Three rows of psf/requests 1.1 at three commits, prepared on three threads at once
    into an empty cache: one virtualenv with the spec's Python, pip and requirements
    (`env-*`), and one install per row (`ws-*`)."""
    if problem := repo.index_problem():
        pytest.skip(problem)
    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", str(tmp_path / "envs"))
    commits = repo.make_clone(tmp_path / "repos" / "psf__requests")
    rows = [
        {**repo.requests_row(commits), "instance_id": f"psf__requests-{name}", "base_commit": commits[name]}
        for name in ("first", "base", "future")
    ]
    tasks = [row_to_task(row, f"rows.jsonl:{i}", tmp_path / "repos") for i, row in enumerate(rows, 1)]
    assert environments.shared_key(tasks[0], "local") == environments.shared_key(tasks[2], "local")
    builders: set[str] = set()
    with caplog.at_level(logging.INFO):
        out = prepare_environments(tasks, "local", progress=False, workers=3, built=builders)
    assert [t.unavailable for t in out] == ["", "", ""]
    assert builders == {"psf__requests-first"}  # the group's first task built the shared part
    built = sorted(p.name.split("-")[0] for p in (tmp_path / "envs").iterdir() if p.is_dir())
    assert built == ["env", "ws", "ws", "ws"]
    lines = [r.getMessage() for r in caplog.records]
    assert sum(line.startswith("building python environment env-") for line in lines) == 1
    assert sum(line.startswith("installing ") for line in lines) == 3
    assert len({t.workspace for t in out}) == 3 and len({t.sandbox["mounts"][-1]["source"] for t in out}) == 3
    # A second run finds everything built: nothing is built again.
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = prepare_environments(tasks, "local", progress=False, workers=3, built=builders)
    assert builders == {"psf__requests-first"}  # nothing added: found built
    assert [t.workspace for t in again] == [t.workspace for t in out]
    assert not any(r.getMessage().startswith(("building ", "installing ")) for r in caplog.records)
    assert any("shared part found built" in r.getMessage() for r in caplog.records)
