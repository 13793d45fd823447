"""bench.perf.pool's figures on one task and one round: both arms resolve, every warm episode
started from the pool, and the ratios are the arms' own figures divided."""

import pytest

from bench.perf import pool as bench_pool
from tasks import builtin_tasks
from tests.conftest import needs_bwrap


@needs_bwrap
def test_one_round_gives_both_arms_and_their_ratios():
    figures = bench_pool.bench_backend("local", builtin_tasks()[:1], rounds=1, pool_size=2)
    assert figures["local_warm_start_fraction"] == 1.0  # the pool was full before the warm episode
    assert figures["local_pool_background_starts_per_episode"] == 2.0  # the agent's sandbox and grading's
    for name in ("episode", "start", "grading"):
        for q in ("p50", "p99"):
            assert figures[f"local_{name}_{q}_ratio"] == pytest.approx(
                figures[f"local_warm_{name}_{q}_ms"] / figures[f"local_cold_{name}_{q}_ms"]
            )
