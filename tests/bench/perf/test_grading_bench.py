"""bench.perf.grading: one repetition of one built-in task, measured for real (local sandboxes)."""

import subprocess
import sys

from agent_env.grading.runs import PHASES as GRADER_PHASES
from bench.perf.grading import PHASES, PYTEST_FIXTURE, measure, phase_shares
from sandboxes import make_sandbox
from tasks import builtin_tasks
from tests.conftest import needs_bwrap


@needs_bwrap
def test_one_task_is_measured_gold_with_its_twins_and_empty_without():
    task = builtin_tasks(["text-slugify-custom-separator"])[0]
    figures = measure(task, lambda spec: make_sandbox(spec, "local"), repeat=1)
    prefix = task.id
    assert figures[f"{prefix}.gold.runs"] == 1 + len(task.grading.fail_to_pass)  # the verdict and the twins
    assert figures[f"{prefix}.empty.runs"] == 1  # a failed verdict: no twin runs
    for label in ("gold", "empty"):
        ratio = figures[f"{prefix}.{label}.grade_s"] / figures[f"{prefix}.{label}.plain_s"]
        assert abs(figures[f"{prefix}.{label}.ratio"] - ratio) < 1e-9
        # Where it went: each phase timed, and the phases inside the grading's own time.
        phases = [figures[f"{prefix}.{label}.{name}_s"] for name in PHASES]
        assert figures[f"{prefix}.{label}.tests_s"] > 0 and sum(phases) <= figures[f"{prefix}.{label}.grade_s"]
    assert figures[f"{prefix}.gold.canaries_s"] > 0  # the twins ran
    shares = phase_shares(figures, [prefix], "gold")
    assert sum(shares.values()) <= 1 and set(shares) == {f"share.gold.{name}" for name in PHASES}


def test_the_bench_names_the_graders_phases_and_finds_its_pytest_task():
    assert PHASES == GRADER_PHASES
    assert (PYTEST_FIXTURE / "task.yaml").is_file()  # it ran from bench/ before bench/perf/


def test_bad_arguments_get_one_line():
    for args, said in (
        (["--repeat", "0"], "--repeat 0: give at least 1"),
        (["--tasks", "nope"], "no built-in task nope"),
    ):
        done = subprocess.run([sys.executable, "-m", "bench.perf.grading", *args], capture_output=True, text=True)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr
