"""`tasks.harbor`: Harbor task folders read as tasks (errors name the file and the field), and
the parts of a Dockerfile the local backend and the workspace use."""

import shutil
from pathlib import Path

import pytest

from tasks import TaskError, load_task_set
from tasks.harbor import copied_workspace, load_harbor_task, local_problem, parse_dockerfile, task_folders
from tasks.sets import source_kind

EXAMPLES = Path(__file__).parents[2] / "tasks" / "harbor_examples"


def test_the_example_folder_loads_as_five_tasks_with_what_their_files_say():
    tasks = load_task_set(f"harbor:{EXAMPLES}")
    assert [t.id for t in tasks] == [
        "agentic-rl__count-error-lines",
        "agentic-rl__fix-median",
        "agentic-rl__fix-word-count",
        "agentic-rl__ready-script",
        "agentic-rl__region-totals",
    ]
    median = tasks[1]
    assert median.problem_statement.startswith("`/app/stats.py` has a `median(values)` function")
    assert median.sandbox == {"env": {}, "workdir": "/app", "network": False}
    assert (median.limits.grading_timeout_s, median.limits.command_timeout_s) == (120.0, 600.0)
    assert (median.family, median.difficulty) == ("bugfix", "easy")
    assert median.verifier.tests_dir == EXAMPLES / "fix-median" / "tests"
    assert median.verifier.solution_dir == EXAMPLES / "fix-median" / "solution"
    assert median.dockerfile == EXAMPLES / "fix-median" / "environment" / "Dockerfile"
    assert sorted(p.name for p in median.workspace.iterdir()) == ["README.md", "stats.py"]
    assert source_kind(f"harbor:{EXAMPLES}") == "harbor"
    # One task folder alone is a source too.
    assert [t.id for t in load_task_set(f"harbor:{EXAMPLES / 'ready-script'}")] == ["agentic-rl__ready-script"]


def _copy(tmp_path: Path, name: str = "fix-median") -> Path:
    folder = tmp_path / name
    shutil.copytree(EXAMPLES / name, folder)
    return folder


def test_a_broken_task_folder_is_one_line_naming_the_file_and_the_field(tmp_path):
    folder = _copy(tmp_path)
    (folder / "instruction.md").write_text("  \n")
    with pytest.raises(TaskError, match=r"instruction.md: missing or empty; it is what the agent is asked to do$"):
        load_harbor_task(folder)
    folder = _copy(tmp_path, "ready-script")
    (folder / "tests" / "test.sh").unlink()
    with pytest.raises(
        TaskError, match=r"tests/test.sh: missing; the verifier script writes /logs/verifier/reward.txt"
    ):
        load_harbor_task(folder)
    folder = _copy(tmp_path, "count-error-lines")
    (folder / "task.toml").write_text("[verifier]\ntimeout_sec = -5\n")
    with pytest.raises(
        TaskError, match=r"task.toml: field 'verifier.timeout_sec': must be a positive number of seconds"
    ):
        load_harbor_task(folder)
    (folder / "task.toml").write_text("[verifier\n")
    with pytest.raises(TaskError, match=r"task.toml: not valid TOML"):
        load_harbor_task(folder)
    with pytest.raises(TaskError, match=r"no Harbor task here"):
        task_folders(tmp_path / "count-error-lines" / "tests")


def test_a_minimal_task_toml_takes_harbors_defaults(tmp_path):
    folder = _copy(tmp_path, "ready-script")
    (folder / "task.toml").write_text("")
    task = load_harbor_task(folder)
    assert task.id == "ready-script"  # no [task].name: the folder's name
    assert task.limits.grading_timeout_s == 600.0 and task.sandbox["network"] is True


def test_the_dockerfile_is_read_with_continuations_env_forms_and_docker_copy_rules(tmp_path):
    context = tmp_path / "environment"
    (context / "src" / "pkg").mkdir(parents=True)
    (context / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (context / "notes.txt").write_text("n\n")
    (context / "conf.ini").write_text("c\n")
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(
        '# a comment\nFROM agentic-rl/base:bookworm\nENV A=1 B="two words"\nENV LEGACY spaced value\n'
        "WORKDIR /srv\nWORKDIR app\nCOPY src/ ./\nCOPY notes.txt .\nCOPY conf.ini settings/app.ini\n"
        "COPY conf.ini /etc/app.ini\nRUN apt-get update && \\\n    apt-get install -y jq\nUSER sandbox\n"
    )
    parsed = parse_dockerfile(dockerfile)
    assert (parsed.base, parsed.workdir, parsed.user) == ("agentic-rl/base:bookworm", "/srv/app", "sandbox")
    assert parsed.env == {"A": "1", "B": "two words", "LEGACY": "spaced value"}
    assert parsed.runs == ("apt-get update &&  apt-get install -y jq",)
    workspace = copied_workspace(parsed, context, parsed.workdir)
    files = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file())
    assert files == ["notes.txt", "pkg/mod.py", "settings/app.ini"]
    assert local_problem(parsed, parsed.workdir) == (
        "its 1 RUN step(s) need the docker backend (--sandbox docker); "
        "COPY to /etc/app.ini, outside the workdir /srv/app, needs the docker backend"
    )
    dockerfile.write_text("FROM a AS build\nFROM b\n")
    with pytest.raises(TaskError, match=r"several FROM stages"):
        parse_dockerfile(dockerfile)
    dockerfile.write_text("FROM b\nCOPY --from=build /x /y\n")
    with pytest.raises(TaskError, match=r"COPY --from: a multi-stage build is not read"):
        parse_dockerfile(dockerfile)
    dockerfile.write_text("FROM b\nWORKDIR /app\nCOPY missing.txt .\n")
    with pytest.raises(TaskError, match=r"COPY missing.txt: no such file in the build context"):
        copied_workspace(parse_dockerfile(dockerfile), context, "/app")
