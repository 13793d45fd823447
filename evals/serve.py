"""Model servers: `vllm serve` for a run, and a scripted chat-completions server.

`--engine vllm`: serve the model with `vllm serve` for the run, and talk to it through the
`openai` engine (token ids in and out, so nothing the model produced is re-tokenized).
The server is started before the first instance and stopped when the run ends; its output
goes to `OUTPUT/vllm.log`. vLLM needs a CUDA GPU and the `gpu` extra; without the `vllm`
command this says so and names the alternative (serve the model anywhere, then
`--engine openai --base-url URL`).

`python -m evals.serve --scripted gold --dataset builtin --port 8000`: an OpenAI-compatible
server (`/v1/models`, `/v1/chat/completions` with `tools`) whose "model" replays each task's
gold actions (`agent_env.gold.gold_actions`) as tool calls, one call per reply, named and
shaped by the tools the request offers: our `execute_bash` / `str_replace_editor` / `finish`,
or OpenHands' `terminal` / `file_editor` / `finish`. It is the scripted model of another
scaffold's end-to-end test (tests/evals/test_openhands.py): what the scaffold submits must
resolve what the gold patch resolves. `--scripted empty` only calls `finish` (resolves none).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 1800.0  # a large model loads for minutes
POLL_S = 2.0


class ServeError(RuntimeError):
    """The model server could not be started; the message says why and where its log is."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_command(model: str, port: int, *, seed: int, extra_args: str = "") -> list[str]:
    """`vllm serve` for `model`, answering as `model` on 127.0.0.1:`port`."""
    executable = shutil.which("vllm")
    if executable is None:
        raise ServeError(
            "--engine vllm needs the `vllm` command (a CUDA GPU and pip install 'agentic-rl[gpu]'); "
            "or serve the model elsewhere (`vllm serve MODEL`) and use --engine openai --base-url URL"
        )
    return [executable, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", model,
            "--seed", str(seed), *shlex.split(extra_args)]  # fmt: skip


