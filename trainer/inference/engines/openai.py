"""The `openai` engine: any OpenAI-compatible completions server, token ids in and out.

Prompts are sent as token ids to `/v1/completions` (vLLM and SGLang accept a list of ints
as `prompt`), and `return_tokens_as_token_ids` makes the server answer with ids, so nothing
the model produced is ever re-tokenized here. Requests run concurrently up to
`max_concurrency`; each has a timeout, and connection errors, timeouts, 429 and 5xx answers
are retried with exponential backoff. A server that keeps failing raises `EngineError`.
The stdlib's urllib keeps this dependency-free.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from trainer.inference.engines.base import EngineError, Generation

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


class OpenAIEngine:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout_s: float = 600.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_concurrency: int = 16,
        version: int = 0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_concurrency = max_concurrency
        self.version = version

    def _post(self, payload: dict) -> dict:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"}
        last_error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                last_error = f"HTTP {exc.code}: {exc.read()[:300].decode(errors='replace')}"
                if exc.code not in RETRYABLE_STATUS:
                    break
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last_error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        raise EngineError(f"{self.url}: no completion after {attempt + 1} attempt(s): {last_error}")

    def _one(
        self, prompt: list[int], max_new_tokens: int, temperature: float, stop: tuple[int, ...], seed
    ) -> Generation:
        payload = {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": max_new_tokens,
            "temperature": temperature,
            "logprobs": 1,
            "stop_token_ids": list(stop),
            "include_stop_str_in_output": True,
            "skip_special_tokens": False,
            "return_tokens_as_token_ids": True,
        }
        if seed is not None:
            payload["seed"] = seed
        answer = self._post(payload)
        try:
            choice = answer["choices"][0]
            logprobs = choice["logprobs"]
            ids = [int(token.split(":", 1)[1]) for token in logprobs["tokens"]]
            values = [float(v) for v in logprobs["token_logprobs"]]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise EngineError(
                f"{self.url}: answer lacks token ids and logprobs ({exc!r}); the server must support "
                "`return_tokens_as_token_ids` (vLLM, SGLang)"
            ) from None
        finish = "stop" if choice.get("finish_reason") == "stop" else "length"
        return Generation(ids, values, self.version, finish)

    def generate(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        stop_token_ids: tuple[int, ...] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(prompts))) as pool:
            futures = [
                pool.submit(
                    self._one, p, max_new_tokens, temperature, tuple(stop_token_ids), None if seed is None else seed + i
                )
                for i, p in enumerate(prompts)
            ]
            return [f.result() for f in futures]
