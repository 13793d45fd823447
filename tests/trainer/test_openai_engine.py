"""The openai engine against a local server that speaks vLLM's completions dialect
(loopback only). The server is a test double of the *server*; the engine is real."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainer.inference.engines import EngineError
from trainer.inference.engines.openai import OpenAIEngine


class FakeServer:
    def __init__(self):
        self.requests: list[dict] = []
        self.failures = 0  # answer this many requests with 503 first
        self.delay_s = 0.0
        self.answering = threading.Event()  # cleared: each request waits, unanswered, until close()
        self.answering.set()
        self.hold_until_peak = 0  # hold each request until this many were in flight at once
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.peaked = threading.Condition(self.lock)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    owner.requests.append(payload)
                    failing = owner.failures > 0
                    owner.failures -= 1
                    owner.active += 1
                    owner.peak = max(owner.peak, owner.active)
                    owner.peaked.notify_all()
                    # An upper bound only (once): a client that never sends them together fails on `peak`.
                    if not owner.peaked.wait_for(lambda: owner.peak >= owner.hold_until_peak, timeout=60):
                        owner.hold_until_peak = 0
                try:
                    time.sleep(owner.delay_s)
                    owner.answering.wait(timeout=120)
                finally:
                    # Done before the answer is sent: a client that has its answer may send
                    # the next request before this thread would otherwise get to run again.
                    with owner.lock:
                        owner.active -= 1
                if failing:
                    self.send_response(503)
                    self.end_headers()
                    self.wfile.write(b"overloaded")
                    return
                # Echo: the completion is the prompt's last tokens plus one, reversed.
                ids = [t + 1 for t in payload["prompt"][-payload["max_tokens"] :]][::-1]
                body = {
                    "choices": [
                        {
                            "finish_reason": "length",
                            "logprobs": {
                                "tokens": [f"token_id:{i}" for i in ids],
                                "token_logprobs": [-0.5] * len(ids),
                            },
                        }
                    ]
                }
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.answering.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def test_token_ids_in_and_out(server):
    engine = OpenAIEngine(server.url, "m", backoff_s=0.01)
    out = engine.generate([[1, 2, 3], [7, 8]], max_new_tokens=2, temperature=0.7, stop_token_ids=(9,), seed=5)
    assert [g.token_ids for g in out] == [[4, 3], [9, 8]]
    assert out[0].logprobs == [-0.5, -0.5] and out[0].finish_reason == "length"
    sent = sorted(server.requests, key=lambda r: r["prompt"][0])
    assert sent[0]["prompt"] == [1, 2, 3] and sent[0]["return_tokens_as_token_ids"] is True
    assert sent[0]["stop_token_ids"] == [9] and sent[0]["logprobs"] == 1
    assert {r["seed"] for r in sent} == {5, 6}


def test_overload_is_retried(server):
    server.failures = 2
    engine = OpenAIEngine(server.url, "m", backoff_s=0.01, max_retries=3)
    assert engine.generate([[1]], max_new_tokens=1)[0].token_ids == [2]
    assert len(server.requests) == 3


def test_persistent_failure_raises_with_the_reason(server):
    server.failures = 10
    engine = OpenAIEngine(server.url, "m", backoff_s=0.01, max_retries=2)
    with pytest.raises(EngineError, match="3 attempt.*HTTP 503"):
        engine.generate([[1]], max_new_tokens=1)


def test_timeouts_and_dead_servers_raise():
    engine = OpenAIEngine("http://127.0.0.1:9/v1", "m", backoff_s=0.01, max_retries=1, timeout_s=1)
    with pytest.raises(EngineError, match="2 attempt"):
        engine.generate([[1]], max_new_tokens=1)


def test_slow_server_times_out(server):
    # No answer until the test ends (not a 1 s delay: a client starved for a second on a
    # loaded machine would have found the answer waiting and not timed out).
    server.answering.clear()
    engine = OpenAIEngine(server.url, "m", backoff_s=0.01, max_retries=0, timeout_s=0.2)
    with pytest.raises(EngineError, match="1 attempt"):
        engine.generate([[1]], max_new_tokens=1)


def test_concurrency_is_limited(server):
    # The server holds the first requests until two are in flight (not for a while: on a busy
    # machine the second could come after the first was answered), then answers slowly.
    server.hold_until_peak = 2
    server.delay_s = 0.1
    engine = OpenAIEngine(server.url, "m", max_concurrency=2)
    engine.generate([[i] for i in range(1, 7)], max_new_tokens=1)
    assert server.peak == 2
