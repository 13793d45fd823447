"""`--engine vllm` serves the model for the run; `--predictions` grades another scaffold's output."""

import json
import sys
import urllib.error
import urllib.request

import pytest

from agent_env.tools import TOOL_SCHEMAS, tool_schemas
from evals import serve
from evals.config import EvalConfig
from evals.serve import ModelServer, ScriptedChatModel, ScriptedServer, ScriptError, ServeError, free_port
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
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=60) as response:
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
    ]  # the third instance has no prediction
    lines.append({"instance_id": "not-in-the-dataset", "model_name_or_path": "openhands/qwen", "model_patch": "x"})
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    # Named by --instances without a prediction: one line naming it, nothing graded.
    picked = EvalConfig(
        model="ignored",
        dataset="builtin",
        instances=[t.id for t in tasks],
        output=tmp_path / "picked",
        predictions=path,
    )
    with pytest.raises(ValueError, match=f"output.jsonl: no prediction for {tasks[2].id}: leave them out"):
        evaluate(picked, progress=False)
    # Over the whole dataset: only the predicted instances are graded (not 30, 28 of them empty).
    summary = evaluate(
        EvalConfig(model="ignored", dataset="builtin", output=tmp_path / "run", predictions=path), progress=False
    )
    assert (summary["resolved"], summary["unresolved"], summary["empty_patch"]) == (1, 1, 0)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["instances"] == [tasks[0].id, tasks[1].id]
    records = {
        r["instance_id"]: r for r in map(json.loads, (tmp_path / "run" / "results.jsonl").read_text().split("\n")[:-1])
    }
    assert records[tasks[1].id]["note"] == "the patch does not apply"
    assert json.loads((tmp_path / "run" / "run.json").read_text())["model"] == "openhands/qwen"
    (tmp_path / "bad.jsonl").write_text('{"model_patch": "x"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        evaluate(EvalConfig(model="m", dataset="builtin", output=tmp_path / "bad", predictions=tmp_path / "bad.jsonl"))


def _chat(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _tool(name: str, *properties: str) -> dict:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in properties}, "required": ["command"]}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


OPENHANDS_TOOLS = [
    _tool("terminal", "command", "is_input", "timeout", "reset", "summary", "security_risk"),
    _tool("file_editor", "command", "path", "file_text", "old_str", "new_str", "insert_line", "view_range", "summary"),
    {"type": "function", "function": {"name": "finish", "parameters": {"type": "object",
     "properties": {"message": {}, "summary": {}}, "required": ["message"]}}},
]  # fmt: skip


def test_the_scripted_server_replays_gold_calls_under_the_offered_tool_names(tmp_path):
    task = builtin_tasks()[0]
    model = ScriptedChatModel([task], "gold", style="patch")  # two replies: a bash `git apply`, then finish
    with ScriptedServer(model, requests_log=tmp_path / "requests.jsonl") as server:
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=60) as response:
            assert json.loads(response.read())["data"][0]["id"] == "gold"
        user = {"role": "user", "content": [{"type": "text", "text": f"<issue>\n{task.problem_statement}\n</issue>"}]}
        status, reply = _chat(server.base_url, {"model": "gold", "messages": [user], "tools": OPENHANDS_TOOLS})
        assert status == 200 and reply["choices"][0]["finish_reason"] == "tool_calls"
        call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "terminal" and "git apply /tmp/gold.patch" in json.loads(call["arguments"])["command"]

        said = [user, {"role": "assistant", "content": None}, {"role": "tool", "content": "ok"}]
        ours = [{"type": "function", "function": tool["function"]} for tool in tool_schemas(list(TOOL_SCHEMAS))]
        status, reply = _chat(server.base_url, {"model": "gold", "messages": said, "tools": ours})
        call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
        assert (status, call["name"], json.loads(call["arguments"])) == (200, "finish", {"message": "Applied the fix."})

        done = [*said, {"role": "assistant", "content": None}, {"role": "tool", "content": "ok"}]
        status, reply = _chat(server.base_url, {"model": "gold", "messages": done, "tools": ours})
        assert (status, reply["choices"][0]["finish_reason"]) == (200, "stop")  # past the script: plain text

        errors = [
            ({"model": "gpt-4", "messages": [user]}, "model 'gpt-4' is not served here; this server serves 'gold'"),
            ({"model": "gold", "messages": [{"role": "user", "content": "hi"}]},
             "the user messages contain no known task's issue; the scripted model needs one"),
            ({"model": "gold", "messages": [user], "tools": OPENHANDS_TOOLS[1:]},
             "the script's next call is 'execute_bash', but the request offers no tool for it "
             "(offered: file_editor, finish)"),
            ({"model": "gold", "messages": [user], "tools": [_tool("terminal", "cmd")]},
             "the script's 'execute_bash' call does not fit the offered 'terminal' tool's schema "
             "(unknown arguments: ['command']; missing required: [])"),
            ({"model": "gold", "messages": [user], "stream": True},
             "streaming is not supported by the scripted model; send stream=false"),
        ]  # fmt: skip
        for body, message in errors:
            assert _chat(server.base_url, body) == (
                400, {"error": {"message": message, "type": "invalid_request_error", "code": 400}}
            )  # fmt: skip
    assert len((tmp_path / "requests.jsonl").read_text().splitlines()) == 3 + len(errors)


def test_the_empty_scripted_model_only_finishes():
    task = builtin_tasks()[0]
    reply = ScriptedChatModel([task], "empty").reply(
        {"model": "empty", "messages": [{"role": "user", "content": task.problem_statement}], "tools": OPENHANDS_TOOLS}
    )
    call = reply["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("finish", {"message": "Done."})
    with pytest.raises(ScriptError, match="unknown scripted model 'oracle'; use one of: gold, empty"):
        ScriptedChatModel([task], "oracle")
