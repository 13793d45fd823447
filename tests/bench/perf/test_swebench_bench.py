"""bench.perf.swebench's synthetic input: rows of one spec at distinct commits, which load as
tasks sharing one environment and differing in their workspace (what the bench's cold and
warm figures rest on). The timing itself is the benchmark's, not a test's."""

from __future__ import annotations

import json
import os

import pytest

from agent_env.environments import shared_key
from bench.perf.swebench import cache_at, rows_by_repo, synthetic_rows
from sandboxes.pyenv import cache_dir
from tasks.swebench import load_swebench


def test_synthetic_rows_share_one_spec_at_distinct_commits(tmp_path):
    repo_cache, dataset, ids = synthetic_rows(tmp_path, 3)
    assert ids == ["psf__requests-9000", "psf__requests-9001", "psf__requests-9002"]
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    assert len({row["base_commit"] for row in rows}) == 3
    tasks = load_swebench(dataset, ids, repo_cache=repo_cache)
    assert [t.unavailable for t in tasks] == ["", "", ""]
    assert len({shared_key(t, "local") for t in tasks}) == 1 and len({t.workspace for t in tasks}) == 3
    assert rows_by_repo(dataset, [ids[2], ids[0]]) == {"psf/requests": [ids[2], ids[0]]}


def test_an_unknown_instance_is_one_line(tmp_path):
    _, dataset, _ = synthetic_rows(tmp_path, 1)
    with pytest.raises(SystemExit, match=r"instance\(s\) not found: \['nope'\]; give ids of rows in it"):
        rows_by_repo(dataset, ["nope"])


def test_the_warm_cache_is_set_for_the_baseline_and_the_caller_s_restored(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTIC_RL_CACHE", "/caller/cache")
    monkeypatch.setenv("AGENTIC_RL_ENV_CACHE", "/caller/envs")
    with cache_at(tmp_path):
        assert os.environ["AGENTIC_RL_CACHE"] == str(tmp_path) and "AGENTIC_RL_ENV_CACHE" not in os.environ
        assert cache_dir() == tmp_path / "envs"
    assert (os.environ["AGENTIC_RL_CACHE"], os.environ["AGENTIC_RL_ENV_CACHE"]) == ("/caller/cache", "/caller/envs")
    monkeypatch.delenv("AGENTIC_RL_ENV_CACHE")
    with pytest.raises(KeyError), cache_at(tmp_path):
        raise KeyError("an error inside")
    assert os.environ["AGENTIC_RL_CACHE"] == "/caller/cache" and "AGENTIC_RL_ENV_CACHE" not in os.environ
