"""bench.perf.grading: one repetition of one built-in task, measured for real (local sandboxes)."""

import subprocess
import sys

from bench.perf.grading import measure
from sandboxes import make_sandbox
from tasks import builtin_tasks
from tests.conftest import needs_bwrap


@needs_bwrap
def test_one_task_is_measured_gold_with_its_twins_and_empty_without():
    task = builtin_tasks(["text-slugify-custom-separator"])[0]
    figures = measure(task, lambda spec: make_sandbox(spec, "local"), repeat=1)
    prefix = task.id
    assert figures[f"{prefix}.gold.runs"] == 1 + 2 * len(task.grading.fail_to_pass)  # the verdict and the twins
    assert figures[f"{prefix}.empty.runs"] == 1  # a failed verdict: no twin runs
    for label in ("gold", "empty"):
        ratio = figures[f"{prefix}.{label}.grade_s"] / figures[f"{prefix}.{label}.plain_s"]
        assert abs(figures[f"{prefix}.{label}.ratio"] - ratio) < 1e-9


def test_bad_arguments_get_one_line():
    for args, said in (
        (["--repeat", "0"], "--repeat 0: give at least 1"),
        (["--tasks", "nope"], "no built-in task nope"),
    ):
        done = subprocess.run([sys.executable, "-m", "bench.perf.grading", *args], capture_output=True, text=True)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
