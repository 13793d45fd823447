"""bench.perf.swebench's synthetic input: rows of one spec at distinct commits, which load as
tasks sharing one environment and differing in their workspace (what the bench's cold and
warm figures rest on). The timing itself is the benchmark's, not a test's."""

from __future__ import annotations

import json

import pytest

from agent_env.environments import shared_key
from bench.perf.swebench import rows_by_repo, synthetic_rows
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