class ModelServer:
    """A model server process for the length of a `with` block; `base_url` is its API."""

    def __init__(self, command: list[str], port: int, log_path: Path, *, ready_timeout_s: float = READY_TIMEOUT_S):
        self.command, self.port, self.log_path = command, port, Path(log_path)
        self.ready_timeout_s = ready_timeout_s
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> ModelServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise ServeError(f"the model server exited with {self._process.returncode}: {self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet
            time.sleep(POLL_S)
        raise ServeError(f"the model server was not ready after {self.ready_timeout_s:.0f} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        lines = self.log_path.read_text(errors="replace").strip().splitlines()[-5:] if self.log_path.exists() else []
        return " | ".join(lines)[-600:] + f" (log: {self.log_path})"

    def close(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL after 30 s."""
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


# -- the scripted chat-completions server -------------------------------------------------

SCRIPTED_MODELS = ("gold", "empty")
# The names a tool of ours goes by in the scaffolds that offer it: ours (OpenHands CodeAct's
# older names) and OpenHands SDK's (openhands-tools' TerminalTool, FileEditorTool; the SDK's
# built-in FinishTool). The request's `tools` decide which one a reply uses.
TOOL_ALIASES = {
    "execute_bash": ("execute_bash", "terminal"),
    "str_replace_editor": ("str_replace_editor", "file_editor"),
    "finish": ("finish",),
}


class ScriptError(ValueError):
    """A request the scripted model cannot answer; the message says why (HTTP 400)."""


def _text(content: Any) -> str:
    """The text of a chat message's content: a string, or a list of parts (`{"type": "text"}`)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


class ScriptedChatModel:
    """Answers chat completions for a set of tasks with their gold tool calls.

    The task is the one whose problem statement the request's user messages contain; the
    reply is its script's call number k, k being the number of assistant messages already in
    the conversation (so a scaffold gets one call per reply and the server keeps no state).
    Past the end of the script it answers in plain text, which ends a scaffold's turn."""

    def __init__(self, tasks: list, name: str = "gold", *, style: str = "auto", workdir: str = "/workspace") -> None:
        from agent_env.gold import gold_actions
        from agent_env.tools import ToolCall, parse_tool_calls

        if name not in SCRIPTED_MODELS:
            raise ScriptError(f"unknown scripted model {name!r}; use one of: {', '.join(SCRIPTED_MODELS)}")
        self.name = name
        self.scripts: dict[str, tuple[str, list]] = {}  # task id -> (problem statement, calls)
        finish = ToolCall("finish", {"message": "Done."})
        for task in tasks:
            if name == "empty":
                calls = [finish]
            else:
                actions = gold_actions(task, workdir, style)
                calls = [call for action in actions for call in parse_tool_calls(action, task.tools)]
            self.scripts[task.id] = (task.problem_statement.strip(), calls)

    def task_of(self, messages: list[dict]) -> str:
        said = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "user")
        found = [task_id for task_id, (problem, _) in self.scripts.items() if problem and problem in said]
        if len(found) != 1:
            which = "no" if not found else f"{len(found)} ({', '.join(found)})"
            raise ScriptError(f"the user messages contain {which} known task's issue; the scripted model needs one")
        return found[0]

    def reply(self, request: dict) -> dict:
        """The chat.completion object answering `request` (the JSON body of a POST)."""
        if request.get("model") != self.name:
            raise ScriptError(f"model {request.get('model')!r} is not served here; this server serves {self.name!r}")
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ScriptError("'messages' must be a non-empty list")
        task_id = self.task_of(messages)
        _, calls = self.scripts[task_id]
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if turn < len(calls):
            name, arguments = self._as_offered(calls[turn], request.get("tools") or [])
            message["tool_calls"] = [
                {
                    "id": f"call_{task_id[:24]}_{turn}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ]
            finish_reason = "tool_calls"
        else:
            message["content"] = "The script has ended: nothing more to do."
            finish_reason = "stop"
        log.info("%s turn %d: %s", task_id, turn, message.get("tool_calls", [{}])[0].get("function", {}).get("name"))
        return {
            "id": f"chatcmpl-{task_id[:24]}-{turn}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    @staticmethod
    def _as_offered(call, tools: list[dict]) -> tuple[str, dict]:
        """The call under the name the request's tools give it, with arguments its schema takes."""
        offered = {t["function"]["name"]: t["function"] for t in tools if isinstance(t, dict) and "function" in t}
        name = next((alias for alias in TOOL_ALIASES.get(call.name, (call.name,)) if alias in offered), None)
        if name is None:
            raise ScriptError(
                f"the script's next call is {call.name!r}, but the request offers no tool for it "
                f"(offered: {', '.join(offered) or 'none'})"
            )
        schema = offered[name].get("parameters") or {}
        properties = schema.get("properties") or {}
        unknown = [key for key in call.arguments if key not in properties]
        missing = [key for key in schema.get("required", []) if key not in call.arguments]
        if unknown or missing:
            raise ScriptError(
                f"the script's {call.name!r} call does not fit the offered {name!r} tool's schema "
                f"(unknown arguments: {unknown}; missing required: {missing})"
            )
        return name, dict(call.arguments)


class ScriptedServer:
    """A ThreadingHTTPServer answering `/v1/models` and `/v1/chat/completions` with a
    `ScriptedChatModel`, on 127.0.0.1:`port` (0: a free one), for a `with` block."""

    def __init__(
        self, model: ScriptedChatModel, port: int = 0, host: str = "127.0.0.1", *, requests_log: Path | None = None
    ) -> None:
        """`requests_log`: append every chat request's JSON body to this file (one line each)."""
        self.model = model
        handler = type("Handler", (_ScriptedHandler,), {"model": model, "requests_log": requests_log,
                                                        "lock": threading.Lock()})  # fmt: skip
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://{host}:{self.port}/v1"
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _ScriptedHandler(BaseHTTPRequestHandler):
    model: ScriptedChatModel
    requests_log: Path | None
    lock: threading.Lock

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        log.warning("%s %s: %s", status, self.path, message)
        self._send(status, {"error": {"message": message, "type": "invalid_request_error", "code": status}})

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.model.name, "object": "model"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}; this server answers /v1/chat/completions")
            return
        try:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.requests_log is not None:
                with self.lock, self.requests_log.open("ab") as f:
                    f.write(body.replace(b"\n", b" ") + b"\n")
            request = json.loads(body or b"{}")
            if request.get("stream"):
                raise ScriptError("streaming is not supported by the scripted model; send stream=false")
            self._send(200, self.model.reply(request))
        except (ScriptError, json.JSONDecodeError) as exc:
            self._error(400, str(exc))

    def log_message(self, format: str, *args: Any) -> None:  # http.server writes to stderr otherwise
        log.debug(format, *args)


def main(argv: list[str] | None = None) -> int:
    """`python -m evals.serve --scripted gold|empty`: serve the scripted model until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m evals.serve",
        description="Serve a scripted model over the OpenAI chat-completions API: each task's gold actions as "
        "tool calls, one per reply (gold), or only finish (empty), under the tool names the request offers.",
        epilog="example: python -m evals.serve --scripted gold --dataset builtin --style explore --port 8000",
    )
    parser.add_argument("--scripted", choices=SCRIPTED_MODELS, required=True, help="the model: gold actions or none")
    parser.add_argument("--dataset", default="builtin", help="task source (as evals.swe's --dataset)")
    parser.add_argument("--instances", default="", help="comma-separated task ids (all when empty)")
    parser.add_argument("--style", default="auto", choices=("auto", "edit", "patch", "explore"), help="gold style")
    parser.add_argument("--workdir", default="/workspace", help="the repository's path in the agent's sandbox")
    parser.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--requests-log", type=Path, help="append every chat request (JSON, one a line) to this file")
    parser.add_argument("--repo-cache", type=Path, help="folder of git clones SWE-bench rows are made from")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from tasks import TaskError, load_task_set

    try:
        ids = [i for i in args.instances.split(",") if i.strip()] or None
        tasks = load_task_set(args.dataset, ids, repo_cache=args.repo_cache)
        model = ScriptedChatModel(tasks, args.scripted, style=args.style, workdir=args.workdir)
    except (TaskError, ScriptError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server = ScriptedServer(model, args.port, requests_log=args.requests_log)
    # The test and the README wait for this line: the URL to point a scaffold at.
    print(f"serving {model.name!r} for {len(tasks)} task(s) at {server.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.httpd.serve_forever()
    server.httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
