"""OpenHands, run for real: the OpenHands agent (openhands-sdk and openhands-tools, pinned, in
their own Python 3.12 venv: `make openhands-venv`) against `evals.serve`'s scripted model,
its tools acting in the project's local sandbox (`evals.openhands_run`, `evals/openhands_adapter.py`), its
predictions graded by `evals.swe --predictions`.

The scripted model replays each task's gold actions (the `explore` style: search, view,
edits, the visible tests, finish) as tool calls under the names OpenHands offers, so what
OpenHands submits must resolve every task; the `empty` model only calls finish, so the same
path resolves none. Building the venv takes about four minutes the first time (CI builds it in
`.ci/run` before `make test`); the runs take well under a minute each. Skipped only where
Python 3.12 is missing.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_env.gold import gold_actions
from agent_env.tools import parse_tool_calls
from evals.serve import TOOL_ALIASES
from evals.swe import main as swe_main
from tasks import load_task_set, prepare_workspace
from tests.conftest import needs_bwrap

REPO = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv-openhands" / "bin" / "python"
# Three families; one edit, two edits and four edits of one file.
TASKS = ["collections-indexed-heap-reprioritize", "graphs-toposort-missed-cycle", "parsing-shellwords-empty-args"]
OPENHANDS_TOOLS = {"terminal", "file_editor", "finish", "think"}  # what openhands-sdk 1.58.2's Agent offers here

pytestmark = [needs_bwrap, pytest.mark.slow]


def python312() -> str | None:
    """Python 3.12 as the Makefile finds it (pyenv's first, then PATH)."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    return found[0] if found else shutil.which("python3.12")


@pytest.fixture(scope="module")
def openhands_python() -> Path:
    """The OpenHands venv's interpreter, built (or brought up to date) by `make openhands-venv`."""
    if python312() is None:
        pytest.skip("Python 3.12 is absent (pyenv install 3.12.1): the OpenHands venv cannot be built")
    # pytest-xdist may run these tests in two workers at once: one builds, the other waits.
    with (REPO / ".venv-openhands.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = subprocess.run(
            ["make", "-s", "openhands-venv", f"PYTHON312={python312()}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    assert built.returncode == 0, f"make openhands-venv failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    return VENV_PYTHON


@contextlib.contextmanager
def scripted_server(model: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`python -m evals.serve --scripted MODEL` on a free port: its base URL and requests log."""
    requests_log, server_log = tmp_path / f"{model}-requests.jsonl", tmp_path / f"{model}-server.log"
    with server_log.open("w") as errors:  # the child keeps its own copy of the descriptor
        server = subprocess.Popen(
            [sys.executable, "-m", "evals.serve", "--scripted", model, "--instances", ",".join(TASKS),
             "--style", "explore", "--port", "0", "--requests-log", str(requests_log)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=errors, text=True,
        )  # fmt: skip
    try:
        first = server.stdout.readline()  # "serving 'gold' for 3 task(s) at http://127.0.0.1:PORT/v1"
        assert " at http://" in first, f"the server did not start: {server_log.read_text()}"
        yield first.rsplit(" at ", 1)[1].strip(), requests_log
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stdout.close()


def openhands_run(python: Path, base_url: str, model: str, output: Path, ids: list[str]) -> subprocess.CompletedProcess:
    """The run, with a temp dir of its own (`output`'s sibling `tmp-*`; the project's caches
    stay where they are), so that what it leaves there can be checked."""
    tmp = output.with_name(f"tmp-{output.name}")
    tmp.mkdir()
    cache = os.environ.get("AGENTIC_RL_CACHE", str(Path(tempfile.gettempdir()) / "agentic-rl"))
    return subprocess.run(
        [str(python), "-m", "evals.openhands_run", "--instances", ",".join(ids),
         "--base-url", base_url, "--model", model, "--output", str(output)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TMPDIR": str(tmp), "AGENTIC_RL_CACHE": cache},
    )  # fmt: skip


def run_openhands(openhands_python: Path, model: str, tmp_path: Path) -> tuple[Path, list[dict]]:
    """Serve `model`, run OpenHands on TASKS against it; the output folder and every chat
    request the server answered."""
    output = tmp_path / f"openhands-{model}"
    with scripted_server(model, tmp_path) as (base_url, requests_log):
        run = openhands_run(openhands_python, base_url, model, output, TASKS)
    assert run.returncode == 0, f"evals.openhands_run failed:\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    return output, [json.loads(line) for line in requests_log.read_text().splitlines()]


def grade(predictions: Path, tmp_path: Path, name: str) -> dict[str, dict]:
    """`python -m evals.swe --predictions` on the run; its records by instance."""
    output = tmp_path / f"graded-{name}"
    code = swe_main(["--predictions", str(predictions), "--dataset", "builtin", "--instances", ",".join(TASKS),
                     "--output", str(output), "--grader", "project"])  # fmt: skip
    assert code == 0
    records = [json.loads(line) for line in (output / "results.jsonl").read_text().splitlines()]
    return {r["instance_id"]: r for r in records}


def test_openhands_submits_what_the_gold_actions_make_and_it_resolves(openhands_python, tmp_path):
    """Over 60 s in a full suite on 2 cores (80 s, 2026-12-07): the real OpenHands SDK, in its own
    Python 3.12 venv, plays a whole conversation against our sandbox; then the patch is graded."""
    output, requests = run_openhands(openhands_python, "gold", tmp_path)

    # The SDK sent chat completions with its own tools, and the script answered with them.
    assert {tool["function"]["name"] for tool in requests[0]["tools"]} == OPENHANDS_TOOLS
    # The model is told only the sandbox's paths, never the host folder OpenHands keeps its state in.
    assert "/workspace" in json.dumps(requests[0]) and str(tmp_path) not in json.dumps(requests)
    openhands_name = {ours: names[-1] for ours, names in TOOL_ALIASES.items()}
    tasks = {t.id: t for t in load_task_set("builtin", TASKS)}
    for task_id in TASKS:
        trajectory = json.loads((output / "trajectories" / f"{task_id}.json").read_text())
        script = [call.name for action in gold_actions(tasks[task_id], style="explore")
                  for call in parse_tool_calls(action, tasks[task_id].tools)]  # fmt: skip
        actions = [e for e in trajectory["events"] if e["kind"] == "ActionEvent"]
        observations = [e["observation"] for e in trajectory["events"] if e["kind"] == "ObservationEvent"]
        assert [a["tool_name"] for a in actions] == [openhands_name[name] for name in script]
        assert len(observations) == len(actions) and not any(o["is_error"] for o in observations)
        tests_run = [o for o in observations if o["kind"] == "TerminalObservation"][-1]
        assert tests_run["exit_code"] == 0  # the repository's own tests passed in the sandbox
        assert trajectory["status"] == "finished"
        # The edits happened in the sandbox: the host's copy of the workspace is untouched.
        host = subprocess.run(["git", "status", "--porcelain"], cwd=prepare_workspace(tasks[task_id]),
                              capture_output=True, text=True, check=True)  # fmt: skip
        assert host.stdout == ""

    # OpenHands' own editor, replaced by ours, leaves no undo-history folder behind.
    assert sorted(p.name for p in (tmp_path / f"tmp-{output.name}").glob("oh_editor_history_*")) == []
    predictions = [json.loads(line) for line in (output / "predictions.jsonl").read_text().splitlines()]
    assert [p["instance_id"] for p in predictions] == TASKS
    assert all(p["model_name_or_path"] == "openhands/gold" and p["model_patch"].startswith("diff --git")
               for p in predictions)  # fmt: skip
    records = grade(output / "predictions.jsonl", tmp_path, "gold")
    assert {task_id: records[task_id]["status"] for task_id in TASKS} == dict.fromkeys(TASKS, "resolved")


def test_openhands_with_a_model_that_changes_nothing_resolves_none(openhands_python, tmp_path):
    output, requests = run_openhands(openhands_python, "empty", tmp_path)
    assert len(requests) == len(TASKS)  # one reply each: finish
    predictions = [json.loads(line) for line in (output / "predictions.jsonl").read_text().splitlines()]
    assert [(p["instance_id"], p["model_patch"]) for p in predictions] == [(task_id, "") for task_id in TASKS]
    records = grade(output / "predictions.jsonl", tmp_path, "empty")
    assert {task_id: records[task_id]["status"] for task_id in TASKS} == dict.fromkeys(TASKS, "empty_patch")


# OpenHands' workspace interface and the terminal tool over a local sandbox, in the venv.
WORKSPACE_CHECK = """
import json, sys
from pathlib import Path
from openhands.tools.terminal.definition import TerminalAction
from agent_env.env import ToolEnv
from evals.openhands_adapter import SandboxTerminalExecutor, SandboxWorkspace
from tasks import load_task_set

host = Path(sys.argv[1])
with ToolEnv(load_task_set("builtin", ["collections-indexed-heap-reprioritize"])[0]) as env:
    env.reset()
    ws = SandboxWorkspace(working_dir=host / "conversation", sandbox=env.sandbox, command_timeout=30)
    out = {}
    result = ws.execute_command("pwd && echo new > new.txt")
    out["execute"] = [result.exit_code, result.stdout, result.timeout_occurred]
    out["timeout"] = ws.execute_command("sleep 120", timeout=1).timeout_occurred  # far past it, even on a loaded machine
    (host / "up.txt").write_text("uploaded\\n")
    out["upload"] = ws.file_upload(host / "up.txt", "sub/up.txt").success
    out["download"] = ws.file_download("sub/up.txt", host / "down.txt").success and (host / "down.txt").read_text()
    out["missing"] = ws.file_download("nothing.txt", host / "x.txt").success
    ws.execute_command("echo '# changed' >> prioq/heap.py")
    out["changes"] = sorted([c.status.value, str(c.path)] for c in ws.git_changes("."))
    diff = ws.git_diff("prioq/heap.py")
    out["diff"] = diff.modified == diff.original + "# changed\\n"
    terminal = SandboxTerminalExecutor(ws)
    terminal(TerminalAction(command="cd prioq && export X=1"))
    seen = terminal(TerminalAction(command="pwd; echo $X"))
    out["terminal"] = [seen.text, seen.exit_code, seen.is_error]
    out["input"] = terminal(TerminalAction(command="y", is_input=True)).is_error
    out["heavy"] = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "trainer", "ray", "transformers"})
    print(json.dumps(out))
"""


def test_the_workspace_adapter_runs_openhands_workspace_calls_in_the_sandbox(openhands_python, tmp_path):
    run = subprocess.run([str(openhands_python), "-c", WORKSPACE_CHECK, str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {
        "execute": [0, "/workspace\n", False],
        "timeout": True,
        "upload": True,
        "download": "uploaded\n",
        "missing": False,
        "changes": [["ADDED", "new.txt"], ["ADDED", "sub/up.txt"], ["UPDATED", "prioq/heap.py"]],
        "diff": True,
        "terminal": ["/workspace/prioq\n1", 0, False],
        "input": True,
        "heavy": [],  # the runner's imports pull in no torch and no trainer
    }
    assert not (tmp_path / "conversation").exists() or not any((tmp_path / "conversation").iterdir())


def test_a_failed_conversation_is_an_error_with_its_reason_and_no_prediction(openhands_python, tmp_path):
    output = tmp_path / "openhands-wrong"
    with scripted_server("gold", tmp_path) as (base_url, _):
        run = openhands_run(openhands_python, base_url, "policy", output, TASKS[:1])  # a name not served
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"error: 1 conversation(s) failed: {TASKS[0]} (the reasons are in {output / 'trajectories'}); "
        "rerun them with --instances"
    )
    assert (output / "predictions.jsonl").read_text() == ""
    trajectory = json.loads((output / "trajectories" / f"{TASKS[0]}.json").read_text())
    assert trajectory["status"] == "error"
    assert "model 'policy' is not served here; this server serves 'gold'" in trajectory["error"]
    nobody = openhands_run(openhands_python, "http://127.0.0.1:9/v1", "gold", tmp_path / "nobody", TASKS[:1])
    assert nobody.returncode == 2 and nobody.stderr.startswith(
        "error: cannot reach the model server at http://127.0.0.1:9/v1"
    )
    shown = subprocess.run([str(openhands_python), "-m", "evals.openhands_run", "--help"], cwd=REPO,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert shown.stdout.startswith("usage: python -m evals.openhands_run") and "\nexample: " in shown.stdout
    wrong = subprocess.run([sys.executable, "-m", "evals.openhands_run", "--base-url", "http://127.0.0.1:9/v1",
                            "--model", "gold"], cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert wrong.returncode == 2 and wrong.stderr.strip().endswith(
        "run it with .venv-openhands/bin/python (make openhands-venv builds it)"
    )
