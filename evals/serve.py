"""`--engine vllm`: serve the model with `vllm serve` for the run, and talk to it through the
`openai` engine (token ids in and out, so nothing the model produced is re-tokenized).

The server is started before the first instance and stopped when the run ends; its output
goes to `OUTPUT/vllm.log`. vLLM needs a CUDA GPU and the `gpu` extra; without the `vllm`
command this says so and names the alternative (serve the model anywhere, then
`--engine openai --base-url URL`).
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

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
