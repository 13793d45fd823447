"""bench.perf.async's generated suite: heavy-tailed by construction, and loadable as tasks."""

import importlib

from bench.common import percentile
from tasks import load_task_set

bench_async = importlib.import_module("bench.perf.async")  # `async` is a keyword: no plain import


def test_durations_are_heavy_tailed():
    durations = bench_async.heavy_tailed_durations(24)
    assert percentile(durations, 99) / percentile(durations, 50) >= 10
    assert len(set(durations)) == 24


def test_generated_suite_loads_as_tasks(tmp_path):
    bench_async.write_suite(tmp_path, [0.01, 2.0])
    tasks = load_task_set(str(tmp_path))
    assert sorted(t.id for t in tasks) == ["sleepy-00", "sleepy-01"]
    assert all(t.grading.fail_to_pass == ["tests.test_calc.Calc.test_add"] for t in tasks)
