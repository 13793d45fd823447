"""`python -m tasks export-harbor`: our tasks as Harbor task folders, read back by our loader
and by harbor's own (its Task loader, `harbor lint`, and `harbor run` with the oracle agent
over our sandboxes), in the Harbor venv (`make harbor-venv`, which CI builds)."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agent_env.validate import validate_task
from tasks import TaskError, builtin_tasks, load_task_set
from tasks.__main__ import main as tasks_main
from tasks.harbor_export import JUDGE, export_task
from tests.conftest import needs_bwrap

ROOT = Path(__file__).parents[2]
HARBOR = ROOT / ".venv-harbor" / "bin"
needs_harbor = pytest.mark.skipif(
    not (HARBOR / "harbor").exists(), reason="no Harbor venv: make harbor-venv (CI builds it)"
)
SLUG = "text-slugify-custom-separator"


def test_a_builtin_task_is_written_in_harbors_layout(tmp_path):
    (task,) = builtin_tasks([SLUG])
    folder = export_task(task, tmp_path)
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["task"]["name"] == f"agentic-rl/{SLUG}"
    assert config["verifier"] == {"timeout_sec": 120.0, "environment_mode": "separate"}
    assert config["artifacts"] == ["/workspace"] and config["environment"]["network_mode"] == "no-network"
    assert (folder / "instruction.md").read_text() == task.problem_statement + "\n"
    assert (folder / "environment" / "Dockerfile").read_text() == (
        "FROM agentic-rl/base:bookworm\nCOPY --chown=sandbox:sandbox workspace/ /workspace/\nWORKDIR /workspace\n"
    )
    assert (folder / "environment" / "workspace" / "slugkit" / "__init__.py").is_file()
    assert json.loads((folder / "tests" / "required.json").read_text()) == [
        *task.grading.fail_to_pass,
        *task.grading.pass_to_pass,
    ]
    script = (folder / "tests" / "test.sh").read_text()
    assert "rm -rf tests/test_separators.py\n" in script  # the hidden test file is new: any copy is removed
    assert f"( {task.grading.test_command} ) > /logs/verifier/test-output.txt 2>&1" in script
    assert (folder / "solution" / "gold.patch").read_text() == task.gold_patch
    assert os.access(folder / "solution" / "solve.sh", os.X_OK) and os.access(folder / "tests" / "test.sh", os.X_OK)


def test_what_cannot_be_exported_is_refused_with_the_reason(tmp_path):
    (harbor_task,) = load_task_set(f"harbor:{ROOT / 'tasks' / 'harbor_examples' / 'ready-script'}")
    with pytest.raises(TaskError, match=r"cannot be exported to Harbor: it is a Harbor task already$"):
        export_task(harbor_task, tmp_path)
    (task,) = builtin_tasks([SLUG])
    row = task.__class__(**{**task.__dict__, "repo": "psf/requests", "grading": task.grading})
    with pytest.raises(TaskError, match=r"a SWE-bench row needs an image with its environment: give --image"):
        export_task(row, tmp_path)
    sympy = task.__class__(
        **{
            **task.__dict__,
            "repo": "sympy/sympy",
            "grading": task.grading.model_copy(update={"log_parser": "swebench"}),
        }
    )
    with pytest.raises(TaskError, match=r"sympy's test runner prints a log judge.py cannot read"):
        export_task(sympy, tmp_path, image="x")
    # The command goes on past a refused task, names it, and exits 1.
    code = tasks_main(["export-harbor", f"harbor:{ROOT / 'tasks' / 'harbor_examples'}", "--out", str(tmp_path / "o")])
    assert code == 1


@pytest.mark.parametrize(
    ("log", "reward"),
    [
        ("PASSED t.py::test_a\nPASSED t.py::test_b\n", "1"),
        ("PASSED t.py::test_a\nFAILED t.py::test_b - assert 1 == 2\n", "0"),
        ("PASSED t.py::test_a\n", "0"),  # test_b is not in the log
        ("test_a (t.py::test_a) ... ok\n", "0"),  # not a unittest id: nothing read
    ],
)
def test_the_exported_judge_reads_pytest_lines(tmp_path, log, reward):
    assert _judge(tmp_path, ["t.py::test_a", "t.py::test_b"], log) == reward


@pytest.mark.parametrize(
    ("log", "reward"),
    [
        ("test_a (pkg.mod.Case.test_a) ... ok\ntest_b (pkg.mod.Case.test_b) ... ok\n", "1"),  # Python 3.11+
        ("test_a (pkg.mod.Case) ... ok\ntest_b (pkg.mod.Case) ... FAIL\n", "0"),  # older Pythons, Django
        ("test_a (pkg.mod.Case) ... ok\ntest_b (pkg.mod.Case)\nIts docstring. ... ok\n", "1"),
    ],
)
def test_the_exported_judge_reads_unittest_lines(tmp_path, log, reward):
    assert _judge(tmp_path, ["pkg.mod.Case.test_a", "pkg.mod.Case.test_b"], log) == reward


def _judge(tmp_path: Path, required: list[str], log: str) -> str:
    (tmp_path / "judge.py").write_text(JUDGE)
    (tmp_path / "required.json").write_text(json.dumps(required))
    (tmp_path / "log.txt").write_text(log)
    subprocess.run(
        [sys.executable, str(tmp_path / "judge.py"), str(tmp_path / "log.txt"), str(tmp_path / "reward.txt")],
        env={**os.environ, "JUDGE_REQUIRED": str(tmp_path / "required.json")},
        check=True,
        capture_output=True,
    )
    return (tmp_path / "reward.txt").read_text()


@needs_bwrap
def test_an_exported_task_read_back_as_a_harbor_task_is_valid_here(tmp_path):
    export_task(builtin_tasks([SLUG])[0], tmp_path)
    (task,) = load_task_set(f"harbor:{tmp_path}")
    result = validate_task(task)
    assert result.status == "ok", result.problems
    assert result.checked == "the oracle scores 1 (none of its 1 canary twin(s) paid); doing nothing scores 0"


# -- harbor's own code, in its venv ----------------------------------------------------------------


def _harbor(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(HARBOR / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


@needs_harbor
def test_harbors_loader_and_linter_accept_every_export_and_example(tmp_path):
    assert tasks_main(["export-harbor", "--out", str(tmp_path / "out")]) == 0
    folders = sorted((tmp_path / "out").iterdir()) + sorted((ROOT / "tasks" / "harbor_examples").iterdir())
    assert len(folders) == 35
    check = (
        "import sys\nfrom harbor.models.task.task import Task\n"
        "bad = [p for p in sys.argv[1:] if not Task.is_valid_dir(p)]\nprint(len(sys.argv) - 1 - len(bad), bad)\n"
    )
    loaded = _harbor("python", "-c", check, *map(str, folders), cwd=tmp_path)
    assert loaded.stdout.strip() == "35 []", loaded.stderr[-2000:]
    lint = _harbor("harbor", "lint", *map(str, folders), cwd=tmp_path)
    assert (lint.returncode, lint.stdout.strip()) == (0, ""), lint.stdout[-2000:]


@needs_harbor
@needs_bwrap
def test_harbor_run_with_the_oracle_over_our_sandboxes_resolves_exports_and_examples(tmp_path):
    tasks = tmp_path / "tasks"
    for task in builtin_tasks([SLUG, "parsing-querystring-plus"]):
        export_task(task, tasks)
    for name in ("fix-median", "region-totals"):
        subprocess.run(["cp", "-r", str(ROOT / "tasks" / "harbor_examples" / name), str(tasks)], check=True)
    run = _harbor(
        "harbor", "run", "-p", str(tasks), "-a", "oracle", "-e", "agent_env.harbor_provider:SandboxEnvironment",
        "--ek", "backend=local", "-o", str(tmp_path / "jobs"), "--job-name", "oracle", "-n", "2", "-y", cwd=tmp_path,
    )  # fmt: skip
    result = json.loads((tmp_path / "jobs" / "oracle" / "result.json").read_text())
    stats = result["stats"]
    assert (stats["n_errored_trials"], result["n_total_trials"]) == (0, 4), run.stdout[-3000:]
    rewards = []
    for trial in (tmp_path / "jobs" / "oracle").iterdir():
        if (trial / "result.json").is_file():
            rewards.append(json.loads((trial / "result.json").read_text())["verifier_result"]["rewards"]["reward"])
    assert rewards == [1, 1, 1, 1] or sorted(rewards) == [1.0, 1.0, 1.0, 1.0]
