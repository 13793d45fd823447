"""`--engine vllm` serves the model for the run; `--predictions` grades another scaffold's output."""

import json
import sys
import urllib.request

import pytest

from evals import serve
from evals.config import EvalConfig
from evals.serve import ModelServer, ServeError, free_port
from evals.swe import evaluate, main
from tasks import builtin_tasks
from tests.conftest import needs_bwrap

# An OpenAI-compatible server's readiness endpoint, as `vllm serve` answers it.
STAND_IN_SERVER = """
import http.server, json, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_model_server_waits_until_ready_and_stops_with_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(serve, "POLL_S", 0.1)
    port = free_port()
    server = ModelServer([sys.executable, "-c", STAND_IN_SERVER, str(port)], port, tmp_path / "server.log")
    with server:
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=5) as response:
            assert json.loads(response.read())["data"][0]["id"] == "m"
        process = server._process
    assert process.poll() is not None  # stopped when the block ended


def test_a_server_that_dies_says_why_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(serve, "POLL_S", 0.1)
    command = [sys.executable, "-c", "import sys; print('CUDA is not available'); sys.exit(3)"]
    server = ModelServer(command, free_port(), tmp_path / "server.log")
    with pytest.raises(ServeError, match=r"exited with 3: CUDA is not available"), server:
        pass


def test_engine_vllm_without_vllm_names_the_alternative(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(serve.shutil, "which", lambda name: None)  # as on a machine without vLLM
    first = builtin_tasks()[0].id
    code = main(["--model", "tiny", "--engine", "vllm", "--instances", first, "--output", str(tmp_path)])
    assert code == 2 and "--engine openai --base-url" in capsys.readouterr().err


@needs_bwrap
def test_predictions_of_another_scaffold_are_graded_like_a_run(tmp_path):
    tasks = builtin_tasks()[:3]
    lines = [
        {"instance_id": tasks[0].id, "model_name_or_path": "openhands/qwen", "model_patch": tasks[0].gold_patch},
        {"instance_id": tasks[1].id, "model_name_or_path": "openhands/qwen", "model_patch": "diff --git a/x b/x\n"},
    ]  # the third instance has no prediction: an empty patch
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    summary = evaluate(
        EvalConfig(
            model="ignored",
            dataset="builtin",
            instances=[t.id for t in tasks],
            output=tmp_path / "run",
            predictions=path,
        ),
        progress=False,
    )
    assert (summary["resolved"], summary["unresolved"], summary["empty_patch"]) == (1, 1, 1)
    records = {
        r["instance_id"]: r for r in map(json.loads, (tmp_path / "run" / "results.jsonl").read_text().split("\n")[:-1])
    }
    assert records[tasks[1].id]["note"] == "the patch does not apply"
    assert json.loads((tmp_path / "run" / "run.json").read_text())["model"] == "openhands/qwen"
    (tmp_path / "bad.jsonl").write_text('{"model_patch": "x"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        evaluate(EvalConfig(model="m", dataset="builtin", output=tmp_path / "bad", predictions=tmp_path / "bad.jsonl"))
